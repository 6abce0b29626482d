//! Watching files for changes: their directories are watched, not the files, because editors,
//! `kubectl cp`, Kubernetes Secret and ConfigMap volumes and warrant's own atomic writes all
//! replace a file by renaming another over it (or by swapping a symlink), which a watch on the
//! old file would never see. Bursts of events are debounced into one notification.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long to wait after the first event before notifying, so a save that arrives as several
/// events (truncate, write, close, rename) is read once, complete.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Watches some files; dropping it stops the watching.
pub(crate) struct FileWatcher {
    _watcher: notify::RecommendedWatcher,
    task: JoinHandle<()>,
}

impl Drop for FileWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why files cannot be watched.
#[derive(Debug)]
pub(crate) enum WatchError {
    /// Not inside a Tokio runtime.
    NoRuntime,
    /// The OS watcher failed.
    Notify(notify::Error),
}

impl std::fmt::Display for WatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchError::NoRuntime => {
                f.write_str("cannot watch for changes outside a Tokio runtime")
            }
            WatchError::Notify(e) => write!(f, "cannot watch for changes: {e}"),
        }
    }
}

/// Sends `()` on `notify` (coalesced: a full channel means a notification is already pending)
/// whenever one of `files` may have changed. Must be called within a Tokio runtime.
pub(crate) fn watch_files(
    files: &[PathBuf],
    notify: mpsc::Sender<()>,
) -> Result<FileWatcher, WatchError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| WatchError::NoRuntime)?;
    let mut names: BTreeSet<OsString> = BTreeSet::new();
    let mut directories: BTreeSet<PathBuf> = BTreeSet::new();
    for file in files {
        if let Some(name) = file.file_name() {
            names.insert(name.to_owned());
        }
        let directory = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        directories.insert(directory.to_owned());
    }
    let (events, mut receiver) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        // The receiver is gone only once the task has ended; nothing is left to tell.
        let _ = events.send(event);
    })
    .map_err(WatchError::Notify)?;
    for directory in &directories {
        watcher
            .watch(directory, RecursiveMode::NonRecursive)
            .map_err(WatchError::Notify)?;
    }
    let files = files.to_vec();
    let task = runtime.spawn(async move {
        while let Some(event) = receiver.recv().await {
            if !concerns(&files, &names, &event) {
                continue;
            }
            tokio::time::sleep(DEBOUNCE).await;
            while receiver.try_recv().is_ok() {}
            if let Err(mpsc::error::TrySendError::Closed(())) = notify.try_send(()) {
                return;
            }
        }
    });
    Ok(FileWatcher {
        _watcher: watcher,
        task,
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
