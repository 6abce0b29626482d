//! The directory key store (`--key-dir`): the stored form of [`crate::encode`] as files.
//!
//! ```text
//! DIR/keys.json     the index: each key's kid, algorithm and schedule (no secrets)
//! DIR/<kid>.pem     one PKCS#8 private key per key, mode 0600
//! DIR/.lock         taken (flock) while the directory is read or written
//! ```
//!
//! A write never leaves a half-written set behind, whenever the process dies:
//!
//! 1. each new key file is written to a temporary file, flushed to disk (fsync) and renamed
//!    over its final name, and the directory flushed ([`private_file::replace`]); key files are
//!    named after their key, so this never changes a key the current index uses;
//! 2. the index is written the same way: the rename of the index is the commit. Before it,
//!    readers see the old set (new key files are simply unused); after it, the new one;
//! 3. key files the index no longer names, and temporary files left by a crash, are deleted.
//!
//! Concurrency: an exclusive lock on `.lock` is held for the length of a write, a shared one for
//! a read, so a reader never sees a key file deleted under it. A write also checks that the
//! index generation is still the one its writer read (optimistic concurrency): two warrant
//! processes, or `warrant keys rotate` beside a running server, can share a directory safely;
//! the one that loses reloads and recomputes. The lock is `flock(2)`, which is reliable on local
//! filesystems; do not share a directory over NFS between machines: use a Kubernetes Secret.

use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::Mode;
use serde::Deserialize;
use tokio::sync::mpsc;
use warrant_watch::private_file;

use crate::lifecycle::ManagedKeySet;
use crate::purpose::KeyPurpose;

use crate::holder::{Held, KeyHolder};
use crate::store::{ChangeFeed, KeyStore, Saved, StoreError, StoreVersion, Stored};
use crate::stored::{Decoded, INDEX_FILE, decode, encode};

const LOCK_FILE: &str = ".lock";
/// How temporary files were named before [`private_file::replace`] wrote them: one a crash of
/// an older version left is removed like the current ones.
const OLD_TEMP_PREFIX: &str = ".tmp-";

/// A key set kept in a directory. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
    holder: Option<Held>,
    /// What its keys must be for; `None`: whatever it records.
    purpose: Option<KeyPurpose>,
}

