//! Where a managed key set lives between runs, and how replicas share it.
//!
//! A [`KeyStore`] holds one [`ManagedKeySet`] in its serialised form (see [`crate::encode`]:
//! an index of schedules plus one PKCS#8 PEM per key). Every replica reads it; writes use
//! optimistic concurrency: [`KeyStore::save`] succeeds only if the store still holds the
//! version the writer read, so two writers can never interleave, and the loser reloads and
//! recomputes (rotation is a pure function of what it reads, so recomputing is always right).
//!
//! Implementations: [`DirStore`](crate::DirStore) (a directory, `--key-dir`),
//! [`SecretStore`](crate::SecretStore) (a Kubernetes Secret, `--key-secret`: the encoded files
//! are its `data`, the version its `resourceVersion`, and a write is a replace with that
//! `resourceVersion`, made only by the replica holding the leader Lease) and [`MemoryStore`]
//! (tests).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use crate::lifecycle::ManagedKeySet;
use crate::purpose::KeyPurpose;
pub use crate::store_error::StoreError;
use crate::stored::{EncodedKeySet, decode, encode};

/// The version of a stored key set, opaque to everyone but its store: a directory's index
/// generation, a Secret's `resourceVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreVersion(pub String);

impl std::fmt::Display for StoreVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A key set as read from a store, with the version to write against.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The keys.
    pub keys: ManagedKeySet,
    /// The version read.
    pub version: StoreVersion,
    /// The key set's generation, as its index says: every write numbers it after the last, so
    /// a read whose generation is lower than one seen before is an older key set put back (a
    /// restored backup, an etcd restore), which the key manager refuses.
    pub generation: u64,
}

/// What a write left in the store: its version, and the generation the key set was written as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The version written.
    pub version: StoreVersion,
    /// The generation written.
    pub generation: u64,
}

/// Keeps a managed key set. Every replica reads it; writes are optimistic: [`save`](Self::save)
/// succeeds only if the store still holds the version the writer read, so writers never
/// interleave, and the loser reloads and recomputes. Implementations: [`DirStore`](crate::DirStore),
/// [`SecretStore`](crate::SecretStore) (the encoded files as a Secret's `data`, its
/// `resourceVersion` as the version, written only by the leader), [`MemoryStore`].
pub trait KeyStore: Send + Sync + 'static {
    /// What the store is, for messages: `key directory /var/lib/warrant/keys`.
    fn describe(&self) -> String;

    /// Reads the key set; `Ok(None)` if the store holds none yet.
    fn load(&self) -> impl Future<Output = Result<Option<Stored>, StoreError>> + Send;

    /// Writes `keys` if the store still holds `expected` (`None`: if it holds no key set), and
    /// returns the new version. Fails with [`StoreError::Conflict`] if another writer got
    /// there first; nothing is written then. A write is all or nothing: a reader sees the old
    /// set or the new one, even if the writer crashes half-way. The key set is numbered after
    /// the one read (see [`save_after`](Self::save_after)).
    fn save(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
    ) -> impl Future<Output = Result<StoreVersion, StoreError>> + Send {
        async move { Ok(self.save_after(keys, expected, 0).await?.version) }
    }

    /// As [`save`](Self::save), numbering the key set after both the generation read and
    /// `generation`: the highest its writer has seen, so that a store emptied or put back to
    /// an older key set is refilled or repaired forward, never with a generation that readers
    /// would take for a rollback.
    fn save_after(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
        generation: u64,
    ) -> impl Future<Output = Result<Saved, StoreError>> + Send;

    /// A feed that fires when the stored set may have changed (another writer, or an operator's
    /// `warrant keys rotate`). It may fire spuriously, including for this store's own writes.
    fn watch(&self) -> Result<ChangeFeed, StoreError>;

    /// What holds the store's private keys, if not the store itself (an HSM): new keys are
    /// generated there, and destroyed there when they stop signing.
    fn holder(&self) -> Option<Arc<dyn crate::KeyHolder>> {
        None
    }

    /// What the store's keys must be for; `None` when it is read whatever it records (see
    /// [`crate::KeyPurpose`]). A manager makes a new set's first key for it.
    fn purpose(&self) -> Option<KeyPurpose> {
        Some(KeyPurpose::Tokens)
    }
}

