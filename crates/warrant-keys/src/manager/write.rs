//! What the manager writes as the store's writer: the rotation due (or keys the store lost,
//! written back), retried when another writer was first; the activation gate's holds; and the
//! disposal of keys that left the set.

use std::sync::Arc;

use jiff::Timestamp;
use warrant_token::{KeyError, SigningKey};

use super::{CONFLICT_ATTEMPTS, KeyManager, ManagerError};
use crate::holder::KeyHolder;
use crate::holder_generate::with_held_keys;
use crate::lifecycle::{KeyState, ManagedKeySet, RotationPolicy};
use crate::store::{KeyStore, Saved, StoreError};

impl<S: KeyStore> KeyManager<S> {
    /// Brings the store up to date at `now` (rotation, or writing back keys it lost), retrying
    /// writes that lose to another writer, then destroys in the store's holder what is due
    /// (whether the write succeeded or not: what is due follows from the keys in force and
    /// `now`). Returns whether anything was written.
    pub(super) async fn sync(&mut self, now: Timestamp) -> Result<bool, ManagerError> {
        let written = self.write_due(now).await;
        if let Some(holder) = self.store.holder() {
            self.disposals
                .run(holder, &self.keys, now, &self.metrics)
                .await;
        }
        written
    }

    pub(super) async fn write_due(&mut self, now: Timestamp) -> Result<bool, ManagerError> {
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
    pub(super) async fn hold_unlisted(&mut self, now: Timestamp) -> Result<bool, ManagerError> {
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
