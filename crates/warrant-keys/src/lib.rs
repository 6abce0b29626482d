//! warrant's keys: the one that signs new tokens and every key that verifies them, where they
//! come from, and how managed keys rotate.
//!
//! - A [`KeySet`] is an immutable snapshot of the keys in force, which the server swaps in
//!   whole when the keys change. It knows the signing schedule of its own lifetime, so the key
//!   that signs switches exactly at its activation time, whenever the snapshot was taken.
//! - [`load_static`] and [`StaticKeys`] read kube-apiserver's static key flags, and reload the
//!   files when they change.
//! - [`ManagedKeySet`] is the lifecycle of managed keys (next → active → retired → removed) as
//!   pure functions of the key records, a [`RotationPolicy`] and `now`: no I/O, no clock.
//! - A [`KeyStore`] keeps a managed key set ([`DirStore`] in a directory, [`SecretStore`] in a
//!   Kubernetes Secret shared by replicas, [`MemoryStore`] for tests) in one serialised form
//!   ([`encode`], [`decode`]); a [`KeyManager`] owns a store in a running server: it rotates the
//!   keys on schedule (always, or only while this replica is the [`Leadership`] elected through
//!   a Lease) and publishes every change.
//! - A [`KeyHolder`] keeps a managed set's private keys outside the store (an HSM, a cloud
//!   KMS): the store then records public keys and locators only, and every key it lists must be
//!   vouched for by the holder itself before it is used: a store nobody but its writer vouches
//!   for holds nothing worth stealing and nothing worth writing. A holder is one async value
//!   that carries everything asked of it (its keys, the startup check of the keys that sign
//!   [`check_signing_keys`], reachability, import, its [`HolderAdvice`], its [`Health`]), and
//!   [`keep_healthy`] is the one recovery loop for every holder.
//! - A [`LocalCopy`] is a node's copy of a shared store ([`CopiedStore`] keeps it current), to
//!   start from while the store cannot be reached: a control plane's cold start. It is decoded
//!   through the same holder as the store, so a copy is trusted no more than the store is.
//! - Revocations stay revoked: a store read that is older than what a process has seen (a lower
//!   generation, a revoked key listed again) is refused, and the writer repairs the store
//!   forward (`rollback.rs`). Revoking the signing key when no key can be made to take over
//!   records the revocation and stops signing ([`SigningStopped`]) until one can.

#[macro_use]
mod builders;
mod copy;
mod directory;
mod disposal;
mod holder;
mod holder_check;
mod holder_generate;
mod holder_health;
mod holder_metrics;
mod holder_recovery;
mod leader;
mod lifecycle;
mod listed;
mod manager;
mod metrics;
mod purpose;
mod rollback;
mod secret;
mod shared;
mod static_files;
mod store;
mod store_error;
mod stored;
#[cfg(test)]
mod test_support;

pub use copy::{CopiedStore, CopyState, LocalCopy};
pub use directory::DirStore;
pub use disposal::RETIRE_DISPOSAL_GRACE_SECONDS;
pub use holder::{Disposal, Disposed, Held, HolderAdvice, HolderFuture, KeyHolder};
pub use holder_check::{KeyUnusable, check_signing_keys, signing_keys};
pub use holder_generate::{Generate, with_held_keys};
pub use holder_health::{Health, Recovery, RecoveryPolicy};
pub use holder_metrics::HolderOperations;
pub use holder_recovery::keep_healthy;
pub use leader::{Leadership, LeaseConfig, LeaseError, LeaseHolder, MIN_LEASE_SECONDS};
pub use lifecycle::{
    FOLLOW_LAG_SECONDS, GATE_LEAD_MAX_SECONDS, Hold, KeySchedule, KeyState, LifecycleError,
    MIN_PUBLISH_AHEAD_SECONDS, MIN_SHARED_PUBLISH_AHEAD_SECONDS, ManagedKey, ManagedKeySet,
    PolicyError, REMOVAL_LEEWAY_SECONDS, Replacement, Revocation, RevokeError, Revoked,
    RotationPolicy, Successor,
};
pub use listed::ListedKeys;
pub use manager::{
    ActivationGate, KeyManager, KeyManagerTask, ManagerError, Seed, StoreHealth, Writer,
};
pub use metrics::KeyMetrics;
pub use purpose::KeyPurpose;
pub use secret::{MANAGED_BY, MANAGED_BY_LABEL, SecretStore, WRITTEN_BY_ANNOTATION};
pub use shared::{
    CopyStatus, SharedReports, SharedSecret, SharedSecretConfig, SharedSecretError, StoreStatus,
    Unreadable, WriterStatus,
};
pub use static_files::{
    StaticChange, StaticKeyError, StaticKeyFiles, StaticKeys, StaticReload, StaticWatch,
    load_static,
};
pub use store::{ChangeFeed, KeyStore, MemoryStore, Saved, StoreError, StoreVersion, Stored};
pub use stored::{Decoded, EncodedKeySet, INDEX_FILE, decode, encode, key_file_name};

