//! `warrant serve --pod-certificate-signer NAME`: warrant as the signer of pod certificates
//! (KEP-4317; docs/pod-certificates.md). Off unless a signer name is given. Then:
//!
//! - the CA comes from files ([`ca_files`]), re-read when they change;
//! - the policy is the policy file's `podCertificates` section or the flags' default
//!   ([`policy`]);
//! - `warrant_podcert_kube::Controller` watches PCRs by signer name and hands each to
//!   [`sign::PodCertSigner`], which reads the facts live and decides;
//! - one ClusterTrustBundle per signer name holds the roots, rewritten when they change and
//!   retried while writing fails;
//! - `/readyz/pod-certificates` fails while the CA cannot sign (not valid yet, or within an
//!   hour of its end): PCRs then wait rather than fail.
//!
//! The PCR API, the trust bundles, events and the live reads go through `--kubeconfig` (or the
//! in-cluster configuration).

mod ca_files;
mod ca_keys;
mod policy;
mod sign;

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use warrant_audit::{Auditor, Requester};
use warrant_auth::PolicyFile;
use warrant_clock::Clock;
use warrant_issuer::SpiffeRoots;
use warrant_keys::{KeyMetrics, KeyPurpose, KeySet};
use warrant_podcert::CaSet;
use warrant_podcert::policy::MIN_LIFETIME_SECONDS;
use warrant_podcert_kube::trust::TrustBundles;
use warrant_podcert_kube::{Config, Controller};
use warrant_server::AppState;
use warrant_watch::FileWatch;

use crate::cli::{CaKeyAlgorithm, KeyAlgorithm, PodCertArgs, RotationArgs};
use crate::holder::Holder;
use crate::keys::{ManagedStore, OpenedStore, ReportNames};
use crate::running::Running;
use ca_files::CaFiles;
use ca_keys::Roots;
use policy::PolicySource;
use sign::{PodCertSigner, SignMetrics};

/// The signer, set up but not started: its metrics are registered and its CA loaded, so a
/// configuration error stops `serve` before anything serves.
pub(crate) struct Prepared {
    controller: Controller<PodCertSigner>,
    bundles: TrustBundles,
    signers: Vec<String>,
    cas: watch::Receiver<CaSet>,
    source: CaSource,
    metrics: SignMetrics,
    clock: Clock,
}

/// Where the CA comes from, ready to be kept current.
enum CaSource {
    /// The CA files, watched; a change that does not load is said in `failure`.
    Files {
        file_watch: FileWatch,
        failure: watch::Receiver<Option<String>>,
    },
    /// A managed key set: its store's manager, the feed of its key sets, and what turns them
    /// into the CA set.
    Keys {
        opened: Box<OpenedStore>,
        feed: watch::Sender<KeySet>,
        roots: Roots,
        cas: watch::Sender<CaSet>,
    },
}

/// What `prepare` needs of the rest of `serve`.
pub(crate) struct Context<'a> {
    /// `--kubeconfig`.
    pub(crate) kubeconfig: Option<&'a Path>,
    /// The authorization policy file, whose `podCertificates` section is the policy.
    pub(crate) policy_file: Option<PolicyFile>,
    /// The holder of the token keys (`--key-pkcs11-uri`, `--key-kms-uri`), which holds the
    /// managed CA keys too.
    pub(crate) holder: Option<&'a Holder>,
    /// `--key-lease-duration`, which the CA key Secret's Lease takes too.
    pub(crate) lease_seconds: i64,
    pub(crate) auditor: &'a Auditor,
    pub(crate) clock: &'a Clock,
}

