//! `warrant serve`'s pod certificate flags: the PodCertificateRequest signer, its CA (files, or
//! keys warrant keeps) and its workers (the signer is `crate::podcert`).

use std::path::PathBuf;

use clap::Args;
use warrant_client::{ObjectName, parse_object_name};

/// The pod certificate signer's flags.
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
    #[arg(
        long = "pod-certificate-ca-cert-file",
        env = "WARRANT_POD_CERTIFICATE_CA_CERT_FILE",
        value_name = "PATH"
    )]
    pub(crate) ca_cert_file: Option<PathBuf>,
    /// The CA's key (PEM, PKCS#8 or SEC1; ECDSA P-256 or P-384); re-read when it changes.
    #[arg(
        long = "pod-certificate-ca-key-file",
        env = "WARRANT_POD_CERTIFICATE_CA_KEY_FILE",
        value_name = "PATH"
    )]
    pub(crate) ca_key_file: Option<PathBuf>,
    /// Further roots to publish in the ClusterTrustBundles (PEM): a previous CA's, until the
    /// last certificate it signed has expired.
    #[arg(long = "pod-certificate-ca-bundle-file", value_name = "PATH")]
    pub(crate) ca_bundle_file: Option<PathBuf>,
    /// Keep the CA's keys in this key directory, generated and rotated by warrant (each key a
    /// root CA); with --key-pkcs11-uri or --key-kms-uri, the private keys are held there.
    /// Instead of the CA files.
    #[arg(long = "pod-certificate-ca-key-dir", value_name = "DIR", conflicts_with_all = ["ca_cert_file", "ca_key_file", "ca_bundle_file", "ca_key_secret"])]
    pub(crate) ca_key_dir: Option<PathBuf>,
    /// Keep the CA's keys in this Kubernetes Secret (NAMESPACE/NAME), shared by the replicas:
    /// the one holding its Lease rotates them. Instead of the CA files.
    #[arg(long = "pod-certificate-ca-key-secret", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, conflicts_with_all = ["ca_cert_file", "ca_key_file", "ca_bundle_file"], group = "leased_secret")]
    pub(crate) ca_key_secret: Option<ObjectName>,
    /// The Lease electing the writer of --pod-certificate-ca-key-secret (NAMESPACE/NAME;
    /// default: beside it, named after it with -leader).
    #[arg(long = "pod-certificate-ca-key-lease", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, requires = "ca_key_secret")]
    pub(crate) ca_key_lease: Option<ObjectName>,
    /// This node's copy of --pod-certificate-ca-key-secret, to start from while the Secret
    /// cannot be read.
    #[arg(
        long = "pod-certificate-ca-key-copy-dir",
        value_name = "DIR",
        requires = "ca_key_secret"
    )]
    pub(crate) ca_key_copy_dir: Option<PathBuf>,
    /// Algorithm of the CA keys warrant generates.
    #[arg(
        long = "pod-certificate-ca-algorithm",
        value_enum,
        value_name = "ALG",
        default_value = "es256"
    )]
    pub(crate) ca_algorithm: CaKeyAlgorithm,
    /// How long each CA key signs before the next one takes over (Go duration; 720h is 30 days).
    #[arg(long = "pod-certificate-ca-rotation-period", default_value = "720h", value_name = "DURATION", value_parser = crate::duration::parse_seconds)]
    pub(crate) ca_rotation_period: i64,
    /// How long a CA key's root is published (ClusterTrustBundles, SPIFFE bundle) before it
    /// signs, so that every pod and relying party trusts it first (Go duration).
    #[arg(long = "pod-certificate-ca-publish-ahead", default_value = "24h", value_name = "DURATION", value_parser = crate::duration::parse_seconds)]
    pub(crate) ca_publish_ahead: i64,
    /// The SPIFFE trust domain of the certificates' IDs (spiffe://DOMAIN/ns/NS/sa/SA), and of
    /// the policy's JWT-SVIDs; default cluster.local, or the policy file's
    /// podCertificates.trustDomain.
    #[arg(long = "pod-certificate-trust-domain", value_name = "DOMAIN", value_parser = parse_trust_domain)]
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

/// A SPIFFE trust domain, as the flag takes it.
fn parse_trust_domain(name: &str) -> Result<String, String> {
    if warrant_podcert::policy::is_trust_domain(name) {
        Ok(name.to_owned())
    } else {
        Err(
            "a SPIFFE trust domain is 1 to 255 lower-case letters, digits, '.', '-' or '_'"
                .to_owned(),
        )
    }
}

/// The algorithms of managed CA keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CaKeyAlgorithm {
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// ECDSA P-384 with SHA-384.
    Es384,
}
