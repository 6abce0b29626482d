//! The audit trail through the router: every TokenRequest and TokenReview, whoever answered
//! it, is one event that says who asked, for what, what was decided and why; and never the
//! token.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use warrant_objects::Kind;

use crate::support::*;

/// The events written, once the writer has finished.
async fn events(
    writer: warrant_audit::AuditWriter,
    dir: &tempfile::TempDir,
) -> (String, Vec<Value>) {
    writer.finish().await;
    let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    let events = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (text, events)
}

fn header_kid(token: &str) -> String {
    use base64::Engine as _;
    let header = token.split('.').next().unwrap();
    let json: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header)
            .unwrap(),
    )
    .unwrap();
    json["kid"].as_str().unwrap().to_owned()
}

/// An issued pod token: who asked and how they authenticated, the service account with its
/// UID, audiences, times, the pod and its node, the credential ID and the key; the request ID
/// is the one the response carries in `Audit-ID`.
#[tokio::test]
async fn an_issued_token_is_an_event_without_the_token() {
    let (api, writer, dir) = api_audited();
    let reply = api
        .token_as(
            ADMIN,
            "app",
            json!({"audiences": ["vault"], "expirationSeconds": 3600,
                   "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0"}}),
        )
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let token = reply.json["status"]["token"].as_str().unwrap().to_owned();
    let request_id = reply.headers["audit-id"].to_str().unwrap().to_owned();
    let jti = claims(&token).jti;

    let (text, events) = events(writer, &dir).await;
    assert!(!text.contains(&token), "the audit log holds the token");
    let signature = token.rsplit('.').next().unwrap();
    assert!(
        !text.contains(signature),
        "the audit log holds its signature"
    );
    assert_eq!(events.len(), 1, "{text}");
    let event = &events[0];
    let mut expected = json!({
        "kind": "TokenRequest",
        "requestID": request_id,
        "requester": {
            "user": "admin",
            "uid": "admin-uid",
            "groups": ["system:masters", "system:authenticated"],
            "authenticatedBy": "token-file"
        },
        "decision": "issued",
        "code": 201,
        "serviceAccount": {"namespace": "demo", "name": "app", "uid": SA_UID},
        "audiences": ["vault"],
        "issuedAt": "2027-01-15T08:00:00Z",
        "expiresAt": "2027-01-15T09:00:00Z",
        "boundObject": {"kind": "Pod", "name": "app-0", "uid": POD_UID},
        "node": {"kind": "Node", "name": "node-1", "uid": NODE_UID},
        "credentialID": format!("JTI={jti}"),
        "keyID": header_kid(&token),
    });
    // The time is the request's arrival, on the server's clock.
    expected["time"] = json!("2027-01-15T08:00:00.000000Z");
    assert_eq!(event, &expected);
}

/// An extended token (a kubelet's pod token for the API audiences) says both expiries.
#[tokio::test]
async fn an_extended_token_says_both_expiries() {
    let (api, writer, dir) = api_audited();
    let reply = api
        .token_as(
            ADMIN,
            "app",
            json!({"expirationSeconds": 3607,
                   "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0"}}),
        )
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let (_, events) = events(writer, &dir).await;
    assert_eq!(events[0]["expiresAt"], "2027-01-15T09:00:07Z");
    assert_eq!(events[0]["extendedExpiresAt"], "2028-01-15T08:00:00Z");
}

