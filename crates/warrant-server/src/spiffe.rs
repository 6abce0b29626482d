//! `GET /.well-known/spiffe-bundle`: the SPIFFE trust bundle of warrant's trust domain
//! ([`warrant_issuer::SpiffeRoots`]), for relying parties outside the cluster that verify pods'
//! X.509 certificates (the pod certificate signer's roots) and warrant's JWTs with one
//! document.
//!
//! Served only while the pod certificate signer runs ([`AppState::set_spiffe_roots`]); `404`
//! otherwise, as the OIDC documents are without an issuer kube-apiserver would publish. The
//! body is built once per change of either half (a key rotation, a CA rotation) and served as
//! prepared bytes with an ETag, and with the JWKS's `Cache-Control`; `spiffe_refresh_hint` is
//! [`warrant_issuer::SPIFFE_REFRESH_HINT_SECONDS`].

use std::sync::{Mutex, PoisonError};

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::HeaderMap;
use http::header::HeaderValue;
use warrant_issuer::SpiffeRoots;

use crate::discovery::document;
use crate::error::ApiError;
use crate::state::AppState;

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

/// `GET /.well-known/spiffe-bundle`: as the JWKS is served (ETag, `304`, its
/// `Cache-Control`), from bytes built once per key set.
pub(crate) fn bundle(state: &AppState, headers: &HeaderMap) -> Response {
    let Some(roots) = state.spiffe_roots() else {
        return ApiError::no_such_path().into_response();
    };
    let published = state.issuer().published();
    let built = {
        let mut built = roots.built.lock().unwrap_or_else(PoisonError::into_inner);
        match built.as_ref() {
            Some(done) if done.jwks_etag == *published.jwks_etag() => done.clone(),
            _ => {
                let Some(body) = roots.roots.bundle(published.jwks()) else {
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
    document(
        &published,
        state.issuer().clock().now(),
        headers,
        &built.body,
        &built.etag,
        "application/json",
    )
}
