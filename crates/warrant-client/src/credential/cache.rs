//! The plugin's token cache: a controller that builds thousands of clients runs the plugin
//! thousands of times, and should not mint thousands of tokens.
//!
//! - One file per (warrant URL, service account, audience, binding, lifetime asked), named by
//!   the SHA-256 of those, in a per-user directory (`$WARRANT_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/warrant/credentials`, else `~/.cache/warrant/credentials`), created `0700`;
//!   entries are written `0600` by `warrant_watch::private_file::replace`, so a reader never sees half.
//! - An entry is used until 80 % of its token's lifetime has passed (the kubelet's rule for
//!   projected tokens), then replaced.
//! - Concurrent runs for the same entry take an exclusive lock on its `.lock` file: the first
//!   mints, the others wait and find its token. A run waits at most [`LOCK_WAIT`] (longer than
//!   one request to warrant may take); past it, it goes on without the cache.
//! - An entry that does not parse, or names another key than its file's (a foreign or damaged
//!   file), is ignored and replaced, never an error. A cache directory that cannot be created or
//!   locked is skipped: the plugin then mints every time, as without a cache.
//!
//! Who controls the directory: a path such as `/tmp/warrant-credentials` can be made first by
//! another user, who could then plant entries (tokens this plugin would hand to client-go) or
//! symbolic links (a `.lock` pointing where the plugin, perhaps root, would create a file).
//! So the directory is opened without following a symbolic link and must be a directory
//! owned by the effective user ([`Refused`] otherwise); everything inside is then reached
//! through that open directory (`openat`), never by path again, without following links. A
//! refused cache is not used at all: the run mints without it and says why on stderr.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use aws_lc_rs::digest;
use jiff::Timestamp;
use rustix::fs::{FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

use warrant_watch::private_file::inside;

/// The longest a run waits for another run's lock on the same entry.
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(40);

/// The largest entry read (a token and its key are a few kilobytes).
const MAX_ENTRY: u64 = 64 * 1024;

/// Why the cache is not used for this run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// The directory is a symbolic link (or a path component loops).
    #[error("{dir} is a symbolic link")]
    Symlink {
        /// The cache directory.
        dir: PathBuf,
    },
    /// The path is not a directory.
    #[error("{dir} is not a directory")]
    NotDirectory {
        /// The cache directory.
        dir: PathBuf,
    },
    /// Another user owns the directory: its entries are that user's choice.
    #[error("{dir} is owned by uid {owner}, not by this user (uid {user})")]
    Owner {
        /// The cache directory.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// The effective user.
        user: u32,
    },
    /// An entry's lock file is a symbolic link.
    #[error("{path} is a symbolic link")]
    LockSymlink {
        /// The lock file.
        path: PathBuf,
    },
    /// The directory cannot be created, opened or locked (a read-only file system, another
    /// run holding the lock past [`LOCK_WAIT`]): only slower, not a risk, and not reported.
    #[error("{dir}: {cause}")]
    Unavailable {
        /// The cache directory.
        dir: PathBuf,
        /// Why.
        #[source]
        cause: std::io::Error,
    },
}

impl Refused {
    /// Whether the refusal is worth a line on stderr: the cache is someone else's or a link,
    /// which an operator should know about; an unavailable cache is only slower.
    pub(crate) fn is_suspicious(&self) -> bool {
        !matches!(self, Refused::Unavailable { .. })
    }
}

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
    /// The thumbprint of the DPoP key the token is bound to (`cnf.jkt`), with
    /// `--key-binding dpop`: a bound token is never served where binding is off, nor an unbound
    /// one (or one bound to another key) where it is on. Absent (and left out of the entry's
    /// name) for unbound tokens, so their entries keep the names they had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) bound_key: Option<String>,
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
        now < crate::refresh::point_in_lifetime(
            self.issued_at,
            self.expiration_timestamp,
            crate::refresh::REFRESH_SHARE,
        )
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

/// Opens `dir` (creating it `0700` if missing) without following a symbolic link, checks it is
/// a directory of the effective user's, and makes it private. (The DPoP key lives there too.)
pub(crate) fn open_dir(dir: &Path) -> Result<OwnedFd, Refused> {
    let flags = inside(OFlags::RDONLY | OFlags::DIRECTORY);
    let unavailable = |cause: rustix::io::Errno| Refused::Unavailable {
        dir: dir.to_owned(),
        cause: cause.into(),
    };
    let opened = match rustix::fs::open(dir, flags, Mode::empty()) {
        Err(rustix::io::Errno::NOENT) => {
            // Missing: make it (and its parents), then open what is there now.
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|cause| Refused::Unavailable {
                    dir: dir.to_owned(),
                    cause,
                })?;
            rustix::fs::open(dir, flags, Mode::empty())
        }
        other => other,
    };
    let fd = opened.map_err(|errno| {
        // O_NOFOLLOW on a link is ELOOP; O_DIRECTORY on a file ENOTDIR. Ask lstat which.
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.file_type().is_symlink() => Refused::Symlink {
                dir: dir.to_owned(),
            },
            Ok(meta) if !meta.is_dir() => Refused::NotDirectory {
                dir: dir.to_owned(),
            },
            _ => unavailable(errno),
        }
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(unavailable)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return Err(Refused::NotDirectory {
            dir: dir.to_owned(),
        });
    }
    let user = rustix::process::geteuid().as_raw();
    if stat.st_uid != user {
        return Err(Refused::Owner {
            dir: dir.to_owned(),
            owner: stat.st_uid,
            user,
        });
    }
    // One that existed before keeps its owner (checked), but not looser permissions.
    if Mode::from_raw_mode(stat.st_mode) != Mode::RWXU {
        rustix::fs::fchmod(&fd, Mode::RWXU).map_err(unavailable)?;
    }
    Ok(fd)
}

