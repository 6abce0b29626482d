//! Entry points for the fuzz targets (`fuzz/`) and their corpus replay; not an API.
//!
//! Each function takes arbitrary bytes and asserts what must hold for every input, beyond "no
//! panic". They panic on a violation: that is how a fuzzer or a test learns of it.
#![allow(clippy::panic, clippy::expect_used)]

use std::sync::LazyLock;

use jiff::Timestamp;

use crate::{KeyType, SigningKey, Verifier};

/// The issuer and audience the fixture's verifier accepts.
pub const ISSUER: &str = "https://warrant.fuzz";
/// The API audience of the fixture's verifier.
pub const AUDIENCE: &str = "https://warrant.fuzz";
/// The fixed "now" tokens are checked at (2027-01-15T08:00:00Z).
pub const NOW_SECONDS: i64 = 1_800_000_000;

struct Fixture {
    keys: Vec<SigningKey>,
    verifier: Verifier,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let keys: Vec<SigningKey> = [KeyType::P256, KeyType::Rsa2048]
        .into_iter()
        .map(|t| SigningKey::generate(t).expect("generate a fuzzing key"))
        .collect();
    let verifier = Verifier::new(
        vec![ISSUER.to_owned()],
        vec![AUDIENCE.to_owned()],
        keys.iter().map(|k| k.verifying_key().clone()).collect(),
    );
    Fixture { keys, verifier }
});

fn now() -> Timestamp {
    Timestamp::from_second(NOW_SECONDS).expect("a valid fixed time")
}

/// Verifies `data` as a token string: the answer is the same twice (verification has no hidden
/// state), and a token that verifies re-verifies to the same user.
pub fn token(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let fixture = &*FIXTURE;
    let first = fixture.verifier.verify(text, &[], now());
    let second = fixture.verifier.verify(text, &[], now());
    match (&first, &second) {
        (Ok(a), Ok(b)) => assert_eq!(a.user_info(), b.user_info()),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        _ => panic!("verification of the same token changed its answer"),
    }
}

/// Signs `data` (after a first byte choosing the key) as a token's payload with a key the
/// verifier trusts, then checks: verification never panics, whatever the claims; and a token
/// whose signature was altered never verifies, whatever it says.
pub fn signed_payload(data: &[u8]) {
    let Some((&choice, payload)) = data.split_first() else {
        return;
    };
    let fixture = &*FIXTURE;
    let Some(key) = fixture.keys.get(usize::from(choice) % fixture.keys.len()) else {
        return;
    };
    let token = key.sign_payload(payload).expect("signing never fails");
    let verified = fixture.verifier.verify(&token, &[], now());
    if let Ok(v) = &verified {
        // Whatever the payload held, a verified token names our issuer.
        assert_eq!(v.claims.iss, ISSUER);
    }
    let tampered = tamper_signature(&token);
    assert!(
        fixture.verifier.verify(&tampered, &[], now()).is_err(),
        "a token with an altered signature verified"
    );
}

/// Flips the first character of the signature segment between two base64url letters that
/// differ in the first decoded byte's high bits.
fn tamper_signature(token: &str) -> String {
    let Some(dot) = token.rfind('.') else {
        return token.to_owned();
    };
    let (head, signature) = token.split_at(dot + 1);
    let mut chars = signature.chars();
    let first = chars
        .next()
        .map_or('A', |c| if c == 'A' { 'g' } else { 'A' });
    format!("{head}{first}{}", chars.as_str())
}
