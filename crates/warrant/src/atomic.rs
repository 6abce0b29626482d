//! Replacing a file so that a reader never sees it half written or empty: the new content goes
//! to a temporary file in the same directory, is flushed to disk, given its mode, and renamed
//! over the old name (rename within a directory is atomic: a reader that opens the name gets
//! the old file or the new one, whole), and the directory is flushed so the rename survives a
//! crash. The credential plugin's cache and the token agent write this way.
//!
//! Everything goes through the open directory (`openat`, `renameat`), never by path again, and
//! never through a symbolic link: a directory someone else can write to cannot redirect the
//! write.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, Mode, OFlags};

/// Flags for every open inside a directory: never through a symbolic link, never inherited.
pub(crate) fn inside(flags: OFlags) -> OFlags {
    flags | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Replaces `name` in the open directory `dir` with `bytes`, with permissions `mode` (set
/// explicitly, whatever the umask). On failure the old file is untouched and the temporary
/// one removed.
pub(crate) fn replace(dir: impl AsFd, name: &str, bytes: &[u8], mode: Mode) -> std::io::Result<()> {
    let dir = dir.as_fd();
    // Hidden (a dot), so a consumer that lists the directory does not take it for a token;
    // unique to this process, and made afresh (O_EXCL) after removing one a crash left.
    let temporary = format!(".{name}.{}.tmp", std::process::id());
    let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
    let written = (|| {
        let fd = rustix::fs::openat(
            dir,
            temporary.as_str(),
            inside(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL),
            Mode::RUSR | Mode::WUSR,
        )?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        rustix::fs::fchmod(&file, mode)?;
        file.sync_all()?;
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
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn open(dir: &std::path::Path) -> std::os::fd::OwnedFd {
        rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn the_file_is_replaced_whole_with_its_mode_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let fd = open(dir.path());
        replace(&fd, "token", b"first", Mode::from_raw_mode(0o644)).unwrap();
        replace(&fd, "token", b"second", Mode::from_raw_mode(0o640)).unwrap();
        let path = dir.path().join("token");
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["token"]);
    }

    /// A symbolic link where the temporary file would go is removed, not followed: the write
    /// lands in the directory and nowhere else.
    #[test]
    fn a_planted_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("victim");
        std::fs::write(&target, b"untouched").unwrap();
        let planted = dir
            .path()
            .join(format!(".token.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        replace(
            open(dir.path()),
            "token",
            b"new",
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
        assert_eq!(std::fs::read(dir.path().join("token")).unwrap(), b"new");
    }
}
