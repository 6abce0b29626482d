//! The files warrant writes for itself (the audit log, the key directory, `local-setup`'s keys
//! and certificates, the credential plugin's cache, the token agent's token): opened without
//! following a symbolic link, owner-only unless the caller names another mode, and replaced
//! whole. One place for all of them, so they cannot drift apart.
//!
//! Who controls the paths: the operator names them, but a link can be planted at a name by
//! whoever else writes in the directory (or by a mistake); a writer that followed it would put
//! warrant's private keys, or its audit trail, wherever it points, with warrant's permissions.
//! So:
//!
//! - [`open_append`] and [`open_read_write`] open with `O_NOFOLLOW`: a link at the path is an
//!   error that says so ([`LinkRefused`]), not a write somewhere else. New files get mode 0600.
//! - [`create_new`] creates with `O_CREAT|O_EXCL`, which fails on anything at the name, a link
//!   included (said as clearly).
//! - [`replace`] writes a temporary file beside the name (created with `O_EXCL` after removing
//!   one a crash or someone else left: removing a link removes the link, never what it points
//!   at), flushes it, gives it its mode, renames it over the name and flushes the directory:
//!   a reader that opens the name gets the old file or the new one, whole, and the rename
//!   survives a crash. Everything goes through the open directory (`openat`, `renameat`), never
//!   by path again.
//! - [`create_private_dir`] creates a missing directory (and its missing parents) mode 0700.
//!
//! Errors are [`std::io::Error`]s that do not name the path: each caller's error names it the
//! way its operator knows it (`--audit-log-path …`, `key directory …`). A link is said to be one
//! ([`LinkRefused`]), and a failure on [`replace`]'s temporary file names it ([`TemporaryFile`]).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

/// Owner read and write: the mode of every file created here unless the caller names another.
pub const OWNER_ONLY: u32 = 0o600;

/// A symbolic link was found where a file warrant writes belongs. The caller's error names the
/// path.
#[derive(Debug, thiserror::Error)]
#[error(
    "it is a symbolic link, and warrant does not follow one to a file it writes: remove the link, or give the file's own path"
)]
pub struct LinkRefused;

/// Whether `error` is [`LinkRefused`].
pub fn is_link_refused(error: &io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<LinkRefused>().is_some())
}

/// Flags for every open inside a directory: never through a symbolic link, never inherited.
pub fn inside(flags: OFlags) -> OFlags {
    flags | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens `path` for appending, creating it (mode 0600) if missing. A link at `path` is refused.
pub fn open_append(path: &Path) -> io::Result<File> {
    open(
        path,
        OpenOptions::new().create(true).append(true),
        OWNER_ONLY,
    )
}

/// Opens `path` for reading and writing (a lock file, say), creating it (mode 0600) if missing.
/// A link at `path` is refused.
pub fn open_read_write(path: &Path) -> io::Result<File> {
    open(
        path,
        OpenOptions::new().read(true).write(true).create(true),
        OWNER_ONLY,
    )
}

/// Creates `path`, which must not exist (nor be a link), with `mode` (less the umask). A file
/// that is there is never changed: the error's kind is [`io::ErrorKind::AlreadyExists`].
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    open(path, OpenOptions::new().write(true).create_new(true), mode)
}

fn open(path: &Path, options: &mut OpenOptions, mode: u32) -> io::Result<File> {
    let nofollow = i32::try_from(OFlags::NOFOLLOW.bits()).unwrap_or(0);
    options
        .mode(mode)
        .custom_flags(nofollow)
        .open(path)
        .map_err(|error| refused_if_link(path, error))
}

/// `O_NOFOLLOW` fails a link with `ELOOP`, `O_EXCL` with `EEXIST`; either also has other
/// causes, so the path is looked at (without following it) before the error is said to be a
/// link.
fn refused_if_link(path: &Path, error: io::Error) -> io::Error {
    let maybe_link = [Errno::LOOP, Errno::EXIST]
        .iter()
        .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()));
    let is_link =
        || std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
    if maybe_link && is_link() {
        io::Error::new(error.kind(), LinkRefused)
    } else {
        error
    }
}

/// Creates `dir` and its missing parents, each mode 0700 (less the umask); what exists is left
/// as it is.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Opens the directory `dir` (following links in its own path: that path is the operator's
/// choice) for [`replace`] and `openat`.
pub fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(rustix::fs::open(dir, flags, Mode::empty())?)
}

/// The name of the temporary file [`replace`] writes `name` through: hidden (a dot), so a
/// consumer that lists the directory does not take it for the file, and unique to this process.
pub fn temporary_name(name: &str) -> String {
    format!(".{name}.{}.tmp", std::process::id())
}

/// Whether `name` may be a temporary file [`replace`] left behind (a crash part way through).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".tmp")
}

/// A step of [`replace`] on its temporary file failed: the caller names the file, this names
/// the temporary one (something may be in its way).
#[derive(Debug, thiserror::Error)]
#[error("its temporary file {name}: {source}")]
pub struct TemporaryFile {
    /// The temporary file's name, in the same directory.
    pub name: String,
    /// Why.
    #[source]
    pub source: io::Error,
}

