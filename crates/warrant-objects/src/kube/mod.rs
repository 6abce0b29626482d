//! The cluster source: a watch cache of a cluster's ServiceAccounts, Pods, Secrets and Nodes,
//! checked the way kube-apiserver checks tokens against its informers (spec §3.3), with a live
//! GET on a miss as its token getter does.
//!
//! # Consistency
//!
//! - Lookups read memory. A miss is not yet "absent": it becomes a GET to the API server
//!   (see [`KubeOptions::live_get_limit`] and [`KubeOptions::live_get_timeout`]), and only a
//!   `404` from it is "not found". A failed GET is an error to the caller, never an answer.
//! - A deleted object leaves the cache when its DELETED event arrives; one being deleted stays,
//!   with its deletion timestamp, and [`crate::check_token_objects`] treats it as deleted only 60 s
//!   after that timestamp, as kube does.
//! - The source is [ready](crate::ObjectSource::ready) once the first full list of every kind
//!   has arrived, and stays ready through later relists (the old state keeps answering until the
//!   new list is complete), as an informer's `HasSynced` does.
//! - Unlike kube-apiserver, no success cache sits in front: every review checks the current
//!   state of the cache.
//! - Secrets can be left unwatched ([`KubeOptions::watch_secrets`]), for a cluster where warrant
//!   may not list them: then no request about Secrets is ever made, readiness does not wait for
//!   them, and a Secret lookup fails as unavailable (the server refuses Secret-bound tokens
//!   before it would look one up).
//! - By default the cache is trusted however long ago it last heard from the API server, as
//!   kube-apiserver trusts its informers. With [`KubeOptions::max_staleness`], a kind not heard
//!   from (no event, no bookmark) for longer is looked up live instead, and the source is not
//!   ready (see the `kinds` module).
//!
//! # Cost
//!
//! Memory is mostly the records, kept compact (see the `store` module): about 200 bytes per
//! object on average, pods about twice what other objects cost. A cluster of 150,000 pods,
//! 150,000 secrets, 50,000 service accounts and 5,000 nodes measured about 97 MiB resident,
//! ready in about 6 s on 2 cores (`docs/benchmarks.md`). Objects arrive in pages of 500
//! (kube-runtime's default, as client-go's), so a list holds one page of full pods at a time.

mod activity;
mod kinds;
mod live;
mod metrics;
mod store;
mod watch;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ::kube::runtime::watcher;
use prometheus_client::registry::Registry;
use tokio::sync::watch as notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use self::kinds::CacheClock;
use self::kinds::Kinds;
use self::live::LiveGets;
use self::metrics::{Metrics, ScrapeCollector};
use self::watch::Watch;
use crate::record::{Kind, Record};
use crate::source::{LiveLookup, LookupError, ObjectSource};

/// Why the cluster source could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig file could not be read or parsed.
    #[error("cannot use kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file given.
        path: String,
        /// What was wrong with it.
        #[source]
        source: ::kube::config::KubeconfigError,
    },
    /// No kubeconfig was given and warrant is not running in a pod.
    #[error(
        "no --kubeconfig given and not running in a pod (in-cluster configuration failed: {0}); pass --kubeconfig PATH"
    )]
    InCluster(#[source] ::kube::config::InClusterError),
    /// The client could not be built from the configuration (TLS material, proxy).
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] ::kube::Error),
    /// [`KubeSource::start`] was called outside a tokio runtime.
    #[error("the cluster cache must be started inside a tokio runtime")]
    NoRuntime,
}

