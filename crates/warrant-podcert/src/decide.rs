//! The decision for one PCR: one function of the request, the facts read live, the policy,
//! the clock and the CA. The order of the checks and why it is so is in the crate's docs.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use crate::certificate::{CaSigner, IssueError, LeafSpec, SignError, SignedLeaf, sign_leaf};
use crate::key::KeyType;
use crate::policy::{MIN_LIFETIME_SECONDS, PodCertificatePolicy};
use crate::request::{PodCertificateRequest, RequestError, Spec};
use crate::status::{
    Condition, DENIED, FAILED, ISSUED, PodCertificateRequestStatus, StatusContext, StatusRejected,
    validate_status_update, whole_seconds,
};

/// Reasons of the decisions (condition reasons for Denied and Failed; a label for Requeue).
pub mod reason {
    /// Denied: the key type is not one this signer issues to (kube's well-known reason).
    pub const UNSUPPORTED_KEY_TYPE: &str = "UnsupportedKeyType";
    /// Denied: an unverified user annotation warrant does not know (kube's well-known reason).
    pub const INVALID_UNVERIFIED_USER_ANNOTATIONS: &str = "InvalidUnverifiedUserAnnotations";
    /// Denied: the key material does not parse (a stub request or SPKI that is not DER).
    pub const INVALID_KEY_MATERIAL: &str = "InvalidKeyMaterial";
    /// Denied: the spec lacks a field or has both key forms or neither.
    pub const INVALID_REQUEST: &str = "InvalidRequest";
    /// Denied: the policy gives this service account no certificate from this signer.
    pub const NOT_PERMITTED: &str = "NotPermitted";
    /// Denied: the pod does not exist, or is another pod by that name.
    pub const POD_NOT_FOUND: &str = "PodNotFound";
    /// Denied: the pod is not on the PCR's node or runs as another service account.
    pub const POD_MISMATCH: &str = "PodMismatch";
    /// Denied: the pod is neither Pending nor Running, or is being deleted.
    pub const POD_NOT_RUNNING: &str = "PodNotRunning";
    /// Denied: the service account does not exist or has another UID.
    pub const SERVICE_ACCOUNT_MISMATCH: &str = "ServiceAccountMismatch";
    /// Denied: the node does not exist or has another UID.
    pub const NODE_MISMATCH: &str = "NodeMismatch";
    /// Failed: the CA refused this signature for good.
    pub const SIGNING_REFUSED: &str = "SigningRefused";
    /// Requeue: a fact could not be read.
    pub const FACTS_UNAVAILABLE: &str = "FactsUnavailable";
    /// Requeue: the CA key cannot sign now.
    pub const CA_UNAVAILABLE: &str = "CAUnavailable";
    /// Requeue: the CA's certificate ends before a leaf of an hour would.
    pub const CA_EXPIRING: &str = "CAExpiring";
    /// Requeue: the CA's certificate is not valid yet.
    pub const CA_NOT_YET_VALID: &str = "CANotYetValid";
    /// Requeue: warrant's clock is behind kube-apiserver's by more than kube tolerates.
    pub const CLOCK_BEHIND: &str = "ClockBehind";
}

/// How long before `now` a leaf starts: clocks of relying parties a little behind still
/// accept it, and kube-apiserver (which wants `notBefore` within 5 minutes of its clock)
/// still takes it with warrant's clock up to 4 minutes behind or 6 ahead of its own.
pub const BACKDATE: SignedDuration = SignedDuration::from_secs(60);
/// The most Services whose names reach one leaf: the first by name that select the pod.
pub const MAX_SERVICES: usize = 32;
/// The most DNS names in one leaf (Services × templates): fewer Services are taken when the
/// templates are many, so a namespace with many Services cannot make a leaf of any size.
pub const MAX_DNS_NAMES: usize = 100;
/// Margins kube-apiserver requires around `beginRefreshAt`.
const REFRESH_MARGIN: SignedDuration = SignedDuration::from_secs(600);

