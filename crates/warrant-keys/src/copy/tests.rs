//! The local copy on a real filesystem, and a replica that follows a shared store with it,
//! driven by Tokio's paused clock: it starts from the copy while the store is down, writes
//! nothing until the store answers, then serves the store's keys; it hears of a new key without
//! change notifications; and, cut off, it stops signing when the writer may have retired its key.

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use warrant_clock::Clock;
use warrant_token::SigningKey;

use super::*;
use crate::manager::{KeyManager, Writer};
use crate::metrics::KeyMetrics;
use crate::store::MemoryStore;
use crate::test_support::*;
use crate::{INDEX_FILE, KeySet, key_file_name};

/// The index's `generation`: how many times the copy was written.
fn generation(dir: &Path) -> u64 {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(INDEX_FILE)).unwrap()).unwrap();
    index["generation"].as_u64().unwrap()
}

fn first_keys() -> ManagedKeySet {
    ManagedKeySet::default()
        .rotate(&policy(), at(T0), SigningKey::generate)
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn the_copy_is_a_private_key_directory_written_when_the_store_changes() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("copy");
    let store = MemoryStore::new();
    let copy = Arc::new(LocalCopy::new(&dir, None));
    assert!(copy.read().await.unwrap().is_none());
    assert_eq!(copy.state().borrow().summary(at(T0)), "none written yet");
    let copied = CopiedStore::new(store.clone(), copy.clone());

    // The writer's first keys: copied at once, as a private key directory.
    let first = first_keys();
    copied.save(&first, None).await.unwrap();
    assert_eq!(generation(&dir), 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(key_file_name(first.keys()[0].kid()))), 0o600);
    }
    assert!(copy.state().borrow().in_step);

    // Reads that find the same keys write nothing.
    for _ in 0..3 {
        copied.load().await.unwrap().unwrap();
    }
    assert_eq!(generation(&dir), 1);

    // Another writer rotates: the next read brings the copy up to date.
    let rotated = first
        .rotate(&policy(), at(T0 + 6 * DAY), SigningKey::generate)
        .unwrap()
        .unwrap();
    let version = store.load().await.unwrap().unwrap().version;
    store.save(&rotated, Some(&version)).await.unwrap();
    copied.load().await.unwrap().unwrap();
    assert_eq!(generation(&dir), 2);

    // What a restarted node reads back: the store's keys, and when they were written.
    let again = LocalCopy::new(&dir, None);
    let seed = again.read().await.unwrap().unwrap();
    assert!(seed.keys.same_records(&rotated));
    assert_eq!(
        Some(seed.written_at),
        DirStore::new(&dir).written_at().unwrap()
    );
    let later = seed.written_at + jiff::SignedDuration::from_secs(90);
    let summary = again.state().borrow().summary(later);
    assert_eq!(
        summary,
        format!(
            "written at {} (90 s ago); serving its keys until the key store answers",
            seed.written_at
        )
    );
}

/// With keys held in an HSM, the copy (like the store) holds public keys and locators only.
#[tokio::test]
async fn a_copy_of_held_keys_holds_no_private_key() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("copy");
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new().with_holder(holder.clone());
    let copy = Arc::new(LocalCopy::new(&dir, Some(holder.clone())));
    let copied = CopiedStore::new(store, copy.clone());
    let keys = ManagedKeySet::default()
        .rotate(&policy(), at(T0), |t| holder.generate(t))
        .unwrap()
        .unwrap();
    copied.save(&keys, None).await.unwrap();
    let kid = keys.keys()[0].kid();
    let key_file = std::fs::read_to_string(dir.join(key_file_name(kid))).unwrap();
    assert!(
        key_file.starts_with("-----BEGIN PUBLIC KEY-----"),
        "{key_file}"
    );
    let index = std::fs::read_to_string(dir.join(INDEX_FILE)).unwrap();
    assert!(
        index.contains(&format!("\"heldIn\": \"fake:{kid}\"")),
        "{index}"
    );
    for entry in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains("PRIVATE KEY"));
    }
    // Read back through the holder, the keys are the holder's.
    let seed = copy.read().await.unwrap().unwrap();
    assert!(seed.keys.keys()[0].key().remote_key().is_some());
}

