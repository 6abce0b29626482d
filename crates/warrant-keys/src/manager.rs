//! The key manager: owns a [`KeyStore`] in a running server, rotates the keys on schedule when
//! this process may write, and publishes every change of the keys in force.
//!
//! Failures never take keys away: if the store cannot be read or written, the last keys known
//! stay in force (their schedule still advances by time alone: a successor already in the set
//! activates on time), the error is logged and counted, and the manager retries.
//!
//! Here: the manager, what it holds and answers, and how it takes what a read of the store
//! gives (a rolled-back store refused: see `rollback.rs`). Opening it (from the store, or from
//! a local copy while the store cannot be reached) is in `open.rs`, the running task that
//! wakes, re-reads and publishes in `run.rs`, the writes it makes as the store's writer in
//! `write.rs`, and how the store has answered lately in `health.rs`.

use std::collections::HashMap;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use warrant_token::KeyError;

use crate::disposal::Disposals;
use crate::lifecycle::{KeySchedule, ManagedKeySet, PolicyError, RotationPolicy};
use crate::metrics::KeyMetrics;
use crate::rollback::{self, Rollback};
use crate::store::{KeyStore, StoreError, StoreVersion, Stored};
use crate::{KeySet, ListedKeys};

mod health;
mod open;
mod run;
mod write;

pub use health::StoreHealth;
pub(crate) use health::at_ago;
pub use open::Seed;
pub use run::KeyManagerTask;

/// How often the store is re-read even if no change was signalled.
const RESYNC: Duration = Duration::from_secs(300);
/// How soon a failed read or write is retried.
const RETRY: Duration = Duration::from_secs(10);
/// How many times a write that lost to another writer is recomputed before giving up for now.
const CONFLICT_ATTEMPTS: usize = 5;

/// Whether this process writes the store.
#[derive(Debug, Clone)]
pub enum Writer {
    /// Always: a directory, where concurrent writers are safe (see [`DirStore`](crate::DirStore)).
    Always,
    /// While the value is `true`: the holder of a leader lease, for a store that every replica
    /// reads but one writes.
    WhileLeader(watch::Receiver<bool>),
    /// Never: a read-only replica (or a test).
    Never,
}

impl Writer {
    /// True while this process writes the store.
    pub fn may_write(&self) -> bool {
        match self {
            Writer::Always => true,
            Writer::WhileLeader(leader) => *leader.borrow(),
            Writer::Never => false,
        }
    }

    /// Completes when [`may_write`](Self::may_write) may have changed (never for `Always` and
    /// `Never`).
    pub async fn changed(&mut self) {
        match self {
            Writer::WhileLeader(leader) => {
                if leader.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            Writer::Always | Writer::Never => std::future::pending::<()>().await,
        }
    }
}

/// The activation gate's input: the keys every place the documents are published to lists
/// in its JWKS, by kid and key material, as last read back (warrant-publish keeps it current).
/// With a gate, the manager that writes the store does not let a key start signing before the
/// set holds it (see [`ManagedKeySet::hold_unlisted`]).
pub type ActivationGate = watch::Receiver<ListedKeys>;

/// Why managed keys cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The policy is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A key could not be generated.
    #[error("cannot generate a key: {0}")]
    Key(#[from] KeyError),
    /// The store holds no key that signs, and this process may not create one.
    #[error(
        "{store} holds no active key yet, and this replica does not write it; the leader creates the keys"
    )]
    NoActiveKey {
        /// The store.
        store: String,
    },
    /// The store kept changing under every write.
    #[error("{store}: gave up writing after {CONFLICT_ATTEMPTS} conflicts with other writers")]
    Contended {
        /// The store.
        store: String,
    },
}

/// Owns a managed key store in a running server: rotates its keys on schedule when this process
/// may write, follows other writers' changes, and publishes every change of the keys in force.
/// It wakes only when something is due (or the store or leadership changes); failures keep the
/// keys in force and are retried.
pub struct KeyManager<S: KeyStore> {
    store: S,
    policy: RotationPolicy,
    writer: Writer,
    metrics: KeyMetrics,
    keys: ManagedKeySet,
    /// The version `keys` was read at or written as; `None` if the store holds nothing (or lost
    /// what it held) and `keys` must be written back.
    version: Option<StoreVersion>,
    /// Each key's schedule at the last look, by kid, for logging transitions.
    seen: HashMap<String, KeySchedule>,
    health: watch::Sender<StoreHealth>,
    /// What the store's holder (an HSM) still has to destroy, as the store's writer: retired,
    /// revoked and removed keys, until they are gone (see `disposal.rs`).
    disposals: Disposals,
    /// What the publish targets list, when keys are published beyond this process.
    gate: Option<ActivationGate>,
    /// When the local copy this manager started from was written, if it started from one
    /// (see [`open_from_copy`](Self::open_from_copy)): until the store answers, the last moment
    /// the keys were known to be the store's.
    seeded_at: Option<Timestamp>,
    /// True until the store has answered, for a manager that started from a local copy because
    /// the store could not be reached: it writes nothing before then.
    unread: bool,
    /// The highest generation of the key set read or written (see `rollback.rs`): a read
    /// numbered lower is refused.
    highest: u64,
    /// True when the store's last read was refused as older than `keys` (see `rollback.rs`):
    /// the writer writes `keys` over it.
    repair: bool,
}

