//! The read-only endpoints: OIDC discovery and JWKS for relying parties, Kubernetes API
//! discovery for kubectl and kube-apiserver's aggregator, version and metrics (health is
//! `health.rs`).
//!
//! Every body here except health and metrics is fixed once the server starts (or, for the key
//! documents, once per key-set change), so handlers copy prepared bytes.

use std::sync::OnceLock;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH};
use http::{HeaderMap, StatusCode};
use jiff::Timestamp;
use serde_json::{Map, Value, json};
use warrant_proto::groups::GroupVersion;

use crate::error::ApiError;
use crate::routes::{Endpoint, Parent, ROUTES, Resource, Route, discoverable};
use crate::state::AppState;
use warrant_issuer::Published;

/// True if an `If-None-Match` header matches `etag` (weak comparison, as RFC 9110 asks for
/// `If-None-Match`: a `W/` prefix is ignored; `*` matches anything).
fn not_modified(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let Ok(etag) = etag.to_str() else {
        return false;
    };
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim())
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

/// A key document: the prepared bytes with their type, ETag and max-age, or 304 if the
/// client's copy is current (with the same ETag and Cache-Control, as RFC 9110 requires).
pub(crate) fn document(
    published: &Published,
    now: Timestamp,
    headers: &HeaderMap,
    body: &Bytes,
    etag: &HeaderValue,
    content_type: &'static str,
) -> Response {
    let cache_control = published.cache_control(now);
    let mut response = if not_modified(headers, etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = body.clone().into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    };
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, cache_control);
    headers.insert(ETAG, etag.clone());
    response
}

/// `GET /.well-known/openid-configuration`.
pub(crate) fn openid_configuration(state: &AppState, headers: &HeaderMap) -> Response {
    let published = state.issuer().published();
    match (published.discovery(), published.discovery_etag()) {
        (Ok(doc), Some(etag)) => document(
            &published,
            state.issuer().clock().now(),
            headers,
            doc,
            etag,
            "application/json",
        ),
        // As kube-apiserver: without a publishable issuer the endpoints are not served.
        _ => ApiError::no_such_path().into_response(),
    }
}

/// `GET /openid/v1/jwks`.
pub(crate) fn jwks(state: &AppState, headers: &HeaderMap) -> Response {
    let published = state.issuer().published();
    // With no key left to verify (the signing key revoked, no successor made yet), the key set
    // is served empty, so that relying parties drop the keys they cached; only the discovery
    // document, which must name an algorithm, goes.
    if let Err(error) = published.discovery()
        && !matches!(error, warrant_token::DocumentError::NoKeys)
    {
        return ApiError::no_such_path().into_response();
    }
    document(
        &published,
        state.issuer().clock().now(),
        headers,
        published.jwks(),
        published.jwks_etag(),
        "application/jwk-set+json",
    )
}

/// A JSON document that never changes while the server runs: built on first use, then served as
/// the same bytes.
struct Fixed {
    body: OnceLock<Bytes>,
    build: fn() -> Value,
}

impl Fixed {
    const fn new(build: fn() -> Value) -> Fixed {
        Fixed {
            body: OnceLock::new(),
            build,
        }
    }

