//! warrant's one expiring cache, for answers that hold until a time: verified signatures (until
//! the token's `exp`), kube-apiserver's TokenReview and SubjectAccessReview answers (for their
//! TTLs).
//!
//! - **Expiry on warrant's clock.** Each entry carries the time it expires, from the `now` the
//!   caller passes; a lookup at or after that time misses. Tests that set warrant's clock see
//!   entries expire exactly when they should, without waiting.
//! - **Bounded memory.** moka holds the entries: at most `capacity`, evicting the least valuable
//!   first when full (never all at once), and dropping each entry once its lifetime has passed
//!   on moka's own clock too, so expired entries do not linger until looked up. moka's clock is
//!   only a memory bound; whether an entry is still valid is always warrant's clock's call.

use std::hash::Hash;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use moka::sync::Cache;

/// The longest an entry is kept, whatever it asks for: a year and a bit, beyond any lifetime
/// warrant deals in (and far from overflowing moka's clock).
pub const MAX_LIFETIME: Duration = Duration::from_secs(400 * 86_400);

#[derive(Clone)]
struct Entry<V> {
    value: V,
    expires: Timestamp,
    /// How long moka keeps it: the lifetime at insertion, capped.
    keep: Duration,
}

struct KeepFor;

impl<K, V> moka::Expiry<K, Entry<V>> for KeepFor {
    // moka hands over its own clock's reading, which is not used: the lifetime was fixed from
    // warrant's clock when the entry was made.
    #[allow(clippy::disallowed_types)]
    fn expire_after_create(
        &self,
        _key: &K,
        entry: &Entry<V>,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(entry.keep)
    }
}

/// Values by key, each until its expiry on warrant's clock; at most `capacity` of them.
pub struct ExpiringCache<K, V> {
    /// `None` for a capacity of 0: nothing is remembered.
    entries: Option<Cache<K, Entry<V>>>,
}

impl<K, V> std::fmt::Debug for ExpiringCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpiringCache")
            .field("entries", &self.entries.as_ref().map(Cache::entry_count))
            .finish()
    }
}

impl<K, V> ExpiringCache<K, V>
where
    K: Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache of at most `capacity` entries; 0 remembers nothing.
    pub fn new(capacity: u64) -> Self {
        ExpiringCache {
            entries: (capacity > 0).then(|| {
                Cache::builder()
                    .max_capacity(capacity)
                    .expire_after(KeepFor)
                    .build()
            }),
        }
    }

    /// The value for `key`, if one is kept and has not expired at `now`.
    pub fn get(&self, key: &K, now: Timestamp) -> Option<V> {
        let entry = self.entries.as_ref()?.get(key)?;
        (now < entry.expires).then_some(entry.value)
    }

    /// Keeps `value` until `expires` (at most [`MAX_LIFETIME`] from `now`); nothing if that is
    /// not after `now`.
    pub fn insert_until(&self, key: K, value: V, now: Timestamp, expires: Timestamp) {
        let Some(entries) = &self.entries else {
            return;
        };
        if expires <= now {
            return;
        }
        let keep = now
            .duration_until(expires)
            .try_into()
            .unwrap_or(MAX_LIFETIME)
            .min(MAX_LIFETIME);
        entries.insert(
            key,
            Entry {
                value,
                expires,
                keep,
            },
        );
    }

    /// Keeps `value` for `ttl` from `now`; a zero TTL keeps nothing.
    pub fn insert_for(&self, key: K, value: V, now: Timestamp, ttl: Duration) {
        let ttl = SignedDuration::try_from(ttl.min(MAX_LIFETIME)).unwrap_or(SignedDuration::ZERO);
        let expires = now.saturating_add(ttl).unwrap_or(now);
        self.insert_until(key, value, now, expires);
    }

    /// How many entries are kept (moka's estimate).
    pub fn len(&self) -> u64 {
        self.entries.as_ref().map_or(0, |entries| {
            entries.run_pending_tasks();
            entries.entry_count()
        })
    }

    /// True if nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_000 + second).unwrap()
    }

    #[test]
    fn entries_expire_on_the_callers_clock() {
        let cache = ExpiringCache::new(16);
        cache.insert_for("a", 1, at(0), Duration::from_secs(10));
        assert_eq!(cache.get(&"a", at(9)), Some(1));
        assert_eq!(cache.get(&"a", at(10)), None, "expired at its time exactly");
        cache.insert_until("b", 2, at(0), at(5));
        assert_eq!(cache.get(&"b", at(4)), Some(2));
        assert_eq!(cache.get(&"b", at(5)), None);
    }

    #[test]
    fn nothing_is_kept_without_a_future_or_a_capacity() {
        let cache = ExpiringCache::new(16);
        cache.insert_for("zero", 1, at(0), Duration::ZERO);
        cache.insert_until("past", 1, at(10), at(5));
        assert_eq!(cache.get(&"zero", at(0)), None);
        assert_eq!(cache.get(&"past", at(0)), None);
        let off = ExpiringCache::new(0);
        off.insert_for("a", 1, at(0), Duration::from_secs(10));
        assert_eq!(off.get(&"a", at(1)), None);
        assert!(off.is_empty());
    }

    /// Full, it evicts some entries for new ones; it never empties itself.
    #[test]
    fn a_full_cache_stays_bounded_and_keeps_most_entries() {
        let cache = ExpiringCache::new(100);
        for i in 0..1_000u32 {
            cache.insert_for(i, i, at(0), Duration::from_secs(60));
        }
        let kept = cache.len();
        assert!(kept <= 100, "{kept} entries in a cache of 100");
        assert!(kept >= 50, "only {kept} of 100 entries kept");
    }

    #[test]
    fn far_expiries_are_capped_not_overflowed() {
        let cache = ExpiringCache::new(4);
        cache.insert_until("far", 1, at(0), Timestamp::MAX);
        assert_eq!(cache.get(&"far", at(1)), Some(1));
        cache.insert_for("long", 2, at(0), Duration::MAX);
        assert_eq!(cache.get(&"long", at(1)), Some(2));
    }
}
