//! warrant's own per-request cost, without the transport: requests through the whole router
//! (route matching, metrics, timeout, authentication, authorization, the handler, JSON in and
//! out) as the connection loop hands them over, on one thread. Against the crypto micro
//! benchmarks (warrant-token's `token` bench), what is left is warrant's overhead per request.
//! `make bench-micro` runs it; docs/benchmarks.md has figures.
//!
//! - `version`: the floor of the stack, `GET /version` by a token-file user;
//! - `tokenreview/repeated` and `tokenreview/distinct`: pod-bound RS256 tokens (distinct ones
//!   never found in the signature cache, so each pays a verification and a cache insert);
//! - `tokenreview/client-cert`: the repeated review by a caller authenticated by a client
//!   certificate instead of a token, as kube-apiserver's webhook and the issue's benchmark do;
//! - `tokenrequest/pod`: a pod-bound TokenRequest (ES256, so the signature does not hide the
//!   rest);
//! - `tokenrequest/pod-audited`: the same with an audit log (blocking mode, a file): one request
//!   at a time, so each pays its event's whole trip to the file, with nothing to batch it with.
//! - `own-token/bearer` and `own-token/dpop`: `GET /version` with a warrant token for its API
//!   audience, as a bearer token, and bound to a key and presented with a fresh DPoP proof
//!   (made before the measured request: its signature is the client's cost). Against each
//!   other, what checking a proof costs (issue 27);
//! - `tokenrequest/pod-dpop`: `tokenrequest/pod` with a DPoP proof, so the token is bound to
//!   its key;
//! - `delegated/authentication`: `GET /version` with a bearer token kube-apiserver's
//!   TokenReview vouched for (the loopback fixture), from delegation's cache: against
//!   `version`, what a cached delegated authentication costs;
//! - `delegated/authorization`: the repeated review by a caller whose authorization is
//!   kube-apiserver's SubjectAccessReview, from delegation's cache: against
//!   `tokenreview/repeated`, what a cached delegated authorization costs;
//! - `delegated/authentication-miss`: `GET /version` with the TokenReview's answer expired
//!   each time (the clock moves 10 s), so each request asks the fixture over loopback HTTP:
//!   the lookup's single flight, retry loop and cache insert, and kube's client.
//! - `admission/pod`: token injection's webhook on kube-apiserver's captured review of a pod
//!   (4 KiB) whose ServiceAccount is annotated for AWS and Azure, as kube-apiserver sends it
//!   (no credentials): the review read, the ServiceAccount looked up, the plan, warrant's
//!   authorizers asked about each of the agent's tokens, the patch written (issue 33).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::hint::black_box;
use std::sync::Arc;

use axum::body::Body;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use http::{Method, Request};
use http_body_util::BodyExt;
use jiff::Timestamp;
use prometheus_client::registry::Registry;
use tower::ServiceExt;
use warrant_audit::Auditor;
use warrant_auth::{
    Authenticator, Authorizer, ClientTrust, DelegatedAuthentication, DelegatedAuthorization,
    DelegationOptions, PeerCertificate,
};
use warrant_clock::Clock;
use warrant_keys::KeySet;
use warrant_kube_fixture::authority::{AccessAnswer, Authority, TokenAnswer};
use warrant_kube_fixture::{Cluster, Fixture};
use warrant_objects::{MemorySource, Objects};
use warrant_server::Api;
use warrant_server::router;
use warrant_testkit::{ADMIN, Crowd, DpopHolder, NOW, TestCa, sha256_b64url};
use warrant_token::{Claims, Confirmation, KeyType, SigningKey};

const ISSUER: &str = "https://warrant.bench";
/// A token-file user outside `system:masters`, authorized by kube-apiserver when delegating.
const REVIEWER: &str = "reviewer-token";
/// A token only kube-apiserver's TokenReview knows.
const DELEGATED: &str = "delegated-token";
const PODS: usize = 5_000;
const CROWD: Crowd = Crowd::new(PODS);

struct Bench {
    router: Api,
    state: warrant_server::AppState,
    key: SigningKey,
    peer: PeerCertificate,
    clock: Clock,
}

fn server(
    key: SigningKey,
    signature_cache_entries: u64,
    (audit, registry): (Auditor, Registry),
) -> Bench {
    server_with(key, signature_cache_entries, (audit, registry), |_, _| {})
}

