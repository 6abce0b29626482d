//! Delegated authentication (TokenReview) and authorization (SubjectAccessReview) against the
//! loopback Kubernetes fixture: allow, deny, failures (closed, retried as kube retries), and
//! kube's 10 s caches, driven by the server's clock rather than by waiting.

use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::json;
use warrant_auth::{
    Backoff, DelegatedAuthentication, DelegatedAuthorization, DelegationOptions, FrontProxy,
    RequestHeaders,
};
use warrant_kube_fixture::authority::{AccessAnswer, Authority, TokenAnswer};
use warrant_kube_fixture::{Cluster, Fixture};

use crate::support::*;
use warrant_testkit::TestCa;

/// kube's options with a backoff short enough not to slow the tests down.
pub(crate) fn options() -> DelegationOptions {
    DelegationOptions {
        backoff: Backoff {
            initial: Duration::from_millis(1),
            ..Backoff::default()
        },
        ..DelegationOptions::default()
    }
}

struct Delegating {
    api: Api,
    authority: Authority,
    _fixture: Fixture,
}

async fn delegating(authn: bool, authz: bool) -> Delegating {
    let authority = Authority::new();
    let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes())
        .await
        .unwrap();
    let client =
        || kube::Client::try_from(kube::Config::new(fixture.url().parse().unwrap())).unwrap();
    let (authn_client, authz_client) = (client(), client());
    let api = api_auth(|authenticator, authorizer| {
        if authn {
            authenticator.delegated = Some(DelegatedAuthentication::new(authn_client, options()));
        }
        if authz {
            authorizer.delegated = Some(DelegatedAuthorization::new(authz_client, options()));
        }
    });
    Delegating {
        api,
        authority,
        _fixture: fixture,
    }
}

