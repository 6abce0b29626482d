//! A warrant state with known keys, objects and clock, its signer on a socket in a temporary
//! directory, and a tonic client connected to it.

use std::sync::Arc;

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::Request;
use http_body_util::BodyExt;
use jiff::Timestamp;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tonic::transport::Channel;
use tower::ServiceExt;
use warrant_clock::Clock;
use warrant_keys::KeySet;
use warrant_objects::{Kind, MemorySource, Objects};
use warrant_server::{AppState, router};
use warrant_signer::proto::external_jwt_signer_client::ExternalJwtSignerClient;
use warrant_signer::{BoundSocket, PeerPolicy, ServeOptions, Signer, SignerMetrics, SocketOptions};
pub(crate) use warrant_testkit::{ADMIN, ISSUER, NOW, POD_UID, SA_UID, pod, record};
use warrant_token::ExpirationPolicy;

pub(crate) struct Env {
    pub(crate) state: AppState,
    pub(crate) clock: Clock,
    pub(crate) client: ExternalJwtSignerClient<Channel>,
    /// The socket's path.
    pub(crate) path: std::path::PathBuf,
    pub(crate) registry_text: Box<dyn Fn() -> String>,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

/// A state signing with `keys` under `expiration`, whose objects are ServiceAccount
/// `demo/app` and Pod `demo/app-0`, and its signer serving on a fresh socket.
pub(crate) async fn start(keys: KeySet, expiration: ExpirationPolicy) -> Env {
    start_with(ISSUER, keys, expiration, |objects| {
        objects.put(Kind::ServiceAccount, "demo", "app", record(SA_UID));
        objects.put(Kind::Pod, "demo", "app-0", pod(POD_UID, "app", ""));
    })
    .await
}

/// A state for `issuer` (also its API audience) with the objects `fill` puts, signing with
/// `keys` under `expiration`, and its signer serving on a fresh socket.
pub(crate) async fn start_with(
    issuer: &str,
    keys: KeySet,
    expiration: ExpirationPolicy,
    fill: impl FnOnce(&MemorySource),
) -> Env {
    start_serving(issuer, keys, expiration, fill, |socket| {
        ServeOptions::new(PeerPolicy::for_socket(socket.owner_uid(), None))
    })
    .await
}

/// As [`start_with`], serving with the options `serve` gives for the bound socket.
pub(crate) async fn start_serving(
    issuer: &str,
    keys: KeySet,
    expiration: ExpirationPolicy,
    fill: impl FnOnce(&MemorySource),
    serve: impl FnOnce(&BoundSocket) -> ServeOptions,
) -> Env {
    let objects = Arc::new(MemorySource::new());
    fill(&objects);
    let mut registry = Registry::default();
    let metrics = SignerMetrics::default();
    metrics.register(&mut registry);
    let clock = Clock::manual(Timestamp::from_second(NOW).unwrap());
    // The HTTPS API over the same issuer, to review what the socket signs.
    let state = warrant_testkit::state()
        .issuer(issuer)
        .signature_cache_entries(1024)
        .expiration(expiration)
        .keys(keys)
        .clock(clock.clone())
        .objects(Objects::new(objects))
        .registry(registry)
        .build();
    let issuer = state.issuer().clone();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signer.sock");
    let mut socket = warrant_signer::bind(&SocketOptions {
        path: path.clone(),
        group: None,
    })
    .unwrap();
    let listener = socket.take_listener().unwrap();
    let options = serve(&socket);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let signer = Signer::new(issuer, metrics);
    tokio::spawn(async move {
        let _socket = socket;
        warrant_signer::serve(listener, signer, options, async {
            let _ = stopped.await;
        })
        .await;
    });
    let client = lazy_client(&path);
    let text_state = state.clone();
    Env {
        state,
        clock,
        client,
        path,
        registry_text: Box::new(move || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, text_state.registry()).unwrap();
            text
        }),
        _stop: stop,
        _dir: dir,
    }
}

/// A client that connects at its first call (and again after the server closed its
/// connection), as kube-apiserver's does.
pub(crate) fn lazy_client(path: &std::path::Path) -> ExternalJwtSignerClient<Channel> {
    let path = path.to_owned();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector_lazy(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }));
    ExternalJwtSignerClient::new(channel)
}

/// Claims as kube-apiserver encodes them: compact JSON with sorted keys, unpadded base64url.
pub(crate) fn encode_claims(claims: &Value) -> String {
    URL_SAFE_NO_PAD.encode(claims.to_string())
}

/// The kid in a signed header (base64url JSON), as kube-apiserver reads it.
pub(crate) fn header_kid(header: &str) -> String {
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

/// The claims kube-apiserver sends for a pod-bound token of `demo/app` issued at `iat`.
pub(crate) fn pod_claims(iat: i64, lifetime: i64) -> Value {
    json!({
        "aud": ["vault"],
        "exp": iat + lifetime,
        "iat": iat,
        "iss": ISSUER,
        "jti": "0b5f5c8e-7e49-4d3c-9d2e-5b1a3f7c9e11",
        "kubernetes.io": {
            "namespace": "demo",
            "pod": {"name": "app-0", "uid": POD_UID},
            "serviceaccount": {"name": "app", "uid": SA_UID},
        },
        "nbf": iat,
        "sub": "system:serviceaccount:demo:app",
    })
}

impl Env {
    /// TokenReview of `token` for `audiences` through warrant's own API, as the admin.
    pub(crate) async fn review(&self, token: &str, audiences: &[&str]) -> Value {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": audiences},
        });
        let request = Request::post("/apis/authentication.k8s.io/v1/tokenreviews")
            .header("authorization", format!("Bearer {ADMIN}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let response = router(self.state.clone()).oneshot(request).await.unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice::<Value>(&bytes).unwrap()["status"].clone()
    }

    /// The value of one metric sample; 0 if absent.
    pub(crate) fn metric(&self, sample: &str) -> f64 {
        (self.registry_text)()
            .lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
            .map_or(0.0, |v| v.parse().unwrap())
    }
}
