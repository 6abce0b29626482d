//! Issue 44's PCR-to-Issued latency, end to end against the fixture: a measurement, not a check
//! (ignored; docs/benchmarks.md, "Pod certificates", has the command and figures).
//!
//! The controller watches the fixture over real HTTP and hands each PCR to [`Deciding`], which
//! does what `warrant serve`'s signer does per PCR: reads the pod, service account and node
//! live (three GETs at once, as `crates/warrant/src/podcert/sign.rs` does) and runs the real
//! decision with an in-memory P-256 CA; the controller then writes the status with its
//! resourceVersion. Left out: the audit event `serve` records before each write and its
//! metrics. Timed from the PCR's creation in the fixture to its `Issued` status being stored:
//!
//! - one PCR at a time (the latency a kubelet sees on an idle signer);
//! - a burst of PCRs created at once (a node's pods starting together): time until the last
//!   is issued, and certificates a second over the burst.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kube::Api;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use warrant_kube_fixture::objects;
use warrant_podcert::{
    CaCurve, Decision, Facts, Live, MemoryCa, NamedObject, PodCertificatePolicy,
    PodCertificateRequest, PodFacts,
};
use warrant_podcert_kube::{Backoff, Config, Controller, Outcome, Sign};

use crate::{PATIENCE, SIGNER, client, create, fixture, pcr, pcrs};

const POD_UID: &str = "da4947b6-839d-4cfd-a5e6-a50f1ba67674";
const SA_UID: &str = "5a692643-4a9b-4e6c-8f6f-878dc9fc4f66";
const NODE_UID: &str = "7ec80e6e-2ac3-474f-9b7b-cbefa4bf5468";

/// PCRs decided one after the other.
const SERIAL: usize = 200;
/// PCRs created at once.
const BURST: usize = 500;

/// The real decision, with facts read live and an in-memory CA.
struct Deciding {
    client: kube::Client,
    ca: MemoryCa,
    policy: PodCertificatePolicy,
    now: Timestamp,
    /// Anything but `Issued`: the measurement is void.
    unexpected: Mutex<Vec<String>>,
}

/// A fact as read: found, absent, or not readable.
fn live<T, F>(read: Result<Option<T>, kube::Error>, facts: impl FnOnce(T) -> F) -> Live<F> {
    match read {
        Ok(Some(object)) => Live::Found(facts(object)),
        Ok(None) => Live::Absent,
        Err(error) => Live::Unreadable(error.to_string()),
    }
}

fn named(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> NamedObject {
    NamedObject {
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    }
}

impl Deciding {
    async fn facts(&self, request: &PodCertificateRequest) -> Facts {
        let spec = request.spec.as_ref().expect("a usable spec");
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &request.namespace);
        let accounts: Api<ServiceAccount> =
            Api::namespaced(self.client.clone(), &request.namespace);
        let nodes: Api<Node> = Api::all(self.client.clone());
        let (pod, account, node) = tokio::join!(
            pods.get_opt(&spec.pod_name),
            accounts.get_opt(&spec.service_account_name),
            nodes.get_opt(&spec.node_name),
        );
        Facts {
            pod: live(pod, |pod| PodFacts {
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                node_name: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                service_account_name: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.clone())
                    .unwrap_or_default(),
                phase: pod
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default(),
                deletion_timestamp: pod.metadata.deletion_timestamp.as_ref().map(|t| t.0),
                labels: pod.metadata.labels.clone().unwrap_or_default(),
            }),
            service_account: live(account, |account| named(&account.metadata)),
            node: live(node, |node| named(&node.metadata)),
            // The policy here names no DNS names: Services are not looked at.
            services: Live::Found(Vec::new()),
        }
    }
}

impl Sign for Deciding {
    async fn handle(&self, pcr: &Value) -> Outcome {
        let request = PodCertificateRequest::from_json(pcr).expect("a PCR");
        let facts = self.facts(&request).await;
        match warrant_podcert::decide(&request, &facts, &self.policy, self.now, &self.ca).await {
            Ok(Decision::Issued(issued)) => Outcome::Write(issued.status.to_json()),
            other => {
                self.unexpected
                    .lock()
                    .unwrap()
                    .push(format!("{}: {other:?}", request.name));
                Outcome::Ignore
            }
        }
    }
}

