//! The key manager driven by Tokio's paused clock: it wakes at each scheduled change, to the
//! millisecond, without a test ever sleeping.

use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio::sync::mpsc;
use warrant_clock::Clock;
use warrant_token::{KeyType, SigningKey};

use super::*;
use crate::store::MemoryStore;
use crate::test_support::*;

/// What a published key set says, in short: (now, signing kid now or `-` if none signs,
/// published kids).
type Seen = (i64, String, Vec<String>);

fn spawn(
    manager: KeyManager<MemoryStore>,
    clock: Clock,
) -> (KeyManagerTask, mpsc::UnboundedReceiver<Seen>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let inner = clock.clone();
    let task = manager
        .spawn(clock, move |keys: KeySet| {
            let now = inner.now();
            sender
                .send((
                    now.as_second(),
                    keys.signing_at(now)
                        .map_or_else(|_| "-".to_owned(), |k| k.kid().to_owned()),
                    keys.verifying()
                        .iter()
                        .map(|k| k.kid().to_owned())
                        .collect(),
                ))
                .unwrap();
        })
        .unwrap();
    (task, receiver)
}

fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

/// Dropping the running manager stops its task: the publish callback (and its sender) goes.
#[tokio::test(start_paused = true)]
async fn dropping_the_manager_task_stops_it() {
    let clock = clock();
    let manager = KeyManager::open(
        MemoryStore::new(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let (task, mut seen) = spawn(manager, clock);
    seen.recv().await.unwrap();
    drop(task);
    // Drain what was published before the drop; then the channel must close. A task still
    // running would keep it open and the paused clock would run into the timeout.
    let closed = tokio::time::timeout(Duration::from_secs(365 * 86_400), async {
        while seen.recv().await.is_some() {}
    })
    .await;
    assert!(closed.is_ok(), "the manager task outlived its owner");
}

#[tokio::test(start_paused = true)]
async fn rotates_on_schedule_and_publishes_each_change() {
    let store = MemoryStore::new();
    let metrics = KeyMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let clock = clock();
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        metrics,
        clock.now(),
    )
    .await
    .unwrap();
    let a = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock);

    // At once: the first key signs.
    assert_eq!(seen.recv().await.unwrap(), (T0, a.clone(), vec![a.clone()]));
    // Six days on, the successor is published a day ahead.
    let (now, signing, published) = seen.recv().await.unwrap();
    assert_eq!((now, signing.as_str()), (T0 + 6 * DAY, a.as_str()));
    assert_eq!(published.len(), 2);
    let b = published[1].clone();
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys().len(), 2);
    // It signs from the seventh day on, and the first key verifies for a day and a minute more.
    assert_eq!(
        seen.recv().await.unwrap(),
        (T0 + 7 * DAY, b.clone(), vec![b.clone(), a.clone()])
    );
    assert_eq!(
        seen.recv().await.unwrap(),
        (T0 + 8 * DAY + 60, b.clone(), vec![b.clone()])
    );
    let text = metrics_text(&registry);
    assert!(
        text.contains(r#"warrant_keys_held{state="active"} 1"#)
            && text.contains(r#"warrant_keys_held{state="retired"} 0"#)
            && text.contains(&format!(
                "warrant_keys_last_rotation_timestamp_seconds {}",
                T0 + 7 * DAY
            )),
        "{text}"
    );
    // And on, a week at a time.
    let (now, signing, published) = seen.recv().await.unwrap();
    assert_eq!((now, signing), (T0 + 13 * DAY, b.clone()));
    assert_eq!(published.len(), 2);
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys().len(), 2, "removed keys leave the store");
}

