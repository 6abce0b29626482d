//! The documents relying parties and clients fetch, with their headers.

use http::StatusCode;
use serde_json::json;
use warrant_keys::KeySet;
use warrant_token::{KeyType, SigningKey};

use crate::support::*;

#[tokio::test]
async fn openid_configuration_and_jwks() {
    let api = api();
    let r = api.get("/.well-known/openid-configuration").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["cache-control"], "public, max-age=3600");
    assert_eq!(
        r.text,
        format!(
            r#"{{"issuer":"{ISSUER}","jwks_uri":"{ISSUER}/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}}"#
        )
    );
    let r = api.get("/openid/v1/jwks").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/jwk-set+json");
    assert_eq!(r.headers["cache-control"], "public, max-age=3600");
    assert_eq!(r.json["keys"][0]["kid"], key().kid());

    // A key change re-renders both documents.
    let next = SigningKey::generate(KeyType::Rsa2048).unwrap();
    api.state.set_keys(KeySet::new(
        next.clone(),
        vec![key().verifying_key().clone()],
    ));
    let r = api.get("/openid/v1/jwks").await;
    let kids: Vec<&str> = r.json["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, [next.kid(), key().kid()]);
    let r = api.get("/.well-known/openid-configuration").await;
    assert_eq!(
        r.json["id_token_signing_alg_values_supported"],
        json!(["ES256", "RS256"])
    );
}

#[tokio::test]
async fn kubernetes_discovery() {
    let api = api();
    let r = api.get("/apis/warrant.dev/v1alpha1").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.json["kind"], "APIResourceList");
    assert_eq!(r.json["groupVersion"], "warrant.dev/v1alpha1");
    let names: Vec<&str> = r.json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["serviceaccounts/token", "tokenreviews"]);
    // The subresource takes an authentication.k8s.io/v1 TokenRequest in every group, as in kube.
    assert_eq!(r.json["resources"][0]["group"], "authentication.k8s.io");
    assert_eq!(r.json["resources"][0]["version"], "v1");
    let r = api.get("/apis").await;
    let groups: Vec<&str> = r.json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["authentication.k8s.io", "warrant.dev"]);
    assert_eq!(
        api.get("/apis/authentication.k8s.io/v1").await.json["resources"][0]["name"],
        "tokenreviews"
    );
    assert_eq!(api.get("/api").await.json["versions"], json!(["v1"]));
    assert_eq!(api.get("/version").await.json["major"], "1");
}

#[tokio::test]
async fn health_and_metrics() {
    let api = api();
    assert_eq!(api.get("/livez").await.text, "ok");
    assert_eq!(api.get("/readyz").await.text, "ok");
    let verbose = api.get("/readyz?verbose").await.text;
    assert!(
        verbose.contains("[+]objects ok") && verbose.ends_with("readyz check passed\n"),
        "{verbose}"
    );
    // Metrics need a caller, and count what happened.
    assert_eq!(api.get("/metrics").await.code, StatusCode::UNAUTHORIZED);
    api.token("app", json!({})).await;
    let r = api
        .send(
            http::Request::builder()
                .uri("/metrics")
                .header("authorization", format!("Bearer {ADMIN}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK);
    assert!(
        r.text
            .contains(r#"warrant_tokens_issued_total{binding="none"} 1"#),
        "{}",
        r.text
    );
    assert!(
        r.text.contains(
            r#"warrant_http_requests_total{route="tokenrequest",method="POST",code="201"} 1"#
        ),
        "{}",
        r.text
    );
}