/// A copy is read through the store's holder, which vouches for every key it lists: a copy
/// someone else wrote, listing a key the holder does not hold for warrant, is refused by name
/// (never served), and the store's keys replace it at the next read.
#[tokio::test]
async fn a_copy_listing_a_key_its_holder_does_not_vouch_for_is_refused() {
    use crate::KeyHolder as _;
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("copy");
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new().with_holder(holder.clone());
    let genuine = ManagedKeySet::default()
        .rotate(&policy(), at(T0), |t| holder.generate(t))
        .unwrap()
        .unwrap();
    store.save(&genuine, None).await.unwrap();

    // Someone who can write the directory lists their own key as held in the token.
    let attacker = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let forged_key = holder
        .open(
            &format!("fake:{}", attacker.kid()),
            attacker.verifying_key().clone(),
        )
        .unwrap();
    let forged = ManagedKeySet::default()
        .rotate(&policy(), at(T0), |_| Ok(forged_key.clone()))
        .unwrap()
        .unwrap();
    DirStore::new(&dir)
        .with_holder(holder.clone())
        .replace(&forged, 1)
        .await
        .unwrap();

    let copy = Arc::new(LocalCopy::new(&dir, Some(holder.clone())));
    let err = copy.read().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::NotVouched { kid, .. } if kid == attacker.kid()),
        "{err:?}"
    );
    assert_eq!(copy.state().borrow().written_at, None);

    // The store answers: its keys replace the forged copy, which then reads back.
    let copied = CopiedStore::new(store, copy.clone());
    copied.load().await.unwrap().unwrap();
    let seed = copy.read().await.unwrap().unwrap();
    assert_eq!(kids(&seed.keys), kids(&genuine));
}

/// A copy anyone may write to is refused, as a key directory is; a refresh that fails is
/// reported, and the copy is written again once it can be.
#[cfg(unix)]
#[tokio::test]
async fn a_copy_others_may_write_to_is_refused_and_a_failed_refresh_is_reported() {
    use std::os::unix::fs::PermissionsExt as _;
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("copy");
    let copy = LocalCopy::new(&dir, None);
    let keys = first_keys();
    copy.refresh(&keys, 1, "memory store").await;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let refused = copy.read().await.unwrap_err();
    assert!(matches!(refused, StoreError::Insecure { .. }), "{refused}");
    let rotated = keys
        .rotate(&policy(), at(T0 + 6 * DAY), SigningKey::generate)
        .unwrap()
        .unwrap();
    copy.refresh(&rotated, 2, "memory store").await;
    let summary = copy.state().borrow().summary(at(T0));
    assert!(summary.contains("; cannot be refreshed: "), "{summary}");
    assert!(
        summary.contains("writable by its group or by others"),
        "{summary}"
    );

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    copy.refresh(&rotated, 2, "memory store").await;
    assert!(copy.state().borrow().last_error.is_none());
    assert!(
        copy.read()
            .await
            .unwrap()
            .unwrap()
            .keys
            .same_records(&rotated)
    );
}

/// Runs `manager`, sending each key set it publishes with the time.
fn spawn<S: KeyStore>(
    manager: KeyManager<S>,
    clock: &Clock,
) -> (
    crate::KeyManagerTask,
    mpsc::UnboundedReceiver<(i64, KeySet)>,
) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let inner = clock.clone();
    let task = manager
        .spawn(clock.clone(), move |keys: KeySet| {
            sender.send((inner.now().as_second(), keys)).unwrap();
        })
        .unwrap();
    (task, receiver)
}

fn published(keys: &KeySet) -> Vec<String> {
    keys.verifying()
        .iter()
        .map(|k| k.kid().to_owned())
        .collect()
}

