//! The OpenAPI documents kubectl and kube-apiserver's aggregator download: content negotiation,
//! caching headers, the aggregated view, and that they describe only what the router serves.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::Value;

use warrant_auth::{FrontProxy, RequestHeaders};

use crate::support::*;
use warrant_testkit::TestCa;

const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// What client-go's discovery client sends.
const PROTOBUF_REQUESTED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

fn keys(value: &Value) -> Vec<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn v2_is_json_by_default_and_protobuf_for_client_go() {
    let api = api();
    // Public, like /version: no credentials needed.
    for accept in [None, Some("application/json"), Some("*/*")] {
        let headers: Vec<(&str, &str)> = accept.map(|a| ("accept", a)).into_iter().collect();
        let r = api.get_with("/openapi/v2", &headers).await;
        assert_eq!(r.code, StatusCode::OK, "{accept:?}");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.json["swagger"], "2.0");
        assert!(r.headers["vary"].to_str().unwrap().contains("Accept"));
    }

    for accept in [PROTOBUF_REQUESTED, PROTOBUF] {
        let r = api.get_with("/openapi/v2", &[("accept", accept)]).await;
        assert_eq!(r.code, StatusCode::OK, "{accept}");
        assert_eq!(r.headers["content-type"], PROTOBUF);
        // Field 1 of gnostic's Document, `swagger`, comes first: "2.0".
        assert_eq!(r.bytes[..5], [0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(r.json, Value::Null, "not JSON");
    }

    let r = api
        .get_with("/openapi/v2", &[("accept", "application/xml")])
        .await;
    assert_eq!(r.code, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(r.json["kind"], "Status");
    assert_eq!(r.json["reason"], "NotAcceptable");
}

#[tokio::test]
async fn v2_answers_conditional_requests() {
    let api = api();
    let first = api.get("/openapi/v2").await;
    let etag = first.headers["etag"].to_str().unwrap().to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    let again = api
        .get_with("/openapi/v2", &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.code, StatusCode::NOT_MODIFIED);
    assert!(again.bytes.is_empty());
    // The protobuf form is a different entity.
    let proto = api
        .get_with("/openapi/v2", &[("accept", PROTOBUF_REQUESTED)])
        .await;
    assert_ne!(proto.headers["etag"].to_str().unwrap(), etag);
}

#[tokio::test]
async fn v3_index_links_each_group_version() {
    let api = api();
    let index = api.get("/openapi/v3").await;
    assert_eq!(index.code, StatusCode::OK);
    assert_eq!(index.headers["content-type"], "application/json");
    assert_eq!(
        keys(&index.json["paths"]),
        [
            "api/v1",
            "apis/authentication.k8s.io/v1",
            "apis/warrant.dev/v1alpha1"
        ]
    );
    for (path, entry) in index.json["paths"].as_object().unwrap() {
        let url = entry["serverRelativeURL"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("/openapi/v3/{path}?hash=")),
            "{url}"
        );
        let r = api.get_with(url, &[("accept", "application/json")]).await;
        assert_eq!(r.code, StatusCode::OK, "{url}");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(
            r.headers["cache-control"],
            "public, immutable, max-age=31536000"
        );
        assert_eq!(r.json["openapi"], "3.0.0");
        // Only POST, so kubectl finds no PATCH taking fieldValidation.
        for item in r.json["paths"].as_object().unwrap().values() {
            let methods: Vec<String> = keys(item)
                .into_iter()
                .filter(|k| k != "parameters")
                .collect();
            assert_eq!(methods, ["post"], "{url}");
        }
        // Without the hash: the same document, not cached for good.
        let plain = api.get(&format!("/openapi/v3/{path}")).await;
        assert_eq!(plain.json, r.json);
        assert!(plain.headers.get("cache-control").is_none());
    }

    let stale = api
        .get("/openapi/v3/apis/authentication.k8s.io/v1?hash=0000")
        .await;
    assert_eq!(stale.code, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        stale.headers["location"],
        index.json["paths"]["apis/authentication.k8s.io/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
    );
    let unknown = api.get("/openapi/v3/apis/apps/v1").await;
    assert_eq!(unknown.code, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json["kind"], "Status");
}

/// What kube-apiserver's aggregator relays sees warrant's own group only: the aggregator
/// merges the v3 index as given, and must not be offered `api/v1`. Relayed means authenticated
/// by the front proxy: the header alone, without the aggregator's certificate, changes nothing.
#[tokio::test]
async fn relayed_requests_see_warrants_group_only() {
    let proxy_ca = TestCa::new("front-proxy-ca");
    let api = api_auth(|authn, _| {
        authn.trust.set_front_proxy(Some(FrontProxy {
            ca: proxy_ca.bundle(),
            allowed_names: vec!["front-proxy-client".into()],
            headers: RequestHeaders::default(),
        }));
    });
    let aggregator = proxy_ca.issue_client("front-proxy-client", &[]);
    let relayed = [("x-remote-user", "system:aggregator")];
    let index = api
        .send_with_peer(
            Method::GET,
            "/openapi/v3",
            Some(aggregator.peer()),
            &relayed,
            None,
        )
        .await;
    assert_eq!(keys(&index.json["paths"]), ["apis/warrant.dev/v1alpha1"]);
    let v2 = api
        .send_with_peer(
            Method::GET,
            "/openapi/v2",
            Some(aggregator.peer()),
            &relayed,
            None,
        )
        .await;
    assert!(
        keys(&v2.json["paths"])
            .iter()
            .all(|p| p.starts_with("/apis/warrant.dev/v1alpha1/")),
        "{}",
        v2.text
    );
    // The cluster's TokenReview stays kube-apiserver's: warrant describes only its own.
    assert!(
        v2.json["definitions"]
            .get("io.k8s.api.authentication.v1.TokenReview")
            .is_none(),
        "{}",
        v2.text
    );
    assert_eq!(
        v2.json["definitions"]["dev.warrant.v1alpha1.TokenReview"]["x-kubernetes-group-version-kind"],
        serde_json::json!([{"group": "warrant.dev", "kind": "TokenReview", "version": "v1alpha1"}])
    );
    let direct = api.get("/openapi/v2").await;
    assert_ne!(v2.headers["etag"], direct.headers["etag"]);
    // The header without the certificate: the direct view.
    let forged = api.get_with("/openapi/v2", &relayed).await;
    assert_eq!(forged.headers["etag"], direct.headers["etag"]);
}

/// Every described operation is served (it answers 401 without credentials, not 404), and no
/// other method is (405): the documents describe the router, not an aspiration.
#[tokio::test]
async fn documents_describe_what_the_router_serves() {
    let api = api();
    let v2 = api.get("/openapi/v2").await;
    let paths = v2.json["paths"].as_object().unwrap();
    assert_eq!(paths.len(), 4);
    for (template, item) in paths {
        let path = template
            .replace("{namespace}", "demo")
            .replace("{name}", "app");
        let post = api
            .send(
                Request::builder()
                    .method(Method::POST)
                    .uri(&path)
                    .body(Body::from("{}"))
                    .unwrap(),
            )
            .await;
        assert_eq!(post.code, StatusCode::UNAUTHORIZED, "POST {path}");
        for method in [Method::GET, Method::PATCH, Method::PUT, Method::DELETE] {
            let r = api
                .send(
                    Request::builder()
                        .method(method.clone())
                        .uri(&path)
                        .body(Body::empty())
                        .unwrap(),
                )
                .await;
            assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
        let body = &item["post"]["parameters"][0]["schema"]["$ref"];
        let name = body.as_str().unwrap().trim_start_matches("#/definitions/");
        assert!(v2.json["definitions"].get(name).is_some(), "{name}");
    }
}
