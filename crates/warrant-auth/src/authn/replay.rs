//! The DPoP replay cache: every proof accepted, remembered until the end of its window, so each
//! is accepted once. It never forgets a proof still in its window to make room: forgetting one
//! is what lets it be replayed (issue 31). When it cannot remember a new proof, it refuses it.
//!
//! Who can fill it, and what happens then: every proof is charged to a caller (see
//! [`ReplayCache::record`]), and one caller may hold at most a tenth of the cache
//! ([`OWNER_SHARE_DIVISOR`]); its proofs past that are refused ([`Recorded::OverShare`]) until
//! some of its own expire, and nobody else notices. Filling the whole cache takes ten callers
//! at full share, each holding proofs that passed every check (a caller allowed to ask for
//! tokens, or the holder of a valid key-bound token and its key). Then new proofs are refused
//! for everyone ([`Recorded::Full`]), counted, until entries expire (at the end of their window,
//! `iat + 60 s`: at most 120 s away, for a proof dated the 60 s ahead a window tolerates): key
//! binding stops working for that long; no proof is ever replayed.
//!
//! Time is warrant's clock, passed in: an entry is kept while `now` is before its expiry. Expired
//! entries are dropped in expiry order as new ones come in.
//!
//! Cost: one mutex, one SHA-256 of the proof's key (thumbprint and `jti`), a hash-map insert and
//! a heap push; dropping expired entries is a heap pop each. Memory: about 150 bytes an entry
//! (a 32-byte digest in the map and in the heap, an expiry, a shared owner name), so 15 MiB at
//! the default 100,000 entries, whatever the `jti`s.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use aws_lc_rs::digest;
use jiff::Timestamp;

/// One caller may hold at most `capacity / OWNER_SHARE_DIVISOR` entries (and at least one).
pub(crate) const OWNER_SHARE_DIVISOR: usize = 10;

/// What [`ReplayCache::record`] did with a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// New: remembered until its expiry.
    Fresh,
    /// Seen before, and still remembered: a replay.
    Seen,
    /// Its expiry is not after `now`: there is nothing to remember it for.
    Expired,
    /// The caller already holds its share of the cache.
    OverShare,
    /// The cache is full of unexpired proofs.
    Full,
}

/// A proof's key in the cache: the SHA-256 of its replay key (the key's thumbprint and the
/// `jti`), so every entry has the same size.
type Digest = [u8; 32];

/// Proofs seen, each until its expiry; at most `capacity`, at most `share` per caller.
pub(crate) struct ReplayCache {
    capacity: usize,
    share: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each proof remembered, and whom it is charged to.
    entries: HashMap<Digest, Arc<str>>,
    /// Every entry's expiry, soonest first, to drop expired entries in order.
    expiries: BinaryHeap<Reverse<(Timestamp, Digest)>>,
    /// How many entries each caller holds.
    owners: HashMap<Arc<str>, usize>,
}

impl std::fmt::Debug for ReplayCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayCache")
            .field("capacity", &self.capacity)
            .field("share", &self.share)
            .field("entries", &self.len())
            .finish()
    }
}

impl ReplayCache {
    /// A cache of at most `capacity` entries (at least one), a tenth of them per caller.
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        ReplayCache {
            capacity,
            share: (capacity / OWNER_SHARE_DIVISOR).max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Records the proof known as `replay_key`, charged to `owner`, until `expires`, unless it is
    /// already remembered (a replay), or cannot be: see [`Recorded`]. Two callers racing with the
    /// same proof: exactly one gets [`Recorded::Fresh`].
    pub(crate) fn record(
        &self,
        replay_key: &str,
        owner: &str,
        now: Timestamp,
        expires: Timestamp,
    ) -> Recorded {
        if expires <= now {
            return Recorded::Expired;
        }
        let digest = digest_of(replay_key);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.drop_expired(now);
        if inner.entries.contains_key(&digest) {
            return Recorded::Seen;
        }
        let owner: Arc<str> = match inner.owners.get_key_value(owner) {
            Some((_, held)) if *held >= self.share => return Recorded::OverShare,
            Some((name, _)) => name.clone(),
            None => Arc::from(owner),
        };
        if inner.entries.len() >= self.capacity {
            return Recorded::Full;
        }
        *inner.owners.entry(owner.clone()).or_insert(0) += 1;
        inner.entries.insert(digest, owner);
        inner.expiries.push(Reverse((expires, digest)));
        Recorded::Fresh
    }

    /// How many proofs are remembered (expired ones not yet dropped included).
    pub(crate) fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .len()
    }

