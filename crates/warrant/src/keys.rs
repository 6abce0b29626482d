//! Where `serve`'s keys come from, and keeping them current: kube-apiserver's static key files
//! (reloaded when they change), or managed keys that warrant rotates on schedule, in a key
//! directory or a Kubernetes Secret shared by replicas (written by the one elected through a
//! Lease), optionally with static verification keys beside them.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use warrant_clock::Clock;
use warrant_keys::{
    DirStore, KeyManager, KeyMetrics, KeyPurpose, KeySet, KeyStore, Leadership, LeaseConfig,
    ManagedKeySet, RotationPolicy, SharedSecret, SharedSecretConfig, SharedSecretError,
    StaticKeyFiles, StaticKeys, StoreError, StoreStatus, Writer,
};
use warrant_server::AppState;
use warrant_token::{Algorithm, KeyType};

use crate::cli::{KeyAlgorithm, KeySourceArgs, ObjectName, RotationArgs};
use crate::holder::Holder;
use crate::running::Running;

mod sink;
mod store;

use sink::{Sink, say_revoked_in_files};
pub(crate) use store::{Store, client};

/// The longest token lifetime with managed keys when `--service-account-max-token-expiration`
/// is not set: a day. It bounds how long a retired key stays published (a day and a minute
/// after it stops signing), so the JWKS holds three keys at most with the default rotation.
pub(crate) const MANAGED_DEFAULT_MAX_TOKEN_SECONDS: i64 = 24 * 3600;

/// Where the keys come from.
#[derive(Debug, Clone)]
pub(crate) enum KeySource {
    /// `--service-account-signing-key-file` and `--service-account-key-file`.
    Static(StaticKeyFiles),
    /// `--key-dir` or `--key-secret`, with any `--service-account-key-file` keys beside it.
    Managed {
        /// Where the managed keys are.
        store: ManagedStore,
        /// How they rotate.
        rotation: RotationArgs,
        /// Static verification keys published beside the managed ones.
        extra: StaticKeyFiles,
    },
}

/// Where managed keys are kept.
#[derive(Debug, Clone)]
pub(crate) enum ManagedStore {
    /// A key directory, which every process may write.
    Dir(PathBuf),
    /// A Kubernetes Secret, written by the replica that holds `lease`.
    Secret {
        /// The Secret.
        secret: ObjectName,
        /// The Lease that elects the writer.
        lease: ObjectName,
        /// The Lease's duration, in seconds.
        lease_seconds: u64,
        /// This node's local copy (`--key-copy-dir`), to start from while the Secret cannot
        /// be read.
        copy: Option<PathBuf>,
    },
}

/// Why the key flags name no key source, or two.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeySourceError {
    /// `--key-dir` and `--key-secret` both.
    #[error(
        "--key-dir and --key-secret are mutually exclusive: managed keys live in one place. To move a key directory into a Secret, see docs/keys.md"
    )]
    DirAndSecret,
    /// `--key-lease-duration` below what leader election needs.
    #[error(
        "--key-lease-duration must be at least {}s",
        warrant_keys::MIN_LEASE_SECONDS
    )]
    LeaseTooShort,
    /// `--key-dir` beside `--service-account-signing-key-file`.
    #[error(
        "--key-dir and --service-account-signing-key-file are mutually exclusive: the keys in a key directory are generated and rotated by warrant. To bring a static signing key under management, import it with `warrant keys generate --key-dir DIR --service-account-signing-key-file FILE` (see docs/keys.md)"
    )]
    DirAndSigningKey,
    /// `--key-secret` beside `--service-account-signing-key-file`.
    #[error(
        "--key-secret and --service-account-signing-key-file are mutually exclusive: the keys in a key Secret are generated and rotated by warrant. To bring a static signing key under management, import it with `warrant keys generate --key-secret NAMESPACE/NAME --service-account-signing-key-file FILE` (see docs/keys.md)"
    )]
    SecretAndSigningKey,
    /// No key flag at all.
    #[error("either --service-account-signing-key-file, --key-dir or --key-secret must be set")]
    None,
}