fn message(r: &Reply) -> &str {
    r.json["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn tokens_kube_apiserver_vouches_for() {
    let d = delegating(true, false).await;
    d.authority.token(
        "cluster-admin-token",
        TokenAnswer::user("jane", &["system:masters"]),
    );
    d.authority
        .token("developer-token", TokenAnswer::user("dev", &["devs"]));
    d.authority.token(
        "revoked-token",
        TokenAnswer::Rejected("token has been invalidated".into()),
    );

    // Allow: kube-apiserver's user, with its groups.
    let r = d
        .api
        .token_as("cluster-admin-token", "app", json!({}))
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let r = d.api.token_as("developer-token", "app", json!({})).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert!(message(&r).contains(r#"User "dev" cannot create"#));
    // Deny: 401, whether kube-apiserver says why or not.
    for token in ["revoked-token", "unknown-token"] {
        let r = d.api.token_as(token, "app", json!({})).await;
        assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{token}");
    }
    // What was sent: the token, no audiences (kube-apiserver's own API audiences apply).
    let sent = d.authority.token_reviews();
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[0].spec.token, "cluster-admin-token");
    assert_eq!(sent[0].spec.audiences, None);
    // Static tokens and warrant's own are never sent.
    assert_eq!(
        d.api.token("app", json!({})).await.code,
        StatusCode::CREATED
    );
    assert_eq!(d.authority.token_reviews().len(), 4);
}

/// A pod's own kube token (projected, so kube-apiserver names its pod in the user's extras)
/// may ask for tokens for itself through self-service, bound to that pod only; a token
/// kube-apiserver names no pod for may not (docs/injection.md: the token agent's path where
/// warrant is not the cluster's signer).
#[tokio::test]
async fn pod_bound_kube_tokens_are_self_service_for_their_pod() {
    use std::collections::BTreeMap;
    use std::path::Path;
    use warrant_auth::{Policy, PolicyFile};
    let authority = Authority::new();
    let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes())
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(fixture.url().parse().unwrap())).unwrap();
    let policy = Policy::parse(
        "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\nselfService:\n  audiences: [sts.amazonaws.com]\n",
        "policy.yaml",
    )
    .unwrap();
    let api = api_auth(|authenticator, authorizer| {
        authenticator.delegated = Some(DelegatedAuthentication::new(client, options()));
        authorizer.policy = Some(PolicyFile::from_policy(policy, Path::new("policy.yaml")));
    });
    let account = |extra: &[(&str, &str)]| TokenAnswer::User {
        username: "system:serviceaccount:demo:app".into(),
        uid: SA_UID.into(),
        groups: vec![
            "system:serviceaccounts".into(),
            "system:serviceaccounts:demo".into(),
        ],
        extra: extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
            .collect::<BTreeMap<_, _>>(),
    };
    authority.token(
        "pod-token",
        account(&[
            ("authentication.kubernetes.io/pod-name", "app-0"),
            ("authentication.kubernetes.io/pod-uid", POD_UID),
            ("authentication.kubernetes.io/node-name", "node-1"),
        ]),
    );
    authority.token("unbound-token", account(&[]));
    let pod = |uid: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": "app-0", "uid": uid});

    // Its own pod, a self-service audience: a token bound to the pod.
    let r = api
        .token_as(
            "pod-token",
            "app",
            json!({"audiences": ["sts.amazonaws.com"], "boundObjectRef": pod(POD_UID)}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let minted = r.json["status"]["token"].as_str().unwrap();
    let claims = claims(minted);
    assert_eq!(claims.kubernetes.pod.as_ref().unwrap().uid, POD_UID);
    // Unbound, or bound elsewhere: refused, naming the pod kube-apiserver named.
    for spec in [
        json!({"audiences": ["sts.amazonaws.com"]}),
        json!({"audiences": ["sts.amazonaws.com"], "boundObjectRef": pod("99999999-9999-9999-9999-999999999999")}),
    ] {
        let r = api.token_as("pod-token", "app", spec).await;
        assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
        assert_eq!(
            message(&r),
            r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" authenticated with a token bound to Pod "app-0" and may only request tokens bound to the same object"#
        );
    }
    // Another audience: self-service's own limits.
    let r = api
        .token_as(
            "pod-token",
            "app",
            json!({"audiences": ["vault"], "boundObjectRef": pod(POD_UID)}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert!(
        message(&r).contains("not a self-service audience"),
        "{}",
        r.text
    );
    // For another service account: not itself.
    let r = api
        .token_as(
            "pod-token",
            "other",
            json!({"audiences": ["sts.amazonaws.com"]}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    // A token kube-apiserver names no pod for is not self-service.
    let r = api
        .token_as(
            "unbound-token",
            "app",
            json!({"audiences": ["sts.amazonaws.com"], "boundObjectRef": pod(POD_UID)}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: User "system:serviceaccount:demo:app" cannot create resource "serviceaccounts/token" in API group "" in the namespace "demo""#
    );
}

/// The token agent's pod token names warrant's audience (`--token-agent-audience`), never
/// kube-apiserver's: warrant asks kube-apiserver about it for that audience (`spec.audiences`),
/// and takes the answer only if kube-apiserver confirms the audience (`status.audiences`), as
/// the TokenReview API asks of a client that sets the field. Other tokens are asked about for
/// kube-apiserver's own audiences, as before.
#[tokio::test]
async fn the_agents_pod_token_is_reviewed_for_warrants_audience() {
    let authority = Authority::new();
    let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes())
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(fixture.url().parse().unwrap())).unwrap();
    let api = api_auth(|authenticator, _| {
        authenticator.delegated = Some(DelegatedAuthentication::new(client, options()));
        authenticator.agent_audience = Some(warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE.into());
    });
    let kube_token = |audience: &str, jti: &str| {
        let key = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
        key.sign(&warrant_token::Claims::new(warrant_token::NewToken {
            issuer: "https://kubernetes.default.svc.cluster.local",
            namespace: "demo",
            service_account: warrant_token::ObjectRef::new("app", SA_UID),
            audiences: vec![audience.into()],
            binding: warrant_token::Binding::Pod {
                pod: warrant_token::ObjectRef::new("app-0", POD_UID),
                node: None,
            },
            issued_at: NOW,
            expires_at: NOW + 3600,
            warn_after: None,
            jti: jti.into(),
        }))
        .unwrap()
    };
    let agent = kube_token(warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE, "agent");
    let api_token = kube_token("https://kubernetes.default.svc.cluster.local", "api");
    for token in [&agent, &api_token] {
        authority.token(
            token,
            TokenAnswer::user("system:masters-user", &["system:masters"]),
        );
    }
    let r = api.token_as(&agent, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let r = api.token_as(&api_token, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let sent = authority.token_reviews();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].spec.audiences,
        Some(vec![
            warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE.to_owned()
        ])
    );
    assert_eq!(sent[1].spec.audiences, None);

    // A kube-apiserver that answers without checking the audience is not believed.
    authority.ignore_audiences();
    let unconfirmed = kube_token(warrant_server::TOKEN_AGENT_DEFAULT_AUDIENCE, "unconfirmed");
    authority.token(
        &unconfirmed,
        TokenAnswer::user("system:masters-user", &["system:masters"]),
    );
    let r = api.token_as(&unconfirmed, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED, "{}", r.text);
}

#[tokio::test]
async fn warrants_own_invalid_tokens_are_not_sent_to_kube_apiserver() {
    let d = delegating(true, false).await;
    let r = d.api.token("app", json!({"audiences": ["vault"]})).await;
    let vault_token = r.json["status"]["token"].as_str().unwrap().to_owned();
    let r = d.api.token_as(&vault_token, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED);
    assert!(d.authority.token_reviews().is_empty());
}

#[tokio::test]
async fn authentication_answers_are_cached_for_ten_seconds() {
    let d = delegating(true, false).await;
    d.authority
        .token("t", TokenAnswer::user("jane", &["system:masters"]));
    for _ in 0..3 {
        assert_eq!(
            d.api.token_as("t", "app", json!({})).await.code,
            StatusCode::CREATED
        );
    }
    assert_eq!(d.authority.token_reviews().len(), 1);
    // kube-apiserver changes its mind: warrant follows once the answer is 10 s old.
    d.authority.token("t", TokenAnswer::Rejected(String::new()));
    d.api.advance(9);
    assert_eq!(
        d.api.token_as("t", "app", json!({})).await.code,
        StatusCode::CREATED
    );
    d.api.advance(1);
    assert_eq!(
        d.api.token_as("t", "app", json!({})).await.code,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(d.authority.token_reviews().len(), 2);
    // A refusal is cached too.
    d.authority
        .token("t", TokenAnswer::user("jane", &["system:masters"]));
    assert_eq!(
        d.api.token_as("t", "app", json!({})).await.code,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(d.authority.token_reviews().len(), 2);
    d.api.advance(10);
    assert_eq!(
        d.api.token_as("t", "app", json!({})).await.code,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn a_burst_with_one_new_token_asks_kube_apiserver_once() {
    let d = delegating(true, true).await;
    d.authority
        .token("burst", TokenAnswer::user("jane", &["devs"]));
    d.authority
        .access(|_| AccessAnswer::Allow("allowed".into()));
    let replies =
        futures::future::join_all((0..16).map(|_| d.api.token_as("burst", "app", json!({})))).await;
    assert!(replies.iter().all(|r| r.code == StatusCode::CREATED));
    assert_eq!(d.authority.token_reviews().len(), 1);
    assert_eq!(d.authority.access_reviews().len(), 1);
}

#[tokio::test]
async fn authentication_failures_are_retried_then_fail_closed() {
    let d = delegating(true, false).await;
    d.authority
        .token("t", TokenAnswer::user("jane", &["system:masters"]));
    // Two 500s, then an answer: retried, and the answer holds.
    d.authority.fail_next(2, 500);
    assert_eq!(
        d.api.token_as("t", "app", json!({})).await.code,
        StatusCode::CREATED
    );
    assert_eq!(d.authority.token_reviews().len(), 3);

    // Failing for good: five attempts (kube's backoff steps), then 401; nothing is cached.
    d.authority.fail_next(100, 500);
    let r = d.api.token_as("other", "app", json!({})).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED);
    assert_eq!(d.authority.token_reviews().len(), 3 + 5);
    d.authority.fail_next(0, 500);
    d.authority
        .token("other", TokenAnswer::user("jane", &["system:masters"]));
    assert_eq!(
        d.api.token_as("other", "app", json!({})).await.code,
        StatusCode::CREATED
    );

    // A refusal of warrant itself (403: no RBAC for tokenreviews) is not retried.
    d.authority.fail_next(1, 403);
    let r = d.api.token_as("third", "app", json!({})).await;
    assert_eq!(r.code, StatusCode::UNAUTHORIZED);
    assert_eq!(d.authority.token_reviews().len(), 3 + 5 + 1 + 1);
}

#[tokio::test]
async fn subject_access_reviews_decide() {
    let d = delegating(false, true).await;
    d.authority.access(|spec| {
        let r = spec.resource_attributes.clone().unwrap_or_default();
        match (
            spec.user.as_deref(),
            r.namespace.as_deref(),
            r.resource.as_deref(),
        ) {
            (Some("bob"), Some("demo"), Some("serviceaccounts"))
                if r.name.as_deref() == Some("app") =>
            {
                AccessAnswer::Allow("RBAC: allowed by RoleBinding \"tokens/demo\"".into())
            }
            (Some("bob"), _, Some("tokenreviews")) => AccessAnswer::Deny("denied by policy".into()),
            _ => AccessAnswer::NoOpinion,
        }
    });
    // Allowed: and what kube-apiserver was asked.
    let r = d.api.token_as(BOB, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let asked = d.authority.access_reviews();
    let spec = &asked[0].spec;
    assert_eq!(spec.user.as_deref(), Some("bob"));
    assert_eq!(spec.uid.as_deref(), Some("bob-uid"));
    assert_eq!(
        spec.groups.as_deref(),
        Some(&["dev".to_owned(), "system:authenticated".to_owned()][..])
    );
    assert_eq!(
        serde_json::to_value(&spec.resource_attributes).unwrap(),
        json!({"namespace": "demo", "verb": "create", "group": "", "version": "v1", "resource": "serviceaccounts", "subresource": "token", "name": "app"})
    );
    // The aggregated path asks about warrant's group.
    let r = d
        .api
        .post_as(
            BOB,
            "/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/other/token",
            json!({"spec": {}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"serviceaccounts.warrant.dev "other" is forbidden: User "bob" cannot create resource "serviceaccounts/token" in API group "warrant.dev" in the namespace "demo""#
    );
    let last = d.authority.access_reviews().pop().unwrap();
    assert_eq!(
        last.spec.resource_attributes.unwrap().group.as_deref(),
        Some("warrant.dev")
    );
    // An explicit denial, with kube-apiserver's reason.
    let r = d
        .api
        .post_as(
            BOB,
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json!({"spec": {"token": "x"}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"tokenreviews.authentication.k8s.io is forbidden: User "bob" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope: denied by policy"#
    );
    // Metrics: a non-resource review.
    let r = d
        .api
        .send_with_peer(
            Method::GET,
            "/metrics",
            None,
            &[("authorization", &format!("Bearer {BOB}"))],
            None,
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    let last = d.authority.access_reviews().pop().unwrap();
    assert_eq!(
        serde_json::to_value(&last.spec.non_resource_attributes).unwrap(),
        json!({"path": "/metrics", "verb": "get"})
    );
    // system:masters and the health paths are never asked about.
    let before = d.authority.access_reviews().len();
    assert_eq!(
        d.api.token("app", json!({})).await.code,
        StatusCode::CREATED
    );
    assert_eq!(d.api.get("/healthz").await.code, StatusCode::OK);
    assert_eq!(d.authority.access_reviews().len(), before);
}

#[tokio::test]
async fn access_answers_are_cached_for_ten_seconds() {
    let d = delegating(false, true).await;
    d.authority.access(|_| AccessAnswer::Allow(String::new()));
    for _ in 0..3 {
        assert_eq!(
            d.api.token_as(BOB, "app", json!({})).await.code,
            StatusCode::CREATED
        );
    }
    assert_eq!(d.authority.access_reviews().len(), 1);
    // Another question is another entry.
    assert_eq!(
        d.api.token_as(BOB, "other", json!({})).await.code,
        StatusCode::CREATED
    );
    assert_eq!(d.authority.access_reviews().len(), 2);
    d.authority.access(|_| AccessAnswer::Deny(String::new()));
    d.api.advance(9);
    assert_eq!(
        d.api.token_as(BOB, "app", json!({})).await.code,
        StatusCode::CREATED
    );
    d.api.advance(1);
    assert_eq!(
        d.api.token_as(BOB, "app", json!({})).await.code,
        StatusCode::FORBIDDEN
    );
    // Denials are cached as long.
    d.authority.access(|_| AccessAnswer::Allow(String::new()));
    d.api.advance(9);
    assert_eq!(
        d.api.token_as(BOB, "app", json!({})).await.code,
        StatusCode::FORBIDDEN
    );
    d.api.advance(1);
    assert_eq!(
        d.api.token_as(BOB, "app", json!({})).await.code,
        StatusCode::CREATED
    );
    assert_eq!(d.authority.access_reviews().len(), 4);
}

#[tokio::test]
async fn authorization_failures_fail_closed() {
    let d = delegating(false, true).await;
    d.authority.access(|_| AccessAnswer::Allow(String::new()));
    d.authority.fail_next(100, 500);
    let r = d.api.token_as(BOB, "app", json!({})).await;
    assert_eq!(r.code, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(
        message(&r).starts_with("authorization could not be decided: kube-apiserver answered 500"),
        "{}",
        r.text
    );
    assert_eq!(d.authority.access_reviews().len(), 5);
    // Not cached: the next request asks again.
    d.authority.fail_next(0, 500);
    assert_eq!(
        d.api.token_as(BOB, "app", json!({})).await.code,
        StatusCode::CREATED
    );
}

/// A node's audience that its pod does not name: kube-apiserver is asked the NodeRestriction
/// question, and an error is kube's "error validating audience".
#[tokio::test]
async fn node_audiences_are_asked_of_kube_apiserver() {
    let d = delegating(false, true).await;
    d.authority.access(|spec| {
        let r = spec.resource_attributes.clone().unwrap_or_default();
        if r.verb.as_deref() == Some("request-serviceaccounts-token-audience") {
            if r.resource.as_deref() == Some("registry.example") {
                AccessAnswer::Allow(String::new())
            } else {
                AccessAnswer::NoOpinion
            }
        } else {
            AccessAnswer::Allow(String::new())
        }
    });
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "name": "app-0", "uid": POD_UID});
    let r = d
        .api
        .token_as(
            NODE_1,
            "app",
            json!({"audiences": ["registry.example"], "boundObjectRef": pod}),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let asked = d.authority.access_reviews().pop().unwrap().spec;
    assert_eq!(
        serde_json::to_value(&asked.resource_attributes).unwrap(),
        json!({"namespace": "demo", "verb": "request-serviceaccounts-token-audience", "group": "", "resource": "registry.example", "name": "app"})
    );
    let r = d
        .api
        .token_as(
            NODE_1,
            "app",
            json!({"audiences": ["s3"], "boundObjectRef": pod}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        message(&r),
        r#"serviceaccounts "app" is forbidden: audience "s3" not found in pod spec volume, system:node:node-1 is not authorized to request tokens for this audience"#
    );
    d.authority.access(|spec| {
        let r = spec.resource_attributes.clone().unwrap_or_default();
        if r.verb.as_deref() == Some("request-serviceaccounts-token-audience") {
            AccessAnswer::Fail(500)
        } else {
            AccessAnswer::Allow(String::new())
        }
    });
    let r = d
        .api
        .token_as(
            NODE_1,
            "app",
            json!({"audiences": ["gcs"], "boundObjectRef": pod}),
        )
        .await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(
        message(&r).starts_with(
            r#"serviceaccounts "app" is forbidden: error validating audience "gcs": "#
        ),
        "{}",
        r.text
    );
}

/// The user a front proxy relays reaches kube-apiserver whole: extras keep their unescaped,
/// lower-cased keys.
#[tokio::test]
async fn relayed_users_are_asked_about_whole() {
    let proxy_ca = TestCa::new("front-proxy-ca");
    let d = delegating(false, true).await;
    d.api
        .state
        .authenticator()
        .trust
        .set_front_proxy(Some(FrontProxy {
            ca: proxy_ca.bundle(),
            allowed_names: vec![],
            headers: RequestHeaders::default(),
        }));
    d.authority.access(|_| AccessAnswer::Allow(String::new()));
    let r = d
        .api
        .send_with_peer(
            Method::POST,
            "/apis/warrant.dev/v1alpha1/namespaces/demo/serviceaccounts/app/token",
            Some(proxy_ca.issue_client("front-proxy-client", &[]).peer()),
            &[
                ("x-remote-user", "system:serviceaccount:ci:runner"),
                ("x-remote-uid", "runner-uid"),
                ("x-remote-group", "system:serviceaccounts"),
                ("x-remote-group", "system:serviceaccounts:ci"),
                (
                    "x-remote-extra-authentication.kubernetes.io%2fpod-Name",
                    "runner-0",
                ),
                ("x-remote-extra-Scopes", "a"),
                ("x-remote-extra-scopes", "b"),
            ],
            Some(json!({"spec": {}})),
        )
        .await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.text);
    let spec = d.authority.access_reviews().pop().unwrap().spec;
    assert_eq!(
        spec.user.as_deref(),
        Some("system:serviceaccount:ci:runner")
    );
    assert_eq!(spec.uid.as_deref(), Some("runner-uid"));
    assert_eq!(
        spec.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ci",
            "system:authenticated"
        ]
    );
    assert_eq!(
        serde_json::to_value(spec.extra).unwrap(),
        json!({"authentication.kubernetes.io/pod-name": ["runner-0"], "scopes": ["a", "b"]})
    );
}

/// A kube-apiserver that accepts connections and never answers (stalled, or a black hole).
pub(crate) async fn stalled_apiserver() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (url, task)
}

/// A kube client of a [`stalled_apiserver`] (keep the handle: the server ends with it).
pub(crate) async fn stalled_client() -> (kube::Client, tokio::task::JoinHandle<()>) {
    let (url, server) = stalled_apiserver().await;
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    (client, server)
}

/// With kube-apiserver stalled, lookups pile up only to the limit: past it a caller is told to
/// retry (429, as kube-apiserver's overload answer), not refused as unauthenticated; callers
/// that go away leave their lookups running to their own end, not kept by anyone.
#[tokio::test]
async fn a_stalled_kube_apiserver_holds_at_most_the_limit() {
    let (client, _server) = stalled_client().await;
    let api = std::sync::Arc::new(api_auth(|authenticator, _| {
        authenticator.delegated = Some(DelegatedAuthentication::new(
            client,
            DelegationOptions {
                max_in_flight: 2,
                timeout: Duration::from_secs(600),
                ..options()
            },
        ));
    }));
    let as_caller = |token: &str| {
        let (api, token) = (api.clone(), token.to_owned());
        tokio::spawn(async move { api.post_as(&token, "/api", json!({})).await })
    };
    let admin = format!("Bearer {ADMIN}");
    let metrics = || async {
        api.get_with("/metrics", &[("authorization", admin.as_str())])
            .await
            .text
    };
    let in_flight = || async {
        let text = metrics().await;
        text.lines()
            .find_map(|l| l.strip_prefix("warrant_delegated_authentication_in_flight "))
            .map_or(0, |v| v.parse::<u64>().unwrap())
    };
    let callers = [
        as_caller("first-unknown-token"),
        as_caller("second-unknown-token"),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while in_flight().await < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lookups never started: {}",
            metrics().await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A third distinct token: no room.
    let r = api.post_as("third-unknown-token", "/api", json!({})).await;
    assert_eq!(r.code, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    assert_eq!(r.json["reason"], "TooManyRequests");
    assert_eq!(r.json["details"]["retryAfterSeconds"], 1);
    assert_eq!(r.headers["retry-after"], "1");
    let text = metrics().await;
    assert!(
        text.contains("warrant_delegated_authentication_overloaded_total 1"),
        "{text}"
    );
    // The callers hang up; their lookups are no one's and keep their place until they end.
    for caller in callers {
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
    }
    assert_eq!(in_flight().await, 2);
}

/// Authorization overloaded answers as authentication overloaded does (one answer for
/// overload, docs/decisions.md): 429 with `Retry-After: 1`, counted, never an allow and no
/// longer a 503. Found: the first caller's SubjectAccessReview holds the only place.
#[tokio::test]
async fn a_stalled_kube_apiserver_makes_authorization_answer_429_too() {
    let (client, _server) = stalled_client().await;
    let api = std::sync::Arc::new(api_auth(|_, authorizer| {
        authorizer.delegated = Some(one_place_authorization(client));
    }));
    let admin = format!("Bearer {ADMIN}");
    let metrics = || async {
        api.get_with("/metrics", &[("authorization", admin.as_str())])
            .await
            .text
    };
    let first = {
        let api = api.clone();
        tokio::spawn(async move { api.token_as(BOB, "app", json!({})).await })
    };
    // The first caller's review takes the only place (no clock involved: each turn lets the
    // caller's task run until it waits on the stalled kube-apiserver).
    let mut turns = 0;
    while !metrics()
        .await
        .contains("warrant_delegated_authorization_in_flight 1")
    {
        turns += 1;
        assert!(
            turns < 10_000,
            "the review never started: {}",
            metrics().await
        );
        tokio::task::yield_now().await;
    }
    // Another question: no room.
    let r = api.token_as(BOB, "other", json!({})).await;
    assert_eq!(r.code, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    assert_eq!(
        r.text,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}"#
    );
    assert_eq!(r.headers["retry-after"], "1");
    let text = metrics().await;
    assert!(
        text.contains("warrant_delegated_authorization_overloaded_total 1"),
        "{text}"
    );
    assert!(
        text.contains(r#"warrant_authorizations_total{authorizer="delegated",decision="error"} 1"#),
        "{text}"
    );
    first.abort();
}

/// A node's audience check asks the same SubjectAccessReviews, so overloaded it answers as
/// authorization does: 429, not the `403` "error validating audience" of a failed check.
#[tokio::test]
async fn an_overloaded_audience_check_answers_429() {
    const NODES: &str = "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- subjects: [{kind: Group, name: 'system:nodes'}]
  tokens:
    namespaces: ['*']
";
    let (client, _server) = stalled_client().await;
    let policy = warrant_auth::Policy::parse(NODES, "nodes.yaml").unwrap();
    let api = std::sync::Arc::new(api_auth(|_, authorizer| {
        authorizer.policy = Some(warrant_auth::PolicyFile::from_policy(
            policy,
            std::path::Path::new("nodes.yaml"),
        ));
        authorizer.delegated = Some(one_place_authorization(client));
    }));
    let admin = format!("Bearer {ADMIN}");
    let in_flight = || async {
        api.get_with("/metrics", &[("authorization", admin.as_str())])
            .await
            .text
            .contains("warrant_delegated_authorization_in_flight 1")
    };
    // bob is no node: the policy has no opinion, and his review takes the only place.
    let first = {
        let api = api.clone();
        tokio::spawn(async move { api.token_as(BOB, "app", json!({})).await })
    };
    let mut turns = 0;
    while !in_flight().await {
        turns += 1;
        assert!(turns < 10_000, "the review never started");
        tokio::task::yield_now().await;
    }
    // The node is authorized by the policy; its pod names no `gcs`, and the policy grants no
    // audience, so kube-apiserver would be asked.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "name": "app-0", "uid": POD_UID});
    let r = api
        .token_as(
            NODE_1,
            "app",
            json!({"audiences": ["gcs"], "boundObjectRef": pod}),
        )
        .await;
    assert_eq!(r.code, StatusCode::TOO_MANY_REQUESTS, "{}", r.text);
    assert_eq!(r.headers["retry-after"], "1");
    first.abort();
}

/// Delegated authorization with room for one SubjectAccessReview at a time, each allowed to
/// wait as long as a stalled kube-apiserver makes it: the second caller finds it full.
fn one_place_authorization(client: kube::Client) -> DelegatedAuthorization {
    DelegatedAuthorization::new(
        client,
        DelegationOptions {
            max_in_flight: 1,
            timeout: Duration::from_secs(600),
            ..options()
        },
    )
}
