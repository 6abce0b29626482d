//! warrant's HTTP API over TLS: TokenRequest and TokenReview as kube-apiserver serves them, the
//! OIDC discovery document and JWKS, Kubernetes API discovery and OpenAPI, health and metrics.
//!
//! [`router`] builds the whole API as a tower `Service` ([`Api`]; handlers are testable without a
//! socket);
//! [`serve`] runs it on a TLS listener.

mod admission;
mod audit;
mod body;
mod claims;
mod connections;
mod discovery;
mod error;
mod health;
mod metrics;
mod observe;
mod openapi;
mod process;
mod protobuf;
mod review;
mod routes;
mod spiffe;
mod state;
mod steps;
mod tls;
mod tokenrequest;
mod tokenreview;

/// What this build is: version, git commit, build date (the commit's) and platform in Go's
/// names, as `/version` and `warrant --version` say (see build.rs).
pub mod build {
    /// warrant's version.
    pub const VERSION: &str = env!("CARGO_PKG_VERSION");
    /// The git commit built, or empty.
    pub const GIT_COMMIT: &str = env!("WARRANT_GIT_COMMIT");
    /// `clean` or `dirty`: whether the tree built had changes beside that commit (kube's
    /// `gitTreeState`), or empty when it is not known.
    pub const GIT_TREE_STATE: &str = env!("WARRANT_GIT_TREE_STATE");
    /// When that commit was made (RFC 3339, UTC), or empty.
    pub const BUILD_DATE: &str = env!("WARRANT_BUILD_DATE");
    /// `linux/amd64`, as Go names platforms.
    pub const PLATFORM: &str = env!("WARRANT_PLATFORM");
    /// `0.1.0 (commit 0123456789ab, built 2026-11-25T04:00:00Z, linux/amd64)`.
    pub const VERSION_LINE: &str = env!("WARRANT_VERSION_LINE");
}

// The check build.rs makes of `WARRANT_VERSION`, and what it reads and watches of git,
// unit-tested here.
#[cfg(test)]
#[path = "../build/git_state.rs"]
mod git_state;
#[cfg(test)]
#[path = "../build/release_version.rs"]
mod release_version;

/// Entry points for the fuzz targets (`fuzz/`) and their corpus replay; not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// Decodes `bytes` as every request body in every format, asserting what must hold for
    /// any input (no panic, short error messages that quote nothing).
    pub fn request_body(bytes: &[u8]) {
        crate::body::check_decoder::<warrant_proto::wire::TokenRequest>(bytes);
        crate::body::check_decoder::<warrant_proto::wire::TokenReview>(bytes);
        crate::body::check_decoder::<crate::admission::AdmissionReview>(bytes);
    }

    /// Runs token injection's webhook on `bytes` as a `/mutate/pods` body, short of its
    /// lookups, asserting what must hold for any input (no panic, short messages whatever the
    /// body quotes, a patch within its bound).
    pub fn admission_review(bytes: &[u8]) {
        crate::admission::check_review(bytes);
    }

    /// Matches `bytes` (as a path, if UTF-8) against the route table, asserting that it
    /// matches as the plain reading of the templates does and that nothing after it panics.
    pub fn request_path(bytes: &[u8]) {
        crate::routes::check_find(bytes);
    }
}

/// The route table's items the OpenAPI generator (`tests/openapi/`) reads; not an API.
#[doc(hidden)]
pub mod tooling;

use std::time::Duration;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};

pub use admission::{
    AZURE_DEFAULT_AUTHORITY_HOST, AdmissionCallers, AdmissionLimits, InjectionSettings,
    LOOKUPS_IN_FLIGHT, MAX_REVIEW_VALUES, REMEMBER_ABSENT, REQUIRED_LABEL_VALUE,
    TOKEN_AGENT_DEFAULT_AUDIENCE,
};
pub use audit::ClientAddress;
pub use body::MAX_BODY_BYTES;
pub use connections::{
    Connections, RESERVED_DESCRIPTORS, ServeOptions, default_per_address, max_connections_for,
};
pub use error::ApiError;
pub use metrics::ReviewResult;
pub use observe::serve_observe;
pub use state::{AppState, StateParts};
pub use tls::{
    ServingCertificate, TlsError, TlsFiles, TlsMinVersion, TlsSettings, serve, server_config,
};

use crate::routes::Endpoint;
use crate::steps::Admitted;

/// How long a request may take before it is abandoned.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The whole API: every request goes through the steps of [`steps`], in the order
/// [`serve_request`] gives, to [`dispatch`].
pub fn router(state: AppState) -> Api {
    Api(state)
}