impl KeySource {
    /// The source the flags name, or why they name none (or two).
    pub(crate) fn from_args(args: &KeySourceArgs) -> Result<Self, KeySourceError> {
        let managed = match (&args.key_dir, &args.key_secret) {
            (Some(_), Some(_)) => return Err(KeySourceError::DirAndSecret),
            (Some(dir), None) => Some(ManagedStore::Dir(dir.clone())),
            (None, Some(secret)) => {
                let lease = lease_of(secret, args.key_lease.as_ref());
                let lease_seconds = u64::try_from(args.key_lease_duration)
                    .ok()
                    .filter(|s| *s >= warrant_keys::MIN_LEASE_SECONDS)
                    .ok_or(KeySourceError::LeaseTooShort)?;
                Some(ManagedStore::Secret {
                    secret: secret.clone(),
                    lease,
                    lease_seconds,
                    copy: args.key_copy_dir.clone(),
                })
            }
            (None, None) => None,
        };
        match (&args.signing_key_file, managed) {
            (Some(_), Some(ManagedStore::Dir(_))) => Err(KeySourceError::DirAndSigningKey),
            (Some(_), Some(ManagedStore::Secret { .. })) => {
                Err(KeySourceError::SecretAndSigningKey)
            }
            (None, None) => Err(KeySourceError::None),
            (Some(signing), None) => Ok(KeySource::Static(StaticKeyFiles {
                signing_key_file: Some(signing.clone()),
                key_files: args.key_files.clone(),
            })),
            (None, Some(store)) => Ok(KeySource::Managed {
                store,
                rotation: args.rotation.clone(),
                extra: StaticKeyFiles {
                    signing_key_file: None,
                    key_files: args.key_files.clone(),
                },
            }),
        }
    }

    /// True for managed keys.
    pub(crate) fn is_managed(&self) -> bool {
        matches!(self, KeySource::Managed { .. })
    }

    /// True if the keys are in a Kubernetes Secret without a local copy to start from.
    pub(crate) fn secret_without_copy(&self) -> bool {
        matches!(
            self,
            KeySource::Managed {
                store: ManagedStore::Secret { copy: None, .. },
                ..
            }
        )
    }

    /// True if the keys are in a Kubernetes Secret (so a cluster connection is needed).
    pub(crate) fn uses_cluster(&self) -> bool {
        matches!(
            self,
            KeySource::Managed {
                store: ManagedStore::Secret { .. },
                ..
            }
        )
    }
}

/// The Lease electing the writer of `secret`: `lease`, else in its namespace, named after it
/// with `-leader`.
pub(crate) fn lease_of(secret: &ObjectName, lease: Option<&ObjectName>) -> ObjectName {
    lease.cloned().unwrap_or_else(|| ObjectName {
        namespace: secret.namespace.clone(),
        name: format!("{}-leader", secret.name),
    })
}

/// This replica's name in the key Lease: `POD_NAME` (set it from the downward API), else the
/// host name with a random suffix, as client-go's leader election does, so two processes on one
/// host never share an identity.
pub(crate) fn holder_identity() -> String {
    if let Ok(pod) = std::env::var("POD_NAME")
        && !pod.is_empty()
    {
        return pod;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "warrant".to_owned());
    let random = warrant_token::new_jti();
    format!("{host}_{}", random.get(..8).unwrap_or(&random))
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
        opened: Box<OpenedStore>,
        extra_files: StaticKeyFiles,
        extra: StaticKeys,
    },
}

/// A managed key set opened from its store (the token keys' `--key-dir` or `--key-secret`, or
/// the pod certificate CA's): its manager and, with a Secret, the election of its writer and
/// this node's local copy.
pub(crate) struct OpenedStore {
    pub(crate) manager: KeyManager<Store>,
    /// The store, for messages.
    pub(crate) described: String,
    /// With a Secret: the election of its writer and this node's local copy.
    shared: Option<Box<SharedSecret>>,
}

