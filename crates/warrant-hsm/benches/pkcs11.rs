//! SoftHSM2's raw signing rate through warrant-hsm, and warrant's issuing rate with the same
//! keys, in one run on one token. Not a test: it prints signatures per second and p50/p99
//! latency.
//!
//! - Raw: `C_Sign` for RS256 (RSA 2048, `CKM_SHA256_RSA_PKCS`) and ES256 (P-256, SHA-256 in
//!   aws-lc then `CKM_ECDSA`), at 1 and 32 concurrent callers, through
//!   [`warrant_hsm::Pkcs11Key`] on a tokio runtime.
//! - Issuing: `warrant_issuer::Issuer::sign_token` (what TokenRequest calls once a request is
//!   authorized and its claims built) and `Issuer::sign_detached` (what Sign calls), with the
//!   token's key as a `SigningKey::remote` in the issuer's key set, as `warrant serve
//!   --key-pkcs11-uri` has it; each next to the raw rate measured just before and after it, and
//!   the same calls with an in-memory key of the same type (the cost against in-memory keys).
//!
//! `cargo bench -p warrant-hsm --bench pkcs11` (`WARRANT_HSM_MODULE` overrides the module;
//! `WARRANT_HSM_BENCH_SECONDS` the time per case, default 5).
//!
//! A module reads `SOFTHSM2_CONF` when it is initialized, and setting the environment of a
//! running process is `unsafe`: the benchmark re-runs itself with a temporary configuration.

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_types,
    clippy::disallowed_methods,
    clippy::indexing_slicing
)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_audit::Auditor;
use warrant_clock::Clock;
use warrant_hsm::{HsmKey, HsmMetrics, Pkcs11Key, Pkcs11Uri, Token, TokenConfig};
use warrant_issuer::{Issuer, Settings};
use warrant_keys::KeySet;
use warrant_token::{Binding, Claims, ExpirationPolicy, KeyType, NewToken, ObjectRef, SigningKey};

/// One signing operation, started afresh for each call.
type Op = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

fn module() -> PathBuf {
    std::env::var_os("WARRANT_HSM_MODULE").map_or_else(
        || PathBuf::from(warrant_hsm::SOFTHSM2_MODULE),
        PathBuf::from,
    )
}