fn issued(fixture: &warrant_kube_fixture::Cluster, name: &str) -> bool {
    fixture
        .get_json(pcrs(), "demo", name)
        .and_then(|p| p.pointer("/status/conditions/0/type").cloned())
        == Some(json!("Issued"))
}

/// p-th percentile (0..=100) of sorted durations, in milliseconds.
fn percentile(sorted: &[Duration], p: usize) -> f64 {
    let index = (sorted.len() * p / 100).min(sorted.len() - 1);
    sorted[index].as_secs_f64() * 1e3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p warrant-podcert-kube --test kube -- --ignored --nocapture latency"]
async fn pcr_to_issued_latency_with_the_real_decision() {
    let fixture = fixture("v1beta1").await;
    fixture
        .create(&objects::service_account("demo", "app", SA_UID))
        .unwrap();
    fixture.create(&objects::node("node1", NODE_UID)).unwrap();
    fixture
        .create(&objects::pod("demo", "app", POD_UID, "app", "node1", None))
        .unwrap();
    let at = |text: &str| text.parse::<Timestamp>().unwrap();
    let (ca, _) = MemoryCa::generate(
        CaCurve::P256,
        "warrant pod CA (latency)",
        at("2026-01-01T00:00:00Z"),
        at("2036-01-01T00:00:00Z"),
    )
    .unwrap();
    let policy: PodCertificatePolicy = serde_json::from_value(json!({
        "trustDomain": "cluster.local",
        "signers": [{"signerName": SIGNER, "namespaces": ["*"]}],
    }))
    .unwrap();
    policy.validate().unwrap();
    let deciding = Arc::new(Deciding {
        client: client(&fixture),
        ca,
        policy,
        now: at("2026-12-01T00:00:00Z"),
        unexpected: Mutex::new(Vec::new()),
    });
    // `serve`'s defaults: 4 workers, its backoff (nothing is requeued here).
    let config = Config {
        signer_names: vec![SIGNER.to_owned()],
        workers: 4,
        backoff: Backoff::default(),
        version: None,
    };
    let controller = Controller::new(
        client(&fixture),
        config,
        deciding.clone(),
        &mut Registry::default(),
    )
    .unwrap();
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    tokio::spawn(controller.run(cancel));
    let watching = |c: &warrant_kube_fixture::Cluster| c.watchers("podcertificaterequests") == 1;
    tokio::time::timeout(PATIENCE, fixture.until(watching))
        .await
        .unwrap();

    let until_issued = |names: Vec<String>| {
        let deciding = deciding.clone();
        let cluster = fixture.cluster().clone();
        async move {
            // Each name is looked at until it is issued, then never again: the check runs on
            // every change in the fixture, and must not cost the burst its cores.
            let mut done = 0;
            let all = |c: &warrant_kube_fixture::Cluster| {
                while done < names.len() && issued(c, &names[done]) {
                    done += 1;
                }
                done == names.len() || !deciding.unexpected.lock().unwrap().is_empty()
            };
            tokio::time::timeout(PATIENCE, cluster.until(all))
                .await
                .expect("every PCR issued in time");
            let unexpected = deciding.unexpected.lock().unwrap();
            assert!(unexpected.is_empty(), "{unexpected:#?}");
        }
    };

    // One at a time.
    let mut latencies = Vec::with_capacity(SERIAL);
    for i in 0..SERIAL {
        let name = format!("serial-{i}");
        let start = Instant::now();
        create(&fixture, pcr(&name, SIGNER));
        until_issued(vec![name]).await;
        latencies.push(start.elapsed());
    }
    latencies.sort();
    println!(
        "one PCR at a time ({SERIAL}): PCR to Issued p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&latencies, 50),
        percentile(&latencies, 90),
        percentile(&latencies, 99),
        percentile(&latencies, 100),
    );

    // A burst.
    let names: Vec<String> = (0..BURST).map(|i| format!("burst-{i}")).collect();
    let start = Instant::now();
    for name in &names {
        create(&fixture, pcr(name, SIGNER));
    }
    let created = start.elapsed();
    until_issued(names).await;
    let all = start.elapsed();
    println!(
        "a burst of {BURST} PCRs (created in {:.1} ms): the last Issued after {:.1} ms, {:.0} certificates/s",
        created.as_secs_f64() * 1e3,
        all.as_secs_f64() * 1e3,
        BURST as f64 / all.as_secs_f64(),
    );
}