/// Notifications that a store may have changed.
pub struct ChangeFeed {
    inner: Feed,
    _guard: Option<Box<dyn Send>>,
}

enum Feed {
    Channel(mpsc::Receiver<()>),
    Watch(watch::Receiver<u64>),
    Never,
}

impl ChangeFeed {
    /// A feed fed by a channel; `guard` (a file watcher, a watch task's handle) is kept alive
    /// as long as the feed.
    pub fn from_channel(receiver: mpsc::Receiver<()>, guard: impl Send + 'static) -> Self {
        ChangeFeed {
            inner: Feed::Channel(receiver),
            _guard: Some(Box::new(guard)),
        }
    }

    /// A feed that fires whenever the watched value changes.
    pub fn from_watch(receiver: watch::Receiver<u64>) -> Self {
        ChangeFeed {
            inner: Feed::Watch(receiver),
            _guard: None,
        }
    }

    /// A feed that never fires, for stores that change only through their owner.
    pub fn never() -> Self {
        ChangeFeed {
            inner: Feed::Never,
            _guard: None,
        }
    }

    /// Waits for the next notification (several pending ones count as one). Waits forever
    /// once the source is gone.
    pub async fn changed(&mut self) {
        match &mut self.inner {
            Feed::Channel(receiver) => {
                if receiver.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
                while receiver.try_recv().is_ok() {}
            }
            Feed::Watch(receiver) => {
                if receiver.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            Feed::Never => std::future::pending::<()>().await,
        }
    }
}

impl std::fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangeFeed")
    }
}

/// A store in memory, holding exactly what a durable store would (the encoded files), for
/// tests and as the reference implementation of the [`KeyStore`] contract. Clones share the
/// same contents, as replicas share a Secret.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<MemoryInner>,
    holder: Option<crate::holder::Held>,
    /// What its keys must be for; `None`: whatever it records.
    purpose: Option<KeyPurpose>,
    /// This handle's change feed never fires (see [`MemoryStore::deaf`]).
    deaf: bool,
}

struct MemoryInner {
    contents: Mutex<MemoryContents>,
    changes: watch::Sender<u64>,
}

#[derive(Default)]
struct MemoryContents {
    files: Option<BTreeMap<String, Vec<u8>>>,
    /// Counts every change of the contents: the store's version.
    version: u64,
    /// The generation of the key set in `files` (0 without one): a write is numbered after it,
    /// as a Secret's writer numbers its write after the generation it read.
    generation: u64,
    unavailable: bool,
    writes_failing: bool,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        let (changes, _) = watch::channel(0);
        MemoryStore {
            holder: None,
            purpose: Some(KeyPurpose::Tokens),
            deaf: false,
            inner: Arc::new(MemoryInner {
                contents: Mutex::new(MemoryContents::default()),
                changes,
            }),
        }
    }

    /// Makes every read and write fail (or succeed again), to test how owners ride out an
    /// outage.
    pub fn set_unavailable(&self, unavailable: bool) {
        if let Ok(mut contents) = self.inner.contents.lock() {
            contents.unavailable = unavailable;
        }
    }

    /// Makes every write fail (or succeed again) while reads go on, as an API server that
    /// answers reads but refuses or cannot commit writes.
    pub fn set_writes_failing(&self, failing: bool) {
        if let Ok(mut contents) = self.inner.contents.lock() {
            contents.writes_failing = failing;
        }
    }

    store_builders!(
        "clones share the contents; this one opens and writes them through `holder` (tests of held keys)."
    );

    /// The same store, as a replica whose change notifications never arrive (a watch that broke
    /// silently) reaches it: reads and writes go through, its [`watch`](KeyStore::watch) never
    /// fires.
    pub fn deaf(mut self) -> Self {
        self.deaf = true;
        self
    }

    /// Deletes the stored key set, as an operator deleting a Secret would.
    pub fn clear(&self) {
        let version = match self.inner.contents.lock() {
            Ok(mut contents) => {
                contents.files = None;
                contents.generation = 0;
                contents.version += 1;
                contents.version
            }
            Err(_) => return,
        };
        self.inner.changes.send_replace(version);
    }

    /// Puts `files` (as [`files`](Self::files) returned them earlier) back in the store, as a
    /// backup restored over a Secret would: a new version holding an older key set.
    pub fn restore(&self, files: BTreeMap<String, Vec<u8>>) {
        let version = match self.inner.contents.lock() {
            Ok(mut contents) => {
                contents.generation = files
                    .get(crate::stored::INDEX_FILE)
                    .and_then(|index| serde_json::from_slice::<serde_json::Value>(index).ok())
                    .and_then(|index| index.get("generation")?.as_u64())
                    .unwrap_or(0);
                contents.files = Some(files);
                contents.version += 1;
                contents.version
            }
            Err(_) => return,
        };
        self.inner.changes.send_replace(version);
    }

    /// The stored files, as a Secret's `data` would hold them. They include private keys: keep
    /// them out of logs.
    pub fn files(&self) -> Option<BTreeMap<String, Vec<u8>>> {
        self.inner.contents.lock().ok()?.files.clone()
    }

    fn unavailable(&self) -> StoreError {
        StoreError::Unavailable {
            store: self.describe(),
            reason: "simulated outage".into(),
        }
    }
}

