//! kube-apiserver's static key flags: `--service-account-signing-key-file` (one private key) and
//! `--service-account-key-file` (repeatable; every key in each file verifies), reloaded when
//! the files change, without a restart.
//!
//! The operator owns these files, so a reload serves exactly what they now say. What could
//! break tokens is said loudly instead: a key that verified tokens and is gone from the files
//! is logged at error level with its kid (tokens it signed that are still live fail from now
//! on), and a new signing key that was not published before is logged as a warning (relying
//! parties that cached the JWKS reject its tokens until they re-read it). A reload that fails
//! (a half-copied file, a typo) keeps the last good keys and logs why.

use std::path::{Path, PathBuf};

use tokio::sync::{mpsc, watch};
use tokio_util::task::AbortOnDropHandle;
use warrant_clock::Clock;
use warrant_token::{
    KeyError, SigningKey, VerifyingKey, signing_key_from_pem, verifying_keys_from_pem,
};

use crate::KeySet;
use crate::metrics::KeyMetrics;
use warrant_watch::{FileWatch, watch_files};

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
    /// The files cannot be watched for changes.
    #[error("cannot watch the key files: {0}")]
    Watch(String),
}

fn read(path: &Path) -> Result<Vec<u8>, StaticKeyError> {
    std::fs::read(path).map_err(|source| StaticKeyError::Read {
        path: path.to_owned(),
        source,
    })
}

fn keys_error(path: &Path) -> impl FnOnce(KeyError) -> StaticKeyError + use<> {
    let path = path.to_owned();
    move |source| StaticKeyError::Keys { path, source }
}

/// Loads the signing key file and the verification key files.
pub fn load_static(
    signing_key_file: &Path,
    key_files: &[PathBuf],
) -> Result<KeySet, StaticKeyError> {
    let signing =
        signing_key_from_pem(&read(signing_key_file)?).map_err(keys_error(signing_key_file))?;
    let mut verifying = Vec::new();
    for path in key_files {
        verifying.extend(verifying_keys_from_pem(&read(path)?).map_err(keys_error(path))?);
    }
    Ok(KeySet::new(signing, verifying))
}

/// The static key files configured.
#[derive(Debug, Clone, Default)]
pub struct StaticKeyFiles {
    /// `--service-account-signing-key-file`, if static keys sign.
    pub signing_key_file: Option<PathBuf>,
    /// `--service-account-key-file`, in order.
    pub key_files: Vec<PathBuf>,
}

/// What the static key files hold.
#[derive(Debug, Clone)]
pub struct StaticKeys {
    /// The signing key, if a signing key file is configured.
    pub signing: Option<SigningKey>,
    /// The keys of the verification key files, in order.
    pub verifying: Vec<VerifyingKey>,
}

/// Something a reload of static keys changed that can break tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StaticChange {
    /// A key that verified tokens is no longer in the files.
    Removed(String),
    /// A new signing key that was not published before it started signing.
    SigningUnpublished(String),
}

impl StaticKeys {
    /// Reads the files.
    pub fn load(files: &StaticKeyFiles) -> Result<Self, StaticKeyError> {
        let signing = match &files.signing_key_file {
            Some(path) => Some(signing_key_from_pem(&read(path)?).map_err(keys_error(path))?),
            None => None,
        };
        let mut verifying = Vec::new();
        for path in &files.key_files {
            verifying.extend(verifying_keys_from_pem(&read(path)?).map_err(keys_error(path))?);
        }
        Ok(StaticKeys { signing, verifying })
    }

    /// The key set they make, if they include a signing key.
    pub fn key_set(&self) -> Option<KeySet> {
        self.signing
            .as_ref()
            .map(|signing| KeySet::new(signing.clone(), self.verifying.clone()))
    }

    /// Every key that verifies: the signing key and the verification keys.
    fn all(&self) -> impl Iterator<Item = &VerifyingKey> {
        self.signing
            .iter()
            .map(SigningKey::verifying_key)
            .chain(&self.verifying)
    }

    /// What replacing `self` by `next` breaks, in the order keys were listed.
    pub fn changes_to(&self, next: &StaticKeys) -> Vec<StaticChange> {
        let mut changes = Vec::new();
        let mut seen = Vec::new();
        for key in self.all() {
            if !seen.contains(&key) && !next.all().any(|k| k == key) {
                changes.push(StaticChange::Removed(key.kid().to_owned()));
            }
            seen.push(key);
        }
        if let Some(signing) = &next.signing
            && !self.all().any(|k| k == signing.verifying_key())
        {
            changes.push(StaticChange::SigningUnpublished(signing.kid().to_owned()));
        }
        changes
    }

    fn same_keys(&self, other: &StaticKeys) -> bool {
        self.signing.as_ref().map(SigningKey::verifying_key)
            == other.signing.as_ref().map(SigningKey::verifying_key)
            && self.verifying == other.verifying
    }

