//! warrant's HTTP API over TLS: TokenRequest and TokenReview as kube-apiserver serves them, the
//! OIDC discovery document and JWKS, Kubernetes API discovery and OpenAPI, health and metrics.
//!
//! [`router`] builds the whole API as an axum `Router` (handlers are testable without a socket);
//! [`serve`] runs it on a TLS listener.

mod authn;
mod authz;
mod body;
mod connections;
mod delegation;
mod discovery;
mod error;
mod loglimit;
mod metrics;
mod openapi;
mod protobuf;
mod published;
mod settings;
mod signatures;
mod state;
mod tls;
mod tokenrequest;
mod tokenreview;
pub mod wire;

/// Entry points for the fuzz targets (`fuzz/`) and their corpus replay; not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes `bytes` as every request body in every format, asserting what must hold for
    /// any input (no panic, short error messages that quote nothing).
    pub fn request_body(bytes: &[u8]) {
        crate::body::check_decoders(bytes);
    }
}

use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;

pub use authn::{
    Authenticator, CaBundle, CaError, Caller, ClientTrust, DelegatedAuthentication, Follow,
    FrontProxy, PeerCertificate, RequestHeaders, TokenFile, TokenFileError, User, Via,
    follow_extension_authentication,
};
pub use authz::{
    Attributes, Authorized, Authorizer, DEFAULT_ALWAYS_ALLOW_GROUPS, DEFAULT_ALWAYS_ALLOW_PATHS,
    DelegatedAuthorization, Grant, Policy, PolicyError, PolicyFile, ResourceAttributes,
};
pub use body::MAX_BODY_BYTES;
pub use connections::{Connections, RESERVED_DESCRIPTORS, ServeOptions, max_connections_for};
pub use delegation::{
    Backoff, DEFAULT_MAX_IN_FLIGHT, DelegationError, DelegationOptions, MAX_DELEGATED_TOKEN_BYTES,
};
pub use error::ApiError;
pub use loglimit::{LOGGED_ITEM_CHARS, bounded, bounded_list};
pub use metrics::ReviewResult;
pub use published::{DOCUMENT_MAX_AGE_SECONDS, DOCUMENT_MIN_MAX_AGE_SECONDS, Published};
pub use settings::{
    DEFAULT_SIGNATURE_CACHE_ENTRIES, Settings, SettingsError, validate_issuers,
    validate_max_expiration,
};
pub use state::{AppState, StateParts};
pub use tls::{ServingCertificate, TlsError, TlsFiles, serve, server_config};
pub use warrant_watch::{FileWatch, WatchError};

use crate::tokenreview::ServedVersion;
use crate::wire::{AUTHENTICATION_V1, AUTHENTICATION_V1BETA1, WARRANT_V1ALPHA1};

/// How long a request may take before it is abandoned.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The whole API.
pub fn router(state: AppState) -> Router {
    let review =
        |version: &'static str| post(tokenreview::create).layer(Extension(ServedVersion(version)));
    Router::new()
        .route(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            post(tokenrequest::create),
        )
        .route(
            "/apis/warrant.dev/v1alpha1/namespaces/{namespace}/serviceaccounts/{name}/token",
            post(tokenrequest::create),
        )
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            review(AUTHENTICATION_V1),
        )
        .route(
            "/apis/authentication.k8s.io/v1beta1/tokenreviews",
            review(AUTHENTICATION_V1BETA1),
        )
        .route(
            "/apis/warrant.dev/v1alpha1/tokenreviews",
            review(WARRANT_V1ALPHA1),
        )
        .route(
            "/.well-known/openid-configuration",
            get(discovery::openid_configuration),
        )
        .route("/openid/v1/jwks", get(discovery::jwks))
        .route("/api", get(discovery::core_versions))
        .route("/api/v1", get(discovery::core_v1))
        .route("/apis", get(discovery::groups))
        .route(
            "/apis/authentication.k8s.io",
            get(discovery::authentication_group),
        )
        .route(
            "/apis/authentication.k8s.io/v1",
            get(discovery::authentication_v1),
        )
        .route("/apis/warrant.dev", get(discovery::warrant_group))
        .route(
            "/apis/warrant.dev/v1alpha1",
            get(discovery::warrant_v1alpha1),
        )
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::v3_index))
        .route(
            "/openapi/v3/{*group_version}",
            get(openapi::v3_group_version),
        )
        .route("/version", get(discovery::version))
        .route("/livez", get(discovery::livez))
        .route("/readyz", get(discovery::readyz))
        .route("/healthz", get(discovery::readyz))
        .route("/metrics", get(metrics_endpoint))
        .fallback(|| async { ApiError::no_such_path().into_response() })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed().into_response() })
        .layer(from_fn_with_state(state.clone(), authz::authorize))
        .layer(from_fn_with_state(state.clone(), authn::authenticate))
        .layer(TimeoutLayer::with_status_code(
            http::StatusCode::GATEWAY_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .layer(from_fn_with_state(state.clone(), metrics::track))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::internal("the request handler failed").into_response()
        }))
        .with_state(state)
}

/// `/metrics` needs an authorized caller (`get` on the path `/metrics`), as in kube-apiserver:
/// the authorization layer has checked it.
async fn metrics_endpoint(state: axum::extract::State<AppState>) -> axum::response::Response {
    discovery::metrics(state).await
}
