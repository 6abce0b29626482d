//! The lifecycle of managed keys, as pure functions of the key records, the rotation policy and
//! `now`: no I/O, no clock, so tests step through whole rotations to the second.
//!
//! Every key moves through **next** (published in the JWKS, not signing) → **active** (signing;
//! exactly one at any time) → **retired** (published, verifying, not signing) → **removed**.
//!
//! A record stores only what cannot be derived: the key, when it was published, when it
//! activates, and the longest lifetime of a token it may sign. The rest follows from the set:
//!
//! - keys are ordered by activation time, and a key is active from its own activation until the
//!   next key's, so **retire-at is the successor's activate-at**. There is never a moment with
//!   two active keys or (once the first key has activated) none, and every replica reading the
//!   same records switches keys at the same second without talking to the others.
//! - a retired key is **removed at retire-at + the longest token lifetime + 60 s**
//!   ([`REMOVAL_LEEWAY_SECONDS`], the verifier's leeway on `exp`): a token it signed in its last
//!   second expires, leeway included, before it leaves the JWKS.
//!
//! Rotation ([`ManagedKeySet::rotate`]) turns the records, the policy and `now` into new records:
//! it drops removed keys, creates the successor `publish-ahead` before it must activate (one
//! rotation period after the active key did), and never lets a key sign before it has been
//! published for `publish-ahead`: if the rotation runs late, the old key signs on until it is
//! safe. The one exception is the very first key of an empty set, which activates at once:
//! nothing has been published before it, so no relying party can hold a stale copy.
//!
//! Here: the records ([`ManagedKey`], [`Revocation`]) and the set that holds them. The policy
//! is in `policy.rs`, what the records imply at a moment (states, the successor, the keys in
//! force) in `schedule.rs`, and the changes in `rotation.rs` (rotation and the activation
//! gate) and `revocation.rs`.

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use warrant_token::{Algorithm, LEEWAY_SECONDS, SigningKey};

use crate::KeyPurpose;

mod policy;
mod revocation;
mod rotation;
mod schedule;

pub use policy::{
    FOLLOW_LAG_SECONDS, GATE_LEAD_MAX_SECONDS, MIN_PUBLISH_AHEAD_SECONDS,
    MIN_SHARED_PUBLISH_AHEAD_SECONDS, PolicyError, RotationPolicy,
};
pub use revocation::{Replacement, RevokeError, Revoked};
pub use rotation::Hold;
pub use schedule::{KeySchedule, Successor};

/// Seconds a retired key stays published after the last token it signed expires: the
/// verifier's leeway on `exp`, so a token is never refused for a missing key while it could
/// still pass the time check.
pub const REMOVAL_LEEWAY_SECONDS: i64 = LEEWAY_SECONDS;

/// Where a key is in its lifecycle at some moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyState {
    /// Published, not signing yet.
    Next,
    /// Signing (and published).
    Active,
    /// Published and verifying; no longer signing.
    Retired,
    /// No longer published: every token it signed has expired.
    Removed,
}

impl KeyState {
    /// Every state, in lifecycle order.
    pub const ALL: [KeyState; 4] = [
        KeyState::Next,
        KeyState::Active,
        KeyState::Retired,
        KeyState::Removed,
    ];

    /// The state's name: `next`, `active`, `retired` or `removed`.
    pub const fn name(self) -> &'static str {
        match self {
            KeyState::Next => "next",
            KeyState::Active => "active",
            KeyState::Retired => "retired",
            KeyState::Removed => "removed",
        }
    }
}

impl fmt::Display for KeyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One managed key: the private key and the times that are not derived from the rest of the
/// set. Times are whole seconds. `Debug` shows the kid and times, never key material.
#[derive(Clone)]
pub struct ManagedKey {
    key: SigningKey,
    published_at: Timestamp,
    activate_at: Timestamp,
    max_token_seconds: i64,
}

