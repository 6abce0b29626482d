//! Reacting to files that change on disk: the serving certificate and key (rotated by
//! cert-manager or a Secret mount) and the authorization policy.
//!
//! As the objects file does, this watches each file's directory rather than the file: tools
//! replace a file by renaming another over it, and Kubernetes volumes swap a symlink
//! (`..data`) in an event that never names the file. Bursts of events are debounced, so a
//! certificate and key written one after the other are read once, together.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long to wait after the first event before acting, so a burst is handled once.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// Why a watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The file system watcher failed.
    #[error("cannot watch {path}: {source}")]
    Notify {
        /// The directory.
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
    task: JoinHandle<()>,
}

impl Drop for FileWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for FileWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWatch")
            .field("running", &!self.task.is_finished())
            .finish()
    }
}

/// Calls `on_change` (on the runtime) after any of `files` may have changed.
pub(crate) fn watch_files(
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
    let directories: BTreeSet<PathBuf> = files
        .iter()
        .map(|f| {
            f.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_owned()
        })
        .collect();
    let names: Vec<OsString> = files
        .iter()
        .filter_map(|f| f.file_name().map(ToOwned::to_owned))
        .collect();
    let symlinked = files.iter().any(|f| f.is_symlink());

    let (events, mut receiver) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = events.send(event);
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
        while let Some(event) = receiver.recv().await {
            if !concerns(&event, &names, symlinked) {
                continue;
            }
            tokio::time::sleep(DEBOUNCE).await;
            while receiver.try_recv().is_ok() {}
            on_change();
        }
    });
    Ok(FileWatch {
        _watcher: watcher,
        task,
    })
}

fn concerns(event: &notify::Result<notify::Event>, names: &[OsString], symlinked: bool) -> bool {
    let event = match event {
        Ok(event) => event,
        Err(error) => {
            tracing::warn!(%error, "file watcher error; rereading to be safe");
            return true;
        }
    };
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    event.need_rescan()
        || symlinked
        || event
            .paths
            .iter()
            .any(|p| p.file_name().is_some_and(|n| names.iter().any(|m| m == n)))
}
