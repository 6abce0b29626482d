//! The directory store on a real filesystem: round trips, restarts, crashes half-way through a
//! write, and two writers.

use std::collections::BTreeSet;
use std::time::Duration;

use warrant_token::{KeyType, SigningKey};

use super::*;
use crate::test_support::*;

fn rotate(set: &ManagedKeySet, now: i64) -> ManagedKeySet {
    set.rotate(&policy(), at(now), SigningKey::generate)
        .unwrap()
        .expect("a change")
}

/// The names in the directory.
fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn expected_listing(set: &ManagedKeySet) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = set
        .keys()
        .iter()
        .map(|k| crate::key_file_name(k.kid()))
        .collect();
    names.insert(INDEX_FILE.into());
    names.insert(LOCK_FILE.into());
    names
}

#[tokio::test]
async fn saves_loads_and_restarts_where_it_left_off() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("keys");
    let store = DirStore::new(&dir);
    assert!(store.load().await.unwrap().is_none());

    let first = rotate(&ManagedKeySet::default(), T0);
    let v1 = store.save(&first, None).await.unwrap();
    assert_eq!(v1, StoreVersion("1".into()));
    assert_eq!(listing(&dir), expected_listing(&first));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(
            mode(&dir.join(crate::key_file_name(first.keys()[0].kid()))),
            0o600
        );
    }

    // A second process that believes the directory is empty loses.
    let err = store.save(&first, None).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");

    // A restart (a new store on the same directory) finds the same keys and schedule, and
    // carries on from there.
    let restarted = DirStore::new(&dir);
    let stored = restarted.load().await.unwrap().unwrap();
    assert_eq!(stored.version, v1);
    assert_eq!(kids(&stored.keys), kids(&first));
    assert_eq!(
        stored.keys.schedule(at(T0)),
        first.schedule(at(T0)),
        "same schedule after a restart"
    );
    let second = rotate(&stored.keys, T0 + 6 * DAY);
    let v2 = restarted.save(&second, Some(&v1)).await.unwrap();
    assert_eq!(v2, StoreVersion("2".into()));
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(kids(&stored.keys), kids(&second));
    assert_eq!(
        stored.keys.schedule(at(T0 + 7 * DAY))[1].state,
        crate::KeyState::Active
    );

    // Removing a key deletes its file.
    let third = rotate(&stored.keys, T0 + 8 * DAY + 60);
    restarted.save(&third, Some(&v2)).await.unwrap();
    assert_eq!(listing(&dir), expected_listing(&third));
}

/// A crash after the new key files were written but before the index was renamed: the
/// previous set is intact, and the next write cleans up after the crash.
#[tokio::test]
async fn a_crash_before_the_index_is_committed_leaves_the_previous_set() {
    let temp = tempfile::tempdir().unwrap();
    let store = DirStore::new(temp.path());
    let first = rotate(&ManagedKeySet::default(), T0);
    let v1 = store.save(&first, None).await.unwrap();

    // The index's temporary file cannot be created (a directory is in the way), so the write
    // stops exactly where a crash between the key files and the index would stop it.
    let index_temporary = temp.path().join(private_file::temporary_name(INDEX_FILE));
    fs::create_dir(&index_temporary).unwrap();
    let second = rotate(&first, T0 + 6 * DAY);
    let err = store.save(&second, Some(&v1)).await.unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err}");
    let in_the_way = private_file::temporary_name(INDEX_FILE);
    assert!(err.to_string().contains(&in_the_way), "{err}");
    let orphan = crate::key_file_name(second.keys()[1].kid());
    assert!(
        temp.path().join(&orphan).exists(),
        "the new key was written"
    );

    // A crash while writing a key file leaves a partial temporary file too (named as this
    // version names them, or as older versions did).
    for partial in [
        private_file::temporary_name("partial.pem"),
        ".tmp-partial.pem".into(),
    ] {
        fs::write(
            temp.path().join(partial),
            "-----BEGIN PRIVATE KEY-----\nMIIE",
        )
        .unwrap();
    }

    // Readers (and a restarted process) see the previous set, whole.
    let stored = DirStore::new(temp.path()).load().await.unwrap().unwrap();
    assert_eq!(stored.version, v1);
    assert_eq!(kids(&stored.keys), kids(&first));

    // The restarted process rotates again (a new successor) and commits; the debris goes.
    fs::remove_dir(&index_temporary).unwrap();
    let retried = rotate(&stored.keys, T0 + 6 * DAY);
    assert_ne!(kids(&retried), kids(&second));
    let v2 = store.save(&retried, Some(&v1)).await.unwrap();
    assert_eq!(v2, StoreVersion("2".into()));
    assert_eq!(listing(temp.path()), expected_listing(&retried));
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(kids(&stored.keys), kids(&retried));
}

/// A crash half-way through writing the index itself: the temporary file is incomplete, the
/// index in place is the previous one.
#[tokio::test]
async fn a_half_written_index_is_never_read() {
    let temp = tempfile::tempdir().unwrap();
    let store = DirStore::new(temp.path());
    let first = rotate(&ManagedKeySet::default(), T0);
    let v1 = store.save(&first, None).await.unwrap();
    let index = fs::read(temp.path().join(INDEX_FILE)).unwrap();
    fs::write(
        temp.path().join(private_file::temporary_name(INDEX_FILE)),
        index.get(..index.len() / 2).unwrap(),
    )
    .unwrap();
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!((stored.version, kids(&stored.keys)), (v1, kids(&first)));
}

