//! The two requests warrant exists for, RS256, through the whole request stack in process (as
//! `stack.rs` sends them: the router as the connection loop hands a request over, without the
//! transport), on one thread. Issue 48 measured both beside kube-apiserver; this bench is what
//! shows, in numbers, a change that adds cost to either. `make bench-micro` runs it;
//! docs/benchmarks.md ("Issue 48") has its figures.
//!
//! - `hotpath/tokenrequest/pod-rs256`: a pod-bound TokenRequest signed with an RSA-2048 key,
//!   rotating over the crowd's 5,000 pods (and so its 500 service accounts): the service
//!   account, the pod and its node looked up, the claims, the signature, the answer;
//! - `hotpath/tokenreview/distinct-rs256`: a TokenReview of a pod-bound RS256 token the server
//!   has never reviewed: every review verifies its signature and notes the token in the
//!   signature cache's doorkeeper. The tokens are signed beforehand; when they run out, the
//!   next ones go to a new server (same key and objects, empty signature cache), outside the
//!   time measured, so no review ever finds its token in the cache.
//!
//! Every answer is checked (a TokenRequest's 201 with a token, a review's `authenticated`),
//! outside the time measured: a fast failure must not pass for speed.
//!
//! **Instructions.** With `WARRANT_HOTPATH_COUNT=tokenrequest` or `tokenreview` the binary
//! skips criterion: it sends `WARRANT_HOTPATH_REQUESTS` (default 200) requests of that kind
//! to warm up, then as many again, each through [`counted`] (never inlined), so that
//! `valgrind --tool=callgrind --toggle-collect='hotpath::counted*'` counts those requests and
//! nothing else. `scripts/hotpath-instructions` runs that for both and subtracts the RSA
//! operation (aws-lc-rs's `EVP_PKEY` sign or verify, inclusive).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    clippy::print_stdout
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use criterion::Criterion;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use jiff::Timestamp;
use tokio::time::Instant;
use tower::ServiceExt;
use warrant_clock::Clock;
use warrant_keys::KeySet;
use warrant_objects::{MemorySource, Objects};
use warrant_server::{Api, router};
use warrant_testkit::{ADMIN, Crowd, NOW};
use warrant_token::{Claims, KeyType, SigningKey};

const ISSUER: &str = "https://warrant.bench";
const PODS: usize = 5_000;
const CROWD: Crowd = Crowd::new(PODS);
const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
/// Tokens signed at a time for distinct reviews (RS256 signing is 0.25–0.7 ms each).
const POOL: usize = 2_000;

/// A server with `key`, the crowd's objects (shared between servers) and the default
/// signature cache, as `warrant serve` has it.
fn server(source: &Arc<MemorySource>, key: &SigningKey) -> Api {
    let state = warrant_testkit::state()
        .issuer(ISSUER)
        .keys(KeySet::new(key.clone(), vec![]))
        .clock(Clock::manual(Timestamp::from_second(NOW).unwrap()))
        .objects(Objects::new(source.clone()))
        .build();
    router(state)
}

fn post(uri: &str, body: String) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {ADMIN}"))
        .body(Body::from(body))
        .unwrap()
}

/// The `i`th TokenRequest: pod `pod-{i}` of the crowd, for its service account.
fn token_request(i: usize) -> Request<Body> {
    let pod = i % PODS;
    let sa = pod % (PODS / 10);
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["vault"], "boundObjectRef":
            {"kind": "Pod", "apiVersion": "v1", "name": format!("pod-{pod}")}},
    })
    .to_string();
    post(
        &format!(
            "/api/v1/namespaces/{}/serviceaccounts/sa-{sa}/token",
            Crowd::NAMESPACE
        ),
        body,
    )
}

/// A review of a new pod-bound token for pod `i`, signed by `key`.
fn review(key: &SigningKey, i: usize) -> String {
    let claims = Claims::new(CROWD.token(ISSUER, i, vec!["vault".into()], NOW - 60, NOW + 3600));
    serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": key.sign(&claims).unwrap(), "audiences": ["vault"]},
    })
    .to_string()
}

