//! Token injection: kube-apiserver's mutating admission webhook for pods
//! (`POST /mutate/pods`, AdmissionReview `v1`, `v1beta1` read the same way). A pod whose
//! ServiceAccount carries warrant's annotations gets warrant's token agent as a native sidecar,
//! the shared volume it writes the tokens to, and the variables each cloud's SDK reads
//! (docs/injection.md walks a pod through it).
//!
//! The ServiceAccount is read through the objects warrant already keeps (the cluster's watch
//! cache, a live GET on a miss; the manifest file standalone), never with a request of its own.
//!
//! What comes back, decided per input (docs/injection.md, "Bad input"):
//! - admitted unchanged: a kind other than Pod, an operation other than CREATE, a
//!   subresource, a pod labelled `warrant.dev/inject: "false"`, a ServiceAccount that does not
//!   exist or carries none of the annotations that turn injection on, a Windows pod (the agent
//!   runs on Linux) (with a warning where the client should know);
//! - refused, naming the annotation or the conflict: a malformed annotation (a role ARN, a
//!   UUID, a lifetime), a token warrant's authorization would refuse the agent (an audience the
//!   policy does not allow), a volume or container under warrant's names it did not add;
//! - an error (a `Status`, so kube-apiserver applies the webhook's `failurePolicy`): a review
//!   that does not parse, a ServiceAccount that cannot be looked up, injection not configured.
//!
//! Who may call: anyone who reaches the port, as kube-apiserver calls webhooks without
//! credentials unless an AdmissionConfiguration gives it some. The answer tells a caller
//! nothing a pod's author does not see in the mutated pod: the warrant annotations of the
//! ServiceAccount named (identifiers, not credentials). Cost to warrant: one lookup in memory,
//! on a miss one GET within the live-GET limits (docs/security.md).

pub(crate) mod metrics;
mod patch;
pub(crate) mod plan;
mod policy;
mod review;

use axum::body::Body;

use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use http::header::{CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use warrant_objects::Kind;

use self::plan::Refusal;
pub use self::plan::{
    AZURE_DEFAULT_AUTHORITY_HOST, InjectionSettings, TOKEN_AGENT_DEFAULT_AUDIENCE,
};
pub(crate) use self::review::AdmissionReview;
use self::review::{
    ADMISSION_V1, ADMISSION_V1BETA1, AdmissionRequest, AdmissionResponse, AdmissionReviewAnswer,
};
use crate::body;
use crate::error::ApiError;
use crate::state::AppState;

/// The label that opts a pod out (`"false"`), as an objectSelector and here.
pub(crate) const OPT_OUT_LABEL: &str = "warrant.dev/inject";

/// What became of a review, for `warrant_admission_reviews_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A patch was returned.
    Mutated,
    /// Admitted as it was.
    Unchanged,
    /// Refused (`allowed: false`).
    Refused,
    /// Answered with an error `Status`: kube-apiserver applies the `failurePolicy`.
    Error,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Mutated => "mutated",
            Outcome::Unchanged => "unchanged",
            Outcome::Refused => "refused",
            Outcome::Error => "error",
        }
    }
}

/// The handler.
pub(crate) async fn review(state: &AppState, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let answered = answer(state, &parts.headers, body).await;
    let outcome = match &answered {
        Ok((_, outcome)) => *outcome,
        Err(_) => Outcome::Error,
    };
    state.admission_metrics().count(outcome.label());
    match answered {
        Ok((answer, _)) => {
            // Strings, booleans and a list of strings: it always serializes.
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            let mut response = (http::StatusCode::OK, body).into_response();
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Err(error) => {
            tracing::warn!(error = %error.message(), "admission review not answered: kube-apiserver applies the webhook's failurePolicy");
            error.into_response()
        }
    }
}

async fn answer(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(AdmissionReviewAnswer, Outcome), ApiError> {
    let review: AdmissionReview = body::decode(headers, body).await?;
    let api_version = match review.api_version.as_deref() {
        Some(v @ (ADMISSION_V1 | ADMISSION_V1BETA1)) => v.to_owned(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "expected an AdmissionReview of {ADMISSION_V1}, got apiVersion {}",
                warrant_token::go_quote(other)
            )));
        }
        None => {
            return Err(ApiError::bad_request(format!(
                "the AdmissionReview has no apiVersion (expected {ADMISSION_V1})"
            )));
        }
    };
    if review.kind.as_deref() != Some("AdmissionReview") {
        return Err(ApiError::bad_request(
            "expected kind AdmissionReview, as kube-apiserver sends to a mutating webhook",
        ));
    }
    let request = review
        .request
        .ok_or_else(|| ApiError::bad_request("the AdmissionReview has no request"))?;
    if request.uid.is_empty() {
        return Err(ApiError::bad_request("request.uid is required"));
    }
    let (response, outcome) = admit(state, request).await?;
    Ok((
        AdmissionReviewAnswer {
            api_version,
            kind: "AdmissionReview",
            response,
        },
        outcome,
    ))
}

