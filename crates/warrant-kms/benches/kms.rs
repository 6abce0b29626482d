//! moto's raw KMS `Sign` rate, and warrant's issuing rate with keys in that KMS, in one run
//! against one moto server on loopback. Not a test: it prints signatures per second and p50/p99
//! latency (docs/benchmarks.md, "AWS KMS").
//!
//! - Raw: the AWS SDK's `Sign` (`MessageType RAW`, a token-sized input) sent straight from the
//!   same SDK client warrant builds (its HTTPS connector, no deadline, no bound on calls in
//!   progress), at 1 and 32 concurrent callers.
//! - Issuing: `warrant_issuer::Issuer::sign_token` (TokenRequest's signature) and
//!   `Issuer::sign_detached` (Sign's), with the key as warrant serves it (`KmsKey`, through
//!   `Kms::call`: the `--kms-concurrency` bound, the deadline, the metrics), each between two
//!   raw runs; at 32 concurrent requests with `--kms-concurrency 32` and with the default 16.
//!
//! `cargo bench -p warrant-kms --bench kms` (`WARRANT_BENCH_SECONDS`: the time per case,
//! default 5).

#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_types,
    clippy::disallowed_methods
)]

use std::sync::Arc;

use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::MessageType;
use warrant_keys::KeyHolder as _;
use warrant_keys::KeyPurpose;
use warrant_kms::{Kms, KmsConfig, KmsHolder, KmsKey, KmsMetrics, KmsUri, signing_algorithm};
use warrant_testkit::servers::Emulator;
use warrant_testkit::signing_rate::{
    Op, against_raw, issuer, run, seconds, sign_detached, sign_token, token_signing_input,
};
use warrant_token::{KeyType, SigningKey};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let seconds = seconds();
    let moto = runtime.block_on(Emulator::moto());
    let endpoint = format!("http://127.0.0.1:{}", moto.port());
    let open = |concurrency: usize| {
        let uri: KmsUri = "aws-kms://us-east-1/bench".parse().unwrap();
        let config = KmsConfig::new(uri)
            .endpoint(endpoint.clone())
            .concurrency(concurrency)
            .credentials(aws_credential_types::Credentials::new(
                "testing", "testing", None, None, "bench",
            ));
        runtime
            .block_on(Kms::open(config, KmsMetrics::default()))
            .unwrap()
    };
    let (kms32, kms16) = (open(32), open(16));
    let holder = KmsHolder::new(kms32.clone());

    println!("moto's raw Sign:\n");
    println!("| algorithm | concurrency | signatures/s | p50 | p99 |");
    println!("|---|---|---|---|---|");
    let keys: Vec<(&str, SigningKey)> = [("RS256", KeyType::Rsa2048), ("ES256", KeyType::P256)]
        .into_iter()
        .map(|(name, key_type)| {
            (
                name,
                runtime
                    .block_on(holder.generate(key_type, KeyPurpose::Tokens))
                    .unwrap(),
            )
        })
        .collect();
    for (name, key) in &keys {
        for concurrency in [1, 32] {
            let result = runtime.block_on(run(raw(&kms32, key), concurrency, seconds));
            println!(
                "| {name} | {concurrency} | {} |",
                result.cells().join(" | ")
            );
        }
    }

    println!("\nIssuing through warrant's issuer core with the key in KMS:\n");
    println!(
        "| algorithm | concurrent requests | --kms-concurrency | path | tokens/s | p50 | p99 | raw Sign/s around it | issuing / raw |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, key) in &keys {
        for (concurrency, kms) in [(1, &kms32), (32, &kms32), (32, &kms16)] {
            let arn = key.remote_key().unwrap().locator();
            let public = key.verifying_key().clone();
            let in_kms = issuer(SigningKey::remote(
                public.clone(),
                Arc::new(KmsKey::new(kms.clone(), arn, public)),
            ));
            let bound = if concurrency == 1 {
                "-".to_owned()
            } else {
                kms.available().to_string()
            };
            for (path, op) in [
                ("TokenRequest (sign_token)", sign_token(&in_kms)),
                ("Sign (sign_detached)", sign_detached(&in_kms)),
            ] {
                let cells =
                    runtime.block_on(against_raw(op, raw(&kms32, key), concurrency, seconds));
                println!(
                    "| {name} | {concurrency} | {bound} | {path} | {} |",
                    cells.join(" | ")
                );
            }
        }
    }
    drop(moto);
}

/// `Sign` alone, from the SDK client, over a signing input as long as a token's.
fn raw(kms: &Kms, key: &SigningKey) -> Op {
    let client = kms.client().clone();
    let arn: Arc<str> = key.remote_key().unwrap().locator().into();
    let algorithm = signing_algorithm(key.algorithm());
    let input = Blob::new(token_signing_input());
    Arc::new(move || {
        let (client, arn, algorithm, input) = (
            client.clone(),
            arn.clone(),
            algorithm.clone(),
            input.clone(),
        );
        Box::pin(async move {
            client
                .sign()
                .key_id(&*arn)
                .message(input)
                .message_type(MessageType::Raw)
                .signing_algorithm(algorithm)
                .send()
                .await
                .unwrap();
        })
    })
}
