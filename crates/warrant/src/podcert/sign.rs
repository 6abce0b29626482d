//! The decision, as the PCR controller calls it: the facts read live from the API server (never
//! a cache: a pod deleted a moment ago must not get a certificate), the policy in force, the
//! CA in force and the clock, handed to `warrant_podcert::decide`; then its audit event, its
//! metrics and, for a PCR left waiting, a Warning event on it.
//!
//! The audit event of a status is recorded before the status is written; in blocking mode a
//! status whose event was not written is not written either (the PCR waits, as for an
//! unreachable CA). What became of the write (another replica's status stored first, the PCR
//! deleted, kube-apiserver refusing the status) is a second event ([`Sign::report`]).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, Service, ServiceAccount};
use kube::Api;
use kube::api::ListParams;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio::sync::watch;
use warrant_audit::{
    Auditor, BoundObject, Decision as AuditDecision, Event, EventKind, PodCertificateFacts,
    Requester, ServiceAccount as AuditedAccount,
};
use warrant_clock::Clock;
use warrant_podcert::{
    CaSet, DecideError, Decision, Facts, Issued, Live, NamedObject, PodCertificatePolicy,
    PodCertificateRequest, PodFacts, ServiceFacts, reason,
};
use warrant_podcert_kube::{Outcome, Report, Sign};

use super::policy::PolicySource;

