//! Starting a fixture and a cache against it, waiting for conditions, reading metrics.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use warrant_kube_fixture::Fixture;
use warrant_objects::kube::{KubeOptions, KubeSource, cluster_client};
use warrant_objects::{Kind, ObjectSource, Objects, check_token_objects};
use warrant_token::{Binding, Claims, NewToken, ObjectRef};

/// How long any wait may take before the test fails. Generous: a shared 2-core machine, and
/// kube-runtime's backoff (0.8 s, then doubling) after each watch error.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// The fixed "now" of token checks; objects' deletion timestamps are set relative to it.
pub(crate) const NOW: i64 = 1_800_000_000;

pub(crate) fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

pub(crate) struct Env {
    pub(crate) fixture: Fixture,
    pub(crate) source: Arc<KubeSource>,
    pub(crate) objects: Objects,
    pub(crate) registry: Registry,
    // Holds the kubeconfig file the client was built from.
    _dir: tempfile::TempDir,
}

/// A fixture (filled by `setup`) and a cache started against it through a kubeconfig file,
/// with lists of two objects per page so paging is exercised. Does not wait for readiness.
pub(crate) async fn start(options: KubeOptions, setup: impl FnOnce(&Fixture)) -> Env {
    let fixture = Fixture::start().await.unwrap();
    setup(&fixture);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    fixture.write_kubeconfig(&path).unwrap();
    let client = cluster_client(Some(&path)).await.unwrap();
    let mut registry = Registry::default();
    let source = Arc::new(KubeSource::start_with(client, &mut registry, options).unwrap());
    let objects = Objects::new(source.clone());
    Env {
        fixture,
        source,
        objects,
        registry,
        _dir: dir,
    }
}

pub(crate) fn options() -> KubeOptions {
    KubeOptions {
        page_size: 2,
        ..KubeOptions::default()
    }
}

/// [`start`] with default test options, waiting until the cache is ready.
pub(crate) async fn ready(setup: impl FnOnce(&Fixture)) -> Env {
    let env = start(options(), setup).await;
    env.wait_ready().await;
    env
}

impl Env {
    pub(crate) async fn wait_ready(&self) {
        tokio::time::timeout(PATIENCE, self.source.wait_ready())
            .await
            .expect("the cache did not become ready");
    }

    /// Waits until `check` holds on the cache, re-checking after each change to it.
    pub(crate) async fn until(&self, what: &str, check: impl Fn(&KubeSource) -> bool) {
        let mut changes = self.source.changes();
        let wait = async {
            while !check(&self.source) {
                changes.changed().await.unwrap();
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
    }

    /// Waits until the fixture's state satisfies `check`.
    pub(crate) async fn until_fixture(
        &self,
        what: &str,
        check: impl FnMut(&warrant_kube_fixture::Cluster) -> bool,
    ) {
        tokio::time::timeout(PATIENCE, self.fixture.until(check))
            .await
            .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
    }

    /// The cached UID of an object, without a live lookup.
    pub(crate) fn cached_uid(&self, kind: Kind, namespace: &str, name: &str) -> Option<String> {
        self.source
            .cached(kind, namespace, name)
            .map(|r| r.uid.clone())
    }

    /// The value of one metric sample, e.g. `warrant_kube_watch_relists_total{resource="pods"}`;
    /// 0 if absent.
    pub(crate) fn metric(&self, sample: &str) -> f64 {
        let text = self.metrics_text();
        text.lines()
            .find_map(|line| {
                let (name, value) = line.rsplit_once(' ')?;
                (name == sample).then(|| value.parse().unwrap())
            })
            .unwrap_or(0.0)
    }

    pub(crate) fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    /// `check_token_objects` for a token of `ns/app` (UID `sa-1`) with `binding`, at [`NOW`].
    pub(crate) async fn review(&self, binding: Binding) -> Result<(), String> {
        check_token_objects(&self.objects, &claims(binding), now())
            .await
            .map_err(|e| e.to_string())
    }
}

pub(crate) fn claims(binding: Binding) -> Claims {
    Claims::new(NewToken {
        issuer: "https://warrant.test",
        namespace: "ns",
        service_account: ObjectRef::new("app", "sa-1"),
        audiences: vec!["vault".into()],
        binding,
        issued_at: NOW - 60,
        expires_at: NOW + 3600,
        warn_after: None,
        jti: "jti-1".into(),
    })
}

pub(crate) fn pod_binding(name: &str, uid: &str) -> Binding {
    Binding::Pod {
        pod: ObjectRef::new(name, uid),
        node: Some(ObjectRef::new("node-1", "node-uid-1")),
    }
}

/// The objects of a small cluster: service account `ns/app` (`sa-1`), node `node-1`
/// (`node-uid-1`), pod `ns/web` (`pod-1`, on node-1, projecting a token for `vault`), secret
/// `ns/creds` (`secret-1`), and a few more pods so lists take several pages.
pub(crate) fn small_cluster(fixture: &Fixture) {
    use warrant_kube_fixture::objects::{node, pod, secret, service_account};
    fixture
        .create(&service_account("ns", "app", "sa-1"))
        .unwrap();
    fixture
        .create(&service_account("other", "app", "sa-other"))
        .unwrap();
    fixture.create(&node("node-1", "node-uid-1")).unwrap();
    fixture
        .create(&pod("ns", "web", "pod-1", "app", "node-1", Some("vault")))
        .unwrap();
    for i in 0..5 {
        fixture
            .create(&pod(
                "ns",
                &format!("batch-{i}"),
                &format!("batch-uid-{i}"),
                "app",
                "node-1",
                None,
            ))
            .unwrap();
    }
    fixture.create(&secret("ns", "creds", "secret-1")).unwrap();
}
