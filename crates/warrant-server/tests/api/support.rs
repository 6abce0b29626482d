//! A server with known keys, objects, callers and clock.

use std::sync::Arc;

use axum::body::Body;
use base64::Engine as _;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use jiff::Timestamp;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tower::ServiceExt;
use warrant_audit::{AuditOptions, AuditWriter, Auditor, Destination, Mode, Rotation};
use warrant_auth::{Authenticator, Authorizer, PeerCertificate};
use warrant_clock::Clock;
use warrant_objects::{Kind, MemorySource, Objects};
use warrant_server::Api as WarrantApi;
use warrant_server::{AppState, router};
pub(crate) use warrant_testkit::{
    ADMIN, ISSUER, NODE_UID, NOW, POD_UID, SA_UID, SECRET_UID, key, pod, record,
};
use warrant_token::{Claims, ExpirationPolicy};

pub(crate) struct Api {
    pub(crate) state: AppState,
    pub(crate) objects: Arc<MemorySource>,
    router: WarrantApi,
}

/// A server whose namespace `demo` holds ServiceAccount `app`, Pod `app-0` on Node `node-1`,
/// Secret `app-token`, Pod `other-0` of ServiceAccount `other`, an unscheduled Pod `pending`
/// and Pod `orphan` on a node that does not exist.
pub(crate) fn api_with(expiration: ExpirationPolicy) -> Api {
    build(
        expiration,
        |_, _| {},
        Auditor::disabled(),
        Registry::default(),
    )
}

/// The standard server with Secret-bound tokens refused (`--disable-secret-binding`); it still
/// holds Secret `app-token`, which it must not consult.
pub(crate) fn api_without_secret_binding() -> Api {
    build_with(
        ExpirationPolicy::default(),
        |_, _| {},
        Auditor::disabled(),
        Registry::default(),
        Objects::without_secret_binding,
    )
}

/// Static tokens besides the admin's: `bob` (group `dev`), and the kubelets of `node-1` and
/// `node-2`.
pub(crate) const BOB: &str = "bob-token";
pub(crate) const NODE_1: &str = "node-1-token";
pub(crate) const NODE_2: &str = "node-2-token";

/// The standard server, with authentication and authorization as `configure` sets them.
pub(crate) fn api_auth(configure: impl FnOnce(&mut Authenticator, &mut Authorizer)) -> Api {
    build(
        ExpirationPolicy::default(),
        configure,
        Auditor::disabled(),
        Registry::default(),
    )
}

/// The standard server, writing its audit events to the returned file (through a real
/// audit writer, which the test finishes before it reads the file).
pub(crate) fn api_audited() -> (Api, AuditWriter, tempfile::TempDir) {
    api_audited_with(|_, _| {})
}

/// [`api_audited`] with authentication and authorization set up by `configure`.
pub(crate) fn api_audited_with(
    configure: impl FnOnce(&mut Authenticator, &mut Authorizer),
) -> (Api, AuditWriter, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = AuditOptions {
        destination: Destination::File(
            dir.path().join("audit.log"),
            Rotation {
                max_size_bytes: 0,
                max_backups: 0,
                max_age_days: 0,
            },
        ),
        mode: Mode::Blocking,
        buffer_size: 100,
        schema: warrant_audit::Schema::Warrant,
    };
    let (api, writer) = api_audited_to(&options, configure);
    (api, writer, dir)
}

/// A server auditing as `options` say, with authentication and authorization set up by
/// `configure`.
pub(crate) fn api_audited_to(
    options: &AuditOptions,
    configure: impl FnOnce(&mut Authenticator, &mut Authorizer),
) -> (Api, AuditWriter) {
    let mut registry = Registry::default();
    let clock = Clock::manual(Timestamp::from_second(NOW).unwrap());
    let (auditor, writer) = warrant_audit::start(options, clock, &mut registry).unwrap();
    let api = build(ExpirationPolicy::default(), configure, auditor, registry);
    (api, writer)
}

fn build(
    expiration: ExpirationPolicy,
    configure: impl FnOnce(&mut Authenticator, &mut Authorizer),
    audit: Auditor,
    registry: Registry,
) -> Api {
    build_with(expiration, configure, audit, registry, |objects| objects)
}

fn build_with(
    expiration: ExpirationPolicy,
    configure: impl FnOnce(&mut Authenticator, &mut Authorizer),
    audit: Auditor,
    registry: Registry,
    objects_handle: impl FnOnce(Objects) -> Objects,
) -> Api {
    let objects = Arc::new(MemorySource::new());
    objects.put(Kind::ServiceAccount, "demo", "app", record(SA_UID));
    objects.put(
        Kind::ServiceAccount,
        "demo",
        "other",
        record("other-sa-uid"),
    );
    objects.put(Kind::Pod, "demo", "app-0", pod(POD_UID, "app", "node-1"));
    objects.put(
        Kind::Pod,
        "demo",
        "other-0",
        pod("other-pod-uid", "other", "node-1"),
    );
    objects.put(Kind::Pod, "demo", "pending", pod("pending-uid", "app", ""));
    objects.put(
        Kind::Pod,
        "demo",
        "orphan",
        pod("orphan-uid", "app", "node-gone"),
    );
    objects.put(Kind::Node, "", "node-1", record(NODE_UID));
    objects.put(Kind::Secret, "demo", "app-token", record(SECRET_UID));
    let state = warrant_testkit::state()
        .expiration(expiration)
        .tokens(&format!(
            "{BOB},bob,bob-uid,dev\n{NODE_1},system:node:node-1,n1,system:nodes\n\
             {NODE_2},system:node:node-2,n2,system:nodes\n"
        ))
        .configure(configure)
        .audit(audit)
        .registry(registry)
        .objects(objects_handle(Objects::new(objects.clone())))
        .build();
    Api {
        router: router(state.clone()),
        state,
        objects,
    }
}

