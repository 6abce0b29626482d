//! The Secret store and leader election against the loopback Kubernetes fixture, over real
//! HTTP. Tokio's clock runs in real time here (a paused clock would fire HTTP timeouts while a
//! response is on its way, and kube-lease-manager reads the wall clock for Lease expiry), so the
//! tests await events, with a generous timeout as a safety net; the key schedule is driven by a
//! wall clock the test sets, and a touch of the Secret wakes the managers to look at it.

use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use warrant_clock::Clock;
use warrant_kube_fixture::{Fixture, ResourceType};
use warrant_token::{KeyType, SigningKey};

use super::*;
use crate::test_support::*;
use crate::{
    KeyManager, KeyManagerTask, KeyMetrics, KeySet, Leadership, LeaseConfig, StoreHealth, Writer,
};

const NS: &str = "warrant";
const NAME: &str = "warrant-keys";
const SECRET_PATH: &str = "/api/v1/namespaces/warrant/secrets/warrant-keys";
/// How long any wait may take before the test fails: Lease hand-overs take a few seconds.
const PATIENCE: Duration = Duration::from_secs(30);

/// A wall clock the test sets, at `T0`.
fn test_clock() -> Clock {
    Clock::manual(at(T0))
}

async fn fixture() -> Fixture {
    let fixture = Fixture::start().await.unwrap();
    fixture.register(ResourceType::of::<Lease>());
    fixture
}

