//! Asking kube-apiserver on a caller's behalf: TokenReview (delegated authentication) and
//! SubjectAccessReview (delegated authorization), the way kube's delegating servers ask
//! (spec §5.4, §7.4): a 10 s timeout per attempt, kube's webhook retry backoff for failures
//! that may pass (500 ms, ×1.5, 20 % jitter, at most 5 attempts), and a 10 s cache of answers.
//! Failures are never cached. Concurrent misses for the same question share one call, run as a
//! task of its own ([`warrant_flight::SingleFlight`]): a burst of requests with one new token
//! asks kube-apiserver once, a caller that hangs up leaves nothing behind once the call ends,
//! and at most [`DelegationOptions::max_in_flight`] calls run at once; past that, callers are
//! answered 429 at once rather than held.
//!
//! How long one call may run, whoever waits for it: `attempts × timeout` plus the waits between
//! attempts. With kube's defaults, 5 × 10 s + (0.5 + 0.75 + 1.125 + 1.69) s × at most 1.2
//! (jitter), under 55 s.
//!
//! The caches expire by the server's [`Clock`](crate::Clock), not by a timer, so tests move the
//! clock instead of waiting. (moka would expire entries by its own clock, which tests cannot
//! move; a bounded map of a few thousand entries is all this needs.)

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
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
    /// The most calls to kube-apiserver in flight at once, per resource (TokenReview,
    /// SubjectAccessReview); a caller that would start one more is answered 429.
    pub max_in_flight: usize,
}

/// The default for [`DelegationOptions::max_in_flight`]: a healthy kube-apiserver answers a
/// review in milliseconds, so this many at once is thousands a second; a stalled one holds each
/// for up to a minute, and this many is what warrant holds for it (connections, and tokens of
/// at most [`MAX_DELEGATED_TOKEN_BYTES`]).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 128;

/// The longest bearer token sent to kube-apiserver's TokenReview. Real tokens (service account
/// JWTs, OIDC ID tokens with groups) are a few kilobytes; a longer one is refused as an invalid
/// bearer token without asking, so a stalled lookup holds at most this much of a caller's.
pub const MAX_DELEGATED_TOKEN_BYTES: usize = 64 * 1024;

impl Default for DelegationOptions {
    fn default() -> Self {
        DelegationOptions {
            timeout: Duration::from_secs(10),
            allow_ttl: Duration::from_secs(10),
            deny_ttl: Duration::from_secs(10),
            backoff: Backoff::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
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
    Transport(#[source] Arc<kube::Error>),
    /// An attempt took longer than the timeout.
    #[error("kube-apiserver did not answer within {0:?}")]
    Timeout(Duration),
    /// The answer could not be read.
    #[error("kube-apiserver's answer could not be read: {0}")]
    Decode(#[source] Arc<serde_json::Error>),
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
            kube::Error::SerdeError(e) => DelegationError::Decode(Arc::new(e)),
            other => DelegationError::Transport(Arc::new(other)),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    resource: &'static str,
    result: &'static str,
}

/// Counts of delegated calls and cache use, with the resource (`tokenreviews`,
/// `subjectaccessreviews`) as a label; the calls in flight, and the callers refused because
/// too many were.
#[derive(Debug, Clone, Default)]
pub(crate) struct DelegationMetrics {
    calls: Family<CallLabels, Counter>,
    cache: Family<CallLabels, Counter>,
    overloaded: Counter,
}

impl DelegationMetrics {
    /// Registers the families as `<prefix>_requests`, `<prefix>_cache`, `<prefix>_in_flight`
    /// (the gauge of `in_flight`) and `<prefix>_overloaded`.
    pub(crate) fn register(
        &self,
        registry: &mut Registry,
        prefix: &str,
        what: &str,
        in_flight: Gauge,
    ) {
        registry.register(
            format!("{prefix}_in_flight"),
            format!("Requests to kube-apiserver for {what} in flight"),
            in_flight,
        );
        registry.register(
            format!("{prefix}_overloaded"),
            format!(
                "Callers answered 429 because the most requests for {what} were already in flight"
            ),
            self.overloaded.clone(),
        );
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

    pub(crate) fn overloaded(&self) {
        self.overloaded.inc();
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
