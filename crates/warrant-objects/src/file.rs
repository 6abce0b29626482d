//! The manifest-file object source (`--objects-file`): the standalone issuer's objects, read
//! from a file of ordinary Kubernetes YAML or JSON and reloaded when it changes.
//!
//! A load builds a complete snapshot of the file and swaps it in at once, so a reader sees the
//! old file or the new one, never half of each. A reload that fails (a syntax error, a file
//! that is missing for a moment) keeps the last good snapshot: nothing is lost, the error is
//! logged with its line, and it is counted in `warrant_objects_reloads_total{result="failure"}`.
//! An object removed from the file is gone after the next successful reload, so the tokens
//! bound to it stop passing review. A reload that finds no document at all (an empty file: a
//! writer truncated it and has not written yet) while the last good load had objects is refused
//! the same way, so a half-written file never drops every object; an operator removes every
//! object on purpose with an empty list (`kind: List`, `items: []`). Writers should still
//! write a new file and rename it over the old one (editors, `kubectl`, ConfigMap volumes do):
//! a file cut short after its first objects parses as fewer objects and cannot be told apart.
//!
//! Costs:
//! - A lookup is two hash lookups by `&str` in the current snapshot and an `Arc` clone: no lock,
//!   no allocation. It never waits for a reload.
//! - Memory is a [`Record`] (about 150 bytes) plus its namespace and name per object. During a
//!   reload the old and the new snapshot exist together, and the file's text is held while it
//!   is parsed.
//! - A reload reads and parses the whole file on a runtime worker thread; its time grows with
//!   the file's size, and lookups go on meanwhile against the previous snapshot.
//!
//! Watching: through `warrant_watch`, which watches the file's directory (editors and
//! Kubernetes ConfigMap volumes replace a file rather than edit it) and debounces bursts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{Mutex, mpsc, watch};
use tokio_util::task::AbortOnDropHandle;
use uuid::Uuid;
use warrant_clock::Clock;

use crate::manifest::{self, Entry, ManifestError};
use crate::record::{Kind, Record};
use crate::source::ObjectSource;

/// Objects from a manifest file, reloaded on change. Cheap to clone: clones share one snapshot,
/// so the server can hold one as its [`ObjectSource`] while its owner reloads and watches it.
///
/// Each object keeps a stable UID: an explicit `metadata.uid` is used as is; an object without
/// one keeps the UID it had in the last load (even if an explicit one was later removed from
/// the file), and one that is new gets a UID derived from its kind, namespace and name (a
/// UUIDv5), the same across reloads and restarts. So an object that leaves the file and comes
/// back, or a restart, does not revoke the tokens bound to it. To revoke them for good, give
/// the object a new explicit `metadata.uid` (as a re-created object gets in Kubernetes).
#[derive(Clone)]
pub struct FileSource {
    shared: Arc<Shared>,
}

struct Shared {
    path: PathBuf,
    /// The path as shown in messages.
    label: String,
    current: ArcSwap<Snapshot>,
    /// One reload at a time, so two reloads cannot hand the same new object two UIDs.
    reloading: Mutex<()>,
    status: watch::Sender<ReloadStatus>,
    metrics: Metrics,
}

/// What the latest reload did, published after every attempt so that the watcher's owner (and
/// tests) can wait for a reload instead of sleeping.
#[derive(Debug, Clone, Default)]
pub struct ReloadStatus {
    /// How many reloads have been attempted since the initial load (0 until the first); it
    /// increases once per attempt, successful or not.
    pub generation: u64,
    /// Why the latest attempt failed; `None` if it succeeded (or none was made). After a
    /// failure the objects of the last good load are still served.
    pub error: Option<ManifestError>,
}

impl FileSource {
    /// Reads and parses the file. Fails if it is missing or invalid: at startup there is no
    /// last good set to fall back on, so the caller should exit with the message.
    ///
    /// `now` is recorded as the time of the last successful load (a metric).
    pub async fn load(path: impl Into<PathBuf>, now: Timestamp) -> Result<Self, ManifestError> {
        let path = path.into();
        let label = path.display().to_string();
        let snapshot = read_snapshot(&path, &label, None).await?;
        let metrics = Metrics::new();
        metrics.loaded(&snapshot, now);
        log_loaded(&label, &snapshot, "loaded objects file");
        let (status, _) = watch::channel(ReloadStatus::default());
        Ok(FileSource {
            shared: Arc::new(Shared {
                path,
                label,
                current: ArcSwap::from_pointee(snapshot),
                reloading: Mutex::new(()),
                status,
                metrics,
            }),
        })
    }

    /// The file this source reads.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Reloads the file now, for a SIGHUP handler (and tests that drive reloads themselves).
    /// On failure the last good objects stay in place; the error is also logged, counted and
    /// published to subscribers (see [`subscribe`](Self::subscribe)), so a caller may ignore it.
    pub async fn reload_now(&self, now: Timestamp) -> Result<(), ManifestError> {
        self.shared.reload(now).await
    }

