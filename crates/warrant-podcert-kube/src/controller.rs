//! The PCR controller: watches, the queue, workers and status writes (see the crate doc).
//!
//! Watches go through kube-runtime's watcher, as the cluster cache's do: it lists, watches from
//! the list's resourceVersion, resumes where a dropped connection left off and relists on
//! `410 Gone`, so a PCR created while a watch was down arrives with the resumed watch or the
//! relist. A PCR deleted while the watch was down may stay queued; its status write then gets
//! `404` and it is forgotten ([`Report::Gone`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::queue::{Backoff, Key, Queue};
use crate::{Error, Outcome, PcrVersion, Report, Sign, check_signer_name, is_terminal};

/// What the controller watches and how it retries.
#[derive(Debug, Clone)]
pub struct Config {
    /// The signer names warrant answers for (`--pod-certificate-signer`); one watch each.
    pub signer_names: Vec<String>,
    /// PCRs decided at once (each decision waits on live reads and the CA).
    pub workers: usize,
    /// How retries after a requeue or a failed write are spaced.
    pub backoff: Backoff,
    /// The version to use; `None` asks discovery ([`crate::choose_version`]).
    pub version: Option<PcrVersion>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            signer_names: Vec::new(),
            workers: 4,
            backoff: Backoff::default(),
            version: None,
        }
    }
}

/// The PCR signer's Kubernetes side. Build with [`Controller::new`], then [`Controller::run`].
pub struct Controller<S> {
    shared: Arc<Shared<S>>,
    config: Config,
}

impl<S> std::fmt::Debug for Controller<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

struct Shared<S> {
    client: Client,
    sign: Arc<S>,
    signers: HashSet<String>,
    queue: Arc<Mutex<Queue>>,
    wake: Notify,
    metrics: Metrics,
    backoff: Backoff,
}

impl<S: Sign> Controller<S> {
    /// A controller for `config.signer_names` that hands PCRs to `sign`. Registers its metrics
    /// (module `metrics`, also in docs/metrics.md) in `registry`. Refuses signer names warrant
    /// may not own (`kubernetes.io/…`), and an empty list.
    pub fn new(
        client: Client,
        config: Config,
        sign: Arc<S>,
        registry: &mut Registry,
    ) -> Result<Self, Error> {
        if config.signer_names.is_empty() {
            return Err(Error::SignerName(String::new()));
        }
        for name in &config.signer_names {
            check_signer_name(name)?;
        }
        let queue = Arc::new(Mutex::new(Queue::default()));
        let metrics = Metrics::default();
        metrics.register(registry, queue.clone());
        let shared = Arc::new(Shared {
            client,
            sign,
            signers: config.signer_names.iter().cloned().collect(),
            queue,
            wake: Notify::new(),
            metrics,
            backoff: config.backoff,
        });
        Ok(Controller { shared, config })
    }

    /// Runs until `cancel` fires: picks the API version (once), then watches and decides.
    /// Returns an error only if no version serves PCRs or discovery fails; watch and write
    /// failures are retried, logged and counted.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), Error> {
        let version = match self.config.version {
            Some(version) => version,
            None => crate::choose_version(&self.shared.client).await?,
        };
        tracing::info!(
            version = version.version(),
            signers = ?self.config.signer_names,
            "watching PodCertificateRequests"
        );
        let mut tasks = tokio::task::JoinSet::new();
        for signer in &self.config.signer_names {
            let shared = self.shared.clone();
            let (signer, cancel) = (signer.clone(), cancel.clone());
            tasks.spawn(async move { shared.watch(version, signer, cancel).await });
        }
        for _ in 0..self.config.workers.max(1) {
            let shared = self.shared.clone();
            let cancel = cancel.clone();
            tasks.spawn(async move { shared.work(version, cancel).await });
        }
        cancel.cancelled().await;
        tasks.shutdown().await;
        Ok(())
    }
}

fn key_of(pcr: &Value) -> Option<Key> {
    let meta = pcr.get("metadata")?;
    let namespace = meta.get("namespace")?.as_str()?;
    let name = meta.get("name")?.as_str()?;
    Some((namespace.to_owned(), name.to_owned()))
}

fn signer_of(pcr: &Value) -> &str {
    pcr.pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `issued`, `denied` or `failed`: the terminal condition of a status, for metrics.
fn result_of(status: &Value) -> &'static str {
    let types = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("type").and_then(Value::as_str));
    for t in types {
        match t {
            "Issued" => return "issued",
            "Denied" => return "denied",
            "Failed" => return "failed",
            _ => {}
        }
    }
    "other"
}