/// A fact read live: found, known absent, or not readable now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Live<T> {
    /// The object as read.
    Found(T),
    /// The API answered that it does not exist.
    Absent,
    /// It could not be read (the API is unreachable, the cache is not synced): the decision
    /// waits, it does not deny.
    Unreadable(String),
}

/// A pod as read live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `spec.nodeName` (empty when not scheduled).
    pub node_name: String,
    /// `spec.serviceAccountName`.
    pub service_account_name: String,
    /// `status.phase`.
    pub phase: String,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<Timestamp>,
    /// `metadata.labels`: what Services select the pod by.
    pub labels: BTreeMap<String, String>,
}

/// A Service in the PCR's namespace, as read live: what decides whether it selects the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceFacts {
    /// `metadata.name`.
    pub name: String,
    /// `spec.selector` (empty: the Service selects no pods; its endpoints are someone's
    /// choice, not the pod's labels).
    pub selector: BTreeMap<String, String>,
    /// `spec.type` is `ExternalName`: its name resolves elsewhere, never to a pod.
    pub external_name: bool,
}

impl ServiceFacts {
    /// Whether this Service sends traffic to `pod`: a non-empty selector whose every key and
    /// value is among the pod's labels, and not an `ExternalName` Service.
    pub fn selects(&self, pod: &PodFacts) -> bool {
        !self.external_name
            && !self.selector.is_empty()
            && self
                .selector
                .iter()
                .all(|(k, v)| pod.labels.get(k) == Some(v))
    }
}

/// An object known by name and UID (a service account, a node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedObject {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
}

/// What was read live for one PCR: its pod, service account (in the PCR's namespace) and
/// node, by the names the PCR gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The pod named `spec.podName` in the PCR's namespace.
    pub pod: Live<PodFacts>,
    /// The service account named `spec.serviceAccountName` in the PCR's namespace.
    pub service_account: Live<NamedObject>,
    /// The node named `spec.nodeName`.
    pub node: Live<NamedObject>,
    /// The Services in the PCR's namespace (any order). Looked at only when the signer's
    /// policy has `dnsNames`; a caller need not read them otherwise.
    pub services: Live<Vec<ServiceFacts>>,
}

/// An issued certificate: the status to write, and what audit records of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The status (checked against kube's rules).
    pub status: PodCertificateRequestStatus,
    /// The leaf's serial, lowercase hex.
    pub serial_hex: String,
    /// The SPIFFE ID in the leaf.
    pub spiffe_id: String,
    /// The DNS names in the leaf, sorted (empty unless the policy has `dnsNames`).
    pub dns_names: Vec<String>,
    /// Services that select the pod but whose names were left out ([`MAX_SERVICES`],
    /// [`MAX_DNS_NAMES`]): the caller logs them.
    pub services_left_out: usize,
    /// The requested key's type.
    pub key_type: KeyType,
    /// SHA-256 of the leaf's SubjectPublicKeyInfo, hex.
    pub spki_sha256: String,
    /// The CA's key ID.
    pub ca_key_id: String,
}

/// What to do with one PCR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write this status: a certificate.
    Issued(Box<Issued>),
    /// Write this status: refused for good (the kubelet gives up on the projection).
    Denied {
        /// The condition's reason.
        reason: &'static str,
        /// The condition's message.
        message: String,
        /// The status to write (checked against kube's rules).
        status: PodCertificateRequestStatus,
    },
    /// Write this status: cannot be issued, and retrying would not help.
    Failed {
        /// The condition's reason.
        reason: &'static str,
        /// The condition's message.
        message: String,
        /// The status to write (checked against kube's rules).
        status: PodCertificateRequestStatus,
    },
    /// Write nothing; try again later (with backoff). A PCR left without a condition is
    /// deleted after 15 minutes and the kubelet makes a new one, so this never wedges a pod.
    Requeue {
        /// Why (a metric label and an event reason).
        reason: &'static str,
        /// For the log and the Warning event.
        message: String,
    },
    /// Not warrant's to answer: already terminal, or a signer name warrant does not serve.
    Ignored {
        /// Why.
        why: &'static str,
    },
}