use jiff::Timestamp;
use warrant_token::{SigningKey, VerifyingKey};

/// The keys in force: the key that signs (and any successors already scheduled to take over,
/// with their activation times), and the verification keys in publication order.
///
/// A managed key set is published as a snapshot that stays correct until
/// [`next_change`](Self::next_change): it holds the keys scheduled to start signing before then,
/// so [`signing_at`](Self::signing_at) switches keys on the second even if the snapshot is
/// replaced a little late.
#[derive(Debug, Clone)]
pub struct KeySet {
    /// The key that signs until the first successor, or since when nothing signs.
    signing: Result<SigningKey, SigningStopped>,
    /// Keys that take over signing at the given times, in ascending order of time.
    successors: Vec<(Timestamp, SigningKey)>,
    verifying: Vec<VerifyingKey>,
    next_change: Option<Timestamp>,
    /// The kids of revoked keys whose tokens may still be presented (not yet expired).
    revoked: Vec<String>,
    /// When these keys stop signing (see [`signing_deadline`](Self::signing_deadline)).
    signing_deadline: Option<Timestamp>,
    /// Managed keys in force with their publication times (see
    /// [`published_keys`](Self::published_keys)).
    published: Vec<PublishedKey>,
}

/// A managed key in force (next, active or retired), private half included, with the time it
/// was first published: what a consumer that derives something of its own from each key needs
/// (the pod certificate CA makes each key's self-signed root, valid from that time).
#[derive(Debug, Clone)]
pub struct PublishedKey {
    /// The key.
    pub key: SigningKey,
    /// When it entered the store, to the second.
    pub published_at: Timestamp,
}

/// Why a key set signs nothing: its signing key was revoked while no key could be made to take
/// over (its holder out of reach; see [`ManagedKeySet::stopped`]). Nothing signs until the
/// store's writer makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "no key signs: the signing key was revoked at {since} and no key could be made to take over yet (its key holder cannot be reached); tokens are signed again once the key store's writer makes one"
)]
pub struct SigningStopped {
    /// When the signing key was revoked.
    pub since: Timestamp,
}

impl KeySet {
    /// A key set signing with `signing` and verifying with `verifying`. The signing key's public
    /// half is always a verification key: it is added (first) if `verifying` lacks it, because a
    /// signing key missing from the JWKS mints tokens nobody can verify. Duplicate keys (the same
    /// key listed twice, or in two files) are kept once, at their first position.
    pub fn new(signing: SigningKey, verifying: Vec<VerifyingKey>) -> Self {
        Self::scheduled(signing, Vec::new(), verifying, None)
    }