/// Sets the signer up if `--pod-certificate-signer` is given.
pub(crate) async fn prepare(
    args: &PodCertArgs,
    context: Context<'_>,
    registry: &mut Registry,
) -> Result<Option<Prepared>, Box<dyn Error>> {
    let managed = managed_store(args, context.lease_seconds)?;
    if args.signers.is_empty() {
        if args.ca_cert_file.is_some() || args.ca_key_file.is_some() || managed.is_some() {
            return Err("the pod certificate CA flags (--pod-certificate-ca-…) need --pod-certificate-signer".into());
        }
        return Ok(None);
    }
    let Context {
        kubeconfig,
        policy_file,
        holder,
        auditor,
        clock,
        ..
    } = context;
    let policy = PolicySource::new(&args.signers, args.trust_domain.as_deref(), policy_file)?;
    let (cas, source, max_lifetime) = match managed {
        Some(store) => {
            let longest = policy.longest_lifetime();
            let (cas, source) =
                open_managed(args, &store, longest, kubeconfig, holder, clock, registry).await?;
            (cas, source, Some(longest))
        }
        None => {
            let (cas, source) = open_files(args)?;
            (cas, source, None)
        }
    };
    let client = warrant_objects::kube::cluster_client(kubeconfig).await?;
    let metrics = SignMetrics::new(registry);
    let recorder = event_recorder(client.clone());
    let signer = PodCertSigner {
        client: client.clone(),
        policy,
        max_lifetime,
        cas: cas.clone(),
        clock: clock.clone(),
        auditor: auditor.clone(),
        metrics: metrics.clone(),
        recorder,
        requester: Requester {
            authenticated_by: "self",
            ..Requester::default()
        },
    };
    let config = Config {
        signer_names: args.signers.clone(),
        workers: usize::from(args.workers),
        ..Config::default()
    };
    let controller = Controller::new(client.clone(), config, Arc::new(signer), registry)?;
    let bundles = TrustBundles::new(client, registry);
    Ok(Some(Prepared {
        controller,
        bundles,
        signers: args.signers.clone(),
        cas,
        source,
        metrics,
        clock: clock.clone(),
    }))
}

/// The CA of `--pod-certificate-ca-cert-file` and `--pod-certificate-ca-key-file`, watched.
fn open_files(args: &PodCertArgs) -> Result<(watch::Receiver<CaSet>, CaSource), Box<dyn Error>> {
    let (Some(cert), Some(key)) = (&args.ca_cert_file, &args.ca_key_file) else {
        return Err("--pod-certificate-signer needs a CA: --pod-certificate-ca-key-dir or --pod-certificate-ca-key-secret (keys warrant makes and rotates), or --pod-certificate-ca-cert-file and --pod-certificate-ca-key-file (a CA of your own)".into());
    };
    let files = CaFiles {
        cert: cert.clone(),
        key: key.clone(),
        bundle: args.ca_bundle_file.clone(),
    };
    let (failure, ca_failure) = watch::channel(None);
    let (cas, file_watch) = files
        .watch(failure)
        .map_err(|e| format!("the pod certificate CA: {e}"))?;
    let source = CaSource::Files {
        file_watch,
        failure: ca_failure,
    };
    Ok((cas, source))
}

/// The recorder of the signer's events, naming the replica: the Deployment's `POD_NAME`, else
/// the host's name.
fn event_recorder(client: kube::Client) -> kube::runtime::events::Recorder {
    let instance = std::env::var("POD_NAME")
        .or_else(|_| {
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned())
        })
        .ok();
    kube::runtime::events::Recorder::new(
        client,
        kube::runtime::events::Reporter {
            controller: "warrant".to_owned(),
            instance,
        },
    )
}

/// The CA key store the flags name, if any.
fn managed_store(args: &PodCertArgs, lease_seconds: i64) -> Result<Option<ManagedStore>, String> {
    if let Some(dir) = &args.ca_key_dir {
        return Ok(Some(ManagedStore::Dir(dir.clone())));
    }
    let Some(secret) = &args.ca_key_secret else {
        return Ok(None);
    };
    let lease_seconds = u64::try_from(lease_seconds)
        .ok()
        .filter(|s| *s >= warrant_keys::MIN_LEASE_SECONDS)
        .ok_or("--key-lease-duration is too short for the CA key Secret's Lease")?;
    Ok(Some(ManagedStore::Secret {
        secret: secret.clone(),
        lease: crate::keys::lease_of(secret, args.ca_key_lease.as_ref()),
        lease_seconds,
        copy: args.ca_key_copy_dir.clone(),
    }))
}

