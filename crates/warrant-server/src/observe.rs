//! The metrics and health listener (`--metrics-bind-address`): `/metrics`, `/livez`,
//! `/readyz` and `/healthz` (and `/livez/NAME`, `/readyz/NAME`) over plain HTTP, without
//! authentication, on a port of its own; nothing else. What Prometheus and its operator expect
//! of an exporter (a ServiceMonitor with no credentials), and what a load balancer's health
//! check can reach, while the API port keeps asking who reads `/metrics` (docs/decisions.md,
//! "Metrics and health on a listener of their own").
//!
//! The answers are the API port's own to an anonymous caller (the same handlers, the same
//! registry and checks: a failing check is named, its reason withheld). The
//! listener is bounded on its own: at most [`MAX_CONNECTIONS`] at once (more are closed at
//! accept), [`HEADER_TIMEOUT`] for a request's headers, [`CONNECTION_LIFETIME`] for a
//! connection, so a client that holds it open cannot take descriptors from the API.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use warrant_auth::Caller;

use crate::routes::{Endpoint, Routed};
use crate::state::AppState;
use crate::{discovery, health};

/// Connections served at once; a scraper and a few probes need a handful.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// How long a request's headers may take to arrive.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection is kept (a scraper reconnects; a client that only holds the
/// connection open is let go).
pub(crate) const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);

/// Serves the metrics and health endpoints on `listener` until `stop` is cancelled.
pub async fn serve_observe(listener: TcpListener, state: AppState, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let tasks = TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::debug!(error = %e, "metrics listener: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "metrics listener: {MAX_CONNECTIONS} connections open; closing a new one");
            continue;
        };
        let state = state.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            let service = tower::service_fn(move |request: http::Request<Incoming>| {
                let state = state.clone();
                async move {
                    let request = request.map(axum::body::Body::new);
                    Ok::<_, std::convert::Infallible>(answer(state, request).await)
                }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let conn =
                builder.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service));
            tokio::pin!(conn);
            tokio::select! {
                _ = &mut conn => {}
                () = tokio::time::sleep(CONNECTION_LIFETIME) => {}
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(HEADER_TIMEOUT, conn).await;
                }
            }
            drop(slot);
        });
    }
    tasks.close();
    tasks.wait().await;
}

/// One request: a health or metrics route answered as the API port answers it; anything
/// else is a 404 (and a method other than GET and HEAD a 405).
async fn answer(state: AppState, request: axum::extract::Request) -> Response {
    let Routed::Route {
        route,
        params,
        allowed,
    } = crate::routes::find(request.method(), request.uri().path())
    else {
        return not_found();
    };
    if !matches!(
        route.endpoint,
        Endpoint::Metrics
            | Endpoint::Livez
            | Endpoint::LivezCheck
            | Endpoint::Readyz
            | Endpoint::ReadyzCheck
    ) {
        return not_found();
    }
    if !allowed {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(http::header::ALLOW, route.verb.allowed())],
        )
            .into_response();
    }
    let head = request.method() == Method::HEAD;
    let query = Query::<Vec<(String, String)>>::try_from_uri(request.uri())
        .map_or_else(|_| Vec::new(), |Query(q)| q);
    // Nobody authenticates here, so every caller is anonymous: failing checks are named,
    // their reasons withheld (the reasons can carry an account id, a role ARN, a path), as on
    // the API port for a caller without credentials.
    let anonymous = &Caller::Anonymous;
    let response = match route.endpoint {
        Endpoint::Metrics => discovery::metrics(&state),
        Endpoint::Livez => health::livez(&state, anonymous, &query),
        Endpoint::Readyz => health::readyz(&state, anonymous, &query),
        Endpoint::LivezCheck => health::livez_check(&state, anonymous, &params),
        Endpoint::ReadyzCheck => health::readyz_check(&state, anonymous, &params),
        _ => not_found(),
    };
    if head {
        response.map(|_| axum::body::Body::empty())
    } else {
        response
    }
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "404 page not found: this port serves /metrics, /livez, /readyz and /healthz only\n",
    )
        .into_response()
}
