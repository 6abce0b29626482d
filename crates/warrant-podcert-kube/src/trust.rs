//! ClusterTrustBundles linked to warrant's signer names (spec §8): the roots a pod's
//! `clusterTrustBundle` projection reads to trust the certificates warrant issues.
//!
//! **One live bundle per signer name.** It is named `<signer, with / as :>:live` (kube requires
//! the signer-name prefix and `:`) and carries two labels:
//!
//! - `warrant.dev/trust-bundle: live`: what pods select, with the signer name:
//!   `clusterTrustBundle: {signerName: warrant.example.com/spiffe, labelSelector: {matchLabels:
//!   {warrant.dev/trust-bundle: live}}}`. Selecting by label rather than by name leaves warrant
//!   free to rename the bundle later without editing pod specs.
//! - `app.kubernetes.io/managed-by: warrant`: what warrant owns. Bundles for the same signer
//!   name with this label but another name are stale (an older naming, a bundle left by a
//!   previous configuration) and are deleted; bundles without it are never touched.
//!
//! **Rotation.** The bundle holds every CA certificate in force: during an overlap the old and
//! the new root (kube accepts two different roots, spec §8), afterwards one. Each
//! [`TrustBundles::sync`] makes the live bundle hold exactly the roots it is given, in that
//! order, so the caller (the CA key schedule) decides when a root joins and leaves.
//!
//! **Checked before writing** ([`check_bundle`]), with kube-apiserver's rules: only `CERTIFICATE`
//! blocks, each a certificate with the CA bit set, no duplicates, at least one, at most 1 MiB.
//! A refusal is counted and returned; nothing is written.
//!
//! Metric: `warrant_podcert_trust_bundle_errors_total{signer,error}` (`invalid`: contents
//! refused locally; `api`: the API server refused or failed, e.g. `403` without `attest`).
//!
//! RBAC (spec §6): clustertrustbundles get/list/create/update/delete, and `attest` on
//! `signers` for the signer names.

use std::collections::BTreeMap;

use base64::Engine as _;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

use crate::{Error, check_signer_name};

/// The label pods select the live bundle by, with value [`LIVE`].
pub const LIVE_LABEL: &str = "warrant.dev/trust-bundle";
/// The value of [`LIVE_LABEL`] on the live bundle.
pub const LIVE: &str = "live";
/// The label that marks a bundle as warrant's (value `warrant`), as on warrant's key Secret.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// kube-apiserver's `MaxTrustBundleSize`.
pub const MAX_BUNDLE_BYTES: usize = 1024 * 1024;

/// The name of a signer's live bundle: `warrant.example.com/spiffe` → `warrant.example.com:spiffe:live`.
pub fn bundle_name(signer: &str) -> String {
    format!("{}:{LIVE}", signer.replace('/', ":"))
}

/// Checks `roots` (PEM, one or more certificates per string) as kube-apiserver checks a
/// trust bundle, and returns the bundle as written: each certificate re-encoded as one
/// `CERTIFICATE` block (headers and text between blocks dropped), in the order given.
pub fn check_bundle(signer: &str, roots: &[String]) -> Result<String, Error> {
    let refuse = |reason: String| Error::Bundle {
        signer: signer.to_owned(),
        reason,
    };
    let mut ders: Vec<Vec<u8>> = Vec::new();
    for pem in roots {
        for line in pem.lines().filter(|l| l.starts_with("-----BEGIN ")) {
            if line.trim_end() != "-----BEGIN CERTIFICATE-----" {
                return Err(refuse(format!(
                    "only CERTIFICATE blocks may be in a trust bundle, not {:?}",
                    line.trim_end()
                )));
            }
        }
        let blocks = pem.lines().filter(|l| l.starts_with("-----BEGIN ")).count();
        let mut parsed = 0;
        for der in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let der =
                der.map_err(|e| refuse(format!("a CERTIFICATE block does not decode: {e}")))?;
            ders.push(der.as_ref().to_vec());
            parsed += 1;
        }
        if parsed != blocks {
            return Err(refuse("a CERTIFICATE block does not decode".to_owned()));
        }
    }
    if ders.is_empty() {
        return Err(refuse("no certificate".to_owned()));
    }
    for (i, der) in ders.iter().enumerate() {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|_| refuse(format!("entry {i} does not parse as X.509")))?;
        let ca = matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca);
        if !ca {
            return Err(refuse(format!("entry {i} does not have the CA bit set")));
        }
        if let Some(j) = ders
            .get(..i)
            .and_then(|before| before.iter().position(|d| d == der))
        {
            return Err(refuse(format!(
                "duplicate trust anchor (indices [{j} {i}])"
            )));
        }
    }
    let bundle: String = ders.iter().map(|der| pem_block(der)).collect();
    if bundle.len() > MAX_BUNDLE_BYTES {
        return Err(refuse(format!(
            "{} bytes, more than kube's limit of {MAX_BUNDLE_BYTES}",
            bundle.len()
        )));
    }
    Ok(bundle)
}

/// True when the bundle `written` holds the same roots as `wanted`, in the same order: the
/// same bytes, or roots that are equivalent (`warrant_podcert::equivalent_roots`). Replicas
/// that sign their own root for a CA key held in a shared store (each self-signature has its
/// own randomness) then leave the first one written in place, rather than each rewriting the
/// bundle with its own in turn.
fn same_bundle(written: &str, wanted: &str) -> bool {
    if written == wanted {
        return true;
    }
    let ders = |pem: &str| -> Option<Vec<Vec<u8>>> {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|der| der.ok().map(|d| d.as_ref().to_vec()))
            .collect()
    };
    match (ders(written), ders(wanted)) {
        (Some(written), Some(wanted)) => {
            written.len() == wanted.len()
                && written
                    .iter()
                    .zip(&wanted)
                    .all(|(a, b)| warrant_podcert::equivalent_roots(a, b))
        }
        _ => false,
    }
}

