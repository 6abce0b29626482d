//! Reacting to files that change on disk: the objects file, static key files and the key
//! directory's index, the serving certificate and key, the authorization policy.
//!
//! Each file's directory is watched rather than the file: editors, `kubectl cp` and warrant's
//! own atomic writes replace a file by renaming another over it, and Kubernetes Secret and
//! ConfigMap volumes swap a symlink (`..data`) in an event that never names the file; a watch on
//! the old file would see none of it. Bursts of events are debounced, so a save that arrives as
//! several events (truncate, write, close, rename), or a certificate and key written one after
//! the other, are read once, complete.
//!
//! [`private_file`] is the other half of warrant's dealings with files: writing its own (the
//! audit log, key files, caches) without following a symbolic link, owner-only, replaced whole.

pub mod private_file;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

/// How long to wait after the first event before acting, so a burst is handled once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Why a watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The file system watcher failed, or a path names no file.
    #[error("cannot watch {path}: {source}")]
    Notify {
        /// The directory or file.
        path: String,
        /// notify's error.
        #[source]
        source: notify::Error,
    },
    /// Not inside a Tokio runtime.
    #[error("watching {0} needs a tokio runtime")]
    NoRuntime(String),
}

/// Keeps a watch running; dropping it stops it.
pub struct FileWatch {
    _watcher: notify::RecommendedWatcher,
    task: AbortOnDropHandle<()>,
}

impl std::fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatch")
            .field("running", &!self.task.is_finished())
            .finish()
    }
}

/// Calls `on_change` (on the runtime, one call per burst of events) after any of `files` may
/// have changed, until the returned [`FileWatch`] is dropped. Must be called within a Tokio
/// runtime. A callback with slow work to do should hand it on (say, `try_send` on a channel of
/// one, which also coalesces changes that come while the work runs).
pub fn watch_files(
    files: &[PathBuf],
    on_change: impl Fn() + Send + 'static,
) -> Result<FileWatch, WatchError> {
    let shown = files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let runtime =
        tokio::runtime::Handle::try_current().map_err(|_| WatchError::NoRuntime(shown.clone()))?;
    let mut names = BTreeSet::<OsString>::new();
    let mut directories = BTreeSet::<PathBuf>::new();
    for file in files {
        let name = file.file_name().ok_or_else(|| WatchError::Notify {
            path: file.display().to_string(),
            source: notify::Error::generic("the path names no file"),
        })?;
        names.insert(name.to_owned());
        let directory = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        directories.insert(directory.to_owned());
    }

    let (events, mut receiver) = mpsc::unbounded_channel();
    let files = files.to_vec();
    let mut watcher = notify::recommended_watcher(move |event| {
        // Sorted out here, on notify's thread: a directory that also holds a file written
        // often (a log, a socket's neighbour) sends an event per write, and waking the runtime
        // for each cost the external signer a tenth of its throughput (docs/benchmarks.md).
        if concerns(&files, &names, &event) {
            // The receiver is gone only once the task has ended; nothing is left to tell.
            let _ = events.send(());
        }
    })
    .map_err(|source| WatchError::Notify {
        path: shown.clone(),
        source,
    })?;
    for directory in &directories {
        watcher
            .watch(directory, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError::Notify {
                path: directory.display().to_string(),
                source,
            })?;
    }
    let task = runtime.spawn(async move {
        while receiver.recv().await.is_some() {
            tokio::time::sleep(DEBOUNCE).await;
            while receiver.try_recv().is_ok() {}
            on_change();
        }
    });
    Ok(FileWatch {
        _watcher: watcher,
        task: AbortOnDropHandle::new(task),
    })
}

/// True if `event` may have changed one of the files.
fn concerns(
    files: &[PathBuf],
    names: &BTreeSet<OsString>,
    event: &notify::Result<notify::Event>,
) -> bool {
    let event = match event {
        Ok(event) => event,
        Err(error) => {
            tracing::warn!(%error, "file watcher error; re-reading to be safe");
            return true;
        }
    };
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        // Opening and reading a file (our own reads included) change nothing.
        EventKind::Access(_) => return false,
        _ => {}
    }
    event.need_rescan()
        || event
            .paths
            .iter()
            .any(|p| p.file_name().is_some_and(|n| names.contains(n)))
        // A symlinked file (a Secret or ConfigMap volume) changes when a link elsewhere in its
        // directory is swapped, in an event that never names the file.
        || files.iter().any(|f| f.is_symlink())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Dropping the watch stops its task: the callback the task holds (and so its sender) is
    /// dropped, which the receiver sees as closed. A detached task would keep it open.
    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_watch_stops_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("watched.yaml");
        std::fs::write(&file, "a").unwrap();
        let (changed, mut changes) = mpsc::unbounded_channel::<()>();
        let watch = watch_files(std::slice::from_ref(&file), move || {
            let _ = changed.send(());
        })
        .unwrap();
        drop(watch);
        // The aborted task is dropped the next time this runtime's scheduler runs it.
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            changes.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        );
    }

    #[tokio::test]
    async fn a_file_renamed_over_the_watched_one_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("watched.yaml");
        std::fs::write(&file, "a").unwrap();
        let (changed, mut changes) = mpsc::unbounded_channel();
        let _watch = watch_files(std::slice::from_ref(&file), move || {
            let _ = changed.send(());
        })
        .unwrap();

        // The watched file replaced by a rename, as editors and atomic writers do: one call.
        let staged = dir.path().join(".watched.yaml.tmp");
        std::fs::write(&staged, "b").unwrap();
        std::fs::rename(&staged, &file).unwrap();
        changes.recv().await.unwrap();
        assert!(changes.try_recv().is_err(), "a burst is one call");
    }

    /// Which events wake the watch: those naming the watched file (a write, a rename over it)
    /// and rescans; not those of a sibling in the same directory, nor reads. (Checked on the
    /// filter itself: through the watcher, a sibling's event and the watched file's land in the
    /// same debounce and a wrong wake-up could not be seen.)
    #[test]
    fn only_events_for_the_watched_file_concern_it() {
        use notify::event::{CreateKind, DataChange, ModifyKind, RenameMode};
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("watched.yaml");
        std::fs::write(&file, "a").unwrap();
        let files = vec![file.clone()];
        let names: BTreeSet<OsString> = [OsString::from("watched.yaml")].into();
        let event =
            |kind: EventKind, path: &Path| Ok(notify::Event::new(kind).add_path(path.to_owned()));
        let sibling = dir.path().join("other.yaml");
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let read = EventKind::Access(AccessKind::Close(AccessMode::Read));
        let renamed = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        let created = EventKind::Create(CreateKind::File);
        for kind in [write, closed, created] {
            assert!(
                !concerns(&files, &names, &event(kind, &sibling)),
                "{kind:?} of a sibling"
            );
        }
        assert!(!concerns(&files, &names, &event(read, &file)), "a read");
        for kind in [write, closed, renamed, created] {
            assert!(concerns(&files, &names, &event(kind, &file)), "{kind:?}");
        }
        let rescan = notify::Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan);
        assert!(concerns(&files, &names, &Ok(rescan)));
    }

    #[test]
    fn watching_outside_a_runtime_is_an_error_not_a_panic() {
        let error = watch_files(&[PathBuf::from("/tmp/x")], || {}).unwrap_err();
        assert!(matches!(error, WatchError::NoRuntime(_)), "{error}");
    }

    #[tokio::test]
    async fn a_path_that_names_no_file_is_refused() {
        let error = watch_files(&[PathBuf::from("/")], || {}).unwrap_err();
        assert!(error.to_string().contains("names no file"), "{error}");
    }
}
