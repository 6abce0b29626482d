//! Beside a cluster: `warrant serve --kubeconfig` against the loopback Kubernetes fixture, which
//! speaks the list/watch protocol over real HTTP. Tokens bind to the cluster's objects and die
//! with them.

use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use serde_json::json;
use warrant_kube_fixture::Fixture;
use warrant_kube_fixture::objects::{pod, secret, service_account};
use warrant_testkit::{NODE_UID, POD_UID, SA_UID};

use crate::support::*;

// Multi-threaded: kubectl runs synchronously on the test thread while the fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_follow_the_clusters_objects() {
    let cluster = Fixture::start().await.unwrap();
    create_standard_objects(&cluster, Some("vault"));
    let w = Warrant::start_cluster(&cluster, &[]).await;

    let token = w.token(&[
        "--audience",
        "vault",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "app-0",
    ]);
    let k = claims(&token).kubernetes;
    assert_eq!(
        (k.pod.unwrap().uid.as_str(), k.node.unwrap().uid.as_str()),
        (POD_UID, NODE_UID)
    );
    assert_eq!(k.serviceaccount.uid, SA_UID);
    assert_eq!(w.review(&token, &["vault"])["authenticated"], true);

    // A pod created a moment ago (its watch event held back) is found by a live GET.
    cluster.pause_watches(true);
    cluster
        .create(&pod("demo", "app-1", "pod-new", "app", "node-1", None))
        .unwrap();
    let fresh = w.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-1"]);
    assert_eq!(claims(&fresh).kubernetes.pod.unwrap().uid, "pod-new");
    cluster.pause_watches(false);

    // Deleting the pod revokes the token.
    cluster.delete::<Pod>("demo", "app-0").unwrap();
    w.eventually("the pod's deletion to revoke the token", || {
        w.review(&token, &["vault"])["error"] == "service account token has been invalidated"
    })
    .await;

    // Re-creating it under the same name with a new UID: the UID-mismatch message.
    cluster
        .create(&pod(
            "demo",
            "app-0",
            "pod-2",
            "app",
            "node-1",
            Some("vault"),
        ))
        .unwrap();
    w.eventually("the re-created pod to be seen", || {
        w.review(&token, &["vault"])["error"]
            == format!("pod UID (pod-2) does not match service account pod ref claim ({POD_UID})")
    })
    .await;

    // Deleting the service account: its message, for every token it ever had.
    cluster.delete::<ServiceAccount>("demo", "app").unwrap();
    w.eventually("the service account's deletion to be seen", || {
        w.review(&token, &["vault"])
            == json!({"user": {}, "error": r#"serviceaccounts "app" not found"#})
    })
    .await;
    let out = w.create_token_as("app", &[]);
    assert!(
        stderr(&out).contains(r#"serviceaccounts "app" not found"#),
        "{}",
        stderr(&out)
    );
}

// Multi-threaded: kubectl runs synchronously on the test thread while the fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_an_error_never_a_verdict() {
    let mut cluster = Fixture::start().await.unwrap();
    cluster
        .create(&service_account("demo", "app", SA_UID))
        .unwrap();
    cluster
        .create(&pod("demo", "app-0", POD_UID, "app", "", None))
        .unwrap();
    let w = Warrant::start_cluster(&cluster, &[]).await;
    let token = w.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-0"]);
    cluster.stop().await;
    // Objects in memory still answer; a miss cannot be decided, and says so.
    assert_eq!(w.review(&token, &[])["authenticated"], true);
    let out = w.create_token_as(
        "app",
        &[
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "elsewhere",
        ],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cannot look up Pod demo/elsewhere"), "{err}");
}

/// `--max-cache-staleness` is taken beside a cluster (the bound itself is tried against the
/// fixture with a clock the test moves: warrant-objects' cluster tests); a bound shorter than
/// the API server's bookmark interval, or one with a manifest file, is refused at startup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_staleness_bound_is_checked_at_startup() {
    let cluster = Fixture::start().await.unwrap();
    cluster
        .create(&service_account("demo", "app", SA_UID))
        .unwrap();
    let w = Warrant::start_cluster(&cluster, &["--max-cache-staleness", "5m"]).await;
    let token = w.token(&[]);
    assert_eq!(w.review(&token, &[])["authenticated"], true);
    let stale = r#"warrant_kube_cache_stale{resource="serviceaccounts"}"#;
    let text = w.metrics_text().await;
    assert!(text.contains(&format!("{stale} 0")), "{text}");

    let short = serve_refusing(&["--max-cache-staleness", "30s"], &[]);
    assert!(!short.status.success());
    assert!(
        stderr(&short).contains("\"30s\" is too short") && stderr(&short).contains("at least 90s"),
        "{}",
        stderr(&short)
    );
    // `serve_refusing` gives a manifest file, which has no cache to bound.
    let with_file = serve_refusing(&["--max-cache-staleness", "5m"], &[]);
    assert!(!with_file.status.success());
    assert!(
        stderr(&with_file).contains("cannot be used with"),
        "{}",
        stderr(&with_file)
    );
}

/// `--disable-secret-binding` beside a cluster: warrant becomes ready without a single request
/// about Secrets (no list, no watch, no GET: what lets the RBAC rule on secrets go), kubectl's
/// Secret binding gets the 400, and a Secret-bound token signed with warrant's key (as
/// kube-apiserver issues one through the external signer) is refused by TokenReview, while the
/// Secret exists.
// The server runs on the real clock, so the token signed here is dated now.
#[allow(clippy::disallowed_methods)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_secret_binding_secrets_are_never_requested() {
    let cluster = Fixture::start().await.unwrap();
    create_standard_objects(&cluster, None);
    cluster
        .create(&secret("demo", "creds", "secret-1"))
        .unwrap();
    let w = Warrant::start_cluster(&cluster, &["--disable-secret-binding"]).await;

    let out = w.create_token_as(
        "app",
        &[
            "--bound-object-kind",
            "Secret",
            "--bound-object-name",
            "creds",
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "cannot bind token to a Secret object as secret binding is disabled on this server (--disable-secret-binding)"
        ),
        "{}",
        stderr(&out)
    );
    let pod_token = w.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-0"]);
    assert_eq!(w.review(&pod_token, &[])["authenticated"], true);

    let key =
        warrant_token::signing_key_from_pem(&std::fs::read(w.path("sa.key")).unwrap()).unwrap();
    let now = jiff::Timestamp::now().as_second();
    let claims = warrant_token::Claims::new(warrant_token::NewToken {
        issuer: &w.issuer(),
        namespace: "demo",
        service_account: warrant_token::ObjectRef::new("app", SA_UID),
        audiences: vec!["vault".into()],
        binding: warrant_token::Binding::Secret(warrant_token::ObjectRef::new("creds", "secret-1")),
        issued_at: now,
        expires_at: now + 3600,
        warn_after: None,
        jti: warrant_token::new_jti(),
    });
    let secret_token = key.sign(&claims).unwrap();
    assert_eq!(
        w.review(&secret_token, &["vault"]),
        json!({"user": {}, "error": "token is bound to a Secret object but secret binding is disabled on this server"})
    );

    let log = cluster.request_log();
    assert!(log.iter().any(|r| r.contains("/pods")), "{log:?}");
    assert!(!log.iter().any(|r| r.contains("secrets")), "{log:?}");
    let metrics = w.metrics_text().await;
    assert!(!metrics.contains(r#"resource="secrets""#), "{metrics}");
}