/// The least wait before a PCR that could not be decided is tried again (the controller's
/// backoff doubles from there).
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// A metric's labels.
type Labels = Vec<(&'static str, String)>;

/// The signer's own metrics (the controller's are in `warrant_podcert_kube`).
#[derive(Clone)]
pub(crate) struct SignMetrics {
    decisions: Family<Labels, Counter>,
    issuance_age: Family<Labels, Histogram, fn() -> Histogram>,
    /// The signing CA's `notAfter`, per signer name.
    pub(crate) ca_expiration: Family<Labels, Gauge>,
}

fn age_histogram() -> Histogram {
    Histogram::new([
        0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0,
    ])
}

impl SignMetrics {
    pub(crate) fn new(registry: &mut Registry) -> Self {
        let metrics = SignMetrics {
            decisions: Family::default(),
            issuance_age: Family::new_with_constructor(age_histogram),
            ca_expiration: Family::default(),
        };
        registry.register(
            "warrant_podcert_decisions",
            "PodCertificateRequest decisions, by signer, result (issued, denied, failed, requeued, error) and reason",
            metrics.decisions.clone(),
        );
        registry.register_with_unit(
            "warrant_podcert_issuance_age",
            "Time from a PodCertificateRequest's creation to its certificate being signed",
            prometheus_client::registry::Unit::Seconds,
            metrics.issuance_age.clone(),
        );
        registry.register(
            "warrant_podcert_ca_expiration_timestamp_seconds",
            "When the CA that signs pod certificates expires (notAfter, Unix seconds), by signer",
            metrics.ca_expiration.clone(),
        );
        metrics
    }

    fn decision(&self, signer: &str, result: &'static str, reason: &'static str) {
        self.decisions
            .get_or_create(&vec![
                ("signer", signer.to_owned()),
                ("result", result.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .inc();
    }
}

/// What decides PCRs for the controller.
pub(crate) struct PodCertSigner {
    pub(crate) client: kube::Client,
    pub(crate) policy: PolicySource,
    /// The longest leaf a managed CA may sign (its retired keys stay published that long);
    /// `None` for a CA from files.
    pub(crate) max_lifetime: Option<i64>,
    pub(crate) cas: watch::Receiver<CaSet>,
    pub(crate) clock: Clock,
    pub(crate) auditor: Auditor,
    pub(crate) metrics: SignMetrics,
    pub(crate) recorder: Recorder,
    /// warrant's identity as the audit log's requester of its own status writes.
    pub(crate) requester: Requester,
}

/// Says in the log when more Services select the pod than the certificate names.
fn warn_services_left_out(request: &PodCertificateRequest, issued: &Issued) {
    if issued.services_left_out > 0 {
        tracing::warn!(
            namespace = %request.namespace,
            name = %request.name,
            dns_names = issued.dns_names.len(),
            services_left_out = issued.services_left_out,
            "more Services select the pod than one certificate holds; the first by name were taken"
        );
    }
}

impl Sign for PodCertSigner {
    async fn handle(&self, pcr: &Value) -> Outcome {
        let request = match PodCertificateRequest::from_json(pcr) {
            Ok(request) => request,
            // Not a PCR a status could be written to (no name, say): nothing to answer.
            Err(error) => {
                tracing::warn!(%error, "not a PodCertificateRequest warrant can answer; ignored");
                return Outcome::Ignore;
            }
        };
        let now = self.clock.now();
        let signer = request.signer_name.clone();
        let decision = match self.decide(&request, now).await {
            Ok(decision) => decision,
            Err(error) => {
                // warrant's own mistake or a broken CA: never the requester's; retried.
                self.metrics.decision(&signer, "error", "DecisionError");
                tracing::error!(namespace = %request.namespace, name = %request.name, %error, "PodCertificateRequest could not be decided; retrying");
                return Outcome::Requeue {
                    reason: error.to_string(),
                    after: RETRY_AFTER,
                };
            }
        };
        let (result, why, status) = match &decision {
            Decision::Ignored { .. } => return Outcome::Ignore,
            Decision::Requeue { reason, message } => {
                self.metrics.decision(&signer, "requeued", reason);
                let event = self.decided(&request, &decision);
                // Best effort: a waiting PCR is retried whether or not this was written.
                let _ = self.auditor.record(event).await;
                self.warn(&request, reason, message);
                return Outcome::Requeue {
                    reason: message.clone(),
                    after: RETRY_AFTER,
                };
            }
            Decision::Issued(issued) => {
                warn_services_left_out(&request, issued);
                ("issued", "", issued.status.to_json())
            }
            Decision::Denied {
                reason,
                message: _,
                status,
            } => ("denied", *reason, status.to_json()),
            Decision::Failed {
                reason,
                message: _,
                status,
            } => ("failed", *reason, status.to_json()),
        };
        let event = self.decided(&request, &decision);
        if let Err(not_recorded) = self.auditor.record(event).await {
            self.metrics
                .decision(&signer, "requeued", "AuditUnavailable");
            let message = format!("the status was not written: {not_recorded}");
            self.warn(&request, "AuditUnavailable", &message);
            return Outcome::Requeue {
                reason: message,
                after: RETRY_AFTER,
            };
        }
        self.metrics.decision(&signer, result, why);
        if let (Decision::Issued(_), Some(created)) = (&decision, request.creation_timestamp) {
            let age = now.duration_since(created).as_secs_f64().max(0.0);
            self.metrics
                .issuance_age
                .get_or_create(&vec![("signer", signer.clone())])
                .observe(age);
        }
        Outcome::Write(status)
    }

    fn report(&self, pcr: &Value, report: &Report) {
        let (decision, code, reason) = match report {
            // Recorded before the write.
            Report::Written { .. } => return,
            Report::LostRace { .. } => (
                AuditDecision::LostRace,
                Some(409),
                "another writer's status was stored first; this one was not".to_owned(),
            ),
            Report::Refused { message } => (AuditDecision::Refused, Some(422), message.clone()),
            Report::Gone => (
                AuditDecision::Gone,
                Some(404),
                "the PodCertificateRequest was deleted before its status was written".to_owned(),
            ),
        };
        let Ok(request) = PodCertificateRequest::from_json(pcr) else {
            return;
        };
        let mut event = self.event(&request, decision, &reason);
        event.code = code;
        let auditor = self.auditor.clone();
        tokio::spawn(async move {
            let _ = auditor.record(event).await;
        });
    }
}

/// Facts not read (the decision does not look at them).
fn unread() -> Facts {
    let not_read = || "not read".to_owned();
    Facts {
        pod: Live::Unreadable(not_read()),
        service_account: Live::Unreadable(not_read()),
        node: Live::Unreadable(not_read()),
        services: Live::Unreadable(not_read()),
    }
}

impl PodCertSigner {
    /// Decides `request` at `now` under the policy and CA of the moment. Without a CA nothing
    /// is read: every retry of every waiting PCR would otherwise cost the API server three
    /// reads for a decision that can only wait.
    async fn decide(
        &self,
        request: &PodCertificateRequest,
        now: Timestamp,
    ) -> Result<Decision, DecideError> {
        let policy = super::policy::capped(self.policy.current(), self.max_lifetime);
        let set = self.cas.borrow().clone();
        match &set.signing {
            Ok(ca) => {
                let facts = self.facts(request, &policy).await;
                warrant_podcert::decide(request, &facts, &policy, now, ca.as_ref()).await
            }
            Err(why) => Ok(Decision::Requeue {
                reason: reason::CA_UNAVAILABLE,
                message: format!("the pod certificate CA cannot sign: {why}"),
            }),
        }
    }

    /// The pod, service account and node the PCR names, read now, and the Services of its
    /// namespace when the signer's policy has DNS name templates (one list: a namespace's
    /// Services are few next to its pods). Nothing is read for a PCR the decision will not
    /// look at (terminal, another signer's, one whose spec is unusable).
    async fn facts(&self, request: &PodCertificateRequest, policy: &PodCertificatePolicy) -> Facts {
        let (spec, signer) = match (&request.spec, policy.signer(&request.signer_name)) {
            (Ok(spec), Some(signer)) if !request.is_terminal() => (spec, signer),
            _ => return unread(),
        };
        let services: Api<Service> = Api::namespaced(self.client.clone(), &request.namespace);
        let wants_services = !signer.dns_names.is_empty();
        let services = async {
            if !wants_services {
                return Live::Unreadable("not read: the signer gives no DNS names".to_owned());
            }
            match services.list(&ListParams::default()).await {
                Ok(list) => Live::Found(list.items.iter().map(service_facts).collect()),
                Err(error) => Live::Unreadable(error.to_string()),
            }
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &request.namespace);
        let accounts: Api<ServiceAccount> =
            Api::namespaced(self.client.clone(), &request.namespace);
        let nodes: Api<Node> = Api::all(self.client.clone());
        let (pod, account, node, services) = tokio::join!(
            pods.get_opt(&spec.pod_name),
            accounts.get_opt(&spec.service_account_name),
            nodes.get_opt(&spec.node_name),
            services,
        );
        Facts {
            pod: live(pod, |pod| {
                let meta = &pod.metadata;
                let spec = pod.spec.as_ref();
                PodFacts {
                    namespace: meta.namespace.clone().unwrap_or_default(),
                    name: meta.name.clone().unwrap_or_default(),
                    uid: meta.uid.clone().unwrap_or_default(),
                    node_name: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
                    service_account_name: spec
                        .and_then(|s| s.service_account_name.clone())
                        .unwrap_or_else(|| "default".to_owned()),
                    phase: pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default(),
                    deletion_timestamp: meta.deletion_timestamp.as_ref().map(|t| t.0),
                    labels: meta.labels.clone().unwrap_or_default(),
                }
            }),
            service_account: live(account, |account| named(&account.metadata)),
            node: live(node, |node| named(&node.metadata)),
            services,
        }
    }

    /// The event of a decision with a status to write.
    fn decided(&self, request: &PodCertificateRequest, decision: &Decision) -> Event {
        match decision {
            Decision::Issued(issued) => {
                let mut event = self.event(request, AuditDecision::Issued, "");
                if let Some(certificate) = event.pod_certificate.as_deref_mut() {
                    certificate.key_type = issued.key_type.to_string();
                    certificate.spki_sha256 = issued.spki_sha256.clone();
                    certificate.serial_number = issued.serial_hex.clone();
                    certificate.spiffe_id = issued.spiffe_id.clone();
                    certificate.dns_names = issued.dns_names.clone();
                    certificate.not_before = issued.status.not_before.map(Timestamp::as_second);
                    certificate.not_after = issued.status.not_after.map(Timestamp::as_second);
                    certificate.ca_key_id = issued.ca_key_id.clone();
                }
                event
            }
            Decision::Denied { message, .. } => self.event(request, AuditDecision::Denied, message),
            Decision::Failed { message, .. } => self.event(request, AuditDecision::Failed, message),
            Decision::Requeue { message, .. } => {
                self.event(request, AuditDecision::Requeued, message)
            }
            // Never recorded: nothing was decided.
            Decision::Ignored { why } => self.event(request, AuditDecision::Refused, why),
        }
    }

    /// An event naming the PCR and what it names: the pod, service account and node as the
    /// PCR gives them (with the UIDs it claims), and the key's type and fingerprint.
    fn event(
        &self,
        request: &PodCertificateRequest,
        decision: AuditDecision,
        reason: &str,
    ) -> Event {
        let spec = request.spec.as_ref().ok();
        let object = |kind: &'static str, name: &str, uid: &str| {
            (!name.is_empty()).then(|| BoundObject {
                kind,
                name: name.to_owned(),
                uid: uid.to_owned(),
            })
        };
        let certificate = PodCertificateFacts {
            signer_name: request.signer_name.clone(),
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            uid: request.uid.clone().unwrap_or_default(),
            pod: spec.and_then(|s| object("Pod", &s.pod_name, &s.pod_uid)),
            node: spec.and_then(|s| object("Node", &s.node_name, &s.node_uid)),
            key_type: spec
                .and_then(|s| s.key.key_type().ok())
                .map(|t| t.to_string())
                .unwrap_or_default(),
            spki_sha256: spec.map(|s| s.key.spki_sha256_hex()).unwrap_or_default(),
            ..PodCertificateFacts::default()
        };
        Event {
            kind: EventKind::PodCertificate,
            time: self.clock.now(),
            request_id: String::new(),
            requester: self.requester.clone(),
            decision,
            code: None,
            reason: reason.to_owned(),
            service_account: spec.map(|s| AuditedAccount {
                namespace: request.namespace.clone(),
                name: s.service_account_name.clone(),
                uid: s.service_account_uid.clone(),
            }),
            token: None,
            pod_certificate: Some(Box::new(certificate)),
            answered: None,
        }
    }

    /// A Warning event on the PCR (`kubectl describe` shows why it waits); sent in the
    /// background, a failure only logged.
    fn warn(&self, request: &PodCertificateRequest, reason: &str, message: &str) {
        let recorder = self.recorder.clone();
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(request.api_version.as_str().to_owned()),
            kind: Some("PodCertificateRequest".to_owned()),
            namespace: Some(request.namespace.clone()),
            name: Some(request.name.clone()),
            uid: request.uid.clone(),
            resource_version: request.resource_version.clone(),
            ..Default::default()
        };
        let event = KubeEvent {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(warrant_audit::bounded(message, 1000)),
            action: "Sign".to_owned(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::debug!(%error, "could not publish a Warning event on a PodCertificateRequest");
            }
        });
    }
}

/// What decides whether a Service selects a pod: its name, selector and type.
fn service_facts(service: &Service) -> ServiceFacts {
    let spec = service.spec.as_ref();
    ServiceFacts {
        name: service.metadata.name.clone().unwrap_or_default(),
        selector: spec.and_then(|s| s.selector.clone()).unwrap_or_default(),
        external_name: spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName"),
    }
}

fn named(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> NamedObject {
    NamedObject {
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    }
}

fn live<T, F>(read: Result<Option<T>, kube::Error>, facts: impl FnOnce(T) -> F) -> Live<F> {
    match read {
        Ok(Some(object)) => Live::Found(facts(object)),
        Ok(None) => Live::Absent,
        Err(error) => Live::Unreadable(error.to_string()),
    }
}