#[tokio::test]
async fn two_writers_never_interleave() {
    let temp = tempfile::tempdir().unwrap();
    let (a, b) = (DirStore::new(temp.path()), DirStore::new(temp.path()));
    let first = rotate(&ManagedKeySet::default(), T0);
    let v1 = a.save(&first, None).await.unwrap();

    // Both read generation 1 and rotate; the second to write loses and must re-read.
    let from_a = rotate(&first, T0 + 6 * DAY);
    let from_b = rotate(&first, T0 + 6 * DAY);
    a.save(&from_a, Some(&v1)).await.unwrap();
    let err = b.save(&from_b, Some(&v1)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "key directory {}: the key set was changed by another writer since it was read",
            temp.path().display()
        )
    );
    let stored = b.load().await.unwrap().unwrap();
    assert_eq!(kids(&stored.keys), kids(&from_a));
    assert_eq!(listing(temp.path()), expected_listing(&from_a));
}

#[tokio::test]
async fn a_damaged_directory_is_reported_and_never_overwritten() {
    let temp = tempfile::tempdir().unwrap();
    let store = DirStore::new(temp.path());
    let first = rotate(&ManagedKeySet::default(), T0);
    let v1 = store.save(&first, None).await.unwrap();
    let pem = temp
        .path()
        .join(crate::key_file_name(first.keys()[0].kid()));
    let other = SigningKey::generate(KeyType::P256).unwrap();
    fs::write(&pem, other.to_pkcs8_pem().unwrap().as_str()).unwrap();
    let err = store.load().await.unwrap_err().to_string();
    assert!(err.contains(&format!("holds key {}", other.kid())), "{err}");

    fs::write(temp.path().join(INDEX_FILE), "{").unwrap();
    let err = store.save(&first, Some(&v1)).await.unwrap_err().to_string();
    assert!(err.contains("keys.json is not a valid key index"), "{err}");
}

#[tokio::test]
async fn a_write_by_another_process_is_noticed() {
    let temp = tempfile::tempdir().unwrap();
    let store = DirStore::new(temp.path());
    let first = rotate(&ManagedKeySet::default(), T0);
    let v1 = store.save(&first, None).await.unwrap();
    let mut feed = store.watch().unwrap();
    let second = rotate(&first, T0 + 6 * DAY);
    DirStore::new(temp.path())
        .save(&second, Some(&v1))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), feed.changed())
        .await
        .expect("a change notification");
    let stored = store.load().await.unwrap().unwrap();
    assert_eq!(kids(&stored.keys), kids(&second));
}

/// A key directory others can write to is refused, for reading and for writing, with the fix
/// in the message; made private, it is used again.
#[cfg(unix)]
#[tokio::test]
async fn a_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("keys");
    let store = DirStore::new(&dir);
    let first = rotate(&ManagedKeySet::default(), T0);
    store.save(&first, None).await.unwrap();
    for mode in [0o777, 0o770, 0o702] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
        let error = store.load().await.unwrap_err();
        assert!(matches!(error, StoreError::Insecure { .. }), "{error}");
        assert!(
            error
                .to_string()
                .contains(&format!("run `chmod 700 {}`", dir.display())),
            "{error}"
        );
        let next = rotate(&first, T0 + 6 * DAY);
        assert!(matches!(
            store.save(&next, Some(&StoreVersion("1".into()))).await,
            Err(StoreError::Insecure { .. })
        ));
    }
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(store.load().await.unwrap().is_some());
}

/// A symlink planted where the store writes its temporary files is not followed: the file it
/// points to is untouched, and the keys are written in the directory.
#[cfg(unix)]
#[tokio::test]
async fn a_symlink_at_a_temporary_path_is_not_followed() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("keys");
    let store = DirStore::new(&dir);
    let first = rotate(&ManagedKeySet::default(), T0);
    store.save(&first, None).await.unwrap();
    let victim = temp.path().join("victim");
    fs::write(&victim, "untouched").unwrap();
    let next = rotate(&first, T0 + 6 * DAY);
    for name in expected_listing(&next) {
        let _ = std::os::unix::fs::symlink(&victim, dir.join(private_file::temporary_name(&name)));
    }
    store
        .save(&next, Some(&StoreVersion("1".into())))
        .await
        .unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "untouched");
    let loaded = store.load().await.unwrap().unwrap();
    assert_eq!(kids(&loaded.keys), kids(&next));
}

/// A symlink planted at the lock file is refused, for reading and for writing, with an error
/// that names it and says why; what it points at is never created.
#[cfg(unix)]
#[tokio::test]
async fn a_symlink_at_the_lock_is_refused() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("keys");
    let store = DirStore::new(&dir);
    let first = rotate(&ManagedKeySet::default(), T0);
    store.save(&first, None).await.unwrap();
    let lock = dir.join(LOCK_FILE);
    fs::remove_file(&lock).unwrap();
    let victim = temp.path().join("victim");
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let error = store.load().await.unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StoreError::Io { .. }), "{message}");
    assert!(message.contains(&lock.display().to_string()), "{message}");
    assert!(message.contains("is a symbolic link"), "{message}");
    assert!(message.contains("remove the link"), "{message}");
    let next = rotate(&first, T0 + 6 * DAY);
    assert!(matches!(
        store.save(&next, Some(&StoreVersion("1".into()))).await,
        Err(StoreError::Io { .. })
    ));
    assert!(!victim.exists(), "a file was created through the link");
}
