//! The fixture's object store: every kind in one revision space, as etcd keeps it, with a history
//! of events that watches replay from a resourceVersion, and the controls tests use to make the
//! server misbehave.
//!
//! Objects are kept pre-serialized (the full object and its `PartialObjectMetadata` form), so a
//! list of 150,000 pods is a concatenation of bytes, not 150,000 serializations.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::FixtureError;

pub(crate) use crate::resource::Entry;
pub use crate::resource::{EventType, ResourceType, Scope};

/// What a watch replays: a real event, or a raw line a test injected.
#[derive(Debug, Clone)]
pub(crate) enum Line {
    Event(EventType, Arc<Entry>),
    Raw(Bytes),
}

#[derive(Debug, Clone)]
pub(crate) struct HistoryItem {
    pub(crate) revision: u64,
    pub(crate) line: Line,
}

#[derive(Debug)]
pub(crate) struct Resource {
    pub(crate) info: ResourceType,
    /// How kube-apiserver treats this resource beyond the generic object API.
    pub(crate) rules: crate::rules::Rules,
    pub(crate) objects: BTreeMap<(String, String), Arc<Entry>>,
    /// Events in revision order, since the last compaction.
    pub(crate) history: Vec<HistoryItem>,
}

/// A paged list in progress: the items as of the first page, as etcd serves every page of one
/// list from the same revision.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) revision: u64,
    pub(crate) items: Arc<Vec<Arc<Entry>>>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) revision: u64,
    /// Watches from a resourceVersion below this get `410 Gone`.
    pub(crate) compacted: u64,
    pub(crate) resources: HashMap<(&'static str, &'static str), Resource>,
    pub(crate) snapshots: HashMap<u64, Snapshot>,
    pub(crate) next_snapshot: u64,
    /// Requests seen, by path (without query).
    pub(crate) requests: HashMap<String, usize>,
    /// Every request, `METHOD path?query`, in order.
    pub(crate) request_log: Vec<String>,
    /// Watch connections open, by resource plural.
    pub(crate) watchers: HashMap<&'static str, usize>,
    /// Non-watch requests being served now, and the most at once.
    pub(crate) in_flight: usize,
    pub(crate) max_in_flight: usize,
    /// Single-object GETs answer with this HTTP status instead, while set.
    pub(crate) fail_gets: Option<u16>,
    /// Writes over HTTP: their failure controls and field owners (see `writes`).
    pub(crate) writes: crate::write_state::WriteState,
}

/// Signals the HTTP side waits on.
#[derive(Debug)]
pub(crate) struct Signals {
    /// The newest revision: watches wake when it moves.
    pub(crate) revision: watch::Sender<u64>,
    /// Bumped by [`Cluster::bookmark`]: every watch that asked for bookmarks sends one.
    pub(crate) bookmarks: watch::Sender<u64>,
    /// Bumped by [`Cluster::drop_watches`]: every open watch is cut off.
    pub(crate) drops: watch::Sender<u64>,
    /// While true, watches hold their events (requests are still served).
    pub(crate) paused: watch::Sender<bool>,
    /// While true, nothing is served: requests wait, watches send nothing.
    pub(crate) stalled: watch::Sender<bool>,
}

/// A handle on the fixture's objects and controls. Cheap to clone; handlers added with
/// [`crate::Fixture::start_with`] get one.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub(crate) state: Arc<Mutex<State>>,
    pub(crate) signals: Arc<Signals>,
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

