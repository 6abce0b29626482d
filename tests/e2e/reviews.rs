//! TokenReview with `kubectl create -f`, and revocation by editing the objects file.

use serde_json::json;

use crate::support::*;
use crate::tokens::OBJECTS;
use warrant_testkit::{NODE_UID, POD_UID, SA_UID};

#[tokio::test]
async fn review_then_revoke_by_removing_the_pod() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&[
        "--audience",
        "vault",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "app-0",
    ]);
    let token = token.trim();
    let jti = claims(token).jti;

    let status = w.review(token, &["vault"]);
    assert_eq!(
        status,
        json!({
            "authenticated": true,
            "audiences": ["vault"],
            "user": {
                "username": "system:serviceaccount:demo:app",
                "uid": SA_UID,
                "groups": ["system:serviceaccounts", "system:serviceaccounts:demo", "system:authenticated"],
                "extra": {
                    "authentication.kubernetes.io/credential-id": [format!("JTI={jti}")],
                    "authentication.kubernetes.io/node-name": ["node-1"],
                    "authentication.kubernetes.io/node-uid": [NODE_UID],
                    "authentication.kubernetes.io/pod-name": ["app-0"],
                    "authentication.kubernetes.io/pod-uid": [POD_UID],
                }
            }
        })
    );

    // Remove the pod from the file: the next review fails.
    let without_pod = OBJECTS.replace(
        &format!("- apiVersion: v1\n  kind: Pod\n  metadata: {{name: app-0, namespace: demo, uid: {POD_UID}}}\n  spec: {{serviceAccountName: app, nodeName: node-1}}\n"),
        "",
    );
    assert_ne!(without_pod, OBJECTS);
    w.write_objects(&without_pod);
    w.eventually("the pod's removal to revoke the token", || {
        w.review(token, &["vault"])["error"] == "service account token has been invalidated"
    })
    .await;
    assert_eq!(
        w.review(token, &["vault"]),
        json!({"user": {}, "error": "service account token has been invalidated"})
    );

    // Re-add it under the same name without a UID: it gets the UID derived from its name, not
    // the one it had, so the token stays revoked.
    let readded = format!(
        "{without_pod}- apiVersion: v1\n  kind: Pod\n  metadata: {{name: app-0, namespace: demo}}\n  spec: {{serviceAccountName: app, nodeName: node-1}}\n"
    );
    w.write_objects(&readded);
    let prefix = "pod UID (";
    w.eventually("the re-added pod to appear", || {
        w.review(token, &["vault"])["error"]
            .as_str()
            .is_some_and(|e| e.starts_with(prefix))
    })
    .await;
    let error = w.review(token, &["vault"])["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        error.ends_with(&format!(
            ") does not match service account pod ref claim ({POD_UID})"
        )),
        "{error}"
    );
}

#[tokio::test]
async fn audiences_default_to_the_api_audiences() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&["--audience", "vault"]);
    let status = w.review(token.trim(), &[]);
    assert_eq!(
        status["error"],
        format!(
            r#"token audiences ["vault"] is invalid for the target audiences ["{}"]"#,
            w.issuer()
        )
    );
    let token = w.token(&[]);
    assert_eq!(
        w.review(token.trim(), &[])["audiences"],
        json!([w.issuer()])
    );
}

/// `warrant_signature_cache_lookups_total{result}` as the server reports it.
fn signature_lookups(w: &Warrant, result: &str) -> u64 {
    let prefix = format!("warrant_signature_cache_lookups_total{{result=\"{result}\"}} ");
    w.kubectl_ok(&["get", "--raw", "/metrics"])
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.parse().unwrap())
}

#[tokio::test]
async fn a_repeated_review_skips_the_signature_check_unless_the_cache_is_off() {
    // The first review notes the token, the second caches its signature (the doorkeeper keeps
    // tokens reviewed once out), the ones after hit.
    for (flags, hits) in [(&[][..], 2), (&["--signature-cache-size", "0"][..], 0)] {
        let w = Warrant::start(OBJECTS, flags).await;
        let token = w.token(&["--audience", "vault"]);
        for _ in 0..4 {
            assert_eq!(w.review(token.trim(), &["vault"])["authenticated"], true);
        }
        assert_eq!(
            (signature_lookups(&w, "hit"), signature_lookups(&w, "miss")),
            (hits, 4 - hits),
            "{flags:?}"
        );
    }
}

/// Forged tokens through the real endpoint with kubectl, each twice (the second review would
/// meet anything the first left in the verified-signature cache): alg none, HS256 keyed with
/// the public key, and a token without `exp` signed by the real key.
#[tokio::test]
async fn forged_tokens_are_refused_through_kubectl() {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let w = Warrant::start(OBJECTS, &[]).await;
    let genuine = w.token(&["--audience", "vault"]);
    let genuine = genuine.trim();
    assert_eq!(w.review(genuine, &["vault"])["authenticated"], true);

    let key =
        warrant_token::signing_key_from_pem(&std::fs::read(w.path("sa.key")).unwrap()).unwrap();
    let payload = genuine.split('.').nth(1).unwrap();
    let header = |alg: &str| b64(format!(r#"{{"alg":"{alg}","kid":"{}"}}"#, key.kid()).as_bytes());
    let none = format!("{}.{payload}.", header("none"));
    let signing_input = format!("{}.{payload}", header("HS256"));
    let tag = aws_lc_rs::hmac::sign(
        &aws_lc_rs::hmac::Key::new(
            aws_lc_rs::hmac::HMAC_SHA256,
            key.verifying_key().to_pem().as_bytes(),
        ),
        signing_input.as_bytes(),
    );
    let hs256 = format!("{signing_input}.{}", b64(tag.as_ref()));
    let mut no_exp = serde_json::to_value(claims(genuine)).unwrap();
    no_exp.as_object_mut().unwrap().remove("exp");
    let no_exp = key
        .sign_payload(&serde_json::to_vec(&no_exp).unwrap())
        .unwrap();

    const BAD_SIGNATURE: &str = "go-jose/go-jose: error in cryptographic primitive";
    for (name, token, error) in [
        ("alg none", none, BAD_SIGNATURE),
        ("HS256 keyed with the public key", hs256, BAD_SIGNATURE),
        (
            "no exp",
            no_exp,
            "service account token has no expiration (exp) claim",
        ),
    ] {
        for round in ["first", "second"] {
            assert_eq!(
                w.review(&token, &["vault"]),
                json!({"user": {}, "error": error}),
                "{name}, {round}"
            );
        }
    }
}
