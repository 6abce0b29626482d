//! Key-bound tokens (issue 27): a TokenRequest with a DPoP proof (RFC 9449) gets a token whose
//! `cnf.jkt` is its key's thumbprint; a bad proof is a 400 saying why. Proofs and thumbprints come
//! from warrant-testkit's `DpopHolder` (aws-lc-rs by the RFCs' recipes), not from warrant's code.

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use crate::support::*;
use warrant_testkit::{DpopHolder, sha256_b64url};

const HOST: &str = "warrant.example:8443";
const PATH: &str = "/api/v1/namespaces/demo/serviceaccounts/app/token";

/// A proof for a TokenRequest for `demo/app` at `iat`, with `jti`.
fn for_token_request(holder: &DpopHolder, jti: &str, iat: i64) -> String {
    holder.proof(&json!({"jti": jti, "htm": "POST",
                         "htu": format!("https://{HOST}{PATH}"), "iat": iat}))
}

/// A TokenRequest for `demo/app` as the admin, with the `DPoP` header `proof` (if any) and
/// the `Host` header `host` (if any).
async fn request(api: &Api, proof: Option<&str>, host: Option<&str>) -> Reply {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(PATH)
        .header("authorization", format!("Bearer {ADMIN}"))
        .header("content-type", "application/json");
    if let Some(host) = host {
        request = request.header("host", host);
    }
    if let Some(proof) = proof {
        request = request.header("dpop", proof);
    }
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"audiences": ["vault"]}});
    api.send(request.body(Body::from(body.to_string())).unwrap())
        .await
}

#[tokio::test]
async fn a_proof_binds_the_token_to_its_key() {
    let api = api();
    let holder = DpopHolder::new();
    let reply = request(
        &api,
        Some(&for_token_request(&holder, "one", NOW)),
        Some(HOST),
    )
    .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let token = reply.json["status"]["token"].as_str().unwrap();
    let payload: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["cnf"], json!({"jkt": holder.thumbprint()}));

    // Without a proof, no binding: the token has no cnf at all, as kube's have none.
    let reply = request(&api, None, Some(HOST)).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let token = reply.json["status"]["token"].as_str().unwrap();
    assert_eq!(claims(token).cnf, None);
    let payload = URL_SAFE_NO_PAD
        .decode(token.split('.').nth(1).unwrap())
        .unwrap();
    assert!(!String::from_utf8(payload).unwrap().contains("cnf"));
}

/// Each refusal is a 400 kube `Status` that says why, and never quotes the proof.
#[tokio::test]
async fn a_bad_proof_is_a_400_saying_why() {
    let api = api();
    let holder = DpopHolder::new();
    let other_path = holder.proof(&json!({"jti": "p", "htm": "POST",
        "htu": format!("https://{HOST}/api/v1/namespaces/demo/serviceaccounts/other/token"),
        "iat": NOW}));
    let get = holder.proof(&json!({"jti": "g", "htm": "GET",
        "htu": format!("https://{HOST}{PATH}"), "iat": NOW}));
    let stale = for_token_request(&holder, "s", NOW - 120);
    let cases = [
        (other_path, "DPoP proof htu does not match the request URI"),
        (get, "DPoP proof htm does not match the request method"),
        (stale, "DPoP proof is too old"),
        (
            "not-a-proof".to_owned(),
            "DPoP proof is not a well-formed JWT",
        ),
    ];
    for (proof, why) in cases {
        let reply = request(&api, Some(&proof), Some(HOST)).await;
        assert_eq!(reply.code, StatusCode::BAD_REQUEST, "{why}: {}", reply.text);
        assert_eq!(reply.json["kind"], "Status");
        assert_eq!(reply.json["reason"], "BadRequest");
        let message = reply.json["message"].as_str().unwrap();
        assert!(
            message.starts_with("invalid DPoP proof: ") && message.contains(why),
            "{message}"
        );
        assert!(!reply.text.contains(&proof), "the answer quotes the proof");
    }
}

