//! Real tokens, key sets and documents from real clusters (tests/vectors): warrant must read,
//! verify and reproduce them byte for byte.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use serde_json::Value;
use warrant_token::{
    Binding, Claims, KeyType, NewToken, ObjectRef, SigningKey, TokenError, UserInfo, Verifier,
    VerifyingKey, key_id, render_discovery, render_jwks, verifying_keys_from_pem,
};

use crate::support;

fn vector(path: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors");
    std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn text(path: &str) -> String {
    String::from_utf8(vector(path)).unwrap().trim().to_owned()
}

fn json(path: &str) -> Value {
    serde_json::from_slice(&vector(path)).unwrap()
}

fn payload(token: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(token.split('.').nth(1).unwrap())
        .unwrap()
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// spec §2.2: upstream's key-ID test vector.
#[test]
fn kid_of_upstream_vector_key() {
    let pem = b"-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA249XwEo9k4tM8fMxV7zx
OhcrP+WvXn917koM5Qr2ZXs4vo26e4ytdlrV0bQ9SlcLpQVSYjIxNfhTZdDt+ecI
zshKuv1gKIxbbLQMOuK1eA/4HALyEkFgmS/tleLJrhc65tKPMGD+pKQ/xhmzRuCG
51RoiMgbQxaCyYxGfNLpLAZK9L0Tctv9a0mJmGIYnIOQM4kC1A1I1n3EsXMWmeJU
j7OTh/AjjCnMnkgvKT2tpKxYQ59PgDgU8Ssc7RDSmSkLxnrv+OrN80j6xrw0OjEi
B4Ycr0PqfzZcvy8efTtFQ/Jnc4Bp1zUtFXt7+QeevePtQ2EcyELXE0i63T1CujRM
WwIDAQAB
-----END PUBLIC KEY-----
";
    let keys = verifying_keys_from_pem(pem).unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].kid(), "JHJehTTTZlsspKHT-GaJxK7Kd1NQgZJu3fyK6K_QDYU");
    assert_eq!(key_id(keys[0].spki_der()), keys[0].kid());
}

