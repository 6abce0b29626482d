//! The plugin's token cache: a controller that builds thousands of clients runs the plugin
//! thousands of times, and should not mint thousands of tokens.
//!
//! - One file per (warrant URL, service account, audience, binding, lifetime asked), named by
//!   the SHA-256 of those, in a per-user directory (`$WARRANT_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/warrant/credentials`, else `~/.cache/warrant/credentials`), created `0700`;
//!   entries are written `0600`, to a temporary file then renamed, so a reader never sees half.
//! - An entry is used until 80 % of its token's lifetime has passed (the kubelet's rule for
//!   projected tokens), then replaced.
//! - Concurrent runs for the same entry take an exclusive lock on its `.lock` file: the first
//!   mints, the others wait and find its token. A run waits at most [`LOCK_WAIT`] (longer than
//!   one request to warrant may take); past it, it goes on without the cache.
//! - An entry that does not parse, or names another key than its file's (a foreign or damaged
//!   file), is ignored and replaced, never an error. A cache directory that cannot be created or
//!   locked is skipped: the plugin then mints every time, as without a cache.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use aws_lc_rs::digest;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The longest a run waits for another run's lock on the same entry.
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(40);

/// The share of a token's lifetime after which the cache mints a new one.
const REUSE_SHARE: f64 = 0.8;

/// What names an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Key {
    pub(crate) warrant: String,
    pub(crate) service_account: String,
    pub(crate) audience: String,
    /// The bound object's UID, if the own token (and so the new one) is bound.
    pub(crate) binding: Option<String>,
    pub(crate) expiration_seconds: Option<i64>,
}

/// A cached token.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    pub(crate) key: Key,
    pub(crate) token: String,
    pub(crate) issued_at: Timestamp,
    pub(crate) expiration_timestamp: Timestamp,
}

impl Entry {
    /// Whether the entry may still be handed out at `now`.
    fn fresh(&self, now: Timestamp) -> bool {
        let lifetime = self
            .expiration_timestamp
            .as_second()
            .saturating_sub(self.issued_at.as_second());
        let reuse_until = self.issued_at.as_second() as f64 + lifetime as f64 * REUSE_SHARE;
        (now.as_second() as f64) < reuse_until
    }
}

/// The default cache directory.
pub(crate) fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("warrant/credentials"));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".cache/warrant/credentials"))
}

/// An entry's slot, locked for this run.
pub(crate) struct Slot {
    path: PathBuf,
    key: Key,
    // Held until the slot is dropped: the lock.
    _lock: File,
}

impl Slot {
    /// Locks the slot for `key` in `dir`, waiting at most [`LOCK_WAIT`] for another run;
    /// `None` when the cache cannot be used.
    pub(crate) async fn lock(dir: &Path, key: Key) -> Option<Slot> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
        // One that existed before keeps its owner, but not looser permissions.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).ok()?;
        let name = {
            let text = serde_json::to_string(&key).ok()?;
            let hash = digest::digest(&digest::SHA256, text.as_bytes());
            hash.as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(dir.join(format!("{name}.lock")))
            .ok()?;
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(_) => return None,
            }
        }
        Some(Slot {
            path: dir.join(format!("{name}.json")),
            key,
            _lock: lock,
        })
    }

    /// The cached entry, if there is a usable one at `now`.
    pub(crate) fn get(&self, now: Timestamp) -> Option<Entry> {
        let text = std::fs::read(&self.path).ok()?;
        let entry: Entry = serde_json::from_slice(&text).ok()?;
        (entry.key == self.key && entry.fresh(now)).then_some(entry)
    }

    /// Stores `entry` (best effort: a cache that cannot be written is only slower).
    pub(crate) fn put(&self, token: String, issued_at: Timestamp, expires: Timestamp) {
        let entry = Entry {
            key: self.key.clone(),
            token,
            issued_at,
            expiration_timestamp: expires,
        };
        let Ok(text) = serde_json::to_vec(&entry) else {
            return;
        };
        let temporary = self
            .path
            .with_extension(format!("{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        let written = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(&text))
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn key() -> Key {
        Key {
            warrant: "https://w".into(),
            service_account: "demo/app".into(),
            audience: "member-1".into(),
            binding: Some("pod-uid".into()),
            expiration_seconds: None,
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[tokio::test]
    async fn an_entry_serves_until_four_fifths_of_its_lifetime() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let slot = Slot::lock(&dir, key()).await.unwrap();
        assert!(slot.get(at(1000)).is_none());
        slot.put("t".into(), at(1000), at(2000));
        assert_eq!(slot.get(at(1799)).unwrap().token, "t");
        assert!(slot.get(at(1800)).is_none());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&slot.path), 0o600);
        assert_eq!(mode(&dir), 0o700, "an existing directory is made private");
    }

    #[tokio::test]
    async fn a_damaged_or_foreign_entry_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let slot = Slot::lock(dir.path(), key()).await.unwrap();
        std::fs::write(&slot.path, b"{not json").unwrap();
        assert!(slot.get(at(1000)).is_none());
        // Another key's entry in this file (copied, or a hash collision): not ours.
        let mut other = key();
        other.audience = "elsewhere".into();
        let foreign = Entry {
            key: other,
            token: "x".into(),
            issued_at: at(1000),
            expiration_timestamp: at(2000),
        };
        std::fs::write(&slot.path, serde_json::to_vec(&foreign).unwrap()).unwrap();
        assert!(slot.get(at(1001)).is_none());
        slot.put("mine".into(), at(1000), at(2000));
        assert_eq!(slot.get(at(1001)).unwrap().token, "mine");
    }

    /// A run that holds the lock for good (stopped, hung) delays the others by at most
    /// LOCK_WAIT, after which they go on without the cache.
    #[tokio::test(start_paused = true)]
    async fn a_lock_held_for_good_is_waited_for_a_bounded_time() {
        let dir = tempfile::tempdir().unwrap();
        let _held = Slot::lock(dir.path(), key()).await.unwrap();
        let started = tokio::time::Instant::now();
        // flock is per open file description: a second open contends like another process.
        assert!(Slot::lock(dir.path(), key()).await.is_none());
        assert!(started.elapsed() >= LOCK_WAIT);
    }
}