/// A proof is good for one request: sent again within its window, it is refused.
#[tokio::test]
async fn a_replayed_proof_is_refused() {
    let api = api();
    let holder = DpopHolder::new();
    let proof = for_token_request(&holder, "once", NOW);
    let first = request(&api, Some(&proof), Some(HOST)).await;
    assert_eq!(first.code, StatusCode::CREATED, "{}", first.text);
    api.advance(30);
    let again = request(&api, Some(&proof), Some(HOST)).await;
    assert_eq!(again.code, StatusCode::BAD_REQUEST, "{}", again.text);
    assert_eq!(
        again.json["message"],
        "invalid DPoP proof: DPoP proof has already been used (its jti was seen before)"
    );
    // A new proof from the same key is fine.
    let fresh = request(
        &api,
        Some(&for_token_request(&holder, "next", NOW + 30)),
        Some(HOST),
    )
    .await;
    assert_eq!(fresh.code, StatusCode::CREATED, "{}", fresh.text);
}

/// The proof's `htu` is checked against `https://` + the host the caller addressed: a proof
/// for another host is refused, and a request that names no host cannot be checked at all.
#[tokio::test]
async fn the_uri_is_the_host_the_caller_addressed() {
    let api = api();
    let holder = DpopHolder::new();
    let reply = request(
        &api,
        Some(&for_token_request(&holder, "h", NOW)),
        Some("elsewhere.example"),
    )
    .await;
    assert_eq!(reply.code, StatusCode::BAD_REQUEST, "{}", reply.text);
    let reply = request(&api, Some(&for_token_request(&holder, "n", NOW)), None).await;
    assert_eq!(reply.code, StatusCode::BAD_REQUEST, "{}", reply.text);
    assert!(
        reply.json["message"]
            .as_str()
            .unwrap()
            .contains("names no host"),
        "{}",
        reply.text
    );
}

/// The audit event of a key-bound token records the key's thumbprint, and not the proof.
#[tokio::test]
async fn the_audit_event_records_the_thumbprint() {
    let (api, writer, dir) = api_audited();
    let holder = DpopHolder::new();
    let proof = for_token_request(&holder, "a", NOW);
    let reply = request(&api, Some(&proof), Some(HOST)).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    writer.finish().await;
    let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
    let event: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(event["cnf"], json!({"jkt": holder.thumbprint()}));
    assert!(!text.contains(&proof), "the audit log holds the proof");
}

/// The service account `demo/app` may read `/metrics` with its own tokens.
const METRICS_POLICY: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: metrics
  subjects: [{kind: ServiceAccount, namespace: demo, name: app}]
  metrics: true
";

fn with_metrics_policy() -> Api {
    let policy = warrant_auth::Policy::parse(METRICS_POLICY, "policy.yaml").unwrap();
    api_auth(|_, authz| {
        authz.policy = Some(warrant_auth::PolicyFile::from_policy(
            policy,
            std::path::Path::new("policy.yaml"),
        ));
    })
}

/// A token for warrant's own API audience, bound to `holder`'s key.
async fn bound_token(api: &Api, holder: &DpopHolder, jti: &str) -> String {
    bound_token_for(api, holder, "app", jti).await
}

/// A token of `demo/<account>` for warrant's own API audience, bound to `holder`'s key.
async fn bound_token_for(api: &Api, holder: &DpopHolder, account: &str, jti: &str) -> String {
    let path = format!("/api/v1/namespaces/demo/serviceaccounts/{account}/token");
    let proof = holder.proof(&json!({"jti": jti, "htm": "POST",
                                     "htu": format!("https://{HOST}{path}"), "iat": NOW}));
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(&path)
        .header("authorization", format!("Bearer {ADMIN}"))
        .header("content-type", "application/json")
        .header("host", HOST)
        .header("dpop", proof);
    request = request.header("accept", "application/json");
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let reply = api
        .send(request.body(Body::from(body.to_string())).unwrap())
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    reply.json["status"]["token"].as_str().unwrap().to_owned()
}

/// A proof for `GET /metrics` presenting `token`.
fn metrics_proof(holder: &DpopHolder, token: &str, jti: &str) -> String {
    let ath = sha256_b64url(token.as_bytes());
    holder.proof(
        &json!({"jti": jti, "htm": "GET", "htu": format!("https://{HOST}/metrics"),
                        "iat": NOW, "ath": ath}),
    )
}

