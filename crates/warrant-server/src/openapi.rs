//! OpenAPI descriptions of warrant's API: `/openapi/v2` (JSON, or gnostic protobuf as client-go
//! asks for it) and `/openapi/v3` with one document per group-version.
//!
//! Why: `kubectl create -f` validates manifests by default, and to do that it downloads the
//! server's OpenAPI; without it, it refuses the manifest ("failed to download openapi").
//! kube-apiserver's aggregator also merges these documents into the cluster's.
//!
//! The documents describe only what warrant serves: the POST operations of TokenRequest and
//! TokenReview, and the types they take, with the fields warrant reads and writes. They are
//! data: generated from the route table and the wire types by the generator in
//! `tests/openapi/` (a test target, which fails when the committed files are stale), committed
//! under `crates/warrant-server/openapi/`, and compiled into the binary. At run time nothing is
//! rendered; requests copy those bytes.
//!
//! Which documents a request gets depends on whether kube-apiserver's aggregator relayed it:
//! through the aggregator only `warrant.dev` is described (see `tests/openapi/endpoints.rs`,
//! `View`, for why). The front-proxy authenticator marks such a request once it has verified the
//! aggregator's certificate (`Caller::relayed_by_aggregator`). The `X-Remote-User` header alone
//! proves nothing, and is removed from every request before it gets here.

use std::fmt::Write as _;
use std::sync::OnceLock;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH, LOCATION, VARY,
};
use http::{HeaderMap, StatusCode, Uri};

use crate::error::ApiError;
use crate::routes::Params;
use warrant_auth::Caller;

/// A committed document's bytes, compiled in.
macro_rules! file {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/", $name))
    };
}

/// One view's committed documents.
struct ViewFiles {
    v2_json: &'static [u8],
    v2_protobuf: &'static [u8],
    v3_index: &'static [u8],
}

// `DIRECT`, `AGGREGATED` and `V3`, written by the generator.
include!(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/files.rs"));

/// The entity tag of a document: the SHA-256 of its bytes, in upper-case hex (as
/// kube-apiserver's). `/openapi/v3` puts it in URLs as `hash`; the generator lists it in the
/// v3 index (through [`crate::tooling::openapi_hash`]).
pub(crate) fn hash(body: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body);
    digest.as_ref().iter().fold(String::new(), |mut hex, byte| {
        let _ = write!(hex, "{byte:02X}");
        hex
    })
}

/// The media type client-go asks `/openapi/v2` for, and the one kube-apiserver answers with
/// (it accepts both).
const PROTOBUF_V2_REQUESTED: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const JSON: &str = "application/json";

/// A document with its entity tag.
#[derive(Debug)]
struct Prepared {
    body: Bytes,
    /// Quoted, as the header carries it.
    etag: HeaderValue,
    /// The unquoted tag; `/openapi/v3` puts it in URLs as `hash`.
    hash: String,
}

impl Prepared {
    fn new(body: &'static [u8]) -> Prepared {
        let hash = hash(body);
        #[allow(clippy::expect_used)]
        let etag = HeaderValue::from_str(&format!("\"{hash}\""))
            .expect("quoted hex is a valid header value");
        Prepared {
            body: Bytes::from_static(body),
            etag,
            hash,
        }
    }
}

/// One view's documents.
#[derive(Debug)]
struct ViewDocuments {
    v2_json: Prepared,
    v2_protobuf: Prepared,
    v3_index: Prepared,
}

/// Every document.
#[derive(Debug)]
struct Documents {
    direct: ViewDocuments,
    aggregated: ViewDocuments,
    /// `(api/v1, document)`, …: the same for both views; a view's index lists its own.
    v3: Vec<(String, Prepared)>,
}

impl Documents {
    fn load() -> Documents {
        let view = |files: &ViewFiles| ViewDocuments {
            v2_json: Prepared::new(files.v2_json),
            v2_protobuf: Prepared::new(files.v2_protobuf),
            v3_index: Prepared::new(files.v3_index),
        };
        Documents {
            direct: view(&DIRECT),
            aggregated: view(&AGGREGATED),
            v3: V3
                .iter()
                .map(|(path, body)| ((*path).to_owned(), Prepared::new(body)))
                .collect(),
        }
    }