#[tokio::test(start_paused = true)]
async fn replicas_that_do_not_write_follow_the_one_that_does() {
    let store = MemoryStore::new();
    let clock = clock();
    let (leader_tx, leader_rx) = watch::channel(false);
    let follower = KeyManager::open(
        store.clone(),
        policy(),
        Writer::WhileLeader(leader_rx),
        KeyMetrics::new(),
        clock.now(),
    )
    .await;
    // Nobody has created keys yet, and this replica may not.
    assert!(
        follower
            .unwrap_err()
            .to_string()
            .starts_with("memory store holds no active key yet")
    );

    let writer = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let a = writer.keys().keys()[0].kid().to_owned();
    let (leader_tx2, leader_rx2) = watch::channel(false);
    drop(leader_tx);
    let follower = KeyManager::open(
        store.clone(),
        policy(),
        Writer::WhileLeader(leader_rx2),
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let (writer_task, mut writer_seen) = spawn(writer, clock.clone());
    let (_follower_task, mut follower_seen) = spawn(follower, clock.clone());
    assert_eq!(follower_seen.recv().await.unwrap().1, a);
    writer_seen.recv().await.unwrap();

    // The follower learns of the successor from the store, when the writer creates it.
    let (now, _, published) = follower_seen.recv().await.unwrap();
    assert_eq!(now, T0 + 6 * DAY);
    assert_eq!(published.len(), 2);
    let b = published[1].clone();
    // And switches to it on time by itself.
    assert_eq!(follower_seen.recv().await.unwrap().0, T0 + 7 * DAY);

    // The writer goes away; the follower, once it leads, rotates in its place.
    drop(writer_task);
    leader_tx2.send(true).unwrap();
    let mut last = follower_seen.recv().await.unwrap();
    while last.2.len() < 2 || last.2[1] == a {
        last = follower_seen.recv().await.unwrap();
    }
    assert_eq!(last.0, T0 + 13 * DAY);
    assert_eq!(last.1, b);
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys().len(), 2);
    assert_eq!(stored.keys.keys()[0].kid(), b);
}

#[tokio::test(start_paused = true)]
async fn an_outage_keeps_the_keys_in_force_and_never_activates_early() {
    let store = MemoryStore::new();
    let metrics = KeyMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let clock = clock();
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        metrics,
        clock.now(),
    )
    .await
    .unwrap();
    let a = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock.clone());
    seen.recv().await.unwrap();

    // The store is down when the successor is due, and for two days after.
    store.set_unavailable(true);
    tokio::time::sleep(Duration::from_secs((8 * DAY) as u64)).await;
    assert!(
        seen.try_recv().is_err(),
        "nothing changed while the store was down"
    );
    // Its reads fail, and nothing is written (nor generated) without a read that succeeded.
    let text = metrics_text(&registry);
    assert!(
        text.contains(r#"warrant_keys_store_errors_total{operation="load"}"#)
            && !text.contains(r#"warrant_keys_store_errors_total{operation="save"}"#),
        "{text}"
    );
    store.set_unavailable(false);

    // Within a retry, the successor is created; the first key signs until it is safe.
    let (now, signing, published) = seen.recv().await.unwrap();
    assert!((T0 + 8 * DAY..=T0 + 8 * DAY + 10).contains(&now), "{now}");
    assert_eq!(signing, a);
    assert_eq!(published.len(), 2);
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys()[1].activate_at(), at(now + DAY));
    let (then, signing, _) = seen.recv().await.unwrap();
    assert_eq!(then, now + DAY);
    assert_eq!(signing, published[1]);
}

#[tokio::test(start_paused = true)]
async fn a_store_that_loses_its_keys_gets_them_back() {
    let store = MemoryStore::new();
    let clock = clock();
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let a = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock);
    seen.recv().await.unwrap();

    // Someone deletes the stored keys: the manager writes back the ones it serves, rather
    // than starting over with a new key nobody has seen.
    let mut feed = store.watch().unwrap();
    store.clear();
    feed.changed().await;
    feed.changed().await;
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys().len(), 1);
    assert_eq!(stored.keys.keys()[0].kid(), a);
    assert!(seen.try_recv().is_err(), "the keys in force never changed");
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_loses_leadership_stops_rotating_until_it_leads_again() {
    let store = MemoryStore::new();
    let clock = clock();
    let (leader, leading) = watch::channel(true);
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::WhileLeader(leading),
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let a = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock);
    seen.recv().await.unwrap();

    // It loses the Lease before the successor is due: nothing is written while it follows,
    // and the first key goes on signing, late but safe.
    leader.send(false).unwrap();
    tokio::time::sleep(Duration::from_secs((8 * DAY) as u64)).await;
    assert!(seen.try_recv().is_err());
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys().len(), 1);

    // Leading again, it catches up at once: a successor, a full publish-ahead from now.
    leader.send(true).unwrap();
    let (now, signing, published) = seen.recv().await.unwrap();
    assert_eq!(now, T0 + 8 * DAY);
    assert_eq!(signing, a);
    assert_eq!(published.len(), 2);
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys()[1].activate_at(), at(T0 + 9 * DAY));
}