fn server_with(
    key: SigningKey,
    signature_cache_entries: u64,
    (audit, registry): (Auditor, Registry),
    configure: impl FnOnce(&mut Authenticator, &mut Authorizer),
) -> Bench {
    let source = Arc::new(MemorySource::new());
    CROWD.fill(&source);
    // A ServiceAccount annotated for token injection (`admission/pod`).
    let mut injected = warrant_testkit::record("injected-sa-uid");
    injected.annotations = warrant_testkit::INJECTED_ANNOTATIONS
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec();
    source.put(
        warrant_objects::Kind::ServiceAccount,
        Crowd::NAMESPACE,
        "injected",
        injected,
    );
    // A users' CA and an admin certificate from it, as the TLS layer attaches it.
    let ca = TestCa::new("bench CA");
    let peer = ca.issue_client("admin", &["system:masters"]).peer();
    let clock = Clock::manual(Timestamp::from_second(NOW).unwrap());
    let state = warrant_testkit::state()
        .issuer(ISSUER)
        .signature_cache_entries(signature_cache_entries)
        .keys(KeySet::new(key.clone(), vec![]))
        .clock(clock.clone())
        .objects(Objects::new(source))
        .tokens(&format!("{REVIEWER},reviewer,reviewer-uid\n"))
        .configure(|authenticator, _| {
            authenticator.trust = ClientTrust::new(Some(ca.bundle()), None);
        })
        .configure(configure)
        .audit(audit)
        .registry(registry)
        .build();
    Bench {
        router: router(state.clone()),
        state,
        key,
        peer,
        clock,
    }
}

fn pod_token(key: &SigningKey, i: usize) -> String {
    let claims = Claims::new(CROWD.token(ISSUER, i, vec!["vault".into()], NOW - 60, NOW + 3600));
    key.sign(&claims).unwrap()
}

fn review_body(token: &str) -> String {
    serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": ["vault"]},
    })
    .to_string()
}

/// One request through the router, its whole body read.
async fn send(router: &Api, request: Request<Body>) -> usize {
    let response = router.clone().oneshot(request).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .len()
}

fn post(uri: &str, body: String, peer: Option<&PeerCertificate>) -> Request<Body> {
    post_as(ADMIN, uri, body, peer)
}