fn main() {
    let Some(dir) = std::env::var_os("WARRANT_HSM_BENCH_DIR").map(PathBuf::from) else {
        let temp = tempfile::tempdir().unwrap();
        let tokens = temp.path().join("tokens");
        std::fs::create_dir(&tokens).unwrap();
        let conf = temp.path().join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                tokens.display()
            ),
        )
        .unwrap();
        let status = Command::new(std::env::current_exe().unwrap())
            .env("SOFTHSM2_CONF", &conf)
            .env("WARRANT_HSM_BENCH_DIR", temp.path())
            .status()
            .unwrap();
        std::process::exit(status.code().unwrap_or(1));
    };
    let status = Command::new("softhsm2-util")
        .args([
            "--init-token",
            "--free",
            "--label",
            "bench",
            "--pin",
            "1234",
            "--so-pin",
            "5678",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("softhsm2-util (apt-get install softhsm2)");
    assert!(status.success());
    let pin = dir.join("pin");
    std::fs::write(&pin, "1234").unwrap();
    // Readable by this user only: warrant refuses a PIN file every user can read.
    std::fs::set_permissions(&pin, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let uri: Pkcs11Uri = format!(
        "pkcs11:token=bench?module-path={}&pin-source=file:{}",
        module().display(),
        pin.display()
    )
    .parse()
    .unwrap();
    let seconds: u64 = std::env::var("WARRANT_HSM_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    println!("Raw C_Sign by sessions in the pool:\n");
    println!("| algorithm | concurrency | sessions | signatures/s | p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    for (name, key_type, id) in [
        ("RS256 (RSA 2048)", KeyType::Rsa2048, 1u8),
        ("ES256 (P-256)", KeyType::P256, 2),
    ] {
        for (concurrency, sessions) in [(1usize, 1usize), (32, 4), (32, 32)] {
            let key = key_on(&uri, sessions, key_type, id, name);
            let result = runtime.block_on(run(raw(&key), concurrency, seconds));
            println!(
                "| {name} | {concurrency} | {sessions} | {:.0} | {} | {} |",
                result.rate(),
                ms(result.pct(0.50)),
                ms(result.pct(0.99))
            );
        }
    }

    println!("\nIssuing through warrant's issuer core, 4 sessions (the default):\n");
    println!(
        "| algorithm | concurrency | path | tokens/s | p50 | p99 | raw C_Sign/s around it | issuing / raw |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, key_type, id) in [
        ("RS256", KeyType::Rsa2048, 1u8),
        ("ES256", KeyType::P256, 2),
    ] {
        let key = key_on(&uri, 4, key_type, id, name);
        let in_hsm = issuer(SigningKey::remote(
            key.verifying_key().clone(),
            Arc::new(Pkcs11Key::new(key.clone())),
        ));
        let in_memory = issuer(SigningKey::generate(key_type).unwrap());
        for concurrency in [1usize, 32] {
            for (path, op, compare) in [
                (
                    "TokenRequest (sign_token), HSM key",
                    sign_token(&in_hsm),
                    true,
                ),
                (
                    "Sign (sign_detached), HSM key",
                    sign_detached(&in_hsm),
                    true,
                ),
                (
                    "TokenRequest (sign_token), in-memory key",
                    sign_token(&in_memory),
                    false,
                ),
                (
                    "Sign (sign_detached), in-memory key",
                    sign_detached(&in_memory),
                    false,
                ),
            ] {
                let (before, result, after) = if compare {
                    let before = runtime
                        .block_on(run(raw(&key), concurrency, seconds))
                        .rate();
                    let result = runtime.block_on(run(op, concurrency, seconds));
                    let after = runtime
                        .block_on(run(raw(&key), concurrency, seconds))
                        .rate();
                    (before, result, after)
                } else {
                    (0.0, runtime.block_on(run(op, concurrency, seconds)), 0.0)
                };
                let (raw_rate, ratio) = if compare {
                    let raw_rate = (before + after) / 2.0;
                    (
                        format!("{before:.0} / {after:.0}"),
                        format!("{:.0} %", 100.0 * result.rate() / raw_rate),
                    )
                } else {
                    ("-".to_owned(), "-".to_owned())
                };
                println!(
                    "| {name} | {concurrency} | {path} | {:.0} | {} | {} | {raw_rate} | {ratio} |",
                    result.rate(),
                    ms(result.pct(0.50)),
                    ms(result.pct(0.99)),
                );
            }
        }
    }
}

/// The key `id` on a fresh handle on the token with `sessions` sessions, generated on first use.
fn key_on(uri: &Pkcs11Uri, sessions: usize, key_type: KeyType, id: u8, label: &str) -> HsmKey {
    let token = Token::open(
        TokenConfig::new(uri.clone()).sessions(sessions),
        HsmMetrics::default(),
    )
    .unwrap();
    match token.key(&[id], None) {
        Ok(key) => key,
        Err(_) => token.generate(key_type, &[id], label).unwrap(),
    }
}

/// An issuer signing with `key`, as `warrant serve` builds it (no audit log).
fn issuer(key: SigningKey) -> Issuer {
    let settings = Settings {
        issuers: vec!["https://warrant.bench".into()],
        api_audiences: vec!["https://warrant.bench".into()],
        jwks_uri: "https://warrant.bench/openid/v1/jwks".into(),
        expiration: ExpirationPolicy::default(),
        signature_cache_entries: 0,
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

/// `C_Sign` alone, over a signing input as long as a token's.
fn raw(key: &HsmKey) -> Op {
    let signer = Pkcs11Key::new(key.clone());
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims()).unwrap());
    let input = format!("eyJhbGciOiJFUzI1NiIsImtpZCI6ImJlbmNoIn0.{payload}").into_bytes();
    Arc::new(move || {
        let signer = signer.clone();
        let input = input.clone();
        Box::pin(async move {
            signer.sign(input).await.unwrap();
        })
    })
}

/// TokenRequest's signature: the claims serialized, signed and assembled into a compact JWS.
fn sign_token(issuer: &Issuer) -> Op {
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
fn sign_detached(issuer: &Issuer) -> Op {
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

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

struct Measured {
    latencies: Vec<Duration>,
    elapsed: Duration,
}

impl Measured {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn pct(&self, p: f64) -> Duration {
        let i = ((self.latencies.len() as f64 * p) as usize).min(self.latencies.len() - 1);
        self.latencies[i]
    }
}

/// Runs `op` from `concurrency` tasks for `seconds`.
async fn run(op: Op, concurrency: usize, seconds: u64) -> Measured {
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