/// With a holder (an HSM), keys are generated in it and the store records no private key; a
/// key generated for a write that failed is destroyed at once, not left in the holder. (The
/// rotation itself, retirement and disposal included, is the scenario every holder runs:
/// warrant-testkit's `rotation`, run by tests/rotation.rs.)
#[tokio::test(start_paused = true)]
async fn held_keys_are_generated_in_the_holder_and_destroyed_when_their_write_fails() {
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new().with_holder(holder.clone());
    let clock = clock();
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let first = manager.keys().keys()[0].kid().to_owned();
    assert_eq!(holder.held(), std::slice::from_ref(&first));
    let files = store.files().unwrap();
    assert!(
        files
            .values()
            .all(|bytes| !String::from_utf8_lossy(bytes).contains("PRIVATE KEY")),
        "the store holds a private key"
    );
    let (_task, mut seen) = spawn(manager, clock.clone());
    seen.recv().await.unwrap();

    // A write that fails: the key generated for it is destroyed, not left in the HSM.
    store.set_writes_failing(true);
    let before = holder.held();
    tokio::time::sleep(Duration::from_secs(7 * 86_400)).await;
    let destroyed = holder.destroyed(crate::Disposal::Forget);
    assert!(!destroyed.is_empty(), "{destroyed:?}");
    assert_eq!(
        holder.held(),
        before,
        "a key generated for a failed write is still held"
    );
}

/// The activation gate in the running manager: while the publish targets do not list the
/// successor, the key in force signs on (the store is rewritten with the later activation, so
/// replicas follow); once they list it, it signs at the held time.
#[tokio::test(start_paused = true)]
async fn the_gate_keeps_an_unlisted_successor_from_signing() {
    let store = MemoryStore::new();
    let metrics = KeyMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let clock = clock();
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        metrics,
        clock.now(),
    )
    .await
    .unwrap();
    let a_key = manager.keys().keys()[0].key().verifying_key().clone();
    let a = a_key.kid().to_owned();
    let (listed, gate) = watch::channel(crate::ListedKeys::of([&a_key]));
    let (_task, mut seen) = spawn(manager.with_gate(gate), clock.clone());
    let lead = policy().gate_lead_seconds();

    assert_eq!(seen.recv().await.unwrap(), (T0, a.clone(), vec![a.clone()]));
    let (now, _, published) = seen.recv().await.unwrap();
    assert_eq!(now, T0 + 6 * DAY);
    let b = published[1].clone();
    // The lead begins and the targets do not list it: held, and the store says so.
    let (now, signing, _) = seen.recv().await.unwrap();
    assert_eq!((now, signing.as_str()), (T0 + 7 * DAY - lead, a.as_str()));
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys()[1].activate_at(), at(T0 + 7 * DAY + lead));
    // Its due time passes with the first key signing; held again a lead later.
    let (now, signing, _) = seen.recv().await.unwrap();
    assert_eq!((now, signing.as_str()), (T0 + 7 * DAY, a.as_str()));
    assert_eq!(
        store.load().await.unwrap().unwrap().keys.keys()[1].activate_at(),
        at(T0 + 7 * DAY + 2 * lead)
    );
    // The targets catch up: it signs at the held time, not before.
    tokio::time::sleep(Duration::from_secs(u64::try_from(lead / 2).unwrap())).await;
    let stored = store.load().await.unwrap().unwrap().keys;
    let b_key = stored.keys()[1].key().verifying_key();
    assert_eq!(b_key.kid(), b);
    listed.send_replace(crate::ListedKeys::of([&a_key, b_key]));
    let (now, signing, _) = seen.recv().await.unwrap();
    assert_eq!((now, signing), (T0 + 7 * DAY + 2 * lead, b.clone()));
    let text = metrics_text(&registry);
    assert!(
        text.contains("warrant_keys_activations_held_total 2"),
        "{text}"
    );
}