fn client(fixture: &Fixture) -> kube::Client {
    let config = kube::Config::new(fixture.url().parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn store(fixture: &Fixture, writer: &str) -> SecretStore {
    SecretStore::new(client(fixture), NS, NAME).with_writer(writer)
}

fn secret(fixture: &Fixture) -> Secret {
    fixture.get::<Secret>(NS, NAME).expect("the Secret exists")
}

fn annotation(secret: &Secret, key: &str) -> Option<String> {
    secret.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Writes to the Secret as another client would, without touching the keys: wakes every watcher.
fn touch(fixture: &Fixture, note: &str) {
    let mut secret = secret(fixture);
    secret
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("test/touched".into(), note.into());
    fixture.update(&secret).unwrap();
}

/// The writes warrant sent to the Secret (creates and replaces).
fn writes(fixture: &Fixture) -> usize {
    fixture
        .request_log()
        .iter()
        .filter(|r| {
            r.starts_with(&format!("PUT {SECRET_PATH}?"))
                || r.starts_with("POST /api/v1/namespaces/warrant/secrets?")
        })
        .count()
}

async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting until {what}"))
}

async fn until_leading(what: &str, leadership: &Leadership, leading: bool) {
    let mut receiver = leadership.leading();
    within(what, receiver.wait_for(|l| *l == leading))
        .await
        .unwrap();
}

/// The Lease of the tests that assert who leads throughout: long enough (renewed 20 s before
/// it expires) that no delay on a loaded machine lets it lapse and change hands mid-test. A test
/// that hands the Lease over does it explicitly, with [`HANDOVER_LEASE_SECONDS`].
fn lease(identity: &str) -> LeaseConfig {
    LeaseConfig {
        namespace: NS.into(),
        name: format!("{NAME}-leader"),
        identity: identity.into(),
        duration_seconds: 60,
    }
}

/// The Lease of the hand-over test: short, because a holder learns it lost the Lease at its
/// next renewal (6 s in), yet renewed 3 s before it expires, a margin no scheduling delay of
/// the test machine comes near.
const HANDOVER_LEASE_SECONDS: u64 = 9;

/// One replica: its election, its manager's task, and what it published.
struct Replica {
    leadership: Leadership,
    health: watch::Receiver<StoreHealth>,
    published: mpsc::UnboundedReceiver<Vec<String>>,
    registry: Registry,
    _task: KeyManagerTask,
}

impl Replica {
    /// A replica on the long Lease (see [`lease`]).
    async fn start(fixture: &Fixture, identity: &str, clock: &Clock) -> Replica {
        Self::start_with(fixture, lease(identity), clock).await
    }

    async fn start_with(fixture: &Fixture, lease: LeaseConfig, clock: &Clock) -> Replica {
        let identity = lease.identity.clone();
        let identity = identity.as_str();
        let metrics = KeyMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let leadership = Leadership::start(client(fixture), &lease, metrics.clone())
            .await
            .unwrap();
        let manager = within(
            "the replica has keys",
            KeyManager::open_when_ready(
                store(fixture, identity),
                policy(),
                Writer::WhileLeader(leadership.leading()),
                metrics,
                clock,
            ),
        )
        .await
        .unwrap();
        let health = manager.health();
        let (sender, published) = mpsc::unbounded_channel();
        let task = manager
            .spawn(clock.clone(), move |keys: KeySet| {
                let kids = keys
                    .verifying()
                    .iter()
                    .map(|k| k.kid().to_owned())
                    .collect();
                let _ = sender.send(kids);
            })
            .unwrap();
        Replica {
            leadership,
            health,
            published,
            registry,
            _task: task,
        }
    }

    /// Waits for the next key set it publishes.
    async fn next(&mut self, what: &str) -> Vec<String> {
        within(what, self.published.recv()).await.unwrap()
    }

    /// Waits until it publishes exactly `kids`.
    async fn until_publishes(&mut self, what: &str, kids: &[String]) {
        loop {
            if self.next(what).await == kids {
                return;
            }
        }
    }

    fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }
}

#[tokio::test]
async fn a_key_set_round_trips_through_the_secret_with_optimistic_writes() {
    let fixture = fixture().await;
    let store = store(&fixture, "replica-a");
    assert!(store.load().await.unwrap().is_none());

    let first = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let v1 = store.save(&first, None).await.unwrap();
    // A second creator loses.
    assert!(matches!(
        store.save(&first, None).await,
        Err(StoreError::Conflict { .. })
    ));

    // What is stored: the index and one PEM per key, labelled and annotated, of type Opaque.
    let stored = secret(&fixture);
    assert_eq!(stored.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        stored.metadata.resource_version.as_deref(),
        Some(v1.0.as_str())
    );
    assert_eq!(
        stored.metadata.labels.as_ref().unwrap()[MANAGED_BY_LABEL],
        MANAGED_BY
    );
    assert_eq!(
        annotation(&stored, WRITTEN_BY_ANNOTATION).as_deref(),
        Some("replica-a")
    );
    let data = stored.data.as_ref().unwrap();
    let pem = crate::key_file_name(first.keys()[0].kid());
    let mut expected = vec![pem.as_str(), INDEX_FILE];
    expected.sort_unstable();
    assert_eq!(
        data.keys().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    assert!(String::from_utf8_lossy(&data[&pem].0).starts_with("-----BEGIN PRIVATE KEY-----"));

    let loaded = store.load().await.unwrap().unwrap();
    assert_eq!(loaded.version, v1);
    assert_eq!(kids(&loaded.keys), kids(&first));

    // An operator labels the Secret; warrant's next write keeps the label.
    let mut labelled = secret(&fixture);
    labelled
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("team".into(), "identity".into());
    fixture.update(&labelled).unwrap();
    let read = store.load().await.unwrap().unwrap();
    let second = first
        .rotate_early(&policy(), at(T0 + DAY), SigningKey::generate)
        .unwrap()
        .unwrap();
    let v2 = store.save(&second, Some(&read.version)).await.unwrap();
    let stored = secret(&fixture);
    assert_eq!(stored.metadata.labels.as_ref().unwrap()["team"], "identity");
    assert_eq!(stored.data.as_ref().unwrap().len(), 3);

    // A write against a version that is no longer current is refused, and changes nothing.
    assert!(matches!(
        store.save(&first, Some(&v1)).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(
        kids(&store.load().await.unwrap().unwrap().keys),
        kids(&second)
    );
    // So is one against a Secret deleted since it was read.
    fixture.delete::<Secret>(NS, NAME).unwrap();
    assert!(matches!(
        store.save(&second, Some(&v2)).await,
        Err(StoreError::Conflict { .. })
    ));
    assert!(store.load().await.unwrap().is_none());
}

#[tokio::test]
async fn an_empty_secret_is_taken_over_and_another_secret_is_never_overwritten() {
    let fixture = fixture().await;
    let store = store(&fixture, "replica-a");
    // Created ahead by an operator, who then need not grant `create`.
    fixture
        .create(&Secret {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                namespace: Some(NS.into()),
                ..ObjectMeta::default()
            },
            ..Secret::default()
        })
        .unwrap();
    assert!(store.load().await.unwrap().is_none());
    let first = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    store.save(&first, None).await.unwrap();
    assert!(
        !fixture.request_log().iter().any(|r| r.starts_with("POST ")),
        "taken over with a replace, not created"
    );
    assert_eq!(
        kids(&store.load().await.unwrap().unwrap().keys),
        kids(&first)
    );

    // A Secret that holds something else (a typo in --key-secret) is refused, and kept.
    let other = SecretStore::new(client(&fixture), NS, "database");
    let mut data = std::collections::BTreeMap::new();
    data.insert("password".to_owned(), ByteString(b"hunter2".to_vec()));
    fixture
        .create(&Secret {
            metadata: ObjectMeta {
                name: Some("database".into()),
                namespace: Some(NS.into()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..Secret::default()
        })
        .unwrap();
    let refused = other.load().await.unwrap_err().to_string();
    assert_eq!(
        refused,
        "Kubernetes Secret warrant/database: the Secret holds data but no keys.json: it is not a warrant key set, and warrant will not overwrite it (name another Secret, or empty this one)"
    );
    assert!(other.save(&first, None).await.is_err());
    let kept = fixture.get::<Secret>(NS, "database").unwrap();
    assert_eq!(kept.data.unwrap().len(), 1);
    assert!(!refused.contains("hunter2"));
}

#[tokio::test]
async fn the_watch_follows_the_one_secret_by_name_and_metadata_only() {
    let fixture = fixture().await;
    let store = store(&fixture, "replica-a");
    let first = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    store.save(&first, None).await.unwrap();
    let mut feed = store.watch().unwrap();
    // The first list.
    within("the watch lists the Secret", feed.changed()).await;
    touch(&fixture, "1");
    within("the watch sees a change", feed.changed()).await;

    let watches: Vec<String> = fixture
        .request_log()
        .into_iter()
        .filter(|r| r.contains("/secrets?") && r.starts_with("GET "))
        .collect();
    assert!(!watches.is_empty());
    assert!(
        watches
            .iter()
            .all(|r| r.contains("fieldSelector=metadata.name%3Dwarrant-keys")
                && r.ends_with(" (metadata)")),
        "{watches:#?}"
    );
    // Another Secret in the namespace does not concern it.
    fixture
        .create(&warrant_kube_fixture::objects::secret(
            NS,
            "unrelated",
            "u-1",
        ))
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), feed.changed())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn only_the_leader_rotates_and_both_replicas_converge() {
    let fixture = fixture().await;
    let clock = test_clock();
    let mut a = Replica::start(&fixture, "replica-a", &clock).await;
    // Starting alone, A took the Lease and created the first key.
    assert!(a.leadership.is_leader());
    let mut b = Replica::start(&fixture, "replica-b", &clock).await;
    assert!(!b.leadership.is_leader());
    let first = a.next("A publishes its keys").await;
    assert_eq!(first.len(), 1);
    assert_eq!(b.next("B publishes the same keys").await, first);
    assert_eq!(writes(&fixture), 1, "A created the Secret, B wrote nothing");
    assert!(a.metrics().contains("\nwarrant_keys_leader 1\n"));
    assert!(b.metrics().contains("\nwarrant_keys_leader 0\n"));

    // Six days on, the successor is due: the leader creates it, the follower takes it up.
    clock.set(at(T0 + 6 * DAY + 1));
    touch(&fixture, "six days");
    let rotated = a.next("A rotates").await;
    assert_eq!(rotated.len(), 2);
    assert_eq!(rotated[0], first[0]);
    b.until_publishes("B follows the rotation", &rotated).await;
    let stored = secret(&fixture);
    assert_eq!(
        annotation(&stored, WRITTEN_BY_ANNOTATION).as_deref(),
        Some("replica-a")
    );
    assert_eq!(
        writes(&fixture),
        2,
        "one write per change, all by the leader"
    );
    let index: serde_json::Value =
        serde_json::from_slice(&stored.data.unwrap()[INDEX_FILE].0).unwrap();
    assert_eq!(index["generation"], 2);
}

#[tokio::test]
async fn a_conflicting_write_is_retried_from_a_fresh_read_without_losing_a_key() {
    let fixture = fixture().await;
    let clock = test_clock();
    let mut a = Replica::start(&fixture, "replica-a", &clock).await;
    let first = a.next("A publishes its keys").await;

    // Another writer touches the Secret just before A's write lands: A's write is refused, and
    // A recomputes from what it reads now, and writes again. (The race is set up before the
    // clock moves: A may wake at any moment, for a watch event of its own.)
    fixture.before_next_write("secrets", |cluster| {
        let mut secret = cluster.get::<Secret>(NS, NAME).unwrap();
        secret
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("backup/taken".into(), "yes".into());
        cluster.update(&secret).unwrap();
    });
    clock.set(at(T0 + 6 * DAY + 1));
    touch(&fixture, "six days");
    let rotated = a.next("A rotates after a conflict").await;
    assert_eq!(rotated.len(), 2);
    assert_eq!(writes(&fixture), 3, "created, refused, retried");
    let stored = secret(&fixture);
    assert_eq!(stored.data.as_ref().unwrap().len(), 3);
    assert_eq!(
        annotation(&stored, "backup/taken").as_deref(),
        Some("yes"),
        "the other writer's change is kept"
    );

    // When the first key is due for removal, an operator's `warrant keys rotate` gets there
    // first with a new key X: A must not write over it with a set that lacks X.
    // The first key retired at T0 + 7 days + 1 s and is removed a day and a minute later.
    let due = T0 + 8 * DAY + 120;
    let other = store(&fixture, "warrant keys rotate");
    let read = other.load().await.unwrap().unwrap();
    let with_x = read
        .keys
        .rotate_early(&policy(), at(due), SigningKey::generate)
        .unwrap()
        .unwrap();
    let x = with_x.keys().last().unwrap().kid().to_owned();
    assert!(!rotated.contains(&x));
    let operators = kids(&with_x);
    fixture.before_next_write("secrets", move |cluster| {
        let encoded = crate::encode(&with_x, 99).unwrap();
        let mut secret = cluster.get::<Secret>(NS, NAME).unwrap();
        secret.data = Some(
            encoded
                .files()
                .map(|(name, bytes)| (name.to_owned(), ByteString(bytes.to_vec())))
                .collect(),
        );
        cluster.update(&secret).unwrap();
    });
    clock.set(at(due));
    touch(&fixture, "removal due");
    let published = a.next("A publishes the keys after the race").await;
    assert!(published.contains(&x), "{published:?}");
    let stored = other.load().await.unwrap().unwrap();
    assert!(kids(&stored.keys).contains(&x));
    assert_eq!(
        kids(&stored.keys),
        operators,
        "A re-read the operator's set and found nothing left to do"
    );
    assert!(!kids(&stored.keys).contains(&first[0]));
}

#[tokio::test]
async fn losing_the_lease_stops_rotation_and_the_new_leader_takes_over() {
    let fixture = fixture().await;
    let clock = test_clock();
    let handover = |identity: &str| LeaseConfig {
        duration_seconds: HANDOVER_LEASE_SECONDS,
        ..lease(identity)
    };
    let mut a = Replica::start_with(&fixture, handover("replica-a"), &clock).await;
    let mut b = Replica::start_with(&fixture, handover("replica-b"), &clock).await;
    let first = a.next("A publishes").await;
    b.next("B publishes").await;

    // B takes the Lease over, as when A stopped renewing it in time (paused, cut off).
    let mut lease = fixture
        .get::<Lease>(NS, "warrant-keys-leader")
        .expect("the Lease exists");
    assert_eq!(
        lease.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some("replica-a")
    );
    lease.spec.as_mut().unwrap().holder_identity = Some("replica-b".into());
    fixture.update(&lease).unwrap();
    until_leading("A learns it lost the Lease", &a.leadership, false).await;
    until_leading("B learns it holds the Lease", &b.leadership, true).await;
    assert!(a.metrics().contains("\nwarrant_keys_leader 0\n"));

    // The next rotation is B's; A only follows.
    clock.set(at(T0 + 6 * DAY + 1));
    touch(&fixture, "six days");
    let rotated = b.next("B rotates").await;
    assert_eq!(rotated.len(), 2);
    assert_eq!(rotated[0], first[0]);
    a.until_publishes("A follows B's rotation", &rotated).await;
    assert_eq!(
        annotation(&secret(&fixture), WRITTEN_BY_ANNOTATION).as_deref(),
        Some("replica-b")
    );
    assert_eq!(writes(&fixture), 2, "A's create, then B's rotation");

    // B stops and releases the Lease: A leads again at once, not after the Lease expires.
    let Replica { leadership, .. } = b;
    leadership.release().await;
    until_leading("A takes the released Lease", &a.leadership, true).await;
}

#[tokio::test]
async fn a_replica_that_lost_the_api_server_keeps_its_keys_and_says_so() {
    let mut fixture = fixture().await;
    let clock = test_clock();
    let mut a = Replica::start(&fixture, "replica-a", &clock).await;
    let mut b = Replica::start(&fixture, "replica-b", &clock).await;
    a.next("A publishes").await;
    let keys = b.next("B publishes").await;
    assert_eq!(
        b.health.borrow().summary(at(T0 + 42)),
        format!("ok, last read at {} (42 s ago)", at(T0))
    );

    fixture.stop().await;
    let health = within(
        "B notices the outage",
        b.health.wait_for(|h| h.failing_since.is_some()),
    )
    .await
    .unwrap()
    .clone();
    let summary = health.summary(at(T0 + 7));
    assert!(
        summary.starts_with(&format!(
            "stale since {}: Kubernetes Secret warrant/warrant-keys: unavailable: ",
            at(T0)
        )),
        "{summary}"
    );
    assert!(summary.ends_with(&format!(
        "serving the keys last read at {} (7 s ago)",
        at(T0)
    )));
    let text = b.metrics();
    assert!(
        text.contains(&format!(
            "warrant_keys_store_stale_since_timestamp_seconds {T0}"
        )) && text.contains(r#"warrant_keys_store_errors_total{operation="load"}"#),
        "{text}"
    );
    // The keys in force did not change (only their signing deadline, now set: see
    // the copy module's tests).
    while let Ok(published) = b.published.try_recv() {
        assert_eq!(published, keys, "the keys in force did not change");
    }

    // The API server comes back: the watch resumes, the store answers, the report clears.
    clock.set(at(T0 + 60));
    fixture.restart().await.unwrap();
    within(
        "B sees the store again",
        b.health.wait_for(|h| h.failing_since.is_none()),
    )
    .await
    .unwrap();
    assert_eq!(b.health.borrow().last_success, Some(at(T0 + 60)));
    assert!(
        b.metrics()
            .contains("warrant_keys_store_stale_since_timestamp_seconds 0")
    );
    while let Ok(published) = b.published.try_recv() {
        assert_eq!(published, keys);
    }
}

#[test]
fn the_renewal_comes_a_third_of_the_lease_before_it_expires() {
    let config = |duration_seconds| LeaseConfig {
        duration_seconds,
        ..lease("a")
    };
    assert_eq!(config(15).renew_before_seconds(), 5);
    assert_eq!(config(2).renew_before_seconds(), 1);
    assert_eq!(config(3).renew_before_seconds(), 1);
    assert_eq!(config(60).renew_before_seconds(), 20);
    assert_eq!(config(HANDOVER_LEASE_SECONDS).renew_before_seconds(), 3);
}

#[tokio::test]
async fn a_lease_too_short_is_refused_before_anything_runs() {
    let fixture = fixture().await;
    let short = LeaseConfig {
        duration_seconds: 1,
        ..lease("a")
    };
    let error = Leadership::start(client(&fixture), &short, KeyMetrics::new())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the key Lease duration must be at least 2s, not 1s"
    );
}

/// Dropping a store's change feed stops its task: the Secret watch closes.
#[tokio::test]
async fn dropping_the_change_feed_closes_its_watch() {
    let fixture = fixture().await;
    let feed = store(&fixture, "a").watch().unwrap();
    within(
        "the Secret watch is open",
        fixture.until(|c| c.watchers("secrets") == 1),
    )
    .await;
    drop(feed);
    within(
        "the Secret watch is closed",
        fixture.until(|c| c.watchers("secrets") == 0),
    )
    .await;
}

/// Dropping a Leadership stops its task: the sender of `leading` goes with it, and the Lease is
/// no longer held for this replica.
#[tokio::test]
async fn dropping_the_leadership_stops_its_task() {
    let fixture = fixture().await;
    let leadership = Leadership::start(client(&fixture), &lease("a"), KeyMetrics::new())
        .await
        .unwrap();
    until_leading("a leads", &leadership, true).await;
    let mut leading = leadership.leading();
    drop(leadership);
    within("the leadership task ends", async {
        while leading.changed().await.is_ok() {}
    })
    .await;
}