/// Opens the CA's key store and makes the roots of its keys: a store that cannot be opened,
/// or a root that cannot be made now, stops `serve`. `longest` is the longest leaf lifetime,
/// for which a retired CA key stays published.
async fn open_managed(
    args: &PodCertArgs,
    store: &ManagedStore,
    longest: i64,
    kubeconfig: Option<&Path>,
    holder: Option<&Holder>,
    clock: &Clock,
    registry: &mut Registry,
) -> Result<(watch::Receiver<CaSet>, CaSource), Box<dyn Error>> {
    let metrics = KeyMetrics::new();
    metrics.register_as(registry, "warrant_podcert_ca_keys");
    let rotation = RotationArgs {
        key_algorithm: Some(match args.ca_algorithm {
            CaKeyAlgorithm::Es256 => KeyAlgorithm::Es256,
            CaKeyAlgorithm::Es384 => KeyAlgorithm::Es384,
        }),
        key_rotation_period: args.ca_rotation_period,
        key_publish_ahead: args.ca_publish_ahead,
    };
    let mut opened = crate::keys::open_store(
        (store, KeyPurpose::PodCertificateCa),
        &rotation,
        longest,
        &metrics,
        kubeconfig,
        holder,
        clock,
    )
    .await
    .map_err(|e| format!("the pod certificate CA's key store: {e}"))?;
    // A retired CA key's root stays published until its last leaf expires, and every replica
    // that starts meanwhile signs that root itself: its private half must stay in the token or
    // KMS until then (it is destroyed when the key leaves the set).
    opened.manager = opened.manager.keeping_retired_keys_whole();
    let now = clock.now();
    let initial = opened
        .manager
        .key_set(now)
        .ok_or_else(|| format!("{} holds no active CA key", opened.described))?;
    metrics.published(&initial);
    let mut roots = Roots::default();
    let first = roots
        .ca_set(&initial, now)
        .await
        .map_err(|e| format!("the pod certificate CA: {e}"))?;
    let (cas_sender, cas) = watch::channel(first);
    let (feed, _) = watch::channel(initial);
    let source = CaSource::Keys {
        opened: Box::new(opened),
        feed,
        roots,
        cas: cas_sender,
    };
    Ok((cas, source))
}

/// The readiness lines of the CA's key store.
const CA_KEY_REPORTS: ReportNames = ReportNames {
    store: "pod-certificate-ca-store",
    lease: "pod-certificate-ca-lease",
    copy: "pod-certificate-ca-copy",
};

/// The shortest time a CA must have left to sign: a leaf is at least kube's minimum long and
/// ends with its CA (the decision requeues `CAExpiring` past it).
const CA_MARGIN: SignedDuration = SignedDuration::from_secs(MIN_LIFETIME_SECONDS);

/// Why the CA in `set` cannot sign at `now`, if it cannot.
fn cannot_sign(set: &CaSet, now: Timestamp) -> Option<String> {
    let ca = match &set.signing {
        Ok(ca) => ca,
        Err(why) => return Some(why.clone()),
    };
    let certificate = ca.certificate();
    // A CA key in a token or KMS that cannot be reached: PCRs wait (each requeued
    // CAUnavailable) until it answers again.
    if let Some(why) = ca.unavailable() {
        return Some(format!(
            "the pod certificate CA {} cannot sign now: {why}",
            certificate.key_id()
        ));
    }
    if certificate.not_before() > now {
        return Some(format!(
            "the pod certificate CA is not valid until {}",
            certificate.not_before()
        ));
    }
    if certificate.not_after() < now + CA_MARGIN {
        return Some(format!(
            "the pod certificate CA expires at {}: it can sign no certificate of an hour; renew the CA files",
            certificate.not_after()
        ));
    }
    None
}

impl Prepared {
    /// Starts the controller and the trust bundle keeper, and adds the readiness check.
    /// `publish` is the publish targets' feed of the SPIFFE bundle's roots, if any.
    pub(crate) fn start(
        self,
        state: &AppState,
        publish: Option<watch::Sender<Option<Arc<SpiffeRoots>>>>,
    ) -> Running {
        let cas = self.cas.clone();
        let clock = self.clock.clone();
        state.add_check("pod-certificates", move || {
            cannot_sign(&cas.borrow(), clock.now())
        });
        let (file_watch, managed) = self.source.start(state, &self.clock);
        let state = state.clone();
        Running::spawn(move |stop| async move {
            let _file_watch = file_watch;
            let managed = managed.map(|m| {
                let follow =
                    ca_keys::follow(m.keys, m.roots, m.cas, self.clock.clone(), stop.clone());
                (m.rotating, tokio::spawn(follow))
            });
            let controller = {
                let stop = stop.clone();
                tokio::spawn(async move {
                    if let Err(error) = self.controller.run(stop).await {
                        tracing::error!(%error, "the pod certificate signer stopped");
                    }
                })
            };
            let trust = Trust {
                bundles: self.bundles,
                signers: self.signers,
                metrics: self.metrics,
                state,
                publish,
            };
            trust.keep(self.cas, stop).await;
            let _ = controller.await;
            if let Some((rotating, follow)) = managed {
                let _ = follow.await;
                rotating.stop().await;
            }
        })
    }
}

/// A managed CA key set being kept current: its rotation, and what makes its key sets the CA
/// set (followed once the signer runs).
struct ManagedCa {
    rotating: crate::keys::Rotating,
    keys: watch::Receiver<KeySet>,
    roots: Roots,
    cas: watch::Sender<CaSet>,
}

