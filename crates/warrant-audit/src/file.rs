//! The audit log file: appended to, rotated by size, old files pruned by count and age, with
//! kube-apiserver's (lumberjack's) meaning of `--audit-log-maxsize`, `-maxbackup` and `-maxage`
//! and its names for rotated files: `audit-2026-11-25T13-00-40.123.log` beside `audit.log`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

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

/// An open audit log file.
#[derive(Debug)]
pub(crate) struct RotatingFile {
    path: PathBuf,
    file: BufWriter<File>,
    size: u64,
    rotation: Rotation,
}

fn open(path: &Path) -> io::Result<File> {
    // Owner-only: an audit log says who holds which identity.
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl RotatingFile {
    /// Opens (or creates) `path` for appending, creating its directory if missing.
    pub(crate) fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = open(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_owned(),
            file: BufWriter::with_capacity(64 * 1024, file),
            size,
            rotation,
        })
    }

    /// Appends `line` (which ends in a newline), rotating first if it would take the file
    /// past the size limit. A line longer than the limit is written to a file of its own.
    pub(crate) fn write_line(&mut self, line: &[u8], now: Timestamp) -> io::Result<()> {
        let len = line.len() as u64;
        if self.rotation.max_size_bytes > 0
            && self.size > 0
            && self.size + len > self.rotation.max_size_bytes
        {
            self.rotate(now)?;
        }
        self.file.write_all(line)?;
        self.size += len;
        Ok(())
    }

    /// Hands what is buffered to the operating system.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    fn rotate(&mut self, now: Timestamp) -> io::Result<()> {
        self.file.flush()?;
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
        self.file = BufWriter::with_capacity(64 * 1024, open(&self.path)?);
        self.size = 0;
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
        file.write_line(b"first\n", at(1_764_075_640)).unwrap();
        file.write_line(b"second\n", at(1_764_075_640)).unwrap();
        file.flush().unwrap();
        assert_eq!(
            names(dir.path()),
            ["audit-2025-11-25T13-00-40.000.log", "audit.log"]
        );
        let rotated = std::fs::read(dir.path().join("audit-2025-11-25T13-00-40.000.log")).unwrap();
        assert_eq!(rotated, b"first\n");
        assert_eq!(std::fs::read(&path).unwrap(), b"second\n");
        // Two rotations in the same millisecond keep both files.
        file.write_line(b"third\n", at(1_764_075_640)).unwrap();
        file.flush().unwrap();
        assert_eq!(names(dir.path()).len(), 3);
    }

    /// A rotation that finds the file gone (renamed by a rotation whose reopening failed, or
    /// moved away by someone else) starts a new one: it does not fail every write after.
    #[test]
    fn a_rotation_that_finds_the_file_gone_starts_a_new_one() {
        let (dir, path, mut file) = ten_byte_file();
        file.write_line(b"first\n", at(1_764_075_640)).unwrap();
        file.flush().unwrap();
        std::fs::rename(&path, dir.path().join("moved.log")).unwrap();
        file.write_line(b"second\n", at(1_764_075_641)).unwrap();
        file.write_line(b"3\n", at(1_764_075_641)).unwrap();
        file.flush().unwrap();
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
        file.write_line(b"x\n", at(0)).unwrap();
        file.write_line(b"y\n", at(0)).unwrap();
        file.flush().unwrap();
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
            file.write_line(b"line\n", at(start + i * day)).unwrap();
        }
        file.flush().unwrap();
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
        file.write_line(b"line\n", at(start + 4 * day + 3600))
            .unwrap();
        file.flush().unwrap();
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
}
