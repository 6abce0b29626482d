use std::time::Duration;

use prometheus_client::encoding::text::encode;
use tempfile::TempDir;
use warrant_token::{Binding, Claims, NewToken, ObjectRef};

use super::*;
use crate::checks::check_token_objects;
use crate::source::Objects;

const NOW: i64 = 1_800_000_000;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// A YAML document for a namespaced object; `uid` may be left out.
fn object(kind: &str, namespace: &str, name: &str, uid: Option<&str>) -> String {
    let uid = uid.map(|u| format!("  uid: {u}\n")).unwrap_or_default();
    format!(
        "---\napiVersion: v1\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: {namespace}\n{uid}"
    )
}

fn pod(name: &str, uid: &str) -> String {
    object("Pod", "demo", name, Some(uid)) + "spec:\n  serviceAccountName: app\n"
}

struct Fixture {
    _dir: TempDir,
    path: PathBuf,
}

impl Fixture {
    fn new(text: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("objects.yaml");
        std::fs::write(&path, text).unwrap();
        Fixture { _dir: dir, path }
    }

    /// Rewrites the file in place.
    fn write(&self, text: &str) {
        std::fs::write(&self.path, text).unwrap();
    }

    /// Replaces the file by renaming a new one over it, as editors and `kubectl cp` do.
    fn replace(&self, text: &str) {
        let staged = self.path.with_extension("yaml.new");
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, &self.path).unwrap();
    }
}

fn uid(source: &FileSource, kind: Kind, namespace: &str, name: &str) -> Option<String> {
    source
        .cached(kind, namespace, name)
        .map(|record| record.uid.clone())
}

/// Waits until the source has published a status for which `done` holds. The timeout only
/// keeps a broken watcher from hanging the test run.
async fn until(
    source: &FileSource,
    what: &str,
    mut done: impl FnMut(&ReloadStatus) -> bool,
) -> ReloadStatus {
    let mut status = source.subscribe();
    let waited = tokio::time::timeout(Duration::from_secs(30), status.wait_for(|s| done(s)))
        .await
        .map(|found| found.map(|s| s.clone()));
    match waited {
        Ok(Ok(status)) => status,
        Ok(Err(_)) => panic!("the source went away while waiting for {what}"),
        Err(_) => panic!(
            "no reload brought {what}; last status: {:?}",
            *status.borrow()
        ),
    }
}

/// The value of one sample in the source's metrics, e.g. `warrant_objects_held{kind="Pod"}`.
fn metric(source: &FileSource, sample: &str) -> f64 {
    let mut registry = Registry::default();
    source.register_metrics(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {sample} in\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_loaded_file_answers_lookups() {
    let text = object("ServiceAccount", "demo", "app", Some("sa-1"))
        + &pod("app-0", "pod-1")
        + "  nodeName: node-1\n"
        + &object("Secret", "demo", "token", Some("sec-1"))
        + "data:\n  token: c2VjcmV0\n"
        + "---\napiVersion: v1\nkind: Node\nmetadata: {name: node-1, uid: node-uid}\n";
    let fixture = Fixture::new(&text);
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();

    assert!(source.ready());
    assert_eq!(source.path(), fixture.path);
    let pod = source.cached(Kind::Pod, "demo", "app-0").unwrap();
    assert_eq!(pod.uid, "pod-1");
    let info = pod.pod.as_ref().unwrap();
    assert_eq!(
        (info.service_account_name.as_str(), info.node_name.as_str()),
        ("app", "node-1")
    );
    assert_eq!(
        uid(&source, Kind::Node, "", "node-1").as_deref(),
        Some("node-uid")
    );
    assert_eq!(
        uid(&source, Kind::Secret, "demo", "token").as_deref(),
        Some("sec-1")
    );
    // Names are per namespace and per kind.
    assert_eq!(source.cached(Kind::Pod, "other", "app-0"), None);
    assert_eq!(source.cached(Kind::Secret, "demo", "app-0"), None);
    for kind in Kind::ALL {
        assert_eq!(source.count(kind), 1, "{kind:?}");
    }

    // Through the server's handle, a miss is "absent": the file is its own authority.
    let objects = Objects::new(Arc::new(source.clone()));
    assert_eq!(objects.get(Kind::Pod, "demo", "gone").await, Ok(None));
    assert!(
        objects
            .get(Kind::ServiceAccount, "demo", "app")
            .await
            .unwrap()
            .is_some()
    );

    for kind in ["ServiceAccount", "Pod", "Secret", "Node"] {
        assert_eq!(
            metric(&source, &format!("warrant_objects_held{{kind=\"{kind}\"}}")),
            1.0
        );
    }
    assert_eq!(
        metric(&source, "warrant_objects_last_success_timestamp_seconds"),
        NOW as f64
    );
    for result in ["success", "failure"] {
        let sample = format!("warrant_objects_reloads_total{{result=\"{result}\"}}");
        assert_eq!(metric(&source, &sample), 0.0);
    }
}

#[tokio::test]
async fn a_missing_or_invalid_file_fails_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("objects.yaml");
    let error = FileSource::load(&missing, at(NOW)).await.unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{}: cannot read: ", missing.display())),
        "{message}"
    );

    let fixture = Fixture::new(&(pod("app-0", "a") + &pod("app-0", "b")));
    let error = FileSource::load(&fixture.path, at(NOW)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: line 11: Pod \"demo/app-0\" appears twice (first at line 2)",
            fixture.path.display()
        )
    );
}