/// The names of one managed key set's lines in `/readyz?verbose`.
pub(crate) struct ReportNames {
    /// How the store answers.
    pub(crate) store: &'static str,
    /// Whether this replica writes the store (with a Secret).
    pub(crate) lease: &'static str,
    /// How this node's local copy stands (with `--key-copy-dir`).
    pub(crate) copy: &'static str,
}

/// The token keys' lines.
const TOKEN_KEY_REPORTS: ReportNames = ReportNames {
    store: "key-store",
    lease: "key-lease",
    copy: "key-copy",
};

/// Loads the keys: fails (so warrant does not start) if the files do not load, or the key
/// directory or Secret cannot be read or created, or (with `holder`, the token or KMS holding
/// the private keys) a key that signs now or will cannot sign there. With a Secret, a replica that does not hold
/// the Lease waits for the leader to create the first key. `kubeconfig` reaches the Secret.
pub(crate) async fn open(
    source: &KeySource,
    max_token_seconds: i64,
    metrics: KeyMetrics,
    kubeconfig: Option<&Path>,
    holder: Option<&Holder>,
    clock: &Clock,
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
            store,
            rotation,
            extra: extra_files,
        } => {
            let opened = open_store(
                (store, KeyPurpose::Tokens),
                rotation,
                max_token_seconds,
                &metrics,
                kubeconfig,
                holder,
                clock,
            )
            .await?;
            let manager = &opened.manager;
            let described = &opened.described;
            let now = clock.now();
            let extra = StaticKeys::load(extra_files)?;
            let managed = manager
                .key_set(now)
                .ok_or_else(|| format!("{described} holds no active key"))?;
            say_revoked_in_files(&managed, &extra.verifying);
            let initial = managed.with_extra_verifying(&extra.verifying);
            metrics.published(&initial);
            Ok(Opened {
                initial,
                metrics,
                running: Pending::Managed {
                    opened: Box::new(opened),
                    extra_files: extra_files.clone(),
                    extra,
                },
            })
        }
    }
}

/// Opens a managed key set's store: fails if the directory or Secret cannot be read or
/// created, or (with `holder`) a key that signs now or will cannot sign there. With a Secret,
/// a replica that does not hold the Lease waits for the leader to create the first key (or
/// starts from this node's copy). `rotation` and `max_token_seconds` make its policy; a store
/// recording keys for another purpose than the one given with it is refused.
pub(crate) async fn open_store(
    (store, purpose): (&ManagedStore, KeyPurpose),
    rotation: &RotationArgs,
    max_token_seconds: i64,
    metrics: &KeyMetrics,
    kubeconfig: Option<&Path>,
    holder: Option<&Holder>,
    clock: &Clock,
) -> Result<OpenedStore, Box<dyn Error>> {
    let now = clock.now();
    let key_holder = holder.cloned();
    let (store, writer, mut shared) = match store {
        ManagedStore::Dir(dir) => (
            Store::Dir(DirStore::new(dir).for_purpose(purpose)),
            Writer::Always,
            None,
        ),
        ManagedStore::Secret {
            secret,
            lease,
            lease_seconds,
            copy,
        } => {
            let config = SharedSecretConfig {
                namespace: secret.namespace.clone(),
                name: secret.name.clone(),
                lease: LeaseConfig {
                    namespace: lease.namespace.clone(),
                    name: lease.name.clone(),
                    identity: holder_identity(),
                    duration_seconds: *lease_seconds,
                },
                copy_dir: copy.clone(),
                holder: key_holder.clone(),
                purpose,
            };
            let shared = open_shared(config, kubeconfig, metrics).await?;
            let store = match shared.copied() {
                Some(copied) => Store::Copied(copied),
                None => Store::Secret(shared.secret().clone()),
            };
            (store, shared.writer(), Some(Box::new(shared)))
        }
    };
    let store = store.held_by(key_holder);
    let seed = shared.as_mut().and_then(|shared| shared.take_seed());
    let seeded = || seed.as_ref().map(|s| s.keys.clone());
    let current = match store.load().await {
        Ok(Some(stored)) => Some(stored.keys),
        // The Secret's keys are the copy's until it answers, or if it holds none.
        Ok(None) => seeded(),
        Err(StoreError::Unavailable { .. }) if seed.is_some() => seeded(),
        Err(error) => return Err(error.into()),
    }
    .and_then(|keys| current_algorithm(&keys, now));
    let policy = policy(rotation, current, max_token_seconds);
    policy.validate()?;
    let described = store.describe();
    let manager = match seed {
        Some(seed) => {
            KeyManager::open_from_copy(store, policy, writer, metrics.clone(), now, seed).await?
        }
        None => KeyManager::open_when_ready(store, policy, writer, metrics.clone(), clock).await?,
    };
    if let Some(holder) = holder {
        check_held_keys(holder, &manager, clock.now()).await?;
    }
    Ok(OpenedStore {
        manager,
        described,
        shared,
    })
}

