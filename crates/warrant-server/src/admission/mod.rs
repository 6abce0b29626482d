//! Token injection: kube-apiserver's mutating admission webhook for pods
//! (`POST /mutate/pods`, AdmissionReview `v1`, `v1beta1` read the same way). A pod whose
//! ServiceAccount carries warrant's annotations gets warrant's token agent as a native sidecar,
//! the shared volume it writes the tokens to, and the variables each cloud's SDK reads
//! (docs/injection.md walks a pod through it).
//!
//! The ServiceAccount is read through the objects warrant already keeps (the cluster's watch
//! cache; the manifest file standalone), and after a miss, for kube-apiserver's reviews only,
//! with a live GET on a budget of its own ([`lookup`]).
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
//! Who may call, and what it costs (docs/injection.md, "Who may call"): kube-apiserver calls
//! webhooks without credentials unless an AdmissionConfiguration gives it some. With
//! `--injection-allowed-names`, only a client certificate (from `--client-ca-file`) with one of
//! those names is answered: every other caller gets a 401 or 403 before its body is read.
//! With `--injection-allow-anonymous` instead, anyone who reaches the port is answered, from
//! memory only ([`lookup`]): such a review never costs a GET to kube-apiserver ([`callers`]). Every review is bounded ([`limits`]), and what
//! an answer or a log line quotes of the review is cut ([`warrant_token::quote_value`]); a
//! failed lookup is said in generic words, its cause only in warrant's log.

mod callers;
pub(crate) mod limits;
mod lookup;
pub(crate) mod metrics;
mod names;
mod patch;
mod placement;
pub(crate) mod plan;
mod policy;
mod review;
mod values;
pub(crate) mod webhook;

use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use warrant_auth::Caller;
use warrant_token::{cut_value, quote_value};

pub use self::callers::AdmissionCallers;
use self::callers::{Access, access};
pub use self::limits::{AdmissionLimits, MAX_REVIEW_VALUES};
use self::lookup::Found;
pub use self::lookup::{LOOKUPS_IN_FLIGHT, REMEMBER_ABSENT};
pub use self::names::{AZURE_DEFAULT_AUTHORITY_HOST, TOKEN_AGENT_DEFAULT_AUDIENCE};
pub use self::plan::InjectionSettings;
use self::plan::Refusal;
pub(crate) use self::review::AdmissionReview;
use self::review::{
    ADMISSION_V1, ADMISSION_V1BETA1, AdmissionRequest, AdmissionResponse, AdmissionReviewAnswer,
};
use crate::body;
use crate::error::ApiError;
use crate::state::AppState;

/// The label that opts a pod out (`"false"`), as an objectSelector and here, or asks for its
/// tokens without fail ([`REQUIRED_LABEL_VALUE`]).
pub(crate) const OPT_OUT_LABEL: &str = "warrant.dev/inject";

/// The value of `warrant.dev/inject` that sends a pod to the webhook entry with
/// `failurePolicy: Fail` (deploy/components/injection), and makes warrant refuse it rather than
/// admit it without its tokens: where warrant would admit another pod unchanged for want of
/// knowing better (its ServiceAccount not in the cache, or not found) it answers an error,
/// which that entry turns into a refusal the pod's controller retries; where the pod cannot
/// have tokens at all (a ServiceAccount without warrant's annotations, a Windows pod) it
/// refuses the pod, saying why.
pub const REQUIRED_LABEL_VALUE: &str = "required";

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

/// A review not answered: the error, and the bound it passed, if that was why.
struct Unanswered {
    error: ApiError,
    limit: Option<&'static str>,
}

impl From<ApiError> for Unanswered {
    fn from(error: ApiError) -> Self {
        Unanswered { error, limit: None }
    }
}

fn limited(limit: &'static str) -> impl FnOnce(ApiError) -> Unanswered {
    move |error| Unanswered {
        error,
        limit: Some(limit),
    }
}

