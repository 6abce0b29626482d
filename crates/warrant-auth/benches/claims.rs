//! The policy's extra claims against a plain token: TokenRequest's step 10 (the claims built,
//! written and signed with ES256, so the signature does not hide the rest) for
//!
//! - `claims/plain`: a policy without a `claims` section (every token of a cluster that uses
//!   none);
//! - `claims/unnamed`: a policy whose `claims` section names other audiences (kube's own
//!   tokens where it is used): one look at the section, as TokenRequest pays;
//! - `claims/templated`: the AWS session-tags recipe (three tags from the namespace, a pod label
//!   and a service-account annotation) and a claim of its own.
//!
//! `make bench-micro` runs it with the others; docs/benchmarks.md has figures.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use warrant_auth::Policy;
use warrant_auth::authz::claims::{Facts, PodFacts};
use warrant_token::{Binding, Claims, KeyType, NewToken, ObjectRef, SigningKey, new_jti};

const ISSUER: &str = "https://warrant.bench";
const NOW: i64 = 1_800_000_000;

const HEAD: &str = "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\n";
const SECTION: &str = r#"claims:
- audiences: [sts.amazonaws.com]
  annotationPrefix: abac.warrant.dev/
  labelPrefix: abac.warrant.dev/
  set:
    https://example.com/cluster: ${cluster}
  awsSessionTags:
    principalTags:
      kubernetes-namespace: ${namespace}
      team: ${pod.labels.team}
      cost-center: ${serviceAccount.annotations.cost-center}
    transitiveTagKeys: [kubernetes-namespace]
"#;

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Step 10 as TokenRequest runs it: the extra claims (if the policy names the audience), the
/// claims, the payload, the signature.
fn issue(key: &SigningKey, policy: &Policy, audience: &str, facts: &Facts<'_>) -> String {
    let audiences = vec![audience.to_owned()];
    let extra = policy.extra_claims(&audiences, facts).unwrap();
    let mut claims = Claims::new(NewToken {
        issuer: ISSUER,
        namespace: facts.namespace,
        service_account: ObjectRef::new(facts.service_account, facts.service_account_uid),
        audiences,
        binding: Binding::Pod {
            pod: ObjectRef::new("app-0", "8f5b8d1c-5a0e-4c39-9d55-2b7f4e0f8c11"),
            node: Some(ObjectRef::new(
                "node-1",
                "3d9c2a47-0d8e-4b5e-8f0e-7c1d9e2b6a22",
            )),
        },
        issued_at: NOW,
        expires_at: NOW + 3600,
        warn_after: None,
        jti: new_jti(),
    });
    claims.extra = extra.map(Box::new);
    key.sign(&claims).unwrap()
}

fn bench(c: &mut Criterion) {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    let plain = Policy::parse(HEAD, "bench").unwrap();
    let with_claims = Policy::parse(&format!("{HEAD}{SECTION}"), "bench").unwrap();
    let annotations = pairs(&[
        ("abac.warrant.dev/cost-center", "cc-42"),
        ("warrant.dev/audience", "vault"),
    ]);
    let labels = pairs(&[("abac.warrant.dev/team", "blue")]);
    let facts = Facts {
        cluster: Some("prod-eu-1"),
        namespace: "bench",
        service_account: "app",
        service_account_uid: "0b7c2e4e-51a6-4b5f-9f4c-6f9b2b4f1a01",
        annotations: &annotations,
        pod: Some(PodFacts {
            name: "app-0",
            uid: "8f5b8d1c-5a0e-4c39-9d55-2b7f4e0f8c11",
            node: "node-1",
            labels: &labels,
        }),
    };
    let templated = issue(&key, &with_claims, "sts.amazonaws.com", &facts);
    assert!(templated.len() > issue(&key, &plain, "sts.amazonaws.com", &facts).len());
    c.bench_function("claims/plain", |b| {
        b.iter(|| issue(&key, &plain, black_box("sts.amazonaws.com"), &facts))
    });
    c.bench_function("claims/unnamed", |b| {
        b.iter(|| issue(&key, &with_claims, black_box("vault"), &facts))
    });
    c.bench_function("claims/templated", |b| {
        b.iter(|| issue(&key, &with_claims, black_box("sts.amazonaws.com"), &facts))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
