//! Where `serve`'s keys come from, and keeping them current: kube-apiserver's static key files
//! (reloaded when they change), or a key directory that warrant manages (rotated on schedule),
//! optionally with static verification keys beside it.

use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use warrant_keys::{
    DirStore, KeyManager, KeyManagerTask, KeyMetrics, KeySet, KeyStore as _, ManagedKeySet,
    RotationPolicy, StaticKeyFiles, StaticKeys, StaticWatch, Writer,
};
use warrant_server::{AppState, Clock};
use warrant_token::{Algorithm, KeyType, VerifyingKey};

use crate::cli::{KeyAlgorithm, KeySourceArgs, RotationArgs};

/// The longest token lifetime with managed keys when `--service-account-max-token-expiration`
/// is not set: a day. It bounds how long a retired key stays published (a day and a minute
/// after it stops signing), so the JWKS holds three keys at most with the default rotation.
pub(crate) const MANAGED_DEFAULT_MAX_TOKEN_SECONDS: i64 = 24 * 3600;

/// Where the keys come from.
#[derive(Debug, Clone)]
pub(crate) enum KeySource {
    /// `--service-account-signing-key-file` and `--service-account-key-file`.
    Static(StaticKeyFiles),
    /// `--key-dir`, with any `--service-account-key-file` keys beside it.
    Managed {
        /// The directory.
        dir: PathBuf,
        /// How its keys rotate.
        rotation: RotationArgs,
        /// Static verification keys published beside the managed ones.
        extra: StaticKeyFiles,
    },
}

impl KeySource {
    /// The source the flags name, or why they name none (or two).
    pub(crate) fn from_args(args: &KeySourceArgs) -> Result<Self, String> {
        match (&args.signing_key_file, &args.key_dir) {
            (Some(_), Some(_)) => Err(
                "--key-dir and --service-account-signing-key-file are mutually exclusive: the keys in a key directory are generated and rotated by warrant. To bring a static signing key under management, import it with `warrant keys generate --key-dir DIR --service-account-signing-key-file FILE` (see docs/keys.md)".into(),
            ),
            (None, None) => Err(
                "either --service-account-signing-key-file or --key-dir must be set".into(),
            ),
            (Some(signing), None) => Ok(KeySource::Static(StaticKeyFiles {
                signing_key_file: Some(signing.clone()),
                key_files: args.key_files.clone(),
            })),
            (None, Some(dir)) => Ok(KeySource::Managed {
                dir: dir.clone(),
                rotation: args.rotation.clone(),
                extra: StaticKeyFiles {
                    signing_key_file: None,
                    key_files: args.key_files.clone(),
                },
            }),
        }
    }

    /// True for a key directory.
    pub(crate) fn is_managed(&self) -> bool {
        matches!(self, KeySource::Managed { .. })
    }
}

/// The key type for an algorithm flag.
pub(crate) fn key_type(algorithm: KeyAlgorithm) -> KeyType {
    match algorithm {
        KeyAlgorithm::Rs256 => KeyType::Rsa2048,
        KeyAlgorithm::Es256 => KeyType::P256,
        KeyAlgorithm::Es384 => KeyType::P384,
    }
}

/// The rotation policy of the flags, for tokens that live at most `max_token_seconds`. Without
/// `--key-algorithm`, new keys are of the kind of `current` (the key signing now), so a
/// directory created with ES256 stays ES256; RS256 for a new directory.
pub(crate) fn policy(
    rotation: &RotationArgs,
    current: Option<Algorithm>,
    max_token_seconds: i64,
) -> RotationPolicy {
    let key_type = match (rotation.key_algorithm, current) {
        (Some(flag), _) => key_type(flag),
        (None, Some(Algorithm::ES256)) => KeyType::P256,
        (None, Some(Algorithm::ES384)) => KeyType::P384,
        (None, Some(Algorithm::ES512)) => KeyType::P521,
        (None, Some(Algorithm::RS256) | None) => KeyType::Rsa2048,
    };
    RotationPolicy {
        key_type,
        rotation_period_seconds: rotation.key_rotation_period,
        publish_ahead_seconds: rotation.key_publish_ahead,
        max_token_seconds,
    }
}

/// The longest token lifetime recorded on the keys that sign now or will: what an operator's
/// command (which does not know the server's flags) plans new keys with.
pub(crate) fn recorded_max_token_seconds(keys: &ManagedKeySet, now: Timestamp) -> i64 {
    keys.schedule(now)
        .iter()
        .filter(|k| {
            matches!(
                k.state,
                warrant_keys::KeyState::Next | warrant_keys::KeyState::Active
            )
        })
        .map(|k| k.max_token_seconds)
        .max()
        .unwrap_or(MANAGED_DEFAULT_MAX_TOKEN_SECONDS)
}

/// The algorithm of the key signing at `now`, if any.
pub(crate) fn current_algorithm(keys: &ManagedKeySet, now: Timestamp) -> Option<Algorithm> {
    keys.active_at(now).map(|k| k.algorithm())
}

/// The keys loaded at startup, ready to hand to the server and then keep current.
pub(crate) struct Opened {
    /// The keys in force now.
    pub(crate) initial: KeySet,
    metrics: KeyMetrics,
    running: Pending,
}

