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

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use warrant_token::{Algorithm, KeyError, KeyType, LEEWAY_SECONDS, SigningKey};

use crate::{KeyPurpose, KeySet, ListedKeys};

/// Seconds a retired key stays published after the last token it signed expires: the
/// verifier's leeway on `exp`, so a token is never refused for a missing key while it could
/// still pass the time check.
pub const REMOVAL_LEEWAY_SECONDS: i64 = LEEWAY_SECONDS;

/// The shortest `publish-ahead` accepted: the documents' smallest max-age, so a relying party
/// that honours max-age has always refetched the JWKS before a key it did not have signs.
pub const MIN_PUBLISH_AHEAD_SECONDS: i64 = 60;

/// How long a replica that follows a shared store (`--key-secret`) may take to hear of a key its
/// writer created: a watch event within a second; without one, a follower re-reads the store
/// every 10 s while a successor is due and unseen. Thirty seconds also cover the writer's key
/// generation (seconds in some HSMs) and clock skew between the nodes.
pub const FOLLOW_LAG_SECONDS: i64 = 30;

/// The shortest `publish-ahead` accepted for a shared store: a key must reach every replica
/// ([`FOLLOW_LAG_SECONDS`]) and then whoever re-reads what that replica publishes, at least every
/// [`MIN_PUBLISH_AHEAD_SECONDS`] (the documents' smallest max-age, and the smallest refresh hint
/// kube-apiserver gets from FetchKeys, which it honours to the second), before any replica
/// signs with it.
pub const MIN_SHARED_PUBLISH_AHEAD_SECONDS: i64 = MIN_PUBLISH_AHEAD_SECONDS + FOLLOW_LAG_SECONDS;

/// The longest lead of the activation gate (see [`ManagedKeySet::hold_unlisted`]): the
/// documents' longest `max-age` (warrant-issuer's `DOCUMENT_MAX_AGE_SECONDS`), so a relying
/// party that honours it has re-read a bucket's JWKS after the gate last found the key there.
pub const GATE_LEAD_MAX_SECONDS: i64 = 3600;

/// A key the activation gate held back: it was due to sign at `from`, and now signs at `to`
/// at the earliest (the key before it signs until then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The key ID.
    pub kid: String,
    /// When it was due to activate.
    pub from: Timestamp,
    /// When it activates now.
    pub to: Timestamp,
}

/// How managed keys rotate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationPolicy {
    /// The kind of key generated.
    pub key_type: KeyType,
    /// How long each key signs before its successor takes over.
    pub rotation_period_seconds: i64,
    /// How long a key is published before it signs: long enough for every relying party to
    /// have re-read the JWKS.
    pub publish_ahead_seconds: i64,
    /// The longest lifetime of a token issued now (see
    /// [`ExpirationPolicy::longest_token_seconds`](warrant_token::ExpirationPolicy::longest_token_seconds)).
    /// A key keeps verifying for this long after it retires.
    pub max_token_seconds: i64,
}

impl RotationPolicy {
    /// Default rotation period: a week. Short enough that a leaked key is useful for days, not
    /// months; long enough that the JWKS holds only a few keys.
    pub const DEFAULT_ROTATION_PERIOD_SECONDS: i64 = 7 * 24 * 3600;
    /// Default publish-ahead: a day. Relying parties re-read a JWKS every few minutes to a few
    /// hours; a day covers the slow ones with room to spare.
    pub const DEFAULT_PUBLISH_AHEAD_SECONDS: i64 = 24 * 3600;