pub(crate) fn api() -> Api {
    api_with(ExpirationPolicy::default())
}

/// A response, with its body parsed as JSON when it is JSON.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) code: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) text: String,
    pub(crate) json: Value,
    pub(crate) bytes: Vec<u8>,
}

impl Reply {
    /// Asserts that this TokenReview reply authenticated its token (`status.authenticated` is
    /// true), failing with what it said instead (its code, `status.error` and body); returns
    /// the review's `status`.
    #[track_caller]
    pub(crate) fn assert_authenticated(&self) -> &Value {
        let status = &self.json["status"];
        assert!(
            status["authenticated"] == true,
            "the TokenReview did not authenticate the token: {} with status.authenticated {} and status.error {}\n{}",
            self.code,
            status["authenticated"],
            status["error"],
            self.text
        );
        status
    }
}

impl Api {
    pub(crate) async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let code = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            code,
            headers,
            text,
            json,
            bytes: bytes.to_vec(),
        }
    }

    /// An authenticated POST of a JSON body.
    pub(crate) async fn post(&self, uri: &str, body: Value) -> Reply {
        self.post_as(ADMIN, uri, body).await
    }

    /// A POST of a JSON body with `token` as the bearer token.
    pub(crate) async fn post_as(&self, token: &str, uri: &str, body: Value) -> Reply {
        self.send(
            Request::builder()
                .method(Method::POST)
                .uri(uri)
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
    }

    /// A request made over a connection whose client presented `peer`, with `headers`.
    pub(crate) async fn send_with_peer(
        &self,
        method: Method,
        uri: &str,
        peer: Option<PeerCertificate>,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut request = match body {
            Some(body) => request
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
            None => request.body(Body::empty()).unwrap(),
        };
        if let Some(peer) = peer {
            request.extensions_mut().insert(peer);
        }
        self.send(request).await
    }

    /// Requests a token for `demo/<sa>` as the holder of `token`.
    pub(crate) async fn token_as(&self, token: &str, sa: &str, spec: Value) -> Reply {
        self.post_as(
            token,
            &format!("/api/v1/namespaces/demo/serviceaccounts/{sa}/token"),
            serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
        )
        .await
    }

    pub(crate) async fn get(&self, uri: &str) -> Reply {
        self.get_with(uri, &[]).await
    }

    /// An unauthenticated GET with `headers`.
    pub(crate) async fn get_with(&self, uri: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::builder().uri(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::empty()).unwrap()).await
    }

    /// Requests a token for `demo/app` (or another SA) with `spec`.
    pub(crate) async fn token(&self, sa: &str, spec: Value) -> Reply {
        self.post(
            &format!("/api/v1/namespaces/demo/serviceaccounts/{sa}/token"),
            serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}),
        )
        .await
    }

    /// Reviews `token` for `audiences` in API version `version`.
    pub(crate) async fn review(&self, version: &str, token: &str, audiences: &[&str]) -> Reply {
        self.post(
            &format!("/apis/{version}/tokenreviews"),
            serde_json::json!({
                "apiVersion": version, "kind": "TokenReview",
                "metadata": {"creationTimestamp": null},
                "spec": {"token": token, "audiences": audiences},
                "status": {"user": {}},
            }),
        )
        .await
    }

    /// Moves the clock on by `seconds`.
    pub(crate) fn advance(&self, seconds: i64) {
        let now = self.state.issuer().clock().now();
        self.state
            .issuer()
            .clock()
            .set(now + jiff::SignedDuration::from_secs(seconds));
    }

    pub(crate) fn set_now(&self, second: i64) {
        self.state
            .issuer()
            .clock()
            .set(Timestamp::from_second(second).unwrap());
    }
}

/// `token`'s claims with `cnf` set to `cnf` as given (JSON, so that a `cnf` warrant does not
/// understand can be written too), signed by the server's own key: what a token warrant issued
/// with that binding would be.
pub(crate) fn with_cnf(token: &str, cnf: Value) -> String {
    let payload = token.split('.').nth(1).unwrap();
    let mut claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    claims["cnf"] = cnf;
    key().sign_payload(claims.to_string().as_bytes()).unwrap()
}

/// The claims inside a token (not verified: the tests verify separately).
pub(crate) fn claims(token: &str) -> Claims {
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}