impl ManagedKey {
    /// A key published at `published_at` that signs from `activate_at` on (until a successor
    /// activates), whose tokens live at most `max_token_seconds`. Times are truncated to whole
    /// seconds.
    pub fn new(
        key: SigningKey,
        published_at: Timestamp,
        activate_at: Timestamp,
        max_token_seconds: i64,
    ) -> Self {
        ManagedKey {
            key,
            published_at: whole_second(published_at),
            activate_at: whole_second(activate_at),
            max_token_seconds,
        }
    }

    /// The private key.
    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    /// The key ID.
    pub fn kid(&self) -> &str {
        self.key.kid()
    }

    /// The signing algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.key.algorithm()
    }

    /// When the key was first published (entered the store).
    pub fn published_at(&self) -> Timestamp {
        self.published_at
    }

    /// When the key starts signing.
    pub fn activate_at(&self) -> Timestamp {
        self.activate_at
    }

    /// The longest lifetime of a token this key may sign.
    pub fn max_token_seconds(&self) -> i64 {
        self.max_token_seconds
    }

    /// When this key leaves the JWKS (or, revoked, is forgotten) if it stops signing at
    /// `retired`: once the last token it could sign then has expired, and the leeway.
    pub fn removed_after(&self, retired: Timestamp) -> Timestamp {
        plus(
            retired,
            self.max_token_seconds
                .saturating_add(REMOVAL_LEEWAY_SECONDS),
        )
    }
}

impl fmt::Debug for ManagedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagedKey")
            .field("kid", &self.kid())
            .field("alg", &self.algorithm())
            .field("published_at", &self.published_at)
            .field("activate_at", &self.activate_at)
            .field("max_token_seconds", &self.max_token_seconds)
            .finish()
    }
}

/// A key set that cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    /// The same key twice.
    #[error("key {0} appears twice")]
    DuplicateKid(String),
    /// A key both held and recorded as revoked.
    #[error("key {0} is both in the set and revoked")]
    RevokedKeyPresent(String),
}

/// A revoked key, remembered (by kid, without its key material) for good: its tokens are
/// refused by name rather than as unknown, and no other source of keys (a
/// `--service-account-key-file` still offering its public half, on this replica or another, now
/// or after a restart) can bring it back. The writer of the record cannot see every replica's
/// files, so it cannot tell when forgetting would be safe; a record is about a hundred bytes,
/// and revocations are rare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The key ID.
    pub kid: String,
    /// When it was revoked.
    pub revoked_at: Timestamp,
    /// When the last token it could have signed has expired (plus the leeway). Named for the
    /// stored field, `forgetAt`: records were once dropped then, which let a key file bring
    /// the key back; they are kept now.
    pub forget_at: Timestamp,
    /// Where the key was held, for a key held outside the store ([`crate::KeyHolder`]): its
    /// locator, so the store's writer can destroy it there even if the holder was out of reach
    /// when the key was revoked.
    pub held_in: Option<String>,
}

/// A managed key set: the records of every key not yet removed, ordered by activation time.
/// Cheap to clone (keys are reference-counted).
#[derive(Debug, Clone, Default)]
pub struct ManagedKeySet {
    keys: Vec<ManagedKey>,
    /// Revoked keys, in revocation order (kept for good: see [`Revocation`]).
    revoked: Vec<Revocation>,
    /// When signing stopped: the signing key was revoked and no key could be made to take over
    /// (its holder out of reach). No key activated before then signs from then on; the first
    /// key made after signs at once (see [`ManagedKeySet::revoke`]). Kept while a key activated
    /// before it remains, whose retirement it is.
    stopped: Option<Timestamp>,
    /// What the keys are for (see `purpose.rs`): recorded with them, and checked in their holder.
    purpose: KeyPurpose,
}

fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// `t` plus `seconds`, saturating at the ends of time.
fn plus(t: Timestamp, seconds: i64) -> Timestamp {
    t.saturating_add(SignedDuration::from_secs(seconds))
        .unwrap_or(if seconds < 0 {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        })
}

