//! spec §3.2 and §9.5: audience intersection, defaults and the exact error message.

use warrant_token::{Claims, TokenError, Verifier};

use crate::support::{self, ISSUER, now};

fn verify(token_aud: &[&str], api: &[&str], requested: &[&str]) -> Result<Vec<String>, TokenError> {
    let mut claims: Claims = support::claims();
    claims.aud = token_aud.iter().map(|s| s.to_string()).collect();
    let token = support::rsa().sign(&claims).unwrap();
    let verifier = Verifier::new(
        vec![ISSUER.into()],
        api.iter().map(|s| s.to_string()).collect(),
        vec![support::rsa().verifying_key().clone()],
    );
    let requested: Vec<String> = requested.iter().map(|s| s.to_string()).collect();
    verifier
        .verify(&token, &requested, now())
        .map(|v| v.audiences)
}

#[test]
fn intersection_keeps_requested_order_and_duplicates() {
    assert_eq!(
        verify(&["a", "b"], &["api"], &["b", "x", "a", "b"]).unwrap(),
        ["b", "a", "b"]
    );
    assert_eq!(verify(&["a"], &["api"], &["a"]).unwrap(), ["a"]);
}

#[test]
fn empty_request_means_api_audiences() {
    assert_eq!(
        verify(&["api", "other"], &["api", "api2"], &[]).unwrap(),
        ["api"]
    );
    assert_eq!(
        verify(&["api2", "api"], &["api", "api2"], &[]).unwrap(),
        ["api", "api2"]
    );
}

#[test]
fn token_without_aud_counts_as_api_audiences() {
    assert_eq!(verify(&[], &["api"], &[]).unwrap(), ["api"]);
    assert_eq!(verify(&[], &["api"], &["api", "x"]).unwrap(), ["api"]);
    assert!(verify(&[], &["api"], &["x"]).is_err());
}

#[test]
fn matching_is_exact() {
    assert!(verify(&["https://a/"], &["api"], &["https://a"]).is_err());
    assert!(verify(&["Vault"], &["api"], &["vault"]).is_err());
}

/// kube skips the audience check when it has no API audiences; warrant refuses to start without
/// them, and a verifier built without any accepts no token rather than every one.
#[test]
fn no_api_audiences_accepts_nothing() {
    assert!(verify(&["a"], &[], &["b"]).is_err());
    assert!(verify(&["a"], &[], &[]).is_err());
    assert!(verify(&[], &[], &[]).is_err());
    assert_eq!(verify(&["a"], &[], &["a"]).unwrap(), ["a"]);
}

#[test]
fn error_message_is_kubes() {
    let err = verify(&["foo"], &["https://kubernetes.default.svc"], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"token audiences ["foo"] is invalid for the target audiences ["https://kubernetes.default.svc"]"#
    );
    let err = verify(&["a", "b \"q\""], &["api"], &["c", "d"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"token audiences ["a" "b \"q\""] is invalid for the target audiences ["c" "d"]"#
    );
    // A token without aud reports the API audiences it was taken to have.
    let err = verify(&[], &["api"], &["x"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"token audiences ["api"] is invalid for the target audiences ["x"]"#
    );
}
