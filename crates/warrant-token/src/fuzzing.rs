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

/// Reads `data` as a token's `cnf` claim with the one parser of it ([`crate::Cnf`]) and checks
/// it against a plain reading: a token is bound exactly when `cnf` is a non-empty object of
/// `jkt` and `x5t#S256` strings, each once, and then to those values; anything else is
/// unusable, never a bearer token. The claims reader reads the same; written back and read
/// again, a binding is itself and an unusable claim stays unusable; and the one check passes a
/// binding only with the evidence for every member of it.
pub fn cnf(data: &[u8]) {
    use crate::Cnf;
    use serde_json::Value;

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plain) = serde_json::from_str::<Value>(text) else {
        // Not JSON, or JSON serde_json's own Value refuses (an object keyed by one of its
        // private names, "$serde_json::private::RawValue"): never a binding.
        assert!(
            !matches!(serde_json::from_str::<Cnf>(text), Ok(Cnf::Binds(_))),
            "cnf bound a token to what the plain reading refuses"
        );
        return;
    };
    let read: Cnf = serde_json::from_str(text).expect("cnf reads every JSON value");

    // The claims reader: the same `cnf` (unless nesting one level deeper is beyond serde_json's
    // recursion limit).
    let claims_text = format!(r#"{{"iss":"{ISSUER}","cnf":{text}}}"#);
    if let Ok(claims) = serde_json::from_str::<crate::Claims>(&claims_text) {
        assert_eq!(
            claims.cnf.as_ref(),
            Some(&read),
            "the claims read cnf otherwise"
        );
    }

    // The plain reading, with repeated members found by the strict claims parser.
    let repeated = match crate::parse_claims_strictly(claims_text.as_bytes()) {
        Ok(_) => false,
        Err(crate::ClaimsJsonError::DuplicateKey { .. }) => true,
        Err(_) => return,
    };
    let expected = plain_binding(&plain, repeated);
    match (&read, &expected) {
        (Cnf::Binds(bound), Some(expected)) => assert_eq!(bound, expected),
        (Cnf::Unusable(_), None) => {}
        _ => panic!("cnf read {read:?}, the plain reading {expected:?}"),
    }

    // Written back and read again.
    let written = serde_json::to_string(&read).expect("a cnf always serializes");
    let again: Cnf = serde_json::from_str(&written).expect("a written cnf reads");
    match &read {
        Cnf::Binds(_) => assert_eq!(again, read, "a binding changed on the way back"),
        Cnf::Unusable(_) => assert!(
            matches!(again, Cnf::Unusable(_)),
            "an unusable cnf became {again:?}"
        ),
    }

    check_binding_evidence(&read);
}

/// The binding the plain reading finds in `cnf` (with `repeated` members: none): a non-empty
/// object of `jkt` and `x5t#S256` strings.
fn plain_binding(plain: &serde_json::Value, repeated: bool) -> Option<crate::Confirmation> {
    use crate::{CNF_JKT, CNF_X5T_S256, Confirmation};
    use serde_json::Value;

    match plain {
        Value::Object(members)
            if !repeated
                && !members.is_empty()
                && members.iter().all(|(name, value)| {
                    (name == CNF_JKT || name == CNF_X5T_S256) && value.is_string()
                }) =>
        {
            let member = |name: &str| members.get(name).and_then(Value::as_str).map(str::to_owned);
            Some(Confirmation {
                jkt: member(CNF_JKT),
                x5t_s256: member(CNF_X5T_S256),
            })
        }
        _ => None,
    }
}

/// The one check on `read`: all the evidence proves a binding; without any one part it fails;
/// an unusable claim fails whatever comes with it.
fn check_binding_evidence(read: &crate::Cnf) {
    use crate::{BindingError, CertificateEvidence, Cnf, Evidence, VerifiedProof, check_binding};

    let proof_of = |jkt: &str| {
        Ok(VerifiedProof {
            jkt: jkt.to_owned(),
            jti: "fuzz".to_owned(),
            iat: NOW_SECONDS,
        })
    };
    let x5t = read
        .binding()
        .ok()
        .and_then(|bound| bound.x5t_s256.clone())
        .unwrap_or_default();
    let all = Evidence {
        dpop_proof: true,
        certificate: CertificateEvidence::Connection(&x5t),
    };
    match read {
        Cnf::Unusable(_) => assert!(matches!(
            check_binding(Some(read), &all, proof_of),
            Err(BindingError::Unusable(_))
        )),
        Cnf::Binds(bound) => {
            let full = Evidence {
                dpop_proof: bound.jkt.is_some(),
                certificate: match bound.x5t_s256 {
                    Some(_) => CertificateEvidence::Given(&x5t),
                    None => CertificateEvidence::None,
                },
            };
            assert_eq!(check_binding(Some(read), &full, proof_of), Ok(Some(bound)));
            if bound.jkt.is_some() {
                let no_proof = Evidence {
                    dpop_proof: false,
                    ..full
                };
                assert!(check_binding(Some(read), &no_proof, proof_of).is_err());
                let other_key = |_: &str| proof_of("another key");
                assert!(check_binding(Some(read), &full, other_key).is_err());
            }
            if bound.x5t_s256.is_some() {
                let no_certificate = Evidence {
                    certificate: CertificateEvidence::None,
                    ..full
                };
                assert!(check_binding(Some(read), &no_certificate, proof_of).is_err());
                let other = format!("{x5t}.");
                let other_certificate = Evidence {
                    certificate: CertificateEvidence::Connection(&other),
                    ..full
                };
                assert!(check_binding(Some(read), &other_certificate, proof_of).is_err());
            }
        }
    }
}
