//! TokenReview: `POST /apis/authentication.k8s.io/{v1,v1beta1}/tokenreviews` (and in warrant's
//! own group). Always 201 with the spec echoed and the verdict in `status`, replying in the
//! request's version, as kube-apiserver does and as its webhook client expects.

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};

use crate::audit::AuditFacts;
use crate::body;
use crate::error::ApiError;
use crate::metrics::ReviewResult;
use crate::review::{Refused, review_token};
use crate::state::AppState;
use crate::wire::{ObjectMeta, TokenReview, TokenReviewStatus};
use warrant_audit::{Decision, ServiceAccount, TokenFacts};
use warrant_auth::Caller;
use warrant_token::{Confirmation, VerifiedToken, header_key_id};

/// The handler for one served version (`authentication.k8s.io/v1`, …).
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Extension(ServedVersion(version)): Extension<ServedVersion>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        caller.require()?;
        let request: TokenReview = body::decode(&headers, body).await?;
        review(&state, version, request).await
    }
    .await;
    match result {
        Ok((review, audit)) => {
            // A bug here is a caught panic and a 500, never a 201 with an empty body.
            #[allow(clippy::expect_used)]
            let body = serde_json::to_vec(&review).expect("a TokenReview always serializes");
            let mut response = (StatusCode::CREATED, body).into_response();
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Some(audit) = audit {
                response.extensions_mut().insert(audit);
            }
            response
        }
        Err(e) => e.into_response(),
    }
}

/// The API version a route serves, attached to its requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServedVersion(pub(crate) &'static str);

/// Reviews the token in `request`; with an audit log, says what for its event.
pub(crate) async fn review(
    state: &AppState,
    served: &'static str,
    request: TokenReview,
) -> Result<(TokenReview, Option<AuditFacts>), ApiError> {
    if let Some(kind) = request
        .kind
        .as_deref()
        .filter(|k| !k.is_empty() && *k != "TokenReview")
    {
        return Err(ApiError::bad_request(format!(
            "expected a TokenReview, got a {kind}"
        )));
    }
    let version = match request.api_version.as_deref() {
        None | Some("") => served.to_owned(),
        Some(v) if accepted_version(served, v) => v.to_owned(),
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({served})"
            )));
        }
    };
    if let Some(ns) = request
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        return Err(ApiError::bad_request(format!(
            "namespace is not allowed on this type: {ns}"
        )));
    }
    if request.spec.token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }

    if let Some(why) = warrant_token::audiences_over_limits(&request.spec.audiences) {
        return Err(ApiError::bad_request(format!("spec.audiences: {why}")));
    }
    let now = state.issuer().clock().now();
    let published = state.issuer().published();
    let outcome = review_token(
        &published,
        state.objects(),
        state.metrics(),
        &request.spec.token,
        &request.spec.audiences,
        now,
    )
    .await
    .and_then(refuse_key_bound);
    let mut status = TokenReviewStatus::default();
    let auditing = state.issuer().audit().enabled();
    let (result, stale, audit) = match outcome {
        Ok(verified) => {
            status.authenticated = true;
            status.user = verified.user_info();
            status.audiences = verified.audiences.clone();
            let audit = auditing.then(|| AuditFacts {
                decision: Decision::Authenticated,
                reason: String::new(),
                service_account: ServiceAccount::from_claims(&verified.claims),
                token: Some(TokenFacts::from_claims(
                    &verified.claims,
                    &header_key_id(&request.spec.token).unwrap_or_default(),
                )),
            });
            (ReviewResult::Authenticated, verified.is_stale(now), audit)
        }
        Err(Refused {
            result,
            reason,
            claims,
        }) => {
            // Whose token it was is known only when its signature was good.
            let audit = auditing.then(|| AuditFacts {
                decision: Decision::Unauthenticated,
                reason: reason.clone(),
                service_account: claims.as_deref().and_then(ServiceAccount::from_claims),
                token: claims.as_deref().map(|claims| {
                    TokenFacts::from_claims(
                        claims,
                        &header_key_id(&request.spec.token).unwrap_or_default(),
                    )
                }),
            });
            status.error = reason;
            (result, false, audit)
        }
    };
    state.metrics().token_reviewed(result, stale);
    if stale {
        tracing::info!(user = %status.user.username, "stale token: used after its warnafter time");
    }
    let review = TokenReview {
        kind: Some("TokenReview".to_owned()),
        api_version: Some(version),
        metadata: ObjectMeta {
            creation_timestamp: None,
            ..request.metadata
        },
        spec: request.spec,
        status,
    };
    Ok((review, audit))
}

/// What a review answers for a key-bound token (`cnf`): kube's TokenReview carries no proof of
/// the key, so accepting the token here would let whoever holds it (without the key) pass as
/// its service account, which is what binding it to a key was to prevent. Refused, saying why.
pub(crate) const KEY_BOUND_REVIEW: &str = "service account token is bound to a key (cnf): it authenticates only with a DPoP proof of that key, which a TokenReview cannot carry";

/// Refuses a verified token that is bound to a key (see [`KEY_BOUND_REVIEW`]).
fn refuse_key_bound(verified: VerifiedToken) -> Result<VerifiedToken, Refused> {
    if verified
        .claims
        .cnf
        .as_ref()
        .is_some_and(Confirmation::binds)
    {
        return Err(Refused {
            result: ReviewResult::Invalid,
            reason: KEY_BOUND_REVIEW.to_owned(),
            claims: Some(verified.claims),
        });
    }
    Ok(verified)
}

/// The versions a route accepts in a body: the authentication group's routes take v1 and
/// v1beta1 (field-identical), warrant's own only its own.
fn accepted_version(served: &str, given: &str) -> bool {
    use crate::wire::{AUTHENTICATION_V1, AUTHENTICATION_V1BETA1};
    given == served
        || (served.starts_with("authentication.k8s.io/")
            && (given == AUTHENTICATION_V1 || given == AUTHENTICATION_V1BETA1))
}