impl KeyStore for MemoryStore {
    fn holder(&self) -> Option<Arc<dyn crate::KeyHolder>> {
        self.holder.as_ref().map(|held| held.holder().clone())
    }

    fn purpose(&self) -> Option<KeyPurpose> {
        self.purpose
    }

    fn describe(&self) -> String {
        "memory store".into()
    }

    async fn load(&self) -> Result<Option<Stored>, StoreError> {
        let (files, version) = {
            let contents = self.inner.contents.lock().map_err(|_| self.unavailable())?;
            if contents.unavailable {
                return Err(self.unavailable());
            }
            match &contents.files {
                None => return Ok(None),
                Some(files) => (files.clone(), contents.version),
            }
        };
        let store = self.describe();
        let index = files
            .get(crate::stored::INDEX_FILE)
            .ok_or_else(|| StoreError::Corrupt {
                store: store.clone(),
                reason: format!("{} is missing", crate::stored::INDEX_FILE),
            })?;
        let (keys, generation) =
            decode(&store, index, self.purpose, self.holder.as_ref(), |name| {
                Ok(files.get(name).cloned())
            })?
            .vouched()
            .await?;
        Ok(Some(Stored {
            keys,
            version: StoreVersion(version.to_string()),
            generation,
        }))
    }

    async fn save_after(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
        after: u64,
    ) -> Result<Saved, StoreError> {
        let (version, generation) = {
            let mut contents = self.inner.contents.lock().map_err(|_| self.unavailable())?;
            if contents.unavailable || contents.writes_failing {
                return Err(self.unavailable());
            }
            let current = contents
                .files
                .as_ref()
                .map(|_| StoreVersion(contents.version.to_string()));
            if current.as_ref() != expected {
                return Err(StoreError::Conflict {
                    store: self.describe(),
                });
            }
            let generation = contents.generation.max(after) + 1;
            let encoded: EncodedKeySet =
                encode(keys, generation).map_err(|(kid, source)| StoreError::Key {
                    store: self.describe(),
                    kid,
                    source,
                })?;
            contents.files = Some(
                encoded
                    .files()
                    .map(|(name, bytes)| (name.to_owned(), bytes.to_vec()))
                    .collect(),
            );
            contents.version += 1;
            contents.generation = generation;
            (contents.version, generation)
        };
        self.inner.changes.send_replace(version);
        Ok(Saved {
            version: StoreVersion(version.to_string()),
            generation,
        })
    }

    fn watch(&self) -> Result<ChangeFeed, StoreError> {
        if self.deaf {
            return Ok(ChangeFeed::never());
        }
        Ok(ChangeFeed::from_watch(self.inner.changes.subscribe()))
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryStore")
    }
}
