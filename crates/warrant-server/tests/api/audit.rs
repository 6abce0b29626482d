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
    assert_eq!(
        reply.json["status"]["authenticated"], true,
        "{}",
        reply.text
    );
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
