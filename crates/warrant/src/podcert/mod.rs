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
mod policy;
mod sign;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use jiff::{SignedDuration, Timestamp};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use warrant_audit::{Auditor, Requester};
use warrant_auth::PolicyFile;
use warrant_clock::Clock;
use warrant_issuer::SpiffeRoots;
use warrant_podcert::CaSet;
use warrant_podcert::policy::MIN_LIFETIME_SECONDS;
use warrant_podcert_kube::trust::TrustBundles;
use warrant_podcert_kube::{Config, Controller};
use warrant_server::AppState;
use warrant_watch::FileWatch;

use crate::running::Running;
use ca_files::CaFiles;
use policy::PolicySource;
use sign::{PodCertSigner, SignMetrics};

/// The flags.
#[derive(Debug, Args)]
#[command(next_help_heading = "Pod certificates")]
pub(crate) struct PodCertArgs {
    /// Sign PodCertificateRequests for these signer names (`<domain>/<path>`, never
    /// kubernetes.io's): one watch each. Comma-separated, repeatable. Needs the CA files and a
    /// cluster (--kubeconfig or in-cluster).
    #[arg(
        long = "pod-certificate-signer",
        env = "WARRANT_POD_CERTIFICATE_SIGNERS",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub(crate) signers: Vec<String>,
    /// The CA's certificate (PEM), then its issuers up to the root; re-read when it changes.
    #[arg(long = "pod-certificate-ca-cert-file", value_name = "PATH")]
    pub(crate) ca_cert_file: Option<PathBuf>,
    /// The CA's key (PEM, PKCS#8 or SEC1; ECDSA P-256 or P-384); re-read when it changes.
    #[arg(long = "pod-certificate-ca-key-file", value_name = "PATH")]
    pub(crate) ca_key_file: Option<PathBuf>,
    /// Further roots to publish in the ClusterTrustBundles (PEM): a previous CA's, until the
    /// last certificate it signed has expired.
    #[arg(long = "pod-certificate-ca-bundle-file", value_name = "PATH")]
    pub(crate) ca_bundle_file: Option<PathBuf>,
    /// The SPIFFE trust domain of the certificates' IDs (spiffe://DOMAIN/ns/NS/sa/SA); default
    /// cluster.local, or the policy file's podCertificates.trustDomain.
    #[arg(long = "pod-certificate-trust-domain", value_name = "DOMAIN")]
    pub(crate) trust_domain: Option<String>,
    /// PodCertificateRequests decided at once.
    #[arg(
        long = "pod-certificate-workers",
        value_name = "N",
        default_value_t = 4,
        value_parser = clap::value_parser!(u16).range(1..=256)
    )]
    pub(crate) workers: u16,
}

/// The signer, set up but not started: its metrics are registered and its CA loaded, so a
/// configuration error stops `serve` before anything serves.
pub(crate) struct Prepared {
    controller: Controller<PodCertSigner>,
    bundles: TrustBundles,
    signers: Vec<String>,
    cas: watch::Receiver<CaSet>,
    ca_failure: watch::Receiver<Option<String>>,
    metrics: SignMetrics,
    clock: Clock,
    file_watch: FileWatch,
}

/// Sets the signer up if `--pod-certificate-signer` is given.
pub(crate) async fn prepare(
    args: &PodCertArgs,
    kubeconfig: Option<&Path>,
    policy_file: Option<PolicyFile>,
    auditor: &Auditor,
    clock: &Clock,
    registry: &mut Registry,
) -> Result<Option<Prepared>, Box<dyn Error>> {
    if args.signers.is_empty() {
        if args.ca_cert_file.is_some() || args.ca_key_file.is_some() {
            return Err("--pod-certificate-ca-cert-file and --pod-certificate-ca-key-file need --pod-certificate-signer".into());
        }
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (&args.ca_cert_file, &args.ca_key_file) else {
        return Err("--pod-certificate-signer needs --pod-certificate-ca-cert-file and --pod-certificate-ca-key-file (the CA that signs the pods' certificates)".into());
    };
    let policy = PolicySource::new(&args.signers, args.trust_domain.as_deref(), policy_file)?;
    let files = CaFiles {
        cert: cert.clone(),
        key: key.clone(),
        bundle: args.ca_bundle_file.clone(),
    };
    let (failure, ca_failure) = watch::channel(None);
    let (cas, file_watch) = files
        .watch(failure)
        .map_err(|e| format!("the pod certificate CA: {e}"))?;
    let client = warrant_objects::kube::cluster_client(kubeconfig).await?;
    let metrics = SignMetrics::new(registry);
    // Events name the replica: the Deployment's POD_NAME, else the host's name.
    let instance = std::env::var("POD_NAME")
        .or_else(|_| {
            std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned())
        })
        .ok();
    let recorder = kube::runtime::events::Recorder::new(
        client.clone(),
        kube::runtime::events::Reporter {
            controller: "warrant".to_owned(),
            instance,
        },
    );
    let signer = PodCertSigner {
        client: client.clone(),
        policy,
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
        ca_failure,
        metrics,
        clock: clock.clone(),
        file_watch,
    }))
}

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
        // Files that changed but do not load leave the CA in force: not a readiness failure,
        // but said in /readyz?verbose until they load.
        let ca_failure = self.ca_failure;
        state.add_report("pod-certificate-ca", move || match &*ca_failure.borrow() {
            None => "ok".to_owned(),
            Some(why) => format!(
                "the CA files changed but do not load ({why}); the CA loaded before still signs"
            ),
        });
        let state = state.clone();
        Running::spawn(move |stop| async move {
            let _file_watch = self.file_watch;
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
        })
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
