//! Asking kube-apiserver on a caller's behalf: TokenReview (delegated authentication) and
//! SubjectAccessReview (delegated authorization), the way kube's delegating servers ask
//! (spec §5.4, §7.4): a 10 s timeout per attempt, kube's webhook retry backoff for failures
//! that may pass (500 ms, ×1.5, 20 % jitter, at most 5 attempts), and a 10 s cache of answers.
//! Failures are never cached. Concurrent misses for the same question share one call
//! ([`SingleFlight`]): a burst of requests with one new token asks kube-apiserver once.
//!
//! The caches expire by the server's [`Clock`](crate::Clock), not by a timer, so tests move the
//! clock instead of waiting. (moka would expire entries by its own clock, which tests cannot
//! move; a bounded map of a few thousand entries is all this needs.)

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How delegated calls are made. The defaults are kube's; tests shorten the backoff.
#[derive(Debug, Clone)]
pub struct DelegationOptions {
    /// How long one attempt may take (kube: 10 s).
    pub timeout: Duration,
    /// How long an answer that allows (or authenticates) is reused (kube: 10 s).
    pub allow_ttl: Duration,
    /// How long an answer that denies (or does not authenticate) is reused (kube: 10 s).
    pub deny_ttl: Duration,
    /// Waits between attempts.
    pub backoff: Backoff,
}

impl Default for DelegationOptions {
    fn default() -> Self {
        DelegationOptions {
            timeout: Duration::from_secs(10),
            allow_ttl: Duration::from_secs(10),
            deny_ttl: Duration::from_secs(10),
            backoff: Backoff::default(),
        }
    }
}

/// Exponential backoff with jitter, as kube's `DefaultAuthWebhookRetryBackoff`.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first wait (500 ms).
    pub initial: Duration,
    /// Each wait is this times the one before (1.5).
    pub factor: f64,
    /// Each wait is lengthened by up to this fraction of itself, at random (0.2).
    pub jitter: f64,
    /// Attempts in all, the first included (5).
    pub attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            factor: 1.5,
            jitter: 0.2,
            attempts: 5,
        }
    }
}

impl Backoff {
    /// The wait before attempt `attempt` (1 is the second attempt), without jitter.
    pub fn base_wait(&self, attempt: u32) -> Duration {
        let exponent = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        self.initial.mul_f64(self.factor.powi(exponent))
    }

    fn wait(&self, attempt: u32) -> Duration {
        let base = self.base_wait(attempt);
        let mut random = [0u8; 4];
        // Jitter only spreads retries out; without randomness, retry without it.
        let fraction = match aws_lc_rs::rand::fill(&mut random) {
            Ok(()) => f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX),
            Err(_) => 0.0,
        };
        base + base.mul_f64(self.jitter * fraction)
    }
}

/// Why a delegated call failed. Never includes the token or the reviewed user's credentials.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DelegationError {
    /// kube-apiserver answered with an error status.
    #[error("kube-apiserver answered {code} {reason}: {message}")]
    Status {
        /// The HTTP status.
        code: u16,
        /// The `Status` reason.
        reason: String,
        /// The `Status` message.
        message: String,
    },
    /// kube-apiserver could not be reached, or the connection failed.
    #[error("cannot reach kube-apiserver: {0}")]
    Transport(String),
    /// An attempt took longer than the timeout.
    #[error("kube-apiserver did not answer within {0:?}")]
    Timeout(Duration),
    /// The answer could not be read.
    #[error("kube-apiserver's answer could not be read: {0}")]
    Decode(String),
}

impl DelegationError {
    /// True for failures kube's webhook client retries: server errors (500), throttling (429),
    /// timeouts (504, or no answer in time), and failed connections.
    fn retryable(&self) -> bool {
        match self {
            DelegationError::Status { code, .. } => matches!(code, 429 | 500 | 504),
            DelegationError::Transport(_) | DelegationError::Timeout(_) => true,
            DelegationError::Decode(_) => false,
        }
    }

