//! The audit log file: appended to, rotated by size, old files pruned by count and age, with
//! kube-apiserver's (lumberjack's) meaning of `--audit-log-maxsize`, `-maxbackup` and `-maxage`
//! and its names for rotated files: `audit-2026-11-25T13-00-40.123.log` beside `audit.log`.
//!
//! A batch of lines is one `write` (or one per file, where a rotation falls inside it), and
//! [`RotatingFile::write_batch`] says how many of its lines reached the file: the writer tells
//! each request whether its own event was written. A write that fails part way is cut back off
//! the file, so the file holds whole lines only and a line that failed is never written later.
//!
//! Who controls the path: the operator (`--audit-log-path`). Its directory, if missing, is
//! created owner-only; the file (owner-only: an audit log says who holds which identity) is
//! opened without following a symlink ([`warrant_watch::private_file`]), so a link planted at
//! the path is an error at startup, not a write somewhere else.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use warrant_watch::private_file;

/// When the file is rotated and which rotated files are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate before a line would take the file past this many bytes; 0 never rotates.
    pub max_size_bytes: u64,
    /// Keep at most this many rotated files (the newest); 0 keeps them all.
    pub max_backups: usize,
    /// Remove rotated files older than this many days; 0 keeps them whatever their age.
    pub max_age_days: u32,
}

/// The time format in a rotated file's name (lumberjack's).
const BACKUP_TIME: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// How much of a batch reached the file.
#[derive(Debug)]
pub(crate) struct Written {
    /// The batch's first `lines` lines are in the file; the rest are not.
    pub(crate) lines: usize,
    /// Why the rest are not.
    pub(crate) error: Option<io::Error>,
}

/// An open audit log file.
#[derive(Debug)]
pub(crate) struct RotatingFile {
    path: PathBuf,
    file: File,
    /// The file's length as far as this writer knows it: whole lines only.
    size: u64,
    rotation: Rotation,
    /// The lines of a batch that go into the current file, written at once.
    buffer: Vec<u8>,
    /// A failed write left part of a line that could not be cut off: the next write starts
    /// with a newline, so that fragment stays a line of its own.
    fragment: bool,
}

