//! Authorization without a cluster: the default (only `system:masters`), the policy file, and
//! self-service with warrant's own tokens. Refusals are kube's `403` in kube's words.

use std::path::Path;

use http::{Method, StatusCode};
use serde_json::json;
use warrant_auth::{Policy, PolicyFile};

use crate::support::*;

const POLICY: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: dev
  subjects: [{kind: Group, name: dev}]
  tokens:
    namespaces: [demo]
    serviceAccounts: [app]
    audiences: [vault, 'https://warrant.*']
    maxExpirationSeconds: 7200
- name: dev-long
  subjects: [{kind: User, name: bob}]
  tokens:
    namespaces: ['*']
    serviceAccounts: [other]
    audiences: ['*']
- name: reviewers
  subjects: [{kind: ServiceAccount, namespace: demo, name: app}]
  reviews: true
  metrics: true
selfService:
  audiences: [vault, 'https://warrant.test']
  maxExpirationSeconds: 3600
";

fn with_policy(text: &str) -> Api {
    let policy = Policy::parse(text, "policy.yaml").unwrap();
    api_auth(|_, authz| {
        authz.policy = Some(PolicyFile::from_policy(policy, Path::new("policy.yaml")));
    })
}

fn message(r: &Reply) -> &str {
    r.json["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn without_an_authorizer_only_system_masters_may() {
    let api = api();
    assert_eq!(api.token("app", json!({})).await.code, StatusCode::CREATED);
    let r = api.token_as(BOB, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        r.text,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"serviceaccounts \"app\" is forbidden: User \"bob\" cannot create resource \"serviceaccounts/token\" in API group \"\" in the namespace \"demo\"","reason":"Forbidden","details":{"name":"app","kind":"serviceaccounts"},"code":403}"#
    );
    let r = api
        .post_as(
            BOB,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": "x"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"tokenreviews.authentication.k8s.io is forbidden: User "bob" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope"#
    );
    let r = api
        .send_with_peer(
            Method::GET,
            "/metrics",
            None,
            &[("authorization", &format!("Bearer {BOB}"))],
            None,
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"forbidden: User "bob" cannot get path "/metrics""#
    );
    // Anonymous: 401 before any authorization; health is always allowed.
    assert_eq!(api.get("/metrics").await.code, StatusCode::UNAUTHORIZED);
    assert_eq!(api.get("/healthz").await.code, StatusCode::OK);
}

#[tokio::test]
async fn the_policy_allows_what_a_rule_allows() {
    let api = with_policy(POLICY);
    let ok = api
        .token_as(
            BOB,
            "app",
            json!({"audiences": ["vault"], "expirationSeconds": 7200}),
        )
        .await;
    assert_eq!(ok.code, StatusCode::CREATED, "{}", ok.text);
    // No audiences: the API audience, which the rule lists by glob.
    let ok = api.token_as(BOB, "app", json!({})).await;
    assert_eq!(ok.code, StatusCode::CREATED, "{}", ok.text);
    // The aggregated path is the same grant.
    let ok = api
        .post_as(
            BOB,
            "/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/app/token",
            json!({"spec": {"audiences": ["vault"]}}),
        )
        .await;
    assert_eq!(ok.code, StatusCode::CREATED, "{}", ok.text);
    // Another rule: any audience, no limit on lifetime.
    let ok = api
        .token_as(
            BOB,
            "other",
            json!({"audiences": ["s3"], "expirationSeconds": 86400}),
        )
        .await;
    assert_eq!(ok.code, StatusCode::CREATED, "{}", ok.text);
}