/// A replica whose store cannot be reached starts from its copy, even believing it holds the
/// Lease: it serves the copy's keys and generates nothing when a successor falls due; its keys
/// sign until the writer could have retired the last of them. Once the store answers, its keys
/// (with the successor a writer created meanwhile) replace the copy's, in force and on disk.
#[tokio::test(start_paused = true)]
async fn a_replica_starts_from_its_copy_writes_nothing_and_the_store_wins() {
    let temp = tempfile::tempdir().unwrap();
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new().with_holder(holder.clone());
    let first = ManagedKeySet::default()
        .rotate(&policy(), at(T0), |t| holder.generate(t))
        .unwrap()
        .unwrap();
    store.save(&first, None).await.unwrap();
    let copy = Arc::new(LocalCopy::new(
        temp.path().join("copy"),
        Some(holder.clone()),
    ));
    copy.refresh(&first, 1, "memory store").await;

    store.set_unavailable(true);
    let clock = clock();
    let (_leading, leads) = watch::channel(true);
    let seed = Seed {
        keys: first.clone(),
        written_at: at(T0),
        generation: 1,
    };
    let manager = KeyManager::open_from_copy(
        CopiedStore::new(store.clone(), copy.clone()),
        policy(),
        Writer::WhileLeader(leads),
        KeyMetrics::new(),
        clock.now(),
        seed,
    )
    .await
    .unwrap();
    assert!(manager.health().borrow().failing_since.is_some());
    let (_task, mut seen) = spawn(manager, &clock);
    let (now, keys) = seen.recv().await.unwrap();
    assert_eq!(now, T0);
    assert_eq!(published(&keys), kids(&first));
    // The first key's successor is due at six days and signs at seven: no writer can have
    // retired it before, so it signs until then.
    assert_eq!(keys.signing_deadline(), Some(at(T0 + 7 * DAY)));

    // The successor falls due; the store is still down: nothing generated, nothing changed.
    tokio::time::sleep(Duration::from_secs((6 * DAY + 3600) as u64)).await;
    assert_eq!(holder.held().len(), 1, "a replica cut off generated a key");
    assert!(
        holder.destroyed.lock().unwrap().is_empty(),
        "a replica cut off generated a key (and threw it away)"
    );
    assert!(seen.try_recv().is_err());

    // Meanwhile the writer elsewhere created the successor; the store comes back.
    let rotated = first
        .rotate(&policy(), at(T0 + 6 * DAY), |t| holder.generate(t))
        .unwrap()
        .unwrap();
    store.set_unavailable(false);
    let version = store.load().await.unwrap().unwrap().version;
    store.save(&rotated, Some(&version)).await.unwrap();
    let (now, keys) = seen.recv().await.unwrap();
    assert!(now <= T0 + 6 * DAY + 3600 + 10, "{now}");
    assert_eq!(published(&keys), kids(&rotated));
    assert_eq!(keys.signing_deadline(), None, "the store answers");
    assert!(
        copy.read()
            .await
            .unwrap()
            .unwrap()
            .keys
            .same_records(&rotated)
    );
    assert!(copy.state().borrow().in_step);
    // It leads and the store is up to date: still no key of its own.
    assert_eq!(holder.held().len(), 2);
    assert_eq!(
        store.load().await.unwrap().unwrap().version,
        StoreVersion("2".into())
    );
}

/// A store that holds nothing while the copy holds keys (deleted, or emptied by hand): the
/// writer puts the copy's keys back instead of starting over with a key nobody has published.
#[tokio::test(start_paused = true)]
async fn an_empty_store_gets_the_copy_back_from_its_writer() {
    let holder = Arc::new(FakeHolder::default());
    let store = MemoryStore::new().with_holder(holder.clone());
    let first = ManagedKeySet::default()
        .rotate(&policy(), at(T0), |t| holder.generate(t))
        .unwrap()
        .unwrap();
    let clock = clock();
    let seed = Seed {
        keys: first.clone(),
        written_at: at(T0),
        generation: 1,
    };
    let manager = KeyManager::open_from_copy(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
        seed,
    )
    .await
    .unwrap();
    assert_eq!(kids(manager.keys()), kids(&first));
    let stored = store.load().await.unwrap().unwrap();
    assert!(stored.keys.same_records(&first));
    assert_eq!(holder.held().len(), 1);
}