    /// A key set whose signing key changes over time: `signing` signs until the first of
    /// `successors` activates, and so on. `next_change` is when this snapshot stops describing
    /// the keys (a key is added or removed, or the schedule moves on); `None` if nothing is
    /// scheduled. Every signing key is also a verification key, as in [`KeySet::new`].
    pub fn scheduled(
        signing: SigningKey,
        mut successors: Vec<(Timestamp, SigningKey)>,
        verifying: Vec<VerifyingKey>,
        next_change: Option<Timestamp>,
    ) -> Self {
        successors.sort_by_key(|(at, _)| *at);
        let mut keys: Vec<VerifyingKey> = Vec::with_capacity(verifying.len() + 1);
        if !verifying.contains(signing.verifying_key()) {
            keys.push(signing.verifying_key().clone());
        }
        for key in verifying {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for (_, successor) in &successors {
            if !keys.contains(successor.verifying_key()) {
                keys.push(successor.verifying_key().clone());
            }
        }
        KeySet {
            signing: Ok(signing),
            successors,
            verifying: keys,
            next_change,
            revoked: Vec::new(),
            signing_deadline: None,
            published: Vec::new(),
        }
    }

    /// A key set that signs nothing since `since` (see [`SigningStopped`]) and verifies with
    /// `verifying`.
    pub fn stopped(
        verifying: Vec<VerifyingKey>,
        since: Timestamp,
        next_change: Option<Timestamp>,
    ) -> Self {
        let mut keys: Vec<VerifyingKey> = Vec::with_capacity(verifying.len());
        for key in verifying {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        KeySet {
            signing: Err(SigningStopped { since }),
            successors: Vec::new(),
            verifying: keys,
            next_change,
            revoked: Vec::new(),
            signing_deadline: None,
            published: Vec::new(),
        }
    }

    /// The same keys, with the kids of revoked keys, so that their tokens are refused by name
    /// (see [`revoked`](Self::revoked)).
    pub fn with_revoked(mut self, revoked: Vec<String>) -> Self {
        self.revoked = revoked;
        self
    }

    /// The same keys, signing only before `deadline` (`None`: for as long as they are in force):
    /// a replica that follows a shared store it cannot read sets it to the earliest moment the
    /// store's writer could have retired the last signing key it knows of.
    pub fn with_signing_deadline(mut self, deadline: Option<Timestamp>) -> Self {
        self.signing_deadline = deadline;
        self
    }

    /// The same keys, recording `published` as the managed keys in force.
    pub fn with_published(mut self, published: Vec<PublishedKey>) -> Self {
        self.published = published;
        self
    }

    /// The managed keys in force, private halves included, with their publication times, in
    /// the order of [`verifying`](Self::verifying); empty for static keys. Unlike
    /// [`verifying`](Self::verifying), a retired key is here with its private half, for a
    /// consumer that must sign something of its own with each key still published.
    pub fn published_keys(&self) -> &[PublishedKey] {
        &self.published
    }

    /// When the signing key changes within this snapshot: the successors' activation times,
    /// in ascending order. A consumer that holds one signing key at a time (a CA) switches at
    /// each.
    pub fn signing_changes(&self) -> impl Iterator<Item = Timestamp> + '_ {
        self.successors.iter().map(|(at, _)| *at)
    }

    /// From when these keys sign nothing (they still verify and are published): `None` while
    /// they sign for as long as they are in force.
    pub fn signing_deadline(&self) -> Option<Timestamp> {
        self.signing_deadline
    }

    /// The kids of revoked keys: none of them verifies, and a token naming one is refused as
    /// signed by a revoked key.
    pub fn revoked(&self) -> &[String] {
        &self.revoked
    }

    /// The same keys, also verifying (and publishing) `extra` keys after its own: static
    /// `--service-account-key-file` keys kept beside managed keys, for example. A revoked key
    /// stays out, even from a static file.
    pub fn with_extra_verifying(mut self, extra: &[VerifyingKey]) -> Self {
        for key in extra {
            if !self.verifying.contains(key) && !self.revoked.iter().any(|r| r == key.kid()) {
                self.verifying.push(key.clone());
            }
        }
        self
    }

    /// The kids among `keys` that are revoked: keys that [`with_extra_verifying`] leaves out,
    /// which a key file should not offer.
    ///
    /// [`with_extra_verifying`]: Self::with_extra_verifying
    pub fn revoked_among<'a>(&self, keys: &'a [VerifyingKey]) -> Vec<&'a str> {
        keys.iter()
            .map(VerifyingKey::kid)
            .filter(|kid| self.revoked.iter().any(|r| r == kid))
            .collect()
    }

    /// The key that signs a token issued at `now`, or why none does.
    pub fn signing_at(&self, now: Timestamp) -> Result<&SigningKey, SigningStopped> {
        match self.successors.iter().rev().find(|(at, _)| *at <= now) {
            Some((_, key)) => Ok(key),
            None => self.signing.as_ref().map_err(|stopped| *stopped),
        }
    }

    /// Every verification key, in publication order.
    pub fn verifying(&self) -> &[VerifyingKey] {
        &self.verifying
    }

    /// When this snapshot stops being current: the next scheduled key change. `None` for keys
    /// that change only when an operator changes them (static key files).
    pub fn next_change(&self) -> Option<Timestamp> {
        self.next_change
    }

    /// True if `other` is this snapshot again: the same keys ([`same_keys`](Self::same_keys)),
    /// the same next change and the same signing deadline, so publishing it changes nothing.
    pub fn same_snapshot(&self, other: &KeySet) -> bool {
        self.same_keys(other)
            && self.next_change == other.next_change
            && self.signing_deadline == other.signing_deadline
    }

    /// True if `other` holds the same keys on the same schedule (so publishing it would change
    /// nothing a client can see, except perhaps the documents' max-age).
    pub fn same_keys(&self, other: &KeySet) -> bool {
        let signing = |set: &KeySet| -> Result<VerifyingKey, SigningStopped> {
            set.signing
                .as_ref()
                .map(|key| key.verifying_key().clone())
                .map_err(|stopped| *stopped)
        };
        self.verifying == other.verifying
            && self.revoked == other.revoked
            && signing(self) == signing(other)
            && self.successors.len() == other.successors.len()
            && self
                .successors
                .iter()
                .zip(&other.successors)
                .all(|((a, x), (b, y))| a == b && x.verifying_key() == y.verifying_key())
    }
}