impl<S: KeyStore> KeyManager<S> {
    /// Gates activations on `gate` (see [`ActivationGate`]): as the store's writer, this manager
    /// holds back a key that is due to sign within the gate's lead while the publish targets
    /// do not all list it.
    pub fn with_gate(mut self, gate: ActivationGate) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Keeps each retired key's private half in its holder until the key leaves the set (it is
    /// then destroyed whole, as every removed key is), instead of destroying it once the key
    /// stops signing: for a key set whose retired keys still sign, as a pod certificate CA's
    /// keys sign their own root certificates, which every replica makes anew when it starts and
    /// which stay published until the last certificate of their key has expired.
    pub fn keeping_retired_keys_whole(mut self) -> Self {
        self.disposals.keep_retired = true;
        self
    }

    /// The managed keys as last read or written.
    pub fn keys(&self) -> &ManagedKeySet {
        &self.keys
    }

    /// The keys in force at `now`, with their signing deadline (see
    /// [`signing_deadline`](Self::signing_deadline)).
    pub fn key_set(&self, now: Timestamp) -> Option<KeySet> {
        self.keys
            .key_set_at(now, &self.policy)
            .map(|keys| keys.with_signing_deadline(self.signing_deadline()))
    }

    /// While a store that another replica writes cannot be read: the earliest moment its writer
    /// could have retired the last key this replica knows of, had it created that key's
    /// successor the moment this replica last heard from the store (or, started from a local
    /// copy, the moment the copy was written). Tokens signed after it might be refused by the
    /// other replicas before they expire, and an HSM's writer destroys a retired key's object;
    /// so the keys sign nothing from then until the store answers (they still verify). `None`
    /// while the store answers, and for a store only this process writes.
    pub fn signing_deadline(&self) -> Option<Timestamp> {
        if !matches!(self.writer, Writer::WhileLeader(_)) {
            return None;
        }
        let health = self.health.borrow();
        health.failing_since?;
        let known = health.last_success.or(self.seeded_at)?;
        self.keys
            .successor(&self.policy, known)
            .map(|s| s.activate_at)
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Follows how the store answers (see [`StoreHealth`]), for readiness reports.
    pub fn health(&self) -> watch::Receiver<StoreHealth> {
        self.health.subscribe()
    }

    /// Re-reads the store.
    async fn reload(&mut self) -> Result<(), StoreError> {
        match self.store.load().await {
            Ok(Some(stored)) => {
                let checked =
                    rollback::check(&self.keys, self.highest, &stored.keys, stored.generation);
                let known = match checked {
                    Ok(()) => Known::read(stored),
                    Err(rollback) => {
                        // Reported each time it is read: it lasts until the writer repairs it.
                        refused(&self.store.describe(), &rollback, &self.metrics);
                        Known::refused(self.keys.clone(), self.highest, stored)
                    }
                };
                self.keys = known.keys;
                self.version = known.version;
                self.highest = known.highest;
                self.repair = known.repair;
                Ok(())
            }
            Ok(None) => {
                if !self.keys.is_empty() {
                    tracing::error!(
                        store = %self.store.describe(),
                        "the key store no longer holds the keys; still serving them from memory, and writing them back if this process writes the store"
                    );
                }
                self.version = None;
                Ok(())
            }
            Err(error) => {
                self.metrics.store_error("load");
                Err(error)
            }
        }
    }
}

impl<S: KeyStore> std::fmt::Debug for KeyManager<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyManager")
            .field("store", &self.store.describe())
            .field("policy", &self.policy)
            .field("keys", &self.keys)
            .field("version", &self.version)
            .finish()
    }
}

/// What a manager starts from, or takes after a read of the store.
struct Known {
    keys: ManagedKeySet,
    /// The version to write against; `None` if the store holds nothing.
    version: Option<StoreVersion>,
    /// The highest generation seen.
    highest: u64,
    /// True if the store holds an older key set than `keys`, to be written over.
    repair: bool,
}

impl Known {
    /// What the store holds, read as `stored`.
    fn read(stored: Stored) -> Known {
        Known {
            keys: stored.keys,
            version: Some(stored.version),
            highest: stored.generation,
            repair: false,
        }
    }

    /// `keys`, seen as generation `highest`, while the store holds nothing.
    fn nothing(keys: ManagedKeySet, highest: u64) -> Known {
        Known {
            keys,
            version: None,
            highest,
            repair: false,
        }
    }

    /// `keys`, seen as generation `highest`, kept over `stored`, an older key set the store
    /// was put back to: with every revocation `stored` has too, to be written over it.
    fn refused(keys: ManagedKeySet, highest: u64, stored: Stored) -> Known {
        Known {
            keys: keys.remembering(stored.keys.revocations()),
            version: Some(stored.version),
            highest: highest.max(stored.generation),
            repair: true,
        }
    }
}

/// Reports a read of `store` refused as older than what was seen before: an error, counted.
fn refused(store: &str, rollback: &Rollback, metrics: &KeyMetrics) {
    metrics.store_rollback(rollback.reason());
    tracing::error!(
        %store, reason = rollback.reason(),
        "KEY STORE ROLLED BACK: its key set is refused because {rollback}; the keys and revocations this replica holds stay in force, and the replica that writes the store writes them back over it"
    );
}

#[cfg(test)]
mod tests;