/// The whole API as a tower `Service`: what [`router`] returns, what the TLS listener runs and
/// what tests send requests to. Every request goes to [`serve_request`]; the route table does
/// the routing, so there is no second router in front of it.
#[derive(Clone)]
pub struct Api(AppState);

impl<B> tower::Service<http::Request<B>> for Api
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response, Self::Error>> + Send + 'static>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let state = self.0.clone();
        let request = request.map(axum::body::Body::new);
        Box::pin(async move { Ok(serve_request(state, request).await) })
    }
}

/// One request, start to end: the one place the order of the steps is written (see
/// [`steps`]). A panic anywhere in it is a 500, never a dropped connection.
async fn serve_request(state: AppState, request: Request) -> Response {
    use futures::FutureExt as _;
    let state = &state;
    let chain = steps::track(state, request, |request, routed| {
        audit::step(state, request, routed, |request, routed, seen| {
            steps::timed(request, |request| {
                steps::authenticate(state, request, seen, |request, caller| {
                    steps::authorize(state, request, routed, caller, |request, admitted| {
                        dispatch(state, request, admitted)
                    })
                })
            })
        })
    });
    match std::panic::AssertUnwindSafe(chain).catch_unwind().await {
        Ok(response) => response,
        Err(_) => ApiError::internal("the request handler failed").into_response(),
    }
}

/// Answers a request with its route's handler. The route was found by the first step, from
/// the one route table ([`routes::ROUTES`]); no other code matches paths. Handlers are given
/// what the steps established (the caller, the route's parameters) as arguments, as each step
/// is; authorization left the grant ([`Authorized`](warrant_auth::Authorized)) in the request's
/// extensions for the one handler that reads it.
async fn dispatch(state: &AppState, request: Request, admitted: Admitted) -> Response {
    let Admitted {
        route,
        params,
        caller,
    } = admitted;
    let route = match route {
        Some((route, true)) => route,
        Some((route, false)) => {
            let mut response = ApiError::method_not_allowed().into_response();
            response.headers_mut().insert(
                http::header::ALLOW,
                http::HeaderValue::from_static(route.verb.allowed()),
            );
            return response;
        }
        None => return ApiError::no_such_path().into_response(),
    };
    let head = request.method() == http::Method::HEAD;
    let caller = &caller;
    // The three handlers that wait (on the body, the cache, a signature) are boxed: their
    // futures are many kilobytes, and unboxed they would be part of the request's one future,
    // which is moved into its box for every request, `GET /version` too (8,000 instructions a
    // request more, measured with callgrind: docs/benchmarks.md, issue 35).
    let response = match route.endpoint {
        Endpoint::TokenRequest => Box::pin(tokenrequest::create(state, caller, request)).await,
        Endpoint::TokenReview => {
            let served = route.group_version.map_or("", |gv| gv.api_version);
            Box::pin(tokenreview::create(state, caller, served, request)).await
        }
        Endpoint::Admission => Box::pin(admission::review(state, caller, request)).await,
        Endpoint::OpenIdConfiguration => discovery::openid_configuration(state, request.headers()),
        Endpoint::Jwks => discovery::jwks(state, request.headers()),
        Endpoint::SpiffeBundle => spiffe::bundle(state, request.headers()),
        Endpoint::CoreVersions | Endpoint::Groups | Endpoint::Group | Endpoint::Resources => {
            discovery::api(route)
        }
        Endpoint::OpenApiV2 => openapi::v2(caller, request.headers()),
        Endpoint::OpenApiV3Index => openapi::v3_index(caller, request.headers()),
        Endpoint::OpenApiV3 => openapi::v3_group_version(&params, request.uri(), request.headers()),
        Endpoint::Version => discovery::version().await,
        Endpoint::Livez => match query(&request) {
            Ok(query) => health::livez(state, caller, &query),
            Err(rejected) => rejected.into_response(),
        },
        Endpoint::LivezCheck => health::livez_check(state, caller, &params),
        Endpoint::Readyz => match query(&request) {
            Ok(query) => health::readyz(state, caller, &query),
            Err(rejected) => rejected.into_response(),
        },
        Endpoint::ReadyzCheck => health::readyz_check(state, caller, &params),
        // Authorized by the authorization layer (`get` on the path `/metrics`), as in
        // kube-apiserver.
        Endpoint::Metrics => discovery::metrics(state),
    };
    if head {
        // HEAD is GET without the body, headers kept.
        response.map(|_| axum::body::Body::empty())
    } else {
        response
    }
}

/// The query of a health check's request (`?verbose`, `?exclude=NAME`), or the 400 of one
/// that does not decode.
fn query(
    request: &Request,
) -> Result<Vec<(String, String)>, axum::extract::rejection::QueryRejection> {
    axum::extract::Query::try_from_uri(request.uri()).map(|axum::extract::Query(query)| query)
}
