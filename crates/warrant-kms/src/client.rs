//! One region's KMS, as warrant calls it: the AWS SDK's client with warrant's HTTPS client and
//! clock, every call bounded, retried and counted the same way, and a health that readiness
//! reads.
//!
//! **Credentials** come from AWS's default chain, in its order: the environment
//! (`AWS_ACCESS_KEY_ID`, …), the shared config and credentials files, web identity (EKS's IAM
//! roles for service accounts: `AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN`), the container
//! endpoint (EKS Pod Identity, ECS), then the instance metadata service (IMDSv2). The SDK caches
//! them and fetches new ones before they expire, judging expiry on warrant's clock. SSO and
//! `credential_process` are not built in.
//!
//! **Each call** gets a deadline (5 s by default) that covers its wait for one of the
//! `concurrency` places, every attempt and every backoff. Throttling (`ThrottlingException`)
//! and the server errors KMS documents as retryable are retried with exponential backoff and
//! jitter (50 ms doubling to 1 s) until the deadline; a call that gets no answer at all
//! (refused, reset, timed out) is tried once more. The SDK's own retries and timeouts are off,
//! so there is one policy, on tokio's clock (which a paused test controls).
//!
//! **Health.** A call that cannot reach KMS, or whose credentials fail, makes KMS unavailable:
//! later calls fail at once (TokenRequest 503, Sign `UNAVAILABLE`), `/readyz/keys` names the
//! key and the cause, and warrant-keys' recovery loop ([`Kms::run_recovery`]) asks KMS again
//! with backoff (0.2 s doubling to 5 s) until it answers. While healthy, it asks KMS every 10 s about each key that signs, so a
//! key disabled or deleted behind warrant's back shows in readiness before a request needs it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_sdk_kms::config::{ProvideCredentials, Region, StalledStreamProtectionConfig};
use aws_sdk_kms::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use warrant_clock::Clock;

use crate::endpoint::{Endpoint, EndpointSource, quoted};
use warrant_keys::Health;

use crate::error::{Attempt, KmsError, classify};
use crate::http::KmsHttp;
use crate::metrics::KmsMetrics;
use crate::revoked::RevokedKeys;
use crate::uri::KmsUri;

/// How to reach KMS.
#[derive(Debug, Clone)]
pub struct KmsConfig {
    uri: KmsUri,
    endpoint: Option<String>,
    clock: Clock,
    credentials: Option<aws_sdk_kms::config::SharedCredentialsProvider>,
    deadline: Duration,
    concurrency: usize,
}

impl KmsConfig {
    /// Calls in progress at once, by default: enough to keep a region's KMS busy at its
    /// default request quota (hundreds a second at 10–30 ms each) from one replica.
    pub const DEFAULT_CONCURRENCY: usize = 16;
    /// How long one call may take, by default, retries and waits included.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);

    /// KMS in the region `uri` names, at AWS's endpoint, with AWS's credential chain.
    pub fn new(uri: KmsUri) -> Self {
        KmsConfig {
            uri,
            endpoint: None,
            clock: Clock::System,
            credentials: None,
            deadline: Self::DEFAULT_DEADLINE,
            concurrency: Self::DEFAULT_CONCURRENCY,
        }
    }

    /// A KMS-compatible server instead of AWS's endpoint (`--kms-endpoint`): `https://`, or
    /// `http://` to a loopback address. It wins over any endpoint the AWS SDK reads from the
    /// environment or the config file, which obey the same rule (`endpoint.rs`).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// The clock that signs requests and judges credentials' expiry (a test's).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// These credentials instead of AWS's chain.
    pub fn credentials(mut self, provider: impl ProvideCredentials + 'static) -> Self {
        self.credentials = Some(aws_sdk_kms::config::SharedCredentialsProvider::new(
            provider,
        ));
        self
    }

    /// How long one call may take, retries included.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// At most this many calls in progress at once (at least 1).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }
}

/// Backoff between retries of a throttled call.
const RETRY_INITIAL: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);
/// Attempts of a call that gets no answer at all.
const NO_ANSWER_ATTEMPTS: u32 = 2;

/// KMS in one region. Cheap to clone; clones share the client, its connections and health.
#[derive(Clone)]
pub struct Kms {
    inner: Arc<Inner>,
}

/// A key that signed through this client, whose state the recovery task checks while KMS is
/// healthy (a key disabled or deleted behind warrant's back is then refused by name).
pub(crate) trait Signer: Send + Sync {
    /// Asks KMS for the key's state and remembers whether it can sign.
    fn check_state(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

struct Inner {
    uri: KmsUri,
    name: String,
    endpoint: Endpoint,
    client: aws_sdk_kms::Client,
    deadline: Duration,
    permits: Semaphore,
    health: watch::Sender<Health>,
    metrics: KmsMetrics,
    /// The keys that signed, checked by the recovery task while KMS is healthy.
    signers: Mutex<Vec<Weak<dyn Signer>>>,
    /// The last key any call was about: what a probe asks about.
    last_key: Mutex<Option<String>>,
    /// Keys disposed of as revoked or removed, watched until KMS deletes them (`revoked.rs`).
    revoked: Mutex<RevokedKeys>,
}

impl std::fmt::Debug for Kms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.inner.name)
    }
}