#[tokio::test]
async fn a_truncated_file_keeps_every_object_and_an_empty_list_removes_them() {
    let objects = object("ServiceAccount", "demo", "app", None) + &pod("app-0", "p0");
    let fixture = Fixture::new(&objects);
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let before = uid(&source, Kind::ServiceAccount, "demo", "app").unwrap();
    // In-place rewrite, caught between the truncate and the write.
    for cut in ["", "\n", "# objects\n---\n"] {
        fixture.write(cut);
        let error = source.reload_now(at(NOW + 1)).await.unwrap_err();
        assert!(matches!(error, ManifestError::Empty { .. }), "{error}");
        assert_eq!(
            uid(&source, Kind::ServiceAccount, "demo", "app"),
            Some(before.clone()),
            "{cut:?}"
        );
        assert!(uid(&source, Kind::Pod, "demo", "app-0").is_some());
    }
    // The write lands: the same objects, the same UIDs.
    fixture.write(&objects);
    source.reload_now(at(NOW + 2)).await.unwrap();
    assert_eq!(
        uid(&source, Kind::ServiceAccount, "demo", "app"),
        Some(before)
    );
    // Emptied on purpose.
    fixture.write("apiVersion: v1\nkind: List\nitems: []\n");
    source.reload_now(at(NOW + 3)).await.unwrap();
    assert_eq!(uid(&source, Kind::ServiceAccount, "demo", "app"), None);
    assert_eq!(uid(&source, Kind::Pod, "demo", "app-0"), None);
    // With nothing to lose, an empty file is just empty.
    fixture.write("");
    source.reload_now(at(NOW + 4)).await.unwrap();
}

#[tokio::test]
async fn derived_uids_are_the_same_after_a_restart() {
    let objects = object("ServiceAccount", "demo", "app", None);
    let fixture = Fixture::new(&objects);
    let first = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let second = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    assert_eq!(
        uid(&first, Kind::ServiceAccount, "demo", "app"),
        uid(&second, Kind::ServiceAccount, "demo", "app")
    );
    assert_ne!(
        derived_uid(Kind::ServiceAccount, "demo", "app"),
        derived_uid(Kind::Secret, "demo", "app")
    );
}