impl Decision {
    /// The status to write, if any.
    pub fn status(&self) -> Option<&PodCertificateRequestStatus> {
        match self {
            Decision::Issued(issued) => Some(&issued.status),
            Decision::Denied { status, .. } | Decision::Failed { status, .. } => Some(status),
            Decision::Requeue { .. } | Decision::Ignored { .. } => None,
        }
    }
}

/// A decision that could not be made: a bug or a broken CA holder, never the requester's
/// doing. The caller logs it, counts it, writes nothing and retries with backoff (as for a
/// [`Decision::Requeue`]): failing the PCR for warrant's own mistake would wedge the pod.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DecideError {
    /// The object is not a PCR that a status could be written to.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The status warrant made would be refused by kube-apiserver (a bug in warrant).
    #[error("warrant made a status kube-apiserver would refuse: {0}")]
    StatusRejected(#[source] StatusRejected),
    /// The CA's signature does not verify (a broken holder).
    #[error(transparent)]
    BadSignature(IssueError),
}

/// Decides one PCR given as JSON (what a watch delivers): see [`decide`].
pub async fn decide_json(
    pcr: &serde_json::Value,
    facts: &Facts,
    policy: &PodCertificatePolicy,
    now: Timestamp,
    ca: &dyn CaSigner,
) -> Result<Decision, DecideError> {
    decide(
        &PodCertificateRequest::from_json(pcr)?,
        facts,
        policy,
        now,
        ca,
    )
    .await
}

/// Decides one PCR. Every status returned has passed [`validate_status_update`] against the
/// PCR's current status at `now`.
pub async fn decide(
    pcr: &PodCertificateRequest,
    facts: &Facts,
    policy: &PodCertificatePolicy,
    now: Timestamp,
    ca: &dyn CaSigner,
) -> Result<Decision, DecideError> {
    if pcr.is_terminal() {
        return Ok(Decision::Ignored {
            why: "the PodCertificateRequest is already issued, denied or failed",
        });
    }
    let Some(signer) = policy.signer(&pcr.signer_name) else {
        return Ok(Decision::Ignored {
            why: "the signer name is not one warrant serves",
        });
    };
    let spec = match &pcr.spec {
        Ok(spec) => spec,
        Err(crate::request::SpecError::Key(e)) => {
            return finish(
                pcr,
                now,
                deny(reason::INVALID_KEY_MATERIAL, e.to_string(), now),
            );
        }
        Err(e) => return finish(pcr, now, deny(reason::INVALID_REQUEST, e.to_string(), now)),
    };
    let spiffe_id = format!(
        "spiffe://{}/ns/{}/sa/{}",
        policy.trust_domain, pcr.namespace, spec.service_account_name
    );
    let key_type = match static_checks(pcr, spec, signer) {
        Ok(key_type) => key_type,
        Err((reason, message)) => return finish(pcr, now, deny(reason, message, now)),
    };
    match identity(pcr, spec, facts) {
        Verdict::Ok => {}
        Verdict::Deny(reason, message) => return finish(pcr, now, deny(reason, message, now)),
        Verdict::Wait(reason, message) => return Ok(Decision::Requeue { reason, message }),
    }
    let names = match dns_names(pcr, signer, facts) {
        Ok(names) => names,
        Err((reason, message)) => return Ok(Decision::Requeue { reason, message }),
    };
    let lifetime = spec
        .max_expiration_seconds
        .min(signer.max_expiration_seconds)
        .max(MIN_LIFETIME_SECONDS);
    let times = match leaf_times(pcr, now, lifetime, ca) {
        Ok(times) => times,
        Err((reason, message)) => return Ok(Decision::Requeue { reason, message }),
    };
    let leaf = LeafSpec {
        spki: spec.key.spki(),
        key_type,
        spiffe_id: &spiffe_id,
        dns_names: &names.names,
        not_before: times.not_before,
        not_after: times.not_after,
    };
    let decision = match sign_leaf(ca, &leaf).await {
        Ok(signed) => issued(spec, key_type, (spiffe_id, names), times, &signed, ca, now),
        Err(IssueError::Sign(SignError::Unavailable(e))) => Decision::Requeue {
            reason: reason::CA_UNAVAILABLE,
            message: format!("the CA {} cannot sign now: {e}", ca.certificate().key_id()),
        },
        Err(IssueError::Random) => Decision::Requeue {
            reason: reason::CA_UNAVAILABLE,
            message: "no randomness for a serial number".to_owned(),
        },
        Err(IssueError::Sign(SignError::Refused(e))) => {
            let message = format!("the CA {} refused to sign: {e}", ca.certificate().key_id());
            fail(reason::SIGNING_REFUSED, message, now)
        }
        Err(e @ IssueError::BadSignature { .. }) => return Err(DecideError::BadSignature(e)),
    };
    finish(pcr, now, decision)
}

