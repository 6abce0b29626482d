//! The Kubernetes side of warrant's PodCertificateRequest (PCR) signer (KEP-4317; facts in
//! shared/spec/pod-certificates.md).
//!
//! Why a crate of its own: the decision (which PCR gets which certificate) is pure and lives
//! in `warrant-podcert`, tested row by row without a cluster; this crate is the I/O around it,
//! tested against the kube fixture. It knows nothing about X.509 leaves or policy: it hands
//! each PCR, as raw JSON, to a [`Sign`] and writes back the status the decision returns.
//!
//! - [`Controller`] lists and watches PCRs by `spec.signerName` for each signer name warrant
//!   owns (one watch each, all namespaces), skips terminal ones, queues the rest by
//!   namespace/name and writes each decision to `/status` with the resourceVersion it was made
//!   from. Another replica that wrote first makes the write fail with `409`; the PCR is read
//!   again, and if it is terminal now that is a lost race ([`Report::LostRace`]), not an error.
//!   A `422` is a bug in the decision (the status broke kube's rules): it is logged with kube's
//!   message and the PCR is not retried, since the same decision would be refused again.
//! - [`Outcome::Requeue`] writes nothing (a Failed PCR wedges the pod for good, spec §10): the
//!   PCR is retried after a capped backoff ([`Backoff`]). A PCR left without a condition is
//!   deleted after 15 minutes and the kubelet asks again (spec §9), so nothing is lost by
//!   waiting out an outage of the CA.
//! - [`trust`] keeps the ClusterTrustBundles linked to each signer name current across CA
//!   rotations.
//!
//! **Which API version.** PCRs are `certificates.k8s.io/v1beta1` on 1.35 and 1.36 and `v1` from
//! 1.37 (v1beta1 deprecated there). [`choose_version`] asks discovery once, at start: `v1` if
//! the API server serves `podcertificaterequests` there, else `v1beta1`, else an error naming
//! the feature gates (spec §11: without them kube drops pods' `podCertificate` sources
//! silently). Both versions are views of the same objects, so watching one sees every PCR,
//! whichever version its kubelet created it in; the status is written in the version read.
//! A cluster upgraded to 1.37 under a running warrant keeps v1beta1 until warrant restarts,
//! which is correct while v1beta1 is served.
//!
//! **Time.** Retries and queue ages use tokio's monotonic clock (a paused test runtime controls
//! it); the wall-clock decisions (certificate times) are the [`Sign`] implementation's, with
//! warrant's clock.
//!
//! Metrics are listed in [`Controller::new`]'s and [`trust::TrustBundles::new`]'s docs and in
//! docs/metrics.md.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

mod controller;
mod metrics;
mod queue;
pub mod trust;
mod version;

pub use controller::{Config, Controller};
pub use queue::Backoff;
pub use version::{PcrVersion, choose_version};

/// What the decision says to do with one PCR.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Write this `status` (the whole `status` object: an `Issued` condition with the chain and
    /// times, or a `Denied`/`Failed` condition alone).
    Write(Value),
    /// Write nothing now and try again later (the CA, the HSM or the audit log unreachable):
    /// after at least `after`, and after the backoff, capped.
    Requeue {
        /// Why, for the log (no key material).
        reason: String,
        /// The earliest retry the decision wants.
        after: Duration,
    },
    /// Not this signer's to answer (never written, never retried until the PCR changes).
    Ignore,
}

/// What became of a written decision, for the audit trail: PCRs are deleted 15 minutes after
/// creation, so this is the only record of a race lost or a status kube refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// The status was stored.
    Written {
        /// The status as sent.
        status: Value,
    },
    /// Another writer (a replica) made the PCR terminal first; ours was not stored.
    LostRace {
        /// The status stored by the winner.
        winner: Value,
    },
    /// kube-apiserver refused the status with `422` (a bug in the decision; not retried).
    Refused {
        /// kube-apiserver's message.
        message: String,
    },
    /// The PCR was deleted before the status could be written.
    Gone,
}

/// The decision, as the controller sees it. `warrant-podcert` implements it with the real
/// decision function; tests implement it with a double.
pub trait Sign: Send + Sync + 'static {
    /// Decides one non-terminal PCR of one of the controller's signer names. `pcr` is the
    /// object as read (JSON, any served version), `resourceVersion` included.
    fn handle(&self, pcr: &Value) -> impl Future<Output = Outcome> + Send;

    /// Told what became of a [`Outcome::Write`]: the place to audit it. The default does nothing.
    fn report(&self, pcr: &Value, report: &Report) {
        let _ = (pcr, report);
    }
}

/// Why the controller or the trust bundle keeper could not run or write.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither `certificates.k8s.io/v1` nor `v1beta1` serves `podcertificaterequests`.
    #[error(
        "the API server serves no podcertificaterequests (certificates.k8s.io v1 or v1beta1): on Kubernetes 1.35 and 1.36 enable the feature gates PodCertificateRequest, ClusterTrustBundle and ClusterTrustBundleProjection and --runtime-config=certificates.k8s.io/v1beta1=true"
    )]
    NotServed,
    /// A signer name warrant may not own (`kubernetes.io/…` is reserved), or one that is not
    /// `<domain>/<path>`.
    #[error(
        "signer name {0:?} cannot be warrant's: it must be <domain>/<path> and outside kubernetes.io"
    )]
    SignerName(String),
    /// A request to the API server failed.
    #[error("API server request failed: {0}")]
    Kube(#[source] kube::Error),
    /// Trust bundle contents that kube-apiserver would refuse (see [`trust::check_bundle`]).
    #[error("trust bundle for {signer:?} refused before writing: {reason}")]
    Bundle {
        /// The signer name.
        signer: String,
        /// What was wrong.
        reason: String,
    },
}

/// Checks a signer name warrant is to own: `<domain>/<path>`, not `kubernetes.io`'s.
pub fn check_signer_name(name: &str) -> Result<(), Error> {
    let reserved = name.starts_with("kubernetes.io/") || name.contains(".kubernetes.io/");
    let well_formed = name.split_once('/').is_some_and(|(domain, path)| {
        domain.contains('.') && !path.is_empty() && !domain.contains(':') && !path.contains(':')
    });
    if reserved || !well_formed {
        return Err(Error::SignerName(name.to_owned()));
    }
    Ok(())
}

/// Whether a PCR (or its status) has an `Issued`, `Denied` or `Failed` condition: kube allows
/// no further change then (spec §4.3 step 3).
pub fn is_terminal(pcr: &Value) -> bool {
    pcr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("type").and_then(Value::as_str))
        .any(|t| matches!(t, "Issued" | "Denied" | "Failed"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signer_names_are_domain_and_path_outside_kubernetes_io() {
        for good in ["warrant.example.com/spiffe", "pods.example.org/a/b"] {
            assert!(check_signer_name(good).is_ok(), "{good}");
        }
        for bad in [
            "kubernetes.io/kube-apiserver-client-pod",
            "beta.kubernetes.io/x",
            "nodomain",
            "example/x",
            "warrant.example.com/",
            "warrant.example.com:x/y",
        ] {
            assert!(check_signer_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn terminal_means_an_issued_denied_or_failed_condition() {
        assert!(!is_terminal(&json!({"status": {}})));
        assert!(!is_terminal(&json!({})));
        for t in ["Issued", "Denied", "Failed"] {
            assert!(is_terminal(
                &json!({"status": {"conditions": [{"type": t}]}})
            ));
        }
        assert!(!is_terminal(
            &json!({"status": {"conditions": [{"type": "Other"}]}})
        ));
    }
}