/// The kind v1.34 token: JWKS parses, kid reproduces, signature verifies, claims decode, and the
/// claims re-encode to the exact payload bytes.
#[test]
fn kind_v1_34_pod_token() {
    let v = json("kind-v1.34-pod-token.json");
    let token = v["token"].as_str().unwrap();
    let issuer = v["openid_configuration"]["issuer"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = VerifyingKey::from_jwk(&v["jwks"]["keys"][0]).unwrap();
    assert_eq!(key.kid(), v["expect"]["kid"].as_str().unwrap());
    assert_eq!(key.kid(), v["jwks"]["keys"][0]["kid"].as_str().unwrap());

    let iat = v["expect"]["iat"].as_i64().unwrap();
    let verifier = Verifier::new(
        vec![issuer.clone()],
        vec![issuer.clone()],
        vec![key.clone()],
    );
    let verified = verifier.verify(token, &[], at(iat + 10)).unwrap();
    let c = &verified.claims;
    assert_eq!(c.iat, Some(iat));
    assert_eq!(c.exp, Some(v["expect"]["exp"].as_i64().unwrap()));
    assert_eq!(
        c.exp.unwrap() - iat,
        v["expect"]["exp_minus_iat"].as_i64().unwrap()
    );
    assert_eq!(
        c.kubernetes.warnafter.unwrap() - iat,
        v["expect"]["warnafter_minus_iat"].as_i64().unwrap()
    );
    assert_eq!(c.kubernetes.pod.as_ref().unwrap().name, "jwt-test");
    assert_eq!(
        c.kubernetes.node.as_ref().unwrap().name,
        "kind-control-plane"
    );
    assert_eq!(verified.audiences, vec![issuer.clone()]);
    assert!(!verified.is_stale(at(iat + 3607)));
    assert!(verified.is_stale(at(iat + 3608)));

    // The payload warrant would write for these claims is the one kube-apiserver wrote.
    assert_eq!(c.to_json(), payload(token));

    // The JWKS entry renders byte-identically (modulo the vector's pretty-printing).
    let rendered: Value = serde_json::from_slice(&render_jwks(&[key])).unwrap();
    assert_eq!(rendered, v["jwks"]);

    // A different key with the same kid does not verify it; a wrong issuer is "not mine".
    let other = support::rsa().verifying_key().clone();
    let wrong = Verifier::new(vec![issuer.clone()], vec![issuer], vec![other]);
    assert_eq!(
        wrong.verify(token, &[], at(iat + 10)),
        Err(TokenError::NoKeysFound)
    );
}

/// Re-signing the real token's claims with our own key round-trips them exactly.
#[test]
fn real_claims_resign_round_trip() {
    let v = json("kind-v1.34-pod-token.json");
    let original: Claims = serde_json::from_slice(&payload(v["token"].as_str().unwrap())).unwrap();
    for key_type in [
        KeyType::Rsa2048,
        KeyType::P256,
        KeyType::P384,
        KeyType::P521,
    ] {
        let key = support::key(key_type);
        let token = key.sign(&original).unwrap();
        assert_eq!(payload(&token), original.to_json());
        let verifier = Verifier::new(
            vec![original.iss.clone()],
            original.aud.clone(),
            vec![key.verifying_key().clone()],
        );
        let verified = verifier
            .verify(&token, &[], at(original.iat.unwrap()))
            .unwrap();
        assert_eq!(*verified.claims, original);
    }
}

/// kube-apiserver v1.36.2's own tokens, key set and documents.
#[test]
fn kube_v1_36_tokens_documents_and_review() {
    let jwks = json("kube-v1.36/jwks.json");
    let key = VerifyingKey::from_jwk(&jwks["keys"][0]).unwrap();
    assert_eq!(key.kid(), jwks["keys"][0]["kid"].as_str().unwrap());
    assert_eq!(
        render_jwks(std::slice::from_ref(&key)),
        vector("kube-v1.36/jwks.json")
    );

    let discovery = json("kube-v1.36/openid-configuration.json");
    let issuer = discovery["issuer"].as_str().unwrap();
    let rendered = render_discovery(
        issuer,
        discovery["jwks_uri"].as_str().unwrap(),
        std::slice::from_ref(&key),
    )
    .unwrap();
    // kube's document byte for byte, then warrant's one addition (RFC 9449 §5.1), last.
    let mut expected = vector("kube-v1.36/openid-configuration.json");
    assert_eq!(expected.pop(), Some(b'}'));
    expected
        .extend_from_slice(br#","dpop_signing_alg_values_supported":["RS256","ES256","ES384"]}"#);
    assert_eq!(
        String::from_utf8(rendered).unwrap(),
        String::from_utf8(expected).unwrap()
    );

    let verifier = Verifier::new(vec![issuer.into()], vec![issuer.into()], vec![key]);
    for name in ["plain", "pod-bound"] {
        let token = text(&format!("kube-v1.36/{name}.jwt"));
        let expected = json(&format!("kube-v1.36/{name}.claims.json"));
        let header: Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(token.split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(header, expected["header"], "{name}");
        let iat = expected["payload"]["iat"].as_i64().unwrap();
        let verified = verifier.verify(&token, &["foo".into()], at(iat)).unwrap();
        let claims: Value = serde_json::from_slice(&verified.claims.to_json()).unwrap();
        assert_eq!(claims, expected["payload"], "{name}");
        assert_eq!(verified.claims.to_json(), payload(&token), "{name}");
    }

    // TokenReview of the pod-bound token for audience "foo": the same user, extras and audiences.
    let review = json("kube-v1.36/review-ok.json");
    let token = review["spec"]["token"].as_str().unwrap();
    let iat = json("kube-v1.36/pod-bound.claims.json")["payload"]["iat"]
        .as_i64()
        .unwrap();
    let verified = verifier
        .verify(token, &["foo".into()], at(iat + 5))
        .unwrap();
    let user: Value = serde_json::to_value(verified.user_info()).unwrap();
    assert_eq!(user, review["status"]["user"]);
    assert_eq!(
        serde_json::to_value(&verified.audiences).unwrap(),
        review["status"]["audiences"]
    );

    // Without audiences the API audiences apply, and the token's "foo" is not one of them.
    // kube-apiserver wraps this message in its union aggregate; it is the inner message.
    let noaud = json("kube-v1.36/review-noaud.json");
    let err = verifier.verify(token, &[], at(iat + 5)).unwrap_err();
    let aggregate = noaud["status"]["error"].as_str().unwrap();
    assert_eq!(aggregate, format!("[invalid bearer token, {err}]"));
}

/// A freshly issued pod-bound token produces the same user info shape as kube's review.
#[test]
fn user_info_rules() {
    let mut claims = support::claims();
    let user = UserInfo::from_claims(&claims);
    assert_eq!(user.username, "system:serviceaccount:ns:app");
    assert_eq!(user.uid, "sa-uid");
    assert_eq!(
        user.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            "system:authenticated"
        ]
    );
    assert_eq!(
        user.extra.keys().collect::<Vec<_>>(),
        ["authentication.kubernetes.io/credential-id"]
    );
    assert_eq!(
        user.extra["authentication.kubernetes.io/credential-id"],
        ["JTI=4d6a8b0e-4a47-4e3f-9a43-3f4f1e1c2b7a"]
    );

    // Pod-bound with a node that was not found: node-name without node-uid.
    claims = Claims::new(NewToken {
        binding: Binding::Pod {
            pod: ObjectRef::new("p", "pu"),
            node: Some(ObjectRef::new("n", "")),
        },
        jti: String::new(),
        ..new_token()
    });
    let extra = UserInfo::from_claims(&claims).extra;
    assert_eq!(
        extra.keys().collect::<Vec<_>>(),
        [
            "authentication.kubernetes.io/node-name",
            "authentication.kubernetes.io/pod-name",
            "authentication.kubernetes.io/pod-uid"
        ]
    );

    // Secret-bound: no extra at all (and no credential ID without a jti).
    claims = Claims::new(NewToken {
        binding: Binding::Secret(ObjectRef::new("s", "su")),
        jti: String::new(),
        ..new_token()
    });
    assert!(UserInfo::from_claims(&claims).extra.is_empty());

    // Node-bound: node name and UID.
    claims = Claims::new(NewToken {
        binding: Binding::Node(ObjectRef::new("n", "nu")),
        ..new_token()
    });
    let extra = UserInfo::from_claims(&claims).extra;
    assert_eq!(extra["authentication.kubernetes.io/node-uid"], ["nu"]);
}

fn new_token() -> NewToken<'static> {
    NewToken {
        issuer: support::ISSUER,
        namespace: "ns",
        service_account: ObjectRef::new("app", "sa-uid"),
        audiences: vec![support::ISSUER.into()],
        binding: Binding::None,
        issued_at: support::NOW,
        expires_at: support::NOW + 3600,
        warn_after: None,
        jti: "j".into(),
    }
}

/// jsonwebtoken, an independent JWT implementation, reads the real JWKS and verifies the real
/// token, and verifies tokens warrant signs with the same key types.
#[test]
fn jsonwebtoken_agrees() {
    use jsonwebtoken::{DecodingKey, Validation, decode, jwk::JwkSet};

    let v = json("kind-v1.34-pod-token.json");
    let set: JwkSet = serde_json::from_value(v["jwks"].clone()).unwrap();
    let key = DecodingKey::from_jwk(&set.keys[0]).unwrap();
    let mut validation = Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.validate_exp = false;
    validation.set_audience(&["https://kubernetes.default.svc.cluster.local"]);
    decode::<Value>(v["token"].as_str().unwrap(), &key, &validation).unwrap();

    for (key_type, alg) in [
        (KeyType::Rsa2048, jsonwebtoken::Algorithm::RS256),
        (KeyType::P256, jsonwebtoken::Algorithm::ES256),
        (KeyType::P384, jsonwebtoken::Algorithm::ES384),
    ] {
        let ours: &SigningKey = support::key(key_type);
        let jwks: JwkSet =
            serde_json::from_slice(&render_jwks(&[ours.verifying_key().clone()])).unwrap();
        let key = DecodingKey::from_jwk(&jwks.keys[0]).unwrap();
        let mut validation = Validation::new(alg);
        validation.validate_exp = false;
        validation.set_audience(&[support::ISSUER]);
        let token = ours.sign(&support::claims()).unwrap();
        let decoded = decode::<Claims>(&token, &key, &validation).unwrap();
        assert_eq!(decoded.claims, support::claims());
        assert_eq!(decoded.header.kid.as_deref(), Some(ours.kid()));
        assert_eq!(decoded.header.typ, None);
    }
}