#[tokio::test]
async fn the_policy_refuses_what_no_rule_allows() {
    let api = with_policy(POLICY);
    // Not a subject of any rule.
    let r = api.token_as(NODE_1, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "system:node:node-1" cannot create resource "serviceaccounts/token" in API group "" in the namespace "demo""#
    );
    // An audience no rule for this service account allows.
    let r = api.token_as(BOB, "app", json!({"audiences": ["s3"]})).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "bob" cannot request a token for the audience "s3": no rule of the authorization policy allows it"#
    );
    let r = api
        .token_as(BOB, "app", json!({"audiences": ["vault", "s3", "gcs"]}))
        .await;
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "bob" cannot request a token for the audiences ["s3" "gcs"]: no rule of the authorization policy allows it"#
    );
    // Longer than the rule allows.
    let r = api
        .token_as(
            BOB,
            "app",
            json!({"audiences": ["vault"], "expirationSeconds": 7201}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "bob" cannot request a token valid for 7201 seconds: the authorization policy allows at most 7200"#
    );
    // Reviews and metrics: the service account's rule, not bob's.
    let r = api
        .post_as(
            BOB,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": "x"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_admin_gets_tokens_the_policy_would_refuse() {
    let api = with_policy(POLICY);
    let r = api
        .token(
            "app",
            json!({"audiences": ["s3"], "expirationSeconds": 86400}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED);
}

/// A token for the API audience, issued by the admin for `demo/app` (optionally bound).
async fn own_token(api: &Api, spec: serde_json::Value) -> String {
    let r = api.token("app", spec).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    r.json["status"]["token"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn service_accounts_review_and_read_metrics_with_their_own_tokens() {
    let api = with_policy(POLICY);
    let token = own_token(&api, json!({})).await;
    let r = api
        .post_as(
            &token,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": token}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    r.assert_authenticated();
    let r = api
        .send_with_peer(
            Method::GET,
            "/metrics",
            None,
            &[("authorization", &format!("Bearer {token}"))],
            None,
        )
        .await;
    assert_eq!(r.code, StatusCode::OK);
    assert!(
        r.text
            .contains("warrant_authorizations_total{authorizer=\"policy\",decision=\"allow\"}"),
        "{}",
        r.text
    );
    assert!(
        r.text
            .contains("warrant_authentications_total{method=\"own_token\",result=\"success\"}")
    );
}

#[tokio::test]
async fn own_tokens_authenticate_only_for_the_api_audiences_and_while_valid() {
    let api = with_policy(POLICY);
    // A token for vault is for vault: replaying it to warrant is refused.
    let vault = own_token(&api, json!({"audiences": ["vault"]})).await;
    let r = api
        .post_as(
            &vault,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": "x"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED);
    // A pod-bound token stops working when its pod goes.
    let bound = own_token(
        &api,
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0"}}),
    )
    .await;
    let review = |token: String| {
        let api = &api;
        async move {
            api.post_as(
                &token,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"spec": {"token": "x"}}),
            )
            .await
            .code
        }
    };
    assert_eq!(review(bound.clone()).await, StatusCode::CREATED);
    api.objects
        .remove(warrant_objects::Kind::Pod, "demo", "app-0");
    assert_eq!(review(bound).await, StatusCode::UNAUTHORIZED);
    // Expired.
    let token = own_token(&api, json!({})).await;
    api.advance(3600 + 61);
    assert_eq!(review(token).await, StatusCode::UNAUTHORIZED);
}

/// Where warrant is the cluster's signer, the token agent's pod token is one of warrant's own,
/// for the token agent's audience: it authenticates as its service account where that audience
/// is warrant's (`--token-agent-audience`), and is refused as any other audience is where it
/// is not.
#[tokio::test]
async fn own_tokens_for_the_token_agents_audience_authenticate() {
    let audience = warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE;
    let policy = Policy::parse(POLICY, "policy.yaml").unwrap();
    let api = api_auth(|authn, authz| {
        authn.agent_audience = Some(audience.into());
        authz.policy = Some(PolicyFile::from_policy(policy, Path::new("policy.yaml")));
    });
    let without = with_policy(POLICY);
    for (api, code) in [
        (&api, StatusCode::CREATED),
        (&without, StatusCode::UNAUTHORIZED),
    ] {
        let token = own_token(api, json!({"audiences": [audience]})).await;
        let r = api
            .post_as(
                &token,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                json!({"spec": {"token": "x"}}),
            )
            .await;
        assert_eq!(r.code, code, "{}", r.text);
    }
}

#[tokio::test]
async fn self_service() {
    let api = with_policy(POLICY);
    let token = own_token(&api, json!({})).await;
    // For itself, a self-service audience: allowed.
    let r = api
        .token_as(&token, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    // For another service account: refused as RBAC would.
    let r = api.token_as(&token, "other", json!({})).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "other" is forbidden: User "system:serviceaccount:demo:app" cannot create resource "serviceaccounts/token" in API group "" in the namespace "demo""#
    );
    // An audience self-service does not allow.
    let r = api
        .token_as(&token, "app", json!({"audiences": ["s3"]}))
        .await;
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" cannot request a token for itself for the audience "s3": not a self-service audience"#
    );
    // Longer than self-service allows.
    let r = api
        .token_as(
            &token,
            "app",
            json!({"audiences": ["vault"], "expirationSeconds": 7200}),
        )
        .await;
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" cannot request a token for itself valid for 7200 seconds: self-service allows at most 3600"#
    );

    // A pod-bound token passes its binding on.
    let bound = own_token(
        &api,
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0"}}),
    )
    .await;
    let r = api
        .token_as(&bound, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" authenticated with a token bound to Pod "app-0" and may only request tokens bound to the same object"#
    );
    let r = api
        .token_as(
            &bound,
            "app",
            json!({"audiences": ["vault"], "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0", "uid": POD_UID}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
}

#[tokio::test]
async fn self_service_needs_the_policy_section() {
    let without = POLICY.split("selfService:").next().unwrap();
    let api = with_policy(without);
    let token = own_token(&api, json!({})).await;
    let r = api
        .token_as(&token, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_policy_file_reloads_and_keeps_the_last_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, POLICY).unwrap();
    let file = PolicyFile::load(&path).unwrap();
    let handle = file.clone();
    let api = api_auth(|_, authz| authz.policy = Some(handle));
    assert_eq!(
        api.token_as(BOB, "app", json!({"audiences": ["vault"]}))
            .await
            .code,
        StatusCode::CREATED
    );
    std::fs::write(
        &path,
        POLICY
            .replace("name: dev\n", "name: dev\n  # now for ops\n")
            .replace("{kind: Group, name: dev}", "{kind: Group, name: ops}"),
    )
    .unwrap();
    file.reload().unwrap();
    assert_eq!(
        api.token_as(BOB, "app", json!({"audiences": ["vault"]}))
            .await
            .code,
        StatusCode::FORBIDDEN
    );
    std::fs::write(&path, "rules: [").unwrap();
    assert!(file.reload().is_err());
    assert_eq!(file.current().rules[0].name, "dev");
    assert_eq!(
        api.token_as(BOB, "other", json!({})).await.code,
        StatusCode::CREATED,
        "the last good policy is still in force"
    );
}

/// Whichever authorizer allows it, a token minted by a caller holding a bound token is bound to
/// the same object, so it dies with it; and a grant's lifetime cap holds for the one-year
/// extension of pod-bound tokens too (the extension is then not given).
#[tokio::test]
async fn minted_tokens_keep_the_callers_binding_and_the_grants_cap() {
    let policy = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- name: app-mints
  subjects: [{kind: ServiceAccount, namespace: demo, name: app}]
  tokens:
    namespaces: [demo]
    serviceAccounts: [app]
    audiences: ['*']
    maxExpirationSeconds: 7200
";
    let self_service = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
selfService:
  audiences: ['https://warrant.test']
  maxExpirationSeconds: 7200
";
    let api = with_policy(policy);
    let bound = own_token(
        &api,
        json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0"}}),
    )
    .await;
    // The policy rule allows app to mint for app; unbound, it would outlive the pod.
    let r = api
        .token_as(&bound, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" authenticated with a token bound to Pod "app-0" and may only request tokens bound to the same object"#
    );
    let pod_bound = json!({"apiVersion": "v1", "kind": "Pod", "name": "app-0"});
    let r = api
        .token_as(
            &bound,
            "app",
            json!({"audiences": ["vault"], "boundObjectRef": pod_bound}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let minted = r.json["status"]["token"].as_str().unwrap().to_owned();
    // It dies with the pod.
    api.objects
        .remove(warrant_objects::Kind::Pod, "demo", "app-0");
    let r = api
        .review("authentication.k8s.io/v1", &minted, &["vault"])
        .await;
    assert_eq!(
        r.json["status"]["error"],
        "service account token has been invalidated"
    );

    // 3607 s for the API audience, pod-bound: kube would extend it to a year; the grant caps
    // lifetimes at 7200 s, so it is not extended: by the policy, and by self-service.
    for policy in [policy, self_service] {
        let api = with_policy(policy);
        let bound = own_token(
            &api,
            json!({"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "app-0"}}),
        )
        .await;
        let r = api
        .token_as(
            &bound,
            "app",
            json!({"audiences": ["https://warrant.test"], "expirationSeconds": 3607, "boundObjectRef": pod_bound}),
        )
        .await;
        assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
        let c = claims(r.json["status"]["token"].as_str().unwrap());
        assert_eq!(c.exp.unwrap() - c.iat.unwrap(), 3607);
        assert!(c.kubernetes.warnafter.is_none());
    }
    // The admin's request, with no grant cap, is extended as kube extends it.
    let api = with_policy(policy);
    let r = api
        .token(
            "app",
            json!({"audiences": ["https://warrant.test"], "expirationSeconds": 3607, "boundObjectRef": pod_bound}),
        )
        .await;
    let c = claims(r.json["status"]["token"].as_str().unwrap());
    assert_eq!(c.exp.unwrap() - c.iat.unwrap(), 365 * 86400);
}

/// `warrant_authorizations_total` holds one decision per request: a token request the policy
/// authorized but whose grant then refused the token (an audience, a lifetime) is a denial by
/// admission, not an allow; one that fails for another reason after it was authorized (a
/// lifetime under kube's minimum) is the policy's allow.
#[tokio::test]
async fn each_token_request_is_one_authorization_decision() {
    let api = with_policy(POLICY);
    let refused = api.token_as(BOB, "app", json!({"audiences": ["s3"]})).await;
    assert_eq!(refused.code, StatusCode::FORBIDDEN);
    let too_long = api
        .token_as(
            BOB,
            "app",
            json!({"audiences": ["vault"], "expirationSeconds": 7201}),
        )
        .await;
    assert_eq!(too_long.code, StatusCode::FORBIDDEN);
    let issued = api
        .token_as(BOB, "app", json!({"audiences": ["vault"]}))
        .await;
    assert_eq!(issued.code, StatusCode::CREATED, "{}", issued.text);
    let invalid = api
        .token_as(
            BOB,
            "app",
            json!({"audiences": ["vault"], "expirationSeconds": 1}),
        )
        .await;
    assert_eq!(
        invalid.code,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        invalid.text
    );

    let metrics = api
        .get_with("/metrics", &[("authorization", &format!("Bearer {ADMIN}"))])
        .await
        .text;
    let sample = |labels: &str| -> f64 {
        let prefix = format!("warrant_authorizations_total{{{labels}}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or(0.0, |v| v.parse().unwrap())
    };
    assert_eq!(
        sample(r#"authorizer="policy",decision="allow""#),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        sample(r#"authorizer="admission",decision="deny""#),
        2.0,
        "{metrics}"
    );
    // Four of bob's requests, four decisions (the admin's scrape is the fifth).
    let total: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("warrant_authorizations_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(total, 5.0, "{metrics}");
}
