//! A node's local copy of a shared key store (`--key-copy-dir`), to start from while the store
//! cannot be reached.
//!
//! kube-apiserver calls its external signer (Metadata, FetchKeys) before it serves anything and
//! refuses to start without keys, and a control plane's warrant reaches its `--key-secret` only
//! through a kube-apiserver. So each node keeps a copy of the last key set it read, and a
//! replica that starts while the store does not answer (the whole control plane started cold,
//! or one node whose kube-apiserver is not up yet) serves the copy's keys until it does. Once
//! the store answers, the store wins: its keys replace the copy's, in memory and on disk.
//!
//! - **Format**: a key directory ([`DirStore`]): the index and one file per key, each written to
//!   a temporary file, flushed and renamed, the index last; the directory is refused unless it
//!   belongs to warrant's user and no one else may write to it, and key files are `0600`. With
//!   keys held in an HSM the copy, like the store, holds public keys and locators only.
//! - **Refreshed** whenever the store is read or written with keys other than the copy's
//!   ([`CopiedStore`]): a rotation, a removal, a revocation, a copy found behind at startup.
//!   Never from anything but the store. The index's modification time says when.
//! - **Never behind what it held**: the copy keeps the generation of the store's key set it
//!   copies, and every revocation. A read of the store with a lower generation, or that undoes
//!   a revocation (a restored backup: see `rollback.rs`), is not copied: the copy goes on
//!   holding the newer set, so a node restarted after the store was put back still knows.
//!   Copies written before warrant kept the store's generation (they counted their own writes)
//!   carry no [`STORE_GENERATION_MARK`]: their generation says nothing of the store's, so it is
//!   read as 0 (their revocations still count) until the first refresh writes the mark. Read as
//!   it stands, such a copy could be higher than the store after an upgrade, and the Lease
//!   holder would write it back over keys made while the node was down.
//! - **Used** only at startup, and only when the store cannot be reached or holds nothing (see
//!   [`crate::KeyManager::open_from_copy`]); the replica never writes the store from it before
//!   the store has answered.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;
use tokio::sync::watch;

use crate::directory::DirStore;
use crate::holder::KeyHolder;
use crate::lifecycle::ManagedKeySet;
use crate::manager::Seed;
use crate::purpose::KeyPurpose;
use crate::rollback;
use crate::store::{ChangeFeed, KeyStore, Saved, StoreError, StoreVersion, Stored};

/// The file whose presence says the copy's generation is the store's (written by a copy that
/// keeps it), not a count of the copy's own writes, as copies made before it counted.
pub(crate) const STORE_GENERATION_MARK: &str = "store-generation";

/// How the copy stands, for `/readyz?verbose`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyState {
    /// When the copy was last written; `None` while there is none.
    pub written_at: Option<Timestamp>,
    /// True once the copy holds the keys the store last answered with.
    pub in_step: bool,
    /// Why the last refresh failed, if it did (the copy then holds older keys).
    pub last_error: Option<String>,
}

impl CopyState {
    /// One line for a readiness report at `now`: when the copy was written (how old it is),
    /// and how it stands.
    pub fn summary(&self, now: Timestamp) -> String {
        let written = self.written_at.map_or_else(
            || "none written yet".to_owned(),
            |t| format!("written at {}", crate::manager::at_ago(t, now)),
        );
        match (&self.last_error, self.in_step) {
            (Some(error), _) => format!("{written}; cannot be refreshed: {error}"),
            (None, true) => format!("{written}, holding the key store's keys"),
            (None, false) if self.written_at.is_some() => {
                format!("{written}; serving its keys until the key store answers")
            }
            (None, false) => written,
        }
    }
}

/// A node's local copy of a shared key store, kept in a directory.
pub struct LocalCopy {
    dir: DirStore,
    /// What the copy holds, as last read or written, with the store's generation it holds, so
    /// that it is written only when the store's keys differ, and never goes back.
    holds: Mutex<Option<(ManagedKeySet, u64)>>,
    state: watch::Sender<CopyState>,
}

