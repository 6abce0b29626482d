//! `GET /.well-known/spiffe-bundle`: the SPIFFE trust bundle of warrant's trust domain
//! ([`warrant_issuer::SpiffeRoots`]), for relying parties outside the cluster that verify pods'
//! X.509 certificates (the pod certificate signer's roots) and warrant's JWTs with one
//! document.
//!
//! Served only while the pod certificate signer runs ([`AppState::set_spiffe_roots`]); `404`
//! otherwise, as the OIDC documents are without an issuer kube-apiserver would publish. The
//! body is built once per change of either half (a key rotation, a CA rotation) and served as
//! prepared bytes with an ETag, and with the JWKS's `Cache-Control`; `spiffe_refresh_hint` is
//! that max-age.

use std::sync::{Mutex, PoisonError};

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH};
use http::{HeaderMap, StatusCode};
use warrant_issuer::{SpiffeRoots, spiffe_max_age};

use crate::error::ApiError;
use crate::state::AppState;

/// Where the bundle is served.
pub const SPIFFE_BUNDLE_PATH: &str = "/.well-known/spiffe-bundle";

/// The roots, with the last body built from them.
#[derive(Debug)]
pub(crate) struct ServedRoots {
    roots: SpiffeRoots,
    built: Mutex<Option<Built>>,
}

#[derive(Debug, Clone)]
struct Built {
    jwks_etag: HeaderValue,
    body: Bytes,
    etag: HeaderValue,
}

impl ServedRoots {
    pub(crate) fn new(roots: SpiffeRoots) -> ServedRoots {
        ServedRoots {
            roots,
            built: Mutex::new(None),
        }
    }
}

/// `GET /.well-known/spiffe-bundle`.
pub(crate) fn bundle(state: &AppState, headers: &HeaderMap) -> Response {
    let Some(roots) = state.spiffe_roots() else {
        return ApiError::no_such_path().into_response();
    };
    let published = state.issuer().published();
    let cache_control = published.cache_control(state.issuer().clock().now());
    let built = {
        let mut built = roots.built.lock().unwrap_or_else(PoisonError::into_inner);
        match built.as_ref() {
            Some(done) if done.jwks_etag == *published.jwks_etag() => done.clone(),
            _ => {
                let hint = cache_control.to_str().ok().and_then(spiffe_max_age);
                let Some(body) = roots.roots.bundle(published.jwks(), hint) else {
                    return ApiError::internal("the SPIFFE bundle could not be built")
                        .into_response();
                };
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &body);
                let short = digest.as_ref().get(..16).unwrap_or_default();
                let tag = format!("\"{}\"", URL_SAFE_NO_PAD.encode(short));
                let done = Built {
                    jwks_etag: published.jwks_etag().clone(),
                    body,
                    etag: HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"\"")),
                };
                *built = Some(done.clone());
                done
            }
        }
    };
    let unchanged = headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == built.etag
        });
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = built.body.into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    };
    response.headers_mut().insert(CACHE_CONTROL, cache_control);
    response.headers_mut().insert(ETAG, built.etag);
    response
}