#[tokio::test]
async fn uids_are_given_kept_and_renewed() {
    let sa = object("ServiceAccount", "demo", "app", None);
    let fixture = Fixture::new(&(sa.clone() + &pod("app-0", "explicit")));
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let generated = uid(&source, Kind::ServiceAccount, "demo", "app").unwrap();
    assert_eq!(
        Uuid::parse_str(&generated).unwrap().get_version_num(),
        5,
        "{generated}"
    );

    // Reloads keep it while the object stays, whatever else changes.
    fixture.write(&(sa.clone() + &pod("app-0", "explicit") + &pod("app-1", "p1")));
    source.reload_now(at(NOW + 1)).await.unwrap();
    assert_eq!(
        uid(&source, Kind::ServiceAccount, "demo", "app"),
        Some(generated.clone())
    );

    // An explicit UID removed from the file is kept too.
    fixture.write(&(sa.clone() + &object("Pod", "demo", "app-0", None)));
    source.reload_now(at(NOW + 2)).await.unwrap();
    assert_eq!(
        uid(&source, Kind::Pod, "demo", "app-0").as_deref(),
        Some("explicit")
    );
    assert_eq!(
        uid(&source, Kind::ServiceAccount, "demo", "app"),
        Some(generated.clone())
    );

    // Gone, then back: the same UID, derived from its name (a file rewritten, or read
    // again after a restart, revokes nothing).
    fixture.write(&object("Pod", "demo", "app-0", None));
    source.reload_now(at(NOW + 3)).await.unwrap();
    assert_eq!(uid(&source, Kind::ServiceAccount, "demo", "app"), None);
    fixture.write(&(sa + &object("Pod", "demo", "app-0", None)));
    source.reload_now(at(NOW + 4)).await.unwrap();
    let renewed = uid(&source, Kind::ServiceAccount, "demo", "app").unwrap();
    assert_eq!(renewed, generated);
    assert_eq!(
        uid(&source, Kind::Pod, "demo", "app-0").as_deref(),
        Some("explicit")
    );

    // A failed reload in between does not forget UIDs.
    fixture.write("kind: [");
    source.reload_now(at(NOW + 5)).await.unwrap_err();
    fixture.write(&object("ServiceAccount", "demo", "app", None));
    source.reload_now(at(NOW + 6)).await.unwrap();
    assert_eq!(
        uid(&source, Kind::ServiceAccount, "demo", "app"),
        Some(renewed)
    );

    let status = source.subscribe().borrow().clone();
    assert_eq!(status.generation, 6);
    assert!(status.error.is_none());
    assert_eq!(
        metric(
            &source,
            r#"warrant_objects_reloads_total{result="success"}"#
        ),
        5.0
    );
    assert_eq!(
        metric(
            &source,
            r#"warrant_objects_reloads_total{result="failure"}"#
        ),
        1.0
    );
    assert_eq!(
        metric(&source, "warrant_objects_last_success_timestamp_seconds"),
        (NOW + 6) as f64
    );
}

/// Dropping the watch stops its task, and the source the task holds goes with it: once the
/// last handle on the source is gone, its status channel closes.
#[tokio::test(flavor = "current_thread")]
async fn dropping_the_watch_stops_its_task() {
    let fixture = Fixture::new(&pod("app-0", "p0"));
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let watch = source.watch(Clock::manual(at(NOW + 10))).unwrap();
    let status = source.subscribe();
    drop(source);
    drop(watch);
    // The aborted task is dropped the next time this runtime's scheduler runs it.
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
    assert!(
        status.has_changed().is_err(),
        "the watch task outlived its owner"
    );
}

