//! A `file://` target: a directory a web server serves as the issuer host's web root, written
//! without ever leaving it.
//!
//! Who controls it: the directory itself is the operator's (`--publish-discovery file:///DIR`,
//! opened as given); what is inside it is also whoever else may write there (the people and jobs
//! that deploy the site). A symbolic link planted inside, `DIR/cluster-a -> /etc`, would have a
//! writer that follows links (as object_store's `LocalFileSystem` does) put files wherever it
//! points, with warrant's permissions. So every component below `DIR` is reached from the one
//! before it with `openat(O_NOFOLLOW)` (created with `mkdirat` when missing), never by path:
//! a link or a non-directory where a directory belongs is refused
//! ([`WebRootError::NotADirectory`]), and nothing is written. A link (or a FIFO, a device, a
//! directory) at a document's own name is not the document: it is read as empty, so the round
//! rewrites it, and the rename replaces the link itself, never what it points at.
//!
//! Documents are written as warrant writes its own files ([`private_file::replace`]), mode
//! 0644: a temporary file beside them (whatever was at its name removed first, a link
//! included, never followed; then created with `O_EXCL|O_NOFOLLOW`), flushed, renamed over the
//! document, and the directory flushed: a reader sees the old file or the new one, never half.
//!
//! Cost: one `openat` per path component per read or write (four or five for the usual
//! layout); blocking, so callers run it with `spawn_blocking`.

use std::fs::File;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use bytes::Bytes;
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use warrant_watch::private_file;

/// Why a document in a directory target could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WebRootError {
    /// A component of the document's path is a symbolic link, or not a directory.
    #[error(
        "{dir}/{component} is a symbolic link or not a directory: a file:// target writes only inside its directory and follows no link there"
    )]
    NotADirectory {
        /// The target's directory.
        dir: String,
        /// The path below it, up to the component refused.
        component: String,
    },
    /// A path component that cannot name a file inside the directory (empty, `.`, `..`).
    #[error("{dir}: {component:?} is not a file name inside the directory")]
    BadComponent {
        /// The target's directory.
        dir: String,
        /// The component.
        component: String,
    },
    /// The file system said no.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A directory served as a web root: `file://` targets, and `warrant discovery export --dir`.
#[derive(Debug, Clone)]
pub struct WebRoot {
    dir: PathBuf,
}

const DIRECTORY: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY);

/// A document's mode: the web server, whichever user it runs as, reads it.
const DOCUMENT_MODE: Mode = Mode::from_raw_mode(0o644);

impl WebRoot {
    /// The web root at `dir` (which must exist to be read or written).
    pub fn new(dir: PathBuf) -> WebRoot {
        WebRoot { dir }
    }

    fn display(&self) -> String {
        self.dir.display().to_string()
    }

    fn io(&self, below: &[&str], source: Errno) -> WebRootError {
        let mut path = self.display();
        for component in below {
            path.push('/');
            path.push_str(component);
        }
        WebRootError::Io {
            path,
            source: source.into(),
        }
    }

