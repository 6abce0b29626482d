//! Opening a key manager: from what the store holds, from a node's local copy while the store
//! cannot be reached (or holds nothing, or an older key set), or by waiting for the replica
//! that writes the store to create the first keys.

use std::collections::HashMap;

use jiff::Timestamp;
use tokio::sync::watch;
use warrant_clock::Clock;

use super::health::StoreHealth;
use super::{KeyManager, Known, ManagerError, RETRY, Writer, refused};
use crate::disposal::Disposals;
use crate::lifecycle::{ManagedKeySet, RotationPolicy};
use crate::metrics::KeyMetrics;
use crate::rollback;
use crate::store::{ChangeFeed, KeyStore, StoreError};

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
}
