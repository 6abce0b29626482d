//! The Unix socket kube-apiserver dials (`--service-account-signing-endpoint`).
//!
//! Whoever can connect can have tokens signed for any identity of the cluster, so:
//!
//! - the socket is owner-only (`0600`), or owner and one group (`0660`) with
//!   `--signing-endpoint-group`, from the moment its path exists: it is bound inside a private
//!   directory made for the purpose (mode `0700`, a fresh unpredictable name beside the final
//!   path), given its mode and group there, renamed into place, and the directory removed. No
//!   one but the owner (and root) can reach it before it has its mode, whatever the umask;
//! - its directory must not be writable by everyone unless it is sticky (as `/tmp` is): anyone
//!   could otherwise swap the private directory for one of their own;
//! - a socket file left by a process that died is replaced (nothing answers on it), but one a
//!   live process serves is never taken over, and a path that is not a socket is never touched;
//! - a missing parent directory is created (`0755`; the socket's own mode is the guard);
//! - the file is removed on shutdown if it is still the one this process bound.
//!
//! The file mode is the first guard; the server checks each connecting process's credentials
//! too ([`crate::connections`]).

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where to serve, and who besides the owner may connect.
#[derive(Debug, Clone)]
pub struct SocketOptions {
    /// The socket's path.
    pub path: PathBuf,
    /// A group (name or number) whose members may connect too.
    pub group: Option<String>,
}

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// A live process answers on the path.
    #[error(
        "{0}: another process is serving on this socket; stop it, or give --signing-endpoint another path"
    )]
    InUse(PathBuf),
    /// The path is something else than a socket.
    #[error("{0} exists and is not a socket: refusing to replace it")]
    NotASocket(PathBuf),
    /// The group is unknown.
    #[error(
        "--signing-endpoint-group {0:?}: no such group in /etc/group (give a name or a number)"
    )]
    UnknownGroup(String),
    /// The path is too long for a Unix socket address.
    #[error("{0}: too long for a Unix socket path (at most 100 bytes here)")]
    TooLong(PathBuf),
    /// The socket's directory is writable by everyone and not sticky.
    #[error(
        "{0} is writable by every user and not sticky: anyone could replace the signing socket there; use a directory only its owner can write (or a sticky one)"
    )]
    UnsafeDirectory(PathBuf),
    /// Any other failure, with what was being done.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SocketError + 'a {
    move |source| SocketError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// The longest path bound here: the kernel's limit is 107 bytes, and the private directory's
/// name adds a few while the socket is bound inside it.
const MAX_PATH_BYTES: usize = 100;
/// The kernel's limit on a socket path (`sun_path` less its terminating NUL).
const KERNEL_PATH_BYTES: usize = 107;
/// The socket's name inside the private directory.
const BOUND_NAME: &str = "s";

/// A bound socket. Dropping it removes the socket file if it is still this one.
#[derive(Debug)]
pub struct BoundSocket {
    listener: Option<tokio::net::UnixListener>,
    path: PathBuf,
    inode: (u64, u64),
    owner: u32,
    group: Option<u32>,
}

impl BoundSocket {
    /// The listener, once (the server takes it).
    pub fn take_listener(&mut self) -> Option<tokio::net::UnixListener> {
        self.listener.take()
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The user that owns the socket file (this process's).
    pub fn owner_uid(&self) -> u32 {
        self.owner
    }

    /// The socket file's group, when `--signing-endpoint-group` gave one.
    pub fn group_gid(&self) -> Option<u32> {
        self.group
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        // Only if the file is still ours: a successor may have replaced it.
        if let Ok(meta) = std::fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.inode
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds the socket as the module documentation describes. Call inside a tokio runtime.
pub fn bind(options: &SocketOptions) -> Result<BoundSocket, SocketError> {
    let path = &options.path;
    if path.as_os_str().len() > MAX_PATH_BYTES {
        return Err(SocketError::TooLong(path.clone()));
    }
    let gid = options.group.as_deref().map(group_id).transpose()?;
    clear_stale(path)?;
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => parent,
        None => Path::new("."),
    };
    if !parent.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(io("cannot create the directory of", path))?;
    }
    let parent_meta = std::fs::metadata(parent).map_err(io("cannot read", parent))?;
    if parent_meta.mode() & 0o002 != 0 && parent_meta.mode() & 0o1000 == 0 {
        return Err(SocketError::UnsafeDirectory(parent.to_owned()));
    }

    let private = PrivateDir::create(parent)?;
    let bound_at = private.path.join(BOUND_NAME);
    if bound_at.as_os_str().len() > KERNEL_PATH_BYTES {
        return Err(SocketError::TooLong(path.clone()));
    }
    // Inside the private directory the socket's own mode does not matter yet: no one else can
    // reach it. It gets its final mode before it is moved where others can.
    let listener = std::os::unix::net::UnixListener::bind(&bound_at)
        .map_err(io("cannot listen on", &bound_at))?;
    let mode = if gid.is_some() { 0o660 } else { 0o600 };
    std::fs::set_permissions(&bound_at, std::fs::Permissions::from_mode(mode))
        .map_err(io("cannot set the mode of", &bound_at))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(&bound_at, None, Some(gid))
            .map_err(io("cannot give the group to", &bound_at))?;
    }
    std::fs::rename(&bound_at, path).map_err(io("cannot move the socket to", path))?;
    drop(private);
    let meta = std::fs::symlink_metadata(path).map_err(io("cannot read", path))?;
    listener
        .set_nonblocking(true)
        .map_err(io("cannot configure", path))?;
    let listener =
        tokio::net::UnixListener::from_std(listener).map_err(io("cannot serve on", path))?;
    Ok(BoundSocket {
        listener: Some(listener),
        path: path.clone(),
        inode: (meta.dev(), meta.ino()),
        owner: meta.uid(),
        group: gid,
    })
}

/// A directory only this process's user can enter, where the socket is bound before it has
/// its mode. Removed, with anything left in it, when dropped.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Tries a few fresh names: one someone else made first is never used.
    pub(crate) fn create(parent: &Path) -> Result<PrivateDir, SocketError> {
        let mut attempt = 0u32;
        loop {
            let path = parent.join(format!(
                ".warrant-{:012x}",
                unpredictable() & 0xffff_ffff_ffff
            ));
            // The mode is at most 0700 whatever the umask (it only clears bits); set exactly
            // 0700 afterwards in case the umask took the owner's own bits.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let dir = PrivateDir { path };
                    std::fs::set_permissions(&dir.path, std::fs::Permissions::from_mode(0o700))
                        .map_err(io("cannot set the mode of", &dir.path))?;
                    return Ok(dir);
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
                Err(e) => return Err(io("cannot create a private directory in", parent)(e)),
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path.join(BOUND_NAME));
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// 64 bits another process cannot guess: std's per-process random hash keys (seeded from the
/// operating system), without a dependency for it.
fn unpredictable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// Removes a socket file nothing answers on; refuses a live socket or anything not a socket.
fn clear_stale(path: &Path) -> Result<(), SocketError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("cannot read", path)(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket(path.to_owned()));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(SocketError::InUse(path.to_owned())),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            tracing::info!(path = %path.display(), "replacing a socket file nothing answers on (left by a process that stopped)");
            std::fs::remove_file(path).map_err(io("cannot remove the stale socket", path))
        }
        Err(e) => Err(io("cannot check whether a process serves on", path)(e)),
    }
}