async fn get_metrics(api: &Api, authorization: &str, proof: Option<&str>) -> Reply {
    let mut headers = vec![("authorization", authorization), ("host", HOST)];
    if let Some(proof) = proof {
        headers.push(("dpop", proof));
    }
    api.send_with_peer(Method::GET, "/metrics", None, &headers, None)
        .await
}

fn assert_dpop_challenge(reply: &Reply, case: &str) {
    assert_eq!(
        reply.code,
        StatusCode::UNAUTHORIZED,
        "{case}: {}",
        reply.text
    );
    let challenge = reply
        .headers
        .get("www-authenticate")
        .unwrap_or_else(|| panic!("{case}: no WWW-Authenticate"))
        .to_str()
        .unwrap();
    assert!(
        challenge.starts_with(r#"DPoP error="invalid_dpop_proof""#),
        "{case}: {challenge}"
    );
}

/// A key-bound token works against warrant's API only as `Authorization: DPoP` with a fresh
/// proof of its key for this request and this token.
#[tokio::test]
async fn a_key_bound_token_authenticates_only_with_its_proof() {
    let api = with_metrics_policy();
    let holder = DpopHolder::new();
    let token = bound_token(&api, &holder, "issue").await;
    let dpop = format!("DPoP {token}");

    let ok = get_metrics(&api, &dpop, Some(&metrics_proof(&holder, &token, "m1"))).await;
    assert_eq!(ok.code, StatusCode::OK, "{}", ok.text);
    assert!(
        ok.text
            .contains("warrant_authentications_total{method=\"dpop\",result=\"success\"} 1"),
        "{}",
        ok.text
    );

    // As a bearer token (a thief without the key): refused, with RFC 9449's challenge.
    let bearer = get_metrics(&api, &format!("Bearer {token}"), None).await;
    assert_dpop_challenge(&bearer, "bearer");
    assert_eq!(bearer.json["message"], "Unauthorized");
    // Even with a proof alongside, the bearer scheme does not do.
    let bearer = get_metrics(
        &api,
        &format!("Bearer {token}"),
        Some(&metrics_proof(&holder, &token, "b1")),
    )
    .await;
    assert_dpop_challenge(&bearer, "bearer with a proof");

    // Under the DPoP scheme without a proof.
    assert_dpop_challenge(&get_metrics(&api, &dpop, None).await, "no proof");
    // With a proof by another key (its thumbprint is not the token's cnf.jkt).
    let thief = DpopHolder::new();
    let other_key = get_metrics(&api, &dpop, Some(&metrics_proof(&thief, &token, "t1"))).await;
    assert_dpop_challenge(&other_key, "another key");
    // With the holder's proof made for another token (ath).
    let other_token = metrics_proof(&holder, "another.token.value", "a1");
    assert_dpop_challenge(
        &get_metrics(&api, &dpop, Some(&other_token)).await,
        "another token's ath",
    );
    // With the first proof again.
    let replayed = get_metrics(&api, &dpop, Some(&metrics_proof(&holder, &token, "m1"))).await;
    assert_dpop_challenge(&replayed, "replayed");
    // A proof made for TokenRequest (another method and URI).
    let elsewhere = for_token_request(&holder, "x1", NOW);
    assert_dpop_challenge(
        &get_metrics(&api, &dpop, Some(&elsewhere)).await,
        "another request",
    );
    // A fresh proof still works.
    let again = get_metrics(&api, &dpop, Some(&metrics_proof(&holder, &token, "m2"))).await;
    assert_eq!(again.code, StatusCode::OK, "{}", again.text);
}

/// An unbound token is a bearer token: under the DPoP scheme it is refused (there is no key for
/// a proof to confirm), and as a bearer token it works as before.
#[tokio::test]
async fn an_unbound_token_is_a_bearer_token() {
    let api = with_metrics_policy();
    let reply = api.token("app", json!({})).await;
    let token = reply.json["status"]["token"].as_str().unwrap().to_owned();
    let holder = DpopHolder::new();
    let dpop = get_metrics(
        &api,
        &format!("DPoP {token}"),
        Some(&metrics_proof(&holder, &token, "u1")),
    )
    .await;
    assert_eq!(dpop.code, StatusCode::UNAUTHORIZED, "{}", dpop.text);
    let bearer = get_metrics(&api, &format!("Bearer {token}"), None).await;
    assert_eq!(bearer.code, StatusCode::OK, "{}", bearer.text);
}

/// kube's TokenReview carries no proof: a key-bound token reviewed through it does not
/// authenticate, and the review says why. The same token unbound would.
#[tokio::test]
async fn a_key_bound_token_does_not_pass_a_review_without_a_proof() {
    let api = api();
    let holder = DpopHolder::new();
    let token = bound_token(&api, &holder, "r").await;
    let reply = api
        .review("authentication.k8s.io/v1", &token, &[ISSUER])
        .await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    assert_eq!(reply.json["status"]["authenticated"], Value::Null);
    assert_eq!(
        reply.json["status"]["error"],
        "service account token is bound to a key (cnf): this TokenReview cannot carry the proof of that key; review it with the proof (spec.dpop or spec.certificateThumbprint) at /apis/warrant.dev/v1alpha1/tokenreviews"
    );
    assert!(
        !reply.text.contains("system:serviceaccount"),
        "{}",
        reply.text
    );
    let unbound = api.token("app", json!({})).await;
    let unbound = unbound.json["status"]["token"].as_str().unwrap();
    let reply = api
        .review("authentication.k8s.io/v1", unbound, &[ISSUER])
        .await;
    reply.assert_authenticated();
}

/// A workload presenting its key-bound token under the DPoP scheme asks for another token for
/// itself: the request's one proof authenticates it and binds the new token to the same key,
/// which satisfies a policy requiring self-service tokens to be bound. (Checked twice, the proof
/// would be refused as a replay of itself.)
#[tokio::test]
async fn a_dpop_caller_gets_tokens_bound_to_its_own_key() {
    let policy = warrant_auth::Policy::parse(
        "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
selfService:
  audiences: [vault]
requireKeyBinding:
  selfService: true
",
        "policy.yaml",
    )
    .unwrap();
    let api = api_auth(|_, authz| {
        authz.policy = Some(warrant_auth::PolicyFile::from_policy(
            policy,
            std::path::Path::new("policy.yaml"),
        ));
    });
    let holder = DpopHolder::new();
    let token = bound_token(&api, &holder, "own").await;
    let ath = sha256_b64url(token.as_bytes());
    let proof = holder.proof(&json!({"jti": "self", "htm": "POST",
        "htu": format!("https://{HOST}{PATH}"), "iat": NOW, "ath": ath}));
    let request = Request::builder()
        .method(Method::POST)
        .uri(PATH)
        .header("authorization", format!("DPoP {token}"))
        .header("dpop", proof)
        .header("host", HOST)
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"audiences": ["vault"]}})
            .to_string(),
        ))
        .unwrap();
    let reply = api.send(request).await;
    assert_eq!(reply.code, StatusCode::CREATED, "{}", reply.text);
    let minted = reply.json["status"]["token"].as_str().unwrap();
    assert_eq!(claims(minted).aud, vec!["vault".to_owned()]);
    let payload: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(minted.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["cnf"], json!({"jkt": holder.thumbprint()}));
}