    fn response(&self) -> Response {
        let body = self.body.get_or_init(|| {
            #[allow(clippy::expect_used)]
            let body = serde_json::to_vec(&(self.build)())
                .expect("a JSON value built in memory always serializes");
            Bytes::from(body)
        });
        let mut response = body.clone().into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}

/// The version warrant reports: the Kubernetes API level it emulates, with warrant's own
/// version as build metadata, so kubectl's version-skew check reflects the API warrant speaks.
static VERSION: Fixed = Fixed::new(|| {
    json!({
        "major": "1",
        "minor": "36",
        "gitVersion": concat!("v1.36.0+warrant-", env!("CARGO_PKG_VERSION")),
        "gitCommit": crate::build::GIT_COMMIT,
        "gitTreeState": crate::build::GIT_TREE_STATE,
        "buildDate": crate::build::BUILD_DATE,
        "goVersion": "",
        "compiler": "rustc",
        "platform": crate::build::PLATFORM,
    })
});

/// `GET /version`.
pub(crate) async fn version() -> Response {
    VERSION.response()
}

/// Kubernetes API discovery (`/api`, `/api/v1`, `/apis`, `/apis/<group>`,
/// `/apis/<group>/<version>`), each document built from the route table on first use.
pub(crate) fn api(route: &'static Route) -> Response {
    static DOCUMENTS: OnceLock<Vec<(&'static str, Bytes)>> = OnceLock::new();
    let documents = DOCUMENTS.get_or_init(|| {
        ROUTES
            .iter()
            .filter_map(|r| {
                let document = api_document(r)?;
                #[allow(clippy::expect_used)]
                let body = serde_json::to_vec(&document)
                    .expect("a JSON value built in memory always serializes");
                Some((r.path, Bytes::from(body)))
            })
            .collect()
    });
    let Some((_, body)) = documents.iter().find(|(path, _)| *path == route.path) else {
        return ApiError::no_such_path().into_response();
    };
    let mut response = body.clone().into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The discovery document a route serves, if it is one of API discovery's.
fn api_document(route: &Route) -> Option<Value> {
    let gv = route.group_version;
    Some(match (route.endpoint, gv) {
        (Endpoint::CoreVersions, _) => {
            let versions: Vec<&str> = ROUTES
                .iter()
                .filter(|r| r.endpoint == Endpoint::Resources)
                .filter_map(|r| r.group_version)
                .filter(|gv| gv.group.is_empty())
                .map(|gv| gv.version)
                .collect();
            json!({"kind": "APIVersions", "versions": versions, "serverAddressByClientCIDRs": null})
        }
        (Endpoint::Groups, _) => {
            let groups: Vec<Value> = ROUTES
                .iter()
                .filter(|r| r.endpoint == Endpoint::Group)
                .filter_map(|r| r.group_version)
                .map(|gv| group(gv, false))
                .collect();
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        }
        (Endpoint::Group, Some(gv)) => group(gv, true),
        (Endpoint::Resources, Some(gv)) => {
            let mut resources: Vec<Value> = Vec::new();
            for resource in discoverable()
                .filter(|r| r.group_version == Some(gv))
                .filter_map(|r| r.endpoint.resource())
            {
                if let Some(parent) = resource.parent {
                    resources.push(parent_resource(parent, resource.namespaced));
                }
                resources.push(api_resource(resource));
            }
            let mut list = Map::new();
            list.insert("kind".into(), "APIResourceList".into());
            // As kube-apiserver: the core group's list carries no apiVersion.
            if !gv.group.is_empty() {
                list.insert("apiVersion".into(), "v1".into());
            }
            list.insert("groupVersion".into(), gv.api_version.into());
            list.insert("resources".into(), resources.into());
            Value::Object(list)
        }
        _ => return None,
    })
}

/// An `APIResource`. A TokenRequest names its body's group and version: it is an
/// `authentication.k8s.io/v1` object in every group that serves it, as kube-apiserver lists it.
fn api_resource(resource: Resource) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), resource.name.into());
    entry.insert("singularName".into(), resource.singular.into());
    entry.insert("namespaced".into(), resource.namespaced.into());
    if let Some(gv) = resource.kind_group_version {
        entry.insert("group".into(), gv.group.into());
        entry.insert("version".into(), gv.version.into());
    }
    entry.insert("kind".into(), resource.kind.into());
    entry.insert("verbs".into(), json!(["create"]));
    Value::Object(entry)
}

/// The resource a subresource belongs to: listed, with no verbs, so that its group and
/// version resolve for kubectl and RBAC tools; warrant serves none of its own operations.
fn parent_resource(parent: Parent, namespaced: bool) -> Value {
    json!({
        "name": parent.name,
        "singularName": parent.singular,
        "namespaced": namespaced,
        "kind": parent.kind,
        "verbs": [],
    })
}

/// An `APIGroup` with its one version; inside an `APIGroupList` it carries no kind of its own.
fn group(gv: GroupVersion, standalone: bool) -> Value {
    let version = json!({"groupVersion": gv.api_version, "version": gv.version});
    if standalone {
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": gv.group, "versions": [version], "preferredVersion": version})
    } else {
        json!({"name": gv.group, "versions": [version], "preferredVersion": version})
    }
}

/// `GET /metrics`: Prometheus text format.
pub(crate) fn metrics(state: &AppState) -> Response {
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, state.registry()).is_err() {
        return ApiError::internal("failed to encode metrics").into_response();
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}
