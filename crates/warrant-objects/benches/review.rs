//! The whole review pipeline with a warm cache, as a TokenReview runs it: parse and verify the
//! token (signature, issuer, audience, time), then check its service account, pod and node in
//! an in-memory store of thousands of pods. `make bench` runs it; docs/benchmarks.md has figures.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use warrant_objects::{Kind, MemorySource, Objects, PodInfo, Record, check_token_objects};
use warrant_token::{Binding, Claims, KeyType, NewToken, ObjectRef, SigningKey, Verifier, new_jti};

const ISSUER: &str = "https://warrant.bench";
const NOW: i64 = 1_800_000_000;
const PODS: usize = 5_000;

fn record(uid: String, pod: Option<PodInfo>) -> Record {
    Record {
        uid,
        deletion_timestamp: None,
        pod,
    }
}

fn bench(c: &mut Criterion) {
    let now = Timestamp::from_second(NOW).unwrap();
    let source = Arc::new(MemorySource::new());
    for i in 0..PODS / 10 {
        source.put(
            Kind::ServiceAccount,
            "bench",
            &format!("sa-{i}"),
            record(format!("sa-uid-{i}"), None),
        );
    }
    source.put(Kind::Node, "", "node-1", record("node-uid".into(), None));
    for i in 0..PODS {
        let info = PodInfo {
            service_account_name: format!("sa-{}", i % (PODS / 10)),
            node_name: "node-1".into(),
            token_audiences: vec![],
        };
        source.put(
            Kind::Pod,
            "bench",
            &format!("pod-{i}"),
            record(format!("pod-uid-{i}"), Some(info)),
        );
    }
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
        let pod = 4_321;
        let token = key
            .sign(&Claims::new(NewToken {
                issuer: ISSUER,
                namespace: "bench",
                service_account: ObjectRef::new(
                    format!("sa-{}", pod % (PODS / 10)),
                    format!("sa-uid-{}", pod % (PODS / 10)),
                ),
                audiences: vec![ISSUER.into()],
                binding: Binding::Pod {
                    pod: ObjectRef::new(format!("pod-{pod}"), format!("pod-uid-{pod}")),
                    node: Some(ObjectRef::new("node-1", "node-uid")),
                },
                issued_at: NOW,
                expires_at: NOW + 3600,
                warn_after: None,
                jti: new_jti(),
            }))
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