/// Opens `--key-secret` as `config` says, through the cluster of `kubeconfig`: joins the
/// election of its writer through the Lease and reads this node's copy (`--key-copy-dir`).
async fn open_shared(
    config: SharedSecretConfig,
    kubeconfig: Option<&Path>,
    metrics: &KeyMetrics,
) -> Result<SharedSecret, Box<dyn Error>> {
    let client = client(kubeconfig).await?;
    SharedSecret::open(client, config, metrics)
        .await
        .map_err(|error| match error {
            SharedSecretError::Copy(error) => format!("--key-copy-dir: {error}").into(),
            error => error.into(),
        })
}

/// Checks that the keys that sign now or will are usable in `holder`: a missing or unsuitable
/// object is a startup error, not a failure at the first signature. Unless they come from a
/// local copy the store has not confirmed: the copy's keys are served to verify with
/// (kube-apiserver cannot start without them), and a key the store's writer has since retired,
/// and destroyed, signs nothing anyway.
async fn check_held_keys(
    holder: &Holder,
    manager: &KeyManager<Store>,
    now: Timestamp,
) -> Result<(), Box<dyn Error>> {
    let checked = warrant_keys::check_signing_keys(&**holder, manager.keys(), now).await;
    match checked {
        Err(error) if manager.health().borrow().failing_since.is_some() => {
            tracing::error!(%error, "a key of the local copy cannot sign in the token; serving the copy's keys to verify with until the key store answers");
            Ok(())
        }
        checked => Ok(checked?),
    }
}

/// What `--publish-discovery` needs from the keys: a feed of every key set the server
/// publishes, and the activation gate for the key manager.
pub(crate) struct Publishing {
    pub(crate) feed: tokio::sync::watch::Sender<Arc<warrant_issuer::Published>>,
    pub(crate) gate: warrant_keys::ActivationGate,
}

impl Opened {
    /// Whether this process writes the keys (and so publishes them): always for static keys
    /// and a key directory, while it holds the Lease for a Secret.
    pub(crate) fn writer(&self) -> Writer {
        match &self.running {
            Pending::Managed { opened, .. } => opened.writer(),
            Pending::Static { .. } => Writer::Always,
        }
    }