/// A group's number: given as one, or looked up by name in `/etc/group`.
fn group_id(group: &str) -> Result<u32, SocketError> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
    groups
        .lines()
        .find_map(|line| {
            let mut fields = line.split(':');
            (fields.next()? == group).then_some(())?;
            fields.nth(1)?.parse().ok()
        })
        .ok_or_else(|| SocketError::UnknownGroup(group.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(path: &Path) -> SocketOptions {
        SocketOptions {
            path: path.to_owned(),
            group: None,
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[tokio::test]
    async fn the_socket_is_owner_only_or_shared_with_one_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/signer.sock");
        let bound = bind(&options(&path)).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        drop(bound);
        assert!(!path.exists(), "removed on shutdown");

        // The process's own group, by number and by name (root's group is 0 here or any
        // group the test runs as).
        let gid = std::fs::metadata(dir.path()).unwrap().gid();
        let shared = SocketOptions {
            group: Some(gid.to_string()),
            ..options(&path)
        };
        let _bound = bind(&shared).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.gid()), (0o660, gid));
    }

    #[tokio::test]
    async fn the_socket_is_bound_in_a_private_directory_and_moved_into_place() {
        let dir = tempfile::tempdir().unwrap();
        // The directory a bind uses: 0700, ours, a fresh name each time, gone when dropped.
        let private = PrivateDir::create(dir.path()).unwrap();
        let meta = std::fs::symlink_metadata(private.path()).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o7777, 0o700);
        assert_eq!(meta.uid(), std::fs::metadata(dir.path()).unwrap().uid());
        let other = PrivateDir::create(dir.path()).unwrap();
        assert_ne!(private.path(), other.path());
        let name = private.path().to_owned();
        drop((private, other));
        assert!(!name.exists());

        // After a bind, the socket is all that is left beside it.
        let path = dir.path().join("signer.sock");
        let bound = bind(&options(&path)).unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["signer.sock"]);
        assert_eq!((bound.owner_uid(), bound.group_gid()), (meta.uid(), None));
    }

    #[tokio::test]
    async fn a_directory_anyone_may_write_is_refused_unless_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = bind(&options(&open.join("signer.sock"))).unwrap_err();
        assert!(matches!(error, SocketError::UnsafeDirectory(_)), "{error}");
        assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "nothing left");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let _bound = bind(&options(&open.join("signer.sock"))).unwrap();
        assert_eq!(mode(&open.join("signer.sock")), 0o600);
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_a_live_one_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signer.sock");
        // A socket file whose process is gone: bound, then its listener closed without cleanup.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let mut bound = bind(&options(&path)).unwrap();
        let _listening = bound.take_listener().unwrap();

        // Another process (here: the bound socket above, still open) serves on it.
        let second = bind(&options(&path)).unwrap_err();
        assert!(matches!(second, SocketError::InUse(_)), "{second}");
        assert!(
            second.to_string().ends_with("another process is serving on this socket; stop it, or give --signing-endpoint another path"),
            "{second}"
        );
        assert_eq!(mode(&path), 0o600, "the live socket is left as it was");
    }

    #[tokio::test]
    async fn what_is_not_a_socket_is_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signer.sock");
        std::fs::write(&path, "precious").unwrap();
        let error = bind(&options(&path)).unwrap_err();
        assert!(matches!(error, SocketError::NotASocket(_)), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");

        let unknown = SocketOptions {
            group: Some("no-such-group-here".into()),
            ..options(&dir.path().join("other.sock"))
        };
        assert!(matches!(
            bind(&unknown).unwrap_err(),
            SocketError::UnknownGroup(_)
        ));
        let long = dir.path().join("x".repeat(120));
        assert!(matches!(
            bind(&options(&long)).unwrap_err(),
            SocketError::TooLong(_)
        ));
    }
}
