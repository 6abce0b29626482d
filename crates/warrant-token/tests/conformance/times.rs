//! spec §9.4: every time boundary, with 60 s of leeway, to the second (and below).

use jiff::{SignedDuration, Timestamp};
use warrant_token::{Claims, TokenError};

use crate::support::{self, NOW, now};

fn check(edit: impl FnOnce(&mut Claims), at: Timestamp) -> Result<(), TokenError> {
    let mut claims = support::claims();
    edit(&mut claims);
    let token = support::rsa().sign(&claims).unwrap();
    support::verifier(&[support::rsa()])
        .verify(&token, &[], at)
        .map(|_| ())
}

/// A named change to the claims and the outcome it must have at `NOW`.
type Case = (&'static str, fn(&mut Claims), Result<(), TokenError>);

#[test]
fn boundaries() {
    use TokenError::*;
    let cases: &[Case] = &[
        ("exp now-60 accepted", |c| c.exp = Some(NOW - 60), Ok(())),
        (
            "exp now-61 rejected",
            |c| c.exp = Some(NOW - 61),
            Err(Expired),
        ),
        ("exp now accepted", |c| c.exp = Some(NOW), Ok(())),
        ("nbf now+60 accepted", |c| c.nbf = Some(NOW + 60), Ok(())),
        (
            "nbf now+61 rejected",
            |c| c.nbf = Some(NOW + 61),
            Err(NotValidYet),
        ),
        (
            "iat now+60 accepted",
            |c| {
                c.nbf = None;
                c.iat = Some(NOW + 60);
            },
            Ok(()),
        ),
        (
            "iat now+61 rejected",
            |c| {
                c.nbf = None;
                c.iat = Some(NOW + 61);
            },
            Err(IssuedInTheFuture),
        ),
        (
            "nbf is checked before exp",
            |c| {
                c.nbf = Some(NOW + 61);
                c.exp = Some(NOW - 61);
            },
            Err(NotValidYet),
        ),
        (
            "exp is checked before iat",
            |c| {
                c.nbf = None;
                c.iat = Some(NOW + 61);
                c.exp = Some(NOW - 61);
            },
            Err(Expired),
        ),
        (
            "absent nbf and iat are not checked",
            |c| {
                c.nbf = None;
                c.iat = None;
            },
            Ok(()),
        ),
        (
            "absent exp is rejected (stricter than kube)",
            |c| c.exp = None,
            Err(MissingExpiry),
        ),
    ];
    for (name, edit, expected) in cases {
        assert_eq!(&check(edit, now()), expected, "{name}");
    }
}

#[test]
fn sub_second_precision_matches_go() {
    // go-jose compares time.Time values: at NOW + 0.5 s, an exp of NOW - 60 is 0.5 s too old.
    let half = now() + SignedDuration::from_millis(500);
    assert_eq!(
        check(|c| c.exp = Some(NOW - 60), half),
        Err(TokenError::Expired)
    );
    // …and an nbf of NOW + 61 is still 0.5 s too early.
    assert_eq!(
        check(|c| c.nbf = Some(NOW + 61), half),
        Err(TokenError::NotValidYet)
    );
    assert_eq!(check(|c| c.nbf = Some(NOW + 60), half), Ok(()));
}

#[test]
fn messages_are_kubes() {
    assert_eq!(
        TokenError::Expired.to_string(),
        "service account token has expired"
    );
    assert_eq!(
        TokenError::NotValidYet.to_string(),
        "service account token is not valid yet"
    );
    assert_eq!(
        TokenError::IssuedInTheFuture.to_string(),
        "service account token is issued in the future"
    );
}