fn post_as(token: &str, uri: &str, body: String, peer: Option<&PeerCertificate>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/json");
    if peer.is_none() {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let mut request = builder.body(Body::from(body)).unwrap();
    if let Some(peer) = peer {
        request.extensions_mut().insert(peer.clone());
    }
    request
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let default = warrant_issuer::DEFAULT_SIGNATURE_CACHE_ENTRIES;
    let unaudited = || (Auditor::disabled(), Registry::default());
    let rs256 = server(
        SigningKey::generate(KeyType::Rsa2048).unwrap(),
        default,
        unaudited(),
    );
    let es256 = server(
        SigningKey::generate(KeyType::P256).unwrap(),
        default,
        unaudited(),
    );
    // A cache smaller than the tokens cycled through: every distinct review misses, verifies
    // and inserts, as with a stream of new tokens.
    let small_cache = server(rs256.key.clone(), 1_000, unaudited());
    // The audit log in a file of its own (rotated at 100 MB, as by default).
    let audit_dir = tempfile::tempdir().unwrap();
    let mut audit_registry = Registry::default();
    let (auditor, audit_writer) = {
        let _runtime = runtime.enter();
        warrant_audit::start(
            &warrant_audit::AuditOptions {
                destination: warrant_audit::Destination::File(
                    audit_dir.path().join("audit.log"),
                    warrant_audit::Rotation {
                        max_size_bytes: 100 << 20,
                        max_backups: 2,
                        max_age_days: 0,
                    },
                ),
                mode: warrant_audit::Mode::Blocking,
                buffer_size: 10_000,
                schema: warrant_audit::Schema::Warrant,
            },
            Clock::manual(Timestamp::from_second(NOW).unwrap()),
            &mut audit_registry,
        )
        .unwrap()
    };
    let audited = server(es256.key.clone(), default, (auditor, audit_registry));
    let reviews = "/apis/authentication.k8s.io/v1/tokenreviews";

    c.bench_function("stack/version", |b| {
        b.iter(|| {
            let request = Request::builder()
                .uri("/version")
                .header("authorization", format!("Bearer {ADMIN}"))
                .body(Body::empty())
                .unwrap();
            black_box(runtime.block_on(send(&rs256.router, request)))
        });
    });

    let repeated = review_body(&pod_token(&rs256.key, 7));
    c.bench_function("stack/tokenreview/repeated", |b| {
        b.iter(|| {
            black_box(runtime.block_on(send(&rs256.router, post(reviews, repeated.clone(), None))))
        });
    });
    c.bench_function("stack/tokenreview/client-cert", |b| {
        b.iter(|| {
            black_box(runtime.block_on(send(
                &rs256.router,
                post(reviews, repeated.clone(), Some(&rs256.peer)),
            )))
        });
    });

    // Cycled through a cache a fifth of their number, so none is found there.
    let distinct: Vec<String> = (0..5_000)
        .map(|i| review_body(&pod_token(&rs256.key, i)))
        .collect();
    let mut next = 0;
    c.bench_function("stack/tokenreview/distinct", |b| {
        b.iter(|| {
            let body = distinct[next % distinct.len()].clone();
            next += 1;
            black_box(runtime.block_on(send(&small_cache.router, post(reviews, body, None))))
        });
    });

    // The same pod-bound TokenRequests, without and with the audit trail (blocking mode:
    // each waits for its event's write).
    for (name, router) in [
        ("stack/tokenrequest/pod", &es256.router),
        ("stack/tokenrequest/pod-audited", &audited.router),
    ] {
        let mut pod = 0;
        c.bench_function(name, |b| {
            b.iter(|| {
                pod += 1;
                let sa = pod % (PODS / 10);
                let body = serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["vault"], "boundObjectRef":
                        {"kind": "Pod", "apiVersion": "v1", "name": format!("pod-{sa}")}},
                })
                .to_string();
                let uri = format!("/api/v1/namespaces/bench/serviceaccounts/sa-{sa}/token");
                black_box(runtime.block_on(send(router, post(&uri, body, None))))
            });
        });
    }
    runtime.block_on(audit_writer.finish());

    // Key binding: warrant's own API token, as a bearer token and bound to a DPoP key. Each
    // proof is new (its jti), made in the batch's setup, outside the measurement.
    let holder = DpopHolder::new();
    let own_token = |cnf: Option<Confirmation>| {
        let mut claims =
            Claims::new(CROWD.token(ISSUER, 7, vec![ISSUER.into()], NOW - 60, NOW + 3600));
        claims.cnf = cnf.map(Into::into);
        es256.key.sign(&claims).unwrap()
    };
    let bearer = own_token(None);
    let bound = own_token(Some(Confirmation::dpop(holder.thumbprint())));
    let ath = sha256_b64url(bound.as_bytes());
    let version_with = |authorization: String, proof: Option<String>| {
        let mut builder = Request::builder()
            .uri("/version")
            .header("host", "warrant.bench")
            .header("authorization", authorization);
        if let Some(proof) = proof {
            builder = builder.header("dpop", proof);
        }
        builder.body(Body::empty()).unwrap()
    };
    c.bench_function("stack/own-token/bearer", |b| {
        b.iter(|| {
            let request = version_with(format!("Bearer {bearer}"), None);
            black_box(runtime.block_on(send(&es256.router, request)))
        });
    });
    let mut jti = 0u64;
    c.bench_function("stack/own-token/dpop", |b| {
        b.iter_batched(
            || {
                jti += 1;
                holder.proof(&serde_json::json!({"jti": jti.to_string(), "htm": "GET",
                    "htu": "https://warrant.bench/version", "iat": NOW, "ath": ath}))
            },
            |proof| {
                let request = version_with(format!("DPoP {bound}"), Some(proof));
                black_box(runtime.block_on(send(&es256.router, request)))
            },
            BatchSize::SmallInput,
        );
    });
    let mut pod = 0;
    c.bench_function("stack/tokenrequest/pod-dpop", |b| {
        b.iter_batched(
            || {
                pod += 1;
                jti += 1;
                let sa = pod % (PODS / 10);
                let uri = format!("/api/v1/namespaces/bench/serviceaccounts/sa-{sa}/token");
                let proof = holder.proof(&serde_json::json!({"jti": jti.to_string(),
                    "htm": "POST", "htu": format!("https://warrant.bench{uri}"), "iat": NOW}));
                let body = serde_json::json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["vault"], "boundObjectRef":
                        {"kind": "Pod", "apiVersion": "v1", "name": format!("pod-{sa}")}},
                })
                .to_string();
                let mut request = post(&uri, body, None);
                request
                    .headers_mut()
                    .insert("host", "warrant.bench".parse().unwrap());
                request.headers_mut().insert("dpop", proof.parse().unwrap());
                request
            },
            |request| black_box(runtime.block_on(send(&es256.router, request))),
            BatchSize::SmallInput,
        );
    });

    // Delegation to a kube-apiserver (the loopback fixture, served on this runtime).
    let authority = Authority::new();
    authority.token(DELEGATED, TokenAnswer::user("jane", &["devs"]));
    authority.access(|_| AccessAnswer::Allow(String::new()));
    let fixture = runtime
        .block_on(Fixture::start_with(Cluster::new(), |_| authority.routes()))
        .unwrap();
    let delegating = {
        let _runtime = runtime.enter();
        let client =
            || kube::Client::try_from(kube::Config::new(fixture.url().parse().unwrap())).unwrap();
        let (authn, authz) = (client(), client());
        server_with(
            rs256.key.clone(),
            default,
            unaudited(),
            |authenticator, authorizer| {
                authenticator.delegated = Some(DelegatedAuthentication::new(
                    authn,
                    DelegationOptions::default(),
                ));
                authorizer.delegated = Some(DelegatedAuthorization::new(
                    authz,
                    DelegationOptions::default(),
                ));
            },
        )
    };
    let version_as = |token: &str| {
        Request::builder()
            .uri("/version")
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap()
    };
    c.bench_function("stack/delegated/authentication", |b| {
        b.iter(|| black_box(runtime.block_on(send(&delegating.router, version_as(DELEGATED)))));
    });
    c.bench_function("stack/delegated/authorization", |b| {
        b.iter(|| {
            black_box(runtime.block_on(send(
                &delegating.router,
                post_as(REVIEWER, reviews, repeated.clone(), None),
            )))
        });
    });
    c.bench_function("stack/delegated/authentication-miss", |b| {
        b.iter(|| {
            delegating.clock.advance(10);
            black_box(runtime.block_on(send(&delegating.router, version_as(DELEGATED))))
        });
    });
    drop(fixture);
    bench_admission(c, &runtime);
}

