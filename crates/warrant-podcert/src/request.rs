//! A PodCertificateRequest as the signer reads it, from its JSON: `certificates.k8s.io/v1beta1`
//! (1.35, 1.36) and `v1` (1.37) through one view, since the fields the signer reads have the
//! same names and meaning in both (`v1` only lacks the deprecated `pkixPublicKey` pair).
//!
//! Two layers of "wrong": an object that is not a PCR at all, or lacks the metadata a status
//! write needs, is a [`RequestError`] (nothing can be written back; the caller logs and skips
//! it). A PCR whose spec is unusable (a missing field, both or neither key form, bad base64)
//! parses, with [`PodCertificateRequest::spec`] holding a [`SpecError`], and the decision
//! denies it: kube-apiserver validates every spec at create, so such a PCR did not come from
//! kube-apiserver as measured, and an answer is better than a PCR left pending.
//!
//! Key material: kube serializes the unused form as `null` (`"pkixPublicKey": null,
//! "proofOfPossession": null`, spec §2.1), so `null`, absent and empty are the same here.

use std::collections::BTreeMap;

use base64::Engine as _;
use jiff::Timestamp;
use serde::Deserialize;

use crate::key::{KeyError, RequestedKey};
use crate::status::PodCertificateRequestStatus;

/// The PCR's `kind`.
pub const KIND: &str = "PodCertificateRequest";
/// kube's default `spec.maxExpirationSeconds` (24 h).
pub const DEFAULT_MAX_EXPIRATION_SECONDS: i64 = 86_400;

/// The API versions a PCR is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiVersion {
    /// `certificates.k8s.io/v1beta1` (1.35, 1.36; deprecated in 1.37).
    V1beta1,
    /// `certificates.k8s.io/v1` (1.37).
    V1,
}

impl ApiVersion {
    /// The `apiVersion` string.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1beta1 => "certificates.k8s.io/v1beta1",
            ApiVersion::V1 => "certificates.k8s.io/v1",
        }
    }
}

/// Why an object cannot be handled as a PCR at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// `apiVersion` or `kind` name something else.
    #[error("not a PodCertificateRequest: apiVersion {api_version:?}, kind {kind:?}")]
    NotAPodCertificateRequest {
        /// The object's `apiVersion` (cut).
        api_version: String,
        /// The object's `kind` (cut).
        kind: String,
    },
    /// The JSON is not of a PCR's shape (a field of the wrong type).
    #[error("PodCertificateRequest does not have a PodCertificateRequest's shape: {0}")]
    Shape(String),
    /// `metadata.namespace` or `metadata.name` is missing: no status could be written.
    #[error("PodCertificateRequest has no {0}")]
    MissingMetadata(&'static str),
}