    fn view(&self, caller: &Caller) -> &ViewDocuments {
        if caller.relayed_by_aggregator() {
            &self.aggregated
        } else {
            &self.direct
        }
    }
}

/// The documents, with their tags computed on first use.
fn documents() -> &'static Documents {
    static DOCUMENTS: OnceLock<Documents> = OnceLock::new();
    DOCUMENTS.get_or_init(Documents::load)
}

/// The media type to answer with: the first of `offered` that the `Accept` header takes,
/// honouring its order of preference as kube-apiserver does (by quality, then specific types
/// before wildcards, then the client's order). No header takes anything.
fn negotiate<'a>(headers: &HeaderMap, offered: &[&'a str]) -> Option<&'a str> {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or("*/*");
    let mut ranges: Vec<(f32, &str, &str)> = accept
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';');
            let (kind, sub) = parts.next()?.trim().split_once('/')?;
            let quality = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            Some((quality, kind.trim(), sub.trim()))
        })
        .filter(|(quality, _, _)| *quality > 0.0)
        .collect();
    ranges.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then((a.1 == "*").cmp(&(b.1 == "*")))
            .then((a.2 == "*").cmp(&(b.2 == "*")))
    });
    ranges.iter().find_map(|(_, kind, sub)| {
        offered.iter().copied().find(|media: &&str| {
            let (k, s) = media.split_once('/').unwrap_or((*media, ""));
            (*kind == "*" || kind.eq_ignore_ascii_case(k))
                && (*sub == "*" || sub.eq_ignore_ascii_case(s))
        })
    })
}

/// True when the client already has this version (`If-None-Match`).
fn not_modified(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let Some(wanted) = headers.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let ours = etag.to_str().unwrap_or_default();
    wanted.split(',').map(str::trim).any(|tag| {
        tag == "*" || tag == ours || tag.strip_prefix("W/").is_some_and(|weak| weak == ours)
    })
}