    fn from_kube(error: kube::Error) -> DelegationError {
        match error {
            kube::Error::Api(status) => DelegationError::Status {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            kube::Error::SerdeError(e) => DelegationError::Decode(e.to_string()),
            other => DelegationError::Transport(other.to_string()),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    resource: &'static str,
    result: &'static str,
}

/// Counts of delegated calls and cache use, with the resource (`tokenreviews`,
/// `subjectaccessreviews`) as a label.
#[derive(Debug, Clone, Default)]
pub(crate) struct DelegationMetrics {
    calls: Family<CallLabels, Counter>,
    cache: Family<CallLabels, Counter>,
}

impl DelegationMetrics {
    /// Registers both families as `<prefix>_requests` and `<prefix>_cache`.
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str, what: &str) {
        registry.register(
            format!("{prefix}_requests"),
            format!("Requests to kube-apiserver for {what}, by result (success, retry, error)"),
            self.calls.clone(),
        );
        registry.register(
            format!("{prefix}_cache"),
            format!("Answers about {what} looked up in the cache, by result (hit, miss)"),
            self.cache.clone(),
        );
    }

    pub(crate) fn cache(&self, resource: &'static str, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.cache
            .get_or_create(&CallLabels { resource, result })
            .inc();
    }

    fn call(&self, resource: &'static str, result: &'static str) {
        self.calls
            .get_or_create(&CallLabels { resource, result })
            .inc();
    }
}

/// Creates `object` through `api` (a review: kube-apiserver answers in the returned object),
/// retrying as kube's webhook client does.
pub(crate) async fn create<K>(
    api: &Api<K>,
    object: &K,
    options: &DelegationOptions,
    metrics: &DelegationMetrics,
    resource: &'static str,
) -> Result<K, DelegationError>
where
    K: Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let attempts = options.backoff.attempts.max(1);
    let mut attempt = 0;
    loop {
        let result =
            match tokio::time::timeout(options.timeout, api.create(&PostParams::default(), object))
                .await
            {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(e)) => Err(DelegationError::from_kube(e)),
                Err(_) => Err(DelegationError::Timeout(options.timeout)),
            };
        attempt += 1;
        match result {
            Ok(answer) => {
                metrics.call(resource, "success");
                return Ok(answer);
            }
            Err(e) if e.retryable() && attempt < attempts => {
                metrics.call(resource, "retry");
                tracing::debug!(resource, attempt, error = %e, "delegated request failed; retrying");
                tokio::time::sleep(options.backoff.wait(attempt)).await;
            }
            Err(e) => {
                metrics.call(resource, "error");
                return Err(e);
            }
        }
    }
}

/// Answers kept until a time on the server's clock. At most `capacity` entries: when full,
/// expired entries are dropped, and if none had expired, all are (a burst of distinct callers
/// costs re-asking, never unbounded memory).
#[derive(Debug)]
pub(crate) struct ExpiringCache<K, V> {
    entries: Mutex<HashMap<K, (V, Timestamp)>>,
    capacity: usize,
}

impl<K: Eq + Hash, V: Clone> ExpiringCache<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        ExpiringCache {
            entries: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// The answer for `key`, if one was kept and has not expired at `now`.
    pub(crate) fn get(&self, key: &K, now: Timestamp) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(key)
            .filter(|(_, expires)| now < *expires)
            .map(|(value, _)| value.clone())
    }

    /// Keeps `value` for `ttl` from `now`; a zero TTL keeps nothing.
    pub(crate) fn put(&self, key: K, value: V, now: Timestamp, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let Ok(ttl) = SignedDuration::try_from(ttl) else {
            return;
        };
        let expires = now.saturating_add(ttl).unwrap_or(now);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= self.capacity {
            entries.retain(|_, (_, expires)| now < *expires);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (value, expires));
    }
}