impl Cluster {
    /// An empty cluster serving ServiceAccounts, Pods, Secrets and Nodes.
    pub fn new() -> Self {
        use k8s_openapi::api::core::v1::{Node, Pod, Secret, ServiceAccount};
        let cluster = Cluster {
            state: Arc::new(Mutex::new(State {
                // etcd revisions start above zero; "0" means "any" to a watch.
                revision: 1,
                ..State::default()
            })),
            signals: Arc::new(Signals {
                revision: watch::Sender::new(1),
                bookmarks: watch::Sender::new(0),
                drops: watch::Sender::new(0),
                paused: watch::Sender::new(false),
                stalled: watch::Sender::new(false),
            }),
        };
        cluster.register(ResourceType::of::<ServiceAccount>());
        cluster.register(ResourceType::of::<Pod>());
        cluster.register(ResourceType::of::<Secret>());
        cluster.register(ResourceType::of::<Node>());
        cluster
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves another resource (an empty list until objects are added). Registering one twice
    /// keeps its objects.
    pub fn register(&self, info: ResourceType) {
        self.register_with(info, crate::Rules::default());
    }

    /// Serves another resource with `rules` (field selectors, a `/status` subresource,
    /// validation): see [`crate::Rules`]. Registering one again keeps its objects and takes the
    /// new type and rules, so a test can serve a resource at another version.
    pub fn register_with(&self, info: ResourceType, rules: crate::Rules) {
        let mut state = self.lock();
        let resource = state
            .resources
            .entry((info.group, info.plural))
            .or_insert_with(|| Resource {
                info,
                rules: crate::Rules::default(),
                objects: BTreeMap::new(),
                history: Vec::new(),
            });
        resource.info = info;
        resource.rules = rules;
    }

    /// Adds an object and sends `ADDED`. Its resourceVersion is set; everything else, the UID
    /// included, is stored as given (so tests can store what a real server never would).
    pub fn create<K>(&self, object: &K) -> Result<u64, FixtureError>
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta> + Serialize,
        K::Scope: Scope,
    {
        self.write(ResourceType::of::<K>(), object, Write::Create)
    }

    /// Replaces an object and sends `MODIFIED`.
    pub fn update<K>(&self, object: &K) -> Result<u64, FixtureError>
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta> + Serialize,
        K::Scope: Scope,
    {
        self.write(ResourceType::of::<K>(), object, Write::Update)
    }

    /// Creates or replaces an object, sending `ADDED` or `MODIFIED`.
    pub fn apply<K>(&self, object: &K) -> Result<u64, FixtureError>
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta> + Serialize,
        K::Scope: Scope,
    {
        self.write(ResourceType::of::<K>(), object, Write::Apply)
    }

    /// Removes an object and sends `DELETED` (the last state, at a new resourceVersion).
    pub fn delete<K>(&self, namespace: &str, name: &str) -> Result<u64, FixtureError>
    where
        K: k8s_openapi::Resource,
        K::Scope: Scope,
    {
        self.delete_in(ResourceType::of::<K>(), namespace, name)
            .map(|(revision, _)| revision)
    }

    /// Removes an object of a registered resource and sends `DELETED`; returns the revision
    /// and the object's last state (at that revision), as a DELETE answers it.
    pub fn delete_in(
        &self,
        info: ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<(u64, Value), FixtureError> {
        let mut state = self.lock();
        let revision = state.revision + 1;
        let resource = resource_mut(&mut state, info)?;
        let info = resource.info;
        let key = (scoped(info, namespace).to_owned(), name.to_owned());
        let Some(old) = resource.objects.remove(&key) else {
            return Err(FixtureError::NotFound {
                resource: info.plural,
                name: name.to_owned(),
            });
        };
        let mut value: Value = serde_json::from_slice(&old.full)?;
        set_resource_version(&mut value, revision);
        let entry = Arc::new(encode(info, &key.0, &value)?);
        resource.history.push(HistoryItem {
            revision,
            line: Line::Event(EventType::Deleted, entry),
        });
        state.revision = revision;
        drop(state);
        self.signals.revision.send_replace(revision);
        Ok((revision, value))
    }

    /// Appends a raw line to a resource's watch history, as if the server had sent it: a
    /// malformed line, or an event of a type no client knows. It gets a revision slot of its own,
    /// so a watch resumed from before it sees it again.
    pub fn inject_raw_line(&self, info: ResourceType, line: &str) -> Result<u64, FixtureError> {
        let mut state = self.lock();
        let revision = state.revision + 1;
        let resource = resource_mut(&mut state, info)?;
        let mut bytes = line.trim_end_matches('\n').as_bytes().to_vec();
        bytes.push(b'\n');
        resource.history.push(HistoryItem {
            revision,
            line: Line::Raw(Bytes::from(bytes)),
        });
        state.revision = revision;
        drop(state);
        self.signals.revision.send_replace(revision);
        Ok(revision)
    }

    /// Forgets all history: a watch from any earlier resourceVersion now gets `410 Gone`, and
    /// paged lists in progress get `410 Expired` on their next page. This is what etcd
    /// compaction does to clients that fell behind.
    pub fn compact(&self) {
        let mut state = self.lock();
        state.compacted = state.revision;
        for resource in state.resources.values_mut() {
            resource.history.clear();
        }
        state.snapshots.clear();
    }

    /// Sends a BOOKMARK (at the newest revision) on every watch that asked for bookmarks.
    pub fn bookmark(&self) {
        self.signals.bookmarks.send_modify(|n| *n += 1);
    }

    /// Cuts every open watch connection off mid-stream, as a dropped TCP connection or a
    /// restarted API server would. Clients reconnect and resume from their last resourceVersion.
    pub fn drop_watches(&self) {
        self.signals.drops.send_modify(|n| *n += 1);
    }

    /// While paused, watches hold back events (lists and GETs still answer): an object can exist
    /// on the server before any watch has told a client about it.
    pub fn pause_watches(&self, paused: bool) {
        self.signals.paused.send_replace(paused);
    }

    /// While stalled, the server answers nothing: requests wait and watches go quiet, as an API
    /// server under overload or behind a broken network does.
    pub fn stall(&self, stalled: bool) {
        self.signals.stalled.send_replace(stalled);
    }

    /// While set, every single-object GET answers with this HTTP status (a `Status` body), so
    /// tests can see a live lookup fail.
    pub fn fail_gets(&self, status: Option<u16>) {
        self.lock().fail_gets = status;
    }

    /// The newest revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// How many requests arrived for `path` (without the query string).
    pub fn requests(&self, path: &str) -> usize {
        self.lock().requests.get(path).copied().unwrap_or(0)
    }

    /// Every request so far as `METHOD path?query`, oldest first, with ` (metadata)` appended
    /// when the client asked for `PartialObjectMetadata` only.
    pub fn request_log(&self) -> Vec<String> {
        self.lock().request_log.clone()
    }

    /// The most non-watch requests the server was serving at once.
    pub fn max_in_flight(&self) -> usize {
        self.lock().max_in_flight
    }

    /// Starts counting [`Cluster::max_in_flight`] afresh (e.g. once initial lists are done).
    pub fn reset_max_in_flight(&self) {
        let mut state = self.lock();
        state.max_in_flight = state.in_flight;
    }

    /// Watch connections open now for a resource plural (e.g. `pods`).
    pub fn watchers(&self, plural: &str) -> usize {
        self.lock().watchers.get(plural).copied().unwrap_or(0)
    }

    /// Waits until `check` holds on the cluster, re-checking after each change of revision,
    /// request or watch connection. Callers bound it with `tokio::time::timeout`.
    pub async fn until(&self, mut check: impl FnMut(&Cluster) -> bool) {
        let mut changes = self.signals.revision.subscribe();
        loop {
            if check(self) {
                return;
            }
            // Requests and connections do not move the revision; they notify it unchanged.
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Adds an object given as JSON (its `apiVersion` and `kind` are set from the registered
    /// type), for resources k8s-openapi has no type for at the fixture's version, and sends
    /// `ADDED`.
    pub fn create_json(&self, info: ResourceType, object: Value) -> Result<u64, FixtureError> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let namespace = scoped(info, namespace).to_owned();
        if name.is_empty() || (info.namespaced && namespace.is_empty()) {
            return Err(FixtureError::Unnamed(info.plural));
        }
        self.write_value(info, namespace, name, object, Write::Create)
    }

    /// An object as stored now, as JSON (resourceVersion included), or `None`.
    pub fn get_json(&self, info: ResourceType, namespace: &str, name: &str) -> Option<Value> {
        let state = self.lock();
        let entry = state
            .resources
            .get(&(info.group, info.plural))?
            .objects
            .get(&(scoped(info, namespace).to_owned(), name.to_owned()))?
            .clone();
        drop(state);
        serde_json::from_slice(&entry.full).ok()
    }

    pub(crate) fn notify(&self) {
        self.signals.revision.send_modify(|_| {});
    }

    fn write<K>(&self, info: ResourceType, object: &K, mode: Write) -> Result<u64, FixtureError>
    where
        K: k8s_openapi::Metadata<Ty = ObjectMeta> + Serialize,
    {
        let meta = object.metadata();
        let name = meta.name.clone().unwrap_or_default();
        let namespace = scoped(info, meta.namespace.as_deref().unwrap_or_default()).to_owned();
        if name.is_empty() || (info.namespaced && namespace.is_empty()) {
            return Err(FixtureError::Unnamed(info.plural));
        }
        let value = serde_json::to_value(object)?;
        self.write_value(info, namespace, name, value, mode)
    }

    /// Stores a JSON object (see [`Cluster::create_json`]).
    fn write_value(
        &self,
        info: ResourceType,
        namespace: String,
        name: String,
        mut value: Value,
        mode: Write,
    ) -> Result<u64, FixtureError> {
        let mut state = self.lock();
        let revision = state.revision + 1;
        set_resource_version(&mut value, revision);
        // Encoded as the registered type: its version may differ from the caller's type's.
        let info = resource_mut(&mut state, info)?.info;
        let entry = Arc::new(encode(info, &namespace, &value)?);
        let resource = resource_mut(&mut state, info)?;
        let key = (namespace, name);
        let exists = resource.objects.contains_key(&key);
        let event = match (mode, exists) {
            (Write::Create, true) => {
                return Err(FixtureError::AlreadyExists {
                    resource: info.plural,
                    name: key.1,
                });
            }
            (Write::Update, false) => {
                return Err(FixtureError::NotFound {
                    resource: info.plural,
                    name: key.1,
                });
            }
            (_, true) => EventType::Modified,
            (_, false) => EventType::Added,
        };
        resource.objects.insert(key, entry.clone());
        resource.history.push(HistoryItem {
            revision,
            line: Line::Event(event, entry),
        });
        state.revision = revision;
        drop(state);
        self.signals.revision.send_replace(revision);
        Ok(revision)
    }
}

#[derive(Debug, Clone, Copy)]
enum Write {
    Create,
    Update,
    Apply,
}

pub(crate) fn scoped(info: ResourceType, namespace: &str) -> &str {
    if info.namespaced { namespace } else { "" }
}

pub(crate) fn resource_mut(
    state: &mut State,
    info: ResourceType,
) -> Result<&mut Resource, FixtureError> {
    state
        .resources
        .get_mut(&(info.group, info.plural))
        .ok_or(FixtureError::Unregistered(info.plural))
}

pub(crate) fn set_resource_version(value: &mut Value, revision: u64) {
    if let Some(object) = value.as_object_mut() {
        let metadata = object.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".into(), json!(revision.to_string()));
        }
    }
}

pub(crate) fn encode(
    info: ResourceType,
    namespace: &str,
    value: &Value,
) -> Result<Entry, FixtureError> {
    let mut full = value.clone();
    if let Some(object) = full.as_object_mut() {
        object.insert("apiVersion".into(), json!(info.api_version()));
        object.insert("kind".into(), json!(info.kind));
    }
    let meta = json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": value.get("metadata").cloned().unwrap_or_else(|| json!({})),
    });
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(Entry {
        namespace: namespace.to_owned(),
        name,
        full: Bytes::from(serde_json::to_vec(&full)?),
        meta: Bytes::from(serde_json::to_vec(&meta)?),
    })
}

impl Line {
    /// The line a watch sends, with the object in full or as metadata.
    pub(crate) fn render(&self, metadata_only: bool) -> Bytes {
        match self {
            Line::Raw(bytes) => bytes.clone(),
            Line::Event(event, entry) => event_line(
                event.wire(),
                if metadata_only {
                    &entry.meta
                } else {
                    &entry.full
                },
            ),
        }
    }
}

/// `{"type":TYPE,"object":OBJECT}\n`
pub(crate) fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 32);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}
