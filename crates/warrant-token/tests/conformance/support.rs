//! Keys and token builders shared by the conformance tests.

use std::sync::OnceLock;

use jiff::Timestamp;
use warrant_token::{Binding, Claims, KeyType, NewToken, ObjectRef, SigningKey, Verifier};

pub(crate) const ISSUER: &str = "https://warrant.test";
pub(crate) const NOW: i64 = 1_800_000_000;

pub(crate) fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

/// One key of each generated type, made once per test run (RSA generation is slow).
pub(crate) fn key(key_type: KeyType) -> &'static SigningKey {
    static KEYS: OnceLock<Vec<(KeyType, SigningKey)>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        [
            KeyType::Rsa2048,
            KeyType::P256,
            KeyType::P384,
            KeyType::P521,
        ]
        .into_iter()
        .map(|t| (t, SigningKey::generate(t).unwrap()))
        .collect()
    });
    &keys.iter().find(|(t, _)| *t == key_type).unwrap().1
}

pub(crate) fn rsa() -> &'static SigningKey {
    key(KeyType::Rsa2048)
}

/// Claims of an unbound one-hour token issued at `NOW` for audience `api`.
pub(crate) fn claims() -> Claims {
    Claims::new(NewToken {
        issuer: ISSUER,
        namespace: "ns",
        service_account: ObjectRef::new("app", "sa-uid"),
        audiences: vec![ISSUER.into()],
        binding: Binding::None,
        issued_at: NOW,
        expires_at: NOW + 3600,
        warn_after: None,
        jti: "4d6a8b0e-4a47-4e3f-9a43-3f4f1e1c2b7a".into(),
    })
}

/// A verifier for `ISSUER`, whose API audience is the issuer, trusting `keys`.
pub(crate) fn verifier(keys: &[&SigningKey]) -> Verifier {
    Verifier::new(
        vec![ISSUER.into()],
        vec![ISSUER.into()],
        keys.iter().map(|k| k.verifying_key().clone()).collect(),
    )
}