/// A follower learns of the writer's new key within seconds of its creation time even when the
/// store's change notifications do not reach it: it re-reads the store when a successor falls
/// due, and every 10 s until it has one (within `FOLLOW_LAG_SECONDS`).
#[tokio::test(start_paused = true)]
async fn a_follower_hears_of_a_new_key_without_change_notifications() {
    let store = MemoryStore::new();
    let clock = clock();
    // The writer's clock runs 5 s behind the follower's: it creates the successor 5 s after
    // the follower, going by its own clock, first looks for it.
    let late = Clock::follows_tokio(at(T0 - 5));
    let writer = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        late.now(),
    )
    .await
    .unwrap();
    let (_writer_task, _written) = spawn(writer, &late);
    let (_leading, leads) = watch::channel(false);
    let follower = KeyManager::open(
        store.clone().deaf(),
        policy(),
        Writer::WhileLeader(leads),
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let (_task, mut seen) = spawn(follower, &clock);
    let (_, first) = seen.recv().await.unwrap();
    assert_eq!(first.verifying().len(), 1);
    let (now, keys) = seen.recv().await.unwrap();
    assert_eq!(keys.verifying().len(), 2);
    // Due at T0 - 5 + 6 days by the records; created at T0 + 6 days by the follower's clock.
    let created = T0 + 6 * DAY;
    assert!(
        (created..=created + 10).contains(&now),
        "learned of the key {}s after its creation",
        now - created
    );
    assert!(now - created < crate::FOLLOW_LAG_SECONDS);
}

/// A follower cut off from the store keeps its keys, which go on switching by their schedule,
/// but signs with none past the moment the writer could have retired the last key it knows
/// of: the deadline is published with the keys while the store fails, and lifted when it
/// answers. A store only this process writes (a key directory) never sets one.
#[tokio::test(start_paused = true)]
async fn a_follower_cut_off_signs_until_the_writer_may_have_retired_its_key() {
    let store = MemoryStore::new();
    let clock = clock();
    let writer = KeyManager::open(
        store.clone(),
        policy(),
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let (_leading, leads) = watch::channel(false);
    let follower = KeyManager::open(
        store.clone(),
        policy(),
        Writer::WhileLeader(leads),
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .unwrap();
    let (_writer_task, mut written) = spawn(writer, &clock);
    let (_task, mut seen) = spawn(follower, &clock);
    assert_eq!(seen.recv().await.unwrap().1.signing_deadline(), None);
    written.recv().await.unwrap();

    // A day on, the store goes away for a week: the writer can create nothing either.
    tokio::time::sleep(Duration::from_secs(DAY as u64)).await;
    store.set_unavailable(true);
    let (now, keys) = seen.recv().await.unwrap();
    assert!(now <= T0 + DAY + 300, "{now}");
    // Last heard from the store a day in; the writer may retire the key at seven days (when a
    // successor it created at six would sign), not earlier.
    assert_eq!(keys.signing_deadline(), Some(at(T0 + 7 * DAY)));
    assert!(
        written.try_recv().is_err(),
        "the writer's own keys carry no deadline"
    );

    tokio::time::sleep(Duration::from_secs((7 * DAY) as u64)).await;
    store.set_unavailable(false);
    // The store answers: no deadline from then on, and the successor, created once it could
    // be, arrives as usual.
    let mut keys = seen.recv().await.unwrap().1;
    assert_eq!(keys.signing_deadline(), None);
    while keys.verifying().len() < 2 {
        keys = seen.recv().await.unwrap().1;
        assert_eq!(keys.signing_deadline(), None);
    }
}

/// A copy an earlier warrant wrote counted its own writes: after an upgrade its generation can
/// be above the store's, which must not read as the store having gone back (the Lease holder
/// would write the copy over keys made while the node was down). Its revocations still count.
#[tokio::test]
async fn a_copy_from_before_the_store_generation_mark_does_not_judge_the_store() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("copy");
    let keys = first_keys();
    // The old copy: written 40 times, no mark.
    DirStore::new(&dir).replace(&keys, 40).await.unwrap();
    assert!(!dir.join(STORE_GENERATION_MARK).exists());

    let copy = LocalCopy::new(&dir, None);
    let seed = copy.read().await.unwrap().unwrap();
    assert_eq!(
        seed.generation, 0,
        "an unmarked copy's count is not the store's"
    );

    // The store, at its own generation 3 with a newer key, is copied, not refused.
    let rotated = keys
        .rotate(&policy(), at(T0 + 6 * DAY), SigningKey::generate)
        .unwrap()
        .unwrap();
    copy.refresh(&rotated, 3, "the store").await;
    assert!(copy.state().borrow().in_step);
    assert!(dir.join(STORE_GENERATION_MARK).exists());
    assert_eq!(generation(&dir), 3);

    // From now on the copy's generation is the store's, and is kept.
    let again = LocalCopy::new(&dir, None).read().await.unwrap().unwrap();
    assert_eq!(again.generation, 3);
    assert!(again.keys.same_records(&rotated));
}
