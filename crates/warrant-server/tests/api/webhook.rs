//! warrant as kube-apiserver's webhook token authenticator (spec §5.3): kube-apiserver posts a
//! TokenReview in the exact JSON below (v1beta1 by default, v1 when configured), over TLS with
//! the client certificate of its webhook kubeconfig, which must be allowed to create
//! tokenreviews. The answer comes back in the request's version.

use std::path::Path;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use warrant_auth::{Policy, PolicyFile};

use crate::support::*;
use warrant_testkit::TestCa;

const POLICY: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- subjects: [{kind: User, name: kube-apiserver-webhook}]
  reviews: true
";

/// Exactly what kube-apiserver 1.33 sends for v1beta1 (Go omits nothing it cannot).
fn v1beta1_body(token: &str) -> String {
    format!(
        r#"{{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1beta1","metadata":{{"creationTimestamp":null}},"spec":{{"token":"{token}","audiences":["https://warrant.test"]}},"status":{{"user":{{}}}}}}"#
    )
}

/// What kube-apiserver 1.34+ sends for v1 (`metadata` is `{}` there).
fn v1_body(token: &str) -> String {
    format!(
        r#"{{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","metadata":{{}},"spec":{{"token":"{token}","audiences":["https://warrant.test"]}},"status":{{"user":{{}}}}}}"#
    )
}

#[tokio::test]
async fn kube_apiserver_reviews_tokens_in_both_versions() {
    let users_ca = TestCa::new("client-ca");
    let policy = Policy::parse(POLICY, "p").unwrap();
    let api = api_auth(|authn, authz| {
        authn.trust.set_client_ca(Some(users_ca.bundle()));
        authz.policy = Some(PolicyFile::from_policy(policy, Path::new("p")));
    });
    let webhook = users_ca.issue_client("kube-apiserver-webhook", &[]);
    let issued = api
        .token(
            "app",
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0"}}),
        )
        .await;
    let token = issued.json["status"]["token"].as_str().unwrap().to_owned();

    for (version, body) in [("v1beta1", v1beta1_body(&token)), ("v1", v1_body(&token))] {
        let request = http::Request::builder()
            .method(Method::POST)
            .uri(format!(
                "/apis/authentication.k8s.io/{version}/tokenreviews"
            ))
            .header("content-type", "application/json")
            .header("accept", "application/json, */*")
            .body(axum::body::Body::from(body))
            .unwrap();
        let mut request = request;
        request.extensions_mut().insert(webhook.peer());
        let r = api.send(request).await;
        assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
        assert_eq!(
            r.json["apiVersion"],
            format!("authentication.k8s.io/{version}")
        );
        assert_eq!(r.json["kind"], "TokenReview");
        let status = r.assert_authenticated();
        assert_eq!(status["audiences"], json!(["https://warrant.test"]));
        assert_eq!(status["user"]["username"], "system:serviceaccount:demo:app");
        assert_eq!(
            status["user"]["groups"],
            json!([
                "system:serviceaccounts",
                "system:serviceaccounts:demo",
                "system:authenticated"
            ])
        );
        assert_eq!(
            status["user"]["extra"]["authentication.kubernetes.io/pod-name"],
            json!(["app-0"])
        );
    }

    // A token it does not know: still 201, with kube's message.
    let mut request = http::Request::builder()
        .method(Method::POST)
        .uri("/apis/authentication.k8s.io/v1beta1/tokenreviews")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(v1beta1_body("not-a-jwt")))
        .unwrap();
    request.extensions_mut().insert(webhook.peer());
    let r = api.send(request).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(
        r.json["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );

    // Another certificate of the same CA is a user without the grant.
    let other = users_ca.issue_client("someone", &[]);
    let mut request = http::Request::builder()
        .method(Method::POST)
        .uri("/apis/authentication.k8s.io/v1/tokenreviews")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(v1_body(&token)))
        .unwrap();
    request.extensions_mut().insert(other.peer());
    let r = api.send(request).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        r.json["message"],
        Value::from(
            r#"tokenreviews.authentication.k8s.io is forbidden: User "someone" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope"#
        )
    );
}
