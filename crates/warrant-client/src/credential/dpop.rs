//! The plugin's DPoP key (RFC 9449), for `--key-binding dpop`: one EC P-256 key pair per
//! identity (warrant's URL and the service account, as the token cache tells identities apart),
//! kept in the cache directory, and the proof that asks warrant to bind a token to it.
//!
//! Where the key lives and who can touch it: the cache directory is opened and checked as the
//! token cache opens it (no symbolic link, owned by the effective user, made `0700`); the key file
//! is reached through that open directory without following a link, and must be a regular file
//! of the same user. A new key is written to a temporary file created `0600` with `O_EXCL` (so it
//! is never readable by another user, not even for a moment) and then hard-linked to its name:
//! the link fails if another run made the key first, and that run's key is read instead, so two
//! runs at once never end with two keys, and nobody ever reads a half-written one.
//!
//! The private key leaves the file only as the signature of a proof: it is never printed, logged
//! or put in an error ([`ProofKey`]'s `Debug` shows the thumbprint). The key's thumbprint (a hash
//! of the public key) is what a bound token's `cnf.jkt` names, and may be shown.
//!
//! Cost: creating a key is one P-256 key generation and two small writes; every run with binding
//! reads and parses the key (one PKCS#8 parse) and signs one proof (one ECDSA signature).

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use aws_lc_rs::digest;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde_json::json;
use warrant_token::{Algorithm, KeyType, SigningKey, signing_key_from_pem};

use super::cache;
use warrant_watch::private_file::inside;

/// The largest key file read (a P-256 PKCS#8 PEM is about 250 bytes).
const MAX_KEY_FILE: u64 = 16 * 1024;

/// Why the plugin has no DPoP key to bind tokens to. No message holds key material.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProofKeyError {
    /// No directory to keep the key in (no `--cache-dir`, `$XDG_CACHE_HOME` or `$HOME`).
    #[error(
        "--key-binding dpop keeps its key in the cache directory, and there is none: give --cache-dir (WARRANT_CACHE_DIR)"
    )]
    NoDirectory,
    /// The cache directory is refused (another user's, a symbolic link) or unavailable.
    #[error("cannot keep the DPoP key in the cache directory")]
    Directory(#[source] cache::Refused),
    /// The key file is a symbolic link.
    #[error("the DPoP key {path} is a symbolic link")]
    Symlink {
        /// The key file.
        path: PathBuf,
    },
    /// The key file is not a regular file.
    #[error("the DPoP key {path} is not a regular file")]
    NotFile {
        /// The key file.
        path: PathBuf,
    },
    /// The key file belongs to another user.
    #[error("the DPoP key {path} is owned by uid {owner}, not by this user (uid {user})")]
    Owner {
        /// The key file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The effective user.
        user: u32,
    },
    /// The key file holds no P-256 private key.
    #[error(
        "the DPoP key {path} is not a P-256 private key (PKCS#8 PEM): remove it and the plugin makes a new key (tokens bound to the old key then cannot be used with a proof)"
    )]
    Damaged {
        /// The key file.
        path: PathBuf,
    },
    /// The key file cannot be read or written.
    #[error("the DPoP key {path}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// aws-lc-rs could not generate a key or sign (no randomness).
    #[error("cannot {0} with aws-lc-rs")]
    Crypto(&'static str),
}

/// The plugin's DPoP key for one identity: a P-256 key held as warrant holds its own.
pub(crate) struct ProofKey {
    key: SigningKey,
}

impl std::fmt::Debug for ProofKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProofKey")
            .field("jkt", &self.jkt())
            .finish_non_exhaustive()
    }
}

/// The file name of the key of `warrant` and `service_account` (`NAMESPACE/NAME`): the SHA-256
/// of the two, so one identity has one key and another identity another.
pub(crate) fn file_name(warrant: &str, service_account: &str) -> String {
    let identity = json!({"warrant": warrant, "serviceAccount": service_account}).to_string();
    let hash = digest::digest(&digest::SHA256, identity.as_bytes());
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("dpop-{hex}.key")
}

impl ProofKey {
    /// The key for `warrant` and `service_account` in `dir`, made now if there is none.
    pub(crate) fn load_or_create(
        dir: &Path,
        warrant: &str,
        service_account: &str,
    ) -> Result<ProofKey, ProofKeyError> {
        let fd = cache::open_dir(dir).map_err(ProofKeyError::Directory)?;
        let name = file_name(warrant, service_account);
        let path = dir.join(&name);
        // Twice at most: if another run links its key between our look and our link, the
        // second look finds it.
        for _ in 0..2 {
            if let Some(key) = read(&fd, &name, &path)? {
                return Ok(key);
            }
            if let Some(key) = create(&fd, &name, &path)? {
                return Ok(key);
            }
        }
        read(&fd, &name, &path)?.ok_or_else(|| ProofKeyError::Io {
            path,
            source: std::io::ErrorKind::NotFound.into(),
        })
    }

