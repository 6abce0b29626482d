//! Prometheus metrics for the keys (prefix `warrant_keys_`). Labels come from small fixed sets.

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::KeySet;
use crate::lifecycle::{KeySchedule, KeyState};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// The state label of static verification-only keys (`--service-account-key-file`), which
/// have no lifecycle.
const STATIC_VERIFYING: &str = "verifying";

/// The keys' metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone, Default)]
pub struct KeyMetrics {
    generation: Gauge,
    last_rotation: Gauge,
    next_change: Gauge,
    held: Family<StateLabels, Gauge>,
    store_errors: Family<OperationLabels, Counter>,
    store_rollbacks: Family<ReasonLabels, Counter>,
    store_stale_since: Gauge,
    leader: Gauge,
    activations_held: Counter,
    disposals: Family<ResultLabels, Counter>,
    disposals_pending: Gauge,
}

impl KeyMetrics {
    /// New metrics, not registered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the metrics into the server's registry, named `warrant_keys_…`. Call it once
    /// per registry.
    pub fn register(&self, registry: &mut Registry) {
        self.register_as(registry, "warrant_keys");
    }

    /// Registers the metrics named `<prefix>_…`: for a second managed key set in the same
    /// process (the pod certificate CA's, `warrant_podcert_ca_keys_…`), whose names must not
    /// collide with the token keys'.
    pub fn register_as(&self, registry: &mut Registry, prefix: &str) {
        // Events that alerts watch are exported at 0 from the start, so that the first one is
        // an increase.
        for reason in crate::rollback::Rollback::REASONS {
            drop(self.store_rollbacks.get_or_create(&ReasonLabels { reason }));
        }
        drop(self.disposals.get_or_create(&ResultLabels {
            result: "not_the_key",
        }));
        registry.register(
            format!("{prefix}_activations_held"),
            "Times the activation gate held a key back because a publish target did not list it yet (--publish-discovery)",
            self.activations_held.clone(),
        );
        registry.register(
            format!("{prefix}_generation"),
            "Key sets published by this process: 1 at startup, plus 1 at every change of keys or schedule",
            self.generation.clone(),
        );
        registry.register(
            format!("{prefix}_last_rotation_timestamp_seconds"),
            "When the key that signs now started signing (managed keys) or was loaded (static keys)",
            self.last_rotation.clone(),
        );
        registry.register(
            format!("{prefix}_next_change_timestamp_seconds"),
            "When the published key set next changes on schedule (0 for static keys)",
            self.next_change.clone(),
        );
        registry.register(
            format!("{prefix}_held"),
            "Published keys by state: next, active, retired (managed), verifying (static key files)",
            self.held.clone(),
        );
        registry.register(
            format!("{prefix}_store_errors"),
            "Failed key store operations, by operation (load, save, watch)",
            self.store_errors.clone(),
        );
        registry.register(
            format!("{prefix}_store_rollbacks"),
            "Reads of the key store refused because it held an older key set than one seen before, by reason: revoked_key_listed, revocation_dropped, generation_back (the writer writes the newer set back)",
            self.store_rollbacks.clone(),
        );
        registry.register(
            format!("{prefix}_store_stale_since_timestamp_seconds"),
            "When the key store began to fail (reads or writes), so the keys in force may be stale; 0 while it answers",
            self.store_stale_since.clone(),
        );
        registry.register(
            format!("{prefix}_holder_disposals"),
            "Attempts to destroy a held key (an HSM's) that signs or verifies no more, by result: destroyed, gone (nothing left to destroy), not_the_key (the object is not the recorded key: left alone), failed (retried)",
            self.disposals.clone(),
        );
        registry.register(
            format!("{prefix}_holder_disposals_pending"),
            "Held keys that must be destroyed (retired, revoked, removed) and could not be yet: retried until they are gone",
            self.disposals_pending.clone(),
        );
        registry.register(
            format!("{prefix}_leader"),
            "Whether this replica holds the key Lease (Kubernetes Secret store), and so writes and rotates the keys: 1 or 0",
            self.leader.clone(),
        );
    }

    /// Counts a key set handed to the server (whoever publishes it: the key manager's owner,
    /// a static key watcher's), and records when it next changes.
    pub fn published(&self, keys: &KeySet) {
        self.generation.inc();
        self.next_change
            .set(keys.next_change().map_or(0, Timestamp::as_second));
    }

    /// Records the states of managed keys.
    pub(crate) fn managed(&self, schedule: &[KeySchedule]) {
        for state in [KeyState::Next, KeyState::Active, KeyState::Retired] {
            let count = schedule.iter().filter(|k| k.state == state).count();
            self.held
                .get_or_create(&StateLabels {
                    state: state.name(),
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        if let Some(active) = schedule.iter().find(|k| k.state == KeyState::Active) {
            self.last_rotation.set(active.activate_at.as_second());
        }
    }

    /// Records static keys: the signing key, if static keys sign (beside managed keys they only
    /// verify), and `verifying` verification-only keys.
    pub(crate) fn static_keys(&self, signing: bool, verifying: usize) {
        if signing {
            self.held
                .get_or_create(&StateLabels {
                    state: KeyState::Active.name(),
                })
                .set(1);
        }
        self.held
            .get_or_create(&StateLabels {
                state: STATIC_VERIFYING,
            })
            .set(i64::try_from(verifying).unwrap_or(i64::MAX));
    }

    /// Records that the signing key changed (static keys) at `now`.
    pub(crate) fn signing_key_loaded(&self, now: Timestamp) {
        self.last_rotation.set(now.as_second());
    }

    /// Records how the store fares (see [`crate::StoreHealth`]).
    pub(crate) fn store_health(&self, health: &crate::StoreHealth) {
        self.store_stale_since
            .set(health.failing_since.map_or(0, Timestamp::as_second));
    }

    /// Records whether this replica holds the key Lease.
    pub(crate) fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts a key held back by the activation gate.
    pub(crate) fn activation_held(&self) {
        self.activations_held.inc();
    }

    /// Counts an attempt to destroy a held key, by result.
    pub(crate) fn disposed(&self, result: &'static str) {
        self.disposals.get_or_create(&ResultLabels { result }).inc();
    }

    /// Records how many held keys are still to be destroyed.
    pub(crate) fn disposals_pending(&self, pending: usize) {
        self.disposals_pending
            .set(i64::try_from(pending).unwrap_or(i64::MAX));
    }

    /// Counts a read of the store refused as a rollback, by reason (see `rollback.rs`).
    pub(crate) fn store_rollback(&self, reason: &'static str) {
        self.store_rollbacks
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// Counts a failed store operation: `load`, `save` or `watch`.
    pub(crate) fn store_error(&self, operation: &'static str) {
        self.store_errors
            .get_or_create(&OperationLabels { operation })
            .inc();
    }
}