/// Issue 31, item 1: one window. A proof is accepted until, not including, iat + 60 s on
/// warrant's clock, and remembered exactly that long: stepping the clock across the end of its
/// window, a proof presented twice at the same instant is never accepted twice. (Comparing whole
/// seconds, warrant accepted it until iat + 61 while its replay entry ended at iat + 60: in that
/// last second every replay passed.)
#[tokio::test]
async fn a_proof_is_never_accepted_twice_at_the_end_of_its_window() {
    let api = with_metrics_policy();
    let holder = DpopHolder::new();
    let token = bound_token(&api, &holder, "issue").await;
    let dpop = format!("DPoP {token}");
    for (jti, millis, accepted) in [
        ("edge-a", 59_750, true),
        ("edge-b", 60_000, false),
        ("edge-c", 60_500, false),
        ("edge-d", 60_999, false),
    ] {
        let proof = metrics_proof(&holder, &token, jti);
        api.state.issuer().clock().set(
            jiff::Timestamp::from_second(NOW).unwrap() + jiff::SignedDuration::from_millis(millis),
        );
        let first = get_metrics(&api, &dpop, Some(&proof)).await;
        let again = get_metrics(&api, &dpop, Some(&proof)).await;
        assert_dpop_challenge(
            &again,
            &format!("the same proof again at iat + {millis} ms"),
        );
        assert_eq!(
            first.code == StatusCode::OK,
            accepted,
            "at iat + {millis} ms: {}",
            first.code
        );
    }
}

