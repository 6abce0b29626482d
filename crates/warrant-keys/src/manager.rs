//! The key manager: owns a [`KeyStore`] in a running server, rotates the keys on schedule when
//! this process may write, and publishes every change of the keys in force.
//!
//! It wakes at the next scheduled change ([`ManagedKeySet::next_change`]), when the store says
//! it changed (another writer, `warrant keys rotate`), and when leadership changes; never by
//! polling faster than that (it re-reads the store every few minutes as a safety net). Sleeping
//! uses Tokio's clock, so a test with paused time drives it; the wall time comes from the clock
//! function the owner passes in, and a wake-up that comes early (the two clocks drift) just
//! finds nothing due and sleeps again.
//!
//! Failures never take keys away: if the store cannot be read or written, the last keys known
//! stay in force (their schedule still advances by time alone: a successor already in the set
//! activates on time), the error is logged and counted, and the manager retries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;
use warrant_clock::Clock;
use warrant_token::{KeyError, SigningKey};

use crate::disposal::Disposals;
use crate::holder::KeyHolder;
use crate::holder_generate::with_held_keys;
use crate::lifecycle::{
    KeySchedule, KeyState, ManagedKeySet, PolicyError, Revocation, RotationPolicy,
};
use crate::metrics::KeyMetrics;
use crate::rollback::{self, Rollback};
use crate::store::{ChangeFeed, KeyStore, Saved, StoreError, StoreVersion, Stored};
use crate::{KeySet, ListedKeys};

/// Keys from a local copy, to start from: the set, and when the copy was written (the last
/// moment the node knew them to be the store's).
#[derive(Debug, Clone)]
pub struct Seed {
    /// The keys.
    pub keys: ManagedKeySet,
    /// When the copy was written.
    pub written_at: Timestamp,
    /// The generation of the store's key set the copy holds: the highest the node had seen.
    pub generation: u64,
}

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

/// How the key store has answered lately: what `/readyz?verbose` and the metric
/// `warrant_keys_store_stale_since_timestamp_seconds` report. The keys in force never depend on
/// it (they stay when the store fails, and their schedule goes on by time alone); it says how
/// fresh they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreHealth {
    /// When reads or writes began to fail; `None` while the last one succeeded.
    pub failing_since: Option<Timestamp>,
    /// The last failure, as logged (it names the store, never key material).
    pub last_error: Option<String>,
    /// When the store last answered a read or a write.
    pub last_success: Option<Timestamp>,
}

impl StoreHealth {
    /// One line for a readiness report at `now`: `ok` and when the store last answered (how old
    /// this replica's view of it is), or since when the store fails, why, and which keys are
    /// served meanwhile.
    pub fn summary(&self, now: Timestamp) -> String {
        match (&self.failing_since, self.last_success) {
            (None, Some(read)) => format!("ok, last read at {}", at_ago(read, now)),
            (None, None) => "ok".to_owned(),
            (Some(since), read) => {
                let serving = read.map_or_else(
                    || "serving the keys it started with (a local copy): the store has not answered since".to_owned(),
                    |t| format!("serving the keys last read at {}", at_ago(t, now)),
                );
                format!(
                    "stale since {since}: {}; {serving}",
                    self.last_error.as_deref().unwrap_or("unknown error")
                )
            }
        }
    }

    /// Records a failure at `now`; true if the store was answering until now.
    fn failed(&mut self, now: Timestamp, error: &dyn std::fmt::Display) -> bool {
        self.last_error = Some(error.to_string());
        let started = self.failing_since.is_none();
        self.failing_since.get_or_insert(now);
        started
    }

    /// Records a success at `now`; true if the store was failing until now.
    fn succeeded(&mut self, now: Timestamp) -> bool {
        self.last_success = Some(now);
        self.last_error = None;
        self.failing_since.take().is_some()
    }
}

