//! The running key manager: a task that keeps the keys current and publishes each change.
//!
//! It wakes at the next scheduled change ([`ManagedKeySet::next_change`]), when the store says
//! it changed (another writer, `warrant keys rotate`), and when leadership changes; never by
//! polling faster than that (it re-reads the store every few minutes as a safety net). Sleeping
//! uses Tokio's clock, so a test with paused time drives it; the wall time comes from the clock
//! function the owner passes in, and a wake-up that comes early (the two clocks drift) just
//! finds nothing due and sleeps again.
//!
//! [`ManagedKeySet::next_change`]: crate::ManagedKeySet::next_change

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::task::AbortOnDropHandle;
use warrant_clock::Clock;

use super::{ActivationGate, KeyManager, ManagerError, RESYNC, RETRY};
use crate::KeySet;
use crate::lifecycle::{KeySchedule, KeyState, Revocation};
use crate::store::{ChangeFeed, KeyStore, StoreError};

impl<S: KeyStore> KeyManager<S> {
    /// Starts keeping the keys current in a task: `publish` receives every new [`KeySet`]
    /// (including the first, at once); `clock` gives the wall time. Must be called within a
    /// Tokio runtime. The task stops when the returned handle is dropped.
    pub fn spawn<P>(self, clock: Clock, publish: P) -> Result<KeyManagerTask, ManagerError>
    where
        P: Fn(KeySet) + Send + Sync + 'static,
    {
        let feed = match self.store.watch() {
            Ok(feed) => feed,
            Err(error) => {
                self.metrics.store_error("watch");
                tracing::warn!(%error, "cannot watch the key store for changes; re-reading it every {}s instead", RESYNC.as_secs());
                ChangeFeed::never()
            }
        };
        let task = tokio::runtime::Handle::try_current()
            .map_err(|_| StoreError::Unavailable {
                store: self.store.describe(),
                reason: "cannot manage keys outside a Tokio runtime".into(),
            })?
            .spawn(self.run(feed, clock, publish));
        Ok(KeyManagerTask {
            _task: AbortOnDropHandle::new(task),
        })
    }

    async fn run<P>(mut self, mut feed: ChangeFeed, clock: Clock, publish: P)
    where
        P: Fn(KeySet),
    {
        let mut published: Option<KeySet> = None;
        // Nothing is written on the strength of a read that failed: a replica that cannot
        // read the store never generates a key for it.
        let mut read_failed = std::mem::take(&mut self.unread);
        loop {
            let now = clock.now();
            let mut failed = read_failed;
            if self.writer.may_write() && !read_failed {
                match self.sync(now).await {
                    Ok(true) => self.store_answered(now),
                    Ok(false) => {}
                    Err(error) => {
                        failed = true;
                        self.store_failed(now, &error, "cannot update the managed keys; the keys in force stay until it succeeds");
                    }
                }
                match self.hold_unlisted(now).await {
                    Ok(true) => self.store_answered(now),
                    Ok(false) => {}
                    Err(error) => {
                        failed = true;
                        self.store_failed(now, &error, "cannot hold back a key the publish targets do not list yet: it will sign at its activation time regardless");
                    }
                }
            }
            if let Some(keys) = self.key_set(now) {
                let changed = published.as_ref().is_none_or(|p| !p.same_snapshot(&keys));
                if changed {
                    publish(keys.clone());
                    published = Some(keys);
                }
            }
            self.observe(now);

            let wake = self.wake_after(now, failed);
            tokio::select! {
                () = tokio::time::sleep(wake) => {}
                () = feed.changed() => {}
                () = self.writer.changed() => {}
                () = gate_changed(&mut self.gate) => {}
            }
            // Whatever woke us, act on the store as it is now: another writer may have been
            // first, and a missed change notification is caught at the next wake-up at the latest.
            let now = clock.now();
            read_failed = match self.reload().await {
                Ok(()) => {
                    self.store_answered(now);
                    false
                }
                Err(error) => {
                    self.store_failed(
                        now,
                        &error,
                        "cannot re-read the key store; the keys in force stay until it succeeds",
                    );
                    true
                }
            };
        }
    }

