//! How `serve` hands its key sets to the server: the managed set merged with static
//! verification keys, each kept current by its own watcher, and told to the discovery
//! publisher.

use std::sync::{Arc, Mutex};

use warrant_keys::{KeyMetrics, KeySet};
use warrant_server::AppState;
use warrant_token::VerifyingKey;

/// Hands key sets to the server: the managed set merged with static verification keys, each
/// kept current by its own watcher.
pub(super) struct Sink {
    state: AppState,
    /// `--publish-discovery`'s publisher hears of each key set here.
    feed: Option<tokio::sync::watch::Sender<Arc<warrant_issuer::Published>>>,
    metrics: KeyMetrics,
    current: Mutex<Current>,
}

struct Current {
    /// The managed keys as the manager last published them (without the static ones).
    managed: Option<KeySet>,
    /// The static verification keys published beside them.
    extra: Vec<VerifyingKey>,
}

impl Sink {
    /// A sink for `state`, starting from the `managed` keys and the static `extra` ones.
    pub(super) fn new(
        state: AppState,
        feed: Option<tokio::sync::watch::Sender<Arc<warrant_issuer::Published>>>,
        metrics: KeyMetrics,
        managed: Option<KeySet>,
        extra: Vec<VerifyingKey>,
    ) -> Self {
        Sink {
            state,
            feed,
            metrics,
            current: Mutex::new(Current { managed, extra }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn publish_static(&self, keys: KeySet) {
        self.metrics.published(&keys);
        self.state.issuer().set_keys(keys);
        self.feed_publisher();
    }

    fn feed_publisher(&self) {
        if let Some(feed) = &self.feed {
            feed.send_replace(self.state.issuer().published());
        }
    }

    pub(super) fn set_managed(&self, keys: KeySet) {
        let mut current = self.lock();
        let unchanged = current
            .managed
            .as_ref()
            .is_some_and(|m| m.same_snapshot(&keys));
        current.managed = Some(keys);
        if !unchanged {
            self.publish_merged(&current);
        }
    }

    /// With `--jwks-x5c`, makes the certificates of keys held in an HSM or KMS (their
    /// signatures awaited, off this call) and hands the documents to the publish targets again
    /// once they are in the JWKS.
    pub(super) fn certify_held(sink: &Arc<Sink>) {
        if !sink.state.issuer().settings().jwks_x5c {
            return;
        }
        let sink = sink.clone();
        tokio::spawn(async move {
            if sink.state.issuer().certify_held_keys().await {
                sink.feed_publisher();
            }
        });
    }

    pub(super) fn set_extra(&self, extra: Vec<VerifyingKey>) {
        let mut current = self.lock();
        if current.extra == extra {
            return;
        }
        current.extra = extra;
        self.publish_merged(&current);
    }

    fn publish_merged(&self, current: &Current) {
        if let Some(managed) = &current.managed {
            say_revoked_in_files(managed, &current.extra);
            let keys = managed.clone().with_extra_verifying(&current.extra);
            self.metrics.published(&keys);
            self.state.issuer().set_keys(keys);
            self.feed_publisher();
        }
    }
}

/// Logs each key a `--service-account-key-file` offers that was revoked in the managed store:
/// it stays out of the key set for good (a revocation is never forgotten), but the file
/// should not offer it.
pub(super) fn say_revoked_in_files(managed: &KeySet, extra: &[VerifyingKey]) {
    for kid in managed.revoked_among(extra) {
        tracing::error!(
            %kid,
            "a --service-account-key-file offers a revoked key; it stays out of the key set for good: take it out of the file"
        );
    }
}