/// `t`, and how long before `now` it was, for a readiness report: `2026-01-01T00:00:00Z (42 s
/// ago)`.
pub(crate) fn at_ago(t: Timestamp, now: Timestamp) -> String {
    format!(
        "{t} ({} s ago)",
        now.as_second().saturating_sub(t.as_second())
    )
}

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
    /// Opens `store`: reads it, creates the first key if it is empty and this process writes
    /// it, and brings it up to date with `policy` at `now` (writing the result). Fails if no key
    /// is active afterwards, or if the store cannot be read: a server must not start without
    /// the keys it shares with its replicas.
    pub async fn open(
        store: S,
        policy: RotationPolicy,
        writer: Writer,
        metrics: KeyMetrics,
        now: Timestamp,
    ) -> Result<Self, ManagerError> {
        policy.validate()?;
        let stored = store
            .load()
            .await
            .inspect_err(|_| metrics.store_error("load"))?;
        let known = match stored {
            Some(stored) => Known::read(stored),
            None => Known::nothing(
                ManagedKeySet::default().with_purpose(store.purpose().unwrap_or_default()),
                0,
            ),
        };
        Self::start(store, policy, writer, metrics, now, known, None).await
    }

    /// As [`open`](Self::open), for a replica that keeps a local copy of a shared store
    /// ([`crate::LocalCopy`]) and may start before the store answers. When the store cannot be
    /// reached, the manager starts from `seed` (the copy's keys) instead of failing: it serves
    /// them (their schedule goes on by time alone), writes nothing, and re-reads the store until
    /// it answers; then the store's keys replace them. When the store holds nothing, it starts
    /// from the copy's keys too, which the writer puts back (as it does for keys deleted while
    /// it runs) rather than creating a key no replica has published. When the store holds an
    /// older key set than the copy (a lower generation, or a revocation undone: see
    /// `rollback.rs`), the read is refused: the copy's keys are served, with every revocation
    /// of either, and the writer writes them back over the store's. Any other failure to read
    /// the store is an error, as for [`open`](Self::open).
    pub async fn open_from_copy(
        store: S,
        policy: RotationPolicy,
        writer: Writer,
        metrics: KeyMetrics,
        now: Timestamp,
        seed: Seed,
    ) -> Result<Self, ManagerError> {
        policy.validate()?;
        let (known, from_copy) = match store.load().await {
            Ok(Some(stored)) => {
                match rollback::check(&seed.keys, seed.generation, &stored.keys, stored.generation)
                {
                    Ok(()) => (Known::read(stored), None),
                    Err(rollback) => {
                        refused(&store.describe(), &rollback, &metrics);
                        (Known::refused(seed.keys, seed.generation, stored), None)
                    }
                }
            }
            Ok(None) => {
                tracing::warn!(store = %store.describe(), copy_written_at = %seed.written_at, "the key store holds no keys: serving the local copy's, which the replica that writes the store puts back");
                (Known::nothing(seed.keys, seed.generation), None)
            }
            Err(error @ StoreError::Unavailable { .. }) => {
                metrics.store_error("load");
                tracing::warn!(%error, copy_written_at = %seed.written_at, "the key store cannot be reached: serving the keys of the local copy until it answers (this replica writes nothing meanwhile)");
                let failed = (now, error.to_string());
                (
                    Known::nothing(seed.keys, seed.generation),
                    Some((seed.written_at, failed)),
                )
            }
            Err(error) => {
                metrics.store_error("load");
                return Err(error.into());
            }
        };
        Self::start(store, policy, writer, metrics, now, known, from_copy).await
    }

    /// A manager serving `known`, or, with `from_copy`, keys from a local copy written at the
    /// given time, because the store failed as given.
    async fn start(
        store: S,
        policy: RotationPolicy,
        writer: Writer,
        metrics: KeyMetrics,
        now: Timestamp,
        known: Known,
        from_copy: Option<(Timestamp, (Timestamp, String))>,
    ) -> Result<Self, ManagerError> {
        let health = match &from_copy {
            None => StoreHealth {
                last_success: Some(now),
                ..StoreHealth::default()
            },
            Some((_, (since, error))) => StoreHealth {
                failing_since: Some(*since),
                last_error: Some(error.clone()),
                last_success: None,
            },
        };
        let (health, _) = watch::channel(health);
        metrics.store_health(&health.borrow());
        let mut manager = KeyManager {
            store,
            policy,
            writer,
            metrics,
            keys: known.keys,
            version: known.version,
            seen: HashMap::new(),
            health,
            disposals: Disposals::default(),
            gate: None,
            seeded_at: from_copy.as_ref().map(|(written_at, _)| *written_at),
            unread: from_copy.is_some(),
            highest: known.highest,
            repair: known.repair,
        };
        // The store is brought up to date now; what is due in the holder is destroyed by the
        // running manager ([`spawn`](Self::spawn)), at its first look, so that its owner can say
        // first what the set keeps ([`keeping_retired_keys_whole`](Self::keeping_retired_keys_whole)).
        if manager.writer.may_write() && !manager.unread {
            manager.write_due(now).await?;
        }
        // A set whose signing key was revoked with no successor made yet starts: it verifies
        // (and publishes) its keys, signs nothing, and its writer makes the successor.
        if manager.keys.active_at(now).is_none() && manager.keys.stopped_at(now).is_none() {
            return Err(ManagerError::NoActiveKey {
                store: manager.store.describe(),
            });
        }
        manager.observe(now);
        Ok(manager)
    }

    /// As [`open`](Self::open), for a replica that may have to wait for another to create the
    /// keys: while the store holds no active key and this replica may not write it, waits for
    /// the store to change or for leadership, and tries again (every few seconds at least).
    /// Any other failure ends the wait. `clock` gives the wall time.
    pub async fn open_when_ready(
        store: S,
        policy: RotationPolicy,
        mut writer: Writer,
        metrics: KeyMetrics,
        clock: &Clock,
    ) -> Result<Self, ManagerError>
    where
        S: Clone,
    {
        let mut feed: Option<ChangeFeed> = None;
        loop {
            let opened = Self::open(
                store.clone(),
                policy,
                writer.clone(),
                metrics.clone(),
                clock.now(),
            )
            .await;
            let waiting = match opened {
                Err(ManagerError::NoActiveKey { store: described }) => described,
                other => return other,
            };
            let feed = feed.get_or_insert_with(|| {
                tracing::info!(store = %waiting, "the key store holds no keys yet; waiting for the replica that holds the key Lease to create them");
                store.watch().unwrap_or_else(|_| ChangeFeed::never())
            });
            tokio::select! {
                () = feed.changed() => {}
                () = writer.changed() => {}
                () = tokio::time::sleep(RETRY) => {}
            }
        }
    }

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

    /// Records a failure of the store: logged as an error when it starts, quietly while it
    /// lasts (it is retried every few seconds), and reported in health and metrics.
    fn store_failed(&self, now: Timestamp, error: &dyn std::fmt::Display, what: &str) {
        let mut started = false;
        self.health.send_modify(|h| started = h.failed(now, error));
        if started {
            tracing::error!(%error, "{what}");
        } else {
            tracing::debug!(%error, "{what}");
        }
        self.metrics.store_health(&self.health.borrow());
    }

    /// Records that the store answered.
    fn store_answered(&self, now: Timestamp) {
        let mut recovered = false;
        let mut since = None;
        self.health.send_modify(|h| {
            since = h.failing_since;
            recovered = h.succeeded(now);
        });
        if recovered {
            tracing::info!(store = %self.store.describe(), failing_since = %since.map(|t| t.to_string()).unwrap_or_default(), "the key store answers again");
            self.metrics.store_health(&self.health.borrow());
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

    /// Brings the store up to date at `now` (rotation, or writing back keys it lost), retrying
    /// writes that lose to another writer, then destroys in the store's holder what is due
    /// (whether the write succeeded or not: what is due follows from the keys in force and
    /// `now`). Returns whether anything was written.
    async fn sync(&mut self, now: Timestamp) -> Result<bool, ManagerError> {
        let written = self.write_due(now).await;
        if let Some(holder) = self.store.holder() {
            self.disposals
                .run(holder, &self.keys, now, &self.metrics)
                .await;
        }
        written
    }

    async fn write_due(&mut self, now: Timestamp) -> Result<bool, ManagerError> {
        let holder = self.store.holder();
        for _ in 0..CONFLICT_ATTEMPTS {
            let rotated = rotate(self.keys.clone(), self.policy, now, holder.clone()).await?;
            let write_back = (self.version.is_none() || self.repair) && !self.keys.is_empty();
            let next = match rotated {
                Some(next) => next,
                None if write_back => self.keys.clone(),
                None => return Ok(false),
            };
            let saved = self
                .store
                .save_after(&next, self.version.as_ref(), self.highest)
                .await;
            if saved.is_err() {
                // Keys generated for a write that did not happen are referenced by no store:
                // destroyed, or they would be left in the HSM for ever.
                self.disposals
                    .left_the_set(&generated_in(&self.keys, &next), "unused");
            }
            match saved {
                Ok(saved) => {
                    self.disposals
                        .left_the_set(&generated_in(&next, &self.keys), "removed");
                    if self.repair {
                        tracing::warn!(store = %self.store.describe(), generation = saved.generation, "key store repaired: the key set it had lost, every revocation with it, is written back");
                    }
                    self.wrote(next, saved);
                    return Ok(true);
                }
                Err(StoreError::Conflict { .. }) => {
                    tracing::info!(store = %self.store.describe(), "the key store changed under this write; re-reading it");
                    self.reload().await?;
                }
                Err(error) => {
                    self.metrics.store_error("save");
                    return Err(error.into());
                }
            }
        }
        Err(ManagerError::Contended {
            store: self.store.describe(),
        })
    }

    /// The activation gate, as the store's writer: holds back (rewriting the store) each key due
    /// to sign within the gate's lead that the publish targets do not all list. Returns whether
    /// anything was written.
    async fn hold_unlisted(&mut self, now: Timestamp) -> Result<bool, ManagerError> {
        let Some(gate) = &self.gate else {
            return Ok(false);
        };
        let gate = gate.clone();
        for _ in 0..CONFLICT_ATTEMPTS {
            let held = {
                let listed = gate.borrow();
                self.keys.hold_unlisted(&self.policy, now, &listed)
            };
            let Some((next, holds)) = held else {
                return Ok(false);
            };
            match self
                .store
                .save_after(&next, self.version.as_ref(), self.highest)
                .await
            {
                Ok(saved) => {
                    for hold in &holds {
                        self.metrics.activation_held();
                        tracing::error!(
                            kid = %hold.kid, due = %hold.from, activate_at = %hold.to,
                            "key not listed by every publish target yet: it does not sign before they list it; the key in force signs on until activate_at (see /readyz?verbose, publish)"
                        );
                    }
                    self.wrote(next, saved);
                    return Ok(true);
                }
                Err(StoreError::Conflict { .. }) => self.reload().await?,
                Err(error) => {
                    self.metrics.store_error("save");
                    return Err(error.into());
                }
            }
        }
        Err(ManagerError::Contended {
            store: self.store.describe(),
        })
    }

    /// Takes `keys`, just written as `saved`, as the keys in force.
    fn wrote(&mut self, keys: ManagedKeySet, saved: Saved) {
        self.keys = keys;
        self.version = Some(saved.version);
        self.highest = saved.generation;
        self.repair = false;
    }

    /// Logs every key's transitions since the last look and records metrics.
    fn observe(&mut self, now: Timestamp) {
        let schedule = self.keys.schedule(now);
        log_transitions(&self.seen, &schedule, self.keys.revocations(), now);
        self.seen = schedule
            .iter()
            .map(|k| (k.kid.clone(), k.clone()))
            .collect();
        self.metrics.managed(&schedule);
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

/// The keys of `next` that `before` does not have: those a rotation generated (or, the other
/// way round, those a write took out).
fn generated_in(before: &ManagedKeySet, next: &ManagedKeySet) -> Vec<SigningKey> {
    next.keys()
        .iter()
        .filter(|key| !before.keys().iter().any(|k| k.kid() == key.kid()))
        .map(|key| key.key().clone())
        .collect()
}

/// Runs a rotation: with a holder, with the keys it makes ([`with_held_keys`]); else off the
/// async threads, since generating an RSA key takes a while.
async fn rotate(
    keys: ManagedKeySet,
    policy: RotationPolicy,
    now: Timestamp,
    holder: Option<Arc<dyn KeyHolder>>,
) -> Result<Option<ManagedKeySet>, ManagerError> {
    // Cheap when nothing is due: check before moving to a blocking thread.
    let due = keys.is_empty()
        || keys.active_at(now).is_none()
        || keys.next_change(now, &policy).is_some_and(|t| t <= now)
        || keys.schedule(now).iter().any(|k| match k.state {
            KeyState::Removed => true,
            KeyState::Next | KeyState::Active => k.max_token_seconds < policy.max_token_seconds,
            KeyState::Retired => false,
        });
    if !due {
        return Ok(None);
    }
    match holder {
        Some(holder) => with_held_keys(&*holder, keys.purpose(), |generate| {
            keys.rotate(&policy, now, generate)
        })
        .await
        .map_err(ManagerError::Key),
        None => {
            tokio::task::spawn_blocking(move || keys.rotate(&policy, now, SigningKey::generate))
                .await
                .map_err(|_| KeyError::Crypto("generate a key (the task was interrupted)"))?
                .map_err(ManagerError::Key)
        }
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

#[cfg(test)]
mod tests;
