//! The live GET behind the cache: found before the watch tells, shared by concurrent misses,
//! bounded, and an error (never an answer) when it fails.

use std::time::Duration;

use warrant_kube_fixture::objects::pod;
use warrant_objects::kube::KubeOptions;
use warrant_objects::{Kind, LookupError, ObjectSource};

use crate::support::{Env, options, pod_binding, ready, small_cluster, start};

#[tokio::test]
async fn a_pod_created_but_not_yet_watched_is_found_by_a_live_get() {
    let env = ready(small_cluster).await;
    // The pod exists on the server; its ADDED event is held back.
    env.fixture.pause_watches(true);
    env.fixture
        .create(&pod("ns", "fresh", "fresh-1", "app", "node-1", None))
        .unwrap();
    assert!(env.source.cached(Kind::Pod, "ns", "fresh").is_none());

    let found = env
        .objects
        .get(Kind::Pod, "ns", "fresh")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.uid, "fresh-1");
    assert_eq!(found.pod.as_ref().unwrap().service_account_name, "app");
    assert_eq!(env.fixture.requests("/api/v1/namespaces/ns/pods/fresh"), 1);
    // So a token can be bound to it and reviewed at once.
    assert_eq!(env.review(pod_binding("fresh", "fresh-1")).await, Ok(()));
    assert_eq!(
        env.metric(r#"warrant_kube_live_gets_total{resource="pods",result="found"}"#),
        2.0
    );

    // The live answer is not put in the cache (a later watch event might be older than it); the
    // watch brings the pod once it flows again.
    assert!(env.source.cached(Kind::Pod, "ns", "fresh").is_none());
    env.fixture.pause_watches(false);
    env.until("the watch brings the pod", |s| {
        s.cached(Kind::Pod, "ns", "fresh").is_some()
    })
    .await;

    // Other kinds are fetched as metadata only: secret data never reaches warrant.
    env.fixture.pause_watches(true);
    env.fixture
        .create(&warrant_kube_fixture::objects::secret(
            "ns",
            "new-creds",
            "secret-2",
        ))
        .unwrap();
    let secret = env
        .objects
        .get(Kind::Secret, "ns", "new-creds")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secret.uid, "secret-2");
    let secret_requests: Vec<String> = env
        .fixture
        .request_log()
        .into_iter()
        .filter(|r| r.contains("/secrets"))
        .collect();
    assert!(secret_requests.len() >= 3, "{secret_requests:#?}");
    assert!(
        secret_requests.iter().all(|r| r.ends_with(" (metadata)")),
        "{secret_requests:#?}"
    );
}

