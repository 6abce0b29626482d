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
//! `WARRANT_BENCH_SECONDS` the time per case, default 5).
//!
//! A module reads `SOFTHSM2_CONF` when it is initialized, and setting the environment of a
//! running process is `unsafe`: the benchmark re-runs itself with a temporary SoftHSM2's
//! configuration (warrant-testkit's `softhsm`).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_types,
    clippy::disallowed_methods,
    clippy::indexing_slicing
)]

use std::path::PathBuf;
use std::sync::Arc;

use warrant_hsm::{HsmKey, HsmMetrics, Pkcs11Key, Pkcs11Uri, Token, TokenConfig};
use warrant_testkit::signing_rate::{
    Op, against_raw, issuer, run, seconds, sign_detached, sign_token, token_signing_input,
};
use warrant_testkit::softhsm::{PIN, SoftHsm2};
use warrant_token::{KeyType, SigningKey};

fn main() {
    let Some(dir) = std::env::var_os("WARRANT_HSM_BENCH_DIR").map(PathBuf::from) else {
        let temp = tempfile::tempdir().unwrap();
        let softhsm = SoftHsm2::create(temp.path());
        let status = softhsm
            .command(std::env::current_exe().unwrap())
            .env("WARRANT_HSM_BENCH_DIR", softhsm.dir())
            .status()
            .unwrap();
        std::process::exit(status.code().unwrap_or(1));
    };
    let softhsm = SoftHsm2::at(&dir);
    softhsm.init_token("bench");
    let uri: Pkcs11Uri = softhsm
        .uri("bench", &softhsm.pin_file("pin", PIN))
        .parse()
        .unwrap();
    let seconds = seconds();
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
                "| {name} | {concurrency} | {sessions} | {} |",
                result.cells().join(" | ")
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
                let cells = if compare {
                    runtime.block_on(against_raw(op, raw(&key), concurrency, seconds))
                } else {
                    let [rate, p50, p99] = runtime.block_on(run(op, concurrency, seconds)).cells();
                    [rate, p50, p99, "-".to_owned(), "-".to_owned()]
                };
                println!(
                    "| {name} | {concurrency} | {path} | {} |",
                    cells.join(" | ")
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

/// `C_Sign` alone, over a signing input as long as a token's.
fn raw(key: &HsmKey) -> Op {
    let signer = Pkcs11Key::new(key.clone());
    let input = token_signing_input();
    Arc::new(move || {
        let signer = signer.clone();
        let input = input.clone();
        Box::pin(async move {
            signer.sign(input).await.unwrap();
        })
    })
}
