//! Following kube-system/extension-apiserver-authentication (spec §7.3) through the loopback
//! fixture: trust appears when the ConfigMap does, follows its updates, survives a bad one and
//! goes when it is deleted. Waits on the trust's change notifications, never on a timer.

use std::time::Duration;

use axum::Router;
use http::{Method, StatusCode};
use k8s_openapi::api::core::v1::ConfigMap;
use prometheus_client::registry::Registry;
use serde_json::json;
use warrant_auth::{ClientTrust, Follow, follow_extension_authentication};
use warrant_kube_fixture::objects::config_map;
use warrant_kube_fixture::{Cluster, Fixture, ResourceType};

use crate::support::*;
use warrant_testkit::TestCa;

const NAME: &str = "extension-apiserver-authentication";

async fn until(trust: &ClientTrust, what: &str, check: impl Fn(&ClientTrust) -> bool) {
    let mut changes = trust.changes();
    let wait = async {
        while !check(trust) {
            changes.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

fn published(proxy_ca: &TestCa, users_ca: &TestCa, allowed: &str) -> ConfigMap {
    config_map(
        "kube-system",
        NAME,
        &[
            ("client-ca-file", users_ca.pem()),
            ("requestheader-client-ca-file", proxy_ca.pem()),
            ("requestheader-allowed-names", allowed),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-uid-headers", r#"["X-Remote-Uid"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#,
            ),
        ],
    )
}

#[tokio::test]
async fn the_front_proxy_follows_the_configmap() {
    let cluster = Cluster::new();
    cluster.register(ResourceType::of::<ConfigMap>());
    let fixture = Fixture::start_with(cluster, |_| Router::new())
        .await
        .unwrap();
    // Another ConfigMap in kube-system is never read (the watch names the one it wants).
    fixture
        .create(&config_map(
            "kube-system",
            "other",
            &[("requestheader-allowed-names", "garbage")],
        ))
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(fixture.url().parse().unwrap())).unwrap();
    let trust = ClientTrust::default();
    let follower = follow_extension_authentication(
        client,
        trust.clone(),
        Follow {
            client_ca: true,
            front_proxy: true,
        },
        &mut Registry::default(),
    );
    assert!(!trust.ready(), "not ready before the first list");
    until(&trust, "the first list", ClientTrust::ready).await;
    assert!(trust.front_proxy().is_none());

    let handle = trust.clone();
    let api = api_auth(|authn, _| authn.trust = handle);
    let proxy_ca = TestCa::new("front-proxy-ca");
    let users_ca = TestCa::new("client-ca");
    let relay = |cn: &str| {
        let peer = proxy_ca.issue_client(cn, &[]).peer();
        let api = &api;
        async move {
            api.send_with_peer(
                Method::POST,
                "/api/v1/namespaces/demo/serviceaccounts/app/token",
                Some(peer),
                &[
                    ("x-remote-user", "jane"),
                    ("x-remote-group", "system:masters"),
                ],
                Some(json!({"spec": {}})),
            )
            .await
            .code
        }
    };
    assert_eq!(relay("front-proxy-client").await, StatusCode::UNAUTHORIZED);

    fixture
        .create(&published(
            &proxy_ca,
            &users_ca,
            r#"["front-proxy-client"]"#,
        ))
        .unwrap();
    until(&trust, "the ConfigMap", |t| t.front_proxy().is_some()).await;
    assert!(trust.client_ca().is_some());
    assert_eq!(relay("front-proxy-client").await, StatusCode::CREATED);
    assert_eq!(relay("aggregator").await, StatusCode::UNAUTHORIZED);

    // kube-apiserver renames its proxy: warrant follows.
    fixture
        .update(&published(&proxy_ca, &users_ca, r#"["aggregator"]"#))
        .unwrap();
    until(&trust, "the update", |t| {
        t.front_proxy()
            .is_some_and(|p| p.allowed_names == ["aggregator"])
    })
    .await;
    assert_eq!(relay("aggregator").await, StatusCode::CREATED);

    // A value that does not parse: the last good configuration stays.
    let mut changes = trust.changes();
    changes.mark_unchanged();
    fixture
        .update(&published(&proxy_ca, &users_ca, "aggregator"))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), changes.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(trust.front_proxy().unwrap().allowed_names, ["aggregator"]);
    assert_eq!(relay("aggregator").await, StatusCode::CREATED);

    // Deleted: no proxy is trusted.
    fixture.delete::<ConfigMap>("kube-system", NAME).unwrap();
    until(&trust, "the deletion", |t| t.front_proxy().is_none()).await;
    assert!(trust.client_ca().is_none());
    assert_eq!(relay("aggregator").await, StatusCode::UNAUTHORIZED);

    // Dropping the follower's handle stops it: its watch closes.
    assert_eq!(fixture.watchers("configmaps"), 1);
    drop(follower);
    tokio::time::timeout(
        Duration::from_secs(20),
        fixture.until(|c| c.watchers("configmaps") == 0),
    )
    .await
    .expect("the follower's watch outlived its handle");
}
