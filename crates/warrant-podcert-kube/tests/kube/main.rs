//! The PCR controller and the trust bundle keeper against the kube fixture, over real HTTP.
//!
//! The decision is a test double ([`Double`]): the real decision is a pure function tested row
//! by row in its own crate (`warrant-podcert`); what these tests check is everything around
//! it: which PCRs reach it, when, and what becomes of what it returns.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod latency;
mod signer;
mod trust;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warrant_kube_fixture::podcert::pod_certificate_requests;
use warrant_kube_fixture::{Cluster, Fixture, ResourceType};
use warrant_podcert_kube::{Backoff, Config, Controller, Outcome, Report, Sign};

/// How long any wait may take before the test fails (a safety net: waits end on events).
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) const SIGNER: &str = "warrant.example.com/spiffe";

pub(crate) async fn fixture(pcr_version: &'static str) -> Fixture {
    let fixture = Fixture::start().await.unwrap();
    fixture.serve_pod_certificates(pcr_version);
    fixture
}

pub(crate) fn client(fixture: &Fixture) -> kube::Client {
    let config = kube::Config::new(fixture.url().parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

/// A PCR in namespace `demo` as a 1.36 kubelet creates it (spec from the captured vector).
pub(crate) fn pcr(name: &str, signer: &str) -> Value {
    json!({
        "metadata": { "name": name, "namespace": "demo", "uid": format!("uid-{name}") },
        "spec": {
            "signerName": signer,
            "podName": "app",
            "podUID": "da4947b6-839d-4cfd-a5e6-a50f1ba67674",
            "serviceAccountName": "app",
            "serviceAccountUID": "5a692643-4a9b-4e6c-8f6f-878dc9fc4f66",
            "nodeName": "node1",
            "nodeUID": "7ec80e6e-2ac3-474f-9b7b-cbefa4bf5468",
            "maxExpirationSeconds": 7200,
            "pkixPublicKey": null,
            "proofOfPossession": null,
            "stubPKCS10Request": "MIG7MGICAQAwADBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABEbXApSixJM4pedRw535xibamIRjf8IRhcRswGHwjbrDlTqCcEjVbaO3sVu5YVCIv7s1vcil4sHPSXrKND9H9p2gADAKBggqhkjOPQQDAgNJADBGAiEA77wE+wk/2cgGrhMQATJIRTqahEALr5J/ukd0QPSASuwCIQCwdvlMCSfiF9mkch216s9bVXotjgocx1KMnKRxyGKhww=="
        },
        "status": {}
    })
}

/// A terminal status with one condition of `kind`, tagged with `by` (which replica wrote it).
pub(crate) fn terminal(kind: &str, by: &str) -> Value {
    json!({
        "conditions": [{
            "type": kind,
            "status": "True",
            "reason": if kind == "Issued" { "Issued" } else { "TestReason" },
            "message": format!("written by {by}"),
            "lastTransitionTime": "2026-11-27T17:17:09Z",
        }]
    })
}

/// PCRs as most tests serve them (1.36's version).
pub(crate) fn pcrs() -> ResourceType {
    pod_certificate_requests("v1beta1")
}

pub(crate) fn create(fixture: &Fixture, pcr: Value) {
    fixture.create_json(pcrs(), pcr).unwrap();
}

pub(crate) fn stored(fixture: &Fixture, name: &str) -> Value {
    fixture
        .get_json(pcrs(), "demo", name)
        .unwrap_or_else(|| panic!("PCR {name} is not stored"))
}

/// What the double answers, in order; once the script runs out, `then`.
pub(crate) struct Double {
    name: String,
    script: Mutex<VecDeque<Outcome>>,
    then: Outcome,
    /// The cluster, to record the stored status each time the double is asked.
    cluster: Option<Cluster>,
    pub(crate) seen: Mutex<Vec<Seen>>,
    pub(crate) reports: Mutex<Vec<(String, Report)>>,
    changes: tokio::sync::watch::Sender<usize>,
}

/// One call of the double: the PCR handed over and its status as stored at that moment.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) name: String,
    pub(crate) pcr: Value,
    pub(crate) stored_status: Option<Value>,
}

impl Double {
    /// Issues every PCR (a terminal `Issued` condition tagged with `name`).
    pub(crate) fn issuing(name: &str) -> Arc<Self> {
        Self::scripted(
            name,
            Vec::new(),
            Outcome::Write(terminal("Issued", name)),
            None,
        )
    }

    pub(crate) fn scripted(
        name: &str,
        script: Vec<Outcome>,
        then: Outcome,
        cluster: Option<Cluster>,
    ) -> Arc<Self> {
        Arc::new(Double {
            name: name.to_owned(),
            script: Mutex::new(script.into()),
            then,
            cluster,
            seen: Mutex::new(Vec::new()),
            reports: Mutex::new(Vec::new()),
            changes: tokio::sync::watch::Sender::new(0),
        })
    }

    pub(crate) fn seen_names(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    pub(crate) fn reports_for(&self, name: &str) -> Vec<Report> {
        self.reports
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// Waits until `check` holds, re-checking after each call or report.
    pub(crate) async fn until(&self, what: &str, check: impl Fn(&Double) -> bool) {
        let mut changes = self.changes.subscribe();
        let wait = async {
            while !check(self) {
                changes.changed().await.unwrap();
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("{}: {what} did not happen", self.name));
    }
}

fn name_of(pcr: &Value) -> String {
    pcr["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

impl Sign for Double {
    async fn handle(&self, pcr: &Value) -> Outcome {
        let name = name_of(pcr);
        let stored_status = self
            .cluster
            .as_ref()
            .and_then(|c| c.get_json(pcrs(), "demo", &name))
            .map(|o| o["status"].clone());
        self.seen.lock().unwrap().push(Seen {
            name,
            pcr: pcr.clone(),
            stored_status,
        });
        let outcome = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| self.then.clone());
        self.changes.send_modify(|n| *n += 1);
        outcome
    }

    fn report(&self, pcr: &Value, report: &Report) {
        self.reports
            .lock()
            .unwrap()
            .push((name_of(pcr), report.clone()));
        self.changes.send_modify(|n| *n += 1);
    }
}

/// A running controller; dropping it stops the controller.
pub(crate) struct Running {
    pub(crate) registry: Registry,
    cancel: CancellationToken,
    _task: tokio::task::JoinHandle<Result<(), warrant_podcert_kube::Error>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Starts a controller for `signers` against the fixture, with a fast backoff (tests wait on
/// events, never on time; a short backoff only keeps retries prompt).
pub(crate) fn start(fixture: &Fixture, signers: &[&str], sign: Arc<Double>) -> Running {
    let mut registry = Registry::default();
    let config = Config {
        signer_names: signers.iter().map(|s| (*s).to_owned()).collect(),
        workers: 2,
        backoff: Backoff {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(50),
        },
        version: None,
    };
    let controller = Controller::new(client(fixture), config, sign, &mut registry).unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(controller.run(cancel.clone()));
    Running {
        registry,
        cancel,
        _task: task,
    }
}

/// The value of one metric series in `registry` (0 if absent), e.g.
/// `warrant_podcert_lost_races_total{signer="…"}`.
pub(crate) fn metric(registry: &Registry, name: &str) -> f64 {
    series(registry, name).unwrap_or(0.0)
}

/// The value of one metric series, or `None` if it is not exposed.
pub(crate) fn series(registry: &Registry, name: &str) -> Option<f64> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
