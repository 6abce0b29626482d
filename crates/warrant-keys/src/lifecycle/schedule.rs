//! What the records imply at a moment, derived and never stored: each key's state, its
//! retirement (its successor's activation) and removal, when the next key is due, the next
//! change, and the keys in force as a [`KeySet`] ready to serve.

use jiff::Timestamp;
use warrant_token::{Algorithm, SigningKey};

use super::policy::RotationPolicy;
use super::{KeyState, ManagedKey, ManagedKeySet, plus, whole_second};
use crate::KeySet;

/// One key's place in the schedule, for operators (`warrant keys list`) and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySchedule {
    /// The key ID.
    pub kid: String,
    /// The signing algorithm.
    pub algorithm: Algorithm,
    /// The state at the time asked about.
    pub state: KeyState,
    /// When it was published.
    pub published_at: Timestamp,
    /// When it signs from.
    pub activate_at: Timestamp,
    /// When it stops signing: its successor's activation. `None` while no successor exists;
    /// see [`ManagedKeySet::successor`] for when one is due.
    pub retire_at: Option<Timestamp>,
    /// When it leaves the JWKS; `None` while `retire_at` is.
    pub remove_at: Option<Timestamp>,
    /// The longest lifetime of a token it may sign.
    pub max_token_seconds: i64,
}

/// When the next key is due under a policy, for a set that has none scheduled yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Successor {
    /// When rotation creates (and publishes) it; in the past if rotation is overdue.
    pub create_at: Timestamp,
    /// When it would start signing if created at `create_at`.
    pub activate_at: Timestamp,
    /// When the key it succeeds would leave the JWKS, if it retires at `activate_at`: its
    /// longest token's lifetime and the leeway later. `None` if that key has retired already
    /// (signing stopped after it).
    pub predecessor_removed_at: Option<Timestamp>,
}

impl ManagedKeySet {
    /// When no key signs at `now` because signing stopped ([`stopped`](Self::stopped)) and no
    /// key has been made since: `None` if a key signs (or none ever did).
    pub fn stopped_at(&self, now: Timestamp) -> Option<Timestamp> {
        let stop = self.stopped.filter(|s| *s <= now)?;
        let latest = self.keys.iter().rposition(|k| k.activate_at <= now);
        match latest.and_then(|i| self.keys.get(i)) {
            Some(key) if key.activate_at >= stop => None,
            _ => Some(stop),
        }
    }

    /// When the key at `index` retires: its successor's activation, or when signing stopped
    /// after it activated, if that is earlier.
    fn retire_at(&self, index: usize) -> Option<Timestamp> {
        let key = self.keys.get(index)?;
        let next = self.keys.get(index + 1).map(ManagedKey::activate_at);
        let stop = self.stopped.filter(|s| *s > key.activate_at);
        [next, stop].into_iter().flatten().min()
    }

    /// When the key at `index` is removed: after its last token's expiry and the leeway.
    fn remove_at(&self, index: usize) -> Option<Timestamp> {
        let key = self.keys.get(index)?;
        self.retire_at(index)
            .map(|retire| key.removed_after(retire))
    }

    pub(super) fn state_of(&self, index: usize, now: Timestamp) -> KeyState {
        let Some(key) = self.keys.get(index) else {
            return KeyState::Removed;
        };
        if now < key.activate_at {
            return KeyState::Next;
        }
        match (self.retire_at(index), self.remove_at(index)) {
            (Some(retire), _) if now < retire => KeyState::Active,
            (None, _) => KeyState::Active,
            (Some(_), Some(remove)) if now < remove => KeyState::Retired,
            _ => KeyState::Removed,
        }
    }

    /// The state of key `kid` at `now`; `None` if the set does not hold it.
    pub fn state_at(&self, kid: &str, now: Timestamp) -> Option<KeyState> {
        let index = self.keys.iter().position(|k| k.kid() == kid)?;
        Some(self.state_of(index, now))
    }

    pub(super) fn active_index(&self, now: Timestamp) -> Option<usize> {
        if self.stopped_at(now).is_some() {
            return None;
        }
        self.keys.iter().rposition(|k| k.activate_at <= now)
    }

    /// The key that signs at `now`; `None` before the first key activates.
    pub fn active_at(&self, now: Timestamp) -> Option<&ManagedKey> {
        self.active_index(now).and_then(|i| self.keys.get(i))
    }

