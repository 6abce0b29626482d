//! The whole review pipeline with a warm cache, as a TokenReview runs it: parse and verify the
//! token (signature, issuer, audience, time), then check its service account, pod and node in
//! an in-memory store of thousands of pods. `make bench` runs it; docs/benchmarks.md has figures.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use warrant_objects::{MemorySource, Objects, check_token_objects};
use warrant_testkit::{Crowd, NOW};
use warrant_token::{Claims, KeyType, SigningKey, Verifier};

const ISSUER: &str = "https://warrant.bench";
const PODS: usize = 5_000;

fn bench(c: &mut Criterion) {
    let now = Timestamp::from_second(NOW).unwrap();
    let crowd = Crowd::new(PODS);
    let source = Arc::new(MemorySource::new());
    crowd.fill(&source);
    let objects = Objects::new(source);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();

    for (name, key_type) in [("RS256", KeyType::Rsa2048), ("ES256", KeyType::P256)] {
        let key = SigningKey::generate(key_type).unwrap();
        let verifier = Verifier::new(
            vec![ISSUER.into()],
            vec![ISSUER.into()],
            vec![key.verifying_key().clone()],
        );
        let token = key
            .sign(&Claims::new(crowd.token(
                ISSUER,
                4_321,
                vec![ISSUER.into()],
                NOW,
                NOW + 3600,
            )))
            .unwrap();
        c.bench_function(&format!("review/{name}"), |b| {
            b.iter(|| {
                let verified = verifier.verify(black_box(&token), &[], now).unwrap();
                runtime
                    .block_on(check_token_objects(&objects, &verified.claims, now))
                    .unwrap();
                black_box(verified.user_info())
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