/// The handler.
pub(crate) async fn review(
    state: &AppState,
    caller: &Caller,
    request: axum::extract::Request,
) -> Response {
    let webhook = state.admission();
    let answered = answer(state, caller, request).await;
    let outcome = match &answered {
        Ok((_, outcome)) => *outcome,
        Err(_) => Outcome::Error,
    };
    webhook.metrics.count(outcome.label());
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
        Err(Unanswered { error, limit }) => {
            if let Some(limit) = limit {
                webhook.metrics.limited(limit);
            }
            if let Some(left_out) = webhook.unanswered_logged.allow(tokio::time::Instant::now()) {
                // The message quotes nothing of the review past a cut; it is cut again here,
                // as every line of the log is bounded whatever a message becomes.
                tracing::warn!(
                    error = %cut_value(error.message()),
                    code = error.code().as_u16(),
                    not_logged = left_out,
                    "admission review not answered: kube-apiserver applies the webhook's failurePolicy"
                );
            }
            error.into_response()
        }
    }
}

async fn answer(
    state: &AppState,
    caller: &Caller,
    request: axum::extract::Request,
) -> Result<(AdmissionReviewAnswer, Outcome), Unanswered> {
    let Some(settings) = state.injection() else {
        return Err(ApiError::unavailable(
            "token injection is not configured on this server (warrant serve --injection-agent-image and --injection-warrant-url)",
        )
        .into());
    };
    let access = access(&settings.callers, caller).map_err(limited("caller"))?;
    let limits = settings.limits;
    let Some(_slot) = state.admission().in_flight.enter(limits.max_in_flight) else {
        return Err(limited("in_flight")(limits::too_many(limits.max_in_flight)));
    };
    let (parts, incoming) = request.into_parts();
    let bytes = axum::body::to_bytes(incoming, limits.max_review_bytes)
        .await
        .map_err(|_| limited("review_bytes")(limits::body_too_large(limits.max_review_bytes)))?;
    let (api_version, request) = parse(&parts.headers, &bytes)?;
    drop(bytes);
    let (response, outcome) = admit(state, &settings, access, request).await?;
    Ok((
        AdmissionReviewAnswer {
            api_version,
            kind: "AdmissionReview",
            response,
        },
        outcome,
    ))
}

/// A review's bytes read as kube-apiserver sends them: JSON within [`MAX_REVIEW_VALUES`], an
/// AdmissionReview of a version warrant answers, with a request that has a uid. The version
/// and the request.
fn parse(
    headers: &http::HeaderMap,
    bytes: &[u8],
) -> Result<(String, AdmissionRequest), Unanswered> {
    limits::check_values(bytes, MAX_REVIEW_VALUES).map_err(limited("review_values"))?;
    let review: AdmissionReview = body::decode_json(headers, bytes)?;
    let api_version = match review.api_version.as_deref() {
        Some(v @ (ADMISSION_V1 | ADMISSION_V1BETA1)) => v.to_owned(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "expected an AdmissionReview of {ADMISSION_V1}, got apiVersion {}",
                quote_value(other)
            ))
            .into());
        }
        None => {
            return Err(ApiError::bad_request(format!(
                "the AdmissionReview has no apiVersion (expected {ADMISSION_V1})"
            ))
            .into());
        }
    };
    if review.kind.as_deref() != Some("AdmissionReview") {
        return Err(ApiError::bad_request(
            "expected kind AdmissionReview, as kube-apiserver sends to a mutating webhook",
        )
        .into());
    }
    let request = review
        .request
        .ok_or_else(|| ApiError::bad_request("the AdmissionReview has no request"))?;
    if request.uid.is_empty() {
        return Err(ApiError::bad_request("request.uid is required").into());
    }
    if request.uid.len() > MAX_UID_BYTES {
        return Err(ApiError::bad_request(format!(
            "request.uid is longer than {MAX_UID_BYTES} bytes (kube-apiserver sends a UUID)"
        ))
        .into());
    }
    Ok((api_version, request))
}

/// The longest `request.uid` echoed back: kube-apiserver sends a UUID (36 bytes).
const MAX_UID_BYTES: usize = 128;