    /// The components of `key`, each one file name.
    fn components<'a>(&self, key: &'a str) -> Result<Vec<&'a str>, WebRootError> {
        key.split('/')
            .map(|c| {
                if c.is_empty() || c == "." || c == ".." || c.contains('\0') {
                    Err(WebRootError::BadComponent {
                        dir: self.display(),
                        component: c.to_owned(),
                    })
                } else {
                    Ok(c)
                }
            })
            .collect()
    }

    /// Opens the directory holding `parents` below the root, creating what is missing if
    /// `create`; `None` if it does not exist and `create` is false.
    fn parent(&self, parents: &[&str], create: bool) -> Result<Option<OwnedFd>, WebRootError> {
        // The root as the operator gave it: links in its own path are the operator's choice.
        let mut fd = private_file::open_dir(&self.dir).map_err(|source| WebRootError::Io {
            path: self.display(),
            source,
        })?;
        for (i, component) in parents.iter().enumerate() {
            let walked = parents.get(..=i).unwrap_or_default();
            if create {
                match rustix::fs::mkdirat(&fd, *component, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(self.io(walked, e)),
                }
            }
            fd = match rustix::fs::openat(
                &fd,
                *component,
                private_file::inside(DIRECTORY),
                Mode::empty(),
            ) {
                Ok(next) => next,
                Err(Errno::NOENT) if !create => return Ok(None),
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    return Err(WebRootError::NotADirectory {
                        dir: self.display(),
                        component: walked.join("/"),
                    });
                }
                Err(e) => return Err(self.io(walked, e)),
            };
        }
        Ok(Some(fd))
    }

    /// The document at `key` (an object key, `/`-separated), or `None` if there is none. What
    /// is at its name but is not a regular file, or is over `max_bytes`, reads as empty: not the
    /// document, so it is rewritten.
    pub fn read(&self, key: &str, max_bytes: u64) -> Result<Option<Bytes>, WebRootError> {
        let components = self.components(key)?;
        let Some((name, parents)) = components.split_last() else {
            return Ok(None);
        };
        let Some(parent) = self.parent(parents, false)? else {
            return Ok(None);
        };
        let flags = private_file::inside(OFlags::RDONLY | OFlags::NONBLOCK);
        let fd = match rustix::fs::openat(&parent, *name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Ok(Some(Bytes::new())),
            Err(e) => return Err(self.io(&components, e)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| self.io(&components, e))?;
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile || size > max_bytes {
            return Ok(Some(Bytes::new()));
        }
        let mut bytes = Vec::new();
        File::from(fd)
            .take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|source| WebRootError::Io {
                path: format!("{}/{key}", self.display()),
                source,
            })?;
        Ok(Some(Bytes::from(bytes)))
    }

    /// Writes `body` at `key`, creating the directories below the root that are missing.
    pub fn write(&self, key: &str, body: &[u8]) -> Result<(), WebRootError> {
        let components = self.components(key)?;
        let Some((name, parents)) = components.split_last() else {
            return Err(WebRootError::BadComponent {
                dir: self.display(),
                component: String::new(),
            });
        };
        let Some(parent) = self.parent(parents, true)? else {
            return Err(self.io(parents, Errno::NOENT));
        };
        private_file::replace(&parent, name, body, DOCUMENT_MODE).map_err(|source| {
            WebRootError::Io {
                path: format!("{}/{key}", self.display()),
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    const KEY: &str = "cluster-a/openid/v1/jwks";

    #[test]
    fn documents_are_written_and_read_below_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = WebRoot::new(dir.path().to_owned());
        assert_eq!(root.read(KEY, 1024).unwrap(), None);
        root.write(KEY, b"{\"keys\":[]}").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join(KEY)).unwrap(),
            b"{\"keys\":[]}"
        );
        assert_eq!(
            root.read(KEY, 1024).unwrap().unwrap(),
            Bytes::from_static(b"{\"keys\":[]}")
        );
        // Over the limit: not the document.
        assert_eq!(root.read(KEY, 4).unwrap().unwrap(), Bytes::new());
        root.write(KEY, b"{}").unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path().join("cluster-a/openid/v1"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["jwks"], "no temporary file is left behind");
        for bad in ["../jwks", "a//b", "./jwks", ""] {
            assert!(
                matches!(
                    root.write(bad, b"{}"),
                    Err(WebRootError::BadComponent { .. })
                ),
                "{bad}"
            );
        }
    }

    /// A link planted at any directory of the path, pointing outside the root: refused, and
    /// nothing is written outside.
    #[test]
    fn a_linked_directory_inside_the_root_is_refused() {
        for linked in ["cluster-a", "cluster-a/openid", "cluster-a/openid/v1"] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            let root = WebRoot::new(dir.path().join("www"));
            std::fs::create_dir(dir.path().join("www")).unwrap();
            let at = dir.path().join("www").join(linked);
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            symlink(outside.path(), &at).unwrap();
            let error = root.write(KEY, b"{}").unwrap_err();
            assert!(
                matches!(&error, WebRootError::NotADirectory { component, .. } if component == linked),
                "{linked}: {error}"
            );
            assert!(error.to_string().contains("symbolic link"), "{error}");
            assert!(matches!(
                root.read(KEY, 1024),
                Err(WebRootError::NotADirectory { .. })
            ));
            assert_eq!(
                std::fs::read_dir(outside.path()).unwrap().count(),
                0,
                "{linked}: written outside the root"
            );
        }
    }

    /// A link (or a FIFO) at the document's own name is not the document: it reads as empty,
    /// and a write replaces the link, leaving what it pointed at alone.
    #[test]
    fn a_link_at_the_documents_name_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("authorized_keys");
        std::fs::write(&victim, b"ssh-ed25519 AAAA").unwrap();
        let root = WebRoot::new(dir.path().to_owned());
        std::fs::create_dir_all(dir.path().join("cluster-a/openid/v1")).unwrap();
        symlink(&victim, dir.path().join(KEY)).unwrap();
        assert_eq!(root.read(KEY, 1024).unwrap().unwrap(), Bytes::new());
        root.write(KEY, b"{}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"ssh-ed25519 AAAA");
        let meta = std::fs::symlink_metadata(dir.path().join(KEY)).unwrap();
        assert!(meta.is_file());
        // A link planted at the temporary name is removed, not written through.
        symlink(
            &victim,
            dir.path()
                .join("cluster-a/openid/v1")
                .join(private_file::temporary_name("jwks")),
        )
        .unwrap();
        root.write(KEY, b"{\"keys\":[]}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"ssh-ed25519 AAAA");
        // A FIFO would block a plain read forever.
        std::fs::remove_file(dir.path().join(KEY)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join(KEY),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        assert_eq!(root.read(KEY, 1024).unwrap().unwrap(), Bytes::new());
        root.write(KEY, b"{}").unwrap();
        assert_eq!(std::fs::read(dir.path().join(KEY)).unwrap(), b"{}");
    }
}