    fn record(&self, metrics: &KeyMetrics) {
        let verify_only = self
            .verifying
            .iter()
            .filter(|k| self.signing.as_ref().map(SigningKey::verifying_key) != Some(*k))
            .count();
        metrics.static_keys(self.signing.is_some(), verify_only);
    }
}

/// Reloads static key files when they change; dropping it stops the watching.
pub struct StaticWatch {
    _watcher: FileWatch,
    _task: AbortOnDropHandle<()>,
    status: watch::Receiver<StaticReload>,
}

/// What the latest reload of static key files did, published after every attempt so that
/// callers (and tests) can wait for a reload instead of sleeping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticReload {
    /// Reloads attempted since the watch started.
    pub attempts: u64,
    /// Why the latest attempt failed; `None` if it succeeded (or none was made).
    pub error: Option<String>,
}

impl StaticWatch {
    /// A receiver of the [`StaticReload`] status, updated after every attempt.
    pub fn subscribe(&self) -> watch::Receiver<StaticReload> {
        self.status.clone()
    }
}

impl std::fmt::Debug for StaticWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StaticWatch")
    }
}

impl StaticKeyFiles {
    /// Every configured file.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.signing_key_file
            .iter()
            .chain(&self.key_files)
            .cloned()
            .collect()
    }

    /// Starts reloading the files when they change: `publish` receives the keys after every
    /// reload that changed them. `current` is what is in force now (as loaded at startup);
    /// `clock` gives the time of a signing-key change (a metric). Must be called within a Tokio
    /// runtime.
    pub fn watch<P>(
        &self,
        current: StaticKeys,
        metrics: KeyMetrics,
        clock: Clock,
        publish: P,
    ) -> Result<StaticWatch, StaticKeyError>
    where
        P: Fn(&StaticKeys) + Send + 'static,
    {
        let (sender, mut changes) = mpsc::channel(1);
        // A full channel means a change is already waiting to be read.
        let on_change = move || {
            let _ = sender.try_send(());
        };
        let watcher = watch_files(&self.paths(), on_change)
            .map_err(|e| StaticKeyError::Watch(e.to_string()))?;
        current.record(&metrics);
        if current.signing.is_some() {
            metrics.signing_key_loaded(clock.now());
        }
        let files = self.clone();
        let (status, receiver) = watch::channel(StaticReload::default());
        let task = tokio::spawn(async move {
            let mut current = current;
            while changes.recv().await.is_some() {
                let loaded = {
                    let files = files.clone();
                    tokio::task::spawn_blocking(move || StaticKeys::load(&files)).await
                };
                let next = match loaded {
                    Ok(Ok(next)) => next,
                    Ok(Err(error)) => {
                        metrics.store_error("load");
                        tracing::error!(%error, "reloading the key files failed; still serving the keys of the last good load");
                        status.send_modify(|s| {
                            s.attempts += 1;
                            s.error = Some(error.to_string());
                        });
                        continue;
                    }
                    Err(_) => continue,
                };
                if next.same_keys(&current) {
                    status.send_modify(|s| {
                        s.attempts += 1;
                        s.error = None;
                    });
                    continue;
                }
                log_changes(&current, &next);
                let signer_changed = next.signing.as_ref().map(SigningKey::kid)
                    != current.signing.as_ref().map(SigningKey::kid);
                if signer_changed && next.signing.is_some() {
                    metrics.signing_key_loaded(clock.now());
                }
                next.record(&metrics);
                tracing::info!(
                    signing_kid = next.signing.as_ref().map(SigningKey::kid).unwrap_or("-"),
                    keys = next.all().count(),
                    "reloaded the key files"
                );
                publish(&next);
                current = next;
                status.send_modify(|s| {
                    s.attempts += 1;
                    s.error = None;
                });
            }
        });
        Ok(StaticWatch {
            _watcher: watcher,
            _task: AbortOnDropHandle::new(task),
            status: receiver,
        })
    }
}

