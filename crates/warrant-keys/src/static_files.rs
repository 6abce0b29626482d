//! kube-apiserver's static key flags: `--service-account-signing-key-file` (one private key) and
//! `--service-account-key-file` (repeatable; every key in each file verifies).

use std::path::{Path, PathBuf};

use warrant_token::{KeyError, signing_key_from_pem, verifying_keys_from_pem};

use crate::KeySet;

/// Why the static key files could not be loaded. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StaticKeyError {
    /// A file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file's contents are not usable keys.
    #[error("{path}: {source}")]
    Keys {
        /// The file.
        path: PathBuf,
        /// What is wrong with its keys.
        #[source]
        source: KeyError,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, StaticKeyError> {
    std::fs::read(path).map_err(|source| StaticKeyError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Loads the signing key file and the verification key files.
pub fn load_static(
    signing_key_file: &Path,
    key_files: &[PathBuf],
) -> Result<KeySet, StaticKeyError> {
    let keys_error = |path: &Path| {
        let path = path.to_owned();
        move |source| StaticKeyError::Keys { path, source }
    };
    let signing =
        signing_key_from_pem(&read(signing_key_file)?).map_err(keys_error(signing_key_file))?;
    let mut verifying = Vec::new();
    for path in key_files {
        verifying.extend(verifying_keys_from_pem(&read(path)?).map_err(keys_error(path))?);
    }
    Ok(KeySet::new(signing, verifying))
}

#[cfg(test)]
mod tests {
    use warrant_token::{KeyType, SigningKey};

    use super::*;

    #[test]
    fn loads_signing_and_verification_files_and_names_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let signing = SigningKey::generate(KeyType::P256).unwrap();
        let old = SigningKey::generate(KeyType::P384).unwrap();
        let sign_path = dir.path().join("sa.key");
        std::fs::write(&sign_path, signing.to_pkcs8_pem().unwrap().as_str()).unwrap();
        let pub_path = dir.path().join("sa.pub");
        std::fs::write(&pub_path, old.verifying_key().to_pem()).unwrap();

        let set = load_static(&sign_path, std::slice::from_ref(&pub_path)).unwrap();
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(set.signing_at(now).kid(), signing.kid());
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [signing.kid(), old.kid()]);

        let err = load_static(&pub_path, &[]).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: data does not contain a valid RSA or ECDSA private key",
                pub_path.display()
            )
        );
        let missing = dir.path().join("missing.pem");
        let err = load_static(&sign_path, std::slice::from_ref(&missing))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("failed to read {}", missing.display())),
            "{err}"
        );
    }
}