/// Opens a writing manager on a store held by a fresh fake holder, with registered metrics.
async fn held_manager(
    clock: &Clock,
) -> (
    KeyManager<MemoryStore>,
    MemoryStore,
    Arc<FakeHolder>,
    Registry,
) {
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new().with_holder(holder.clone());
    let metrics = KeyMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        metrics,
        clock.now(),
    )
    .await
    .unwrap();
    (manager, store, holder, registry)
}

/// A manager of pod certificate CA keys makes every key for that purpose in the holder (the
/// first at opening, its successor at rotation), and the store records the purpose: the same
/// store read for token keys is refused, and the holder vouches for none of its keys as token
/// keys.
#[tokio::test(start_paused = true)]
async fn a_ca_manager_makes_its_keys_for_the_ca_and_its_store_serves_nothing_else() {
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new()
        .with_holder(holder.clone())
        .for_purpose(crate::KeyPurpose::PodCertificateCa);
    let clock = clock();
    let manager = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    assert_eq!(
        manager.keys().purpose(),
        crate::KeyPurpose::PodCertificateCa
    );
    let (_task, mut seen) = spawn(manager, clock.clone());
    seen.recv().await.unwrap();
    tokio::time::sleep(Duration::from_secs(6 * 86_400)).await;
    seen.recv().await.unwrap();
    let made = holder.proofs.lock().unwrap().clone();
    assert_eq!(made.len(), 2, "the first key and its successor: {made:?}");
    assert!(
        made.values()
            .all(|p| *p == crate::KeyPurpose::PodCertificateCa),
        "{made:?}"
    );

    let as_tokens = store.clone().for_purpose(crate::KeyPurpose::Tokens);
    let error = as_tokens.load().await.unwrap_err();
    assert!(
        matches!(error, StoreError::OtherPurpose { .. }),
        "{error:?}"
    );
    // Whoever rewrites the index to say "tokens" gets keys no holder vouches for as such.
    let mut files = store.files().unwrap();
    let index = String::from_utf8(files[crate::INDEX_FILE].clone()).unwrap();
    let stripped = index.replace(",\n  \"purpose\": \"pod-certificate-ca\"", "");
    assert_ne!(stripped, index, "{index}");
    files.insert(crate::INDEX_FILE.into(), stripped.into_bytes());
    let forged = MemoryStore::new().with_holder(holder.clone());
    forged.restore(files);
    let error = forged.load().await.unwrap_err();
    assert!(matches!(error, StoreError::NotVouched { .. }), "{error:?}");
}

/// A store writer who appends an entry the holder does not vouch for (their own public key,
/// "retired", "held" in the holder) gets nothing published: the running manager refuses the
/// store and keeps the keys in force, saying which entry; a new manager refuses to open it.
#[tokio::test(start_paused = true)]
async fn a_store_entry_the_holder_does_not_vouch_for_is_refused_and_the_keys_stay() {
    let clock = clock();
    let (manager, store, holder, _registry) = held_manager(&clock).await;
    let health = manager.health();
    let (_task, mut seen) = spawn(manager, clock.clone());
    let (_, signing, published) = seen.recv().await.unwrap();
    assert_eq!(published, std::slice::from_ref(&signing));

    let attacker = SigningKey::generate(KeyType::P256).unwrap();
    let forged = crate::KeyHolder::open(
        holder.as_ref(),
        &format!("fake:{}", attacker.kid()),
        attacker.verifying_key().clone(),
    )
    .unwrap();
    let stored = store.load().await.unwrap().unwrap();
    let mut keys = stored.keys.keys().to_vec();
    keys.push(crate::ManagedKey::new(
        forged,
        at(T0 - 30 * DAY),
        at(T0 - 30 * DAY),
        10 * 365 * DAY,
    ));
    store
        .save(&ManagedKeySet::new(keys).unwrap(), Some(&stored.version))
        .await
        .unwrap();

    // The manager re-reads the store, refuses it, and publishes nothing new.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(seen.try_recv().is_err(), "a key set was published");
    let said = health.borrow().summary(clock.now());
    assert!(
        said.contains(&format!(
            "key {} is not vouched for by fake holder",
            attacker.kid()
        )),
        "{said}"
    );
    let opened = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await;
    let Err(ManagerError::Store(StoreError::NotVouched { kid, .. })) = opened else {
        panic!("{opened:?}")
    };
    assert_eq!(kid, attacker.kid());
    assert!(holder.destroyed.lock().unwrap().is_empty());
}