/// One request through the router, and its answer's status and whole body.
async fn send(router: &Api, request: Request<Body>) -> (StatusCode, Bytes) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    (
        status,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

/// What callgrind counts: one request, from handing it to the router to its body read.
#[inline(never)]
fn counted(
    runtime: &tokio::runtime::Runtime,
    router: &Api,
    request: Request<Body>,
) -> (StatusCode, Bytes) {
    runtime.block_on(send(router, request))
}

/// Panics unless `answer` is the success its request is measured for.
fn check(kind: Kind, (status, body): &(StatusCode, Bytes)) {
    let body = String::from_utf8_lossy(body);
    let ok = match kind {
        Kind::TokenRequest => *status == StatusCode::CREATED && body.contains("\"token\":\"ey"),
        Kind::TokenReview => status.is_success() && body.contains("\"authenticated\":true"),
    };
    assert!(ok, "{kind:?}: {status} {body}");
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    TokenRequest,
    TokenReview,
}

/// The requests of one scenario, each made (and its server chosen) before it is sent.
struct Scenario {
    kind: Kind,
    source: Arc<MemorySource>,
    key: SigningKey,
    router: Api,
    /// Review bodies not yet sent to `router`, the next last.
    fresh: Vec<String>,
    /// How many to sign when `fresh` runs out.
    pool: usize,
    next: usize,
}

impl Scenario {
    fn new(kind: Kind, source: &Arc<MemorySource>, key: &SigningKey, pool: usize) -> Scenario {
        Scenario {
            kind,
            source: source.clone(),
            key: key.clone(),
            router: server(source, key),
            fresh: Vec::new(),
            pool,
            next: 0,
        }
    }

    /// The next request, and the server it goes to.
    fn next(&mut self) -> (Api, Request<Body>) {
        self.next += 1;
        let request = match self.kind {
            Kind::TokenRequest => token_request(self.next),
            Kind::TokenReview => {
                if self.fresh.is_empty() {
                    // A server that has reviewed none of the tokens about to be sent.
                    self.router = server(&self.source, &self.key);
                    let first = self.next;
                    self.fresh = (first..first + self.pool)
                        .rev()
                        .map(|i| review(&self.key, i))
                        .collect();
                }
                post(REVIEWS, self.fresh.pop().unwrap())
            }
        };
        (self.router.clone(), request)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn crowd() -> Arc<MemorySource> {
    let source = Arc::new(MemorySource::new());
    CROWD.fill(&source);
    source
}

fn bench(c: &mut Criterion) {
    let runtime = runtime();
    let source = crowd();
    let key = SigningKey::generate(KeyType::Rsa2048).unwrap();
    for (name, kind) in [
        ("hotpath/tokenrequest/pod-rs256", Kind::TokenRequest),
        ("hotpath/tokenreview/distinct-rs256", Kind::TokenReview),
    ] {
        let mut scenario = Scenario::new(kind, &source, &key, POOL);
        c.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let (router, request) = scenario.next();
                    let start = Instant::now();
                    let answer = runtime.block_on(send(&router, request));
                    spent += start.elapsed();
                    check(kind, &answer);
                    black_box(answer);
                }
                spent
            });
        });
    }
}

/// `WARRANT_HOTPATH_COUNT`'s mode (see the module's docs).
fn count(which: &str) {
    let kind = match which {
        "tokenrequest" => Kind::TokenRequest,
        "tokenreview" => Kind::TokenReview,
        _ => panic!("WARRANT_HOTPATH_COUNT is tokenrequest or tokenreview, not {which:?}"),
    };
    let requests: usize = std::env::var("WARRANT_HOTPATH_REQUESTS")
        .map(|n| n.parse().expect("WARRANT_HOTPATH_REQUESTS is a number"))
        .unwrap_or(200);
    let runtime = runtime();
    let source = crowd();
    let key = SigningKey::generate(KeyType::Rsa2048).unwrap();
    // Warm-up and counted requests from one server: all its tokens signed at once.
    let mut scenario = Scenario::new(kind, &source, &key, 2 * requests);
    for _ in 0..requests {
        let (router, request) = scenario.next();
        check(kind, &runtime.block_on(send(&router, request)));
    }
    for _ in 0..requests {
        let (router, request) = scenario.next();
        check(kind, &counted(&runtime, &router, request));
    }
    println!("{which}: {requests} requests counted");
}

criterion::criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(10));
    targets = bench
}

fn main() {
    match std::env::var("WARRANT_HOTPATH_COUNT") {
        Ok(which) => count(&which),
        Err(_) => {
            benches();
            Criterion::default().configure_from_args().final_summary();
        }
    }
}
