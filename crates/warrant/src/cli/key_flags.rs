//! The key flags several commands take: where the keys are (`serve`, `discovery`), the
//! algorithm and rotation schedule of managed keys, and the holder of their private halves (a
//! PKCS#11 token, AWS KMS) (`serve`, `warrant keys`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use warrant_client::{ObjectName, parse_object_name};

/// The algorithms warrant generates keys for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum KeyAlgorithm {
    /// RSA 2048 with SHA-256: accepted by every relying party.
    #[value(name = "RS256")]
    Rs256,
    /// ECDSA P-256 with SHA-256: smaller and faster; most relying parties accept it.
    #[value(name = "ES256")]
    Es256,
    /// ECDSA P-384 with SHA-384.
    #[value(name = "ES384")]
    Es384,
}

/// How managed keys rotate: shared by `serve`, `keys` and `discovery export`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RotationArgs {
    /// Algorithm of the keys warrant generates. Default: the algorithm of the key signing now,
    /// RS256 for a new key directory (every relying party accepts it).
    #[arg(
        long = "key-algorithm",
        value_enum,
        value_name = "ALG",
        requires = "managed",
        help_heading = "Keys"
    )]
    pub(crate) key_algorithm: Option<KeyAlgorithm>,
    /// How long each key signs before the next one takes over (Go duration; 168h is 7 days).
    #[arg(long = "key-rotation-period", default_value = "168h", value_name = "DURATION", value_parser = crate::duration::parse_seconds, requires = "managed", help_heading = "Keys")]
    pub(crate) key_rotation_period: i64,
    /// How long a key is published in the JWKS before it signs, so that relying parties have
    /// fetched it (Go duration).
    #[arg(long = "key-publish-ahead", default_value = "24h", value_name = "DURATION", value_parser = crate::duration::parse_seconds, requires = "managed", help_heading = "Keys")]
    pub(crate) key_publish_ahead: i64,
}

/// Managed keys whose private halves are held in a PKCS#11 token (an HSM): shared by `serve`,
/// `keys` and `discovery export`. The schedule stays in --key-dir or --key-secret, which then
/// record public keys and where each private key is, never key material.
#[derive(Debug, Clone, Args)]
pub(crate) struct Pkcs11Args {
    /// RFC 7512 PKCS#11 URI of the token holding the managed keys' private halves
    /// (`pkcs11:token=LABEL?module-path=/path/module.so&pin-source=file:/path/pin`). New keys
    /// are generated in it as non-extractable objects; retired and revoked keys' private
    /// objects are destroyed. pin-value is refused: use pin-source=file: or --pkcs11-pin-env.
    #[arg(
        long = "key-pkcs11-uri",
        value_name = "URI",
        requires = "managed",
        conflicts_with = "key_kms_uri",
        help_heading = "Keys"
    )]
    pub(crate) key_pkcs11_uri: Option<String>,
    /// The PKCS#11 module (a shared library from the HSM's vendor), when the URI has no
    /// module-path.
    #[arg(
        long = "pkcs11-module",
        value_name = "PATH",
        requires = "key_pkcs11_uri",
        help_heading = "Keys"
    )]
    pub(crate) pkcs11_module: Option<PathBuf>,
    /// The environment variable holding the token's user PIN, when the URI has no pin-source.
    #[arg(
        long = "pkcs11-pin-env",
        value_name = "NAME",
        requires = "key_pkcs11_uri",
        help_heading = "Keys"
    )]
    pub(crate) pkcs11_pin_env: Option<String>,
    /// Sessions opened on the token, so at most this many signatures at once (raise it for a
    /// network HSM with high latency).
    #[arg(
        long = "pkcs11-sessions",
        value_name = "N",
        default_value_t = 4,
        value_parser = clap::value_parser!(u16).range(1..=256),
        help_heading = "Keys"
    )]
    pub(crate) pkcs11_sessions: u16,
}

