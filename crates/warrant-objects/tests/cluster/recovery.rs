//! The watch surviving the API server: 410 Gone, dropped connections, restarts; readiness;
//! bookmarks and staleness, and the bound past which the cache is not trusted; shutdown.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use warrant_kube_fixture::objects::pod;
use warrant_objects::kube::{CacheClock, KubeOptions};
use warrant_objects::{Kind, ObjectSource};

use crate::support::{PATIENCE, options, pod_binding, ready, small_cluster, start};

#[tokio::test]
async fn gone_leads_to_a_relist_and_the_right_state_after_it() {
    let env = ready(small_cluster).await;
    assert_eq!(
        env.metric(r#"warrant_kube_watch_relists_total{resource="pods"}"#),
        0.0
    );

    // While the watch hears nothing, one pod goes and one comes, and the server compacts its
    // history: the watch cannot resume, so it must list again.
    env.fixture.pause_watches(true);
    env.fixture.delete::<Pod>("ns", "batch-0").unwrap();
    env.fixture
        .create(&pod("ns", "late", "late-1", "app", "node-1", None))
        .unwrap();
    env.fixture.compact();
    env.fixture.pause_watches(false);

    env.until("the relist brings the new state", |s| {
        s.cached(Kind::Pod, "ns", "batch-0").is_none()
            && s.cached(Kind::Pod, "ns", "late").is_some()
    })
    .await;
    assert_eq!(
        env.cached_uid(Kind::Pod, "ns", "late").as_deref(),
        Some("late-1")
    );
    assert_eq!(
        env.cached_uid(Kind::Pod, "ns", "web").as_deref(),
        Some("pod-1")
    );
    assert_eq!(env.source.count(Kind::Pod), 6);
    assert_eq!(
        env.metric(r#"warrant_kube_watch_relists_total{resource="pods"}"#),
        1.0
    );
    assert_eq!(
        env.metric(r#"warrant_kube_watch_errors_total{resource="pods",error="watch_event"}"#),
        1.0
    );
    // Other kinds' watches had nothing to resume from after the compaction either, once they
    // reconnect; but they were not cut off, so they did not relist.
    assert!(env.source.ready());
}

#[tokio::test]
async fn a_dropped_watch_resumes_without_losing_a_delete() {
    let env = ready(small_cluster).await;
    let before = env.fixture.revision();

    // The pod is deleted while the connection is going down.
    env.fixture.pause_watches(true);
    env.fixture.delete::<Pod>("ns", "web").unwrap();
    env.fixture.drop_watches();
    env.fixture.pause_watches(false);

    env.until("the DELETED event arrives on the resumed watch", |s| {
        s.cached(Kind::Pod, "ns", "web").is_none()
    })
    .await;
    // It resumed from where it was (no relist).
    assert_eq!(
        env.metric(r#"warrant_kube_watch_relists_total{resource="pods"}"#),
        0.0
    );
    let resumed = format!("resourceVersion={before}");
    assert!(
        env.fixture
            .request_log()
            .iter()
            .any(|r| r.starts_with("GET /api/v1/pods?")
                && r.contains("watch=true")
                && r.contains(&resumed)),
        "{:#?}",
        env.fixture.request_log()
    );
}

#[tokio::test]
async fn the_cache_survives_an_api_server_restart() {
    let mut env = ready(small_cluster).await;
    env.fixture.stop().await;
    // The watches notice: their connections are cut and reconnecting is refused.
    let errors = r#"warrant_kube_watch_errors_total{resource="pods",error="watch_start"}"#;
    env.until("the pod watch fails to reconnect", |_| {
        env.metric(errors) > 0.0
    })
    .await;
    // Changes made while it is down (as by another API server replica).
    env.fixture.delete::<Pod>("ns", "batch-1").unwrap();
    env.fixture
        .create(&pod("ns", "after", "after-1", "app", "node-1", None))
        .unwrap();
    env.fixture.restart().await.unwrap();

    env.until("the cache catches up after the restart", |s| {
        s.cached(Kind::Pod, "ns", "batch-1").is_none()
            && s.cached(Kind::Pod, "ns", "after").is_some()
    })
    .await;
    assert_eq!(
        env.cached_uid(Kind::Pod, "ns", "web").as_deref(),
        Some("pod-1")
    );
    // It resumed from its resourceVersion: the history was still there, so no relist.
    assert_eq!(
        env.metric(r#"warrant_kube_watch_relists_total{resource="pods"}"#),
        0.0
    );
}

#[tokio::test]
async fn readiness_waits_for_the_first_list_of_every_kind() {
    let fixture_stalled = |f: &warrant_kube_fixture::Fixture| {
        small_cluster(f);
        f.stall(true);
    };
    let env = start(KubeOptions { ..options() }, fixture_stalled).await;
    // Every kind's list reaches the server, which does not answer.
    env.until_fixture("the four lists arrive", |c| {
        ["serviceaccounts", "pods", "secrets", "nodes"]
            .iter()
            .all(|r| c.requests(&format!("/api/v1/{r}")) > 0)
    })
    .await;
    assert!(!env.source.ready());
    assert_eq!(
        env.metric(r#"warrant_kube_watch_synced{resource="pods"}"#),
        0.0
    );
    assert!(env.objects.count(Kind::Pod) == 0);

    env.fixture.stall(false);
    env.wait_ready().await;
    assert_eq!(env.source.count(Kind::Pod), 6);
    assert_eq!(env.source.count(Kind::ServiceAccount), 2);
    assert_eq!(env.source.count(Kind::Secret), 1);
    assert_eq!(env.source.count(Kind::Node), 1);
    for resource in ["serviceaccounts", "pods", "secrets", "nodes"] {
        assert_eq!(
            env.metric(&format!(
                "warrant_kube_watch_synced{{resource=\"{resource}\"}}"
            )),
            1.0
        );
        assert_eq!(
            env.metric(&format!(
                "warrant_kube_cache_objects{{resource=\"{resource}\"}}"
            )),
            env.source.count(match resource {
                "serviceaccounts" => Kind::ServiceAccount,
                "pods" => Kind::Pod,
                "secrets" => Kind::Secret,
                _ => Kind::Node,
            }) as f64
        );
    }
    // Pods came in pages of two: four pages for six pods (the last one empty of `continue`).
    let pages = env
        .fixture
        .request_log()
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/pods?") && r.contains("limit=2"))
        .count();
    assert_eq!(pages, 3);
}

#[tokio::test]
async fn bookmarks_are_signs_of_life_and_staleness_is_a_metric() {
    let env = ready(small_cluster).await;
    let before = env.source.last_heard(Kind::Node);
    env.until_fixture("the node watch is open", |c| c.watchers("nodes") == 1)
        .await;
    env.fixture.bookmark();
    env.until("the bookmark is heard", |s| {
        s.last_heard(Kind::Node) > before
    })
    .await;
    assert!(env.source.staleness(Kind::Node) < PATIENCE);
    // The watches asked for bookmarks.
    assert!(
        env.fixture
            .request_log()
            .iter()
            .filter(|r| r.contains("watch=true"))
            .all(|r| r.contains("allowWatchBookmarks=true"))
    );
    let text = env.metrics_text();
    for resource in ["serviceaccounts", "pods", "secrets", "nodes"] {
        assert!(
            text.contains(&format!(
                "warrant_kube_watch_staleness_seconds{{resource=\"{resource}\"}} "
            )),
            "{text}"
        );
    }
    assert!(
        text.contains("# TYPE warrant_kube_watch_staleness_seconds gauge"),
        "{text}"
    );
}

#[tokio::test]
async fn shutdown_closes_every_watch() {
    let env = ready(small_cluster).await;
    env.until_fixture("four watches are open", |c| {
        ["serviceaccounts", "pods", "secrets", "nodes"]
            .iter()
            .all(|r| c.watchers(r) == 1)
    })
    .await;
    tokio::time::timeout(PATIENCE, env.source.shutdown())
        .await
        .unwrap();
    env.until_fixture("the watches are closed", |c| {
        ["serviceaccounts", "pods", "secrets", "nodes"]
            .iter()
            .all(|r| c.watchers(r) == 0)
    })
    .await;
    // What is in memory still answers.
    assert_eq!(
        env.cached_uid(Kind::Pod, "ns", "web").as_deref(),
        Some("pod-1")
    );
}

#[tokio::test]
async fn past_its_staleness_bound_the_cache_is_not_trusted() {
    let clock = CacheClock::default();
    let bounded = KubeOptions {
        max_staleness: Some(Duration::from_secs(120)),
        clock: clock.clone(),
        ..options()
    };
    let env = start(bounded, small_cluster).await;
    env.wait_ready().await;
    let web = || pod_binding("web", "pod-1");
    let stale = r#"warrant_kube_cache_stale{resource="pods"}"#;

    // The watches go quiet, and the pod is deleted behind their back.
    env.fixture.pause_watches(true);
    env.fixture.delete::<Pod>("ns", "web").unwrap();

    // Within the bound the cache answers, as kube-apiserver's informers do: the token passes.
    clock.advance(Duration::from_secs(100));
    assert_eq!(env.review(web()).await, Ok(()));
    assert!(env.source.ready());
    assert_eq!(env.metric(stale), 0.0);

    // Past it, the objects are looked up live, and the API server says the pod is gone.
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        env.review(web()).await.unwrap_err(),
        "service account token has been invalidated"
    );
    let reason = env.source.not_ready().expect("a stale cache is not ready");
    assert!(
        reason.starts_with("stale: nothing from the API server about serviceaccounts for 13"),
        "{reason}"
    );
    assert!(reason.ends_with("(the bound is 120s)"), "{reason}");
    assert_eq!(env.metric(stale), 1.0);

    // With the API server failing too, a token of an object still in the cache is not
    // accepted, and the answer says why.
    env.fixture.fail_gets(Some(500));
    let message = env
        .review(pod_binding("batch-2", "batch-uid-2"))
        .await
        .unwrap_err();
    assert!(
        message.starts_with(
            "the cache of serviceaccounts is stale (nothing from the API server for 13"
        ) && message
            .contains("and could not look up serviceaccounts ns/app: the API server answered 500"),
        "{message}"
    );

    // The watches are heard from again: the delete arrives, the bookmarks prove the quiet
    // kinds alive, and the cache answers (and is ready) again without the API server.
    env.fixture.pause_watches(false);
    env.until("the DELETED event arrives", |s| {
        s.cached(Kind::Pod, "ns", "web").is_none()
    })
    .await;
    env.until_fixture("every kind is watched", |c| {
        ["serviceaccounts", "pods", "secrets", "nodes"]
            .iter()
            .all(|r| c.watchers(r) == 1)
    })
    .await;
    env.fixture.bookmark();
    env.until("every kind is heard from", |s| s.ready()).await;
    assert_eq!(
        env.review(pod_binding("batch-2", "batch-uid-2")).await,
        Ok(())
    );
    assert_eq!(env.metric(stale), 0.0);
    env.fixture.fail_gets(None);
    assert_eq!(
        env.review(web()).await.unwrap_err(),
        "service account token has been invalidated"
    );
}