    /// Checks that the policy can keep its promises.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.publish_ahead_seconds < MIN_PUBLISH_AHEAD_SECONDS {
            return Err(PolicyError::PublishAheadTooShort(
                self.publish_ahead_seconds,
            ));
        }
        if self.rotation_period_seconds <= self.publish_ahead_seconds {
            return Err(PolicyError::PeriodNotAfterPublishAhead {
                period: self.rotation_period_seconds,
                publish_ahead: self.publish_ahead_seconds,
            });
        }
        if self.max_token_seconds <= 0 {
            return Err(PolicyError::MaxTokenSeconds(self.max_token_seconds));
        }
        Ok(())
    }

    /// Checks, beyond [`validate`](Self::validate), that the policy can keep its promise when
    /// replicas on several machines share the store and one of them writes it: each new key
    /// reaches every replica, and every reader of every replica, before it signs (see
    /// [`MIN_SHARED_PUBLISH_AHEAD_SECONDS`]).
    pub fn validate_shared(&self) -> Result<(), PolicyError> {
        self.validate()?;
        if self.publish_ahead_seconds < MIN_SHARED_PUBLISH_AHEAD_SECONDS {
            return Err(PolicyError::SharedPublishAheadTooShort(
                self.publish_ahead_seconds,
            ));
        }
        Ok(())
    }

    /// How long before its activation a key must be listed by every place the documents are
    /// published to (the activation gate, [`ManagedKeySet::hold_unlisted`]): half the
    /// publish-ahead, at most [`GATE_LEAD_MAX_SECONDS`]. Half, so a successor created
    /// publish-ahead before it activates has half of that to reach the buckets before the gate
    /// looks.
    pub fn gate_lead_seconds(&self) -> i64 {
        (self.publish_ahead_seconds / 2).clamp(1, GATE_LEAD_MAX_SECONDS)
    }

    /// The most keys the JWKS holds at once under this policy: the next key, the active one,
    /// and every key retired within the last token lifetime (plus leeway).
    pub fn most_published_keys(&self) -> i64 {
        let period = self.rotation_period_seconds.max(1);
        let retained = self
            .max_token_seconds
            .saturating_add(REMOVAL_LEEWAY_SECONDS)
            .saturating_add(period - 1)
            / period;
        retained.saturating_add(2)
    }
}

/// A rotation policy that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Publish-ahead below the minimum.
    #[error(
        "--key-publish-ahead of {0}s is too short: relying parties need time to fetch a key before it signs (at least {MIN_PUBLISH_AHEAD_SECONDS}s; the default is 24h)"
    )]
    PublishAheadTooShort(i64),
    /// A rotation period that does not leave room to publish the successor ahead.
    #[error(
        "--key-rotation-period ({period}s) must be longer than --key-publish-ahead ({publish_ahead}s): each key is published that long before it takes over"
    )]
    PeriodNotAfterPublishAhead {
        /// The rotation period.
        period: i64,
        /// The publish-ahead.
        publish_ahead: i64,
    },
    /// Publish-ahead too short for replicas that share a store.
    #[error(
        "--key-publish-ahead of {0}s is too short for keys shared through a Kubernetes Secret: a new key must reach every replica (up to {FOLLOW_LAG_SECONDS}s) and then every client of each, kube-apiserver's FetchKeys included, which re-read it at least every {MIN_PUBLISH_AHEAD_SECONDS}s, before it signs (at least {MIN_SHARED_PUBLISH_AHEAD_SECONDS}s; the default is 24h)"
    )]
    SharedPublishAheadTooShort(i64),
    /// A non-positive token lifetime.
    #[error("the longest token lifetime must be positive, got {0}s")]
    MaxTokenSeconds(i64),
}

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

/// Why a key could not be revoked.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    /// No such key.
    #[error("there is no key {0}: `warrant keys list` shows the keys")]
    Unknown(String),
    /// Revoked already.
    #[error("key {kid} was revoked already, at {at}")]
    AlreadyRevoked {
        /// The key ID.
        kid: String,
        /// When.
        at: Timestamp,
    },
}

/// What a revocation did.
#[derive(Debug, Clone)]
pub struct Revoked {
    /// The set without the key.
    pub keys: ManagedKeySet,
    /// The state the key was in.
    pub was: KeyState,
    /// The key that signs from now on, when the revoked key was signing: the next key brought
    /// forward, or a new one.
    pub replaced_by: Option<Replacement>,
}

