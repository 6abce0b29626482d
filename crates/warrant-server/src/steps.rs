//! The steps every request passes before its handler. Their order is written once, in
//! [`crate::serve_request`]; each step is an async function that takes the request, the facts
//! earlier steps established (as typed values, not request extensions), and `next`: the rest of
//! the chain, a closure given the request and the facts this step adds. Outermost first:
//!
//! 1. (panic catching, in `serve_request`;)
//! 2. [`track`]: matches the route (the one parse of the path, [`crate::routes::find`]), then
//!    counts and times the request under the route's label. Adds: [`Routed`].
//! 3. [`crate::audit::step`]: the audit event of a TokenRequest or TokenReview. Adds: where
//!    authentication leaves the caller, for the event ([`CallerSeen`]), when the request is
//!    audited.
//! 4. [`timed`]: the request timeout.
//! 5. [`authenticate`]: the caller, by warrant-auth's chain, with this server's review of its
//!    own tokens. Adds: [`Caller`].
//! 6. [`authorize`]: kube's attributes of the matched route, decided by warrant-auth's
//!    authorizers. Adds: the route, its parameters and the grant ([`Admitted`]).
//! 7. [`crate::dispatch`]: the route's handler, given the caller and the route's parameters
//!    as arguments too.
//!
//! `next` is generic, so the chain compiles to one future per request: nothing is boxed or
//! cloned between steps (tower layers, axum's `from_fn`, cloned and boxed the service beneath
//! them at every step of every request: docs/benchmarks.md measured what that cost). A new step
//! is a function of this shape and one line in `serve_request`.
//!
//! These are the only code besides the handlers that reads the server's state.

use std::future::Future;
use std::pin::Pin;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::Method;
use jiff::Timestamp;
use warrant_auth::{
    Authorized, Caller, OwnTokenReview, OwnTokens, PeerCertificate, Refusal, RequestTarget, Verdict,
};

use crate::audit::CallerSeen;
use crate::error::ApiError;
use crate::review::review_token;
use crate::routes::{self, Params, Route, Routed};
use crate::state::AppState;

/// Matches the request to its route (once, for every step after it), then counts and times it
/// under the route's label.
pub(crate) async fn track<N, F>(state: &AppState, request: Request, next: N) -> Response
where
    N: FnOnce(Request, Routed) -> F,
    F: Future<Output = Response>,
{
    let start = tokio::time::Instant::now();
    let routed = routes::find_for_issuer(
        request.method(),
        request.uri().path(),
        state.issuer().issuer_path(),
    );
    let route = routed.label();
    let method = method_label(request.method());
    let response = next(request, routed).await;
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

/// Answers with 504 (no body) if the rest of the request takes longer than
/// [`crate::REQUEST_TIMEOUT`]; what it was doing is dropped.
pub(crate) async fn timed<N, F>(request: Request, next: N) -> Response
where
    N: FnOnce(Request) -> F,
    F: Future<Output = Response>,
{
    match tokio::time::timeout(crate::REQUEST_TIMEOUT, next(request)).await {
        Ok(response) => response,
        Err(_) => http::StatusCode::GATEWAY_TIMEOUT.into_response(),
    }
}

/// This server's review of its own tokens, for the own-token authenticator: the same review as
/// TokenReview's, for the API audiences (or the token agent's, for a token that names it).
struct OwnTokensOf<'a>(&'a AppState);

impl OwnTokens for OwnTokensOf<'_> {
    fn review<'a>(
        &'a self,
        token: &'a str,
        audience: Option<&'a str>,
        now: Timestamp,
    ) -> Pin<Box<dyn Future<Output = OwnTokenReview> + Send + 'a>> {
        Box::pin(async move {
            let state = self.0;
            let published = state.issuer().published();
            let audiences: Vec<String> = audience.map(str::to_owned).into_iter().collect();
            let reviewed = review_token(
                &published,
                state.objects(),
                state.metrics(),
                token,
                &audiences,
                now,
            )
            .await;
            match reviewed {
                Ok(verified) => OwnTokenReview::Valid {
                    user: verified.user_info(),
                    binding: verified.claims.binding(),
                    cnf: verified.claims.cnf.clone(),
                },
                Err(refused) if refused.not_mine() => OwnTokenReview::NotMine,
                Err(refused) => OwnTokenReview::Invalid(refused.reason),
            }
        })
    }
}