    /// Its RFC 7638 thumbprint: what a bound token's `cnf.jkt` must be.
    pub(crate) fn jkt(&self) -> &str {
        self.key.verifying_key().thumbprint()
    }

    /// A DPoP proof for a request with `method` to `htu` (absolute URI) at `now`, with a `jti`
    /// of 128 random bits (see `warrant_token::make_proof`).
    pub(crate) fn proof(
        &self,
        method: &str,
        htu: &str,
        now: jiff::Timestamp,
    ) -> Result<String, ProofKeyError> {
        let mut jti = [0u8; 16];
        aws_lc_rs::rand::fill(&mut jti).map_err(|_| ProofKeyError::Crypto("make a jti"))?;
        warrant_token::make_proof(
            &self.key,
            method,
            htu,
            now.as_second(),
            &URL_SAFE_NO_PAD.encode(jti),
        )
        .map_err(|_| ProofKeyError::Crypto("sign the DPoP proof"))
    }
}

/// The key in `name`, if the file exists.
fn read(dir: &OwnedFd, name: &str, path: &Path) -> Result<Option<ProofKey>, ProofKeyError> {
    let io = |source: std::io::Error| ProofKeyError::Io {
        path: path.to_owned(),
        source,
    };
    let fd = match rustix::fs::openat(
        dir,
        name,
        inside(OFlags::RDONLY | OFlags::NONBLOCK),
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP) => {
            return Err(ProofKeyError::Symlink {
                path: path.to_owned(),
            });
        }
        Err(other) => return Err(io(other.into())),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(ProofKeyError::NotFile {
            path: path.to_owned(),
        });
    }
    let user = rustix::process::geteuid().as_raw();
    if stat.st_uid != user {
        return Err(ProofKeyError::Owner {
            path: path.to_owned(),
            owner: stat.st_uid,
            user,
        });
    }
    // Loosened since it was written (by hand, a backup tool): the user's alone again.
    if Mode::from_raw_mode(stat.st_mode) & !(Mode::RUSR | Mode::WUSR) != Mode::empty() {
        rustix::fs::fchmod(&fd, Mode::RUSR | Mode::WUSR).map_err(|e| io(e.into()))?;
    }
    let mut pem = Vec::new();
    File::from(fd)
        .take(MAX_KEY_FILE)
        .read_to_end(&mut pem)
        .map_err(io)?;
    match signing_key_from_pem(&pem) {
        Ok(key) if key.algorithm() == Algorithm::ES256 => Ok(Some(ProofKey { key })),
        _ => Err(ProofKeyError::Damaged {
            path: path.to_owned(),
        }),
    }
}