#[cfg(test)]
mod tests {
    use warrant_token::KeyType;

    use super::*;

    #[test]
    fn signing_key_is_always_published_and_duplicates_collapse() {
        let a = SigningKey::generate(KeyType::P256).unwrap();
        let b = SigningKey::generate(KeyType::P256).unwrap();
        let set = KeySet::new(a.clone(), vec![b.verifying_key().clone()]);
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [a.kid(), b.kid()]);

        let set = KeySet::new(
            a.clone(),
            vec![
                b.verifying_key().clone(),
                a.verifying_key().clone(),
                b.verifying_key().clone(),
            ],
        );
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [b.kid(), a.kid()]);
    }

    #[test]
    fn successors_take_over_on_the_second() {
        let a = SigningKey::generate(KeyType::P256).unwrap();
        let b = SigningKey::generate(KeyType::P256).unwrap();
        let at = |s| Timestamp::from_second(s).unwrap();
        let set = KeySet::scheduled(a.clone(), vec![(at(100), b.clone())], vec![], Some(at(100)));
        assert_eq!(set.signing_at(at(0)).unwrap().kid(), a.kid());
        assert_eq!(
            set.signing_at(at(100) - jiff::SignedDuration::from_nanos(1))
                .unwrap()
                .kid(),
            a.kid()
        );
        assert_eq!(set.signing_at(at(100)).unwrap().kid(), b.kid());
        // Both are published, the current signer first.
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [a.kid(), b.kid()]);
        assert_eq!(set.next_change(), Some(at(100)));

        let extra = SigningKey::generate(KeyType::P256).unwrap();
        let with = set
            .clone()
            .with_extra_verifying(&[extra.verifying_key().clone(), a.verifying_key().clone()]);
        let kids: Vec<&str> = with.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [a.kid(), b.kid(), extra.kid()]);
        assert!(!with.same_keys(&set));
        assert!(set.same_keys(&set.clone()));
    }
}