/// Why a PCR's spec is unusable (the decision denies it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// A required field is missing or empty.
    #[error("{0} is missing")]
    Missing(&'static str),
    /// A name that no Kubernetes object can have (kube-apiserver refuses it at create; warrant
    /// also never puts it in a request path, where `/` or `..` would name another object).
    #[error("{0} is not a valid object name (lowercase letters, digits, '-' and '.', at most 253)")]
    Name(&'static str),
    /// Both key forms, or neither (kube-apiserver's own words for it at create).
    #[error("exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set")]
    KeyForm,
    /// `pkixPublicKey` without `proofOfPossession` or the reverse.
    #[error("pkixPublicKey and proofOfPossession must be set together")]
    HalfPair,
    /// The deprecated pair in a `v1` object, which has no such fields.
    #[error("certificates.k8s.io/v1 has no pkixPublicKey; only stubPKCS10Request")]
    PairInV1,
    /// A base64 field does not decode.
    #[error("{0} is not base64")]
    Base64(&'static str),
    /// `maxExpirationSeconds` is outside kube's range [3600, 7862400].
    #[error("spec.maxExpirationSeconds {0} is outside [3600, 7862400]")]
    MaxExpiration(i64),
    /// The key material is unusable.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// How the key was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyForm {
    /// `stubPKCS10Request` (1.36 kubelets, and `v1`).
    StubPkcs10,
    /// `pkixPublicKey` + `proofOfPossession` (1.35 kubelets; deprecated).
    PkixPublicKey,
}

/// A PCR's spec, checked: every identity field present, one key form, the key read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// `spec.signerName`.
    pub signer_name: String,
    /// `spec.podName`.
    pub pod_name: String,
    /// `spec.podUID`.
    pub pod_uid: String,
    /// `spec.serviceAccountName`.
    pub service_account_name: String,
    /// `spec.serviceAccountUID`.
    pub service_account_uid: String,
    /// `spec.nodeName`.
    pub node_name: String,
    /// `spec.nodeUID`.
    pub node_uid: String,
    /// `spec.maxExpirationSeconds`, 86400 when unset.
    pub max_expiration_seconds: i64,
    /// `spec.unverifiedUserAnnotations`: the pod author's, unverified.
    pub unverified_user_annotations: BTreeMap<String, String>,
    /// How the key came.
    pub key_form: KeyForm,
    /// The requested key (only its SPKI was read).
    pub key: RequestedKey,
}

/// A PodCertificateRequest: the metadata a status write needs, its spec (or why the spec is
/// unusable), and its current status.
#[derive(Debug, Clone)]
pub struct PodCertificateRequest {
    /// Which API it was read from (absent `apiVersion`: `v1beta1`, as a watch of it delivers).
    pub api_version: ApiVersion,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`, if the object carried it.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`, if the object carried it (a PUT needs it).
    pub resource_version: Option<String>,
    /// `metadata.creationTimestamp` (kube-apiserver's clock, whole seconds).
    pub creation_timestamp: Option<Timestamp>,
    /// `spec.signerName` as sent, even when the rest of the spec is unusable (to tell whose
    /// request it is).
    pub signer_name: String,
    /// The spec, or why it is unusable.
    pub spec: Result<Spec, SpecError>,
    /// The status as read.
    pub status: PodCertificateRequestStatus,
}

impl PodCertificateRequest {
    /// Reads a PCR from its JSON object (as a list, watch or get returns it).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, RequestError> {
        let wire =
            Wire::deserialize(value).map_err(|e| RequestError::Shape(cut(&e.to_string())))?;
        let api_version = match (wire.api_version.as_deref(), wire.kind.as_deref()) {
            (None | Some("certificates.k8s.io/v1beta1"), None | Some(KIND)) => ApiVersion::V1beta1,
            (Some("certificates.k8s.io/v1"), None | Some(KIND)) => ApiVersion::V1,
            (api_version, kind) => {
                return Err(RequestError::NotAPodCertificateRequest {
                    api_version: cut(api_version.unwrap_or_default()),
                    kind: cut(kind.unwrap_or_default()),
                });
            }
        };
        let meta = wire.metadata;
        let namespace =
            nonempty(meta.namespace).ok_or(RequestError::MissingMetadata("metadata.namespace"))?;
        let name = nonempty(meta.name).ok_or(RequestError::MissingMetadata("metadata.name"))?;
        let creation_timestamp = match meta.creation_timestamp.as_deref() {
            None | Some("") => None,
            Some(t) => Some(t.parse::<Timestamp>().map_err(|_| {
                RequestError::Shape("metadata.creationTimestamp is not an RFC 3339 time".into())
            })?),
        };
        let signer_name = wire.spec.signer_name.clone().unwrap_or_default();
        Ok(PodCertificateRequest {
            api_version,
            namespace,
            name,
            uid: nonempty(meta.uid),
            resource_version: nonempty(meta.resource_version),
            creation_timestamp,
            signer_name,
            spec: check_spec(wire.spec, api_version),
            status: wire.status.unwrap_or_default(),
        })
    }

    /// Whether the status already has a terminal condition (`Issued`, `Denied` or `Failed`
    /// with status `True`): such a PCR is done, whoever decided it.
    pub fn is_terminal(&self) -> bool {
        self.status.terminal_condition().is_some()
    }
}

/// The body of a status `PUT`: the PCR as read (its `metadata.resourceVersion` is the
/// precondition that makes a second writer's `PUT` fail with `409`), with `status` replaced.
/// kube-apiserver discards whatever else of the object a `/status` write changes.
pub fn with_status(
    pcr: &serde_json::Value,
    status: &PodCertificateRequestStatus,
) -> serde_json::Value {
    let mut body = pcr.clone();
    if let Some(object) = body.as_object_mut() {
        object.insert("status".to_owned(), status.to_json());
    }
    body
}