/// Managed keys whose private halves are held in AWS KMS: shared by `serve`, `keys` and
/// `discovery export`, beside (never with) --key-pkcs11-uri. The schedule stays in --key-dir or
/// --key-secret, which then record public keys and each key's ARN. Credentials come from AWS's
/// chain (environment, web identity, EKS Pod Identity, instance metadata), never from a flag.
#[derive(Debug, Clone, Args)]
pub(crate) struct KmsArgs {
    /// The AWS region and the name of warrant's keys there: `aws-kms://REGION/NAME`. New keys
    /// are generated in KMS (SIGN_VERIFY), tagged warrant.dev/store=NAME and warrant.dev/kid;
    /// retired keys are disabled, removed and revoked ones disabled and scheduled for deletion
    /// (7 days). See docs/kms.md for the IAM policy.
    #[arg(
        long = "key-kms-uri",
        value_name = "URI",
        requires = "managed",
        help_heading = "Keys"
    )]
    pub(crate) key_kms_uri: Option<String>,
    /// A KMS-compatible endpoint instead of AWS's regional one (a VPC endpoint, a test server):
    /// https://, or http:// to a loopback address. It wins over AWS_ENDPOINT_URL_KMS,
    /// AWS_ENDPOINT_URL and the AWS config file's endpoint_url, which obey the same rule.
    #[arg(
        long = "kms-endpoint",
        value_name = "URL",
        requires = "key_kms_uri",
        help_heading = "Keys"
    )]
    pub(crate) kms_endpoint: Option<String>,
    /// Calls to KMS in progress at once, so at most this many signatures at once (each waits
    /// at most 5 s for a place, retries included).
    #[arg(
        long = "kms-concurrency",
        value_name = "N",
        default_value_t = 16,
        value_parser = clap::value_parser!(u16).range(1..=1024),
        help_heading = "Keys"
    )]
    pub(crate) kms_concurrency: u16,
}

/// The key flags of `serve` and `discovery export`: kube-apiserver's static key files, or
/// managed keys in a key directory or a Kubernetes Secret.
#[derive(Debug, Clone, Args)]
pub(crate) struct KeySourceArgs {
    /// PEM file whose first private key signs tokens (static keys). Mutually exclusive with
    /// --key-dir and --key-secret.
    #[arg(
        long = "service-account-signing-key-file",
        value_name = "PATH",
        help_heading = "Keys"
    )]
    pub(crate) signing_key_file: Option<PathBuf>,
    /// PEM file of keys that verify tokens (the signing key always does). Repeatable. With
    /// managed keys, these keys are published and verify beside them.
    #[arg(
        long = "service-account-key-file",
        value_name = "PATH",
        help_heading = "Keys"
    )]
    pub(crate) key_files: Vec<PathBuf>,
    /// Directory of managed keys: warrant generates them, publishes each --key-publish-ahead
    /// before it signs, and rotates them every --key-rotation-period (created if missing).
    #[arg(
        long = "key-dir",
        value_name = "DIR",
        group = "managed",
        help_heading = "Keys"
    )]
    pub(crate) key_dir: Option<PathBuf>,
    /// Kubernetes Secret of managed keys shared by replicas (created if missing): every replica
    /// reads and watches it, and the one holding --key-lease generates and rotates the keys.
    /// Reached with --kubeconfig, else the in-cluster configuration.
    #[arg(long = "key-secret", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, group = "managed", group = "leased_secret", help_heading = "Keys")]
    pub(crate) key_secret: Option<ObjectName>,
    /// The coordination.k8s.io Lease that elects the replica writing --key-secret. Default: in
    /// the Secret's namespace, named after it with `-leader`.
    #[arg(long = "key-lease", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, requires = "key_secret", help_heading = "Keys")]
    pub(crate) key_lease: Option<ObjectName>,
    /// How long the Lease stays with a replica that stopped renewing it (Go duration, at least
    /// 2s); the holder renews it a third of this before it expires. For --key-secret's Lease
    /// and --pod-certificate-ca-key-secret's.
    #[arg(long = "key-lease-duration", default_value = "15s", value_name = "DURATION", value_parser = crate::duration::parse_seconds, requires = "leased_secret", help_heading = "Keys")]
    pub(crate) key_lease_duration: i64,
    /// This node's local copy of --key-secret's keys (a directory, created if missing, private
    /// to warrant's user): refreshed whenever the Secret's keys change, and served from at
    /// startup while the Secret cannot be read, so that a control plane starts cold (its
    /// kube-apiserver needs the signer before warrant can read the Secret). Never written back
    /// to the Secret before the Secret has answered. With --key-pkcs11-uri it holds public keys
    /// and locators only.
    #[arg(
        long = "key-copy-dir",
        value_name = "DIR",
        requires = "key_secret",
        help_heading = "Keys"
    )]
    pub(crate) key_copy_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    #[command(flatten)]
    pub(crate) pkcs11: Pkcs11Args,
    #[command(flatten)]
    pub(crate) kms: KmsArgs,
}
