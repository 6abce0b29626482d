//! Bad input over a real socket: each gets a clear Status and the server keeps serving.

use serde_json::{Value, json};

use crate::support::*;
use crate::tokens::OBJECTS;

const TOKEN_PATH: &str = "/api/v1/namespaces/demo/serviceaccounts/app/token";
const REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

async fn post(w: &Warrant, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let r = w
        .http
        .post(w.url(path))
        .bearer_auth(w.admin_token())
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn limits_and_malformed_requests() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let (code, body) = post(
        &w,
        TOKEN_PATH,
        "application/json",
        vec![b' '; 3 * 1024 * 1024 + 1],
    )
    .await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    let (code, body) = post(&w, TOKEN_PATH, "application/json", b"{\"spec\":".to_vec()).await;
    assert_eq!((code, body["reason"].as_str()), (400, Some("BadRequest")));
    let (code, body) = post(&w, TOKEN_PATH, "text/plain", b"hello".to_vec()).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let r = w
        .http
        .get(w.url(TOKEN_PATH))
        .bearer_auth(w.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = w.http.get(w.url("/api/v1/secrets")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = w
        .http
        .post(w.url(TOKEN_PATH))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Still serving.
    let (code, _) = post(&w, TOKEN_PATH, "application/json", b"{}".to_vec()).await;
    assert_eq!(code, 201);
}

#[tokio::test]
async fn tokens_that_must_not_pass() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&[]);
    let token = token.trim().to_owned();
    let stranger = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let mut c = claims(&token);
    let other_key = stranger.sign(&c).unwrap();
    c.iss = "https://someone.else".into();
    let other_issuer = stranger.sign(&c).unwrap();
    let tampered = {
        let parts: Vec<&str> = token.split('.').collect();
        let mut c = claims(&token);
        c.kubernetes.serviceaccount.name = "admin".into();
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(c.to_json());
        format!("{}.{payload}.{}", parts[0], parts[2])
    };
    for (name, t, error) in [
        (
            "truncated",
            &token[..token.len() - 10],
            "go-jose/go-jose: error in cryptographic primitive",
        ),
        (
            "cut in half",
            &token[..token.len() / 2],
            "invalid bearer token",
        ),
        (
            "signed by another key",
            other_key.as_str(),
            "invalid signature, no keys found",
        ),
        (
            "another issuer",
            other_issuer.as_str(),
            "invalid bearer token",
        ),
        (
            "tampered claims",
            tampered.as_str(),
            "go-jose/go-jose: error in cryptographic primitive",
        ),
    ] {
        let status = w.review(t, &[]);
        assert_eq!(status, json!({"user": {}, "error": error}), "{name}");
    }
    let huge = "x".repeat(20 * 1024);
    let (code, body) = post(
        &w,
        REVIEW_PATH,
        "application/json",
        json!({"spec": {"token": huge}}).to_string().into_bytes(),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(body["status"]["error"], "invalid bearer token");
}

#[tokio::test]
async fn a_broken_objects_file_keeps_the_last_good_set() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let token = w.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-0"]);
    let token = token.trim();
    let metric = |w: &Warrant| {
        let out = w.kubectl_ok(&["get", "--raw", "/metrics"]);
        out.lines()
            .find(|l| l.starts_with("warrant_objects_reloads_total{result=\"failure\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let failures = metric(&w);
    w.write_objects("apiVersion: v1\nkind: Pod\nmetadata: {name: [broken\n");
    w.eventually("the failed reload to be counted", || metric(&w) > failures)
        .await;
    // Nothing was lost: the pod is still there.
    assert_eq!(w.review(token, &[])["authenticated"], true);
    // A fixed file is picked up.
    w.write_objects(&OBJECTS.replace("app-0", "app-1"));
    w.eventually("the fixed file to be loaded", || {
        w.review(token, &[])["error"] == "service account token has been invalidated"
    })
    .await;
}