/// The document, or 304 if the client has it.
fn answer(headers: &HeaderMap, document: &Prepared, content_type: &'static str) -> Response {
    let mut response = if not_modified(headers, &document.etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        document.body.clone().into_response()
    };
    let ok = response.status() == StatusCode::OK;
    let out = response.headers_mut();
    out.insert(ETAG, document.etag.clone());
    if ok {
        out.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    response
}

fn not_acceptable(offered: &[&str]) -> Response {
    ApiError::not_acceptable(offered).into_response()
}

/// `GET /openapi/v2`.
pub(crate) fn v2(caller: &Caller, headers: &HeaderMap) -> Response {
    let documents = documents();
    let view = documents.view(caller);
    let offered = [JSON, PROTOBUF_V2_REQUESTED, PROTOBUF_V2];
    let mut response = match negotiate(headers, &offered) {
        Some(JSON) => answer(headers, &view.v2_json, JSON),
        Some(_) => answer(headers, &view.v2_protobuf, PROTOBUF_V2),
        None => not_acceptable(&offered),
    };
    response
        .headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept, X-Remote-User"));
    response
}

/// `GET /openapi/v3`: the index.
pub(crate) fn v3_index(caller: &Caller, headers: &HeaderMap) -> Response {
    let documents = documents();
    let mut response = answer(headers, &documents.view(caller).v3_index, JSON);
    response
        .headers_mut()
        .insert(VARY, HeaderValue::from_static("X-Remote-User"));
    response
}

/// `GET /openapi/v3/{group-version}`: `api/v1`, `apis/<group>/<version>`.
pub(crate) fn v3_group_version(params: &Params, uri: &Uri, headers: &HeaderMap) -> Response {
    let group_version = &params.rest;
    let documents = documents();
    let Some((path, document)) = documents
        .v3
        .iter()
        .find(|(path, _)| *path == *group_version)
    else {
        return ApiError::no_such_path().into_response();
    };
    if negotiate(headers, &[JSON]).is_none() {
        return not_acceptable(&[JSON]);
    }
    let hash = uri.query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes()).find_map(|(k, v)| (k == "hash").then_some(v))
    });
    let mut response = match hash.as_deref() {
        // An out-of-date link: send the client to the current one, as kube-apiserver does.
        Some(hash) if hash != document.hash => {
            let mut response = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(location) =
                HeaderValue::from_str(&format!("/openapi/v3/{path}?hash={}", document.hash))
            {
                response.headers_mut().insert(LOCATION, location);
            }
            response
        }
        // A document named by its hash never changes.
        Some(_) => {
            let mut response = answer(headers, document, JSON);
            response.headers_mut().insert(
                CACHE_CONTROL,
                HeaderValue::from_static("public, immutable, max-age=31536000"),
            );
            response
        }
        None => answer(headers, document, JSON),
    };
    response
        .headers_mut()
        .insert(VARY, HeaderValue::from_static("Accept"));
    response
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn negotiation_follows_preference() {
        let offered = [JSON, PROTOBUF_V2_REQUESTED, PROTOBUF_V2];
        assert_eq!(negotiate(&HeaderMap::new(), &offered), Some(JSON));
        assert_eq!(negotiate(&accept("*/*"), &offered), Some(JSON));
        assert_eq!(negotiate(&accept("application/json"), &offered), Some(JSON));
        assert_eq!(
            negotiate(&accept(PROTOBUF_V2_REQUESTED), &offered),
            Some(PROTOBUF_V2_REQUESTED)
        );
        assert_eq!(negotiate(&accept(PROTOBUF_V2), &offered), Some(PROTOBUF_V2));
        assert_eq!(
            negotiate(
                &accept(&format!("application/json;q=0.5, {PROTOBUF_V2}")),
                &offered
            ),
            Some(PROTOBUF_V2)
        );
        assert_eq!(
            negotiate(&accept(&format!("*/*, {PROTOBUF_V2}")), &offered),
            Some(PROTOBUF_V2),
            "a specific type before a wildcard of the same quality"
        );
        assert_eq!(negotiate(&accept("text/html"), &offered), None);
        assert_eq!(negotiate(&accept("application/json;q=0"), &offered), None);
    }

    #[test]
    fn json_carries_the_kinds_kubectl_looks_up() {
        let v2: Value = serde_json::from_slice(&documents().direct.v2_json.body).unwrap();
        let kinds = |name: &str| v2["definitions"][name]["x-kubernetes-group-version-kind"].clone();
        assert_eq!(
            kinds("io.k8s.api.authentication.v1.TokenReview"),
            json!([{"group": "authentication.k8s.io", "kind": "TokenReview", "version": "v1"}])
        );
        assert_eq!(
            kinds("dev.warrant.v1alpha1.TokenReview"),
            json!([{"group": "warrant.dev", "kind": "TokenReview", "version": "v1alpha1"}])
        );
        assert_eq!(
            kinds("io.k8s.api.authentication.v1.TokenRequest"),
            json!([{"group": "authentication.k8s.io", "kind": "TokenRequest", "version": "v1"}])
        );
    }

    #[test]
    fn each_view_indexes_its_group_versions() {
        let documents = documents();
        let index = |view: &ViewDocuments| -> Vec<String> {
            let value: Value = serde_json::from_slice(&view.v3_index.body).unwrap();
            value["paths"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        };
        assert_eq!(
            index(&documents.direct),
            [
                "api/v1",
                "apis/authentication.k8s.io/v1",
                "apis/warrant.dev/v1alpha1"
            ]
        );
        assert_eq!(index(&documents.aggregated), ["apis/warrant.dev/v1alpha1"]);
    }

    #[test]
    fn conditional_requests() {
        let etag = HeaderValue::from_static("\"AB\"");
        let mut headers = HeaderMap::new();
        assert!(!not_modified(&headers, &etag));
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("\"XY\", \"AB\""));
        assert!(not_modified(&headers, &etag));
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("W/\"AB\""));
        assert!(not_modified(&headers, &etag));
        headers.insert(IF_NONE_MATCH, HeaderValue::from_static("\"XY\""));
        assert!(!not_modified(&headers, &etag));
    }
}
