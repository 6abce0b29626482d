//! Audit events of TokenRequest and TokenReview (warrant-audit writes them; the external signer
//! makes its own). One step of every request, [`step`], makes the event of every such request, whatever
//! answered it: a handler (which attaches [`AuditFacts`] to its response: the decision and the
//! token), authentication or authorization (401, 403, 429: their [`ErrorMessage`]), or the
//! timeout. It hands the event to the auditor before the response leaves, so a client never
//! holds a token whose issuance is not queued for the log.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderName, HeaderValue};
use warrant_audit::bounded;
use warrant_audit::{
    Decision, Event, EventKind, MAX_NAME_CHARS, MAX_REASON_CHARS, Requester, ServiceAccount,
    TokenFacts,
};
use warrant_auth::Caller;

use crate::error::{ApiError, ErrorMessage};
use crate::routes::{Endpoint, Routed};
use crate::state::AppState;

/// The TCP peer of a connection, attached to each of its requests by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub SocketAddr);

/// What a handler says about its answer, for the audit event: attached to its response.
#[derive(Debug, Clone)]
pub(crate) struct AuditFacts {
    /// What was decided.
    pub(crate) decision: Decision,
    /// Why a token did not authenticate (TokenReview's `status.error`).
    pub(crate) reason: String,
    /// The service account, when known from the token or the lookup.
    pub(crate) service_account: Option<ServiceAccount>,
    /// The token issued or reviewed.
    pub(crate) token: Option<TokenFacts>,
}

/// kube-apiserver's header for the request's audit ID, in requests it relays and in responses.
const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// An `Audit-ID` a client sent is used if it is plausibly an ID: printable ASCII, no spaces,
/// at most this long. Anything else gets an ID of warrant's.
const MAX_AUDIT_ID: usize = 128;

/// Audits TokenRequest and TokenReview; every other request passes untouched (and, with no
/// audit log, every request does). An audited request's caller is learnt by authentication,
/// through the [`CallerSeen`] this step hands on.
pub(crate) async fn step<N, F>(
    state: &AppState,
    request: Request,
    routed: Routed,
    next: N,
) -> Response
where
    N: FnOnce(Request, Routed, Option<CallerSeen>) -> F,
    F: Future<Output = Response>,
{
    let auditor = state.issuer().audit();
    let Some(kind) = audited_kind(&routed).filter(|_| auditor.enabled()) else {
        return next(request, routed, None).await;
    };
    let path_account = path_account(&routed, kind);
    let time = state.issuer().clock().now();
    let request_id = request_id(&request);
    let client_address = request
        .extensions()
        .get::<ClientAddress>()
        .map(|a| a.0.to_string())
        .unwrap_or_default();

    let caller = CallerSeen::default();
    let mut response = next(request, routed, Some(caller.clone())).await;

    let status = response.status();
    let requester = requester(caller.get(), status, client_address);
    let facts = facts(response.extensions_mut(), status);
    let audit_id = HeaderValue::from_str(&request_id).ok();
    if let Some(id) = &audit_id {
        response.headers_mut().insert(AUDIT_ID, id.clone());
    }
    let recorded = auditor
        .record(Event {
            kind,
            time,
            request_id,
            requester,
            decision: facts.decision,
            code: Some(status.as_u16()),
            // Refusals quote what the client sent (a kind, a version, a name): bounded, so
            // neither the queue nor the file holds a body's worth of it per event.
            reason: bounded(&facts.reason, MAX_REASON_CHARS),
            service_account: facts.service_account.or(path_account),
            token: facts.token,
            pod_certificate: None,
            answered: Some(state.issuer().clock().now()),
        })
        .await;
    match recorded {
        Ok(()) => response,
        // Blocking mode, and the event was not written (the write failed, or the disk has not
        // kept up for a request's timeout): what was not recorded is not handed out (a token
        // unaudited). Counted in warrant_audit_events_total; logged at debug only, as a failing
        // disk would otherwise log a line per request (the writer logs the failure itself).
        Err(not_recorded) => {
            tracing::debug!(error = %not_recorded, "request answered 503: its audit event was not recorded");
            let mut refused = ApiError::unavailable(not_recorded.to_string()).into_response();
            // The ID the event would have had, as on every audited answer: what the client
            // quotes to whoever reads the server's log.
            if let Some(id) = audit_id {
                refused.headers_mut().insert(AUDIT_ID, id);
            }
            refused
        }
    }
}

/// The kind of event a request routed to `routed` makes, if it is audited: a TokenRequest or
/// TokenReview that its route allows.
fn audited_kind(routed: &Routed) -> Option<EventKind> {
    match routed {
        Routed::Route {
            route,
            allowed: true,
            ..
        } => match route.endpoint {
            Endpoint::TokenRequest => Some(EventKind::TokenRequest),
            Endpoint::TokenReview => Some(EventKind::TokenReview),
            _ => None,
        },
        _ => None,
    }
}

/// The service account a TokenRequest's path names, for events of requests refused before
/// the handler read it: cut to kube's longest name (anyone can send a longer one).
fn path_account(routed: &Routed, kind: EventKind) -> Option<ServiceAccount> {
    match routed {
        Routed::Route { params, .. } if kind == EventKind::TokenRequest => Some(ServiceAccount {
            namespace: bounded(&params.namespace, MAX_NAME_CHARS),
            name: bounded(&params.name, MAX_NAME_CHARS),
            uid: String::new(),
        }),
        _ => None,
    }
}

/// The request's `Audit-ID` if it sent a plausible one, else a new UUID.
fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(&AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| {
            !id.is_empty() && id.len() <= MAX_AUDIT_ID && id.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

/// Who asked, as far as authentication got before the answer (`status`).
fn requester(
    caller: Option<&Caller>,
    status: http::StatusCode,
    client_address: String,
) -> Requester {
    match caller {
        Some(Caller::User(user)) => user.requester(client_address),
        Some(Caller::Anonymous) => Requester::anonymous(client_address),
        // Answered before authentication ended: refused by it (401), or it could not decide
        // (429) or did not finish in time (504).
        None if status == http::StatusCode::UNAUTHORIZED => Requester::refused(client_address),
        None => Requester::undecided(client_address),
    }
}

/// A handler's facts, or a refusal before any handler: its message, else the status's name.
fn facts(extensions: &mut http::Extensions, status: http::StatusCode) -> AuditFacts {
    extensions
        .remove::<AuditFacts>()
        .unwrap_or_else(|| AuditFacts {
            decision: Decision::Refused,
            reason: extensions.remove::<ErrorMessage>().map_or_else(
                || status.canonical_reason().unwrap_or_default().to_owned(),
                |m| m.0,
            ),
            service_account: None,
            token: None,
        })
}

/// Where authentication leaves the caller of an audited request: read after the request is
/// answered, whatever answered it (a handler, authorization, or the timeout, which drops what
/// the steps inside it were doing).
#[derive(Clone, Default)]
pub(crate) struct CallerSeen(Arc<OnceLock<Caller>>);

impl CallerSeen {
    /// Called by authentication with the caller it found.
    pub(crate) fn saw(&self, caller: &Caller) {
        let _ = self.0.set(caller.clone());
    }

    /// The caller authentication found, if it ended.
    pub(crate) fn get(&self) -> Option<&Caller> {
        self.0.get()
    }
}