impl<S: Sign> Shared<S> {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Follows one signer name's PCRs into the queue until cancelled.
    async fn watch(&self, version: PcrVersion, signer: String, cancel: CancellationToken) {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &version.api_resource());
        let config = watcher::Config::default().fields(&format!("spec.signerName={signer}"));
        let stream = watcher::watcher(api, config).default_backoff();
        let mut stream = std::pin::pin!(stream);
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => return,
                next = stream.next() => next,
            };
            match next {
                Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                    self.seen(&signer, object, false);
                }
                Some(Ok(Event::Delete(object))) => self.seen(&signer, object, true),
                Some(Ok(Event::Init | Event::InitDone)) => {}
                Some(Err(error)) => {
                    self.metrics.watch_error(&signer);
                    tracing::warn!(%signer, %error, "PodCertificateRequest watch failed; it resumes or relists");
                }
                None => {
                    tracing::error!(%signer, "PodCertificateRequest watch ended");
                    return;
                }
            }
        }
    }

    /// A PCR from a watch: queued if it is this signer's and not terminal, else forgotten.
    fn seen(&self, signer: &str, object: DynamicObject, deleted: bool) {
        let Ok(pcr) = serde_json::to_value(&object) else {
            return;
        };
        let Some(key) = key_of(&pcr) else { return };
        // The field selector should make this hold; a PCR of another signer name is never
        // handed over even if a server ignored the selector.
        if signer_of(&pcr) != signer || !self.signers.contains(signer) {
            return;
        }
        if deleted || is_terminal(&pcr) {
            self.queue().remove(&key);
            return;
        }
        self.queue().offer(key, pcr, Instant::now());
        self.wake.notify_waiters();
    }

    /// One worker: takes ready PCRs from the queue until cancelled.
    async fn work(&self, version: PcrVersion, cancel: CancellationToken) {
        loop {
            let woken = self.wake.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            let next = {
                let mut queue = self.queue();
                queue.pop(Instant::now()).ok_or_else(|| queue.next_ready())
            };
            match next {
                Ok((key, pcr, _)) => {
                    self.handle(version, key, pcr).await;
                    // Whatever this worker left ready, another may take.
                    self.wake.notify_waiters();
                }
                Err(next_ready) => {
                    let until =
                        next_ready.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = &mut woken => {}
                        () = tokio::time::sleep_until(until) => {}
                    }
                }
            }
        }
    }

    async fn handle(&self, version: PcrVersion, key: Key, pcr: Value) {
        let signer = signer_of(&pcr).to_owned();
        match self.sign.handle(&pcr).await {
            Outcome::Ignore => self.queue().done(&key),
            Outcome::Requeue { reason, after } => {
                self.metrics.requeue(&signer);
                let attempt = self.retry(key.clone(), pcr, after);
                tracing::info!(namespace = %key.0, name = %key.1, %signer, %reason, attempt, "PodCertificateRequest requeued");
            }
            Outcome::Write(status) => self.write(version, key, pcr, status).await,
        }
    }

    /// Queues `key` again after the backoff (at least `after`); returns the attempt number.
    fn retry(&self, key: Key, pcr: Value, after: Duration) -> u32 {
        let mut queue = self.queue();
        let attempt = queue.attempts(&key).saturating_add(1);
        let delay = self.backoff.delay(attempt, after);
        queue.retry(key, pcr, delay, Instant::now())
    }

    /// Writes `status` with the resourceVersion `pcr` was read at.
    async fn write(&self, version: PcrVersion, key: Key, pcr: Value, status: Value) {
        let signer = signer_of(&pcr).to_owned();
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &key.0, &version.api_resource());
        let mut object = pcr.clone();
        if let Some(map) = object.as_object_mut() {
            map.insert("status".into(), status.clone());
        }
        let sent = match serde_json::from_value::<DynamicObject>(object) {
            Ok(sent) => sent,
            Err(error) => {
                tracing::error!(namespace = %key.0, name = %key.1, %error, "PodCertificateRequest could not be encoded");
                self.queue().done(&key);
                return;
            }
        };
        match api
            .replace_status(&key.1, &PostParams::default(), &sent)
            .await
        {
            Ok(_) => {
                self.metrics.written(&signer, result_of(&status));
                self.sign.report(&pcr, &Report::Written { status });
                self.queue().forget(&key);
            }
            Err(kube::Error::Api(refusal)) if refusal.code == 409 => {
                self.after_conflict(&api, key, pcr).await;
            }
            Err(kube::Error::Api(refusal)) if refusal.code == 422 => {
                // A bug in the decision: the same status would be refused again.
                self.metrics.write_error(&signer, "invalid");
                tracing::error!(namespace = %key.0, name = %key.1, %signer, message = %refusal.message, "kube-apiserver refused a PodCertificateRequest status; not retried");
                self.sign.report(
                    &pcr,
                    &Report::Refused {
                        message: refusal.message.clone(),
                    },
                );
                self.queue().forget(&key);
            }
            Err(kube::Error::Api(refusal)) if refusal.code == 404 => {
                self.sign.report(&pcr, &Report::Gone);
                self.queue().forget(&key);
            }
            Err(error) => {
                self.metrics.write_error(&signer, "api");
                let attempt = self.retry(key.clone(), pcr, Duration::ZERO);
                tracing::warn!(namespace = %key.0, name = %key.1, %signer, %error, attempt, "PodCertificateRequest status write failed; retrying");
            }
        }
    }

    /// After a `409`: the PCR as it is now decides between a lost race and a retry.
    async fn after_conflict(&self, api: &Api<DynamicObject>, key: Key, pcr: Value) {
        let signer = signer_of(&pcr).to_owned();
        match api.get(&key.1).await.map(|o| serde_json::to_value(&o)) {
            Ok(Ok(fresh)) if is_terminal(&fresh) => {
                self.metrics.lost_race(&signer);
                let winner = fresh.get("status").cloned().unwrap_or(Value::Null);
                tracing::info!(namespace = %key.0, name = %key.1, %signer, "PodCertificateRequest answered by another writer first (lost race)");
                self.sign.report(&pcr, &Report::LostRace { winner });
                self.queue().forget(&key);
            }
            Ok(Ok(fresh)) => {
                // Changed but still open (a label, say): decide again on the new state.
                self.retry(key, fresh, Duration::ZERO);
            }
            Err(kube::Error::Api(refusal)) if refusal.code == 404 => {
                self.sign.report(&pcr, &Report::Gone);
                self.queue().forget(&key);
            }
            Ok(Err(_)) | Err(_) => {
                self.metrics.write_error(&signer, "api");
                self.retry(key, pcr, Duration::ZERO);
            }
        }
    }
}
