//! Asking kube-apiserver on a caller's behalf: TokenReview (delegated authentication) and
//! SubjectAccessReview (delegated authorization), the way kube's delegating servers ask
//! (spec §5.4, §7.4): a 10 s timeout per attempt, kube's webhook retry backoff for failures
//! that may pass (500 ms, ×1.5, 20 % jitter, at most 5 attempts), and a 10 s cache of answers.
//! Failures are never cached. Concurrent misses for the same question share one call, run as a
//! task of its own ([`warrant_flight::SingleFlight`]): a burst of requests with one new token
//! asks kube-apiserver once, a caller that hangs up leaves nothing behind once the call ends,
//! and at most [`DelegationOptions::max_in_flight`] calls run at once; past that, callers get
//! [`DelegationError::Overloaded`] at once rather than being held.
//!
//! Both delegations are one machine, [`Lookup`]: cache, then single flight, then the retried
//! call, then the answer kept for its TTL. Each use supplies only its key, its review and how
//! to read kube-apiserver's reply (`authn::delegated`, `authz::delegated`).
//!
//! **Overload has one answer**, whichever delegation is full: `429 TooManyRequests` with
//! `Retry-After: 1` ([`OVERLOAD_RETRY_AFTER_SECONDS`]), kube-apiserver's own answer when its
//! max-inflight limit is reached. It is neither a refusal of the caller's credentials nor a
//! decision about its request: kube's webhook clients (kube-apiserver calling warrant's
//! TokenReview) and client-go retry a 429 that names a delay, and do not retry a bare 503.
//!
//! How long one call may run, whoever waits for it: `attempts × timeout` plus the waits between
//! attempts. With kube's defaults, 5 × 10 s + (0.5 + 0.75 + 1.125 + 1.69) s × at most 1.2
//! (jitter), under 55 s.
//!
//! The caches are warrant-cache's [`ExpiringCache`]: an entry is valid until the time the
//! server's [`Clock`](crate::Clock) gave it, not until a timer fires, so tests move the clock
//! instead of waiting.

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use warrant_cache::ExpiringCache;
use warrant_flight::{FlightError, SingleFlight};

/// What a caller turned away because too many lookups are in flight is told to wait before
/// retrying (`Retry-After`), for either delegation: kube-apiserver's max-inflight answer.
pub const OVERLOAD_RETRY_AFTER_SECONDS: u32 = 1;

/// How many answers each delegation keeps.
const CACHE_ENTRIES: u64 = 8192;

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
    /// kube-apiserver's answer contradicts itself (a SubjectAccessReview both allowed and
    /// denied).
    #[error("kube-apiserver's {review} both allowed and denied")]
    Contradictory {
        /// The review's kind.
        review: &'static str,
    },
    /// Too many lookups of this kind were already in flight to start another; nothing was
    /// asked. The caller is told to retry ([`OVERLOAD_RETRY_AFTER_SECONDS`]).
    #[error("{limit} {review}s already in flight")]
    Overloaded {
        /// The review's kind.
        review: &'static str,
        /// The most in flight at once.
        limit: usize,
    },
    /// The lookup's task ended without an answer, or could not be started.
    #[error(transparent)]
    Flight(FlightError),
}

impl DelegationError {
    /// True for failures kube's webhook client retries: server errors (500), throttling (429),
    /// timeouts (504, or no answer in time), and failed connections.
    fn retryable(&self) -> bool {
        match self {
            DelegationError::Status { code, .. } => matches!(code, 429 | 500 | 504),
            DelegationError::Transport(_) | DelegationError::Timeout(_) => true,
            DelegationError::Decode(_)
            | DelegationError::Contradictory { .. }
            | DelegationError::Overloaded { .. }
            | DelegationError::Flight(_) => false,
        }
    }

    /// True if nothing was asked because too many lookups were in flight: the caller is to
    /// retry, neither refused nor allowed.
    pub fn is_overload(&self) -> bool {
        matches!(self, DelegationError::Overloaded { .. })
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

/// One attempt at a question to kube-apiserver: [`Create`] sends a review; tests script
/// replies. Each attempt is bounded by [`DelegationOptions::timeout`] and retried by [`Lookup`].
pub(crate) trait Attempt: Send + Sync + 'static {
    /// kube-apiserver's reply.
    type Reply: Send + 'static;
    /// Asks once.
    fn attempt(&self) -> impl Future<Output = Result<Self::Reply, DelegationError>> + Send;
}

/// A review created through `api` (kube-apiserver answers in the returned object).
pub(crate) struct Create<K> {
    pub(crate) api: Api<K>,
    pub(crate) review: K,
}

impl<K> Attempt for Create<K>
where
    K: Clone + Serialize + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    type Reply = K;