/// Refusals are events too, whichever layer refused: a caller without credentials, one whose
/// credentials fail, one not allowed, and a service account that does not exist, each with
/// its code and the message the client got.
#[tokio::test]
async fn every_refusal_is_an_event_with_its_reason() {
    let (api, writer, dir) = api_audited();
    let uri = "/api/v1/namespaces/demo/serviceaccounts/app/token";
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let anonymous = api
        .send(
            Request::builder()
                .method(Method::POST)
                .uri(uri)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await;
    assert_eq!(anonymous.code, StatusCode::UNAUTHORIZED);
    let bad = api.post_as("not-a-token", uri, body.clone()).await;
    assert_eq!(bad.code, StatusCode::UNAUTHORIZED);
    let forbidden = api.post_as(BOB, uri, body.clone()).await;
    assert_eq!(forbidden.code, StatusCode::FORBIDDEN);
    let missing = api.token_as(ADMIN, "nobody", json!({})).await;
    assert_eq!(missing.code, StatusCode::NOT_FOUND);

    let (_, events) = events(writer, &dir).await;
    let summary: Vec<(String, String, u64, String, String)> = events
        .iter()
        .map(|e| {
            (
                e["decision"].as_str().unwrap().to_owned(),
                e["requester"]["authenticatedBy"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                e["code"].as_u64().unwrap(),
                e["serviceAccount"]["name"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let row = |d: &str, by: &str, code: u64, sa: &str, reason: &str| {
        (
            d.to_owned(),
            by.to_owned(),
            code,
            sa.to_owned(),
            reason.to_owned(),
        )
    };
    assert_eq!(
        summary,
        [
            row("refused", "anonymous", 401, "app", "Unauthorized"),
            row("refused", "failed", 401, "app", "Unauthorized"),
            row(
                "refused",
                "token-file",
                403,
                "app",
                forbidden.json["message"].as_str().unwrap()
            ),
            row(
                "refused",
                "token-file",
                404,
                "nobody",
                "serviceaccounts \"nobody\" not found"
            ),
        ]
    );
    assert_eq!(events[2]["requester"]["user"], "bob");
    assert!(events.iter().all(|e| e.get("credentialID").is_none()));
}

/// Reviews: a valid token (with the Audit-ID kube-apiserver sent kept as the request ID), a
/// token whose pod is gone (whose it was is known: its signature is good), and garbage (only
/// the reason).
#[tokio::test]
async fn reviews_say_whose_token_and_why_not() {
    let (api, writer, dir) = api_audited();
    let token = api
        .token_as(
            ADMIN,
            "app",
            json!({"audiences": ["vault"],
                   "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "app-0"}}),
        )
        .await
        .json["status"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": token, "audiences": ["vault"]}});
    let reply = api
        .send_with_peer(
            Method::POST,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            None,
            &[
                ("authorization", &format!("Bearer {ADMIN}")),
                ("audit-id", "from-kube-apiserver-1"),
            ],
            Some(review),
        )
        .await;
    reply.assert_authenticated();
    assert_eq!(reply.headers["audit-id"], "from-kube-apiserver-1");
    api.objects.remove(Kind::Pod, "demo", "app-0");
    let gone = api
        .review("authentication.k8s.io/v1", &token, &["vault"])
        .await;
    assert_ne!(gone.json["status"]["authenticated"], true);
    assert!(gone.json["status"]["error"].is_string(), "{}", gone.text);
    let garbage = api
        .review("authentication.k8s.io/v1", "eyJhbGciOiJub25lIn0.e30.", &[])
        .await;
    assert_ne!(garbage.json["status"]["authenticated"], true);

    let (text, events) = events(writer, &dir).await;
    assert!(!text.contains(&token));
    assert!(!text.contains("eyJhbGciOiJub25lIn0"));
    assert_eq!(events.len(), 4, "{text}");
    let jti = format!("JTI={}", claims(&token).jti);

    let valid = &events[1];
    assert_eq!(valid["kind"], "TokenReview");
    assert_eq!(valid["requestID"], "from-kube-apiserver-1");
    assert_eq!(valid["decision"], "authenticated");
    assert_eq!(valid["credentialID"], jti.as_str());
    assert_eq!(valid["boundObject"]["name"], "app-0");
    assert_eq!(valid["keyID"], header_kid(&token).as_str());

    let revoked = &events[2];
    assert_eq!(revoked["decision"], "unauthenticated");
    assert_eq!(revoked["credentialID"], jti.as_str());
    assert_eq!(revoked["serviceAccount"]["name"], "app");
    assert_eq!(revoked["reason"], gone.json["status"]["error"]);

    let unknown = &events[3];
    assert_eq!(unknown["decision"], "unauthenticated");
    assert_eq!(unknown["reason"], garbage.json["status"]["error"]);
    assert!(unknown.get("credentialID").is_none());
    assert!(unknown.get("serviceAccount").is_none());
}

/// Nothing else is audited: documents, health and discovery make no events.
#[tokio::test]
async fn other_requests_make_no_events() {
    let (api, writer, dir) = api_audited();
    for path in ["/openid/v1/jwks", "/readyz", "/apis", "/version"] {
        let reply = api.send_with_peer(Method::GET, path, None, &[], None).await;
        assert!(reply.headers.get("audit-id").is_none(), "{path}");
    }
    let (text, _) = events(writer, &dir).await;
    assert_eq!(text, "");
}

/// Requests answered before authentication decided who asked: told to retry (429: the delegated
/// lookups are all taken, kube-apiserver stalled) and timed out (504: the request's own
/// deadline passed while its lookup waited). Each is an event, refused, with the requester
/// `undecided` (neither anonymous nor failed: nothing was concluded about the credentials).
#[tokio::test]
async fn requests_answered_before_authentication_decided_are_undecided() {
    use std::time::Duration;
    use warrant_auth::{DelegatedAuthentication, DelegationOptions};

    let (client, _server) = crate::delegated::stalled_client().await;
    let (api, writer, dir) = api_audited_with(|authenticator, _| {
        authenticator.delegated = Some(DelegatedAuthentication::new(
            client,
            DelegationOptions {
                max_in_flight: 1,
                timeout: Duration::from_secs(600),
                ..crate::delegated::options()
            },
        ));
    });
    let api = std::sync::Arc::new(api);
    let uri = "/api/v1/namespaces/demo/serviceaccounts/app/token";
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let waiting = {
        let (api, body) = (api.clone(), body.clone());
        tokio::spawn(async move { api.post_as("first-unknown-token", uri, body).await })
    };
    // Until its lookup holds the only place (real time: the lookup connects to the server).
    let admin = format!("Bearer {ADMIN}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = api
            .get_with("/metrics", &[("authorization", admin.as_str())])
            .await
            .text;
        if text.contains("warrant_delegated_authentication_in_flight 1") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let retry = api.post_as("second-unknown-token", uri, body).await;
    assert_eq!(retry.code, StatusCode::TOO_MANY_REQUESTS, "{}", retry.text);
    // The first request's deadline: on a paused clock, reached as soon as nothing else runs.
    tokio::time::pause();
    let timed_out = waiting.await.unwrap();
    assert_eq!(timed_out.code, StatusCode::GATEWAY_TIMEOUT);
    // The writer is a thread of its own: its bounded wait at the end runs on real time.
    tokio::time::resume();

    let (text, events) = events(writer, &dir).await;
    assert!(!text.contains("unknown-token"), "{text}");
    let summary: Vec<(&str, &str, u64, &str)> = events
        .iter()
        .map(|e| {
            (
                e["decision"].as_str().unwrap(),
                e["requester"]["authenticatedBy"].as_str().unwrap(),
                e["code"].as_u64().unwrap(),
                e["serviceAccount"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("refused", "undecided", 429, "app"),
            ("refused", "undecided", 504, "app"),
        ]
    );
    assert!(events.iter().all(|e| e["requester"].get("user").is_none()));
}

/// A request that authenticated and then ran out of time (here: authorization asks a stalled
/// kube-apiserver) keeps its requester in the event: the timeout drops the steps inside it,
/// not what authentication found.
#[tokio::test]
async fn a_timeout_after_authentication_names_the_requester() {
    use std::time::Duration;
    use warrant_auth::{DelegatedAuthorization, DelegationOptions};

    let (client, _server) = crate::delegated::stalled_client().await;
    let (api, writer, dir) = api_audited_with(|_, authorizer| {
        authorizer.delegated = Some(DelegatedAuthorization::new(
            client,
            DelegationOptions {
                timeout: Duration::from_secs(600),
                ..crate::delegated::options()
            },
        ));
    });
    tokio::time::pause();
    let uri = "/api/v1/namespaces/demo/serviceaccounts/app/token";
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let r = api.post_as(BOB, uri, body).await;
    assert_eq!(r.code, StatusCode::GATEWAY_TIMEOUT, "{}", r.text);
    tokio::time::resume();

    let (_, events) = events(writer, &dir).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["code"], 504);
    assert_eq!(events[0]["requester"]["authenticatedBy"], "token-file");
    assert_eq!(events[0]["requester"]["user"], "bob");
}

/// The lines of every file in `dir` (the live log and its rotated files), parsed.
fn all_events(dir: &std::path::Path) -> Vec<Value> {
    let mut events = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        events.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    events
}

/// A TokenRequest without credentials from `peer`, for a service account whose namespace and
/// name are far longer than kube allows.
fn anonymous_request(peer: &str) -> Request<Body> {
    let long = "n".repeat(1000);
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(format!(
            "/api/v1/namespaces/{long}/serviceaccounts/{long}/token"
        ))
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
                .to_string(),
        ))
        .unwrap();
    request
        .extensions_mut()
        .insert(warrant_server::ClientAddress(peer.parse().unwrap()));
    request
}

/// Anyone can make refusals as fast as the server answers; they must not rotate the record of
/// issued tokens out of the log. With a log of two 16 KiB files, a token is issued, then 300
/// anonymous TokenRequests (each naming a 1,000-character namespace and name) arrive within a
/// second: the first is written, its names cut to kube's 253 characters, the other 299 are one
/// summary event with their count (and counted in the metrics), and the issued token's event is
/// still on disk. (One event each, ~2.3 KB apiece, would have filled the files 20 times over.)
#[tokio::test(start_paused = true)]
async fn an_anonymous_flood_does_not_rotate_issued_tokens_out() {
    let dir = tempfile::tempdir().unwrap();
    let options = warrant_audit::AuditOptions {
        destination: warrant_audit::Destination::File(
            dir.path().join("audit.log"),
            warrant_audit::Rotation {
                max_size_bytes: 16 * 1024,
                max_backups: 1,
                max_age_days: 0,
            },
        ),
        mode: warrant_audit::Mode::Blocking,
        buffer_size: 100,
        schema: warrant_audit::Schema::Warrant,
    };
    let (api, writer) = api_audited_to(&options, |_, _| {});
    let issued = api
        .token_as(ADMIN, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(issued.code, StatusCode::CREATED, "{}", issued.text);
    let jti = format!(
        "JTI={}",
        claims(issued.json["status"]["token"].as_str().unwrap()).jti
    );

    for n in 0..300 {
        let reply = api
            .send(anonymous_request(&format!("192.0.2.7:{}", 30_000 + n)))
            .await;
        assert_eq!(reply.code, StatusCode::UNAUTHORIZED);
    }
    let metrics = api
        .get_with("/metrics", &[("authorization", &format!("Bearer {ADMIN}"))])
        .await
        .text;
    assert!(
        metrics.contains("\nwarrant_audit_refusals_summarized_total 299\n"),
        "{metrics}"
    );
    writer.finish().await;

    let events = all_events(dir.path());
    assert!(
        events.iter().any(|e| e["credentialID"] == jti.as_str()),
        "the issued token's event was rotated out: {events:?}"
    );
    let refusals: Vec<&Value> = events
        .iter()
        .filter(|e| e["decision"] == "refused")
        .collect();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    let first = refusals.iter().find(|e| e.get("count").is_none()).unwrap();
    assert_eq!(first["requester"]["clientAddress"], "192.0.2.7:30000");
    let namespace = first["serviceAccount"]["namespace"].as_str().unwrap();
    assert_eq!(namespace.chars().count(), 253 + 1, "cut, ending in …");
    let summary = refusals.iter().find(|e| e.get("count").is_some()).unwrap();
    assert_eq!(summary["count"], 299);
    assert_eq!(summary["code"], 401);
    assert_eq!(summary["requester"]["authenticatedBy"], "anonymous");
    assert_eq!(summary["requester"]["clientAddress"], "192.0.2.7");
}

/// The audit options of a log at /dev/full, a device whose every write fails (a full disk).
fn full_disk(mode: warrant_audit::Mode) -> warrant_audit::AuditOptions {
    warrant_audit::AuditOptions {
        destination: warrant_audit::Destination::File(
            "/dev/full".into(),
            warrant_audit::Rotation {
                max_size_bytes: 0,
                max_backups: 0,
                max_age_days: 0,
            },
        ),
        mode,
        buffer_size: 100,
        schema: warrant_audit::Schema::Warrant,
    }
}

/// Blocking mode with a disk that refuses every write: no token goes out unaudited. The
/// TokenRequest is answered 503 with a Status saying why (and no token), so is a review, and
/// the server is not ready, naming the audit log, until a write succeeds.
#[tokio::test]
async fn blocking_mode_issues_nothing_the_log_cannot_hold() {
    let (api, writer) = api_audited_to(&full_disk(warrant_audit::Mode::Blocking), |_, _| {});
    assert_eq!(api.get("/readyz").await.text, "ok");

    let reply = api
        .token_as(ADMIN, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(
        reply.code,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text
    );
    assert_eq!(reply.json["kind"], "Status");
    assert_eq!(reply.json["status"], "Failure");
    assert_eq!(reply.json["reason"], "ServiceUnavailable");
    assert_eq!(reply.json["code"], 503);
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap()
            .starts_with("the audit log cannot be written"),
        "{}",
        reply.text
    );
    assert!(!reply.text.contains("eyJ"), "a token in the answer");
    // The Audit-ID the event would have had, as on every audited answer.
    let id = reply
        .headers
        .get("audit-id")
        .expect("an Audit-ID on the 503");
    assert_eq!(id.len(), 36, "{id:?}");

    let token = crate::support::key().sign(&claims_for_review()).unwrap();
    let review = api
        .review("authentication.k8s.io/v1", &token, &["vault"])
        .await;
    assert_eq!(
        review.code,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        review.text
    );

    let ready = api.get("/readyz").await;
    assert_eq!(ready.code, StatusCode::SERVICE_UNAVAILABLE);
    assert!(ready.text.contains("audit-log"), "{}", ready.text);
    // The reason, to a caller who authenticated.
    let admin = format!("Bearer {ADMIN}");
    let verbose = api
        .get_with("/readyz?verbose", &[("authorization", &admin)])
        .await
        .text;
    assert!(
        verbose
            .contains("[-]audit-log failed: writes to the audit log fail: No space left on device"),
        "{verbose}"
    );
    let single = api.get("/readyz/audit-log").await;
    assert_eq!(single.code, StatusCode::SERVICE_UNAVAILABLE);
    let metrics = api
        .get_with("/metrics", &[("authorization", &format!("Bearer {ADMIN}"))])
        .await
        .text;
    assert!(
        metrics.contains("warrant_audit_events_total{result=\"failed\"} 2"),
        "{metrics}"
    );
    writer.finish().await;
}

/// Batch mode promises no record: with every write failing, tokens are still issued, the
/// events are counted as failed, and readiness says so without failing.
#[tokio::test]
async fn batch_mode_serves_on_when_the_log_fails() {
    let (api, writer) = api_audited_to(&full_disk(warrant_audit::Mode::Batch), |_, _| {});
    let reply = api
        .token_as(ADMIN, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    writer.finish().await;
    let admin = format!("Bearer {ADMIN}");
    let ready = api
        .get_with("/readyz?verbose", &[("authorization", &admin)])
        .await;
    assert_eq!(ready.code, StatusCode::OK);
    assert!(
        ready.text.contains("[+]audit-log failing (batch mode"),
        "{}",
        ready.text
    );
}

/// The claims of a token of demo/app for "vault", as warrant issues it.
fn claims_for_review() -> warrant_token::Claims {
    warrant_token::Claims::new(warrant_token::NewToken {
        issuer: ISSUER,
        namespace: "demo",
        service_account: warrant_token::ObjectRef::new("app", SA_UID),
        audiences: vec!["vault".into()],
        binding: warrant_token::Binding::None,
        issued_at: NOW,
        expires_at: NOW + 3600,
        warn_after: None,
        jti: "jti-1".into(),
    })
}

/// Self-service for `demo/app`: a token of warrant's for its API audience (the "hub" token)
/// mints another (the "member" token).
const SELF_SERVICE: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
selfService:
  audiences: [vault]
  maxExpirationSeconds: 3600
";

/// A caller authenticated by one of warrant's own tokens is named, in the event of the token
/// it mints, by that token's credential ID, so the chain hub token → member token can be
/// joined; in both schemas (warrant's `requester.credentialID`; kube's `user.extra`, as
/// kube-apiserver writes it). Neither token is in the log.
#[tokio::test]
async fn a_token_callers_credential_is_in_the_event_of_what_it_mints() {
    for schema in [
        warrant_audit::Schema::Warrant,
        warrant_audit::Schema::Kubernetes,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = warrant_audit::AuditOptions {
            destination: warrant_audit::Destination::File(
                dir.path().join("audit.log"),
                warrant_audit::Rotation {
                    max_size_bytes: 0,
                    max_backups: 0,
                    max_age_days: 0,
                },
            ),
            mode: warrant_audit::Mode::Blocking,
            buffer_size: 100,
            schema,
        };
        let policy = warrant_auth::Policy::parse(SELF_SERVICE, "policy.yaml").unwrap();
        let (api, writer) = api_audited_to(&options, |_, authz| {
            authz.policy = Some(warrant_auth::PolicyFile::from_policy(
                policy,
                std::path::Path::new("policy.yaml"),
            ));
        });
        // The hub token: warrant's, for its API audience (the default).
        let hub = api.token("app", json!({})).await;
        assert_eq!(hub.code, StatusCode::CREATED, "{}", hub.text);
        let hub = hub.json["status"]["token"].as_str().unwrap().to_owned();
        let hub_jti = claims(&hub).jti;
        // The member token, minted with it.
        let member = api
            .token_as(&hub, "app", json!({"audiences": ["vault"]}))
            .await;
        assert_eq!(member.code, StatusCode::CREATED, "{}", member.text);
        let member = member.json["status"]["token"].as_str().unwrap().to_owned();
        let member_jti = claims(&member).jti;

        let (text, events) = events(writer, &dir).await;
        for token in [&hub, &member] {
            assert!(
                !text.contains(token.as_str()),
                "{schema:?}: a token in the log"
            );
            let signature = token.rsplit('.').next().unwrap();
            assert!(
                !text.contains(signature),
                "{schema:?}: a signature in the log"
            );
        }
        assert_eq!(events.len(), 2, "{text}");
        let minted = &events[1];
        let hub_id = format!("JTI={hub_jti}");
        let member_id = format!("JTI={member_jti}");
        match schema {
            warrant_audit::Schema::Warrant => {
                assert_eq!(events[0]["credentialID"], hub_id);
                assert_eq!(minted["requester"]["credentialID"], hub_id, "{minted}");
                assert_eq!(
                    minted["requester"]["authenticatedBy"],
                    "service-account-token"
                );
                assert_eq!(minted["credentialID"], member_id);
            }
            warrant_audit::Schema::Kubernetes => {
                assert_eq!(minted["kind"], "Event");
                assert_eq!(minted["apiVersion"], "audit.k8s.io/v1");
                let issued = warrant_audit::ISSUED_CREDENTIAL_ID;
                assert_eq!(events[0]["annotations"][issued], hub_id);
                assert_eq!(
                    minted["user"]["extra"]["authentication.kubernetes.io/credential-id"],
                    json!([hub_id]),
                    "{minted}"
                );
                assert_eq!(minted["user"]["username"], "system:serviceaccount:demo:app");
                assert_eq!(minted["annotations"][issued], member_id);
                assert_eq!(
                    minted["objectRef"],
                    json!({"resource": "serviceaccounts", "namespace": "demo", "name": "app",
                           "apiVersion": "v1", "subresource": "token"})
                );
                assert_eq!(minted["responseStatus"]["code"], 201);
            }
        }
    }
}