/// A revocation recorded while the holder is out of reach takes the key out at once (the
/// manager needs the holder only for keys it has not vouched for); the writer destroys the key
/// when the holder is back, retrying until it is gone, and counts it.
#[tokio::test(start_paused = true)]
async fn a_revoked_key_is_destroyed_by_the_writer_once_its_holder_is_back() {
    let clock = clock();
    let (manager, store, holder, registry) = held_manager(&clock).await;
    let first = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock.clone());
    seen.recv().await.unwrap();
    // Past the successor's creation: the first key signs, the next is published.
    tokio::time::sleep(Duration::from_secs((6 * DAY + HOUR) as u64)).await;
    while seen.try_recv().is_ok() {}
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(stored.keys.keys().len(), 2);

    // `warrant keys revoke` with the holder unreachable: the next key is brought forward, so no
    // key needs making.
    holder.set_unreachable(true);
    let revoked = stored
        .keys
        .revoke(&first, &policy(), clock.now(), |_| {
            Err(warrant_token::KeyError::Crypto("no holder"))
        })
        .unwrap();
    assert_eq!(
        revoked.keys.revocations()[0].held_in.as_deref(),
        Some(format!("fake:{first}").as_str())
    );
    store
        .save(&revoked.keys, Some(&stored.version))
        .await
        .unwrap();
    let (_, signing, published) = seen.recv().await.unwrap();
    assert_ne!(signing, first);
    assert!(!published.contains(&first), "{published:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(holder.held().contains(&first));
    let text = metrics_text(&registry);
    assert!(
        text.contains("warrant_keys_holder_disposals_pending 1"),
        "{text}"
    );
    assert!(
        text.contains(r#"warrant_keys_holder_disposals_total{result="failed"}"#),
        "{text}"
    );

    // Back: destroyed within seconds, all of it (no store can list it again).
    holder.set_unreachable(false);
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(
        holder.destroyed(crate::Disposal::Forget),
        std::slice::from_ref(&first)
    );
    assert!(!holder.held().contains(&first));
    assert!(!holder.proofs.lock().unwrap().contains_key(&first));
    let text = metrics_text(&registry);
    assert!(
        text.contains("warrant_keys_holder_disposals_pending 0"),
        "{text}"
    );
    assert!(
        text.contains(r#"warrant_keys_holder_disposals_total{result="destroyed"} 1"#),
        "{text}"
    );
}

/// A revocation record that names another key's locator (a store writer's forgery) makes the
/// writer destroy nothing: the holder finds the object is not the recorded key.
#[tokio::test(start_paused = true)]
async fn a_record_naming_another_keys_object_destroys_nothing() {
    let clock = clock();
    let (manager, store, holder, registry) = held_manager(&clock).await;
    let active = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock.clone());
    seen.recv().await.unwrap();
    let stored = store.load().await.unwrap().unwrap();
    let stranger = SigningKey::generate(KeyType::P256).unwrap();
    let forged = stored
        .keys
        .clone()
        .with_revocations(vec![crate::Revocation {
            kid: stranger.kid().to_owned(),
            revoked_at: at(T0),
            forget_at: at(T0 + DAY),
            held_in: Some(format!("fake:{active}")),
        }])
        .unwrap();
    store.save(&forged, Some(&stored.version)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(holder.held().contains(&active));
    assert!(holder.destroyed.lock().unwrap().is_empty());
    let text = metrics_text(&registry);
    assert!(
        text.contains(r#"warrant_keys_holder_disposals_total{result="not_the_key"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("warrant_keys_holder_disposals_pending 0"),
        "{text}"
    );
}

/// `warrant keys revoke` of the signing key while its holder is out of reach and no successor is
/// published: recorded, and the key is out of what the manager publishes at once; nothing signs
/// (the key set says why). The writer makes a successor as soon as the holder answers, which
/// signs at once, and destroys the revoked key.
#[tokio::test(start_paused = true)]
async fn the_signing_key_revoked_with_its_holder_away_signs_nothing_until_the_holder_is_back() {
    let clock = clock();
    let (manager, store, holder, _registry) = held_manager(&clock).await;
    let leaked = manager.keys().keys()[0].kid().to_owned();
    let (_task, mut seen) = spawn(manager, clock.clone());
    assert_eq!(seen.recv().await.unwrap().1, leaked);
    tokio::time::sleep(Duration::from_secs(HOUR as u64)).await;

    holder.set_unreachable(true);
    let stored = store.load().await.unwrap().unwrap();
    let revoked = stored
        .keys
        .revoke(&leaked, &policy(), clock.now(), |t| holder.generate(t))
        .unwrap();
    assert!(matches!(
        revoked.replaced_by,
        Some(crate::Replacement::Pending { .. })
    ));
    store
        .save(&revoked.keys, Some(&stored.version))
        .await
        .unwrap();
    let (_, signing, published) = seen.recv().await.unwrap();
    assert_eq!(signing, "-", "nothing signs");
    assert!(published.is_empty(), "{published:?}");

    // Still nothing while the holder stays away, however long: the writer keeps trying.
    tokio::time::sleep(Duration::from_secs(HOUR as u64)).await;
    while let Ok((_, signing, published)) = seen.try_recv() {
        assert_eq!(signing, "-");
        assert!(!published.contains(&leaked));
    }
    assert!(holder.held().contains(&leaked));

    // Back: a successor signs within seconds, and the revoked key is destroyed.
    holder.set_unreachable(false);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (_, signing, published) = std::iter::from_fn(|| seen.try_recv().ok())
        .last()
        .expect("the successor is published");
    assert_ne!(signing, "-");
    assert_ne!(signing, leaked);
    assert_eq!(published, std::slice::from_ref(&signing));
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(kids(&stored.keys), [signing]);
    assert_eq!(stored.keys.revocations()[0].kid, leaked);
    assert_eq!(
        holder.destroyed(crate::Disposal::Forget),
        std::slice::from_ref(&leaked)
    );
}

/// A held key's private half is destroyed once it has stopped signing (and the grace has
/// passed); a key set kept whole (a CA's, whose retired keys sign their roots at each start)
/// keeps it until the key leaves the set, then destroys all of it.
#[tokio::test(start_paused = true)]
async fn retired_keys_kept_whole_are_destroyed_only_when_they_leave_the_set() {
    for whole in [false, true] {
        let clock = clock();
        let (manager, _store, holder, _registry) = held_manager(&clock).await;
        let manager = if whole {
            manager.keeping_retired_keys_whole()
        } else {
            manager
        };
        let first = manager.keys().keys()[0].kid().to_owned();
        let (_task, _seen) = spawn(manager, clock.clone());

        // Retired at the successor's activation, a week in; past the grace.
        tokio::time::sleep(Duration::from_secs(
            u64::try_from(7 * DAY + 2 * crate::disposal::RETIRE_DISPOSAL_GRACE_SECONDS).unwrap(),
        ))
        .await;
        let retired = holder.destroyed(crate::Disposal::Retire);
        if whole {
            assert!(retired.is_empty(), "{retired:?}");
            assert!(holder.held().contains(&first), "{:?}", holder.held());
        } else {
            assert_eq!(retired, std::slice::from_ref(&first));
            assert!(!holder.held().contains(&first));
        }

        // Removed once its last token has expired (a day later): gone whole.
        tokio::time::sleep(Duration::from_secs(u64::try_from(DAY + HOUR).unwrap())).await;
        let forgotten = holder.destroyed(crate::Disposal::Forget);
        assert!(forgotten.contains(&first), "whole={whole}: {forgotten:?}");
        assert!(!holder.held().contains(&first));
    }
}