    /// A receiver of the [`ReloadStatus`], updated after every reload attempt (by the watcher
    /// or [`reload_now`](Self::reload_now)). Await `changed()` or `wait_for(..)` on it to know
    /// a reload has happened.
    pub fn subscribe(&self) -> watch::Receiver<ReloadStatus> {
        self.shared.status.subscribe()
    }

    /// Starts reloading the file whenever it changes, until the returned [`FileSourceWatch`] is
    /// dropped. `clock` gives the time of each reload (the last-success metric); the binary
    /// passes its one clock, so this crate never reads the time itself.
    ///
    /// Must be called within a Tokio runtime, which runs the reload task.
    pub fn watch(&self, clock: Clock) -> Result<FileSourceWatch, ManifestError> {
        let shared = &self.shared;
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| ManifestError::NoRuntime {
                path: shared.label.clone(),
            })?;
        // A channel of one: changes that come while a reload runs make one more reload.
        let (changed, mut changes) = mpsc::channel(1);
        let files = std::slice::from_ref(&shared.path);
        let watch = warrant_watch::watch_files(files, move || {
            let _ = changed.try_send(());
        })
        .map_err(|source| ManifestError::Watch {
            path: shared.label.clone(),
            source: Arc::new(source),
        })?;
        let reloading = shared.clone();
        let task = runtime.spawn(async move {
            while changes.recv().await.is_some() {
                // A failure is logged, counted and published by `reload`; the watch goes on.
                let _ = reloading.reload(clock.now()).await;
            }
        });
        tracing::info!(path = %shared.label, "watching objects file for changes");
        Ok(FileSourceWatch {
            _watch: watch,
            task: AbortOnDropHandle::new(task),
        })
    }

    /// Registers this source's metrics (names prefixed `warrant_objects_`) into the server's
    /// registry: objects held by kind, reloads by result, and the time of the last successful
    /// load. Call it once per registry.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.shared.metrics.register(registry);
    }
}

impl ObjectSource for FileSource {
    fn cached(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Record>> {
        self.shared
            .current
            .load()
            .get(kind, namespace, name)
            .cloned()
    }

    // `live` keeps the default: the file is its own authority, so a miss means "absent".

    /// Always ready: a `FileSource` exists only once its file has loaded, and a failed reload
    /// keeps the last good set.
    fn not_ready(&self) -> Option<String> {
        None
    }

    fn count(&self, kind: Kind) -> usize {
        *self.shared.current.load().counts.get(kind)
    }
}

impl std::fmt::Debug for FileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource")
            .field("path", &self.shared.path)
            .field("generation", &self.shared.status.borrow().generation)
            .finish()
    }
}

/// Keeps a [`FileSource`] reloading on change; dropping it stops the watching.
pub struct FileSourceWatch {
    _watch: warrant_watch::FileWatch,
    task: AbortOnDropHandle<()>,
}

impl std::fmt::Debug for FileSourceWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSourceWatch")
            .field("running", &!self.task.is_finished())
            .finish()
    }
}

impl Shared {
    async fn reload(&self, now: Timestamp) -> Result<(), ManifestError> {
        let _one_at_a_time = self.reloading.lock().await;
        let previous = self.current.load_full();
        let result = match read_snapshot(&self.path, &self.label, Some(&previous)).await {
            Ok(snapshot) => {
                self.metrics.loaded(&snapshot, now);
                self.metrics.reloaded("success");
                log_loaded(&self.label, &snapshot, "reloaded objects file");
                self.current.store(Arc::new(snapshot));
                Ok(())
            }
            Err(error) => {
                self.metrics.reloaded("failure");
                tracing::error!(
                    %error,
                    "reloading the objects file failed; still serving the objects of the last good load"
                );
                Err(error)
            }
        };
        // Published after the swap, so a waiter that wakes sees the new objects.
        self.status.send_modify(|status| {
            status.generation = status.generation.wrapping_add(1);
            status.error = result.as_ref().err().cloned();
        });
        result
    }
}

/// Under this UUID, the names of objects the file gives no UID are hashed into theirs.
const DERIVED_UID_NAMESPACE: Uuid = Uuid::from_u128(0x7761_7272_616e_7400_8000_6f62_6a65_6374);

/// The UID of an object the file gives none: a UUIDv5 of `resource/namespace/name`, the same
/// on every load and in every replica.
fn derived_uid(kind: Kind, namespace: &str, name: &str) -> String {
    let object = format!("{}/{namespace}/{name}", kind.resource());
    Uuid::new_v5(&DERIVED_UID_NAMESPACE, object.as_bytes()).to_string()
}