/// Issue 31, item 2: the holder of a key-bound token floods warrant with fresh proofs of its
/// own key, then replays proofs it has seen. Nothing still in its window is forgotten to make
/// room: past its share of the cache the flood is refused with 429 (Retry-After), and every
/// proof accepted before, another account's that it captured and its own, stays a replay.
#[tokio::test]
async fn a_flood_of_proofs_never_makes_room_for_a_replay() {
    let policy = warrant_auth::Policy::parse(METRICS_POLICY, "policy.yaml").unwrap();
    let api = api_auth(|authn, authz| {
        authn.proofs = warrant_auth::ProofChecker::new(60, 50);
        authz.policy = Some(warrant_auth::PolicyFile::from_policy(
            policy,
            std::path::Path::new("policy.yaml"),
        ));
    });
    // The victim, another service account, uses its bound token once (it may not read
    // metrics: 403, after authentication); its proof is captured.
    let victim = DpopHolder::new();
    let victims_token = bound_token_for(&api, &victim, "other", "victim-issue").await;
    let captured = metrics_proof(&victim, &victims_token, "captured");
    let victims = format!("DPoP {victims_token}");
    let used = get_metrics(&api, &victims, Some(&captured)).await;
    assert_eq!(used.code, StatusCode::FORBIDDEN, "{}", used.text);

    let attacker = DpopHolder::new();
    let token = bound_token(&api, &attacker, "attacker-issue").await;
    let dpop = format!("DPoP {token}");
    let mut accepted = Vec::new();
    let mut throttled = 0;
    for i in 0..400 {
        let proof = metrics_proof(&attacker, &token, &format!("flood-{i}"));
        let reply = get_metrics(&api, &dpop, Some(&proof)).await;
        match reply.code {
            StatusCode::OK => accepted.push(proof),
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(reply.headers["retry-after"], "1");
                throttled += 1;
            }
            other => panic!("flood {i}: {other}: {}", reply.text),
        }
    }
    let replayed = get_metrics(&api, &victims, Some(&captured)).await;
    assert_dpop_challenge(&replayed, "the captured proof after the flood");
    for proof in &accepted {
        assert_dpop_challenge(
            &get_metrics(&api, &dpop, Some(proof)).await,
            "the flooder's own proof again",
        );
    }
    assert!(throttled > 0, "the flood was never refused");
    // The flooder filled only its own share: the victim's next proof still works.
    let fresh = metrics_proof(&victim, &victims_token, "next");
    let reply = get_metrics(&api, &victims, Some(&fresh)).await;
    assert_eq!(reply.code, StatusCode::FORBIDDEN, "{}", reply.text);
    let metrics = get_metrics(&api, &dpop, Some(&metrics_proof(&attacker, &token, "read"))).await;
    // Still over its share until its proofs expire: the flooder cannot even read them now.
    assert_eq!(
        metrics.code,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        metrics.text
    );
    api.advance(60);
    let later = holder_proof_at(&attacker, &token, "after", NOW + 60);
    let metrics = get_metrics(&api, &dpop, Some(&later)).await;
    assert_eq!(metrics.code, StatusCode::OK, "{}", metrics.text);
    assert!(
        metrics
            .text
            .contains("warrant_dpop_proofs_total{result=\"over_share\"}"),
        "{}",
        metrics.text
    );
    assert!(
        metrics.text.contains("warrant_dpop_replay_cache_entries 1"),
        "{}",
        metrics.text
    );
}

/// A proof for `GET /metrics` presenting `token`, issued at `iat`.
fn holder_proof_at(holder: &DpopHolder, token: &str, jti: &str, iat: i64) -> String {
    holder.proof(
        &json!({"jti": jti, "htm": "GET", "htu": format!("https://{HOST}/metrics"),
                         "iat": iat, "ath": sha256_b64url(token.as_bytes())}),
    )
}