impl RotatingFile {
    /// Opens (or creates) `path` for appending, creating its directory (owner-only) if missing.
    pub(crate) fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Only directories created here get the mode; an existing one is left as it is.
            private_file::create_private_dir(dir)?;
        }
        let file = private_file::open_append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_owned(),
            file,
            size,
            rotation,
            buffer: Vec::with_capacity(64 * 1024),
            fragment: false,
        })
    }

    /// Appends `lines` (each ending in a newline), rotating before a line that would take the
    /// file past the size limit (a line longer than the limit gets a file of its own). Stops at
    /// the first failure: the lines after it are not written, and the caller is told how many
    /// were.
    pub(crate) fn write_batch<L: AsRef<[u8]>>(&mut self, lines: &[L], now: Timestamp) -> Written {
        let mut written = 0;
        let mut buffered = 0;
        self.buffer.clear();
        for line in lines {
            let line = line.as_ref();
            let len = line.len() as u64;
            let size = self.size + self.buffer.len() as u64;
            if self.rotation.max_size_bytes > 0
                && size > 0
                && size + len > self.rotation.max_size_bytes
            {
                if let Err(error) = self.commit() {
                    return Written {
                        lines: written,
                        error: Some(error),
                    };
                }
                written += buffered;
                buffered = 0;
                if let Err(error) = self.rotate(now) {
                    return Written {
                        lines: written,
                        error: Some(error),
                    };
                }
            }
            self.buffer.extend_from_slice(line);
            buffered += 1;
        }
        match self.commit() {
            Ok(()) => Written {
                lines: written + buffered,
                error: None,
            },
            Err(error) => Written {
                lines: written,
                error: Some(error),
            },
        }
    }

    /// Whether the file can be written again, without adding a line: one newline appended and
    /// cut off again (a line of its own, harmless to `jq`, if it cannot be cut).
    pub(crate) fn probe(&mut self) -> io::Result<()> {
        self.buffer.clear();
        self.buffer.push(b'\n');
        self.commit()?;
        // Written: take it back if the file allows it.
        if self.file.set_len(self.size - 1).is_ok() {
            self.size -= 1;
        }
        Ok(())
    }

    /// Writes the buffer to the file at once. On failure nothing of it stays: a part that was
    /// written is cut off again.
    fn commit(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        if self.fragment {
            self.buffer.insert(0, b'\n');
        }
        let result = self.file.write_all(&self.buffer);
        let len = self.buffer.len() as u64;
        self.buffer.clear();
        match result {
            Ok(()) => {
                self.size += len;
                self.fragment = false;
                Ok(())
            }
            Err(error) => {
                self.cut_back();
                Err(error)
            }
        }
    }

    /// After a failed write: the file back to its last whole line, where it can be.
    fn cut_back(&mut self) {
        let Ok(len) = self.file.metadata().map(|m| m.len()) else {
            return;
        };
        // A device (`/dev/full`) has no length, and a write that wrote nothing left none.
        if len <= self.size {
            return;
        }
        if self.file.set_len(self.size).is_err() {
            self.size = len;
            self.fragment = true;
        }
    }

    fn rotate(&mut self, now: Timestamp) -> io::Result<()> {
        // Gone already when a rotation renamed it and then could not open the new file (out of
        // descriptors, say), or when something else moved it: this rotation only opens anew.
        if self.path.exists() {
            let mut at = now;
            let mut backup = self.backup_path(at);
            // Two rotations in one millisecond (a tiny size limit) must not overwrite a backup.
            while backup.exists() {
                at += jiff::SignedDuration::from_millis(1);
                backup = self.backup_path(at);
            }
            std::fs::rename(&self.path, &backup)?;
        }
        self.file = private_file::open_append(&self.path)?;
        self.size = 0;
        self.fragment = false;
        if let Err(e) = self.prune(now) {
            tracing::warn!(error = %e, dir = %self.dir().display(), "could not remove old audit log files");
        }
        Ok(())
    }

    fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        }
    }

    /// `stem` and `.ext` of the file's name: rotated files are `stem-TIME.ext`.
    fn name_parts(&self) -> (String, String) {
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ext = self
            .path
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        (stem, ext)
    }

    fn backup_path(&self, at: Timestamp) -> PathBuf {
        let (stem, ext) = self.name_parts();
        let time = at.strftime(BACKUP_TIME);
        self.dir().join(format!("{stem}-{time}{ext}"))
    }

    /// The rotated files, newest first.
    fn backups(&self) -> io::Result<Vec<(Timestamp, PathBuf)>> {
        let (stem, ext) = self.name_parts();
        let prefix = format!("{stem}-");
        let mut found = Vec::new();
        for entry in std::fs::read_dir(self.dir())? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(time) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(&ext))
            else {
                continue;
            };
            let parsed = jiff::fmt::strtime::parse(BACKUP_TIME, time)
                .and_then(|t| t.to_datetime())
                .and_then(|t| t.to_zoned(jiff::tz::TimeZone::UTC))
                .map(|t| t.timestamp());
            if let Ok(at) = parsed {
                found.push((at, entry.path()));
            }
        }
        found.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        Ok(found)
    }

    fn prune(&self, now: Timestamp) -> io::Result<()> {
        let backups = self.backups()?;
        let cutoff = (self.rotation.max_age_days > 0).then(|| {
            now - jiff::SignedDuration::from_hours(24 * i64::from(self.rotation.max_age_days))
        });
        for (index, (at, path)) in backups.iter().enumerate() {
            let too_many = self.rotation.max_backups > 0 && index >= self.rotation.max_backups;
            let too_old = cutoff.is_some_and(|cutoff| *at < cutoff);
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Writes `lines` as one batch, which must all reach the file.
    fn write(file: &mut RotatingFile, lines: &[&[u8]], now: Timestamp) {
        let written = file.write_batch(lines, now);
        assert!(written.error.is_none(), "{:?}", written.error);
        assert_eq!(written.lines, lines.len());
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    /// `audit.log` in a new directory, rotated past 10 bytes, no backups pruned.
    fn ten_byte_file() -> (tempfile::TempDir, PathBuf, RotatingFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let rotation = Rotation {
            max_size_bytes: 10,
            max_backups: 0,
            max_age_days: 0,
        };
        let file = RotatingFile::open(&path, rotation).unwrap();
        (dir, path, file)
    }

    /// A full file is renamed with the time of the rotation and a new one started; the line
    /// that did not fit opens the new file, so no line is split or lost.
    #[test]
    fn a_full_file_rotates_under_a_timestamped_name() {
        let (dir, path, mut file) = ten_byte_file();
        // One batch: the rotation falls between its lines.
        write(&mut file, &[b"first\n", b"second\n"], at(1_764_075_640));
        assert_eq!(
            names(dir.path()),
            ["audit-2025-11-25T13-00-40.000.log", "audit.log"]
        );
        let rotated = std::fs::read(dir.path().join("audit-2025-11-25T13-00-40.000.log")).unwrap();
        assert_eq!(rotated, b"first\n");
        assert_eq!(std::fs::read(&path).unwrap(), b"second\n");
        // Two rotations in the same millisecond keep both files.
        write(&mut file, &[b"third\n"], at(1_764_075_640));
        assert_eq!(names(dir.path()).len(), 3);
    }

    /// A rotation that finds the file gone (renamed by a rotation whose reopening failed, or
    /// moved away by someone else) starts a new one: it does not fail every write after.
    #[test]
    fn a_rotation_that_finds_the_file_gone_starts_a_new_one() {
        let (dir, path, mut file) = ten_byte_file();
        write(&mut file, &[b"first\n"], at(1_764_075_640));
        std::fs::rename(&path, dir.path().join("moved.log")).unwrap();
        write(&mut file, &[b"second\n"], at(1_764_075_641));
        write(&mut file, &[b"3\n"], at(1_764_075_641));
        assert_eq!(std::fs::read(&path).unwrap(), b"second\n3\n");
        assert_eq!(names(dir.path()), ["audit.log", "moved.log"]);
    }

    /// An existing file is appended to, its size counted towards the limit.
    #[test]
    fn reopening_appends_and_counts_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, b"0123456789").unwrap();
        let rotation = Rotation {
            max_size_bytes: 12,
            max_backups: 0,
            max_age_days: 0,
        };
        let mut file = RotatingFile::open(&path, rotation).unwrap();
        write(&mut file, &[b"x\n", b"y\n"], at(0));
        assert_eq!(std::fs::read(&path).unwrap(), b"y\n");
        assert_eq!(names(dir.path()).len(), 2);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "an audit log is owner-only");
    }

    /// Rotated files beyond --audit-log-maxbackup go, newest kept; so do those older than
    /// --audit-log-maxage days; other files in the directory are never touched.
    #[test]
    fn old_files_are_pruned_by_count_and_age() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(dir.path().join("audit-notatime.log"), b"keep").unwrap();
        std::fs::write(dir.path().join("other.log"), b"keep").unwrap();
        let day = 86_400;
        let start = 1_764_000_000;
        let by_count = Rotation {
            max_size_bytes: 1,
            max_backups: 2,
            max_age_days: 0,
        };
        let mut file = RotatingFile::open(&path, by_count).unwrap();
        for i in 0..5 {
            write(&mut file, &[b"line\n"], at(start + i * day));
        }
        // Four rotations (the first line went into the empty file); two kept.
        assert_eq!(
            names(dir.path()),
            [
                "audit-2025-11-27T16-00-00.000.log",
                "audit-2025-11-28T16-00-00.000.log",
                "audit-notatime.log",
                "audit.log",
                "other.log"
            ]
        );

        let by_age = Rotation {
            max_size_bytes: 1,
            max_backups: 0,
            max_age_days: 1,
        };
        let mut file = RotatingFile::open(&path, by_age).unwrap();
        write(&mut file, &[b"line\n"], at(start + 4 * day + 3600));
        // The backup of day 3 is older than a day at the rotation of day 4 + 1 h.
        assert_eq!(
            names(dir.path()),
            [
                "audit-2025-11-28T16-00-00.000.log",
                "audit-2025-11-28T17-00-00.000.log",
                "audit-notatime.log",
                "audit.log",
                "other.log"
            ]
        );
    }

    /// The directory the log is created in is owner-only, and a symlink planted at the log's
    /// path is refused, not followed.
    #[test]
    fn a_new_directory_is_owner_only_and_a_symlink_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/audit.log");
        let rotation = Rotation {
            max_size_bytes: 0,
            max_backups: 0,
            max_age_days: 0,
        };
        drop(RotatingFile::open(&path, rotation).unwrap());
        let mode = std::fs::metadata(dir.path().join("new"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "the audit directory is owner-only");

        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = RotatingFile::open(&link, rotation).unwrap_err();
        assert!(private_file::is_link_refused(&err), "{err}");
        assert_eq!(std::fs::read(&target).unwrap(), b"");
    }

    /// A disk that refuses every write (`/dev/full`): the batch is reported not written, from
    /// its first line, and so is the probe; nothing is held back to be written later.
    #[test]
    fn a_full_disk_is_reported_line_by_line() {
        let rotation = Rotation {
            max_size_bytes: 10,
            max_backups: 1,
            max_age_days: 0,
        };
        let mut file = RotatingFile::open(Path::new("/dev/full"), rotation).unwrap();
        let written = file.write_batch(&[&b"first\n"[..], &b"second\n"[..]], at(0));
        assert_eq!(written.lines, 0);
        assert_eq!(written.error.unwrap().kind(), io::ErrorKind::StorageFull);
        assert!(file.buffer.is_empty());
        assert_eq!(file.probe().unwrap_err().kind(), io::ErrorKind::StorageFull);
    }

    /// The probe leaves a file as it found it.
    #[test]
    fn a_probe_adds_nothing() {
        let (_dir, path, mut file) = ten_byte_file();
        write(&mut file, &[b"a\n"], at(0));
        file.probe().unwrap();
        write(&mut file, &[b"b\n"], at(0));
        assert_eq!(std::fs::read(&path).unwrap(), b"a\nb\n");
    }
}