impl DirStore {
    /// The store in `dir`. Nothing is read or created until it is loaded or saved.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirStore {
            dir: dir.into(),
            holder: None,
            purpose: Some(KeyPurpose::Tokens),
        }
    }

    store_builders!("the directory records their public keys and where they are.");

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io_error(&self, path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + use<> {
        let store = self.describe();
        let path = path.to_owned();
        move |source| StoreError::Io {
            store,
            path,
            source: Arc::new(source),
        }
    }

    fn lock(&self, exclusive: bool) -> Result<File, StoreError> {
        let path = self.dir.join(LOCK_FILE);
        let file = private_file::open_read_write(&path).map_err(self.io_error(&path))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(self.io_error(&path))?;
        Ok(file)
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.dir.join(name);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io_error(&path)(e)),
        }
    }

    /// The key set on disk, decoded but not vouched for yet (that asks the holder: not while
    /// the directory is locked, nor on a blocking thread).
    fn load_blocking(&self) -> Result<Option<Decoded>, StoreError> {
        if !self.dir.is_dir() {
            return Ok(None);
        }
        self.check_private()?;
        let _lock = self.lock(false)?;
        let Some(index) = self.read(INDEX_FILE)? else {
            return Ok(None);
        };
        decode(
            &self.describe(),
            &index,
            self.purpose,
            self.holder.as_ref(),
            |name| self.read(name),
        )
        .map(Some)
    }

    /// The generation of the index on disk, if there is one.
    fn current_generation(&self) -> Result<Option<u64>, StoreError> {
        #[derive(Deserialize)]
        struct Generation {
            generation: u64,
        }
        let Some(index) = self.read(INDEX_FILE)? else {
            return Ok(None);
        };
        let parsed: Generation =
            serde_json::from_slice(&index).map_err(|e| StoreError::Corrupt {
                store: self.describe(),
                reason: format!("{INDEX_FILE} is not a valid key index: {e}"),
            })?;
        Ok(Some(parsed.generation))
    }

    fn save_blocking(
        &self,
        keys: &ManagedKeySet,
        expected: Precondition<'_>,
        numbered: Numbered,
    ) -> Result<Saved, StoreError> {
        private_file::create_private_dir(&self.dir).map_err(self.io_error(&self.dir))?;
        self.check_private()?;
        let _lock = self.lock(true)?;
        let dir = private_file::open_dir(&self.dir).map_err(self.io_error(&self.dir))?;
        let current = self.current_generation()?;
        if let Precondition::Holds(expected) = expected
            && current.map(|g| StoreVersion(g.to_string())).as_ref() != expected
        {
            return Err(StoreError::Conflict {
                store: self.describe(),
            });
        }
        let generation = match numbered {
            Numbered::After(after) => current.unwrap_or(0).max(after) + 1,
            Numbered::As(generation) => generation,
        };
        let encoded = encode(keys, generation).map_err(|(kid, source)| StoreError::Key {
            store: self.describe(),
            kid,
            source,
        })?;
        // Keys first, each durable, then the index: its rename is the commit.
        for (name, bytes) in encoded.files() {
            let path = self.dir.join(name);
            private_file::replace(
                &dir,
                name,
                bytes,
                Mode::from_raw_mode(private_file::OWNER_ONLY),
            )
            .map_err(self.io_error(&path))?;
        }
        let keep: Vec<&str> = encoded.key_files().collect();
        self.clean_up(&dir, &keep);
        Ok(Saved {
            version: StoreVersion(generation.to_string()),
            generation,
        })
    }

    /// Writes `keys` over whatever the directory holds, as one commit like
    /// [`save`](KeyStore::save), as generation `generation`: for a directory with one writer
    /// that copies another store (a node's local copy of a shared store, [`crate::LocalCopy`]),
    /// which keeps the generation of what it copies.
    pub async fn replace(
        &self,
        keys: &ManagedKeySet,
        generation: u64,
    ) -> Result<Saved, StoreError> {
        let keys = keys.clone();
        self.blocking("write", move |store| {
            store.save_blocking(&keys, Precondition::Any, Numbered::As(generation))
        })
        .await
    }

    /// Runs `work` (a `doing`: a read or a write) where blocking file I/O belongs, off the
    /// runtime's threads.
    async fn blocking<T: Send + 'static>(
        &self,
        doing: &str,
        work: impl FnOnce(DirStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || work(store))
            .await
            .map_err(|e| StoreError::Unavailable {
                store: self.describe(),
                reason: format!("the {doing} was interrupted: {e}"),
            })?
    }

    /// When the index was last written (its modification time), if there is one.
    pub fn written_at(&self) -> Result<Option<jiff::Timestamp>, StoreError> {
        let path = self.dir.join(INDEX_FILE);
        let modified = match fs::metadata(&path).and_then(|m| m.modified()) {
            Ok(modified) => modified,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io_error(&path)(e)),
        };
        jiff::Timestamp::try_from(modified)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                store: self.describe(),
                reason: format!("{INDEX_FILE} has an impossible modification time: {e}"),
            })
    }

    /// Refuses a directory others may write to, or that another user owns: whoever can write
    /// in it can replace the keys warrant signs with.
    fn check_private(&self) -> Result<(), StoreError> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let meta = fs::metadata(&self.dir).map_err(self.io_error(&self.dir))?;
            let mode = meta.mode() & 0o7777;
            let dir = self.dir.display();
            if mode & 0o022 != 0 {
                return Err(StoreError::Insecure {
                    store: self.describe(),
                    reason: format!(
                        "the key directory is writable by its group or by others (mode {mode:04o}); private keys are not kept there: run `chmod 700 {dir}`"
                    ),
                });
            }
            let me = rustix::process::geteuid().as_raw();
            if meta.uid() != me {
                return Err(StoreError::Insecure {
                    store: self.describe(),
                    reason: format!(
                        "the key directory belongs to user {} and warrant runs as user {me}; private keys are not kept in another user's directory: `chown` it to the user warrant runs as",
                        meta.uid()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Deletes key files the index does not name and temporary files left by a crash. Failures
    /// are logged: they leave an unused file, never a wrong key set.
    fn clean_up(&self, dir: &OwnedFd, keep: &[&str]) {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) => {
                tracing::warn!(dir = %self.dir.display(), %error, "cannot list the key directory to remove unused key files");
                return;
            }
        };
        let mut removed = false;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let unused_key = name.ends_with(".pem") && !keep.contains(&name);
            let temporary = private_file::is_temporary(name) || name.starts_with(OLD_TEMP_PREFIX);
            if unused_key || temporary {
                match fs::remove_file(entry.path()) {
                    Ok(()) => removed = true,
                    Err(error) => {
                        tracing::warn!(file = %entry.path().display(), %error, "cannot remove an unused file from the key directory");
                    }
                }
            }
        }
        if removed && let Err(error) = rustix::fs::fsync(dir) {
            tracing::warn!(%error, "cannot flush the key directory after removing unused files");
        }
    }
}

impl KeyStore for DirStore {
    fn holder(&self) -> Option<Arc<dyn KeyHolder>> {
        self.holder.as_ref().map(|held| held.holder().clone())
    }

    fn purpose(&self) -> Option<KeyPurpose> {
        self.purpose
    }

    fn describe(&self) -> String {
        format!("key directory {}", self.dir.display())
    }

    async fn load(&self) -> Result<Option<Stored>, StoreError> {
        let Some(decoded) = self.blocking("read", |store| store.load_blocking()).await? else {
            return Ok(None);
        };
        let (keys, generation) = decoded.vouched().await?;
        Ok(Some(Stored {
            keys,
            version: StoreVersion(generation.to_string()),
            generation,
        }))
    }

    async fn save_after(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
        after: u64,
    ) -> Result<Saved, StoreError> {
        let keys = keys.clone();
        let expected = expected.cloned();
        self.blocking("write", move |store| {
            store.save_blocking(
                &keys,
                Precondition::Holds(expected.as_ref()),
                Numbered::After(after),
            )
        })
        .await
    }

    fn watch(&self) -> Result<ChangeFeed, StoreError> {
        let (sender, receiver) = mpsc::channel(1);
        let on_change = move || {
            // A full channel means a change is already waiting to be read.
            let _ = sender.try_send(());
        };
        let watcher =
            warrant_watch::watch_files(&[self.dir.join(INDEX_FILE)], on_change).map_err(|e| {
                StoreError::Unavailable {
                    store: self.describe(),
                    reason: e.to_string(),
                }
            })?;
        Ok(ChangeFeed::from_channel(receiver, watcher))
    }
}

/// What a write expects the directory to hold.
#[derive(Clone, Copy)]
enum Precondition<'a> {
    /// This version (`None`: no key set): another writer's change is a conflict.
    Holds(Option<&'a StoreVersion>),
    /// Anything: the write replaces it.
    Any,
}

/// How a write numbers its generation.
#[derive(Clone, Copy)]
enum Numbered {
    /// After the directory's, and after this one.
    After(u64),
    /// As this one (a copy of another store's key set).
    As(u64),
}

#[cfg(test)]
mod tests;