mod recovery;

impl Kms {
    /// The client for `config`. Checks the configuration only: KMS is first asked when a key
    /// is (credentials are fetched then too).
    pub async fn open(config: KmsConfig, metrics: KmsMetrics) -> Result<Kms, KmsError> {
        let http = KmsHttp::new().map_err(KmsError::Tls)?;
        let region = config.uri.region().to_owned();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(region.clone()))
            .http_client(http.clone())
            .time_source(ClockTime(config.clock.clone()))
            .retry_config(RetryConfig::disabled())
            .timeout_config(TimeoutConfig::disabled())
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
        if let Some(credentials) = config.credentials.clone() {
            loader = loader.credentials_provider(credentials);
        }
        let shared = loader.load().await;
        let endpoint = Endpoint::resolve(config.endpoint.as_deref(), &shared, &region).await?;
        let name = match endpoint.configured() {
            Some(url) => format!("AWS KMS at {} ({region})", quoted(url)),
            None => format!("AWS KMS in {region}"),
        };
        let mut kms = aws_sdk_kms::config::Builder::from(&shared);
        // Exactly the endpoint checked, and requests in clear only to loopback whatever happens.
        kms.set_endpoint_url(endpoint.configured().map(str::to_owned));
        kms = kms.http_client(http.for_kms());
        Ok(Kms {
            inner: Arc::new(Inner {
                name,
                endpoint,
                uri: config.uri,
                client: aws_sdk_kms::Client::from_conf(kms.build()),
                deadline: config.deadline,
                permits: Semaphore::new(config.concurrency),
                health: watch::Sender::new(Health::Healthy),
                metrics,
                signers: Mutex::default(),
                last_key: Mutex::default(),
                revoked: Mutex::default(),
            }),
        })
    }

    /// The URI the holder was opened with.
    pub fn uri(&self) -> &KmsUri {
        &self.inner.uri
    }

    /// How messages name KMS: `AWS KMS in us-east-1`, or `AWS KMS at URL (us-east-1)` at a
    /// configured endpoint.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The endpoint KMS's requests go to, as the SDK resolves it (`endpoint.rs`).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint.url
    }

    /// Where [`endpoint`](Self::endpoint) came from.
    pub fn endpoint_source(&self) -> EndpointSource {
        self.inner.endpoint.source
    }

    /// The SDK's client, for what warrant does not wrap (tests, benchmarks).
    pub fn client(&self) -> &aws_sdk_kms::Client {
        &self.inner.client
    }

    /// The metrics.
    pub fn metrics(&self) -> &KmsMetrics {
        &self.inner.metrics
    }

    /// KMS's health now.
    pub fn health(&self) -> Health {
        self.inner.health.borrow().clone()
    }

    /// Follows KMS's health.
    pub fn subscribe_health(&self) -> watch::Receiver<Health> {
        self.inner.health.subscribe()
    }

    /// How many more calls could start now.
    pub fn available(&self) -> usize {
        self.inner.permits.available_permits()
    }

    /// The keys disposed of as revoked or removed, which the recovery task checks.
    pub(crate) fn revoked_keys(&self) -> std::sync::MutexGuard<'_, RevokedKeys> {
        self.inner
            .revoked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers `key` among the keys that sign, which the recovery task checks.
    pub(crate) fn watch_signer(&self, key: Weak<dyn Signer>) {
        let mut signers = self
            .inner
            .signers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        signers.retain(|s| s.strong_count() > 0);
        signers.push(key);
    }

    /// Calls KMS (`op` on `key`, whose kid is `kid`): fails at once while KMS is unavailable,
    /// else runs `call` (one attempt each time it is called) under this client's deadline,
    /// concurrency bound and retry policy, and counts it.
    pub(crate) async fn call<T, E, F, Fut>(
        &self,
        op: &'static str,
        key: Option<&str>,
        kid: Option<&str>,
        call: F,
    ) -> Result<T, KmsError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        self.call_checked(op, key, kid, call, Ok).await
    }

    /// [`call`](Self::call), whose answer is then judged by `check` before the call is counted:
    /// an answer `check` refuses is counted as its error, not as `ok`.
    pub(crate) async fn call_checked<T, U, E, F, Fut>(
        &self,
        op: &'static str,
        key: Option<&str>,
        kid: Option<&str>,
        call: F,
        check: impl FnOnce(T) -> Result<U, KmsError>,
    ) -> Result<U, KmsError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if let Health::Unavailable { holder: kms, cause } = self.health() {
            self.inner.metrics.observe(op, "unavailable", 0.0);
            return Err(KmsError::Unavailable { kms, cause });
        }
        self.call_anyway(op, key, kid, call, check).await
    }

    /// [`call_checked`](Self::call_checked), even while KMS is unavailable (the probes).
    async fn call_anyway<T, U, E, F, Fut>(
        &self,
        op: &'static str,
        key: Option<&str>,
        kid: Option<&str>,
        call: F,
        check: impl FnOnce(T) -> Result<U, KmsError>,
    ) -> Result<U, KmsError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        if let Some(key) = key {
            *self
                .inner
                .last_key
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(key.to_owned());
        }
        let started = Instant::now();
        let deadline = started + self.inner.deadline;
        let answered = self.attempts(op, key, kid, deadline, call).await;
        // Any answer, even one `check` refuses, shows that KMS can be reached.
        match &answered {
            Ok(_) => self.healed(),
            Err(err) if err.breaks_health() => self.broken(err),
            Err(_) => {}
        }
        let result = answered.and_then(check);
        let outcome = match &result {
            Ok(_) => "ok",
            Err(err) => err.kind(),
        };
        self.inner
            .metrics
            .observe(op, outcome, started.elapsed().as_secs_f64());
        result
    }

    async fn attempts<T, E, F, Fut>(
        &self,
        op: &'static str,
        key: Option<&str>,
        kid: Option<&str>,
        deadline: Instant,
        call: F,
    ) -> Result<T, KmsError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let started = Instant::now();
        let no_answer = |cause: &str| KmsError::Unreachable {
            kms: self.inner.name.clone(),
            op,
            cause: cause.to_owned(),
        };
        let Ok(_permit) = tokio::time::timeout_at(deadline, self.inner.permits.acquire()).await
        else {
            return Err(no_answer(&format!(
                "no place among the calls in progress within {:?} (raise --kms-concurrency, or KMS is slow)",
                self.inner.deadline
            )));
        };
        let mut backoff = RETRY_INITIAL;
        let mut attempts = 0u32;
        let mut unanswered = 0u32;
        loop {
            attempts += 1;
            let failed = match tokio::time::timeout_at(deadline, call()).await {
                Err(_) => {
                    return Err(no_answer(&format!(
                        "no answer within {:?}",
                        self.inner.deadline
                    )));
                }
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(err)) => classify(err, &self.inner.name, op, key, kid),
            };
            let last = match failed {
                Attempt::Final(err) => return Err(err),
                Attempt::NoAnswer(err) => {
                    unanswered += 1;
                    if unanswered >= NO_ANSWER_ATTEMPTS {
                        return Err(err);
                    }
                    err
                }
                Attempt::Retry(err) => err,
            };
            let wait = jittered(backoff);
            backoff = (backoff * 2).min(RETRY_MAX);
            if Instant::now() + wait >= deadline {
                return Err(match last {
                    KmsError::Throttled { kms, op, .. } => KmsError::Throttled {
                        kms,
                        op,
                        attempts,
                        waited: started.elapsed(),
                    },
                    other => other,
                });
            }
            tracing::debug!(%op, attempts, ?wait, error = %last, "KMS call failed; retrying");
            tokio::time::sleep(wait).await;
        }
    }

    fn broken(&self, err: &KmsError) {
        let was_healthy = self.inner.health.send_if_modified(|health| {
            let was = health.is_healthy();
            *health = Health::Unavailable {
                holder: self.inner.name.clone(),
                cause: Arc::new(err.clone()),
            };
            was
        });
        if was_healthy {
            tracing::error!(kms = %self.inner.name, error = %err, "KMS is unavailable: keys held there cannot sign until it answers again; asking it again with backoff");
        }
    }

    fn healed(&self) {
        let was_broken = self.inner.health.send_if_modified(|health| {
            let broken = !health.is_healthy();
            *health = Health::Healthy;
            broken
        });
        if was_broken {
            tracing::info!(kms = %self.inner.name, "KMS answers again: keys held there sign again");
        }
    }
}

/// A wait of about `backoff`: between half and all of it, so that replicas throttled at the
/// same moment do not retry at the same moment.
fn jittered(backoff: Duration) -> Duration {
    use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
    let mut byte = [0u8; 1];
    let fraction = match SystemRandom::new().fill(&mut byte) {
        Ok(()) => {
            let [random] = byte;
            f64::from(random) / 255.0
        }
        Err(_) => 1.0,
    };
    backoff.mul_f64(0.5 + fraction / 2.0)
}

/// warrant's clock as the SDK's time source: what signs requests and judges credentials'
/// expiry.
#[derive(Debug)]
struct ClockTime(Clock);

impl aws_smithy_async::time::TimeSource for ClockTime {
    fn now(&self) -> SystemTime {
        let nanos = self.0.now().as_nanosecond();
        let after = u64::try_from(nanos).unwrap_or(0);
        SystemTime::UNIX_EPOCH + Duration::from_nanos(after)
    }
}