/// Builds the client warrant reaches its cluster with: from the kubeconfig file at `path` (its
/// current context), or, without one, from the in-cluster configuration of the pod warrant runs
/// in (its service account token and CA). The server calls this for `--kubeconfig`.
pub async fn cluster_client(kubeconfig: Option<&Path>) -> Result<::kube::Client, KubeError> {
    let config = match kubeconfig {
        Some(path) => {
            let invalid = |source| KubeError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let file = ::kube::config::Kubeconfig::read_from(path).map_err(invalid)?;
            ::kube::Config::from_custom_kubeconfig(
                file,
                &::kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(invalid)?
        }
        None => ::kube::Config::incluster().map_err(KubeError::InCluster)?,
    };
    ::kube::Client::try_from(config).map_err(KubeError::Client)
}

/// Tuning for [`KubeSource`]. The defaults suit a large cluster; tests shrink them.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// Objects per list page (default 500, as client-go and kube-runtime use): the most full
    /// pods held at once while listing.
    pub page_size: u32,
    /// The most live GETs in flight at once (default 16). A burst of reviews for deleted pods
    /// becomes at most this many concurrent GETs; the rest wait, within their timeout, up to
    /// eight times this many; past that a lookup fails at once as unavailable.
    pub live_get_limit: usize,
    /// How long a live GET may take, waiting for its turn included (default 5 s), before the
    /// lookup fails as unavailable. Callers (kube-apiserver's webhook client) wait 10 s at most.
    pub live_get_timeout: Duration,
    /// `timeoutSeconds` of each watch request (default: kube-runtime's 290 s); the watcher
    /// resumes from its resourceVersion when the server ends it.
    pub watch_timeout: Option<u32>,
    /// How long a kind may go without a word from the API server (an event, a bookmark, a list
    /// page) before its cached records are no longer trusted: past it, its lookups go to the API
    /// server as misses do, and the source is not ready. Default: no bound, as kube-apiserver.
    /// Bookmarks arrive about once a minute, so a bound under two minutes flaps on a quiet,
    /// healthy cluster.
    pub max_staleness: Option<Duration>,
    /// The clock staleness is measured with (default: tokio's).
    pub clock: CacheClock,
    /// Whether Secrets are watched (default: yes). Watching them takes cluster-wide `list` and
    /// `watch` on `secrets`, which RBAC cannot limit to metadata; without it, Secret-bound
    /// tokens cannot be checked, so the server refuses them (`--disable-secret-binding`).
    pub watch_secrets: bool,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            page_size: 500,
            live_get_limit: 16,
            live_get_timeout: Duration::from_secs(5),
            watch_timeout: None,
            max_staleness: None,
            clock: CacheClock::default(),
            watch_secrets: true,
        }
    }
}

/// The cluster source: watches, the records they keep, and the live GET behind them.
///
/// Dropping it (or [`KubeSource::shutdown`]) stops its tasks.
pub struct KubeSource {
    kinds: Arc<Kinds>,
    live: Arc<LiveGets>,
    // Not an owned task handle like the other background tasks: the same token also fails the
    // live GETs in flight (shared with the fetcher), and `shutdown` waits for every watch to end.
    cancel: CancellationToken,
    tasks: TaskTracker,
}

impl KubeSource {
    /// Starts watching the cluster `client` reaches, with default options. See
    /// [`KubeSource::start_with`].
    pub fn start(client: ::kube::Client, registry: &mut Registry) -> Result<Self, KubeError> {
        Self::start_with(client, registry, KubeOptions::default())
    }