/// An entry's slot, locked for this run.
pub(crate) struct Slot {
    /// The cache directory, as opened and checked.
    dir: OwnedFd,
    /// The entry's file name in it.
    name: String,
    key: Key,
    // Held until the slot is dropped: the lock.
    _lock: File,
}

impl Slot {
    /// Locks the slot for `key` in `dir`, waiting at most [`LOCK_WAIT`] for another run; or
    /// why the cache is not used.
    pub(crate) async fn lock(dir: &Path, key: Key) -> Result<Slot, Refused> {
        let fd = open_dir(dir)?;
        let unavailable = |cause: std::io::Error| Refused::Unavailable {
            dir: dir.to_owned(),
            cause,
        };
        let hash = {
            let text = serde_json::to_string(&key).map_err(|e| unavailable(e.into()))?;
            let hash = digest::digest(&digest::SHA256, text.as_bytes());
            hash.as_ref()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        let lock_name = format!("{hash}.lock");
        let lock = rustix::fs::openat(
            &fd,
            lock_name.as_str(),
            inside(OFlags::WRONLY | OFlags::CREATE),
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(|errno| match errno {
            rustix::io::Errno::LOOP => Refused::LockSymlink {
                path: dir.join(&lock_name),
            },
            other => unavailable(other.into()),
        })?;
        let lock = File::from(lock);
        let deadline = tokio::time::Instant::now() + LOCK_WAIT;
        loop {
            match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::WOULDBLOCK) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(other) => return Err(unavailable(other.into())),
            }
        }
        let name = format!("{hash}.json");
        Ok(Slot {
            dir: fd,
            name,
            key,
            _lock: lock,
        })
    }

    /// The cached entry, if there is a usable one at `now`.
    pub(crate) fn get(&self, now: Timestamp) -> Option<Entry> {
        let fd = rustix::fs::openat(
            &self.dir,
            self.name.as_str(),
            inside(OFlags::RDONLY | OFlags::NONBLOCK),
            Mode::empty(),
        )
        .ok()?;
        let file = File::from(fd);
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = Vec::new();
        file.take(MAX_ENTRY).read_to_end(&mut text).ok()?;
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
        let _ = warrant_watch::private_file::replace(
            &self.dir,
            &self.name,
            &text,
            Mode::RUSR | Mode::WUSR,
        );
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
            bound_key: None,
        }
    }

    /// A token bound to a key is kept apart from an unbound one and from one bound to another
    /// key: binding on never serves an unbound cached token, binding off never a bound one.
    #[tokio::test]
    async fn bound_and_unbound_tokens_have_separate_entries() {
        let dir = tempfile::tempdir().unwrap();
        let bound = |jkt: &str| Key {
            bound_key: Some(jkt.into()),
            ..key()
        };
        let unbound = Slot::lock(dir.path(), key()).await.unwrap();
        unbound.put("bearer".into(), at(1000), at(2000));
        drop(unbound);
        let slot = Slot::lock(dir.path(), bound("jkt-1")).await.unwrap();
        assert!(slot.get(at(1001)).is_none(), "binding on: no unbound token");
        slot.put("bound".into(), at(1000), at(2000));
        drop(slot);
        let other = Slot::lock(dir.path(), bound("jkt-2")).await.unwrap();
        assert!(other.get(at(1001)).is_none(), "another key: not this token");
        drop(other);
        let unbound = Slot::lock(dir.path(), key()).await.unwrap();
        assert_eq!(unbound.get(at(1001)).unwrap().token, "bearer");
        // An unbound key's entry name does not change with the new field.
        assert!(!serde_json::to_string(&key()).unwrap().contains("boundKey"));
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
        assert_eq!(mode(&dir.join(&slot.name)), 0o600);
        assert_eq!(mode(&dir), 0o700, "an existing directory is made private");
    }

    #[tokio::test]
    async fn a_damaged_or_foreign_entry_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let slot = Slot::lock(dir.path(), key()).await.unwrap();
        let path = dir.path().join(&slot.name);
        std::fs::write(&path, b"{not json").unwrap();
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
        std::fs::write(&path, serde_json::to_vec(&foreign).unwrap()).unwrap();
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
        let refused = Slot::lock(dir.path(), key()).await.err().unwrap();
        assert!(!refused.is_suspicious(), "{refused}");
        assert!(started.elapsed() >= LOCK_WAIT);
    }
}