    async fn attempt(&self) -> Result<K, DelegationError> {
        self.api
            .create(&PostParams::default(), &self.review)
            .await
            .map_err(DelegationError::from_kube)
    }
}

/// An answer kube-apiserver gave, as it is kept: answers that let the caller in are kept for
/// [`DelegationOptions::allow_ttl`], the others for [`DelegationOptions::deny_ttl`].
pub(crate) trait Answer: Clone + Send + Sync + 'static {
    /// True if the answer authenticates (or allows).
    fn allows(&self) -> bool;
}

/// A delegated lookup, written once for both delegations: the cache (by warrant's clock),
/// then the single flight, then the call retried with kube's backoff, then the answer kept for
/// its TTL. Failures are never kept. See the module docs.
pub(crate) struct Lookup<K, A> {
    /// The resource, as metrics label it (`tokenreviews`).
    resource: &'static str,
    /// The review's kind, for messages (`TokenReview`).
    review: &'static str,
    options: DelegationOptions,
    cache: ExpiringCache<K, A>,
    in_flight: SingleFlight<K, Result<A, DelegationError>>,
    metrics: DelegationMetrics,
}

impl<K, A> std::fmt::Debug for Lookup<K, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookup")
            .field("resource", &self.resource)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<K, A> Lookup<K, A>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    A: Answer,
{
    /// A lookup of `review`s (`resource` in metrics), made as `options` say.
    pub(crate) fn new(
        resource: &'static str,
        review: &'static str,
        options: DelegationOptions,
    ) -> Self {
        Lookup {
            resource,
            review,
            cache: ExpiringCache::new(CACHE_ENTRIES),
            in_flight: SingleFlight::new(options.max_in_flight),
            options,
            metrics: DelegationMetrics::default(),
        }
    }

    /// The options the lookup was made with.
    pub(crate) fn options(&self) -> &DelegationOptions {
        &self.options
    }

    /// Registers the lookup's metrics as `<prefix>_*` (see [`DelegationMetrics::register`]).
    pub(crate) fn register_metrics(&self, registry: &mut Registry, prefix: &str, what: &str) {
        self.metrics
            .register(registry, prefix, what, self.in_flight.gauge());
    }

    /// The answer to the question `key` at `now`: kept, or asked through `question()` (made
    /// only on a miss) and read by `interpret`, shared with concurrent askers of the same key.
    pub(crate) async fn answer<Q: Attempt>(
        &self,
        key: K,
        now: Timestamp,
        question: impl FnOnce() -> Q,
        interpret: fn(Q::Reply) -> Result<A, DelegationError>,
    ) -> Result<A, DelegationError> {
        if let Some(answer) = self.cache.get(&key, now) {
            self.metrics.cache(self.resource, true);
            return Ok(answer);
        }
        self.metrics.cache(self.resource, false);
        let (options, metrics, resource) =
            (self.options.clone(), self.metrics.clone(), self.resource);
        let flight = self.in_flight.join(key.clone(), move || {
            let question = question();
            async move {
                let reply = retried(&question, &options, &metrics, resource).await?;
                interpret(reply)
            }
        });
        let answer = match flight {
            Ok(flight) => flight.answer().await.map_err(DelegationError::Flight)?,
            Err(FlightError::Overloaded { limit }) => {
                self.metrics.overloaded();
                return Err(DelegationError::Overloaded {
                    review: self.review,
                    limit,
                });
            }
            Err(e) => return Err(DelegationError::Flight(e)),
        }?;
        let ttl = if answer.allows() {
            self.options.allow_ttl
        } else {
            self.options.deny_ttl
        };
        self.cache.insert_for(key, answer.clone(), now, ttl);
        Ok(answer)
    }
}

