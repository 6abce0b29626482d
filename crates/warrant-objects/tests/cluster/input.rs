//! Bad input from the API server is skipped, logged and counted, and the cache keeps working.

use k8s_openapi::api::core::v1::Pod;
use warrant_kube_fixture::ResourceType;
use warrant_kube_fixture::objects::pod;
use warrant_objects::{Kind, ObjectSource};

use crate::support::{ready, small_cluster};

#[tokio::test]
async fn bad_events_are_skipped_and_counted_and_the_cache_keeps_working() {
    let env = ready(small_cluster).await;
    env.until_fixture("the pod watch is open", |c| c.watchers("pods") == 1)
        .await;
    let pods = ResourceType::of::<Pod>();

    // An event of a type no client knows.
    env.fixture
        .inject_raw_line(
            pods,
            r#"{"type":"SURPRISE","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x","namespace":"ns","uid":"x-1","resourceVersion":"1"}}}"#,
        )
        .unwrap();
    // An object without a UID.
    env.fixture
        .create(&pod("ns", "no-uid", "", "app", "node-1", None))
        .unwrap();
    // A line that is not JSON at all.
    env.fixture
        .inject_raw_line(pods, "this is not a watch event")
        .unwrap();
    // And then a good event.
    env.fixture
        .create(&pod("ns", "good", "good-1", "app", "node-1", None))
        .unwrap();

    env.until("the good pod arrives", |s| {
        s.cached(Kind::Pod, "ns", "good").is_some()
    })
    .await;
    assert!(env.source.cached(Kind::Pod, "ns", "no-uid").is_none());
    assert!(env.source.cached(Kind::Pod, "ns", "x").is_none());
    assert_eq!(
        env.cached_uid(Kind::Pod, "ns", "web").as_deref(),
        Some("pod-1")
    );
    assert_eq!(
        env.metric(r#"warrant_kube_watch_skipped_objects_total{resource="pods",reason="no_uid"}"#),
        1.0
    );
    let text = env.metrics_text();
    let errors: f64 = text
        .lines()
        .filter(|l| l.starts_with(r#"warrant_kube_watch_errors_total{resource="pods""#))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(errors, 2.0, "{text}");
    assert_eq!(
        env.metric(r#"warrant_kube_watch_errors_total{resource="pods",error="decode"}"#),
        1.0,
        "{text}"
    );
    // Nothing made it relist: the watch went on past the bad lines.
    assert_eq!(
        env.metric(r#"warrant_kube_watch_relists_total{resource="pods"}"#),
        0.0
    );
}