impl LocalCopy {
    /// The copy in `dir`, its keys' private halves held by `holder` (the store's) if given.
    /// Nothing is read or written yet.
    pub fn new(dir: impl Into<std::path::PathBuf>, holder: Option<Arc<dyn KeyHolder>>) -> Self {
        let dir = DirStore::new(dir);
        let dir = match holder {
            Some(holder) => dir.with_holder(holder),
            None => dir,
        };
        LocalCopy {
            dir,
            holds: Mutex::new(None),
            state: watch::channel(CopyState::default()).0,
        }
    }

    /// The copy holds keys for `purpose`, as its store does (see [`DirStore::for_purpose`]).
    pub fn for_purpose(mut self, purpose: KeyPurpose) -> Self {
        self.dir = self.dir.for_purpose(purpose);
        self
    }

    /// The copy is read whatever its keys are for (see [`DirStore::of_any_purpose`]).
    pub fn of_any_purpose(mut self) -> Self {
        self.dir = self.dir.of_any_purpose();
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        self.dir.dir()
    }

    /// What the copy is, for messages: `local copy /var/lib/warrant/keys`.
    pub fn describe(&self) -> String {
        format!("local copy {}", self.dir.dir().display())
    }

    /// Follows how the copy stands.
    pub fn state(&self) -> watch::Receiver<CopyState> {
        self.state.subscribe()
    }

    /// Reads the copy: `Ok(None)` if there is none yet. A directory that others may write to
    /// is refused as a key directory is ([`StoreError::Insecure`]).
    pub async fn read(&self) -> Result<Option<Seed>, StoreError> {
        let Some(stored) = self.dir.load().await? else {
            return Ok(None);
        };
        let written_at = self.dir.written_at()?.ok_or_else(|| StoreError::Corrupt {
            store: self.describe(),
            reason: "the index went away while it was read".into(),
        })?;
        let generation = if self.dir.dir().join(STORE_GENERATION_MARK).exists() {
            stored.generation
        } else {
            tracing::info!(copy = %self.describe(), "the local copy was written by an earlier warrant, which numbered its own writes: its revocations are kept, its generation is not compared with the store's until the store refreshes it");
            0
        };
        *self.lock() = Some((stored.keys.clone(), generation));
        self.state.send_modify(|s| s.written_at = Some(written_at));
        Ok(Some(Seed {
            keys: stored.keys,
            written_at,
            generation,
        }))
    }

    /// Makes the copy hold `keys`, which the store just answered with as `generation`: written
    /// (atomically) only if they differ from what it holds, and never if they are older (see
    /// `rollback.rs`). A failure is logged and reported, never returned: the keys in force do
    /// not depend on the copy.
    pub async fn refresh(&self, keys: &ManagedKeySet, generation: u64, store: &str) {
        let held = self.lock().clone();
        if let Some((held, seen)) = &held
            && let Err(rollback) = rollback::check(held, *seen, keys, generation)
        {
            tracing::warn!(copy = %self.describe(), %store, %rollback, "the key store's keys are older than the local copy's: the copy keeps its own");
            self.state
                .send_if_modified(|s| std::mem::replace(&mut s.in_step, false));
            return;
        }
        if held
            .as_ref()
            .is_some_and(|(h, seen)| *seen == generation && h.same_records(keys))
        {
            self.state.send_if_modified(|s| {
                let changed = !s.in_step || s.last_error.is_some();
                s.in_step = true;
                s.last_error = None;
                changed
            });
            return;
        }
        let held = held.map(|(keys, _)| keys);
        let written = match self.dir.replace(keys, generation).await {
            Ok(_) => self.mark_store_generation(),
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            let mut first = false;
            self.state.send_modify(|s| {
                first = s.last_error.is_none();
                s.last_error = Some(error.to_string());
                s.in_step = false;
            });
            if first {
                tracing::error!(%error, "cannot refresh the local copy of the key store: a start without the store would serve older keys; retrying at the store's next change or read");
            }
            return;
        }
        let written_at = self.dir.written_at().ok().flatten();
        let was = self.state.borrow().clone();
        let kids = |set: &ManagedKeySet| -> Vec<String> {
            set.keys().iter().map(|k| k.kid().to_owned()).collect()
        };
        let new = kids(keys);
        let old = held.as_ref().map(kids).unwrap_or_default();
        let added: Vec<&String> = new.iter().filter(|k| !old.contains(k)).collect();
        let gone: Vec<&String> = old.iter().filter(|k| !new.contains(k)).collect();
        let copy = self.describe();
        match (held.is_some(), was.in_step) {
            (true, false) => tracing::warn!(
                %copy, %store, copy_written_at = %was.written_at.map(|t| t.to_string()).unwrap_or_default(),
                added = ?added, gone = ?gone,
                "the local copy was behind the key store: the store's keys replace it, in force and on disk"
            ),
            (true, true) => {
                tracing::info!(%copy, added = ?added, gone = ?gone, "local copy refreshed from the key store")
            }
            (false, _) => {
                tracing::info!(%copy, %store, keys = ?new, "local copy of the key store written")
            }
        }
        *self.lock() = Some((keys.clone(), generation));
        self.state.send_modify(|s| {
            s.written_at = written_at.or(s.written_at);
            s.in_step = true;
            s.last_error = None;
        });
    }