/// The answer to one request.
async fn admit(
    state: &AppState,
    request: AdmissionRequest,
) -> Result<(AdmissionResponse, Outcome), ApiError> {
    let AdmissionRequest {
        uid,
        kind,
        sub_resource,
        namespace,
        operation,
        object,
    } = request;
    let unchanged = |uid, warnings| {
        Ok((
            AdmissionResponse::unchanged(uid, warnings),
            Outcome::Unchanged,
        ))
    };
    if !kind.is_pod() {
        return unchanged(
            uid,
            vec![format!(
                "warrant's token injection mutates pods only, and was sent a {}: admitted unchanged (check the webhook's rules)",
                kind.describe()
            )],
        );
    }
    if operation != "CREATE" || sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
        return unchanged(uid, vec![]);
    }
    let Some(pod) = object.filter(Value::is_object) else {
        return Err(ApiError::bad_request(
            "request.object is missing or is not a pod",
        ));
    };
    if pod
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(OPT_OUT_LABEL))
        .and_then(Value::as_str)
        == Some("false")
    {
        return unchanged(uid, vec![]);
    }
    let Some(settings) = state.injection() else {
        return Err(ApiError::unavailable(
            "token injection is not configured on this server (warrant serve --injection-agent-image and --injection-warrant-url)",
        ));
    };
    let namespace = namespace
        .filter(|n| !n.is_empty())
        .or_else(|| first_text(&pod, &["/metadata/namespace"]).map(str::to_owned))
        .ok_or_else(|| ApiError::bad_request("the review names no namespace for the pod"))?;
    // kube's defaulting: the deprecated serviceAccount stands in, and admission gives
    // `default` to a pod that names neither.
    let service_account = first_text(&pod, &["/spec/serviceAccountName", "/spec/serviceAccount"])
        .unwrap_or("default")
        .to_owned();
    let account = state
        .objects()
        .get(Kind::ServiceAccount, &namespace, &service_account)
        .await
        .map_err(|why| ApiError::unavailable(why.to_string()))?;
    let Some(account) = account else {
        return unchanged(
            uid,
            vec![format!(
                "warrant: service account {namespace}/{service_account} not found: no token injected"
            )],
        );
    };
    let refused = |refusal: Refusal| {
        Ok((
            AdmissionResponse::denied(uid.clone(), refusal.code, refusal.reason, refusal.message),
            Outcome::Refused,
        ))
    };
    let plan = match plan::plan(&account.annotations, &settings) {
        Ok(Some(plan)) => plan,
        Ok(None) => return unchanged(uid, vec![]),
        Err(refusal) => return refused(refusal),
    };
    // The agent is warrant's image, built for Linux: on a Windows node it could not start, and
    // as the first init container it would hold the pod back for good.
    if first_text(
        &pod,
        &["/spec/os/name", "/spec/nodeSelector/kubernetes.io~1os"],
    ) == Some("windows")
    {
        return unchanged(
            uid,
            vec![format!(
                "warrant's token agent runs on Linux only: this Windows pod of {namespace}/{service_account} gets no tokens from it"
            )],
        );
    }
    let pod_name = first_text(&pod, &["/metadata/name", "/metadata/generateName"]).unwrap_or("pod");
    if let Err(refusal) = policy::check(
        state,
        &policy::Account {
            namespace: &namespace,
            name: &service_account,
            uid: &account.uid,
            pod: pod_name,
        },
        &plan,
    )
    .await
    {
        return refused(refusal);
    }
    match patch::mutate(&pod, &plan, &settings) {
        Ok(mutation) if mutation.ops.is_empty() => unchanged(uid, mutation.warnings),
        Ok(mutation) => Ok((
            AdmissionResponse::patched(uid, &mutation.ops, mutation.warnings),
            Outcome::Mutated,
        )),
        Err(refusal) => refused(refusal),
    }
}

/// The first of `fields` (JSON pointers) that holds a non-empty string in `object`.
fn first_text<'a>(object: &'a Value, fields: &[&str]) -> Option<&'a str> {
    fields.iter().find_map(|field| {
        object
            .pointer(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    })
}