    /// Every key's schedule and its state at `now`, in activation order.
    pub fn schedule(&self, now: Timestamp) -> Vec<KeySchedule> {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, key)| KeySchedule {
                kid: key.kid().to_owned(),
                algorithm: key.algorithm(),
                state: self.state_of(i, now),
                published_at: key.published_at,
                activate_at: key.activate_at,
                retire_at: self.retire_at(i),
                remove_at: self.remove_at(i),
                max_token_seconds: key.max_token_seconds,
            })
            .collect()
    }

    /// When the last key's successor is due under `policy`: created `publish-ahead` before it
    /// activates, one rotation period after the last key did. `None` for an empty set.
    pub fn successor(&self, policy: &RotationPolicy, now: Timestamp) -> Option<Successor> {
        if let Some(stop) = self.stopped
            && self.keys.iter().all(|k| k.activate_at < stop)
        {
            // Nothing signs since the stop: a key is due since then, and signs once made.
            return Some(Successor {
                create_at: stop,
                activate_at: whole_second(now.max(stop)),
                predecessor_removed_at: None,
            });
        }
        let last = self.keys.last()?;
        let due = plus(last.activate_at, policy.rotation_period_seconds);
        let create_at = plus(due, -policy.publish_ahead_seconds);
        let activate_at = due.max(plus(
            whole_second(now.max(create_at)),
            policy.publish_ahead_seconds,
        ));
        let predecessor_removed_at = self
            .retire_at(self.keys.len() - 1)
            .is_none()
            .then(|| last.removed_after(activate_at));
        Some(Successor {
            create_at,
            activate_at,
            predecessor_removed_at,
        })
    }

    /// The next time a key changes state (activates, retires or is removed) after `now`,
    /// from the records alone.
    pub fn next_transition(&self, now: Timestamp) -> Option<Timestamp> {
        let activations = self.keys.iter().map(ManagedKey::activate_at);
        let removals = (0..self.keys.len()).filter_map(|i| self.remove_at(i));
        activations.chain(removals).filter(|t| *t > now).min()
    }

    /// The next scheduled change: a key changes state after `now`, or the policy calls for a
    /// successor. If the successor is overdue (its creation time has passed and no rotation
    /// created it yet), this is that creation time, in the past: the change is due at once.
    pub fn next_change(&self, now: Timestamp, policy: &RotationPolicy) -> Option<Timestamp> {
        let creation = self.successor(policy, now).map(|s| s.create_at);
        [self.next_transition(now), creation]
            .into_iter()
            .flatten()
            .min()
    }

    /// The keys in force at `now`, ready to serve: the active key signs (and the keys
    /// scheduled to follow it take over at their activation); next, active and retired keys
    /// verify and are published, active first, then next, then retired from newest to
    /// oldest. `None` until a key has activated.
    pub fn key_set_at(&self, now: Timestamp, policy: &RotationPolicy) -> Option<KeySet> {
        let revoked: Vec<String> = self.revoked.iter().map(|r| r.kid.clone()).collect();
        let Some(active) = self.active_index(now) else {
            // Signing stopped (a revoked signing key, no successor made yet): the keys that
            // verify are published, and nothing signs.
            let since = self.stopped_at(now)?;
            let retired = (0..self.keys.len())
                .rev()
                .filter(|&i| self.state_of(i, now) == KeyState::Retired)
                .filter_map(|i| self.keys.get(i))
                .map(|k| k.key.verifying_key().clone())
                .collect();
            return Some(
                KeySet::stopped(retired, since, self.next_change(now, policy))
                    .with_revoked(revoked)
                    .with_published(self.published(now)),
            );
        };
        let signing = self.keys.get(active)?.key.clone();
        let later = self.keys.get(active + 1..).unwrap_or_default();
        let successors: Vec<(Timestamp, SigningKey)> = later
            .iter()
            .map(|k| (k.activate_at, k.key.clone()))
            .collect();
        let retired = (0..active)
            .rev()
            .filter(|&i| self.state_of(i, now) == KeyState::Retired)
            .filter_map(|i| self.keys.get(i));
        let verifying = std::iter::once(&self.keys.get(active)?.key)
            .chain(later.iter().map(|k| &k.key))
            .chain(retired.map(|k| &k.key))
            .map(|k| k.verifying_key().clone())
            .collect();
        Some(
            KeySet::scheduled(
                signing,
                successors,
                verifying,
                self.next_change(now, policy),
            )
            .with_revoked(revoked)
            .with_published(self.published(now)),
        )
    }

    /// The keys in force at `now` (not yet removed), with their publication times, in the
    /// key set's publication order: the signing key, its successors, then the retired keys
    /// newest first.
    fn published(&self, now: Timestamp) -> Vec<crate::PublishedKey> {
        let active = self.active_index(now);
        let mut order: Vec<usize> = Vec::with_capacity(self.keys.len());
        if let Some(active) = active {
            order.extend(active..self.keys.len());
        }
        order.extend(
            (0..active.unwrap_or(self.keys.len()))
                .rev()
                .filter(|&i| self.state_of(i, now) == KeyState::Retired),
        );
        order
            .into_iter()
            .filter_map(|i| self.keys.get(i))
            .map(|k| crate::PublishedKey {
                key: k.key.clone(),
                published_at: k.published_at,
            })
            .collect()
    }
}