/// Token injection's webhook (see the module's docs).
fn bench_admission(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let policy = warrant_auth::Policy::parse(
        "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [sts.amazonaws.com, 'api://AzureADTokenExchange']\n",
        "policy.yaml",
    )
    .unwrap();
    let injecting = server_with(
        SigningKey::generate(KeyType::P256).unwrap(),
        warrant_issuer::DEFAULT_SIGNATURE_CACHE_ENTRIES,
        (Auditor::disabled(), Registry::default()),
        |_, authz| {
            authz.policy = Some(warrant_auth::PolicyFile::from_policy(
                policy,
                std::path::Path::new("policy.yaml"),
            ));
        },
    );
    injecting
        .state
        .set_injection(warrant_server::InjectionSettings {
            agent_image: "ghcr.io/warrant-dev/warrant:v0.1.0".into(),
            warrant_url: "https://warrant.warrant.svc".into(),
            ca_pem: Some(TestCa::new("warrant CA").pem().to_owned()),
            agent_audience: warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE.into(),
            azure_authority_host: warrant_server::AZURE_DEFAULT_AUTHORITY_HOST.into(),
            azure_tenant_id: None,
            aws_region: None,
            callers: warrant_server::AdmissionCallers::Anonymous,
            limits: Default::default(),
        });
    let mut review: serde_json::Value = serde_json::from_str(include_str!(
        "../../../tests/vectors/admission/admissionreview-pod-annotated-sa.json"
    ))
    .unwrap();
    review["request"]["namespace"] = Crowd::NAMESPACE.into();
    review["request"]["object"]["spec"]["serviceAccountName"] = "injected".into();
    let review = review.to_string();
    let request = || {
        Request::builder()
            .method(Method::POST)
            .uri(warrant_proto::ADMISSION_PATH)
            .header("content-type", "application/json")
            .body(Body::from(review.clone()))
            .unwrap()
    };
    // What is measured is a mutation, not a refusal.
    let answer = runtime.block_on(async {
        let response = injecting.router.clone().oneshot(request()).await.unwrap();
        response.into_body().collect().await.unwrap().to_bytes()
    });
    assert!(
        String::from_utf8_lossy(&answer).contains("\"patchType\":\"JSONPatch\""),
        "{answer:?}"
    );
    c.bench_function("stack/admission/pod", |b| {
        b.iter(|| black_box(runtime.block_on(send(&injecting.router, request()))));
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
