//! PodCertificateRequests and ClusterTrustBundles (`certificates.k8s.io`), served as
//! kube-apiserver v1.36 serves them to a signer (shared/spec/pod-certificates.md §4.2, §7, §8):
//!
//! - PCRs are namespaced, with field selectors `spec.signerName`, `spec.nodeName` and
//!   `spec.podName` (any other: `400 field label not supported: <label>`), a `/status`
//!   subresource (PUT with a required `resourceVersion`: missing `422`, stale `409`, in kube's
//!   words; a merge PATCH), status cleared on create and spec and metadata sent to `/status`
//!   replaced by the stored ones. Of kube's status rules (§4.3) the fixture checks only the two
//!   that make racing writers observable: a terminal status is immutable (step 3), and a status
//!   without a terminal condition may not change (step 6). The others are the signer's local
//!   mirror's to test (crate `warrant-podcert`), not the fixture's.
//! - ClusterTrustBundles are cluster-scoped, with field selector `spec.signerName`, label
//!   selectors, and the naming rule with kube's exact `422` (§8). Their contents are not
//!   checked here (no X.509 parser in the fixture); `spec.signerName` is immutable.
//!
//! Not modelled: authorization (`sign`, `attest`: any client may write), NodeRestriction, and
//! the cleaner that deletes PCRs after 15 minutes.

use serde_json::Value;

use crate::cluster::{Cluster, ResourceType};
use crate::rules::Rules;

/// The API group of both resources.
pub const GROUP: &str = "certificates.k8s.io";

/// PodCertificateRequests at `version` (`v1beta1` on 1.35/1.36, `v1` from 1.37).
pub fn pod_certificate_requests(version: &'static str) -> ResourceType {
    ResourceType {
        group: GROUP,
        version,
        kind: "PodCertificateRequest",
        plural: "podcertificaterequests",
        namespaced: true,
    }
}

/// ClusterTrustBundles (`v1beta1`).
pub fn cluster_trust_bundles() -> ResourceType {
    ResourceType {
        group: GROUP,
        version: "v1beta1",
        kind: "ClusterTrustBundle",
        plural: "clustertrustbundles",
        namespaced: false,
    }
}

impl Cluster {
    /// Serves PodCertificateRequests at `pcr_version` and ClusterTrustBundles at `v1beta1`,
    /// with kube's selectors, subresource and rules (see the module doc). Discovery lists them.
    pub fn serve_pod_certificates(&self, pcr_version: &'static str) {
        self.register_with(
            pod_certificate_requests(pcr_version),
            Rules {
                fields: vec![
                    ("spec.signerName", "/spec/signerName"),
                    ("spec.nodeName", "/spec/nodeName"),
                    ("spec.podName", "/spec/podName"),
                ],
                status_subresource: true,
                update_needs_resource_version: true,
                validate: Some(validate_pcr),
            },
        );
        self.register_with(
            cluster_trust_bundles(),
            Rules {
                fields: vec![("spec.signerName", "/spec/signerName")],
                status_subresource: false,
                update_needs_resource_version: false,
                validate: Some(validate_bundle),
            },
        );
    }
}

/// Whether a status has an `Issued`, `Denied` or `Failed` condition.
pub fn is_terminal(status: Option<&Value>) -> bool {
    status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("type").and_then(Value::as_str))
        .any(|t| matches!(t, "Issued" | "Denied" | "Failed"))
}

/// A status with null, empty arrays and empty objects left out: kube compares statuses
/// semantically, where an empty list equals an absent one.
fn normal(value: Option<&Value>) -> Value {
    match value {
        Some(Value::Object(map)) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normal(Some(v))))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Some(Value::Array(items)) => Value::Array(items.iter().map(|v| normal(Some(v))).collect()),
        Some(other) => other.clone(),
        None => Value::Null,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn validate_pcr(old: Option<&Value>, new: &Value) -> Result<(), Vec<String>> {
    let Some(old) = old else { return Ok(()) };
    let (before, after) = (old.get("status"), new.get("status"));
    let (before_normal, after_normal) = (normal(before), normal(after));
    let same =
        before_normal == after_normal || (is_empty(&before_normal) && is_empty(&after_normal));
    if same {
        return Ok(());
    }
    if is_terminal(before) {
        return Err(vec![
            "status: Invalid value: immutable after PodCertificateRequest is issued, denied, or failed"
                .to_owned(),
        ]);
    }
    if !is_terminal(after) {
        return Err(vec![
            "status: Invalid value: status is immutable unless transitioning to \"Issued\", \"Denied\", or \"Failed\""
                .to_owned(),
        ]);
    }
    Ok(())
}

fn validate_bundle(old: Option<&Value>, new: &Value) -> Result<(), Vec<String>> {
    let signer = |o: &Value| {
        o.pointer("/spec/signerName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let signer_name = signer(new);
    if let Some(old) = old {
        let was = signer(old);
        if was != signer_name {
            return Err(vec![format!(
                "spec.signerName: Invalid value: \"{signer_name}\": field is immutable"
            )]);
        }
        return Ok(());
    }
    if signer_name.is_empty() {
        if name.contains(':') {
            return Err(vec![format!(
                "metadata.name: Invalid value: \"{name}\": ClusterTrustBundle without signer name must not have \":\" in its name"
            )]);
        }
        return Ok(());
    }
    let prefix = format!("{}:", signer_name.replace('/', ":"));
    if !name.starts_with(&prefix) {
        return Err(vec![format!(
            "metadata.name: Invalid value: \"{name}\": ClusterTrustBundle for signerName {signer_name} must be named with prefix {prefix}"
        )]);
    }
    Ok(())
}