    /// Starts keeping the server's keys current, and reports the key store's state (and, with a
    /// Secret, the Lease's) in `/readyz?verbose`. With `publishing`, every key set goes to its
    /// feed too, and the key manager gates activations on what the targets list.
    pub(crate) fn start(
        self,
        state: AppState,
        clock: Clock,
        publishing: Option<Publishing>,
    ) -> Result<Running, Box<dyn Error>> {
        let (feed, gate) = match publishing {
            Some(p) => (Some(p.feed), Some(p.gate)),
            None => (None, None),
        };
        let (managed, extra) = match &self.running {
            Pending::Static { .. } => (None, Vec::new()),
            Pending::Managed { opened, extra, .. } => {
                (opened.manager.key_set(clock.now()), extra.verifying.clone())
            }
        };
        let sink = Arc::new(Sink::new(
            state.clone(),
            feed,
            self.metrics.clone(),
            managed,
            extra,
        ));
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
                let watch = files.watch(keys, self.metrics, clock, publish)?;
                Ok(Running::hold(watch))
            }
            Pending::Managed {
                opened,
                extra_files,
                extra,
            } => {
                let watch = if extra_files.key_files.is_empty() {
                    None
                } else {
                    let sink = sink.clone();
                    Some(extra_files.watch(
                        extra,
                        self.metrics,
                        clock.clone(),
                        move |keys: &StaticKeys| sink.set_extra(keys.verifying.clone()),
                    )?)
                };
                let issuer = state.issuer().clone();
                let deadline = move || issuer.published().keys().signing_deadline();
                let rotating = opened.spawn(
                    &state,
                    &TOKEN_KEY_REPORTS,
                    clock,
                    gate,
                    deadline,
                    move |keys: KeySet| {
                        sink.set_managed(keys);
                        Sink::certify_held(&sink);
                    },
                )?;
                Ok(Running::spawn(|stop| async move {
                    stop.cancelled().await;
                    rotating.stop().await;
                    drop(watch);
                }))
            }
        }
    }
}

/// A managed key set rotating: dropping it stops the rotation; [`Rotating::stop`] also
/// releases the Lease.
pub(crate) struct Rotating {
    task: warrant_keys::KeyManagerTask,
    leadership: Option<Leadership>,
}

impl Rotating {
    /// Stops rotating, then releases the Lease (if held), so another replica takes over at
    /// once rather than when the Lease expires.
    pub(crate) async fn stop(self) {
        drop(self.task);
        if let Some(leadership) = self.leadership {
            leadership.release().await;
        }
    }
}

impl OpenedStore {
    /// Whether this process writes the store: always for a key directory, while it holds the
    /// Lease for a Secret.
    pub(crate) fn writer(&self) -> Writer {
        match &self.shared {
            Some(shared) => shared.writer(),
            None => Writer::Always,
        }
    }

    /// Starts keeping the keys current: `publish` receives every key set (the first at once),
    /// `/readyz?verbose` has the store's lines under `names` (`deadline` says until when the
    /// keys sign while the store does not answer), and with `gate` activations wait for the
    /// publish targets.
    pub(crate) fn spawn(
        self,
        state: &AppState,
        names: &ReportNames,
        clock: Clock,
        gate: Option<warrant_keys::ActivationGate>,
        deadline: impl Fn() -> Option<Timestamp> + Send + Sync + 'static,
        publish: impl Fn(KeySet) + Send + Sync + 'static,
    ) -> Result<Rotating, Box<dyn Error>> {
        let OpenedStore {
            manager, shared, ..
        } = self;
        let health = manager.health();
        let now_clock = clock.clone();
        state.add_report(names.store, move || {
            let status = StoreStatus::Served {
                health: health.borrow().clone(),
                deadline: deadline(),
            };
            status.text(now_clock.now())
        });
        let leadership = shared.map(|shared| {
            let reports = shared.reports();
            if reports.keeps_copy() {
                let (reports, clock) = (reports.clone(), clock.clone());
                state.add_report(names.copy, move || {
                    let copy = reports.copy();
                    copy.map(|c| c.text(clock.now())).unwrap_or_default()
                });
            }
            state.add_report(names.lease, move || reports.writer().text());
            shared.into_leadership()
        });
        let manager = match gate {
            Some(gate) => manager.with_gate(gate),
            None => manager,
        };
        let task = manager.spawn(clock, publish)?;
        Ok(Rotating { task, leadership })
    }
}