/// Finds the [`Caller`] (or answers 401), then removes the identity headers so nothing
/// downstream reads one a client sent. An audited request's [`CallerSeen`] learns the caller
/// here, so its event names the caller whatever answers the request.
pub(crate) async fn authenticate<N, F>(
    state: &AppState,
    mut request: Request,
    seen: Option<CallerSeen>,
    next: N,
) -> Response
where
    N: FnOnce(Request, Caller) -> F,
    F: Future<Output = Response>,
{
    let peer = request
        .extensions()
        .get::<PeerCertificate>()
        .cloned()
        .unwrap_or_default();
    let now = state.issuer().clock().now();
    let target = RequestTarget {
        method: request.method(),
        uri: request.uri(),
    };
    let result = state
        .authenticator()
        .authenticate(&OwnTokensOf(state), &target, request.headers(), &peer, now)
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
            if let Some(seen) = seen {
                seen.saw(&caller);
            }
            next(request, caller).await
        }
        Err(refusal) => ApiError::from(refusal).into_response(),
    }
}

/// What authorization lets through to the handler: the route, its parameters and the caller.
/// The grant of a protected route ([`Authorized`], large and read only by TokenRequest's
/// handler) goes to the handler in the request's extensions instead of through every step
/// after this one: moved by value, it cost each request a copy of its size (measured:
/// docs/benchmarks.md, "Request steps").
#[derive(Debug)]
pub(crate) struct Admitted {
    /// The route, and whether it takes the request's method (405 otherwise).
    pub(crate) route: Option<(&'static Route, bool)>,
    /// The route's parameters, decoded.
    pub(crate) params: Params,
    /// Who called.
    pub(crate) caller: Caller,
}

/// Authorizes a protected request; public ones pass. A path that does not decode is refused
/// here, before anything reads it; one that matches no route goes on to its 404.
pub(crate) async fn authorize<N, F>(
    state: &AppState,
    mut request: Request,
    routed: Routed,
    caller: Caller,
    next: N,
) -> Response
where
    N: FnOnce(Request, Admitted) -> F,
    F: Future<Output = Response>,
{
    let authorizer = state.authorizer();
    let always_allowed = authorizer.always_allowed_path(request.uri().path());
    let attributes = if always_allowed {
        None
    } else if let Routed::BadPath = routed {
        return ApiError::bad_request(
            "the request path is not valid: a segment does not decode (a bad %-escape, or not UTF-8)",
        )
        .into_response();
    } else {
        routed.attributes()
    };
    let (route, params) = match routed {
        Routed::Route {
            route,
            params,
            allowed,
        } => (Some((route, allowed)), params),
        Routed::NotFound | Routed::BadPath => (None, Params::default()),
    };
    let Some(attributes) = attributes else {
        let admitted = Admitted {
            route,
            params,
            caller,
        };
        return next(request, admitted).await;
    };
    let Caller::User(user) = &caller else {
        return ApiError::unauthorized().into_response();
    };
    let now = state.issuer().clock().now();
    let decided = authorizer.decide(user, &attributes, now).await;
    match decided.verdict {
        Verdict::Allow(grant) => {
            request.extensions_mut().insert(Authorized {
                attributes,
                grant,
                authorizer: decided.authorizer,
            });
            let admitted = Admitted {
                route,
                params,
                caller,
            };
            next(request, admitted).await
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

/// Each step alone, with a `next` that records what it was given: what it adds, what it refuses
/// without going on, and what it leaves for the steps after it.
#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use axum::body::Body;
    use http::StatusCode;
    use warrant_audit::Auditor;
    use warrant_auth::{Authenticator, TokenFile};

    use super::*;

    const ADMIN: &str = "admin-token";
    const BOB: &str = "bob-token";

    fn state() -> AppState {
        let mut authenticator = Authenticator::default();
        authenticator.token_file = Some(
            TokenFile::parse(
                format!("{ADMIN},admin,admin-uid,system:masters\n{BOB},bob,bob-uid,dev\n")
                    .as_bytes(),
                "tokens.csv",
            )
            .unwrap(),
        );
        AppState::for_tests(authenticator, Auditor::disabled())
    }

    fn request(method: Method, path: &str, token: Option<&str>) -> Request {
        let mut builder = http::Request::builder().method(method).uri(path);
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        builder
            .header("x-remote-user", "mallory")
            .body(Body::empty())
            .unwrap()
    }

    fn routed(state: &AppState, method: Method, path: &str) -> Routed {
        routes::find_for_issuer(&method, path, state.issuer().issuer_path())
    }

    fn answer() -> Response {
        StatusCode::IM_A_TEAPOT.into_response()
    }

    #[tokio::test]
    async fn track_hands_on_the_route_and_counts_the_answer_under_its_label() {
        let state = state();
        let seen = Mutex::new(None);
        let response = track(
            &state,
            request(Method::GET, "/version", None),
            |_, routed| {
                *seen.lock().unwrap() = Some(routed.label());
                async { answer() }
            },
        )
        .await;
        assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
        assert_eq!(*seen.lock().unwrap(), Some("version"));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, state.registry()).unwrap();
        assert!(
            text.lines()
                .any(|l| l.starts_with("warrant_http_requests_total{")
                    && l.contains("route=\"version\"")
                    && l.contains("code=\"418\"")
                    && l.ends_with(" 1")),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn timed_answers_504_when_the_rest_does_not_finish() {
        let response = timed(request(Method::GET, "/version", None), |_| {
            std::future::pending::<Response>()
        })
        .await;
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        let response = timed(request(Method::GET, "/version", None), |_| async {
            answer()
        })
        .await;
        assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
    }

    #[tokio::test]
    async fn authenticate_hands_on_the_caller_without_the_identity_headers_a_client_sent() {
        let state = state();
        let seen = CallerSeen::default();
        let given = Mutex::new(None);
        let response = authenticate(
            &state,
            request(Method::GET, "/version", Some(ADMIN)),
            Some(seen.clone()),
            |request, caller| {
                assert!(request.headers().get("x-remote-user").is_none());
                assert!(request.headers().get("authorization").is_some());
                *given.lock().unwrap() = Some(caller);
                async { answer() }
            },
        )
        .await;
        assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
        let Some(Caller::User(user)) = given.lock().unwrap().take() else {
            panic!("no user handed on")
        };
        assert_eq!(user.name, "admin");
        // The audit step learns the caller too.
        assert!(matches!(seen.get(), Some(Caller::User(u)) if u.name == "admin"));

        // A token that does not authenticate: 401, and nothing after runs.
        let response = authenticate(
            &state,
            request(Method::GET, "/version", Some("wrong")),
            None,
            |_, _| async { panic!("next ran for a refused caller") },
        )
        .await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }

    async fn authorized(state: &AppState, method: Method, path: &str, token: &str) -> Response {
        let caller = match state
            .authenticator()
            .authenticate(
                &OwnTokensOf(state),
                &RequestTarget {
                    method: &method,
                    uri: &path.parse().unwrap(),
                },
                request(method.clone(), path, Some(token)).headers(),
                &PeerCertificate::default(),
                state.issuer().clock().now(),
            )
            .await
        {
            Ok(caller) => caller,
            Err(_) => Caller::Anonymous,
        };
        authorize(
            state,
            request(method.clone(), path, None),
            routed(state, method, path),
            caller,
            |request, _| async move {
                let mut response = answer();
                let granted = request.extensions().get::<Authorized>().is_some();
                response.extensions_mut().insert(granted);
                response
            },
        )
        .await
    }

    #[tokio::test]
    async fn authorize_grants_what_the_policy_allows_and_refuses_the_rest_before_the_handler() {
        let state = state();
        let token_requests = "/api/v1/namespaces/demo/serviceaccounts/app/token";
        // Allowed: the grant is handed on.
        let allowed = authorized(&state, Method::POST, token_requests, ADMIN).await;
        assert_eq!(allowed.status(), StatusCode::IM_A_TEAPOT);
        assert_eq!(allowed.extensions().get::<bool>(), Some(&true));
        // Denied: 403 from this step.
        let denied = authorized(&state, Method::POST, token_requests, BOB).await;
        assert_eq!(denied.status(), StatusCode::FORBIDDEN);
        // No caller: 401.
        let anonymous = authorized(&state, Method::POST, token_requests, "nobody").await;
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
        // Public paths pass with no grant; so does a path with no route (its 404 is the
        // handler table's).
        for path in ["/version", "/no/such/path"] {
            let public = authorized(&state, Method::GET, path, "nobody").await;
            assert_eq!(public.status(), StatusCode::IM_A_TEAPOT, "{path}");
            assert_eq!(public.extensions().get::<bool>(), Some(&false), "{path}");
        }
        // A path that does not decode is refused here.
        let bad = authorized(&state, Method::GET, "/api/v1/namespaces/%ff/pods", ADMIN).await;
        assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn the_audit_step_passes_unaudited_requests_on_untouched() {
        let state = state();
        let path = "/apis/authentication.k8s.io/v1/tokenreviews";
        let response = crate::audit::step(
            &state,
            request(Method::POST, path, None),
            routed(&state, Method::POST, path),
            |_, routed, seen| {
                assert_eq!(
                    routed.label(),
                    routes::find_for_issuer(&Method::POST, path, "").label()
                );
                // No audit log: no caller to learn.
                assert!(seen.is_none());
                async { answer() }
            },
        )
        .await;
        assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
        assert!(response.headers().get("audit-id").is_none());
    }

    #[tokio::test]
    async fn the_audit_step_records_the_caller_that_authentication_found_after_it() {
        use warrant_audit::{AuditOptions, Destination, Mode, Rotation, Schema};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("audit.log");
        let options = AuditOptions {
            destination: Destination::File(
                file.clone(),
                Rotation {
                    max_size_bytes: 0,
                    max_backups: 0,
                    max_age_days: 0,
                },
            ),
            mode: Mode::Blocking,
            buffer_size: 10,
            schema: Schema::Warrant,
        };
        let clock = warrant_clock::Clock::manual(Timestamp::from_second(1_800_000_000).unwrap());
        let (auditor, writer) = warrant_audit::start(
            &options,
            clock,
            &mut prometheus_client::registry::Registry::default(),
        )
        .unwrap();
        let mut authenticator = Authenticator::default();
        authenticator.token_file = Some(
            TokenFile::parse(
                format!("{ADMIN},admin,admin-uid,system:masters\n").as_bytes(),
                "t.csv",
            )
            .unwrap(),
        );
        let state = AppState::for_tests(authenticator, auditor);
        let path = "/apis/authentication.k8s.io/v1/tokenreviews";
        let response = crate::audit::step(
            &state,
            request(Method::POST, path, None),
            routed(&state, Method::POST, path),
            |_, _, seen| {
                // What authentication would do, later in the chain.
                let seen = seen.expect("an audited request hands on where the caller goes");
                let admin = warrant_auth::User::new(
                    "admin".into(),
                    "admin-uid".into(),
                    vec![],
                    warrant_auth::Via::TokenFile,
                );
                seen.saw(&Caller::User(std::sync::Arc::new(admin)));
                async { answer() }
            },
        )
        .await;
        assert_eq!(response.status(), StatusCode::IM_A_TEAPOT);
        assert!(response.headers().get("audit-id").is_some());
        writer.finish().await;
        let line = std::fs::read_to_string(&file).unwrap();
        let event: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(event["kind"], "TokenReview", "{line}");
        assert_eq!(event["requester"]["user"], "admin", "{line}");
        assert_eq!(
            event["requester"]["authenticatedBy"], "token-file",
            "{line}"
        );
        assert_eq!(event["code"], 418, "{line}");
    }
}