/// Calls in progress by key: a caller whose key is already being looked up waits for that
/// lookup's answer instead of starting another.
pub(crate) struct SingleFlight<K, V: Clone> {
    in_flight: Mutex<HashMap<K, Shared<BoxFuture<'static, V>>>>,
}

impl<K, V: Clone> std::fmt::Debug for SingleFlight<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleFlight").finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone, V: Clone + Send + Sync + 'static> SingleFlight<K, V> {
    pub(crate) fn new() -> Self {
        SingleFlight {
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The answer of the lookup in progress for `key`, or of `start()` if there is none.
    /// Whoever sees the lookup finish first removes it, so a finished answer is never handed
    /// out again (that is the cache's job, with its TTL). If every caller gives up before the
    /// lookup finishes, the next caller for `key` takes it up where it was.
    pub(crate) async fn run<F>(&self, key: K, start: impl FnOnce() -> F) -> V
    where
        F: Future<Output = V> + Send + 'static,
    {
        let lookup = {
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            in_flight
                .entry(key.clone())
                .or_insert_with(|| start().boxed().shared())
                .clone()
        };
        let answer = lookup.clone().await;
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if in_flight
            .get(&key)
            .is_some_and(|current| current.ptr_eq(&lookup))
        {
            in_flight.remove(&key);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_lookups_of_one_key_share_one_call_and_a_finished_one_is_not_reused() {
        let flight = SingleFlight::<&str, usize>::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, released) = tokio::sync::watch::channel(false);
        let lookup = || {
            let calls = calls.clone();
            let mut released = released.clone();
            move || async move {
                let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = released.wait_for(|r| *r).await;
                n
            }
        };
        let a = flight.run("k", lookup());
        let b = flight.run("k", lookup());
        let other = flight.run("other", lookup());
        let (answers, _) = tokio::join!(async { tokio::join!(a, b, other) }, async {
            // Let the three lookups register before they are answered.
            tokio::task::yield_now().await;
            release.send_replace(true);
        });
        // "k" was asked once for both callers; "other" had its own call.
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(answers.0, answers.1);
        assert_ne!(answers.0, answers.2);
        // Finished: the next lookup of "k" is a new call.
        assert_eq!(flight.run("k", lookup()).await, 3);
    }

    #[test]
    fn backoff_is_kubes() {
        let backoff = Backoff::default();
        let waits: Vec<u128> = (1..5).map(|a| backoff.base_wait(a).as_millis()).collect();
        assert_eq!(waits, [500, 750, 1125, 1687]);
        for attempt in 1..5 {
            let wait = backoff.wait(attempt);
            let base = backoff.base_wait(attempt);
            assert!(wait >= base && wait <= base.mul_f64(1.2), "{wait:?}");
        }
    }

    #[test]
    fn cache_expires_by_the_clock() {
        let cache = ExpiringCache::new(2);
        let t0 = Timestamp::from_second(1_000).unwrap();
        cache.put("a", 1, t0, Duration::from_secs(10));
        let at = |s: i64| t0 + SignedDuration::from_secs(s);
        assert_eq!(cache.get(&"a", at(9)), Some(1));
        assert_eq!(cache.get(&"a", at(10)), None);
        cache.put("b", 2, t0, Duration::ZERO);
        assert_eq!(cache.get(&"b", t0), None);
        // Full: expired entries make room first; if none expired, everything goes.
        cache.put("b", 2, at(5), Duration::from_secs(10));
        cache.put("c", 3, at(11), Duration::from_secs(10));
        assert_eq!(cache.get(&"b", at(11)), Some(2));
        assert_eq!(cache.get(&"c", at(11)), Some(3));
        cache.put("d", 4, at(12), Duration::from_secs(10));
        assert_eq!(cache.get(&"b", at(12)), None);
        assert_eq!(cache.get(&"d", at(12)), Some(4));
    }
}