    /// Writes [`STORE_GENERATION_MARK`] once: from now on the copy's generation is the store's.
    fn mark_store_generation(&self) -> Result<(), StoreError> {
        let dir = self.dir.dir();
        if dir.join(STORE_GENERATION_MARK).exists() {
            return Ok(());
        }
        let io = |source: std::io::Error| StoreError::Io {
            store: self.describe(),
            path: dir.join(STORE_GENERATION_MARK),
            source: source.into(),
        };
        let fd = warrant_watch::private_file::open_dir(dir).map_err(io)?;
        warrant_watch::private_file::replace(
            fd,
            STORE_GENERATION_MARK,
            b"this copy's generation is its key store's\n",
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .map_err(io)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(ManagedKeySet, u64)>> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for LocalCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCopy")
            .field("dir", &self.dir.dir())
            .finish_non_exhaustive()
    }
}

/// A shared store whose every successful read and write also refreshes the node's
/// [`LocalCopy`]. Everything else is the store's: its description, versions, change feed and
/// holder.
#[derive(Debug, Clone)]
pub struct CopiedStore<S> {
    store: S,
    copy: Arc<LocalCopy>,
}

impl<S: KeyStore> CopiedStore<S> {
    /// `store`, copied into `copy`.
    pub fn new(store: S, copy: Arc<LocalCopy>) -> Self {
        CopiedStore { store, copy }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The copy.
    pub fn copy(&self) -> &Arc<LocalCopy> {
        &self.copy
    }
}

impl<S: KeyStore> KeyStore for CopiedStore<S> {
    fn describe(&self) -> String {
        self.store.describe()
    }

    async fn load(&self) -> Result<Option<Stored>, StoreError> {
        let loaded = self.store.load().await?;
        if let Some(stored) = &loaded {
            self.copy
                .refresh(&stored.keys, stored.generation, &self.describe())
                .await;
        }
        Ok(loaded)
    }

    async fn save_after(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
        after: u64,
    ) -> Result<Saved, StoreError> {
        let saved = self.store.save_after(keys, expected, after).await?;
        self.copy
            .refresh(keys, saved.generation, &self.describe())
            .await;
        Ok(saved)
    }

    fn watch(&self) -> Result<ChangeFeed, StoreError> {
        self.store.watch()
    }

    fn holder(&self) -> Option<Arc<dyn KeyHolder>> {
        self.store.holder()
    }

    fn purpose(&self) -> Option<KeyPurpose> {
        self.store.purpose()
    }
}

#[cfg(test)]
mod tests;
