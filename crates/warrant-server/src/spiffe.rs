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

pub(crate) mod roots;

use axum::response::{IntoResponse, Response};
use http::HeaderMap;

use crate::discovery::document;
use crate::error::ApiError;
use crate::state::AppState;

/// `GET /.well-known/spiffe-bundle`: as the JWKS is served (ETag, `304`, its
/// `Cache-Control`), from bytes built once per key set.
pub(crate) fn bundle(state: &AppState, headers: &HeaderMap) -> Response {
    let Some(roots) = state.spiffe_roots() else {
        return ApiError::no_such_path().into_response();
    };
    let published = state.issuer().published();
    let Some(built) = roots.bundle(&published) else {
        return ApiError::internal("the SPIFFE bundle could not be built").into_response();
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