/// A pod's, service account's or node's name as kube validates it (a DNS subdomain: lowercase
/// letters, digits, `-` and `.`, starting and ending alphanumeric, at most 253 characters).
fn object_name(name: Option<String>, field: &'static str) -> Result<String, SpecError> {
    let name = nonempty(name).ok_or(SpecError::Missing(field))?;
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let valid = name.len() <= 253
        && name.bytes().all(|b| alnum(b) || b == b'-' || b == b'.')
        && name.bytes().next().is_some_and(alnum)
        && name.bytes().last().is_some_and(alnum);
    if valid {
        Ok(name)
    } else {
        Err(SpecError::Name(field))
    }
}

fn check_spec(spec: WireSpec, api_version: ApiVersion) -> Result<Spec, SpecError> {
    let required = |v: Option<String>, field| nonempty(v).ok_or(SpecError::Missing(field));
    let stub = decode(spec.stub_pkcs10_request, "spec.stubPKCS10Request")?;
    let pkix = decode(spec.pkix_public_key, "spec.pkixPublicKey")?;
    let proof = decode(spec.proof_of_possession, "spec.proofOfPossession")?;
    let (key_form, key) = match (stub, pkix, proof) {
        (Some(csr), None, None) => (KeyForm::StubPkcs10, RequestedKey::from_csr(&csr)?),
        (None, Some(_), Some(_)) if api_version == ApiVersion::V1 => {
            return Err(SpecError::PairInV1);
        }
        (None, Some(spki), Some(_)) => (KeyForm::PkixPublicKey, RequestedKey::from_spki(&spki)?),
        (None, Some(_), None) | (None, None, Some(_)) => return Err(SpecError::HalfPair),
        _ => return Err(SpecError::KeyForm),
    };
    let max_expiration_seconds = spec
        .max_expiration_seconds
        .unwrap_or(DEFAULT_MAX_EXPIRATION_SECONDS);
    if !(3600..=7_862_400).contains(&max_expiration_seconds) {
        return Err(SpecError::MaxExpiration(max_expiration_seconds));
    }
    Ok(Spec {
        signer_name: required(spec.signer_name, "spec.signerName")?,
        pod_name: object_name(spec.pod_name, "spec.podName")?,
        pod_uid: required(spec.pod_uid, "spec.podUID")?,
        service_account_name: object_name(spec.service_account_name, "spec.serviceAccountName")?,
        service_account_uid: required(spec.service_account_uid, "spec.serviceAccountUID")?,
        node_name: object_name(spec.node_name, "spec.nodeName")?,
        node_uid: required(spec.node_uid, "spec.nodeUID")?,
        max_expiration_seconds,
        unverified_user_annotations: spec.unverified_user_annotations.unwrap_or_default(),
        key_form,
        key,
    })
}

/// A base64 field: absent, `null` and `""` are all "not set".
fn decode(field: Option<String>, name: &'static str) -> Result<Option<Vec<u8>>, SpecError> {
    match field.as_deref() {
        None | Some("") => Ok(None),
        Some(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Some)
            .map_err(|_| SpecError::Base64(name)),
    }
}

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

fn cut(s: &str) -> String {
    warrant_token::cut_value(s).into_owned()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    metadata: WireMeta,
    #[serde(default)]
    spec: WireSpec,
    status: Option<PodCertificateRequestStatus>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireSpec {
    signer_name: Option<String>,
    pod_name: Option<String>,
    #[serde(rename = "podUID")]
    pod_uid: Option<String>,
    service_account_name: Option<String>,
    #[serde(rename = "serviceAccountUID")]
    service_account_uid: Option<String>,
    node_name: Option<String>,
    #[serde(rename = "nodeUID")]
    node_uid: Option<String>,
    max_expiration_seconds: Option<i64>,
    #[serde(rename = "stubPKCS10Request")]
    stub_pkcs10_request: Option<String>,
    pkix_public_key: Option<String>,
    proof_of_possession: Option<String>,
    unverified_user_annotations: Option<BTreeMap<String, String>>,
}
