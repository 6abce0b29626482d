//! Tokens that must be refused: forged algorithms, tampering, garbage, strangers' tokens.

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_token::{KeyType, MAX_TOKEN_BYTES, TokenError};

use crate::support::{self, key, now, rsa, verifier};

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn payload() -> String {
    b64(&support::claims().to_json())
}

fn verify(token: &str) -> Result<(), TokenError> {
    verifier(&[rsa(), key(KeyType::P256)])
        .verify(token, &[], now())
        .map(|_| ())
}

#[test]
fn alg_none_is_refused() {
    let header = b64(format!(r#"{{"alg":"none","kid":"{}"}}"#, rsa().kid()).as_bytes());
    assert_eq!(
        verify(&format!("{header}.{}.", payload())),
        Err(TokenError::Signature)
    );
    let header = b64(br#"{"alg":"none"}"#);
    assert_eq!(
        verify(&format!("{header}.{}.", payload())),
        Err(TokenError::Signature)
    );
}

#[test]
fn hs256_keyed_with_the_public_key_is_refused() {
    // The classic confusion attack: HMAC keyed with the verifier's public key.
    for public in [
        rsa().verifying_key().to_pem().into_bytes(),
        rsa().verifying_key().spki_der().to_vec(),
    ] {
        let header = b64(format!(r#"{{"alg":"HS256","kid":"{}"}}"#, rsa().kid()).as_bytes());
        let input = format!("{header}.{}", payload());
        let tag = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, &public),
            input.as_bytes(),
        );
        assert_eq!(
            verify(&format!("{input}.{}", b64(tag.as_ref()))),
            Err(TokenError::Signature)
        );
    }
}

#[test]
fn alg_that_does_not_match_the_key_is_refused() {
    // A valid ES256 signature relabelled as RS256 with the EC key's kid, and the reverse.
    let es = key(KeyType::P256);
    let token = es.sign(&support::claims()).unwrap();
    let (_, rest) = token.split_once('.').unwrap();
    let relabelled = b64(format!(r#"{{"alg":"RS256","kid":"{}"}}"#, es.kid()).as_bytes());
    assert_eq!(
        verify(&format!("{relabelled}.{rest}")),
        Err(TokenError::Signature)
    );
    let token = rsa().sign(&support::claims()).unwrap();
    let (_, rest) = token.split_once('.').unwrap();
    let relabelled = b64(format!(r#"{{"alg":"ES256","kid":"{}"}}"#, rsa().kid()).as_bytes());
    assert_eq!(
        verify(&format!("{relabelled}.{rest}")),
        Err(TokenError::Signature)
    );
    // ES384 label on an ES256 signature.
    let token = es.sign(&support::claims()).unwrap();
    let (_, rest) = token.split_once('.').unwrap();
    let relabelled = b64(format!(r#"{{"alg":"ES384","kid":"{}"}}"#, es.kid()).as_bytes());
    assert_eq!(
        verify(&format!("{relabelled}.{rest}")),
        Err(TokenError::Signature)
    );
}

#[test]
fn tampering_is_detected() {
    let token = rsa().sign(&support::claims()).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims = support::claims();
    claims.kubernetes.serviceaccount.name = "admin".into();
    let forged = format!("{}.{}.{}", parts[0], b64(&claims.to_json()), parts[2]);
    assert_eq!(verify(&forged), Err(TokenError::Signature));
    let truncated = &token[..token.len() - 4];
    assert_eq!(verify(truncated), Err(TokenError::Signature));
    let empty_sig = format!("{}.{}.", parts[0], parts[1]);
    assert_eq!(verify(&empty_sig), Err(TokenError::Signature));
}

#[test]
fn kid_selects_keys() {
    // An unknown kid fails at once, even though a configured key would verify the signature.
    let token = rsa().sign(&support::claims()).unwrap();
    let other = key(KeyType::P384);
    assert_eq!(
        verifier(&[other]).verify(&token, &[], now()).map(|_| ()),
        Err(TokenError::NoKeysFound)
    );
    // No kid: every key is tried, in order, whichever position the right one has.
    let header = b64(br#"{"alg":"RS256"}"#);
    let kidless = resign(&format!("{header}.{}", payload()));
    assert_eq!(verify(&kidless), Ok(()));
    assert_eq!(
        verifier(&[other, rsa()])
            .verify(&kidless, &[], now())
            .map(|_| ()),
        Ok(())
    );
    assert_eq!(
        verifier(&[other]).verify(&kidless, &[], now()).map(|_| ()),
        Err(TokenError::Signature)
    );
    // No keys at all.
    assert_eq!(
        verifier(&[]).verify(&kidless, &[], now()).map(|_| ()),
        Err(TokenError::NoKeysFound)
    );
}

#[test]
fn a_revoked_keys_tokens_are_refused_by_name() {
    let token = rsa().sign(&support::claims()).unwrap();
    let revoked = verifier(&[key(KeyType::P384)]).with_revoked(vec![rsa().kid().to_owned()]);
    let refused = revoked.verify(&token, &[], now()).map(|_| ());
    assert_eq!(refused, Err(TokenError::Revoked(rsa().kid().to_owned())));
    assert_eq!(
        refused.unwrap_err().to_string(),
        format!(
            "invalid signature: the key that signed this token ({}) has been revoked",
            rsa().kid()
        )
    );
    // Another unknown kid is still only unknown.
    let other = key(KeyType::P256).sign(&support::claims()).unwrap();
    assert_eq!(
        revoked.verify(&other, &[], now()).map(|_| ()),
        Err(TokenError::NoKeysFound)
    );
}

/// Signs an arbitrary signing input (any header) with the RSA test key's private half.
fn resign(input: &str) -> String {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::rsa::KeyPair;
    use aws_lc_rs::signature::RSA_PKCS1_SHA256;
    use rustls_pki_types::pem::PemObject;
    let pem = rsa().to_pkcs8_pem().unwrap();
    let der = rustls_pki_types::PrivateKeyDer::from_pem_slice(pem.as_str().as_bytes()).unwrap();
    let pair = KeyPair::from_pkcs8(der.secret_der()).unwrap();
    let mut sig = vec![0; pair.public_modulus_len()];
    pair.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut sig,
    )
    .unwrap();
    format!("{input}.{}", b64(&sig))
}

#[test]
fn critical_headers_are_refused() {
    let header = b64(format!(
        r#"{{"alg":"RS256","kid":"{}","crit":["exp"]}}"#,
        rsa().kid()
    )
    .as_bytes());
    let token = resign(&format!("{header}.{}", payload()));
    assert_eq!(verify(&token), Err(TokenError::Signature));
}

#[test]
fn not_mine() {
    let token = rsa().sign(&support::claims()).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let mut stranger = support::claims();
    stranger.iss = "https://someone.else".into();
    let cases = [
        String::new(),
        "garbage".into(),
        "a.b".into(),
        format!("{token}.extra"),
        format!("  {{\"alg\":\"RS256\"}}.{}.{}", parts[1], parts[2]),
        format!("{}.!!!.{}", parts[0], parts[2]),
        format!("{}.{}==.{}", parts[0], parts[1], parts[2]),
        format!("{}.{}.{}", parts[0], b64(b"not json"), parts[2]),
        format!("{}.{}.{}", parts[0], b64(b"{}"), parts[2]),
        rsa().sign(&stranger).unwrap(),
        format!("{}.{}.{}", b64(b"not json"), parts[1], parts[2]),
        format!("{}.{}.***", parts[0], parts[1]),
        format!("{}.{}.{}", b64(br#"{"alg":5}"#), parts[1], parts[2]),
    ];
    for case in &cases {
        assert_eq!(verify(case), Err(TokenError::NotMine), "{case}");
    }
}

#[test]
fn oversized_tokens_are_not_read() {
    // A valid token padded with an unused claim past the limit is refused unread.
    let mut claims = support::claims();
    claims.jti = "x".repeat(MAX_TOKEN_BYTES);
    let token = rsa().sign(&claims).unwrap();
    assert!(token.len() > MAX_TOKEN_BYTES);
    assert_eq!(verify(&token), Err(TokenError::NotMine));
    claims.jti = "x".repeat(MAX_TOKEN_BYTES / 2);
    assert_eq!(verify(&rsa().sign(&claims).unwrap()), Ok(()));
}

#[test]
fn signed_claims_of_the_wrong_shape_are_refused_after_the_signature() {
    let body = format!(
        r#"{{"iss":"{}","exp":"tomorrow","aud":["{}"]}}"#,
        support::ISSUER,
        support::ISSUER
    );
    let token = rsa().sign_payload(body.as_bytes()).unwrap();
    assert_eq!(verify(&token), Err(TokenError::MalformedClaims));
    // The same claims with a bad signature report the signature first, as kube does.
    let (input, _) = token.rsplit_once('.').unwrap();
    assert_eq!(verify(&format!("{input}.AAAA")), Err(TokenError::Signature));
}
