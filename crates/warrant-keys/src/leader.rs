//! Leader election through a coordination.k8s.io Lease, so that of all the replicas sharing a
//! key Secret exactly one generates and rotates keys ([`crate::Writer::WhileLeader`]).
//!
//! kube-lease-manager runs the election: a replica takes a free or expired Lease with a
//! server-side apply (which the API server refuses if another replica took it first), renews it
//! `duration / 3` before it expires, and releases it when it stops, so a successor takes over at
//! once instead of after the Lease expires. A replica that cannot reach the API server keeps
//! believing it leads until it hears otherwise; that is safe, because leadership only decides who
//! *tries* to write: every write carries the Secret's `resourceVersion`, so a stale leader's write
//! is refused rather than lost, and a replica cut off from the API server cannot write at all.
//!
//! kube-lease-manager reads the wall clock itself for the Lease's expiry; this is the one place
//! where warrant's timing is not driven by Tokio's clock, so tests of the Lease run in real time
//! with short durations.

use std::future::Future;
use std::time::Duration;

use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::metrics::KeyMetrics;

/// The shortest Lease duration: kube-lease-manager renews a whole second before expiry.
pub const MIN_LEASE_SECONDS: u64 = 2;
/// How long a stopping replica waits for its Lease to be released.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// How soon a replica that could not join the election retries, at first and at most.
const JOIN_RETRY_FIRST: Duration = Duration::from_secs(1);
const JOIN_RETRY_MAX: Duration = Duration::from_secs(30);

/// Which Lease, who is asking, and for how long a holder keeps it without renewing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity in `spec.holderIdentity`: unique among the replicas (a pod name).
    pub identity: String,
    /// How long the Lease stays with a holder that stopped renewing, in whole seconds (at least
    /// [`MIN_LEASE_SECONDS`]). The holder renews it a third of this before it expires.
    pub duration_seconds: u64,
}

impl LeaseConfig {
    /// How long before expiry the holder renews: a third of the duration (5 s of 15 s, as
    /// client-go's leader election renews a 15 s lease after 10 s), at least a second.
    pub fn renew_before_seconds(&self) -> u64 {
        self.duration_seconds.div_ceil(3).max(1)
    }
}

/// Why the election could not start.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The Lease duration is too short.
    #[error("the key Lease duration must be at least {MIN_LEASE_SECONDS}s, not {0}s")]
    Duration(u64),
    /// The identity is empty.
    #[error("the key Lease holder identity must not be empty")]
    Identity,
    /// The Lease could not be read or created.
    #[error("cannot use Lease {namespace}/{name}: {source}")]
    Lease {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What failed.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    /// Not inside a Tokio runtime.
    #[error("leader election must run inside a Tokio runtime")]
    NoRuntime,
}

/// Who holds a Lease, as its spec says: what `warrant keys list` shows as the writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// `spec.holderIdentity`; `None` while nobody holds it (released).
    pub identity: Option<String>,
    /// `spec.renewTime`: when the holder last renewed it.
    pub renewed_at: Option<jiff::Timestamp>,
    /// `spec.leaseDurationSeconds`: how long after that renewal it stays the holder's.
    pub duration_seconds: Option<i32>,
}

impl LeaseHolder {
    /// Reads the Lease `namespace/name`: `Ok(None)` if it does not exist.
    pub async fn read(
        client: kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Option<LeaseHolder>, kube::Error> {
        let api: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(client, namespace);
        let Some(lease) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let spec = lease.spec.unwrap_or_default();
        Ok(Some(LeaseHolder {
            identity: spec.holder_identity.filter(|h| !h.is_empty()),
            renewed_at: spec.renew_time.map(|t| t.0),
            duration_seconds: spec.lease_duration_seconds,
        }))
    }

    /// True if the holder's term has run out at `now` (it stopped renewing: another replica may
    /// take the Lease), or nobody holds it.
    pub fn expired_at(&self, now: jiff::Timestamp) -> bool {
        match (&self.identity, self.renewed_at, self.duration_seconds) {
            (Some(_), Some(renewed), Some(seconds)) => {
                now.as_second() >= renewed.as_second().saturating_add(i64::from(seconds))
            }
            _ => true,
        }
    }
}

/// Refuses a configuration the election cannot run with.
fn check(config: &LeaseConfig) -> Result<(), LeaseError> {
    if config.duration_seconds < MIN_LEASE_SECONDS {
        return Err(LeaseError::Duration(config.duration_seconds));
    }
    if config.identity.is_empty() {
        return Err(LeaseError::Identity);
    }
    Ok(())
}

/// kube-lease-manager's manager for the Lease of `config`, which it reads (or creates) now.
async fn lease_manager(
    client: kube::Client,
    config: &LeaseConfig,
) -> Result<LeaseManager, LeaseError> {
    // LeaseParams::new panics on a zero duration or a renewal not shorter than the duration;
    // `check` excludes both.
    let params = LeaseParams::new(
        config.identity.clone(),
        config.duration_seconds,
        config.renew_before_seconds(),
    );
    LeaseManager::new(
        client,
        &config.name,
        &config.namespace,
        params,
        LeaseCreateMode::AutoCreate,
    )
    .await
    .map_err(|source| LeaseError::Lease {
        namespace: config.namespace.clone(),
        name: config.name.clone(),
        source,
    })
}

/// A replica's part in the election. [`leading`](Self::leading) says whether it holds the Lease
/// now; [`release`](Self::release) gives it up and waits until it is released. Dropping it also
/// stops taking part, releasing the Lease in the background.
#[derive(Debug)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
    /// Tells the task to stop (the stop idiom of every task warrant runs).
    stop: CancellationToken,
    task: AbortOnDropHandle<()>,
}

