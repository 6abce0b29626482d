//! warrant as a PodCertificateRequest signer (KEP-4317): the pure core.
//!
//! A pod that declares a `podCertificate` projected volume gets, from its kubelet, a key and a
//! PodCertificateRequest (PCR) naming a signer; whoever owns that signer name writes the
//! certificate chain into the PCR's status. This crate decides one PCR: [`decide`] (or
//! [`decide_json`] on the object a watch delivers) takes the PCR, the facts read live, the
//! policy, `now` and a CA, and returns a [`Decision`] whose status, if it has one, has already
//! passed a mirror of kube-apiserver's status rules ([`validate_status_update`]). It performs
//! no I/O and reads no clock; watching PCRs, reading pods and writing status are the kube
//! side's (the `warrant-podcert-kube` crate).
//!
//! # The order of the decision, and why
//!
//! kube-apiserver v1.36.2 checks little of a PCR's identity: NodeRestriction re-checks the
//! pod, service account and node only when a **node** creates the PCR; anyone else with
//! `create` may name a pod that does not exist, another service account or another node. It
//! accepts PCRs for pods that finished, issuance for pods deleted meanwhile, stub CSRs that
//! carry a CN, DNS or URI SANs, and leaves the meaning of `unverifiedUserAnnotations` to the
//! signer. Those checks are the signer's (shared spec `pod-certificates.md` §5). In order:
//!
//! 1. **Already terminal** (`Issued`, `Denied` or `Failed`): ignored. The status can no
//!    longer change (kube's step 3), and another replica may have answered first.
//! 2. **Signer name not in the policy**: ignored; not warrant's to answer.
//! 3. **Spec unusable** (a field missing, both key forms or neither, a key that is not
//!    DER): `Denied` (`InvalidRequest`, `InvalidKeyMaterial`). kube-apiserver refuses such
//!    specs at create, so this is defence, but an answer beats a PCR left pending.
//! 4. **Unverified user annotations**: warrant documents no key yet, so any key is `Denied`
//!    (`InvalidUnverifiedUserAnnotations`), as the API docs ask of signers that do not
//!    recognise one. They are the pod author's words; nothing of them reaches a certificate.
//! 5. **Policy**: the namespace and service account must be allowed this signer
//!    (`NotPermitted`), and the key type (`UnsupportedKeyType`, naming the allowed types).
//!    These need nothing read live, so they come before the identity.
//! 6. **Identity, read live**: the pod by name with the PCR's UID (`PodNotFound`), on the
//!    PCR's node and as the PCR's service account (`PodMismatch`), `Pending` or `Running` and
//!    not being deleted (`PodNotRunning`); the service account's and node's UIDs
//!    (`ServiceAccountMismatch`, `NodeMismatch`). A fact that could not be read is a
//!    `Requeue`, never a denial.
//! 7. **Times**: `notBefore` = now − 1 min (never before the CA's start), lifetime the
//!    smaller of the PCR's `maxExpirationSeconds` and the policy's (never under an hour),
//!    cut to the CA's end; `beginRefreshAt` three quarters in, 10 min from either end. A CA not yet valid or
//!    ending within the hour, or a PCR created 4 min or more "in the future" (warrant's clock
//!    behind kube-apiserver's, which refuses a `notBefore` 5 min off its own), is a `Requeue`.
//! 8. **Signature** (the one await: a held key signs on a device or over a network): a CA
//!    that cannot sign now is a `Requeue`; one that refuses this signature for good is
//!    `Failed`. The signature is verified before use.
//!
//! `Requeue` writes nothing: `Denied` and `Failed` are final for the kubelet (it never asks
//! again for that projection, so the pod never starts), while a PCR left without a condition is
//! deleted after 15 min and the kubelet asks anew. So anything retrying can mend (the CA, its
//! holder, the API, the clock) waits; `Failed` is only for what retrying cannot mend.
//!
//! Only the SubjectPublicKeyInfo of the request reaches the leaf ([`key`]); the leaf has an
//! empty subject and one URI SAN, `spiffe://<trust domain>/ns/<namespace>/sa/<name>`
//! ([`certificate`]), plus, when the signer's policy has `dnsNames` templates, DNS names
//! rendered from the names of the Services (read live) that select the pod: a Service with a
//! non-empty selector all of whose labels the pod has, not `ExternalName`; the first 32 by
//! name, at most 100 names. Services that could not be read are a `Requeue`.
//!
//! A status that fails the mirror is a bug in warrant: [`decide`] returns
//! [`DecideError::StatusRejected`] (log, count, write nothing, retry with backoff) rather than
//! a `Failed` PCR that would wedge the pod for warrant's own mistake.
//!
//! ```no_run
//! use warrant_podcert::*;
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! # let pcr_json = serde_json::json!({});
//! # let facts: Facts = unimplemented!();
//! let now = jiff::Timestamp::from_second(1_800_000_000)?;
//! let (ca, _pkcs8) = MemoryCa::generate(CaCurve::P256, "pod CA", now, now + jiff::SignedDuration::from_hours(24 * 365))?;
//! let policy: PodCertificatePolicy = serde_json::from_value(serde_json::json!({
//!     "trustDomain": "cluster.local",
//!     "signers": [{"signerName": "warrant.example.com/spiffe", "namespaces": ["*"]}],
//! }))?;
//! policy.validate()?;
//! match decide_json(&pcr_json, &facts, &policy, now, &ca).await? {
//!     Decision::Issued(issued) => { /* PUT {"status": issued.status.to_json()} */ }
//!     Decision::Denied { status, .. } | Decision::Failed { status, .. } => { /* PUT status */ }
//!     Decision::Requeue { reason, .. } => { /* event, backoff */ }
//!     Decision::Ignored { .. } => {}
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Costs: one decision parses the request's DER once (a walk to its SPKI), builds a leaf of
//! about 450 bytes (a P-256 key and CA), asks the CA for one signature, verifies it (one ECDSA
//! verification) and parses the leaf once more in the mirror. Measured (`benches/issue.rs`,
//! docs/benchmarks.md "Pod certificates"): with a P-256 CA in memory the verification is about
//! 70 % of a decision's instructions and the signature 20 %, everything else 10 %; so a
//! decision runs at about a fifth of the key's raw signing rate, bounded by the verification.

mod cas;
pub mod certificate;
mod decide;
mod der;
pub mod key;
mod key_ca;
mod pem;
pub mod policy;
pub mod request;
pub mod status;

pub use cas::CaSet;
pub use certificate::{
    CaAlgorithm, CaCertificate, CaCurve, CaError, CaSignature, CaSigner, IssueError, MemoryCa,
    RootTemplate, SignError, ecdsa_signature_to_der, equivalent_roots,
};
pub use decide::{
    BACKDATE, DecideError, Decision, Facts, Issued, Live, MAX_DNS_NAMES, MAX_SERVICES, NamedObject,
    PodFacts, ServiceFacts, decide, decide_json, reason,
};
pub use key::{KeyType, RequestedKey};
pub use key_ca::KeyCa;
pub use policy::{PodCertificatePolicy, SignerPolicy};
pub use request::{KeyForm, PodCertificateRequest, RequestError, Spec, SpecError, with_status};
pub use status::{
    Condition, PodCertificateRequestStatus, StatusContext, StatusRejected, validate_status_update,
};
