//! The steps every request passes before its handler, outermost first (see [`crate::router`]):
//!
//! 1. (panic catching;)
//! 2. [`track`]: matches the route (the one parse of the path, [`crate::routes::find`]), then
//!    counts and times the request under the route's label;
//! 3. [`crate::audit::step`]: the audit event of a TokenRequest or TokenReview;
//! 4. [`timed`]: the request timeout;
//! 5. [`authenticate`]: the caller, by warrant-auth's chain, with this server's review of its
//!    own tokens;
//! 6. [`authorize`]: kube's attributes of the matched route, decided by warrant-auth's
//!    authorizers;
//! 7. [`crate::dispatch`]: the route's handler.
//!
//! Each step is a plain async function that calls the next: one future per request, where
//! tower layers (axum's `from_fn`) cloned and boxed the service beneath them at every step of
//! every request (docs/benchmarks.md measured what that cost).
//!
//! These are the only code besides the handlers that reads the server's state.

use std::future::Future;
use std::pin::Pin;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::Method;
use jiff::Timestamp;
use warrant_auth::{
    Authorized, Caller, OwnTokenReview, OwnTokens, PeerCertificate, Refusal, Verdict,
};

use crate::error::ApiError;
use crate::review::review_token;
use crate::routes::{self, Routed};
use crate::state::AppState;

/// Matches the request to its route (once, for every layer after it), then counts and times it
/// under the route's label.
pub(crate) async fn track(state: AppState, mut request: Request) -> Response {
    let start = tokio::time::Instant::now();
    let routed =
        routes::find_for_issuer(request.method(), request.uri().path(), state.issuer_path());
    let route = routed.label();
    request.extensions_mut().insert(routed);
    let method = method_label(request.method());
    let response = crate::audit::step(&state, request).await;
    state
        .metrics()
        .request(route, method, response.status().as_u16(), start.elapsed());
    response
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Answers with 504 (no body) if the request takes longer than [`crate::REQUEST_TIMEOUT`].
pub(crate) async fn timed(state: &AppState, request: Request) -> Response {
    match tokio::time::timeout(crate::REQUEST_TIMEOUT, authenticate(state, request)).await {
        Ok(response) => response,
        Err(_) => http::StatusCode::GATEWAY_TIMEOUT.into_response(),
    }
}

/// This server's review of its own tokens, for the own-token authenticator: the same review as
/// TokenReview's, for the API audiences.
struct OwnTokensOf<'a>(&'a AppState);

impl OwnTokens for OwnTokensOf<'_> {
    fn review<'a>(
        &'a self,
        token: &'a str,
        now: Timestamp,
    ) -> Pin<Box<dyn Future<Output = OwnTokenReview> + Send + 'a>> {
        Box::pin(async move {
            let state = self.0;
            let published = state.published();
            let reviewed = review_token(
                &published,
                state.objects(),
                state.metrics(),
                token,
                &[],
                now,
            )
            .await;
            match reviewed {
                Ok(verified) => OwnTokenReview::Valid {
                    user: verified.user_info(),
                    binding: verified.claims.binding(),
                },
                Err(refused) if refused.not_mine() => OwnTokenReview::NotMine,
                Err(refused) => OwnTokenReview::Invalid(refused.reason),
            }
        })
    }
}

/// Attaches the [`Caller`] to the request (or answers 401), then removes the identity headers
/// so nothing downstream reads one a client sent.
pub(crate) async fn authenticate(state: &AppState, mut request: Request) -> Response {
    let peer = request
        .extensions()
        .get::<PeerCertificate>()
        .cloned()
        .unwrap_or_default();
    let now = state.clock().now();
    let result = state
        .authenticator()
        .authenticate(&OwnTokensOf(state), request.headers(), &peer, now)
        .await;
    state
        .authenticator()
        .strip_identity_headers(request.headers_mut());
    match result {
        Ok(caller) => {
            // A connection that carried an authenticated request is the last kind closed to
            // make room for others (connections.rs).
            if let (Caller::User(_), Some(mark)) = (
                &caller,
                request
                    .extensions()
                    .get::<crate::connections::ConnectionMark>(),
            ) {
                mark.authenticated();
            }
            // The audit step, outside the timeout, reads the caller of an audited request.
            if let Some(seen) = request.extensions().get::<crate::audit::CallerSeen>() {
                seen.saw(&caller);
            }
            request.extensions_mut().insert(caller);
            authorize(state, request).await
        }
        Err(refusal) => ApiError::from(refusal).into_response(),
    }
}

/// Authorizes protected requests and attaches [`Authorized`]; public ones pass. A path that
/// does not decode is refused here, before anything reads it.
pub(crate) async fn authorize(state: &AppState, mut request: Request) -> Response {
    let authorizer = state.authorizer();
    if authorizer.always_allowed_path(request.uri().path()) {
        return crate::dispatch(state, request).await;
    }
    let attributes = match request.extensions().get::<Routed>() {
        Some(Routed::BadPath) => {
            return ApiError::bad_request(
                "the request path is not valid: a segment does not decode (a bad %-escape, or not UTF-8)",
            )
            .into_response();
        }
        Some(routed) => routed.attributes(),
        None => {
            return ApiError::internal("the request reached authorization unrouted")
                .into_response();
        }
    };
    let Some(attributes) = attributes else {
        return crate::dispatch(state, request).await;
    };
    let user = match request.extensions().get::<Caller>() {
        Some(Caller::User(user)) => user.clone(),
        _ => return ApiError::unauthorized().into_response(),
    };
    let now = state.clock().now();
    match authorizer.decide(&user, &attributes, now).await {
        Verdict::Allow(grant) => {
            request
                .extensions_mut()
                .insert(Authorized { attributes, grant });
            crate::dispatch(state, request).await
        }
        Verdict::Deny(reason) | Verdict::NoOpinion(reason) => {
            tracing::info!(user = %user.name, ?attributes, "forbidden");
            ApiError::from(attributes.forbidden(&user.name, &reason)).into_response()
        }
        Verdict::Error(why) => {
            tracing::warn!(user = %user.name, ?attributes, error = %why, "authorization could not be decided");
            ApiError::from(Refusal::undecided(why)).into_response()
        }
    }
}