enum Pending {
    Static {
        files: StaticKeyFiles,
        keys: StaticKeys,
    },
    Managed {
        manager: Box<KeyManager<DirStore>>,
        extra_files: StaticKeyFiles,
        extra: StaticKeys,
    },
}

/// Keeps the keys current; dropping it stops that.
pub(crate) struct Running {
    _manager: Option<KeyManagerTask>,
    _static: Option<StaticWatch>,
}

/// Loads the keys: fails (so warrant does not start) if the files do not load, or the key
/// directory cannot be read or created.
pub(crate) async fn open(
    source: &KeySource,
    max_token_seconds: i64,
    metrics: KeyMetrics,
    now: Timestamp,
) -> Result<Opened, Box<dyn Error>> {
    match source {
        KeySource::Static(files) => {
            let keys = StaticKeys::load(files)?;
            let initial = keys
                .key_set()
                .ok_or("the signing key file holds no signing key")?;
            metrics.published(&initial);
            Ok(Opened {
                initial,
                metrics,
                running: Pending::Static {
                    files: files.clone(),
                    keys,
                },
            })
        }
        KeySource::Managed {
            dir,
            rotation,
            extra: extra_files,
        } => {
            let store = DirStore::new(dir);
            let current = store
                .load()
                .await?
                .and_then(|s| current_algorithm(&s.keys, now));
            let policy = policy(rotation, current, max_token_seconds);
            policy.validate()?;
            let described = store.describe();
            let manager =
                KeyManager::open(store, policy, Writer::Always, metrics.clone(), now).await?;
            let extra = StaticKeys::load(extra_files)?;
            let initial = manager
                .key_set(now)
                .ok_or_else(|| format!("{described} holds no active key"))?
                .with_extra_verifying(&extra.verifying);
            metrics.published(&initial);
            Ok(Opened {
                initial,
                metrics,
                running: Pending::Managed {
                    manager: Box::new(manager),
                    extra_files: extra_files.clone(),
                    extra,
                },
            })
        }
    }
}

impl Opened {
    /// Starts keeping the server's keys current.
    pub(crate) fn start(self, state: AppState, clock: Clock) -> Result<Running, Box<dyn Error>> {
        let (managed, extra) = match &self.running {
            Pending::Static { .. } => (None, Vec::new()),
            Pending::Managed { manager, extra, .. } => {
                (manager.key_set(clock.now()), extra.verifying.clone())
            }
        };
        let sink = Arc::new(Sink {
            state,
            metrics: self.metrics.clone(),
            current: Mutex::new(Current { managed, extra }),
        });
        match self.running {
            Pending::Static { files, keys } => {
                let publish = {
                    let sink = sink.clone();
                    move |keys: &StaticKeys| {
                        if let Some(set) = keys.key_set() {
                            sink.publish_static(set);
                        }
                    }
                };
                let watch_clock = clock.clone();
                let watch = files.watch(keys, self.metrics, move || watch_clock.now(), publish)?;
                Ok(Running {
                    _manager: None,
                    _static: Some(watch),
                })
            }
            Pending::Managed {
                manager,
                extra_files,
                extra,
            } => {
                let watch = if extra_files.key_files.is_empty() {
                    None
                } else {
                    let sink = sink.clone();
                    let watch_clock = clock.clone();
                    Some(extra_files.watch(
                        extra,
                        self.metrics,
                        move || watch_clock.now(),
                        move |keys: &StaticKeys| sink.set_extra(keys.verifying.clone()),
                    )?)
                };
                let task = manager.spawn(
                    move || clock.now(),
                    move |keys: KeySet| sink.set_managed(keys),
                )?;
                Ok(Running {
                    _manager: Some(task),
                    _static: watch,
                })
            }
        }
    }
}

/// Hands key sets to the server: the managed set merged with static verification keys, each
/// kept current by its own watcher.
struct Sink {
    state: AppState,
    metrics: KeyMetrics,
    current: Mutex<Current>,
}

struct Current {
    /// The managed keys as the manager last published them (without the static ones).
    managed: Option<KeySet>,
    /// The static verification keys published beside them.
    extra: Vec<VerifyingKey>,
}

impl Sink {
    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish_static(&self, keys: KeySet) {
        self.metrics.published(&keys);
        self.state.set_keys(keys);
    }

    fn set_managed(&self, keys: KeySet) {
        let mut current = self.lock();
        let unchanged = current
            .managed
            .as_ref()
            .is_some_and(|m| m.same_keys(&keys) && m.next_change() == keys.next_change());
        current.managed = Some(keys);
        if !unchanged {
            self.publish_merged(&current);
        }
    }

    fn set_extra(&self, extra: Vec<VerifyingKey>) {
        let mut current = self.lock();
        if current.extra == extra {
            return;
        }
        current.extra = extra;
        self.publish_merged(&current);
    }

    fn publish_merged(&self, current: &Current) {
        if let Some(managed) = &current.managed {
            let keys = managed.clone().with_extra_verifying(&current.extra);
            self.metrics.published(&keys);
            self.state.set_keys(keys);
        }
    }
}