/// The key that took over signing from a revoked key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replacement {
    /// The next key, published since the given time, signs now instead of at its activation.
    BroughtForward {
        /// Its kid.
        kid: String,
        /// When it was published (relying parties that fetched the JWKS since have it).
        published_at: Timestamp,
    },
    /// A new key, published and signing now (no relying party has fetched it yet).
    New {
        /// Its kid.
        kid: String,
    },
    /// None yet: no key could be made (the key holder cannot be reached). Nothing signs until
    /// the store's writer makes one (see [`ManagedKeySet::stopped`]).
    Pending {
        /// Why no key could be made.
        cause: String,
    },
}

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
        self.retire_at(index).map(|retire| {
            plus(
                retire,
                key.max_token_seconds.saturating_add(REMOVAL_LEEWAY_SECONDS),
            )
        })
    }

    fn state_of(&self, index: usize, now: Timestamp) -> KeyState {
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

    fn active_index(&self, now: Timestamp) -> Option<usize> {
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
            });
        }
        let last = self.keys.last()?;
        let due = plus(last.activate_at, policy.rotation_period_seconds);
        let create_at = plus(due, -policy.publish_ahead_seconds);
        let activate_at = due.max(plus(
            whole_second(now.max(create_at)),
            policy.publish_ahead_seconds,
        ));
        Some(Successor {
            create_at,
            activate_at,
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

    /// Rotation: the records as they should be at `now` under `policy`, or `None` if they
    /// already are. It drops removed keys; activates the earliest key at once if none has
    /// activated yet (a new set: nothing has signed, so nothing can be stale); raises the token
    /// lifetime recorded on keys that still sign or will, if the policy now allows longer
    /// tokens; and creates the successor once it is due (see [`successor`](Self::successor)),
    /// activating when it must or, if rotation runs late, `publish-ahead` after now.
    ///
    /// `generate` makes a new key of `policy.key_type` (randomness is its only effect).
    pub fn rotate(
        &self,
        policy: &RotationPolicy,
        now: Timestamp,
        mut generate: impl FnMut(KeyType) -> Result<SigningKey, KeyError>,
    ) -> Result<Option<ManagedKeySet>, KeyError> {
        let now = whole_second(now);
        let mut changed = false;
        let mut keys: Vec<ManagedKey> = Vec::with_capacity(self.keys.len() + 1);
        for (i, key) in self.keys.iter().enumerate() {
            if self.state_of(i, now) == KeyState::Removed {
                changed = true;
            } else {
                keys.push(key.clone());
            }
        }
        if keys.is_empty() || self.stopped_at(now).is_some() {
            // A new set, or nothing signs since the signing key was revoked: a key that signs
            // at once (nothing can have a stale copy of the key set without it that matters:
            // no token has been signed since).
            keys.push(ManagedKey::new(
                generate(policy.key_type)?,
                now,
                now,
                policy.max_token_seconds,
            ));
            changed = true;
        } else if let Some(first) = keys.first_mut()
            && first.activate_at > now
        {
            // Nothing has ever signed: the earliest key starts now.
            first.activate_at = now;
            changed = true;
        }
        let active = keys.iter().rposition(|k| k.activate_at <= now).unwrap_or(0);
        for key in keys.iter_mut().skip(active) {
            if key.max_token_seconds < policy.max_token_seconds {
                key.max_token_seconds = policy.max_token_seconds;
                changed = true;
            }
        }
        // Revocations are never dropped (see `Revocation`). The stop is, once no key that
        // signed before it remains (it was their retirement).
        let revoked = self.revoked.clone();
        let stopped = self
            .stopped
            .filter(|stop| keys.iter().any(|k| k.activate_at < *stop));
        changed |= stopped != self.stopped;
        let mut set = ManagedKeySet {
            keys,
            revoked,
            stopped,
            purpose: self.purpose,
        };
        if let Some(successor) = set.successor(policy, now)
            && successor.create_at <= now
        {
            set.keys.push(ManagedKey::new(
                generate(policy.key_type)?,
                now,
                successor.activate_at,
                policy.max_token_seconds,
            ));
            changed = true;
        }
        Ok(changed.then_some(set))
    }

    /// The activation gate: no key signs before every publish target lists it. Each key that
    /// is not signing yet, activates within the gate's lead ([`RotationPolicy::gate_lead_seconds`])
    /// of `now`, and that `listed` (what every published JWKS lists, as read back) does not list
    /// by its own key material ([`ListedKeys::lists`]) is held:
    /// its activation moves to `now` plus twice the lead, and the key signing now signs on
    /// until then (its retirement, and so its removal, move with it). `None` if no key is held.
    ///
    /// Bounded: each hold moves an activation at most two leads ahead of `now`, so once the
    /// targets list the key it signs within two leads; while they do not, it is held again a
    /// lead later (one store write per lead). The gate never holds the first key of a set
    /// (nothing signs before it) and never takes back a key already signing. Pure, like
    /// [`rotate`](Self::rotate): the key manager calls it as the store's writer.
    pub fn hold_unlisted(
        &self,
        policy: &RotationPolicy,
        now: Timestamp,
        listed: &ListedKeys,
    ) -> Option<(ManagedKeySet, Vec<Hold>)> {
        let now = whole_second(now);
        let active = self.active_index(now)?;
        let lead = policy.gate_lead_seconds();
        let horizon = plus(now, lead);
        let until = plus(now, lead.saturating_mul(2));
        let mut set = self.clone();
        let mut holds = Vec::new();
        for key in set.keys.iter_mut().skip(active + 1) {
            if key.activate_at > now
                && key.activate_at <= horizon
                && !listed.lists(key.key.verifying_key())
            {
                holds.push(Hold {
                    kid: key.kid().to_owned(),
                    from: key.activate_at,
                    to: until,
                });
                key.activate_at = until;
            }
        }
        if holds.is_empty() {
            return None;
        }
        set.keys.sort_by(|a, b| {
            (a.activate_at, a.published_at, a.kid()).cmp(&(b.activate_at, b.published_at, b.kid()))
        });
        Some((set, holds))
    }

    /// When the activation gate next has to look: the earliest time a key not signing yet
    /// enters the gate's lead, if that is after `now`. Keys already within it are looked at
    /// whenever what the targets list changes.
    pub fn next_gate_check(&self, policy: &RotationPolicy, now: Timestamp) -> Option<Timestamp> {
        let lead = policy.gate_lead_seconds();
        self.keys
            .iter()
            .filter(|k| k.activate_at > now)
            .map(|k| plus(k.activate_at, -lead))
            .filter(|t| *t > now)
            .min()
    }

    /// An operator's rotation (`warrant keys rotate`): start the next rotation now instead of
    /// when it is due. If a next key already exists, it activates at the earliest safe moment
    /// (`publish-ahead` after it was published, and not before `now`); otherwise a successor is
    /// created now and activates `publish-ahead` from now. The set is first brought up to date
    /// with [`rotate`](Self::rotate). `None` if nothing could be brought forward.
    pub fn rotate_early(
        &self,
        policy: &RotationPolicy,
        now: Timestamp,
        mut generate: impl FnMut(KeyType) -> Result<SigningKey, KeyError>,
    ) -> Result<Option<ManagedKeySet>, KeyError> {
        let now = whole_second(now);
        let rotated = self.rotate(policy, now, &mut generate)?;
        let changed = rotated.is_some();
        let mut set = rotated.unwrap_or_else(|| self.clone());
        let active = set.active_index(now).unwrap_or(0);
        if let Some(next) = set.keys.get_mut(active + 1) {
            let earliest = plus(next.published_at, policy.publish_ahead_seconds).max(now);
            if earliest < next.activate_at {
                next.activate_at = earliest;
                return Ok(Some(set));
            }
            return Ok(changed.then_some(set));
        }
        set.keys.push(ManagedKey::new(
            generate(policy.key_type)?,
            now,
            plus(now, policy.publish_ahead_seconds),
            policy.max_token_seconds,
        ));
        Ok(Some(set))
    }
    /// An operator's revocation (`warrant keys revoke`): key `kid` leaves the set at once (so
    /// it leaves the JWKS and verifies nothing), and is remembered for good (see
    /// [`Revocation`]). If it was signing, a key signs in its place from `now`, without
    /// waiting for publish-ahead: the next key, if one is published, brought forward (relying
    /// parties that fetched the JWKS since its publication have it already); else a new key.
    /// If `generate` cannot make that new key (its holder out of reach), the revocation is
    /// recorded all the same, and signing stops ([`stopped`](Self::stopped)): no key signs
    /// until the store's writer can make one, which then signs at once. A revocation is about
    /// the relying parties, never the holder: it is never refused for want of a new key. The
    /// set is first brought up to date with [`rotate`](Self::rotate) if `generate` can make the
    /// keys that needs; else the rotation is left to the store's writer.
    ///
    /// Keys retired before the revoked one keep verifying until `now` plus their token
    /// lifetime at the latest: their retirement moves to the replacement's activation.
    pub fn revoke(
        &self,
        kid: &str,
        policy: &RotationPolicy,
        now: Timestamp,
        mut generate: impl FnMut(KeyType) -> Result<SigningKey, KeyError>,
    ) -> Result<Revoked, RevokeError> {
        let now = whole_second(now);
        if let Some(r) = self.revoked.iter().find(|r| r.kid == kid) {
            return Err(RevokeError::AlreadyRevoked {
                kid: kid.to_owned(),
                at: r.revoked_at,
            });
        }
        // Whatever rotation is due is done first, if a key can be made for it; if not (a
        // holder out of reach), it is left to the store's writer: a revocation never waits for
        // a new key unless it needs one to sign (below).
        let mut set = match self.rotate(policy, now, &mut generate) {
            Ok(Some(rotated)) => rotated,
            Ok(None) | Err(_) => self.clone(),
        };
        let index = set
            .keys
            .iter()
            .position(|k| k.kid() == kid)
            .ok_or_else(|| RevokeError::Unknown(kid.to_owned()))?;
        let was = set.state_of(index, now);
        let key = set.keys.remove(index);
        set.revoked.push(Revocation {
            kid: key.kid().to_owned(),
            revoked_at: now,
            forget_at: plus(
                now,
                key.max_token_seconds.saturating_add(REMOVAL_LEEWAY_SECONDS),
            ),
            held_in: key.key().remote_key().map(|remote| remote.locator()),
        });
        let replaced_by = if was == KeyState::Active {
            // The keys after it in activation order had not activated: the first takes over.
            Some(match set.keys.get_mut(index) {
                Some(next) => {
                    next.activate_at = now;
                    Replacement::BroughtForward {
                        kid: next.kid().to_owned(),
                        published_at: next.published_at,
                    }
                }
                None => match generate(policy.key_type) {
                    Ok(key) => {
                        let new = ManagedKey::new(key, now, now, policy.max_token_seconds);
                        let kid = new.kid().to_owned();
                        set.keys.push(new);
                        Replacement::New { kid }
                    }
                    Err(cause) => {
                        set.stopped = Some(now);
                        Replacement::Pending {
                            cause: cause.to_string(),
                        }
                    }
                },
            })
        } else {
            None
        };
        Ok(Revoked {
            keys: set,
            was,
            replaced_by,
        })
    }
}

#[cfg(test)]
mod tests;
