//! What the key holders' benchmarks (warrant-hsm's `pkcs11`, warrant-kms's `kms`) share: the
//! issuer as `warrant serve` builds it around one key, TokenRequest's and Sign's signatures
//! through it, a token's signing input for the holder's raw rate, and the loop that runs an
//! operation from N concurrent tasks and reports signatures a second and latency percentiles.
//! Benchmarks read the wall clock; tests never use this module.

#![allow(
    clippy::disallowed_types,
    clippy::disallowed_methods,
    clippy::indexing_slicing,
    clippy::unwrap_used
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_audit::Auditor;
use warrant_clock::Clock;
use warrant_issuer::{Issuer, Settings};
use warrant_keys::KeySet;
use warrant_token::{Binding, Claims, ExpirationPolicy, NewToken, ObjectRef, SigningKey};

/// One signing operation, started afresh for each call.
pub type Op = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The seconds each case runs: `WARRANT_BENCH_SECONDS`, default 5.
pub fn seconds() -> u64 {
    std::env::var("WARRANT_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
}

/// An issuer signing with `key`, as `warrant serve` builds it (no audit log, no signature
/// cache).
pub fn issuer(key: SigningKey) -> Issuer {
    let settings = Settings {
        issuers: vec!["https://warrant.bench".into()],
        api_audiences: vec!["https://warrant.bench".into()],
        jwks_uri: "https://warrant.bench/openid/v1/jwks".into(),
        expiration: ExpirationPolicy::default(),
        signature_cache_entries: 0,
        jwks_x5c: false,
    };
    Issuer::new(
        settings,
        KeySet::new(key, Vec::new()),
        Clock::System,
        Auditor::disabled(),
    )
}

/// A pod-bound token's claims, as TokenRequest builds them.
fn claims() -> Claims {
    let now = Clock::System.now().as_second();
    Claims::new(NewToken {
        issuer: "https://warrant.bench",
        namespace: "demo",
        service_account: ObjectRef::new("app", "0f0e7c52-6c39-4f2b-9a57-3f1e2d4c5b6a"),
        audiences: vec!["vault".to_owned()],
        binding: Binding::Pod {
            pod: ObjectRef::new("app-7d4b9c-x2x9z", "9b1c2d3e-4f5a-4b6c-8d7e-1f2a3b4c5d6e"),
            node: Some(ObjectRef::new(
                "node-1",
                "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9",
            )),
        },
        issued_at: now,
        expires_at: now + 3600,
        warn_after: None,
        jti: warrant_token::new_jti(),
    })
}

/// A signing input as long as a pod-bound token's (`header.payload`), for a holder's raw rate.
pub fn token_signing_input() -> Vec<u8> {
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims()).unwrap());
    format!("eyJhbGciOiJFUzI1NiIsImtpZCI6ImJlbmNoIn0.{payload}").into_bytes()
}

/// TokenRequest's signature: the claims serialized, signed and assembled into a compact JWS.
pub fn sign_token(issuer: &Issuer) -> Op {
    let issuer = issuer.clone();
    let claims = Arc::new(claims());
    Arc::new(move || {
        let issuer = issuer.clone();
        let claims = claims.clone();
        Box::pin(async move {
            let published = issuer.published();
            let now = issuer.clock().now();
            issuer.sign_token(&published, now, &claims).await.unwrap();
        })
    })
}

/// Sign's signature: a header and a detached signature over the claims kube-apiserver sent.
pub fn sign_detached(issuer: &Issuer) -> Op {
    let issuer = issuer.clone();
    let encoded: Arc<str> = URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&claims()).unwrap())
        .into();
    Arc::new(move || {
        let issuer = issuer.clone();
        let encoded = encoded.clone();
        Box::pin(async move {
            let published = issuer.published();
            let now = issuer.clock().now();
            issuer
                .sign_detached(&published, now, &encoded)
                .await
                .unwrap();
        })
    })
}

/// A duration in milliseconds, two decimals.
fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// What one case measured.
pub struct Measured {
    latencies: Vec<Duration>,
    elapsed: Duration,
}

impl Measured {
    /// Operations a second.
    #[allow(clippy::cast_precision_loss)]
    pub fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at quantile `p` (0.5, 0.99).
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    pub fn pct(&self, p: f64) -> Duration {
        let i = ((self.latencies.len() as f64 * p) as usize).min(self.latencies.len() - 1);
        self.latencies[i]
    }

    /// The table cells a run reports: signatures a second, p50 and p99.
    pub fn cells(&self) -> [String; 3] {
        [
            format!("{:.0}", self.rate()),
            ms(self.pct(0.50)),
            ms(self.pct(0.99)),
        ]
    }
}

/// Runs `op` from `concurrency` tasks for `seconds`.
pub async fn run(op: Op, concurrency: usize, seconds: u64) -> Measured {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let op = op.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    op().await;
                    latencies.push(t.elapsed());
                    // An in-memory key signs without ever waiting: give the other tasks (and
                    // the timer that ends the run) their turn, as a server's I/O would.
                    tokio::task::yield_now().await;
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Measured { latencies, elapsed }
}

/// Measures `op` between two runs of `raw` (the holder's own rate, measured just before and
/// just after so that a machine shared with other work is compared with itself), and returns
/// the table row's cells: rate, p50, p99, "raw before / after", and the share of the raw rate.
pub async fn against_raw(op: Op, raw: Op, concurrency: usize, seconds: u64) -> [String; 5] {
    let before = run(raw.clone(), concurrency, seconds).await.rate();
    let measured = run(op, concurrency, seconds).await;
    let after = run(raw, concurrency, seconds).await.rate();
    let raw_rate = f64::midpoint(before, after);
    let [rate, p50, p99] = measured.cells();
    [
        rate,
        p50,
        p99,
        format!("{before:.0} / {after:.0}"),
        format!("{:.0} %", 100.0 * measured.rate() / raw_rate),
    ]
}