#[tokio::test]
async fn edits_are_picked_up_whether_written_in_place_or_renamed_over() {
    let fixture = Fixture::new(&pod("app-0", "p0"));
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let _watch = source.watch(Clock::manual(at(NOW + 10))).unwrap();

    fixture.write(&(pod("app-0", "p0") + &pod("app-1", "p1")));
    until(&source, "app-1 from an in-place write", |_| {
        source.cached(Kind::Pod, "demo", "app-1").is_some()
    })
    .await;
    assert_eq!(source.count(Kind::Pod), 2);
    assert_eq!(metric(&source, r#"warrant_objects_held{kind="Pod"}"#), 2.0);
    assert_eq!(
        metric(&source, "warrant_objects_last_success_timestamp_seconds"),
        (NOW + 10) as f64
    );

    fixture.replace(&pod("app-2", "p2"));
    until(&source, "app-2 from a rename", |_| {
        source.cached(Kind::Pod, "demo", "app-2").is_some()
    })
    .await;
    // The replaced file's other objects are gone with it.
    assert_eq!(source.cached(Kind::Pod, "demo", "app-0"), None);
    assert_eq!(source.count(Kind::Pod), 1);
}

#[tokio::test]
async fn a_bad_edit_keeps_the_last_good_objects_until_it_is_fixed() {
    let fixture = Fixture::new(&pod("app-0", "p0"));
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let _watch = source.watch(Clock::manual(at(NOW + 10))).unwrap();

    fixture.write(&(pod("app-1", "p1") + "---\napiVersion: v1\nkind: Pod\nmetadata: {}\n"));
    let status = until(&source, "a failed reload", |s| s.error.is_some()).await;
    assert_eq!(
        status.error.unwrap().to_string(),
        format!(
            "{}: line 11: Pod has no metadata.name",
            fixture.path.display()
        )
    );
    // Nothing of the bad file was applied, nothing of the good one lost.
    assert_eq!(
        uid(&source, Kind::Pod, "demo", "app-0").as_deref(),
        Some("p0")
    );
    assert_eq!(source.cached(Kind::Pod, "demo", "app-1"), None);
    assert!(
        metric(
            &source,
            r#"warrant_objects_reloads_total{result="failure"}"#
        ) >= 1.0
    );
    assert_eq!(
        metric(&source, "warrant_objects_last_success_timestamp_seconds"),
        NOW as f64
    );

    fixture.write(&pod("app-1", "p1"));
    let status = until(&source, "the fixed file", |s| {
        s.error.is_none() && source.cached(Kind::Pod, "demo", "app-1").is_some()
    })
    .await;
    assert!(status.generation >= 2);
    assert_eq!(source.cached(Kind::Pod, "demo", "app-0"), None);
    assert!(
        metric(
            &source,
            r#"warrant_objects_reloads_total{result="success"}"#
        ) >= 1.0
    );
}

#[tokio::test]
async fn a_deleted_file_keeps_the_last_good_objects() {
    let fixture = Fixture::new(&pod("app-0", "p0"));
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let _watch = source.watch(Clock::manual(at(NOW + 10))).unwrap();

    std::fs::remove_file(&fixture.path).unwrap();
    let status = until(&source, "a reload of the missing file", |s| {
        s.error.is_some()
    })
    .await;
    let message = status.error.unwrap().to_string();
    assert!(
        message.starts_with(&format!("{}: cannot read: ", fixture.path.display())),
        "{message}"
    );
    assert_eq!(
        uid(&source, Kind::Pod, "demo", "app-0").as_deref(),
        Some("p0")
    );

    // When it comes back, it is read again.
    fixture.write(&pod("app-1", "p1"));
    until(&source, "the re-created file", |s| {
        s.error.is_none() && source.cached(Kind::Pod, "demo", "app-1").is_some()
    })
    .await;
    assert_eq!(source.cached(Kind::Pod, "demo", "app-0"), None);
}

/// A Kubernetes ConfigMap volume: the file is a symlink through `..data`, and an update
/// swaps `..data` to a new directory in one rename, in an event that never names the file.
#[cfg(unix)]
#[tokio::test]
async fn a_configmap_volume_update_is_picked_up() {
    use std::os::unix::fs::symlink;

    let dir = tempfile::tempdir().unwrap();
    let version = |name: &str, text: &str| {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("objects.yaml"), text).unwrap();
    };
    version("..v1", &pod("app-0", "p0"));
    symlink("..v1", dir.path().join("..data")).unwrap();
    symlink("..data/objects.yaml", dir.path().join("objects.yaml")).unwrap();
    let source = FileSource::load(dir.path().join("objects.yaml"), at(NOW))
        .await
        .unwrap();
    let _watch = source.watch(Clock::manual(at(NOW + 10))).unwrap();
    assert!(source.cached(Kind::Pod, "demo", "app-0").is_some());

    version("..v2", &pod("app-1", "p1"));
    symlink("..v2", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    until(&source, "the swapped ConfigMap version", |_| {
        source.cached(Kind::Pod, "demo", "app-1").is_some()
    })
    .await;
    assert_eq!(source.cached(Kind::Pod, "demo", "app-0"), None);
}

#[tokio::test]
async fn a_pod_removed_from_the_file_invalidates_its_tokens() {
    let sa = object("ServiceAccount", "demo", "app", Some("sa-1"));
    let fixture = Fixture::new(&(sa.clone() + &pod("app-0", "pod-1")));
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let _watch = source.watch(Clock::manual(at(NOW + 10))).unwrap();
    let objects = Objects::new(Arc::new(source.clone()));
    let claims = Claims::new(NewToken {
        issuer: "https://issuer.example",
        namespace: "demo",
        service_account: ObjectRef::new("app", "sa-1"),
        audiences: vec!["vault".into()],
        binding: Binding::Pod {
            pod: ObjectRef::new("app-0", "pod-1"),
            node: None,
        },
        issued_at: NOW,
        expires_at: NOW + 3600,
        warn_after: None,
        jti: "jti-1".into(),
    });
    assert_eq!(
        check_token_objects(&objects, &claims, at(NOW)).await,
        Ok(())
    );

    fixture.write(&sa);
    until(&source, "the pod's removal", |_| {
        source.cached(Kind::Pod, "demo", "app-0").is_none()
    })
    .await;
    assert_eq!(
        check_token_objects(&objects, &claims, at(NOW))
            .await
            .unwrap_err()
            .to_string(),
        "service account token has been invalidated"
    );
}

#[tokio::test]
async fn watching_outside_a_runtime_is_an_error_not_a_panic() {
    let fixture = Fixture::new("");
    let source = FileSource::load(&fixture.path, at(NOW)).await.unwrap();
    let outside = std::thread::spawn(move || source.watch(Clock::manual(at(NOW))).map(drop));
    let error = outside.join().unwrap().unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with(": cannot watch for changes outside a Tokio runtime")
    );
}