    /// How long to sleep after looking at `now`.
    fn wake_after(&self, now: Timestamp, failed: bool) -> Duration {
        let writes = self.writer.may_write() && !failed;
        let next = if writes {
            let gate = self
                .gate
                .as_ref()
                .and_then(|_| self.keys.next_gate_check(&self.policy, now));
            let disposal = self
                .store
                .holder()
                .and_then(|_| self.disposals.next_due(&self.keys, now));
            [self.keys.next_change(now, &self.policy), gate, disposal]
                .into_iter()
                .flatten()
                .min()
        } else {
            // A replica that does not write hears of the writer's changes from the store's
            // change feed; it also re-reads the store when the writer is due to create a
            // successor, and every RETRY after that until it sees one, so it learns of a new key
            // within FOLLOW_LAG_SECONDS even if no notification comes.
            self.keys.next_change(now, &self.policy)
        };
        let until = match next {
            Some(t) if t <= now && !writes => RETRY,
            // A change already due (negative) means at once.
            Some(t) => Duration::try_from(now.duration_until(t)).unwrap_or(Duration::ZERO),
            None => RESYNC,
        };
        let until = until.min(RESYNC);
        // Wake just after the change (timestamps are whole seconds; the sleep is not).
        let until = until.saturating_add(Duration::from_millis(1));
        // A key that must be destroyed and could not be yet is tried again soon.
        let retry = failed || (self.writer.may_write() && self.disposals.pending());
        if retry { until.min(RETRY) } else { until }
    }

    /// Logs every key's transitions since the last look and records metrics.
    pub(super) fn observe(&mut self, now: Timestamp) {
        let schedule = self.keys.schedule(now);
        log_transitions(&self.seen, &schedule, self.keys.revocations(), now);
        self.seen = schedule
            .iter()
            .map(|k| (k.kid.clone(), k.clone()))
            .collect();
        self.metrics.managed(&schedule);
    }
}

fn log_transitions(
    before: &HashMap<String, KeySchedule>,
    after: &[KeySchedule],
    revoked: &[Revocation],
    now: Timestamp,
) {
    for key in after {
        let previous = before.get(&key.kid).map(|k| k.state);
        if previous == Some(key.state) {
            continue;
        }
        let time = |t: Option<Timestamp>| t.map_or_else(|| "-".to_owned(), |t| t.to_string());
        match key.state {
            KeyState::Next => tracing::info!(
                kid = %key.kid, alg = %key.algorithm, activate_at = %key.activate_at,
                "key published; it starts signing at its activation time"
            ),
            KeyState::Active => tracing::info!(
                kid = %key.kid, alg = %key.algorithm, retire_at = %time(key.retire_at),
                "key is now signing"
            ),
            KeyState::Retired => tracing::info!(
                kid = %key.kid, remove_at = %time(key.remove_at),
                "key retired: it verifies tokens until its removal time, and signs no more"
            ),
            KeyState::Removed => tracing::info!(
                kid = %key.kid,
                "key removed from the published keys: every token it signed has expired"
            ),
        }
    }
    for (kid, key) in before {
        if after.iter().any(|k| &k.kid == kid) {
            continue;
        }
        if let Some(revocation) = revoked.iter().find(|r| &r.kid == kid) {
            tracing::error!(
                kid = %kid, state = %key.state, revoked_at = %revocation.revoked_at,
                "KEY REVOKED: removed from the published keys; every token it signed is refused from now on"
            );
        } else if key.remove_at.is_some_and(|t| t <= now) {
            if key.state != KeyState::Removed {
                tracing::info!(
                    kid = %kid,
                    "key removed from the published keys: every token it signed has expired"
                );
            }
        } else {
            tracing::error!(
                kid = %kid, state = %key.state,
                "key left the key store before its removal time: tokens it signed that are still live will fail verification"
            );
        }
    }
}

/// Completes when what the publish targets list changes; never without a gate (or once its
/// publisher is gone).
async fn gate_changed(gate: &mut Option<ActivationGate>) {
    if let Some(gate) = gate
        && gate.changed().await.is_ok()
    {
        return;
    }
    std::future::pending::<()>().await
}

/// The running key manager; dropping it stops it.
#[derive(Debug)]
pub struct KeyManagerTask {
    _task: AbortOnDropHandle<()>,
}
