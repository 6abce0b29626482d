//! The token checks over a live cluster: what TokenRequest looks up, and how each change to the
//! cluster shows in TokenReview's answer (spec §3.3, with kube-apiserver's exact messages).

use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use warrant_kube_fixture::objects::{deleting, pod};
use warrant_objects::{Kind, ObjectSource};
use warrant_token::{Binding, ObjectRef};

use crate::support::{NOW, now, pod_binding, ready, small_cluster};

#[tokio::test]
async fn tokens_can_be_requested_for_a_pod_the_fixture_serves() {
    let env = ready(small_cluster).await;

    // What TokenRequest reads: the service account, the pod (its service account and node), the
    // node; all from memory, with the UIDs the cluster has.
    let account = env
        .objects
        .get(Kind::ServiceAccount, "ns", "app")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(account.uid, "sa-1");
    let pod = env
        .objects
        .get(Kind::Pod, "ns", "web")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pod.uid, "pod-1");
    assert_eq!(pod.deletion_timestamp, None);
    let info = pod.pod.as_ref().unwrap();
    assert_eq!(info.service_account_name, "app");
    assert_eq!(info.node_name, "node-1");
    // The admission-added volume (no audience) and the vault one, in pod order.
    assert_eq!(
        info.token_audiences,
        vec![String::new(), "vault".to_owned()]
    );
    let node = env
        .objects
        .get(Kind::Node, "", "node-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(node.uid, "node-uid-1");
    assert!(node.pod.is_none());
    let secret = env
        .objects
        .get(Kind::Secret, "ns", "creds")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secret.uid, "secret-1");
    // Same name, other namespace: a different object.
    assert_eq!(
        env.cached_uid(Kind::ServiceAccount, "other", "app")
            .as_deref(),
        Some("sa-other")
    );
    assert_eq!(env.source.count(Kind::Pod), 6);

    // What TokenReview checks then passes for every binding.
    assert_eq!(env.review(Binding::None).await, Ok(()));
    assert_eq!(env.review(pod_binding("web", "pod-1")).await, Ok(()));
    assert_eq!(
        env.review(Binding::Secret(ObjectRef::new("creds", "secret-1")))
            .await,
        Ok(())
    );
    assert_eq!(
        env.review(Binding::Node(ObjectRef::new("node-1", "node-uid-1")))
            .await,
        Ok(())
    );

    // None of it needed a live GET: everything was in the watch cache.
    assert!(
        env.fixture
            .request_log()
            .iter()
            .all(|r| r.contains("watch=true") || r.contains("limit=2")),
        "{:#?}",
        env.fixture.request_log()
    );
}

#[tokio::test]
async fn deletion_re_creation_and_a_deleted_service_account_revoke_as_in_kube() {
    let env = ready(small_cluster).await;
    assert_eq!(env.review(pod_binding("web", "pod-1")).await, Ok(()));

    // The pod is deleted: a DELETED event; the next review misses the cache, the live GET says
    // 404, and the token is invalidated.
    env.fixture.delete::<Pod>("ns", "web").unwrap();
    env.until("the pod leaves the cache", |s| {
        s.cached(Kind::Pod, "ns", "web").is_none()
    })
    .await;
    assert_eq!(
        env.review(pod_binding("web", "pod-1")).await.unwrap_err(),
        "service account token has been invalidated"
    );
    assert_eq!(env.fixture.requests("/api/v1/namespaces/ns/pods/web"), 1);

    // Re-created under the same name with a new UID: the old token names the old UID.
    env.fixture
        .create(&pod("ns", "web", "pod-2", "app", "node-1", None))
        .unwrap();
    env.until("the new pod is cached", |s| {
        s.cached(Kind::Pod, "ns", "web")
            .is_some_and(|r| r.uid == "pod-2")
    })
    .await;
    assert_eq!(
        env.review(pod_binding("web", "pod-1")).await.unwrap_err(),
        "pod UID (pod-2) does not match service account pod ref claim (pod-1)"
    );
    assert_eq!(env.review(pod_binding("web", "pod-2")).await, Ok(()));

    // The service account is deleted: every token of it fails, with kube's NotFound message.
    env.fixture.delete::<ServiceAccount>("ns", "app").unwrap();
    env.until("the service account leaves the cache", |s| {
        s.cached(Kind::ServiceAccount, "ns", "app").is_none()
    })
    .await;
    assert_eq!(
        env.review(pod_binding("web", "pod-2")).await.unwrap_err(),
        r#"serviceaccounts "app" not found"#
    );
    assert_eq!(
        env.review(Binding::None).await.unwrap_err(),
        r#"serviceaccounts "app" not found"#
    );
}

#[tokio::test]
async fn an_object_being_deleted_counts_as_deleted_60_seconds_after_its_timestamp() {
    let env = ready(small_cluster).await;
    let at = |seconds_ago: i64| now() - SignedDuration::from_secs(seconds_ago);

    // Graceful deletion: the pod stays, with a deletionTimestamp (a MODIFIED event).
    let web = pod("ns", "web", "pod-1", "app", "node-1", Some("vault"));
    env.fixture.update(&deleting(web.clone(), at(60))).unwrap();
    env.until("the deletion timestamp is cached", |s| {
        s.cached(Kind::Pod, "ns", "web")
            .is_some_and(|r| r.deletion_timestamp.is_some())
    })
    .await;
    assert_eq!(
        env.source
            .cached(Kind::Pod, "ns", "web")
            .unwrap()
            .deletion_timestamp,
        Some(jiff::Timestamp::from_second(NOW - 60).unwrap())
    );
    assert_eq!(
        env.review(pod_binding("web", "pod-1")).await,
        Ok(()),
        "within the 60 s leeway"
    );

    env.fixture.update(&deleting(web, at(61))).unwrap();
    env.until("the later timestamp is cached", |s| {
        s.cached(Kind::Pod, "ns", "web")
            .is_some_and(|r| r.deletion_timestamp == Some(at(61)))
    })
    .await;
    assert_eq!(
        env.review(pod_binding("web", "pod-1")).await.unwrap_err(),
        "service account token has been invalidated"
    );

    // The same rule for the service account, with its own message.
    let account = warrant_kube_fixture::objects::service_account("ns", "app", "sa-1");
    env.fixture.update(&deleting(account, at(61))).unwrap();
    env.until("the account's deletion is cached", |s| {
        s.cached(Kind::ServiceAccount, "ns", "app")
            .is_some_and(|r| r.deletion_timestamp.is_some())
    })
    .await;
    assert_eq!(
        env.review(Binding::None).await.unwrap_err(),
        "service account ns/app has been deleted"
    );
}