    /// The most proofs one caller may hold.
    #[cfg(test)]
    pub(crate) fn share(&self) -> usize {
        self.share
    }
}

impl Inner {
    /// Drops every entry whose expiry is not after `now`, soonest first.
    fn drop_expired(&mut self, now: Timestamp) {
        while let Some(Reverse((expires, digest))) = self.expiries.peek().copied() {
            if expires > now {
                break;
            }
            self.expiries.pop();
            // The heap holds each entry once: an entry is only added when its key is absent.
            if let Some(owner) = self.entries.remove(&digest)
                && let Some(held) = self.owners.get_mut(&owner)
            {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    self.owners.remove(&owner);
                }
            }
        }
    }
}

fn digest_of(replay_key: &str) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, replay_key.as_bytes()).as_ref());
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    #[test]
    fn a_proof_is_fresh_once_until_its_expiry() {
        let cache = ReplayCache::new(100);
        assert_eq!(cache.record("k.1", "a", at(0), at(60)), Recorded::Fresh);
        assert_eq!(cache.record("k.1", "b", at(59), at(119)), Recorded::Seen);
        assert_eq!(cache.record("k.1", "a", at(60), at(120)), Recorded::Fresh);
        assert_eq!(cache.record("k.2", "a", at(0), at(0)), Recorded::Expired);
        assert_eq!(cache.len(), 1);
    }

    /// Full, it refuses new proofs and keeps every proof it holds: each is still a replay.
    /// Once entries expire, there is room again.
    #[test]
    fn a_full_cache_refuses_and_forgets_nothing() {
        let cache = ReplayCache::new(20);
        let mut owners = 0;
        let mut kept = Vec::new();
        while kept.len() < 20 {
            for _ in 0..cache.share() {
                let key = format!("k.{}", kept.len());
                assert_eq!(
                    cache.record(&key, &format!("owner-{owners}"), at(0), at(60)),
                    Recorded::Fresh
                );
                kept.push(key);
            }
            owners += 1;
        }
        assert_eq!(
            cache.record("k.new", "someone-else", at(1), at(61)),
            Recorded::Full
        );
        for key in &kept {
            assert_eq!(cache.record(key, "anyone", at(59), at(61)), Recorded::Seen);
        }
        assert_eq!(
            cache.record("k.new", "someone-else", at(60), at(120)),
            Recorded::Fresh
        );
        assert_eq!(cache.len(), 1);
    }

    /// One caller holds at most its share; others are not affected, and its own expired
    /// entries give it room again.
    #[test]
    fn one_caller_holds_at_most_its_share() {
        let cache = ReplayCache::new(100);
        assert_eq!(cache.share(), 10);
        for i in 0..10 {
            assert_eq!(
                cache.record(&format!("k.{i}"), "greedy", at(i), at(i + 60)),
                Recorded::Fresh
            );
        }
        assert_eq!(
            cache.record("k.more", "greedy", at(10), at(70)),
            Recorded::OverShare
        );
        assert_eq!(
            cache.record("k.other", "other", at(10), at(70)),
            Recorded::Fresh
        );
        // Its first entry expires at 60: one more fits, not two.
        assert_eq!(
            cache.record("k.more", "greedy", at(60), at(120)),
            Recorded::Fresh
        );
        assert_eq!(
            cache.record("k.more2", "greedy", at(60), at(120)),
            Recorded::OverShare
        );
        assert_eq!(
            ReplayCache::new(1).record("k", "a", at(0), at(1)),
            Recorded::Fresh
        );
    }

    /// Entries expire in the order of their expiry, not of their arrival (a proof's `iat` may
    /// be up to its window ahead or behind).
    #[test]
    fn entries_expire_by_their_own_time() {
        let cache = ReplayCache::new(100);
        assert_eq!(cache.record("late", "a", at(0), at(100)), Recorded::Fresh);
        assert_eq!(cache.record("early", "a", at(0), at(10)), Recorded::Fresh);
        assert_eq!(cache.record("x", "b", at(10), at(70)), Recorded::Fresh);
        assert_eq!(cache.len(), 2, "early has expired and gone");
        assert_eq!(cache.record("late", "a", at(99), at(100)), Recorded::Seen);
        assert_eq!(cache.record("early", "a", at(11), at(20)), Recorded::Fresh);
    }
}
