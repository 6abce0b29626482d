//! The live GET after a cache miss, as kube-apiserver's token getter falls back from its
//! informer's lister to a GET: an object created a moment ago is found before its watch event
//! arrives, and "not found" is only said after the API server said it.
//!
//! Misses for the same object share one GET ([`warrant_flight::SingleFlight`]); at most
//! `limit` GETs are sent at once, the rest wait their turn; a GET (wait included) that takes
//! longer than `timeout` fails. At most [`WAITING_PER_GET`] × `limit` lookups wait or run: past
//! that, a lookup fails at once as unavailable, so a burst of misses for distinct objects costs
//! failures, never unbounded memory. The GET runs in its own task, so a caller that gives up
//! does not cancel it for the others that share it, and it leaves nothing behind when it ends.

use std::sync::Arc;
use std::time::Duration;

use ::kube::core::PartialObjectMeta;
use ::kube::{Api, Client};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use warrant_flight::SingleFlight;

use super::metrics::Metrics;
use super::watch::{Slim, record};
use crate::record::{Kind, Record};
use crate::source::{ClientError, LiveError, LookupError};

type Answer = Result<Option<Arc<Record>>, LookupError>;
type Key = (Kind, String, String);

/// How many lookups may wait or run per GET allowed in flight.
pub(super) const WAITING_PER_GET: usize = 8;

/// The live lookups of one cache.
pub(super) struct LiveGets {
    fetcher: Arc<Fetcher>,
    flights: SingleFlight<Key, Answer>,
}

/// What a lookup's task needs.
struct Fetcher {
    client: Client,
    permits: Semaphore,
    timeout: Duration,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
}

impl LiveGets {
    pub(super) fn new(
        client: Client,
        limit: usize,
        timeout: Duration,
        metrics: Arc<Metrics>,
        runtime: tokio::runtime::Handle,
        cancel: CancellationToken,
    ) -> Self {
        let limit = limit.max(1);
        LiveGets {
            fetcher: Arc::new(Fetcher {
                client,
                permits: Semaphore::new(limit),
                timeout,
                metrics,
                cancel,
            }),
            flights: SingleFlight::new(limit.saturating_mul(WAITING_PER_GET)).on_runtime(runtime),
        }
    }

    /// The object from the API server, sharing a GET already in flight for it.
    pub(super) fn get(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> BoxFuture<'static, Answer> {
        let key = (kind, namespace.to_owned(), name.to_owned());
        let fetcher = self.fetcher.clone();
        let task_key = key.clone();
        let lookup = move || async move {
            tokio::select! {
                () = fetcher.cancel.cancelled() => Err(failed(task_key, LiveError::ShuttingDown)),
                answer = fetcher.fetch(&task_key) => answer,
            }
        };
        match self.flights.join(key.clone(), lookup) {
            Ok(flight) => {
                if flight.joined() {
                    self.fetcher.metrics.live_shared(kind);
                }
                async move {
                    flight
                        .answer()
                        .await
                        .unwrap_or_else(|error| Err(failed(key, LiveError::Flight(error))))
                }
                .boxed()
            }
            Err(error) => {
                self.fetcher.metrics.live_get(kind, "overloaded");
                futures::future::ready(Err(failed(key, LiveError::Flight(error)))).boxed()
            }
        }
    }
}

impl Fetcher {
    async fn fetch(&self, key: &Key) -> Answer {
        let (kind, namespace, name) = key;
        let get = async {
            let waiting = Counted::new(&self.metrics.live_waiting);
            let permit = self.permits.acquire().await;
            drop(waiting);
            let Ok(_permit) = permit else {
                return Err(LiveError::ShuttingDown);
            };
            let _sending = Counted::new(&self.metrics.live_in_flight);
            self.send(*kind, namespace, name).await
        };
        let answer = match tokio::time::timeout(self.timeout, get).await {
            Ok(Ok(found)) => Ok(found),
            Ok(Err(cause)) => Err(cause),
            Err(_) => Err(LiveError::Timeout(self.timeout)),
        };
        match answer {
            Ok(Some(record)) => {
                self.metrics.live_get(*kind, "found");
                Ok(Some(Arc::new(record)))
            }
            Ok(None) => {
                self.metrics.live_get(*kind, "not_found");
                Ok(None)
            }
            Err(cause) => {
                self.metrics.live_get(*kind, "error");
                let error = failed(key.clone(), cause);
                tracing::warn!(message = %error, "live lookup failed");
                Err(error)
            }
        }
    }

    /// One GET: the full pod, or the metadata of anything else.
    async fn send(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Record>, LiveError> {
        let client = self.client.clone();
        match kind {
            Kind::Pod => get(Api::<Pod>::namespaced(client, namespace), name).await,
            Kind::ServiceAccount => {
                let api = Api::<PartialObjectMeta<ServiceAccount>>::namespaced(client, namespace);
                get(api, name).await
            }
            Kind::Secret => {
                let api = Api::<PartialObjectMeta<Secret>>::namespaced(client, namespace);
                get(api, name).await
            }
            Kind::Node => get(Api::<PartialObjectMeta<Node>>::all(client), name).await,
        }
    }
}

/// Holds a gauge one higher while it lives, however the future holding it ends.
struct Counted<'a>(&'a Gauge);

impl<'a> Counted<'a> {
    fn new(gauge: &'a Gauge) -> Self {
        gauge.inc();
        Counted(gauge)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

async fn get<K: Slim>(api: Api<K>, name: &str) -> Result<Option<Record>, LiveError> {
    match api.get_opt(name).await {
        Ok(Some(object)) => record(&object)
            .map(Some)
            .map_err(|skip| LiveError::Malformed(skip.reason())),
        Ok(None) => Ok(None),
        Err(error) => Err(LiveError::Client(ClientError(Arc::new(error)))),
    }
}

/// The lookup of `key` failed with `cause`.
fn failed((kind, namespace, name): Key, cause: LiveError) -> LookupError {
    LookupError::Live {
        kind,
        namespace,
        name,
        cause,
    }
}
