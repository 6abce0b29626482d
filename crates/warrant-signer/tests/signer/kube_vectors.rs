//! What a real kube-apiserver v1.36 sent its external signer (tests/vectors/kube-v1.36, from
//! the captures in the project's shared spec): each Sign request's claims, byte for byte. warrant
//! signs every one, the token kube-apiserver would assemble from them verifies with the key
//! FetchKeys lists, and warrant's own TokenReview accepts it, bound objects and all.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use warrant_keys::KeySet;
use warrant_objects::Kind;
use warrant_signer::proto::SignJwtRequest;
use warrant_token::{ExpirationPolicy, KeyType, SigningKey};

use crate::support::*;

/// kube-apiserver's `--service-account-issuer` in the captures.
const CAPTURED_ISSUER: &str = "https://127.0.0.1:8443";

#[tokio::test]
async fn every_sign_request_kube_apiserver_sent_is_signed_and_reviewable() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/kube-v1.36");
    let mut vectors: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    vectors.sort();
    assert_eq!(vectors.len(), 9, "{vectors:?}");
    // The capture's signer said 24h in Metadata: kube-apiserver capped every token at it.
    let expiration = ExpirationPolicy {
        max_seconds: Some(86_400),
        extended_seconds: 86_400,
        ..ExpirationPolicy::default()
    };
    let key = SigningKey::generate(KeyType::Rsa2048).unwrap();
    let mut env = start_with(
        CAPTURED_ISSUER,
        KeySet::new(key.clone(), vec![]),
        expiration,
        |objects| {
            // The capture's objects, with their UIDs.
            let sa = "23e7eb54-dd13-4ded-aff6-8027da4d009f";
            objects.put(Kind::ServiceAccount, "e2e", "app", record(sa));
            let uid = "5bb8154f-a0f8-4d5e-aaf9-d2f751409d62";
            objects.put(Kind::Pod, "e2e", "p1", pod(uid, "app", "node-1"));
            let node = "9ab30a75-7235-4fce-bcba-69170f6128ee";
            objects.put(Kind::Node, "", "node-1", record(node));
            let secret = "597dab2b-56d4-47dd-b674-c5ec812d17c5";
            objects.put(Kind::Secret, "e2e", "s1", record(secret));
        },
    )
    .await;

    for path in vectors {
        let vector: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let name = vector["scenario"].as_str().unwrap();
        let claims = vector["claims"].as_str().unwrap().to_owned();
        let decoded: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&claims).unwrap()).unwrap();
        // Signed when kube-apiserver asked.
        let iat = decoded["iat"].as_i64().unwrap();
        env.clock.set(jiff::Timestamp::from_second(iat).unwrap());
        let signed = env
            .client
            .sign(SignJwtRequest {
                claims: claims.clone(),
            })
            .await
            .unwrap_or_else(|s| panic!("{name}: {s:?}"))
            .into_inner();
        let token = format!("{}.{claims}.{}", signed.header, signed.signature);
        let audience = decoded["aud"][0].as_str().unwrap();
        let review = env.review(&token, &[audience]).await;
        assert_eq!(review["authenticated"], true, "{name}: {review}");
        assert_eq!(
            review["user"]["username"], "system:serviceaccount:e2e:app",
            "{name}"
        );
        let extra = &review["user"]["extra"];
        if decoded["kubernetes.io"]["pod"].is_object() {
            assert_eq!(
                extra["authentication.kubernetes.io/pod-name"][0], "p1",
                "{name}"
            );
            assert_eq!(
                extra["authentication.kubernetes.io/node-name"][0], "node-1",
                "{name}"
            );
        }
    }
}