/// Asks `question`, retrying as kube's webhook client does.
async fn retried<Q: Attempt>(
    question: &Q,
    options: &DelegationOptions,
    metrics: &DelegationMetrics,
    resource: &'static str,
) -> Result<Q::Reply, DelegationError> {
    let attempts = options.backoff.attempts.max(1);
    let mut attempt = 0;
    loop {
        let result = match tokio::time::timeout(options.timeout, question.attempt()).await {
            Ok(result) => result,
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
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// What a scripted kube-apiserver does at one attempt.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        /// Answers, allowing or not, after a second.
        Answer(bool),
        /// Fails with this HTTP status.
        Fail(u16),
        /// Never answers.
        Hang,
    }

    /// A kube-apiserver that follows a script, one step per attempt (then answers "allowed"),
    /// and counts the attempts.
    #[derive(Clone, Default)]
    struct Script {
        steps: Arc<Mutex<VecDeque<Step>>>,
        attempts: Arc<AtomicUsize>,
    }

    impl Script {
        fn then(&self, steps: &[Step]) -> &Self {
            self.steps.lock().unwrap().extend(steps);
            self
        }

        fn attempts(&self) -> usize {
            self.attempts.load(Ordering::SeqCst)
        }
    }

    impl Attempt for Script {
        type Reply = bool;

        async fn attempt(&self) -> Result<bool, DelegationError> {
            self.attempts.fetch_add(1, Ordering::SeqCst);
            let step = self.steps.lock().unwrap().pop_front();
            match step.unwrap_or(Step::Answer(true)) {
                Step::Answer(allowed) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok(allowed)
                }
                Step::Fail(code) => Err(DelegationError::Status {
                    code,
                    reason: String::new(),
                    message: "scripted".to_owned(),
                }),
                Step::Hang => std::future::pending().await,
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Allowed(bool);

    impl Answer for Allowed {
        fn allows(&self) -> bool {
            self.0
        }
    }

    fn read(allowed: bool) -> Result<Allowed, DelegationError> {
        Ok(Allowed(allowed))
    }

    fn lookup(options: DelegationOptions) -> Arc<Lookup<&'static str, Allowed>> {
        Arc::new(Lookup::new("tests", "Test", options))
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    async fn ask(
        lookup: &Lookup<&'static str, Allowed>,
        script: &Script,
        key: &'static str,
        now: Timestamp,
    ) -> Result<Allowed, DelegationError> {
        lookup.answer(key, now, || script.clone(), read).await
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

    /// An answer is kept for its TTL on warrant's clock (the `now` passed in), an allowing one
    /// for `allow_ttl` and a refusing one for `deny_ttl`, and asked again once it has expired.
    #[tokio::test(start_paused = true)]
    async fn answers_are_kept_for_their_ttl_by_warrants_clock() {
        let lookup = lookup(DelegationOptions {
            allow_ttl: Duration::from_secs(10),
            deny_ttl: Duration::from_secs(5),
            ..DelegationOptions::default()
        });
        let script = Script::default();
        script.then(&[Step::Answer(true), Step::Answer(false), Step::Answer(false)]);
        assert_eq!(
            ask(&lookup, &script, "a", at(0)).await.unwrap(),
            Allowed(true)
        );
        assert_eq!(
            ask(&lookup, &script, "a", at(9)).await.unwrap(),
            Allowed(true)
        );
        assert_eq!(script.attempts(), 1, "a hit asks nothing");
        // Expired: asked again, and kube-apiserver has changed its mind.
        assert_eq!(
            ask(&lookup, &script, "a", at(10)).await.unwrap(),
            Allowed(false)
        );
        assert_eq!(script.attempts(), 2);
        // A refusal is kept for the shorter deny TTL.
        assert_eq!(
            ask(&lookup, &script, "a", at(14)).await.unwrap(),
            Allowed(false)
        );
        assert_eq!(script.attempts(), 2);
        assert_eq!(
            ask(&lookup, &script, "a", at(15)).await.unwrap(),
            Allowed(false)
        );
        assert_eq!(script.attempts(), 3);
        // Another key is another question.
        assert_eq!(
            ask(&lookup, &script, "b", at(15)).await.unwrap(),
            Allowed(true)
        );
        assert_eq!(script.attempts(), 4);
    }

    /// Concurrent askers of one question share one call; the question is made only on a miss.
    #[tokio::test(start_paused = true)]
    async fn concurrent_askers_of_one_question_share_one_call() {
        let lookup = lookup(DelegationOptions::default());
        let script = Script::default();
        let made = AtomicUsize::new(0);
        let question = || {
            made.fetch_add(1, Ordering::SeqCst);
            script.clone()
        };
        let answers =
            futures::future::join_all((0..16).map(|_| lookup.answer("a", at(0), question, read)))
                .await;
        assert!(answers.iter().all(|a| matches!(a, Ok(Allowed(true)))));
        assert_eq!(script.attempts(), 1);
        assert_eq!(made.load(Ordering::SeqCst), 1, "joiners make no question");
        assert_eq!(lookup.in_flight.in_flight(), 0, "the call left the flight");
    }

    /// Failures that may pass are retried with kube's backoff, up to the attempts; others are
    /// not; a failure is never kept.
    #[tokio::test(start_paused = true)]
    async fn failures_are_retried_as_kube_retries_and_never_kept() {
        let lookup = lookup(DelegationOptions::default());
        let script = Script::default();
        // Two 500s and a timeout, then an answer: four attempts, one answer.
        script.then(&[Step::Fail(500), Step::Fail(429), Step::Hang]);
        let start = tokio::time::Instant::now();
        assert_eq!(
            ask(&lookup, &script, "a", at(0)).await.unwrap(),
            Allowed(true)
        );
        assert_eq!(script.attempts(), 4);
        // The waits between attempts (0.5, 0.75, 1.125 s, up to 20 % more) and the 10 s timeout.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(10_000 + 2_375 + 1_000)
                && took <= Duration::from_secs(16),
            "{took:?}"
        );

        // Failing for good: five attempts, then the last error; not kept.
        script.then(&[Step::Fail(500); 5]);
        let error = ask(&lookup, &script, "b", at(0)).await.unwrap_err();
        assert!(
            matches!(error, DelegationError::Status { code: 500, .. }),
            "{error:?}"
        );
        assert_eq!(script.attempts(), 4 + 5);
        assert_eq!(
            ask(&lookup, &script, "b", at(0)).await.unwrap(),
            Allowed(true)
        );
        assert_eq!(script.attempts(), 4 + 5 + 1);

        // A refusal of warrant itself (403) is not retried.
        script.then(&[Step::Fail(403)]);
        let error = ask(&lookup, &script, "c", at(0)).await.unwrap_err();
        assert!(
            matches!(error, DelegationError::Status { code: 403, .. }),
            "{error:?}"
        );
        assert_eq!(script.attempts(), 4 + 5 + 1 + 1);
    }

    /// Past the limit of calls in flight, a new question is refused at once with the typed
    /// overload (counted), nothing asked; a question already in flight is still joined.
    #[tokio::test(start_paused = true)]
    async fn past_the_limit_a_new_question_is_overload() {
        let lookup = lookup(DelegationOptions {
            max_in_flight: 1,
            ..DelegationOptions::default()
        });
        let script = Script::default();
        script.then(&[Step::Hang; 5]);
        let first = {
            let (lookup, script) = (lookup.clone(), script.clone());
            tokio::spawn(async move { ask(&lookup, &script, "a", at(0)).await })
        };
        tokio::task::yield_now().await;
        assert_eq!(lookup.in_flight.in_flight(), 1);
        let error = ask(&lookup, &script, "b", at(0)).await.unwrap_err();
        assert!(error.is_overload(), "{error:?}");
        assert_eq!(error.to_string(), "1 Tests already in flight");
        assert_eq!(lookup.metrics.overloaded.get(), 1);
        assert_eq!(
            script.attempts(),
            1,
            "nothing asked for the refused question"
        );
        // The running question is joined, limit or not, and ends by its own bound.
        let joined = ask(&lookup, &script, "a", at(0)).await.unwrap_err();
        assert!(matches!(joined, DelegationError::Timeout(_)), "{joined:?}");
        assert!(matches!(
            first.await.unwrap(),
            Err(DelegationError::Timeout(_))
        ));
        assert_eq!(script.attempts(), 5);
        // Room again.
        assert_eq!(
            ask(&lookup, &script, "b", at(0)).await.unwrap(),
            Allowed(true)
        );
    }
}