/// The Issued decision for a signed leaf: the chain (the leaf, then the CA's chain), the
/// times, and what audit records.
fn issued(
    spec: &Spec,
    key_type: KeyType,
    (spiffe_id, names): (String, DnsNames),
    times: LeafTimes,
    signed: &SignedLeaf,
    ca: &dyn CaSigner,
    now: Timestamp,
) -> Decision {
    let mut chain: Vec<&[u8]> = vec![signed.der.as_slice()];
    chain.extend(ca.chain().iter().map(Vec::as_slice));
    let status = PodCertificateRequestStatus {
        conditions: vec![Condition::terminal(
            ISSUED,
            "Issued",
            format!("serial {}, {spiffe_id}", signed.serial_hex),
            now,
        )],
        certificate_chain: crate::pem::certificates(&chain),
        not_before: Some(times.not_before),
        begin_refresh_at: Some(times.begin_refresh_at),
        not_after: Some(times.not_after),
    };
    Decision::Issued(Box::new(Issued {
        status,
        serial_hex: signed.serial_hex.clone(),
        spiffe_id,
        dns_names: names.names,
        services_left_out: names.left_out,
        key_type,
        spki_sha256: spec.key.spki_sha256_hex(),
        ca_key_id: ca.certificate().key_id(),
    }))
}

/// The checks that need nothing read live: annotations, policy, key type. The key type is
/// returned when all pass.
fn static_checks(
    pcr: &PodCertificateRequest,
    spec: &Spec,
    signer: &crate::policy::SignerPolicy,
) -> Result<KeyType, (&'static str, String)> {
    if let Some(key) = spec.unverified_user_annotations.keys().next() {
        return Err((
            reason::INVALID_UNVERIFIED_USER_ANNOTATIONS,
            format!(
                "unverifiedUserAnnotations key {} is not one this signer knows; it knows none",
                warrant_token::quote_value(key)
            ),
        ));
    }
    if !signer.allows(&pcr.namespace, &spec.service_account_name) {
        return Err((
            reason::NOT_PERMITTED,
            format!(
                "signer {} issues no certificates to service account {}/{}",
                signer.signer_name,
                pcr.namespace,
                warrant_token::cut_value(&spec.service_account_name)
            ),
        ));
    }
    let allowed: Vec<&str> = signer.key_types.iter().map(|k| k.name()).collect();
    match spec.key.key_type() {
        Ok(key_type) if signer.key_types.contains(&key_type) => Ok(key_type),
        Ok(key_type) => Err((
            reason::UNSUPPORTED_KEY_TYPE,
            format!(
                "key type {key_type} is not issued to by this signer; use one of {}",
                allowed.join(", ")
            ),
        )),
        Err(other) => Err((
            reason::UNSUPPORTED_KEY_TYPE,
            format!(
                "the request's key is {other}, which this signer does not issue to; use one of {}",
                allowed.join(", ")
            ),
        )),
    }
}

