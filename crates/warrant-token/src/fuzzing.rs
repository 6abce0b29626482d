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

/// The request the DPoP targets' proofs are checked for.
const PROOF_URI: &str = "https://warrant.fuzz/api/v1/namespaces/ns/serviceaccounts/app/token";

/// Checks `data` as a DPoP proof (the `DPoP` header a caller sends) for a TokenRequest and for a
/// bound token's request: never a panic, and the same answer twice (no hidden state).
pub fn dpop_proof(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let token = "e30.e30.c2ln";
    for request in [
        crate::ProofRequest {
            method: "POST",
            uri: PROOF_URI,
            access_token: None,
            bound_to: None,
        },
        crate::ProofRequest {
            method: "GET",
            uri: PROOF_URI,
            access_token: Some(token),
            bound_to: Some("NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"),
        },
    ] {
        let first = crate::verify_proof(text, &request, now(), 60);
        let second = crate::verify_proof(text, &request, now(), 60);
        assert_eq!(first, second, "checking the same proof changed its answer");
    }
}

/// Signs `data` as the claims of a proof whose header is right (`dpop+jwt`, ES256, the fixture
/// key's `jwk`), then checks: never a panic, whatever the claims; a proof that passes names the
/// request and carries the key's thumbprint; and with its signature altered it never passes.
pub fn signed_proof(data: &[u8]) {
    let fixture = &*FIXTURE;
    let Some(key) = fixture.keys.first() else {
        return;
    };
    let jwk: serde_json::Value =
        serde_json::from_str(key.verifying_key().jwk_json()).expect("the fixture's JWK is JSON");
    let header = serde_json::json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk});
    use base64::Engine as _;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let input = format!("{}.{}", encode(header.to_string().as_bytes()), encode(data));
    let signature = key
        .sign_bytes(input.as_bytes())
        .expect("signing never fails");
    let proof = format!("{input}.{}", encode(&signature));
    let request = crate::ProofRequest {
        method: "POST",
        uri: PROOF_URI,
        access_token: None,
        bound_to: None,
    };
    if let Ok(verified) = crate::verify_proof(&proof, &request, now(), 60) {
        assert_eq!(verified.jkt, crate::jwk_thumbprint(key.verifying_key()));
    }
    assert!(
        crate::verify_proof(&tamper_signature(&proof), &request, now(), 60).is_err(),
        "a proof with an altered signature passed"
    );
}
