//! Bad requests get a clear Status and never take the server down.

use axum::body::Body;
use http::{Request, StatusCode};
use serde_json::json;

use crate::support::*;

fn post(uri: &str, content_type: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method("POST")
        .uri(uri)
        .header("authorization", format!("Bearer {ADMIN}"))
        .header("content-type", content_type)
        .body(body.into())
        .unwrap()
}

const TOKEN_PATH: &str = "/api/v1/namespaces/demo/serviceaccounts/app/token";
const REVIEW_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

#[tokio::test]
async fn oversized_body_is_413() {
    let api = api();
    let big = vec![b' '; warrant_server::MAX_BODY_BYTES + 1];
    let r = api.send(post(TOKEN_PATH, "application/json", big)).await;
    assert_eq!(r.code, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.json["reason"], "RequestEntityTooLarge");
    assert_eq!(
        r.json["message"],
        "Request entity too large: limit is 3145728"
    );
}

#[tokio::test]
async fn malformed_json_is_400_without_echoing_values() {
    let api = api();
    let r = api
        .send(post(TOKEN_PATH, "application/json", "{\"spec\": {"))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["reason"], "BadRequest");
    let r = api
        .send(post(
            REVIEW_PATH,
            "application/json",
            r#"{"spec":{"token":"eyJ.secret.value","audiences":"eyJ.secret.value"}}"#,
        ))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert!(!r.text.contains("secret"), "{}", r.text);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap()
            .contains("line 1, column"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn yaml_and_protobuf_are_accepted_and_other_types_are_415() {
    let api = api();
    let r = api
        .send(post(
            TOKEN_PATH,
            "application/yaml",
            "spec:\n  audiences: [vault]\n",
        ))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    // Kubernetes protobuf is read (kubectl and the kubelet send it); a malformed one is a 400.
    let r = api
        .send(post(
            TOKEN_PATH,
            "application/vnd.kubernetes.protobuf",
            "k8s\0garbage",
        ))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.text);
    let r = api
        .send(post(TOKEN_PATH, "application/cbor", "\x6b\x38\x73"))
        .await;
    assert_eq!(r.code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(r.json["reason"], "UnsupportedMediaType");
}

/// The bodies kubectl itself sent (tests/vectors/kubectl-v1.32) issue the tokens they ask for.
#[tokio::test]
async fn token_requests_as_kubectl_sends_them_are_served() {
    let api = api();
    let vector = |name: &str| {
        std::fs::read(format!(
            "{}/tests/vectors/kubectl-v1.32/tokenrequest-{name}.pb",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let issue = |name: &'static str| {
        let api = &api;
        let body = vector(name);
        async move {
            let r = api
                .send(post(
                    TOKEN_PATH,
                    "application/vnd.kubernetes.protobuf",
                    body,
                ))
                .await;
            assert_eq!(r.code, StatusCode::CREATED, "{name}: {}", r.text);
            claims(r.json["status"]["token"].as_str().unwrap())
        }
    };
    let pod = issue("pod-bound").await;
    assert_eq!(pod.aud, ["vault", "https://kubernetes.default.svc"]);
    assert_eq!(pod.exp.unwrap() - pod.iat.unwrap(), 600);
    assert_eq!(pod.kubernetes.pod.unwrap().uid, POD_UID);
    let secret = issue("secret-bound").await;
    assert_eq!(secret.kubernetes.secret.unwrap().uid, SECRET_UID);
    let node = issue("node-bound").await;
    assert_eq!(node.kubernetes.node.unwrap().uid, NODE_UID);
    assert_eq!(node.exp.unwrap() - node.iat.unwrap(), 3600);
    let plain = issue("plain").await;
    assert_eq!(plain.aud, [ISSUER]);
}

#[tokio::test]
async fn wrong_method_and_unknown_path() {
    let api = api();
    let r = api.get(TOKEN_PATH).await;
    assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.json["reason"], "MethodNotAllowed");
    // RFC 9110: a 405 says which methods the resource takes.
    assert_eq!(r.headers["allow"], "POST");
    let r = api.post("/metrics", json!({})).await;
    assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers["allow"], "GET,HEAD");
    let r = api.get("/api/v1/pods").await;
    assert_eq!(r.code, StatusCode::NOT_FOUND);
    assert_eq!(r.json["kind"], "Status");
}

#[tokio::test]
async fn oversized_tokens_are_refused_unread() {
    let api = api();
    let token = "e".repeat(warrant_token::MAX_TOKEN_BYTES + 1);
    let r = api.review("authentication.k8s.io/v1", &token, &[]).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(
        r.json["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );
}

#[tokio::test]
async fn wrong_kinds_of_body() {
    let api = api();
    for body in [
        json!([]),
        json!("string"),
        json!({"kind": "TokenReview"}),
        json!({"spec": {"expirationSeconds": "long"}}),
    ] {
        let r = api.post(TOKEN_PATH, body.clone()).await;
        assert_eq!(r.code, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
    }
}

#[tokio::test]
async fn yaml_errors_do_not_echo_the_body() {
    let api = api();
    for body in [
        "spec:\n  token: eyJhbGci.secret.value: [\n",
        "spec:\n  audiences: eyJhbGci.secret.value\n",
        "spec:\n  token: eyJhbGci.secret.value\n  audiences: {a: 1}\n",
    ] {
        let r = api.send(post(REVIEW_PATH, "application/yaml", body)).await;
        assert_eq!(r.code, StatusCode::BAD_REQUEST, "{body:?}: {}", r.text);
        assert_eq!(r.json["reason"], "BadRequest");
        assert!(!r.text.contains("secret"), "{body:?}: {}", r.text);
        assert!(r.text.contains("line "), "{body:?}: {}", r.text);
    }
}

/// One decoding of the path, for authorization and the handler alike: an escape that does not
/// decode is a 400 Status (not axum's plain text), and a valid one names the object both see.
#[tokio::test]
async fn paths_decode_once_and_bad_escapes_are_a_status() {
    let api = api();
    for path in [
        "/api/v1/namespaces/%FF%FE/serviceaccounts/app/token",
        "/api/v1/namespaces/de%zz%41/serviceaccounts/app/token",
        "/api/v1/namespaces/demo/serviceaccounts/app%/token",
    ] {
        let r = api.post(path, json!({"spec": {}})).await;
        assert_eq!(r.code, StatusCode::BAD_REQUEST, "{path}: {}", r.text);
        assert_eq!(r.json["kind"], "Status", "{path}: {}", r.text);
        assert_eq!(
            r.json["message"],
            "the request path is not valid: a segment does not decode (a bad %-escape, or not UTF-8)"
        );
    }
    let r = api
        .post(
            "/api/v1/namespaces/d%65mo/serviceaccounts/%61pp/token",
            json!({"spec": {}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["metadata"]["namespace"], "demo");
    assert_eq!(r.json["metadata"]["name"], "app");
}