#[tokio::test]
async fn a_missing_object_is_absent_only_after_the_api_server_says_so() {
    let env = ready(small_cluster).await;
    assert_eq!(env.objects.get(Kind::Pod, "ns", "never").await, Ok(None));
    assert_eq!(env.objects.get(Kind::Node, "", "never").await, Ok(None));
    assert_eq!(env.fixture.requests("/api/v1/namespaces/ns/pods/never"), 1);
    assert_eq!(env.fixture.requests("/api/v1/nodes/never"), 1);
    assert_eq!(
        env.metric(r#"warrant_kube_live_gets_total{resource="pods",result="not_found"}"#),
        1.0
    );
}

#[tokio::test]
async fn concurrent_misses_share_one_get_and_gets_in_flight_are_bounded() {
    let env = start(
        KubeOptions {
            live_get_limit: 2,
            ..options()
        },
        small_cluster,
    )
    .await;
    env.wait_ready().await;
    env.fixture.reset_max_in_flight();
    // The server hangs, so GETs pile up.
    env.fixture.stall(true);

    let mut lookups = Vec::new();
    for _ in 0..8 {
        let objects = env.objects.clone();
        lookups.push(tokio::spawn(async move {
            objects.get(Kind::Pod, "ns", "same").await
        }));
    }
    for i in 0..4 {
        let objects = env.objects.clone();
        lookups.push(tokio::spawn(async move {
            objects.get(Kind::Pod, "ns", &format!("other-{i}")).await
        }));
    }
    // Two GETs reach the server (the limit); the other distinct objects wait their turn.
    env.until_fixture("two GETs arrive", |c| {
        c.request_log()
            .iter()
            .filter(|r| r.starts_with("GET /api/v1/namespaces/ns/pods/"))
            .count()
            == 2
    })
    .await;
    env.fixture.stall(false);
    for lookup in lookups {
        assert_eq!(lookup.await.unwrap(), Ok(None));
    }

    // Eight misses of one pod made one GET; every other pod one each; never more than two at once.
    assert_eq!(env.fixture.requests("/api/v1/namespaces/ns/pods/same"), 1);
    for i in 0..4 {
        assert_eq!(
            env.fixture
                .requests(&format!("/api/v1/namespaces/ns/pods/other-{i}")),
            1
        );
    }
    assert!(
        env.fixture.max_in_flight() <= 2,
        "{}",
        env.fixture.max_in_flight()
    );
    assert_eq!(
        env.metric(r#"warrant_kube_live_gets_shared_total{resource="pods"}"#),
        7.0
    );
    assert_eq!(env.metric("warrant_kube_live_gets_in_flight"), 0.0);
    assert_eq!(env.metric("warrant_kube_live_gets_waiting"), 0.0);
}

#[tokio::test]
async fn a_failed_get_is_an_error_to_the_caller_never_a_verdict() {
    let env = ready(small_cluster).await;
    env.fixture.fail_gets(Some(500));

    let message = env
        .objects
        .get(Kind::Pod, "ns", "gone")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("could not look up pods ns/gone: the API server answered 500"),
        "{message}"
    );
    // TokenReview answers `authenticated: false` with this message (TokenRequest a 503).
    assert_eq!(
        env.review(pod_binding("gone", "pod-x")).await.unwrap_err(),
        message
    );
    assert_eq!(
        env.metric(r#"warrant_kube_live_gets_total{resource="pods",result="error"}"#),
        2.0
    );

    // A cached object still answers while the API server fails.
    assert_eq!(env.review(pod_binding("web", "pod-1")).await, Ok(()));
}

#[tokio::test]
async fn an_unreachable_or_silent_api_server_fails_the_lookup() {
    let mut env: Env = start(
        KubeOptions {
            live_get_timeout: Duration::from_millis(300),
            ..options()
        },
        small_cluster,
    )
    .await;
    env.wait_ready().await;

    // The server answers nothing: the lookup gives up after its timeout.
    env.fixture.stall(true);
    let message = env
        .objects
        .get(Kind::Node, "", "late")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "could not look up nodes late: no answer within 300ms"
    );
    env.fixture.stall(false);

    // The server is gone: the connection is refused.
    env.fixture.stop().await;
    let message = env
        .objects
        .get(Kind::Secret, "ns", "gone")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("could not look up secrets ns/gone: "),
        "{message}"
    );
}

/// With `watch_secrets` off (`--disable-secret-binding`), the cache never asks the API server
/// anything about Secrets: no list, no watch, no GET on a miss. It is ready without them, has
/// no Secret metrics, and a Secret lookup fails as unavailable with the reason.
#[tokio::test]
async fn secrets_are_never_requested_when_not_watched() {
    let env = start(
        KubeOptions {
            watch_secrets: false,
            ..options()
        },
        small_cluster,
    )
    .await;
    env.wait_ready().await;
    assert_eq!(env.source.not_ready(), None);
    assert!(env.source.cached(Kind::Secret, "ns", "creds").is_none());
    assert_eq!(env.source.count(Kind::Secret), 0);
    let error = env
        .source
        .live(Kind::Secret, "ns", "creds")
        .await
        .unwrap_err();
    assert!(
        matches!(error, LookupError::NotWatched(Kind::Secret)),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "secrets are not watched: secret binding is disabled"
    );
    // The other kinds are watched and answer as usual.
    assert!(env.source.cached(Kind::Pod, "ns", "web").is_some());
    let text = env.metrics_text();
    assert!(!text.contains(r#"resource="secrets""#), "{text}");
    assert!(
        text.contains(r#"warrant_kube_watch_synced{resource="pods"} 1"#),
        "{text}"
    );
    let log = env.fixture.request_log();
    assert!(log.iter().any(|r| r.contains("/pods")), "{log:?}");
    assert!(!log.iter().any(|r| r.contains("secrets")), "{log:?}");
    assert_eq!(env.fixture.watchers("secrets"), 0);
}