impl ManagedKeySet {
    /// A set of `keys`, ordered by activation time (then publication time, then kid, so the
    /// order never depends on how the records were listed).
    pub fn new(mut keys: Vec<ManagedKey>) -> Result<Self, LifecycleError> {
        keys.sort_by(|a, b| {
            (a.activate_at, a.published_at, a.kid()).cmp(&(b.activate_at, b.published_at, b.kid()))
        });
        let mut seen = std::collections::HashSet::new();
        for key in &keys {
            if !seen.insert(key.kid()) {
                return Err(LifecycleError::DuplicateKid(key.kid().to_owned()));
            }
        }
        Ok(ManagedKeySet {
            keys,
            revoked: Vec::new(),
            stopped: None,
            purpose: KeyPurpose::default(),
        })
    }

    /// The same set, remembering `revoked` keys (see [`Revocation`]). None of them may be in
    /// the set.
    pub fn with_revocations(mut self, revoked: Vec<Revocation>) -> Result<Self, LifecycleError> {
        if let Some(r) = revoked
            .iter()
            .find(|r| self.keys.iter().any(|k| k.kid() == r.kid))
        {
            return Err(LifecycleError::RevokedKeyPresent(r.kid.clone()));
        }
        self.revoked = revoked;
        Ok(self)
    }

    /// The same set, also remembering `revocations` (another reading of the store's): a key
    /// revoked there leaves the set, and every revocation of either is kept. What a writer
    /// puts back in a store that lost revocations, so that none is ever lost on the way.
    pub fn remembering(&self, revocations: &[Revocation]) -> ManagedKeySet {
        let mut set = self.clone();
        for revocation in revocations {
            if !set.revoked.iter().any(|r| r.kid == revocation.kid) {
                set.keys.retain(|k| k.kid() != revocation.kid);
                set.revoked.push(revocation.clone());
            }
        }
        set
    }

    /// The revoked keys still remembered.
    pub fn revocations(&self) -> &[Revocation] {
        &self.revoked
    }

    /// The same set, with signing stopped at `at` (see [`stopped`](Self::stopped)), as a store
    /// recorded it.
    pub fn with_stop(mut self, at: Option<Timestamp>) -> Self {
        self.stopped = at.map(whole_second);
        self
    }

    /// When signing stopped because the signing key was revoked and no key could be made to
    /// take over (its holder out of reach), while that lasts or a key that signed before
    /// remains: no key activated before it signs from then on.
    pub fn stopped(&self) -> Option<Timestamp> {
        self.stopped
    }

    /// The same set, its keys for `purpose` (a new set's are [`KeyPurpose::Tokens`]).
    pub fn with_purpose(mut self, purpose: KeyPurpose) -> Self {
        self.purpose = purpose;
        self
    }

    /// What the keys are for.
    pub fn purpose(&self) -> KeyPurpose {
        self.purpose
    }

    /// True if `other` records the same keys (by kid) on the same schedule, with the same
    /// revocations: what a store holding either would serve is the same.
    pub fn same_records(&self, other: &ManagedKeySet) -> bool {
        let record = |k: &ManagedKey| {
            (
                k.kid().to_owned(),
                k.published_at,
                k.activate_at,
                k.max_token_seconds,
            )
        };
        self.revoked == other.revoked
            && self.stopped == other.stopped
            && self.purpose == other.purpose
            && self.keys.len() == other.keys.len()
            && self
                .keys
                .iter()
                .map(record)
                .eq(other.keys.iter().map(record))
    }

    /// A new set whose first key is `key`, signing from `now`: a fresh key directory, or a
    /// static signing key brought under management (`max_token_seconds` is then the longest
    /// token it may already have signed).
    pub fn first(key: SigningKey, now: Timestamp, max_token_seconds: i64) -> Self {
        ManagedKeySet {
            keys: vec![ManagedKey::new(key, now, now, max_token_seconds)],
            revoked: Vec::new(),
            stopped: None,
            purpose: KeyPurpose::default(),
        }
    }

    /// The records, in activation order.
    pub fn keys(&self) -> &[ManagedKey] {
        &self.keys
    }

    /// True if the set holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests;