    /// Starts one watch per kind on the current tokio runtime and registers the cache's metrics
    /// in `registry` (under fixed names starting `warrant_kube_`; see the table in
    /// `docs/cluster.md`). Returns at once: the source is not ready until every kind is listed.
    pub fn start_with(
        client: ::kube::Client,
        registry: &mut Registry,
        options: KubeOptions,
    ) -> Result<Self, KubeError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| KubeError::NoRuntime)?;
        let watch_secrets = options.watch_secrets;
        let kinds = Arc::new(Kinds::new(
            options.clock.clone(),
            options.max_staleness,
            |kind| kind != Kind::Secret || watch_secrets,
        ));
        let metrics = Arc::new(Metrics::default());
        metrics.register(registry);
        registry.register_collector(Box::new(ScrapeCollector(kinds.clone())));

        // Every request goes through the observer, so watch lines (bookmarks included) count as
        // signs of life for staleness.
        let observed = ::kube::Client::new(
            activity::Observed {
                client: client.clone(),
                kinds: kinds.clone(),
            },
            client.default_namespace().to_owned(),
        );
        let cancel = CancellationToken::new();
        let mut config = watcher::Config::default().page_size(options.page_size);
        if let Some(timeout) = options.watch_timeout {
            config = config.timeout(timeout);
        }

        let tasks = TaskTracker::new();
        for kind in kinds.watched().map(|state| state.kind) {
            let watch = Watch {
                kind,
                kinds: kinds.clone(),
                metrics: metrics.clone(),
                cancel: cancel.clone(),
                config: config.clone(),
            };
            tasks.spawn_on(watch.run(observed.clone()), &runtime);
        }
        tasks.close();
        let live = Arc::new(LiveGets::new(
            observed,
            options.live_get_limit,
            options.live_get_timeout,
            metrics,
            runtime,
            cancel.clone(),
        ));
        Ok(KubeSource {
            kinds,
            live,
            cancel,
            tasks,
        })
    }

    /// A counter that moves after every change the watches make to the cache, every sign of
    /// life from the API server (a bookmark) and every watch error, so callers wait for a
    /// condition instead of polling on a timer.
    pub fn changes(&self) -> notify::Receiver<u64> {
        self.kinds.changes.subscribe()
    }

    /// Waits until every kind has been listed once. Bound it with `tokio::time::timeout`.
    pub async fn wait_ready(&self) {
        let mut changes = self.changes();
        while !self.ready() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Time since the API server last sent anything about `kind`: a watch event, a bookmark or
    /// a list page (since the source started, if nothing yet). The metric
    /// `warrant_kube_watch_staleness_seconds` reports the same.
    pub fn staleness(&self, kind: Kind) -> Duration {
        self.kinds.staleness(kind)
    }

    /// When the API server last sent anything about `kind` (see [`KubeSource::staleness`]), on
    /// tokio's clock.
    pub fn last_heard(&self, kind: Kind) -> tokio::time::Instant {
        self.kinds.last_heard(kind)
    }

    /// Stops the watches and waits for their tasks to end. Live GETs in flight fail as
    /// unavailable. Lookups keep answering from what is in memory.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tasks.wait().await;
    }
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl std::fmt::Debug for KubeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSource")
            .field("ready", &self.ready())
            .finish_non_exhaustive()
    }
}

impl ObjectSource for KubeSource {
    fn cached(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Record>> {
        if self.kinds.past_bound(kind).is_some() {
            // Too stale to trust: a miss, so the caller asks the API server.
            return None;
        }
        let namespace = if kind.namespaced() { namespace } else { "" };
        self.kinds.get(kind).store.get(namespace, name)
    }

    fn live<'a>(&'a self, kind: Kind, namespace: &'a str, name: &'a str) -> LiveLookup<'a> {
        if !self.kinds.get(kind).watched {
            // Not watched because warrant may not read them: a GET would be refused too.
            return Box::pin(std::future::ready(Err(LookupError::NotWatched(kind))));
        }
        let namespace = if kind.namespaced() { namespace } else { "" };
        let lookup = self.live.get(kind, namespace, name);
        let Some(staleness) = self.kinds.past_bound(kind) else {
            return lookup;
        };
        // The cache cannot stand in for the API server: say so, beside why the GET failed.
        Box::pin(async move {
            lookup.await.map_err(|live| LookupError::Stale {
                kind,
                staleness,
                live: Box::new(live),
            })
        })
    }

    fn not_ready(&self) -> Option<String> {
        let unsynced: Vec<&str> = self
            .kinds
            .watched()
            .filter(|state| !state.synced.load(Ordering::Relaxed))
            .map(|state| state.kind.resource())
            .collect();
        if !unsynced.is_empty() {
            return Some(format!(
                "not loaded yet: waiting for the first list of {}",
                unsynced.join(", ")
            ));
        }
        let bound = self.kinds.max_staleness()?;
        let stale: Vec<String> = Kind::ALL
            .into_iter()
            .filter_map(|kind| {
                let staleness = self.kinds.past_bound(kind)?;
                Some(format!("{} for {}s", kind.resource(), staleness.as_secs()))
            })
            .collect();
        (!stale.is_empty()).then(|| {
            format!(
                "stale: nothing from the API server about {} (the bound is {}s)",
                stale.join(", "),
                bound.as_secs()
            )
        })
    }

    fn count(&self, kind: Kind) -> usize {
        self.kinds.get(kind).store.len()
    }
}