/// Logs what a reload from `current` to `next` changed that can break tokens.
fn log_changes(current: &StaticKeys, next: &StaticKeys) {
    for change in current.changes_to(next) {
        match change {
            StaticChange::Removed(kid) => tracing::error!(
                %kid,
                "a key that verified tokens is gone from the key files: tokens it signed that are still live fail verification from now on"
            ),
            StaticChange::SigningUnpublished(kid) => tracing::warn!(
                %kid,
                "the new signing key was not published before it started signing: relying parties that cached the JWKS (for up to an hour) reject its tokens until they re-read it; to rotate safely, add the new key to a --service-account-key-file first and switch an hour later"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use warrant_token::KeyType;

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
        assert_eq!(set.signing_at(now).unwrap().kid(), signing.kid());
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [signing.kid(), old.kid()]);
        assert_eq!(set.next_change(), None);

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

    #[test]
    fn changes_that_break_tokens_are_named() {
        let a = SigningKey::generate(KeyType::P256).unwrap();
        let b = SigningKey::generate(KeyType::P256).unwrap();
        let c = SigningKey::generate(KeyType::P256).unwrap();
        let keys = |signing: &SigningKey, verifying: &[&SigningKey]| StaticKeys {
            signing: Some(signing.clone()),
            verifying: verifying
                .iter()
                .map(|k| k.verifying_key().clone())
                .collect(),
        };
        // The safe rotation: b published first, then signing; a kept to verify.
        assert_eq!(keys(&a, &[&b]).changes_to(&keys(&b, &[&a])), []);
        // Switching to an unpublished key and dropping the old one.
        assert_eq!(
            keys(&a, &[&b]).changes_to(&keys(&c, &[])),
            [
                StaticChange::Removed(a.kid().to_owned()),
                StaticChange::Removed(b.kid().to_owned()),
                StaticChange::SigningUnpublished(c.kid().to_owned()),
            ]
        );
    }

    /// Files replaced on disk are picked up without a restart; a broken file keeps the last
    /// good keys.
    /// Dropping the watch stops its task: the status sender the task holds goes with it.
    #[tokio::test(start_paused = true)]
    async fn dropping_the_watch_stops_its_task() {
        let dir = tempfile::tempdir().unwrap();
        let files = StaticKeyFiles {
            signing_key_file: Some(dir.path().join("sa.key")),
            key_files: vec![],
        };
        let key = SigningKey::generate(KeyType::P256).unwrap();
        std::fs::write(
            dir.path().join("sa.key"),
            key.to_pkcs8_pem().unwrap().as_str(),
        )
        .unwrap();
        let current = StaticKeys::load(&files).unwrap();
        let watch = files
            .watch(
                current,
                KeyMetrics::new(),
                Clock::manual(jiff::Timestamp::from_second(1_800_000_000).unwrap()),
                |_: &StaticKeys| {},
            )
            .unwrap();
        let mut status = watch.subscribe();
        drop(watch);
        // The paused clock moves only when every task is idle: a task still running would
        // hold the sender and make this time out.
        let closed = tokio::time::timeout(Duration::from_secs(3600), status.changed()).await;
        assert!(matches!(closed, Ok(Err(_))), "the task outlived its owner");
    }

    #[tokio::test]
    async fn replaced_files_are_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let files = StaticKeyFiles {
            signing_key_file: Some(dir.path().join("sa.key")),
            key_files: vec![dir.path().join("old.pub")],
        };
        let a = SigningKey::generate(KeyType::P256).unwrap();
        let b = SigningKey::generate(KeyType::P256).unwrap();
        let replace = |name: &str, text: &str| {
            let temp = dir.path().join(format!("{name}.new"));
            std::fs::write(&temp, text).unwrap();
            std::fs::rename(&temp, dir.path().join(name)).unwrap();
        };
        replace("sa.key", a.to_pkcs8_pem().unwrap().as_str());
        replace("old.pub", &b.verifying_key().to_pem());

        let metrics = KeyMetrics::new();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let current = StaticKeys::load(&files).unwrap();
        let (sender, mut published) = mpsc::unbounded_channel();
        let watch = files
            .watch(
                current,
                metrics.clone(),
                Clock::manual(jiff::Timestamp::from_second(1_800_000_000).unwrap()),
                move |keys: &StaticKeys| {
                    sender.send(keys.clone()).unwrap();
                },
            )
            .unwrap();
        async fn next(published: &mut mpsc::UnboundedReceiver<StaticKeys>) -> StaticKeys {
            tokio::time::timeout(Duration::from_secs(20), published.recv())
                .await
                .expect("a reload")
                .unwrap()
        }

        // The safe rotation: b signs, a still verifies.
        replace("old.pub", &a.verifying_key().to_pem());
        replace("sa.key", b.to_pkcs8_pem().unwrap().as_str());
        let mut keys = next(&mut published).await;
        while keys.signing.as_ref().unwrap().kid() != b.kid() {
            keys = next(&mut published).await;
        }
        let set = keys.key_set().unwrap();
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [b.kid(), a.kid()]);

        // A broken file is not applied; fixing it is.
        replace("old.pub", "-----BEGIN PUBLIC KEY-----\nnot base64!\n");
        let failed = tokio::time::timeout(
            Duration::from_secs(20),
            watch.subscribe().wait_for(|s| s.error.is_some()),
        )
        .await
        .expect("a failed reload")
        .unwrap()
        .clone();
        assert!(
            failed.error.unwrap().contains("old.pub: malformed PEM"),
            "the error names the file"
        );
        let c = SigningKey::generate(KeyType::P256).unwrap();
        replace("old.pub", &c.verifying_key().to_pem());
        let keys = next(&mut published).await;
        assert_eq!(keys.verifying[0].kid(), c.kid());
        assert_eq!(keys.signing.as_ref().unwrap().kid(), b.kid());

        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"warrant_keys_held{state="active"} 1"#)
                && text.contains(r#"warrant_keys_held{state="verifying"} 1"#)
                && text.contains("warrant_keys_last_rotation_timestamp_seconds 1800000000"),
            "{text}"
        );
    }
}
