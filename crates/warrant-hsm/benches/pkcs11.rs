//! SoftHSM2's raw signing rate through warrant-hsm: `C_Sign` for RS256 (RSA 2048,
//! `CKM_SHA256_RSA_PKCS`) and ES256 (P-256, SHA-256 in aws-lc then `CKM_ECDSA`), at 1 and 32
//! concurrent callers, through [`warrant_hsm::Pkcs11Key`] on a tokio runtime (the path
//! warrant's issuer uses). Not a test: it prints signatures per second and p50/p99 latency.
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

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use warrant_hsm::{HsmMetrics, Pkcs11Key, Pkcs11Uri, Token, TokenConfig};
use warrant_token::KeyType;

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

    println!("| algorithm | concurrency | sessions | signatures/s | p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    for (name, key_type, id) in [
        ("RS256 (RSA 2048)", KeyType::Rsa2048, 1u8),
        ("ES256 (P-256)", KeyType::P256, 2),
    ] {
        for (concurrency, sessions) in [(1usize, 1usize), (32, 4), (32, 32)] {
            let token = Token::open(
                TokenConfig::new(uri.clone()).sessions(sessions),
                HsmMetrics::default(),
            )
            .unwrap();
            let key = match token.key(&[id], None) {
                Ok(key) => key,
                Err(_) => token.generate(key_type, &[id], name).unwrap(),
            };
            let signer = Pkcs11Key::new(key);
            let (count, mut latencies, elapsed) =
                runtime.block_on(run(signer, concurrency, Duration::from_secs(seconds)));
            latencies.sort();
            let pct = |p: f64| {
                latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)]
            };
            println!(
                "| {name} | {concurrency} | {sessions} | {:.0} | {:.2} ms | {:.2} ms |",
                count as f64 / elapsed.as_secs_f64(),
                pct(0.50).as_secs_f64() * 1e3,
                pct(0.99).as_secs_f64() * 1e3,
            );
        }
    }
}

async fn run(
    signer: Pkcs11Key,
    concurrency: usize,
    length: Duration,
) -> (usize, Vec<Duration>, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|i| {
            let signer = signer.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let input =
                    format!("eyJhbGciOiJFUzI1NiIsImtpZCI6ImJlbmNoIn0.eyJzdWIiOiJ7aX0ifQ{i}")
                        .into_bytes();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    signer.sign(input.clone()).await.unwrap();
                    latencies.push(t.elapsed());
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(length).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    (all.len(), all, started.elapsed())
}