impl Leadership {
    /// Joins the election for the Lease of `config` (creating the Lease if it does not exist),
    /// and keeps taking part in a task. Not leading at first: that is known within a request or
    /// two. `metrics` show whether this replica leads. Fails if the Lease cannot be read or
    /// created now.
    pub async fn start(
        client: kube::Client,
        config: &LeaseConfig,
        metrics: KeyMetrics,
    ) -> Result<Self, LeaseError> {
        check(config)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| LeaseError::NoRuntime)?;
        let manager = lease_manager(client, config).await?;
        Ok(Self::spawn(&runtime, config, metrics, async move {
            Some(manager)
        }))
    }

    /// As [`start`](Self::start), without waiting for the API server: the Lease is read (or
    /// created) in the task, retried with a backoff (1 s, doubling to 30 s) until it answers.
    /// For a replica that must start while the API server cannot be reached (a control-plane
    /// node's signer starting from its local copy); it does not lead before then.
    pub fn start_in_background(
        client: kube::Client,
        config: &LeaseConfig,
        metrics: KeyMetrics,
    ) -> Result<Self, LeaseError> {
        check(config)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| LeaseError::NoRuntime)?;
        let joining = config.clone();
        Ok(Self::spawn(&runtime, config, metrics, async move {
            let mut backoff = JOIN_RETRY_FIRST;
            let mut said = false;
            loop {
                match lease_manager(client.clone(), &joining).await {
                    Ok(manager) => {
                        if said {
                            tracing::info!(lease = %format!("{}/{}", joining.namespace, joining.name), "the key Lease can be used again: this replica takes part in the election");
                        }
                        return Some(manager);
                    }
                    Err(error) if !said => {
                        said = true;
                        tracing::warn!(%error, "cannot take part in the key Lease's election yet (this replica writes no keys meanwhile); retrying");
                    }
                    Err(error) => {
                        tracing::debug!(%error, "cannot take part in the key Lease's election yet; retrying")
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(JOIN_RETRY_MAX);
            }
        }))
    }

    /// Takes part in the election in a task, with the Lease manager `joined` gives.
    fn spawn(
        runtime: &tokio::runtime::Handle,
        config: &LeaseConfig,
        metrics: KeyMetrics,
        joined: impl Future<Output = Option<LeaseManager>> + Send + 'static,
    ) -> Self {
        let (sender, leading) = watch::channel(false);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let lease = format!("{}/{}", config.namespace, config.name);
        let identity = config.identity.clone();
        metrics.leader(false);
        let task = runtime.spawn(async move {
            // Stopped before it could join: there is no Lease to release.
            let manager = tokio::select! {
                manager = joined => manager,
                () = stopped.cancelled() => None,
            };
            let Some(manager) = manager else { return };
            let (mut inner, handle) = manager.watch().await;
            loop {
                let now_leading = *inner.borrow_and_update();
                if sender.send_if_modified(|was| std::mem::replace(was, now_leading) != now_leading)
                {
                    metrics.leader(now_leading);
                    if now_leading {
                        tracing::info!(%lease, %identity, "this replica now holds the key Lease: it writes and rotates the keys");
                    } else {
                        tracing::info!(%lease, %identity, "this replica no longer holds the key Lease: it follows the keys the leader writes");
                    }
                }
                tokio::select! {
                    changed = inner.changed() => {
                        if changed.is_err() {
                            tracing::error!(%lease, "leader election stopped unexpectedly; this replica no longer writes the keys");
                            break;
                        }
                    }
                    () = stopped.cancelled() => {
                        // Closing the channel makes kube-lease-manager release the Lease.
                        drop(inner);
                        sender.send_replace(false);
                        metrics.leader(false);
                        match tokio::time::timeout(RELEASE_TIMEOUT, handle).await {
                            Ok(Ok(Ok(_))) => tracing::info!(%lease, "released the key Lease"),
                            Ok(Ok(Err(error))) => tracing::warn!(%lease, %error, "could not release the key Lease; another replica takes it once it expires"),
                            Ok(Err(_)) | Err(_) => tracing::warn!(%lease, "could not release the key Lease in time; another replica takes it once it expires"),
                        }
                        return;
                    }
                }
            }
            sender.send_replace(false);
            metrics.leader(false);
        });
        Leadership {
            leading,
            stop,
            task: AbortOnDropHandle::new(task),
        }
    }

    /// Follows whether this replica leads: what [`crate::Writer::WhileLeader`] takes.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// True while this replica holds the Lease.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Stops taking part and releases the Lease (if held), so another replica takes over at once.
    /// Waits a few seconds at most.
    pub async fn release(self) {
        let Leadership { stop, task, .. } = self;
        stop.cancel();
        // Once asked to stop, the task finishes releasing the Lease even if this wait is
        // abandoned: from here it is not aborted.
        let _ = task.detach().await;
    }
}