enum Verdict {
    Ok,
    Deny(&'static str, String),
    Wait(&'static str, String),
}

/// The identity the PCR claims, against what is live: the pod, the service account and the
/// node, in that order; the first that does not hold decides.
fn identity(pcr: &PodCertificateRequest, spec: &Spec, facts: &Facts) -> Verdict {
    let checks: [fn(&PodCertificateRequest, &Spec, &Facts) -> Verdict; 3] =
        [live_pod, live_service_account, live_node];
    checks
        .into_iter()
        .map(|check| check(pcr, spec, facts))
        .find(|verdict| !matches!(verdict, Verdict::Ok))
        .unwrap_or(Verdict::Ok)
}

/// The PCR's pod as live: by name, with the PCR's UID, on the PCR's node, as the PCR's service
/// account, Pending or Running, not being deleted.
fn live_pod(pcr: &PodCertificateRequest, spec: &Spec, facts: &Facts) -> Verdict {
    let q = |s: &str| warrant_token::quote_value(s);
    let pod = match &facts.pod {
        Live::Unreadable(why) => return wait("pod", why),
        Live::Absent => {
            return Verdict::Deny(
                reason::POD_NOT_FOUND,
                format!("pod {}/{} does not exist", pcr.namespace, q(&spec.pod_name)),
            );
        }
        Live::Found(pod) => pod,
    };
    if pod.namespace != pcr.namespace || pod.name != spec.pod_name || pod.uid != spec.pod_uid {
        return Verdict::Deny(
            reason::POD_NOT_FOUND,
            format!(
                "pod {}/{} with UID {} does not exist (the pod of that name has UID {})",
                pcr.namespace,
                q(&spec.pod_name),
                q(&spec.pod_uid),
                q(&pod.uid)
            ),
        );
    }
    if pod.node_name != spec.node_name {
        return Verdict::Deny(
            reason::POD_MISMATCH,
            format!(
                "pod {}/{} is not running on node {}",
                pcr.namespace,
                pod.name,
                q(&spec.node_name)
            ),
        );
    }
    if pod.service_account_name != spec.service_account_name {
        return Verdict::Deny(
            reason::POD_MISMATCH,
            format!(
                "pod {}/{} runs as service account {}, not {}",
                pcr.namespace,
                pod.name,
                q(&pod.service_account_name),
                q(&spec.service_account_name)
            ),
        );
    }
    if !matches!(pod.phase.as_str(), "Pending" | "Running") {
        return Verdict::Deny(
            reason::POD_NOT_RUNNING,
            format!("pod {}/{} is {}", pcr.namespace, pod.name, q(&pod.phase)),
        );
    }
    if pod.deletion_timestamp.is_some() {
        return Verdict::Deny(
            reason::POD_NOT_RUNNING,
            format!("pod {}/{} is being deleted", pcr.namespace, pod.name),
        );
    }
    Verdict::Ok
}

/// The PCR's service account as live: name and UID.
fn live_service_account(pcr: &PodCertificateRequest, spec: &Spec, facts: &Facts) -> Verdict {
    let q = |s: &str| warrant_token::quote_value(s);
    match &facts.service_account {
        Live::Unreadable(why) => wait("service account", why),
        Live::Found(sa)
            if sa.name == spec.service_account_name && sa.uid == spec.service_account_uid =>
        {
            Verdict::Ok
        }
        _ => Verdict::Deny(
            reason::SERVICE_ACCOUNT_MISMATCH,
            format!(
                "service account {}/{} with UID {} does not exist",
                pcr.namespace,
                q(&spec.service_account_name),
                q(&spec.service_account_uid)
            ),
        ),
    }
}

/// The PCR's node as live: name and UID.
fn live_node(_pcr: &PodCertificateRequest, spec: &Spec, facts: &Facts) -> Verdict {
    let q = |s: &str| warrant_token::quote_value(s);
    match &facts.node {
        Live::Unreadable(why) => wait("node", why),
        Live::Found(node) if node.name == spec.node_name && node.uid == spec.node_uid => {
            Verdict::Ok
        }
        _ => Verdict::Deny(
            reason::NODE_MISMATCH,
            format!(
                "node {} with UID {} does not exist",
                q(&spec.node_name),
                q(&spec.node_uid)
            ),
        ),
    }
}

/// A leaf's DNS names, and how many selecting Services were left out.
struct DnsNames {
    /// Sorted, without duplicates.
    names: Vec<String>,
    left_out: usize,
}

/// The DNS names of the signer's templates for the Services that select the (verified) pod:
/// the first [`MAX_SERVICES`] by name, fewer when the templates are many ([`MAX_DNS_NAMES`]).
/// None without templates (and Services are not looked at); a Requeue when they could not be
/// read. Nothing of the request is used but its namespace.
fn dns_names(
    pcr: &PodCertificateRequest,
    signer: &crate::policy::SignerPolicy,
    facts: &Facts,
) -> Result<DnsNames, (&'static str, String)> {
    let none = DnsNames {
        names: Vec::new(),
        left_out: 0,
    };
    if signer.dns_names.is_empty() {
        return Ok(none);
    }
    // `identity` has checked the pod is found and is the PCR's.
    let Live::Found(pod) = &facts.pod else {
        return Ok(none);
    };
    let services = match &facts.services {
        Live::Found(services) => services.as_slice(),
        Live::Absent => &[],
        Live::Unreadable(why) => {
            return Err((
                reason::FACTS_UNAVAILABLE,
                format!("the Services could not be read: {why}"),
            ));
        }
    };
    let mut selecting: Vec<&str> = services
        .iter()
        .filter(|s| s.selects(pod))
        .map(|s| s.name.as_str())
        .collect();
    selecting.sort_unstable();
    selecting.dedup();
    let room = (MAX_DNS_NAMES / signer.dns_names.len()).min(MAX_SERVICES);
    let left_out = selecting.len().saturating_sub(room);
    let mut names: Vec<String> = selecting
        .iter()
        .take(room)
        .flat_map(|service| signer.dns_names_for(service, &pcr.namespace))
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(DnsNames { names, left_out })
}

fn wait(what: &str, why: &str) -> Verdict {
    Verdict::Wait(
        reason::FACTS_UNAVAILABLE,
        format!("the {what} could not be read: {why}"),
    )
}

/// A leaf's three times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeafTimes {
    /// `now` − [`BACKDATE`], or the CA's start if later; whole seconds.
    not_before: Timestamp,
    /// `not_before` + the lifetime, or the CA's end if sooner (still at least an hour).
    not_after: Timestamp,
    /// Three quarters into the lifetime, kept 10 minutes from either end.
    begin_refresh_at: Timestamp,
}

/// The leaf's times for a `lifetime` (seconds, at least 3600): checked against the CA's
/// validity and, through the PCR's creation time, against kube-apiserver's clock.
fn leaf_times(
    pcr: &PodCertificateRequest,
    now: Timestamp,
    lifetime: i64,
    ca: &dyn CaSigner,
) -> Result<LeafTimes, (&'static str, String)> {
    let now = whole_seconds(now);
    // creationTimestamp is kube-apiserver's clock at create, so its clock is at least that
    // now: if that is 4 minutes or more ahead of ours, a notBefore of ours minus a minute is
    // 5 minutes or more behind kube's, which it refuses (spec §4.3, 5h).
    if let Some(created) = pcr.creation_timestamp
        && created.duration_since(now) >= SignedDuration::from_secs(240)
    {
        return Err((
            reason::CLOCK_BEHIND,
            format!(
                "the PodCertificateRequest was created at {created} by kube-apiserver's clock, \
                 4 minutes or more after now by warrant's ({now}): kube-apiserver would refuse \
                 the certificate's notBefore; synchronise the clocks"
            ),
        ));
    }
    let certificate = ca.certificate();
    if certificate.not_before() > now {
        return Err((
            reason::CA_NOT_YET_VALID,
            format!(
                "the CA {} is valid only from {}",
                certificate.key_id(),
                certificate.not_before()
            ),
        ));
    }
    // Backdated for clocks a little behind ours, but never before the CA's own start: a CA
    // made a moment ago (cert-manager's, at install) signs at once rather than a minute later.
    let not_before = (now - BACKDATE).max(whole_seconds(certificate.not_before()));
    let wanted = not_before + SignedDuration::from_secs(lifetime);
    let ca_end = whole_seconds(certificate.not_after());
    let not_after = wanted.min(ca_end);
    let lifetime = not_after.duration_since(not_before);
    if lifetime < SignedDuration::from_secs(MIN_LIFETIME_SECONDS) {
        return Err((
            reason::CA_EXPIRING,
            format!(
                "the CA {} expires at {}, before a leaf of an hour would",
                certificate.key_id(),
                certificate.not_after()
            ),
        ));
    }
    let three_quarters = SignedDuration::from_secs(lifetime.as_secs() * 3 / 4);
    let begin_refresh_at = (not_before + three_quarters)
        .max(not_before + REFRESH_MARGIN)
        .min(not_after - REFRESH_MARGIN);
    Ok(LeafTimes {
        not_before,
        not_after,
        begin_refresh_at,
    })
}

fn deny(reason: &'static str, message: String, now: Timestamp) -> Decision {
    let status = terminal(DENIED, reason, &message, now);
    Decision::Denied {
        reason,
        message,
        status,
    }
}

fn fail(reason: &'static str, message: String, now: Timestamp) -> Decision {
    let status = terminal(FAILED, reason, &message, now);
    Decision::Failed {
        reason,
        message,
        status,
    }
}

fn terminal(
    type_: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> PodCertificateRequestStatus {
    PodCertificateRequestStatus {
        conditions: vec![Condition::terminal(type_, reason, message.to_owned(), now)],
        ..Default::default()
    }
}

/// Checks the decision's status against kube's rules before it is returned.
fn finish(
    pcr: &PodCertificateRequest,
    now: Timestamp,
    decision: Decision,
) -> Result<Decision, DecideError> {
    let Some(status) = decision.status() else {
        return Ok(decision);
    };
    let key = pcr.spec.as_ref().ok().map(|spec| &spec.key);
    let max_expiration_seconds = pcr
        .spec
        .as_ref()
        .map_or(crate::request::DEFAULT_MAX_EXPIRATION_SECONDS, |s| {
            s.max_expiration_seconds
        });
    validate_status_update(
        &pcr.status,
        status,
        StatusContext {
            key,
            max_expiration_seconds,
            now,
        },
    )
    .map_err(DecideError::StatusRejected)?;
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::reason::*;
    use crate::status::is_condition_reason;

    #[test]
    fn every_reason_passes_kubes_condition_reason_rule() {
        for r in [
            UNSUPPORTED_KEY_TYPE,
            INVALID_UNVERIFIED_USER_ANNOTATIONS,
            INVALID_KEY_MATERIAL,
            INVALID_REQUEST,
            NOT_PERMITTED,
            POD_NOT_FOUND,
            POD_MISMATCH,
            POD_NOT_RUNNING,
            SERVICE_ACCOUNT_MISMATCH,
            NODE_MISMATCH,
            SIGNING_REFUSED,
            FACTS_UNAVAILABLE,
            CA_UNAVAILABLE,
            CA_EXPIRING,
            CA_NOT_YET_VALID,
            CLOCK_BEHIND,
        ] {
            assert!(is_condition_reason(r), "{r}");
        }
    }
}
