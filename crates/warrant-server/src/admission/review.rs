//! The AdmissionReview wire types (`admission.k8s.io/v1`, and `v1beta1`, which has the same
//! fields), the parts warrant reads and writes. kube-apiserver sends the request as JSON
//! whatever the webhook's configuration; the answer goes back in the request's version.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ApiError;
use crate::protobuf::FromProtobuf;

/// `admission.k8s.io/v1`.
pub(crate) const ADMISSION_V1: &str = "admission.k8s.io/v1";
/// `admission.k8s.io/v1beta1`: the same fields.
pub(crate) const ADMISSION_V1BETA1: &str = "admission.k8s.io/v1beta1";

/// An AdmissionReview as kube-apiserver sends it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionReview {
    #[serde(default)]
    pub(crate) api_version: Option<String>,
    #[serde(default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) request: Option<AdmissionRequest>,
}

/// `request`: what is being admitted.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionRequest {
    /// Echoed in the response, which kube-apiserver matches to its request by it.
    #[serde(default)]
    pub(crate) uid: String,
    /// The object's kind (`{group, version, kind}`).
    #[serde(default)]
    pub(crate) kind: GroupVersionKind,
    /// Set for a subresource (`pods/ephemeralcontainers`); empty for the pod itself.
    #[serde(default)]
    pub(crate) sub_resource: Option<String>,
    /// The request's namespace (a controller's pods have none in their own metadata).
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    #[serde(default)]
    pub(crate) operation: String,
    /// The object as it would be stored.
    #[serde(default)]
    pub(crate) object: Option<Value>,
    // `dryRun` is not read: the mutation has no side effects (`sideEffects: None`), so a dry
    // run (`kubectl --dry-run=server`) is mutated exactly as the real request would be.
}

/// `{group, version, kind}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct GroupVersionKind {
    #[serde(default)]
    pub(crate) group: String,
    #[serde(default)]
    pub(crate) version: String,
    #[serde(default)]
    pub(crate) kind: String,
}

impl GroupVersionKind {
    /// `group/version, Kind=kind`, as kube writes a GVK (`/v1, Kind=Pod`).
    pub(crate) fn describe(&self) -> String {
        format!("{}/{}, Kind={}", self.group, self.version, self.kind)
    }

    /// A core v1 Pod.
    pub(crate) fn is_pod(&self) -> bool {
        self.group.is_empty() && self.version == "v1" && self.kind == "Pod"
    }
}

/// kube-apiserver reads an AdmissionReview as JSON only; a protobuf body is refused.
impl FromProtobuf for AdmissionReview {
    fn from_protobuf(_: &[u8]) -> Result<Self, ApiError> {
        Err(ApiError::bad_request(
            "an AdmissionReview is read as JSON only (kube-apiserver sends JSON)",
        ))
    }
}

/// The answer: the review with its `response`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionReviewAnswer {
    pub(crate) api_version: String,
    pub(crate) kind: &'static str,
    pub(crate) response: AdmissionResponse,
}

/// `response`.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionResponse {
    pub(crate) uid: String,
    pub(crate) allowed: bool,
    /// Why the pod is refused (with `allowed: false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<DenyStatus>,
    /// `JSONPatch`, with `patch`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch_type: Option<&'static str>,
    /// The JSON Patch (RFC 6902), base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch: Option<String>,
    /// Shown to the client (kubectl prints them as `Warning: …`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
}

impl AdmissionResponse {
    /// Admitted as it is.
    pub(crate) fn unchanged(uid: String, warnings: Vec<String>) -> Self {
        AdmissionResponse {
            uid,
            allowed: true,
            status: None,
            patch_type: None,
            patch: None,
            warnings,
        }
    }

    /// Admitted with `patch` applied (none if it is empty).
    pub(crate) fn patched(uid: String, patch: &[Value], warnings: Vec<String>) -> Self {
        if patch.is_empty() {
            return Self::unchanged(uid, warnings);
        }
        // A list of JSON values always serializes.
        let bytes = serde_json::to_vec(patch).unwrap_or_default();
        AdmissionResponse {
            uid,
            allowed: true,
            status: None,
            patch_type: Some("JSONPatch"),
            patch: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            warnings,
        }
    }

    /// Refused: kube-apiserver answers the client `admission webhook "…" denied the request:
    /// <message>` with `code`.
    pub(crate) fn denied(uid: String, code: u16, reason: &'static str, message: String) -> Self {
        AdmissionResponse {
            uid,
            allowed: false,
            status: Some(DenyStatus {
                status: "Failure",
                message,
                reason,
                code,
            }),
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        }
    }
}

/// The `metav1.Status` of a refusal.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct DenyStatus {
    pub(crate) status: &'static str,
    pub(crate) message: String,
    pub(crate) reason: &'static str,
    pub(crate) code: u16,
}