/// True if `text` holds a YAML document: anything but blank lines, comments and document
/// markers. An empty List is a document; a truncated file is not.
fn has_document(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .any(|line| !(line.is_empty() || line.starts_with('#') || line == "---" || line == "..."))
}

async fn read_snapshot(
    path: &Path,
    label: &str,
    previous: Option<&Snapshot>,
) -> Result<Snapshot, ManifestError> {
    let text = tokio::fs::read_to_string(path)
        .await
        .map_err(|source| ManifestError::Read {
            path: label.to_owned(),
            source: Arc::new(source),
        })?;
    if !has_document(&text) && previous.is_some_and(|p| p.counts.total() > 0) {
        return Err(ManifestError::Empty {
            path: label.to_owned(),
        });
    }
    let entries = manifest::parse(label, &text)?;
    drop(text);
    Ok(Snapshot::build(entries, previous))
}

fn log_loaded(label: &str, snapshot: &Snapshot, message: &str) {
    let counts = &snapshot.counts;
    tracing::info!(
        path = label,
        service_accounts = counts.service_account,
        pods = counts.pod,
        secrets = counts.secret,
        nodes = counts.node,
        "{message}"
    );
}

/// Records by namespace (`""` for nodes), then by name: looked up by `&str` without allocating.
type Namespaces = HashMap<String, HashMap<String, Arc<Record>>>;

/// One complete load of the file.
#[derive(Default)]
struct Snapshot {
    objects: ByKind<Namespaces>,
    counts: ByKind<usize>,
}

impl Snapshot {
    /// The snapshot of `entries`, giving each object without an explicit UID the UID it had in
    /// `previous`, or a new one.
    fn build(entries: Vec<Entry>, previous: Option<&Snapshot>) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for entry in entries {
            let uid = entry
                .uid
                .or_else(|| {
                    previous
                        .and_then(|p| p.get(entry.kind, &entry.namespace, &entry.name))
                        .map(|record| record.uid.clone())
                })
                .unwrap_or_else(|| derived_uid(entry.kind, &entry.namespace, &entry.name));
            let record = Record {
                uid,
                deletion_timestamp: entry.deletion_timestamp,
                pod: entry.pod,
                annotations: entry.annotations,
            };
            snapshot
                .objects
                .get_mut(entry.kind)
                .entry(entry.namespace)
                .or_default()
                .insert(entry.name, Arc::new(record));
            *snapshot.counts.get_mut(entry.kind) += 1;
        }
        snapshot
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&Arc<Record>> {
        self.objects.get(kind).get(namespace)?.get(name)
    }
}

/// One value per kind.
#[derive(Debug, Default)]
struct ByKind<T> {
    service_account: T,
    pod: T,
    secret: T,
    node: T,
}

impl ByKind<usize> {
    fn total(&self) -> usize {
        self.service_account + self.pod + self.secret + self.node
    }
}

impl<T> ByKind<T> {
    fn get(&self, kind: Kind) -> &T {
        match kind {
            Kind::ServiceAccount => &self.service_account,
            Kind::Pod => &self.pod,
            Kind::Secret => &self.secret,
            Kind::Node => &self.node,
        }
    }

    fn get_mut(&mut self, kind: Kind) -> &mut T {
        match kind {
            Kind::ServiceAccount => &mut self.service_account,
            Kind::Pod => &mut self.pod,
            Kind::Secret => &mut self.secret,
            Kind::Node => &mut self.node,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// The source's metrics. They are kept whether or not a registry shows them; registering
/// exposes the same handles.
#[derive(Clone, Default)]
struct Metrics {
    held: Family<KindLabel, Gauge>,
    reloads: Family<ResultLabel, Counter>,
    last_success: Gauge,
}

impl Metrics {
    fn new() -> Self {
        let metrics = Metrics::default();
        // Both results exist from the start, so a dashboard's rate() sees the first failure.
        for result in ["success", "failure"] {
            metrics
                .reloads
                .get_or_create(&ResultLabel { result })
                .inc_by(0);
        }
        metrics
    }

    fn loaded(&self, snapshot: &Snapshot, now: Timestamp) {
        for kind in Kind::ALL {
            let count = i64::try_from(*snapshot.counts.get(kind)).unwrap_or(i64::MAX);
            self.held
                .get_or_create(&KindLabel { kind: kind.name() })
                .set(count);
        }
        self.last_success.set(now.as_second());
    }

    fn reloaded(&self, result: &'static str) {
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "warrant_objects_held",
            "Objects held from the objects file, by kind",
            self.held.clone(),
        );
        registry.register(
            "warrant_objects_reloads",
            "Reloads of the objects file, by result; a failed reload keeps the last good objects",
            self.reloads.clone(),
        );
        registry.register(
            "warrant_objects_last_success_timestamp_seconds",
            "When the objects file was last loaded successfully, in Unix seconds",
            self.last_success.clone(),
        );
    }
}

#[cfg(test)]
mod tests;