/// Why a review is answered without a patch: the answer it gets instead.
enum Stop {
    /// Admitted unchanged, with these warnings.
    Unchanged(Vec<String>),
    /// Refused (`allowed: false`).
    Refused(Refusal),
    /// Not answered: kube-apiserver applies the `failurePolicy`.
    Unanswered(Unanswered),
}

impl From<Unanswered> for Stop {
    fn from(unanswered: Unanswered) -> Self {
        Stop::Unanswered(unanswered)
    }
}

impl From<ApiError> for Stop {
    fn from(error: ApiError) -> Self {
        Stop::Unanswered(error.into())
    }
}

/// The answer to one request.
async fn admit(
    state: &AppState,
    settings: &InjectionSettings,
    access: Access,
    mut request: AdmissionRequest,
) -> Result<(AdmissionResponse, Outcome), Unanswered> {
    let uid = std::mem::take(&mut request.uid);
    let mutation = match mutation(state, settings, access, request).await {
        Ok(mutation) if mutation.ops.is_empty() => Err(Stop::Unchanged(mutation.warnings)),
        answer => answer,
    };
    match mutation {
        Ok(mutation) => {
            let response = AdmissionResponse::patched(uid, &mutation.ops, mutation.warnings);
            // base64 of the patch: four bytes for every three.
            let patch_bytes = response.patch.as_ref().map_or(0, |p| p.len() / 4 * 3);
            limits::check_patch(patch_bytes, settings.limits.max_patch_bytes)
                .map_err(limited("patch_bytes"))?;
            Ok((response, Outcome::Mutated))
        }
        Err(Stop::Unchanged(warnings)) => Ok((
            AdmissionResponse::unchanged(uid, warnings),
            Outcome::Unchanged,
        )),
        Err(Stop::Refused(refusal)) => Ok((
            AdmissionResponse::denied(uid, refusal.code, refusal.reason, refusal.message),
            Outcome::Refused,
        )),
        Err(Stop::Unanswered(unanswered)) => Err(unanswered),
    }
}

/// The patch for one request (its uid taken out), or why there is none: the pod and its
/// ServiceAccount read, the plan made, checked against the OS and the policy.
async fn mutation(
    state: &AppState,
    settings: &InjectionSettings,
    access: Access,
    request: AdmissionRequest,
) -> Result<patch::Mutation, Stop> {
    let subject = Subject::read(settings, request)?;
    let account = subject.account(state, access).await?;
    let plan = match plan::plan(&account.annotations, settings) {
        Ok(Some(plan)) => plan,
        Ok(None) if subject.required => {
            return Err(Stop::Refused(Refusal::bad(format!(
                "the pod is labelled {OPT_OUT_LABEL}={REQUIRED_LABEL_VALUE}, but its service account {} carries none of the annotations that turn token injection on (docs/injection.md): annotate it, or remove the label",
                subject.account_name()
            ))));
        }
        Ok(None) => return Err(Stop::Unchanged(vec![])),
        Err(refusal) => return Err(Stop::Refused(refusal)),
    };
    subject.check_linux()?;
    let pod = &subject.pod;
    // Cut as every value of the review quoted in a message is: no valid name is that long.
    let pod_name =
        cut_value(first_text(pod, &["/metadata/name", "/metadata/generateName"]).unwrap_or("pod"));
    policy::check(
        state,
        &policy::Account {
            namespace: &subject.namespace,
            name: &subject.service_account,
            uid: &account.uid,
            pod: &pod_name,
        },
        &plan,
    )
    .await
    .map_err(Stop::Refused)?;
    patch::mutate(pod, &plan, settings).map_err(Stop::Refused)
}

/// A pod to inject, as a review presents it: the pod, whether it is labelled
/// [`REQUIRED_LABEL_VALUE`], its namespace and ServiceAccount.
struct Subject {
    pod: Value,
    required: bool,
    namespace: String,
    service_account: String,
}