/// Makes a key and links it to `name`; `None` if another run linked one first.
fn create(dir: &OwnedFd, name: &str, path: &Path) -> Result<Option<ProofKey>, ProofKeyError> {
    let io = |source: std::io::Error| ProofKeyError::Io {
        path: path.to_owned(),
        source,
    };
    let key = SigningKey::generate(KeyType::P256)
        .map_err(|_| ProofKeyError::Crypto("generate a P-256 key"))?;
    let pem = key
        .to_pkcs8_pem()
        .map_err(|_| ProofKeyError::Crypto("encode the P-256 key"))?;

    let temporary = format!("{name}.{}.tmp", std::process::id());
    // A leftover of this process id's earlier run (it crashed): ours to remove.
    let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
    let written = rustix::fs::openat(
        dir,
        temporary.as_str(),
        inside(OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL),
        Mode::RUSR | Mode::WUSR,
    )
    .map_err(std::io::Error::from)
    .and_then(|fd| {
        let mut file = File::from(fd);
        file.write_all(pem.as_str().as_bytes())?;
        file.sync_all()
    });
    if let Err(source) = written {
        let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
        return Err(io(source));
    }
    let linked = rustix::fs::linkat(dir, temporary.as_str(), dir, name, AtFlags::empty());
    let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
    match linked {
        Ok(()) => Ok(Some(ProofKey { key })),
        // Another run made the key first: use its key, not ours.
        Err(rustix::io::Errno::EXIST) => Ok(None),
        Err(other) => Err(io(other.into())),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use rustls_pki_types::PrivatePkcs8KeyDer;
    use rustls_pki_types::pem::PemObject as _;
    use serde_json::Value;

    use super::*;

    const WARRANT: &str = "https://warrant.example";

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// The thumbprint by RFC 7638's recipe, from the key file's own public key (read with
    /// aws-lc-rs here, not through the plugin's code).
    fn thumbprint_of_file(path: &Path) -> String {
        let pem = std::fs::read(path).unwrap();
        let der = PrivatePkcs8KeyDer::from_pem_slice(&pem).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.secret_pkcs8_der())
                .unwrap();
        let point = pair.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            URL_SAFE_NO_PAD.encode(x),
            URL_SAFE_NO_PAD.encode(y)
        );
        URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, canonical.as_bytes()))
    }

    #[test]
    fn a_key_is_made_once_0600_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        let path = dir.path().join(file_name(WARRANT, "demo/app"));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(first.jkt(), thumbprint_of_file(&path));
        // The next run reads the same key, and leaves no temporary file behind.
        let again = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        assert_eq!(again.jkt(), first.jkt());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            [std::ffi::OsString::from(file_name(WARRANT, "demo/app"))]
        );
        // Its Debug shows the thumbprint, never the key.
        let debug = format!("{first:?}");
        let pem = std::fs::read_to_string(&path).unwrap();
        let body: String = pem.lines().nth(1).unwrap().chars().take(20).collect();
        assert!(
            debug.contains(first.jkt()) && !debug.contains(&body),
            "{debug}"
        );
    }

    /// A key file loosened since it was made (by hand, a backup tool) is made the user's
    /// alone again before it is used.
    #[test]
    fn a_loosened_key_file_is_made_private_again() {
        let dir = tempfile::tempdir().unwrap();
        ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        let path = dir.path().join(file_name(WARRANT, "demo/app"));
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn each_identity_has_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let app = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        let other_account = ProofKey::load_or_create(dir.path(), WARRANT, "demo/web").unwrap();
        let other_hub =
            ProofKey::load_or_create(dir.path(), "https://other.example", "demo/app").unwrap();
        assert_ne!(app.jkt(), other_account.jkt());
        assert_ne!(app.jkt(), other_hub.jkt());
        assert_ne!(other_account.jkt(), other_hub.jkt());
    }

    /// A key another run linked first wins: the loser reads it instead of replacing it.
    #[test]
    fn a_racing_run_uses_the_key_that_was_made_first() {
        let dir = tempfile::tempdir().unwrap();
        let fd = cache::open_dir(dir.path()).unwrap();
        let name = file_name(WARRANT, "demo/app");
        let path = dir.path().join(&name);
        let winner = create(&fd, &name, &path).unwrap().unwrap();
        // The loser had looked before the winner linked: its own link fails, and it says so.
        assert!(create(&fd, &name, &path).unwrap().is_none());
        let read = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        assert_eq!(read.jkt(), winner.jkt());
        assert_eq!(thumbprint_of_file(&path), winner.jkt());
    }

    #[test]
    fn a_damaged_or_linked_key_file_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name(WARRANT, "demo/app"));
        std::fs::write(&path, b"not a key").unwrap();
        let error = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap_err();
        assert!(matches!(error, ProofKeyError::Damaged { .. }), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), b"not a key");

        std::fs::remove_file(&path).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let error = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap_err();
        assert!(matches!(error, ProofKeyError::Symlink { .. }), "{error}");
        assert!(!elsewhere.exists());
    }

    /// The proof is one warrant-token's relying-party check accepts for the request, with the
    /// key's thumbprint; jtis differ between proofs.
    #[test]
    fn the_proof_is_a_dpop_proof_for_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let key = ProofKey::load_or_create(dir.path(), WARRANT, "demo/app").unwrap();
        let htu = "https://warrant.example/api/v1/namespaces/demo/serviceaccounts/app/token";
        let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        let proof = key.proof("POST", htu, now).unwrap();
        let request = warrant_token::ProofRequest {
            method: "POST",
            uri: htu,
            access_token: None,
            bound_to: None,
        };
        let verified = warrant_token::verify_proof(&proof, &request, now, 60).unwrap();
        assert_eq!(verified.jkt, key.jkt());
        assert_eq!(verified.iat, 1_700_000_000);
        let header: Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(proof.split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap();
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(
            header["jwk"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["crv", "kty", "x", "y"],
            "the public key only"
        );
        let second = key.proof("POST", htu, now).unwrap();
        let second = warrant_token::verify_proof(&second, &request, now, 60).unwrap();
        assert_ne!(second.jti, verified.jti);
    }
}