/// Replaces `name` in the open directory `dir` with `bytes`, with permissions `mode` (set
/// explicitly, whatever the umask), and flushes the directory. On failure the old file is
/// untouched and the temporary one removed.
pub fn replace(dir: impl AsFd, name: &str, bytes: &[u8], mode: Mode) -> io::Result<()> {
    let dir = dir.as_fd();
    let temporary = temporary_name(name);
    let on_temporary = |source: io::Error| {
        let kind = source.kind();
        let name = temporary.clone();
        io::Error::new(kind, TemporaryFile { name, source })
    };
    match rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(e) => return Err(on_temporary(e.into())),
    }
    let written = (|| {
        let fd = rustix::fs::openat(
            dir,
            temporary.as_str(),
            inside(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL),
            Mode::RUSR | Mode::WUSR,
        )
        .map_err(|e| on_temporary(e.into()))?;
        let mut file = File::from(fd);
        (|| {
            file.write_all(bytes)?;
            rustix::fs::fchmod(&file, mode)?;
            file.sync_all()
        })()
        .map_err(on_temporary)?;
        rustix::fs::renameat(dir, temporary.as_str(), dir, name)?;
        rustix::fs::fsync(dir)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
    }
    written
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// A link planted at the path, pointing at a file and at nothing: every opener refuses it
    /// with an error that says it is a link, and what it points at is neither written nor
    /// created.
    #[test]
    fn a_link_at_the_path_is_refused_by_every_opener() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"untouched").unwrap();
        let to_file = dir.path().join("to-file");
        symlink(&victim, &to_file).unwrap();
        let nowhere = dir.path().join("nowhere");
        let dangling = dir.path().join("dangling");
        symlink(&nowhere, &dangling).unwrap();
        type Opener = fn(&Path) -> io::Result<File>;
        let openers: [(&str, Opener); 3] = [
            ("open_append", open_append),
            ("open_read_write", open_read_write),
            ("create_new", |p| create_new(p, OWNER_ONLY)),
        ];
        for (opener, open) in openers {
            for link in [&to_file, &dangling] {
                let error = open(link).unwrap_err();
                assert!(
                    is_link_refused(&error),
                    "{opener} {}: {error}",
                    link.display()
                );
                assert!(error.to_string().contains("symbolic link"), "{error}");
            }
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
        assert!(!nowhere.exists(), "a file was created through a link");
    }

    /// New files are owner-only (whatever the umask lets through of a wider mode is the
    /// caller's choice); an existing file is appended to, or kept by `create_new`.
    #[test]
    fn new_files_are_owner_only_and_existing_ones_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.log");
        open_append(&log).unwrap().write_all(b"one\n").unwrap();
        open_append(&log).unwrap().write_all(b"two\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"one\ntwo\n");
        assert_eq!(mode(&log), 0o600);

        let lock = dir.path().join(".lock");
        drop(open_read_write(&lock).unwrap());
        assert_eq!(mode(&lock), 0o600);

        let key = dir.path().join("ca.key");
        create_new(&key, OWNER_ONLY)
            .unwrap()
            .write_all(b"key")
            .unwrap();
        assert_eq!(mode(&key), 0o600);
        let error = create_new(&key, OWNER_ONLY).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert!(!is_link_refused(&error), "{error}");
        assert_eq!(std::fs::read(&key).unwrap(), b"key");
    }

    /// Missing directories are created owner-only; one that exists keeps its mode.
    #[test]
    fn new_directories_are_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_private_dir(&nested).unwrap();
        assert_eq!((mode(&dir.path().join("a")), mode(&nested)), (0o700, 0o700));
        std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o750)).unwrap();
        create_private_dir(&nested).unwrap();
        assert_eq!(mode(&nested), 0o750);
    }

    #[test]
    fn the_file_is_replaced_whole_with_its_mode_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path()).unwrap();
        replace(&fd, "token", b"first", Mode::from_raw_mode(0o644)).unwrap();
        replace(&fd, "token", b"second", Mode::from_raw_mode(0o640)).unwrap();
        let path = dir.path().join("token");
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(mode(&path), 0o640);
        assert_eq!(names(dir.path()), ["token"]);
    }

    /// A symbolic link where the temporary file would go is removed, not followed: the write
    /// lands in the directory and nowhere else. A link at the name itself is replaced, never
    /// written through.
    #[test]
    fn a_planted_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("victim");
        std::fs::write(&target, b"untouched").unwrap();
        let planted = dir.path().join(temporary_name("token"));
        assert!(is_temporary(&temporary_name("token")));
        symlink(&target, &planted).unwrap();
        symlink(&target, dir.path().join("token")).unwrap();
        replace(
            open_dir(dir.path()).unwrap(),
            "token",
            b"new",
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
        assert_eq!(std::fs::read(dir.path().join("token")).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(dir.path().join("token"))
                .unwrap()
                .is_file()
        );
        assert_eq!(names(dir.path()), ["token"]);
    }

    /// A write that fails (a directory in the way of the temporary file) leaves the old file
    /// as it was.
    #[test]
    fn a_failed_replace_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open_dir(dir.path()).unwrap();
        replace(&fd, "keys.json", b"old", Mode::from_raw_mode(0o600)).unwrap();
        std::fs::create_dir(dir.path().join(temporary_name("keys.json"))).unwrap();
        let error = replace(&fd, "keys.json", b"new", Mode::from_raw_mode(0o600)).unwrap_err();
        assert_eq!(std::fs::read(dir.path().join("keys.json")).unwrap(), b"old");
        // The error says what is in the way.
        let temporary = temporary_name("keys.json");
        assert_eq!(
            error.to_string(),
            format!("its temporary file {temporary}: Is a directory (os error 21)")
        );
    }
}