impl Subject {
    /// The pod of a CREATE review, within the limits and not opted out, or why not.
    fn read(settings: &InjectionSettings, request: AdmissionRequest) -> Result<Subject, Stop> {
        let AdmissionRequest {
            kind,
            sub_resource,
            namespace,
            operation,
            object,
            ..
        } = request;
        if !kind.is_pod() {
            return Err(Stop::Unchanged(vec![format!(
                "warrant's token injection mutates pods only, and was sent a {}: admitted unchanged (check the webhook's rules)",
                cut_value(&kind.describe())
            )]));
        }
        if operation != "CREATE" || sub_resource.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(Stop::Unchanged(vec![]));
        }
        let Some(pod) = object.filter(Value::is_object) else {
            return Err(ApiError::bad_request("request.object is missing or is not a pod").into());
        };
        for field in ["containers", "initContainers"] {
            limits::check_containers(&pod, field, settings.limits.max_containers)
                .map_err(limited("containers"))?;
        }
        let label = pod
            .pointer("/metadata/labels")
            .and_then(|labels| labels.get(OPT_OUT_LABEL))
            .and_then(Value::as_str);
        if label == Some("false") {
            return Err(Stop::Unchanged(vec![]));
        }
        let required = label == Some(REQUIRED_LABEL_VALUE);
        let namespace = namespace
            .filter(|n| !n.is_empty())
            .or_else(|| first_text(&pod, &["/metadata/namespace"]).map(str::to_owned))
            .ok_or_else(|| ApiError::bad_request("the review names no namespace for the pod"))?;
        // kube's defaulting: the deprecated serviceAccount stands in, and admission gives
        // `default` to a pod that names neither.
        let service_account =
            first_text(&pod, &["/spec/serviceAccountName", "/spec/serviceAccount"])
                .unwrap_or("default")
                .to_owned();
        Ok(Subject {
            pod,
            required,
            namespace,
            service_account,
        })
    }

    /// `namespace/name` of the pod's ServiceAccount, each part cut, for messages.
    fn account_name(&self) -> String {
        format!(
            "{}/{}",
            cut_value(&self.namespace),
            cut_value(&self.service_account)
        )
    }

    /// The pod's ServiceAccount, or why the review gets no tokens from it.
    async fn account(
        &self,
        state: &AppState,
        access: Access,
    ) -> Result<std::sync::Arc<warrant_objects::Record>, Stop> {
        let webhook = state.admission();
        let found = webhook
            .accounts
            .find(
                state.objects(),
                &self.namespace,
                &self.service_account,
                access == Access::KubeApiserver,
                state.issuer().clock().now(),
                &webhook.metrics,
            )
            .await;
        match found {
            Ok(Found::Account(account)) => Ok(account),
            Ok(unknown @ (Found::Absent | Found::NotInCache)) => {
                let why = if matches!(unknown, Found::Absent) {
                    "not found"
                } else {
                    "not in warrant's cache, and a review from a caller other than kube-apiserver's certificate is answered from the cache only (--injection-allowed-names)"
                };
                let what = format!("service account {} {why}", self.account_name());
                if self.required {
                    // Not a refusal: the ServiceAccount may be there a moment later, and the
                    // webhook's failurePolicy Fail refuses the pod for now.
                    return Err(ApiError::unavailable(format!(
                        "warrant: {what}, and the pod is labelled {OPT_OUT_LABEL}={REQUIRED_LABEL_VALUE}: not admitted without its tokens; try again shortly"
                    ))
                    .into());
                }
                Err(Stop::Unchanged(vec![format!(
                    "warrant: {what}: no token injected"
                )]))
            }
            Err(lookup::Failure::Overloaded) => {
                Err(limited("lookups")(ApiError::too_many_requests_saying(
                    1,
                    format!(
                        "warrant's webhook has {LOOKUPS_IN_FLIGHT} ServiceAccount lookups in flight already: try again shortly"
                    ),
                ))
                .into())
            }
            Err(lookup::Failure::Failed(why)) => {
                tracing::warn!(error = %cut_value(&why.to_string()), "admission: the ServiceAccount lookup failed");
                Err(ApiError::unavailable(
                    "warrant could not look up the pod's ServiceAccount (its log says why): try again shortly",
                )
                .into())
            }
        }
    }

    /// Refuses or passes over a Windows pod: the agent is warrant's image, built for Linux; on
    /// a Windows node it could not start, and as an init container it would hold the pod back
    /// for good.
    fn check_linux(&self) -> Result<(), Stop> {
        if first_text(
            &self.pod,
            &["/spec/os/name", "/spec/nodeSelector/kubernetes.io~1os"],
        ) != Some("windows")
        {
            return Ok(());
        }
        let message = format!(
            "warrant's token agent runs on Linux only: this Windows pod of {} gets no tokens from it",
            self.account_name()
        );
        if self.required {
            return Err(Stop::Refused(Refusal::bad(format!(
                "{message}, and it is labelled {OPT_OUT_LABEL}={REQUIRED_LABEL_VALUE}"
            ))));
        }
        Err(Stop::Unchanged(vec![message]))
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

/// The longest message a review's answer may carry for any input: a sentence of warrant's,
/// with a few values of the review quoted, each cut to 256 characters.
const MAX_ANSWER_MESSAGE: usize = 2048;

/// What the webhook does with a body, short of the lookups: the bounds, the parse, the plan of
/// a ServiceAccount annotated for every cloud, the patch. Asserts what must hold for any input:
/// no panic, messages and warnings short whatever the body quotes, a patch within its bound.
/// The fuzz target `admission_review` and its corpus replay in the `warrant` crate run it.
pub(crate) fn check_review(bytes: &[u8]) {
    let settings = InjectionSettings {
        agent_image: "warrant".into(),
        warrant_url: "https://warrant.warrant.svc".into(),
        azure_authority_host: AZURE_DEFAULT_AUTHORITY_HOST.into(),
        ..InjectionSettings::default()
    };
    let limits = settings.limits;
    let short = |message: &str| {
        assert!(
            message.chars().count() <= MAX_ANSWER_MESSAGE,
            "a {} character message",
            message.chars().count()
        );
    };
    if bytes.len() > limits.max_review_bytes {
        return;
    }
    let request = match parse(&http::HeaderMap::new(), bytes) {
        Ok((_, request)) => request,
        Err(Unanswered { error, .. }) => return short(error.message()),
    };
    short(&cut_value(&request.kind.describe()));
    let Some(pod) = request.object.filter(Value::is_object) else {
        return;
    };
    for field in ["containers", "initContainers"] {
        if let Err(error) = limits::check_containers(&pod, field, limits.max_containers) {
            return short(error.message());
        }
    }
    let annotations: Vec<(String, String)> = [
        (names::AUDIENCE, "vault"),
        (names::AWS_ROLE_ARN, "arn:aws:iam::111122223333:role/r"),
        (
            names::AZURE_CLIENT_ID,
            "00000000-1111-2222-3333-444444444444",
        ),
        (
            names::AZURE_TENANT_ID,
            "55555555-6666-7777-8888-999999999999",
        ),
        (
            names::GCP_PROVIDER,
            "projects/1/locations/global/workloadIdentityPools/pool/providers/prov",
        ),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let planned = plan::plan(&annotations, &settings);
    assert!(matches!(planned, Ok(Some(_))), "{planned:?}");
    let Ok(Some(plan)) = planned else {
        return;
    };
    match patch::mutate(&pod, &plan, &settings) {
        Ok(mutation) => {
            for warning in &mutation.warnings {
                short(warning);
            }
            let response = AdmissionResponse::patched(request.uid, &mutation.ops, vec![]);
            let patch_bytes = response.patch.as_ref().map_or(0, |p| p.len() / 4 * 3);
            // Within the bounds on containers, the patch is within its own.
            assert!(
                limits::check_patch(patch_bytes, limits.max_patch_bytes).is_ok(),
                "a {patch_bytes} byte patch"
            );
        }
        Err(refusal) => short(&refusal.message),
    }
}