impl CaSource {
    /// Starts keeping the CA current: the files' watch (a change that does not load said in
    /// `/readyz?verbose`), or the key store's rotation, reported under the CA's lines.
    fn start(self, state: &AppState, clock: &Clock) -> (Option<FileWatch>, Option<ManagedCa>) {
        match self {
            CaSource::Files {
                file_watch,
                failure,
            } => {
                // Files that changed but do not load leave the CA in force: not a readiness
                // failure, but said in /readyz?verbose until they load.
                state.add_report("pod-certificate-ca", move || match &*failure.borrow() {
                    None => "ok".to_owned(),
                    Some(why) => format!(
                        "the CA files changed but do not load ({why}); the CA loaded before still signs"
                    ),
                });
                (Some(file_watch), None)
            }
            CaSource::Keys {
                opened,
                feed,
                roots,
                cas,
            } => {
                let keys = feed.subscribe();
                let deadline = {
                    let keys = keys.clone();
                    move || keys.borrow().signing_deadline()
                };
                let publish = move |set: KeySet| {
                    feed.send_replace(set);
                };
                match opened.spawn(
                    state,
                    &CA_KEY_REPORTS,
                    clock.clone(),
                    None,
                    deadline,
                    publish,
                ) {
                    Ok(rotating) => (
                        None,
                        Some(ManagedCa {
                            rotating,
                            keys,
                            roots,
                            cas,
                        }),
                    ),
                    Err(error) => {
                        tracing::error!(%error, "the pod certificate CA's keys are not rotated");
                        (None, None)
                    }
                }
            }
        }
    }
}

/// Where the roots go: each signer name's ClusterTrustBundle, the SPIFFE bundle, and the CA's
/// expiry gauge.
struct Trust {
    bundles: TrustBundles,
    signers: Vec<String>,
    metrics: SignMetrics,
    state: AppState,
    /// The publish targets' copy of the SPIFFE bundle's roots, with `--publish-discovery`.
    publish: Option<watch::Sender<Option<Arc<SpiffeRoots>>>>,
}

impl Trust {
    /// Keeps the roots in force published until `stop`: each change of the CA set once to the
    /// SPIFFE bundle and the expiry gauge, and to the ClusterTrustBundles until written (a write
    /// that fails is retried after a backoff, 10 s doubling to 5 min; a change meanwhile starts
    /// over).
    async fn keep(&self, mut cas: watch::Receiver<CaSet>, stop: CancellationToken) {
        loop {
            let set = cas.borrow_and_update().clone();
            self.publish_roots(&set);
            let mut backoff = Duration::from_secs(10);
            let mut failed = self.write_bundles(&set, backoff).await;
            loop {
                let retry = async {
                    if failed {
                        tokio::time::sleep(backoff).await;
                    } else {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    () = stop.cancelled() => return,
                    changed = cas.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        break;
                    }
                    () = retry => {
                        backoff = (backoff * 2).min(Duration::from_secs(300));
                        failed = self.write_bundles(&set, backoff).await;
                    }
                }
            }
        }
    }

    /// The SPIFFE bundle's roots (served and published) and the CA's expiry gauge.
    fn publish_roots(&self, set: &CaSet) {
        if let Ok(ca) = &set.signing {
            for signer in &self.signers {
                self.metrics
                    .ca_expiration
                    .get_or_create(&vec![("signer", signer.clone())])
                    .set(ca.certificate().not_after().as_second());
            }
        }
        let ders: Vec<Vec<u8>> = set.trusted.iter().map(|c| c.der().to_vec()).collect();
        match SpiffeRoots::new(&ders) {
            Ok(roots) => {
                self.state.set_spiffe_roots(roots.clone());
                if let Some(publish) = &self.publish {
                    publish.send_replace(Some(Arc::new(roots)));
                }
            }
            Err(error) => tracing::error!(%error, "the SPIFFE bundle keeps its previous roots"),
        }
    }

    /// Writes `set`'s roots to each signer name's ClusterTrustBundle; true if a write failed.
    async fn write_bundles(&self, set: &CaSet, backoff: Duration) -> bool {
        let roots = [set.trusted_pem()];
        let mut failed = false;
        for signer in &self.signers {
            match self.bundles.sync(signer, &roots).await {
                Ok(synced) => {
                    tracing::debug!(%signer, change = ?synced.live, "ClusterTrustBundle in step")
                }
                Err(error) => {
                    failed = true;
                    tracing::warn!(%signer, %error, retry_in = ?backoff, "the ClusterTrustBundle could not be written; retrying");
                }
            }
        }
        failed
    }
}