fn pem_block(der: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// What [`TrustBundles::sync`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// The live bundle was `created`, `updated` or `unchanged`.
    pub live: Change,
    /// Stale bundles of warrant's for the signer name, deleted.
    pub deleted: Vec<String>,
}

/// What happened to the live bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It did not exist and was created.
    Created,
    /// Its roots or labels differed and were replaced.
    Updated,
    /// It already held these roots.
    Unchanged,
}

/// Keeps signer-linked ClusterTrustBundles current (see the module doc).
#[derive(Clone)]
pub struct TrustBundles {
    api: Api<DynamicObject>,
    errors: Family<Vec<(&'static str, String)>, Counter>,
    syncs: Family<Vec<(&'static str, String)>, Counter>,
}

impl std::fmt::Debug for TrustBundles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustBundles").finish_non_exhaustive()
    }
}

fn resource() -> ApiResource {
    ApiResource {
        group: crate::version::GROUP.to_owned(),
        version: "v1beta1".to_owned(),
        api_version: format!("{}/v1beta1", crate::version::GROUP),
        kind: "ClusterTrustBundle".to_owned(),
        plural: "clustertrustbundles".to_owned(),
    }
}

impl TrustBundles {
    /// A keeper writing through `client` (ClusterTrustBundles `v1beta1`); registers
    /// `warrant_podcert_trust_bundle_errors_total` and `warrant_podcert_trust_bundle_syncs_total`
    /// in `registry`.
    pub fn new(client: Client, registry: &mut Registry) -> Self {
        let errors = Family::default();
        registry.register(
            "warrant_podcert_trust_bundle_errors",
            "ClusterTrustBundle updates that failed, by signer and error",
            errors.clone(),
        );
        let syncs = Family::default();
        registry.register(
            "warrant_podcert_trust_bundle_syncs",
            "ClusterTrustBundles brought in step with the CA's roots, by signer and what it took (created, updated, unchanged)",
            syncs.clone(),
        );
        TrustBundles {
            api: Api::all_with(client, &resource()),
            errors,
            syncs,
        }
    }

    fn error(&self, signer: &str, error: &'static str) {
        self.errors
            .get_or_create(&vec![
                ("signer", signer.to_owned()),
                ("error", error.to_owned()),
            ])
            .inc();
    }

    /// Makes `signer`'s live bundle hold exactly `roots` (checked first), and deletes warrant's
    /// stale bundles for it.
    pub async fn sync(&self, signer: &str, roots: &[String]) -> Result<Synced, Error> {
        check_signer_name(signer)?;
        let bundle = check_bundle(signer, roots).inspect_err(|_| self.error(signer, "invalid"))?;
        let synced = self
            .write(signer, bundle)
            .await
            .inspect_err(|_| self.error(signer, "api"))?;
        let change = match synced.live {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
        };
        self.syncs
            .get_or_create(&vec![
                ("signer", signer.to_owned()),
                ("change", change.to_owned()),
            ])
            .inc();
        Ok(synced)
    }

    async fn write(&self, signer: &str, bundle: String) -> Result<Synced, Error> {
        let name = bundle_name(signer);
        let ours = ListParams::default()
            .fields(&format!("spec.signerName={signer}"))
            .labels(&format!("{MANAGED_BY_LABEL}=warrant"));
        let listed = self.api.list(&ours).await.map_err(Error::Kube)?;
        let labels: BTreeMap<String, String> = [
            (LIVE_LABEL.to_owned(), LIVE.to_owned()),
            (MANAGED_BY_LABEL.to_owned(), "warrant".to_owned()),
        ]
        .into();
        let current = listed
            .items
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(&name));
        let live = match current {
            Some(found) => {
                let same_roots = found
                    .data
                    .pointer("/spec/trustBundle")
                    .and_then(Value::as_str)
                    .is_some_and(|written| same_bundle(written, &bundle));
                let same_labels = found.metadata.labels.as_ref() == Some(&labels);
                if same_roots && same_labels {
                    Change::Unchanged
                } else {
                    let mut updated = found.clone();
                    updated.metadata.labels = Some(labels);
                    updated.data =
                        json!({ "spec": { "signerName": signer, "trustBundle": bundle } });
                    self.api
                        .replace(&name, &PostParams::default(), &updated)
                        .await
                        .map_err(Error::Kube)?;
                    Change::Updated
                }
            }
            None => {
                let mut created = DynamicObject::new(&name, &resource())
                    .data(json!({ "spec": { "signerName": signer, "trustBundle": bundle } }));
                created.metadata.labels = Some(labels);
                self.api
                    .create(&PostParams::default(), &created)
                    .await
                    .map_err(Error::Kube)?;
                Change::Created
            }
        };
        let mut deleted = Vec::new();
        for stale in &listed.items {
            let Some(stale_name) = stale.metadata.name.as_deref() else {
                continue;
            };
            if stale_name == name {
                continue;
            }
            match self.api.delete(stale_name, &DeleteParams::default()).await {
                Ok(_) => deleted.push(stale_name.to_owned()),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(error) => return Err(Error::Kube(error)),
            }
        }
        Ok(Synced { live, deleted })
    }
}
