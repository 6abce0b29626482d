//! The command line. Flags mirror kube-apiserver's names wherever the meaning is the same.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

mod credential;
mod token_agent;

pub(crate) use credential::CredentialArgs;
pub(crate) use token_agent::TokenAgentArgs;
pub(crate) use warrant_client::{ObjectName, parse_object_name};

/// warrant: a standalone, Kubernetes-compatible service-account token issuer.
#[derive(Debug, Parser)]
#[command(name = "warrant", version = warrant_server::build::VERSION_LINE, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Log format (kube components' --logging-format; --log-format is the same flag).
    #[arg(
        long = "logging-format",
        visible_alias = "log-format",
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        value_name = "FORMAT",
        help_heading = "Logging"
    )]
    pub(crate) log_format: LogFormat,
    /// Log verbosity, as kube components' -v (klog): 0 to 2 log at info, 3 and 4 add
    /// warrant's debug lines, 5 and more its trace lines. --log-level wins over it, and
    /// RUST_LOG over both.
    #[arg(
        short = 'v',
        long = "v",
        global = true,
        value_name = "N",
        help_heading = "Logging"
    )]
    pub(crate) verbosity: Option<u32>,
    /// Log filter, in tracing's syntax (e.g. `info`, `warrant_server=debug`). Default: info,
    /// or what -v says. RUST_LOG overrides it.
    #[arg(long, global = true, value_name = "FILTER", help_heading = "Logging")]
    pub(crate) log_level: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve TokenRequest, TokenReview, OIDC discovery and JWKS over HTTPS.
    Serve(Box<ServeArgs>),
    /// Create a local setup for trying warrant: a CA and serving certificate for this machine, a
    /// signing key, an admin token and a kubeconfig. Files that exist are kept.
    LocalSetup(LocalSetupArgs),
    /// Verify a token as a relying party does: fetch the issuer's discovery document and JWKS,
    /// then check signature, issuer, audience and time offline. (Whether the bound objects still
    /// exist is only known to the issuer: use a TokenReview for that.)
    Verify(VerifyArgs),
    /// Manage the keys in a key directory (--key-dir) or a Kubernetes Secret (--key-secret):
    /// generate the first, list them and their schedule, rotate, revoke a leaked one, import
    /// private keys into an HSM.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The OIDC discovery documents, for hosting them elsewhere: export them to a directory, or
    /// publish them to buckets.
    #[command(subcommand)]
    Discovery(DiscoveryCommand),
    /// client-go's exec credential plugin: trade this workload's own token for a short-lived
    /// token from warrant for the cluster client-go is about to call (KEP-5339). Run by kubectl
    /// or a controller from a kubeconfig's `exec` section, never by hand.
    #[command(after_long_help = credential::EXAMPLES)]
    Credential(CredentialArgs),
    /// Keep warrant tokens in files for a pod's containers (the native sidecar token injection
    /// adds; docs/injection.md): each FILE=AUDIENCE is a token of the pod's service account,
    /// bound to the pod, refreshed before 80 % of its lifetime and replaced atomically.
    /// `--check` is its readiness probe.
    #[command(name = warrant_server::agent_contract::COMMAND)]
    TokenAgent(TokenAgentArgs),
    /// Check an external signer as kube-apiserver does when it starts: Metadata and FetchKeys
    /// over the socket. Exits 0 if both answer and there are keys; otherwise says why and
    /// exits 1. The liveness probe where warrant serves only the socket (`--secure-port 0`).
    /// Warns when a kube-apiserver on this machine that uses the socket would ask for longer
    /// tokens than warrant signs (its --service-account-max-token-expiration).
    ProbeSigner(ProbeSignerArgs),
    /// Print the shell completion script for bash, zsh or fish to standard output, e.g.
    /// `source <(warrant completion bash)`.
    Completion(CompletionArgs),
}

/// `warrant completion`.
#[derive(Debug, Args)]
pub(crate) struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: CompletionShell,
}

/// The shells `warrant completion` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum CompletionShell {
    /// bash (with the bash-completion package).
    Bash,
    /// zsh.
    Zsh,
    /// fish.
    Fish,
}

/// `warrant probe-signer`.
#[derive(Debug, Args)]
pub(crate) struct ProbeSignerArgs {
    /// The signer's Unix socket, as given to `serve` and kube-apiserver.
    #[arg(
        long = "service-account-signing-endpoint",
        visible_alias = "signing-endpoint",
        value_name = "PATH"
    )]
    pub(crate) signing_endpoint: PathBuf,
    /// How long the two calls may take together.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = crate::duration::parse_duration)]
    pub(crate) timeout: std::time::Duration,
}

/// `warrant keys …`.
#[derive(Debug, Subcommand)]
pub(crate) enum KeysCommand {
    /// Create a key directory or Secret with its first key, which signs at once. With
    /// --service-account-signing-key-file, that key is an existing static signing key (to move
    /// from kube-apiserver's key files to managed keys without breaking a token).
    Generate(KeysGenerateArgs),
    /// List each key: kid, algorithm, state, and the times of its transitions.
    List(KeysListArgs),
    /// Start a rotation now instead of when it is due: a new key is published now and signs
    /// once --key-publish-ahead has passed (a next key that exists already is brought forward
    /// to its earliest safe time). A running server picks the change up by itself.
    Rotate(KeysRotateArgs),
    /// Revoke a key at once, for a key that leaked: it leaves the JWKS, every server reading
    /// the store refuses its tokens as soon as it sees the change, and if it was signing, a key
    /// signs in its place now (the next key if one is published, else a new one). Relying
    /// parties that cached the JWKS keep trusting it until they refetch (docs/keys.md).
    Revoke(KeysRevokeArgs),
    /// Move private keys into the PKCS#11 token of --key-pkcs11-uri as non-extractable objects,
    /// with the same kids, so no token breaks: every key of the PEM store in --key-dir or
    /// --key-secret (which then records only public keys and where the private ones are), or,
    /// with --from-pem, a static signing key (kubeadm's sa.key) as the first key of an empty
    /// store.
    Import(KeysImportArgs),
}

/// `warrant discovery …`.
#[derive(Debug, Subcommand)]
pub(crate) enum DiscoveryCommand {
    /// Write .well-known/openid-configuration and openid/v1/jwks under --dir, as warrant serves
    /// them now, to host them in a bucket or on a web server (e.g. for a private cluster).
    Export(Box<DiscoveryExportArgs>),
    /// Write the two documents, as warrant serves them now, to buckets (s3://BUCKET/PREFIX,
    /// gs://BUCKET/PREFIX, az://CONTAINER/PREFIX) or a directory (file:///DIR), read them back,
    /// and exit; `serve --publish-discovery` keeps them current instead.
    Publish(Box<DiscoveryPublishArgs>),
}

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

/// Where `warrant keys` finds managed keys: a key directory or a Kubernetes Secret. One of the
/// two is required, and clap's message names both.
#[derive(Debug, Clone, Args)]
#[command(group = clap::ArgGroup::new("managed").required(true).multiple(false))]
pub(crate) struct StoreArgs {
    /// The key directory.
    #[arg(long = "key-dir", value_name = "DIR", group = "managed")]
    pub(crate) key_dir: Option<PathBuf>,
    /// The Kubernetes Secret holding the keys (`serve --key-secret`).
    #[arg(long = "key-secret", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, group = "managed")]
    pub(crate) key_secret: Option<ObjectName>,
    /// Kubeconfig of the cluster holding --key-secret; default: the in-cluster configuration.
    #[arg(long = "kubeconfig", value_name = "PATH", requires = "key_secret")]
    pub(crate) kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) pkcs11: Pkcs11Args,
    #[command(flatten)]
    pub(crate) kms: KmsArgs,
}

/// `warrant keys generate`.
#[derive(Debug, Args)]
pub(crate) struct KeysGenerateArgs {
    /// The key directory or Secret to create.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// Algorithm of the new key.
    #[arg(long = "key-algorithm", value_enum, default_value_t = KeyAlgorithm::Rs256, value_name = "ALG")]
    pub(crate) key_algorithm: KeyAlgorithm,
    /// Import this static signing key (PEM) as the first key instead of generating one: it
    /// goes on signing, and the managed keys rotate from it.
    #[arg(long = "service-account-signing-key-file", value_name = "PATH")]
    pub(crate) signing_key_file: Option<PathBuf>,
    /// With an imported key: the --service-account-max-token-expiration kube-apiserver used
    /// with it, which bounds the tokens it signed (and so how long it must stay published once
    /// retired). Default: no cap, as kube-apiserver's (2^32 s).
    #[arg(long = "service-account-max-token-expiration", value_name = "DURATION", value_parser = crate::duration::parse_seconds, requires = "signing_key_file")]
    pub(crate) max_token_expiration: Option<i64>,
    /// With an imported key: the --service-account-extend-token-expiration kube-apiserver used
    /// with it (extended tokens live a year).
    #[arg(
        long = "service-account-extend-token-expiration",
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub(crate) extend_token_expiration: bool,
}

/// `warrant keys import`.
#[derive(Debug, Args)]
pub(crate) struct KeysImportArgs {
    /// The key directory or Secret, and the token (--key-pkcs11-uri, required).
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// Import this static signing key (PEM) as the first key of an empty store instead.
    #[arg(long = "from-pem", value_name = "FILE")]
    pub(crate) from_pem: Option<PathBuf>,
    /// With --from-pem: the --service-account-max-token-expiration kube-apiserver used with the
    /// key (see `keys generate`). Default: no cap.
    #[arg(long = "service-account-max-token-expiration", value_name = "DURATION", value_parser = crate::duration::parse_seconds, requires = "from_pem")]
    pub(crate) max_token_expiration: Option<i64>,
    /// With --from-pem: the --service-account-extend-token-expiration kube-apiserver used.
    #[arg(
        long = "service-account-extend-token-expiration",
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub(crate) extend_token_expiration: bool,
}

/// `warrant keys list`.
#[derive(Debug, Args)]
pub(crate) struct KeysListArgs {
    /// Where the keys are.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    /// With --key-secret: the Lease electing the replica that writes it (shown as the writer).
    /// Default: in the Secret's namespace, named after it with `-leader`.
    #[arg(long = "key-lease", value_name = "NAMESPACE/NAME", value_parser = parse_object_name, requires = "key_secret")]
    pub(crate) key_lease: Option<ObjectName>,
    /// With --key-secret: this node's local copy (`serve --key-copy-dir`), compared with the
    /// Secret; listed instead of the Secret when the Secret cannot be read.
    #[arg(long = "key-copy-dir", value_name = "DIR", requires = "key_secret")]
    pub(crate) key_copy_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = ListFormat::Text)]
    pub(crate) output: ListFormat,
}

/// `warrant keys rotate`.
#[derive(Debug, Args)]
pub(crate) struct KeysRotateArgs {
    /// Where the keys are.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    /// Output format of the resulting schedule.
    #[arg(long, short, value_enum, default_value_t = ListFormat::Text)]
    pub(crate) output: ListFormat,
}

/// `warrant keys revoke`.
#[derive(Debug, Args)]
pub(crate) struct KeysRevokeArgs {
    /// The key ID to revoke, as `warrant keys list` shows it. (A kid is base64url, so it may
    /// start with `-`: it is still read as the kid.)
    #[arg(value_name = "KID", allow_hyphen_values = true)]
    pub(crate) kid: String,
    /// Where the keys are.
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(flatten)]
    pub(crate) rotation: RotationArgs,
    /// Output format of the resulting schedule.
    #[arg(long, short, value_enum, default_value_t = ListFormat::Text)]
    pub(crate) output: ListFormat,
}

/// How `keys list`, `keys rotate` and `keys revoke` print.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ListFormat {
    /// A table.
    Text,
    /// JSON.
    Json,
}

/// `warrant discovery export`.
#[derive(Debug, Args)]
pub(crate) struct DiscoveryExportArgs {
    /// Directory to write the two documents into, each at its URL's path below it
    /// (`.well-known/openid-configuration` and `openid/v1/jwks` for an issuer without a path),
    /// as `discovery publish file:///DIR` lays them out.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// Issuer of the tokens (the first is published). Repeatable, as for `serve`.
    #[arg(long = "service-account-issuer", value_name = "URL")]
    pub(crate) issuers: Vec<String>,
    /// The JWKS URL the discovery document names (https). Default:
    /// https://<external-hostname>/openid/v1/jwks, else <issuer>/openid/v1/jwks.
    #[arg(long = "service-account-jwks-uri", value_name = "URL")]
    pub(crate) jwks_uri: Option<String>,
    /// The host (and port) relying parties reach the documents at, for the default JWKS URL.
    #[arg(long = "external-hostname", value_name = "HOST[:PORT]")]
    pub(crate) external_hostname: Option<String>,
    /// The port for --external-hostname without one.
    #[arg(long = "secure-port", default_value_t = 8443, value_name = "PORT")]
    pub(crate) secure_port: u16,
    #[command(flatten)]
    pub(crate) keys: KeySourceArgs,
    /// Kubeconfig of the cluster holding --key-secret; default: the in-cluster configuration.
    #[arg(long = "kubeconfig", value_name = "PATH", requires = "key_secret")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

/// How s3:// targets reach an S3-compatible server: the flags of `serve` and `discovery publish`.
#[derive(Debug, Clone, Args)]
pub(crate) struct PublishEndpointArgs {
    /// An S3-compatible server for s3:// targets (MinIO and others), addressed path-style:
    /// https, or http to a loopback address (see --publish-allow-http).
    #[arg(
        long = "publish-endpoint",
        value_name = "URL",
        help_heading = "Discovery"
    )]
    pub(crate) publish_endpoint: Option<String>,
    /// Allow --publish-endpoint http:// to a host that is not loopback. The bucket's
    /// credentials and the documents then cross the network in clear: only for a network
    /// trusted end to end.
    #[arg(
        long = "publish-allow-http",
        requires = "publish_endpoint",
        help_heading = "Discovery"
    )]
    pub(crate) publish_allow_http: bool,
    /// PEM file of the CA certificates --publish-endpoint's https certificate must chain to,
    /// trusted in place of the system's roots (a server with a private CA).
    #[arg(
        long = "publish-ca-file",
        value_name = "PATH",
        requires = "publish_endpoint",
        help_heading = "Discovery"
    )]
    pub(crate) publish_ca_file: Option<PathBuf>,
}

impl PublishEndpointArgs {
    /// The endpoint the flags say.
    pub(crate) fn endpoint(&self) -> warrant_publish::Endpoint {
        warrant_publish::Endpoint {
            url: self.publish_endpoint.clone(),
            allow_http: self.publish_allow_http,
            ca_file: self.publish_ca_file.clone(),
        }
    }
}

/// `warrant discovery publish`.
#[derive(Debug, Args)]
pub(crate) struct DiscoveryPublishArgs {
    /// Where to publish: s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, az://CONTAINER/PREFIX or
    /// file:///DIR (see docs/discovery.md for the issuer URL each needs).
    #[arg(value_name = "URL", required = true)]
    pub(crate) targets: Vec<String>,
    #[command(flatten)]
    pub(crate) endpoint: PublishEndpointArgs,
    /// Issuer of the tokens (the first is published). Repeatable, as for `serve`.
    #[arg(long = "service-account-issuer", value_name = "URL")]
    pub(crate) issuers: Vec<String>,
    /// The JWKS URL the discovery document names (https). Default: <issuer>/openid/v1/jwks.
    #[arg(long = "service-account-jwks-uri", value_name = "URL")]
    pub(crate) jwks_uri: Option<String>,
    #[command(flatten)]
    pub(crate) keys: KeySourceArgs,
    /// Kubeconfig of the cluster holding --key-secret; default: the in-cluster configuration.
    #[arg(long = "kubeconfig", value_name = "PATH", requires = "key_secret")]
    pub(crate) kubeconfig: Option<PathBuf>,
}

/// `warrant serve`.
#[derive(Debug, Args)]
// The key Secrets elected through a Lease (--key-lease-duration's): the token keys' and the pod
// certificate CA's, one or both.
#[command(group = clap::ArgGroup::new("leased_secret").multiple(true))]
pub(crate) struct ServeArgs {
    /// Issuer of new tokens (the first) and accepted issuers (all). Repeatable.
    #[arg(
        long = "service-account-issuer",
        value_name = "URL",
        help_heading = "Issuer and tokens"
    )]
    pub(crate) issuers: Vec<String>,
    /// Audiences of warrant's own API; default: the issuers. Comma-separated, repeatable.
    #[arg(
        long = "api-audiences",
        value_delimiter = ',',
        value_name = "AUDIENCES",
        help_heading = "Issuer and tokens"
    )]
    pub(crate) api_audiences: Vec<String>,
    /// The keys: static key files, or a key directory.
    #[command(flatten)]
    pub(crate) keys: KeySourceArgs,
    /// Longest lifetime a TokenRequest gets (Go duration, 1h to 2^32 s); longer requests are
    /// shortened with a warning. Default: no cap; 24h with managed keys (where it also bounds
    /// extended tokens, so retired keys leave the JWKS a day after they stop signing).
    #[arg(long = "service-account-max-token-expiration", value_name = "DURATION", value_parser = crate::duration::parse_seconds, help_heading = "Issuer and tokens")]
    pub(crate) max_token_expiration: Option<i64>,
    /// Extend pod-bound 3607-second tokens for the API audiences to a year (kubelet default
    /// volumes), as kube-apiserver does.
    #[arg(
        long = "service-account-extend-token-expiration",
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        value_name = "BOOL",
        help_heading = "Issuer and tokens"
    )]
    pub(crate) extend_token_expiration: bool,
    /// The JWKS URL the discovery document names (https). Default:
    /// https://<external-hostname>/openid/v1/jwks, else <issuer>/openid/v1/jwks.
    #[arg(
        long = "service-account-jwks-uri",
        value_name = "URL",
        help_heading = "Discovery"
    )]
    pub(crate) jwks_uri: Option<String>,
    /// The host (and port) relying parties reach warrant at, for the default JWKS URL.
    #[arg(
        long = "external-hostname",
        value_name = "HOST[:PORT]",
        help_heading = "Discovery"
    )]
    pub(crate) external_hostname: Option<String>,
    /// Keep the discovery document and JWKS in this bucket or directory (s3://BUCKET/PREFIX,
    /// gs://BUCKET/PREFIX, az://CONTAINER/PREFIX, file:///DIR), and let no key sign before it
    /// lists it. Repeatable. The issuer must be where the target serves them
    /// (docs/discovery.md).
    #[arg(
        long = "publish-discovery",
        value_name = "URL",
        help_heading = "Discovery"
    )]
    pub(crate) publish_discovery: Vec<String>,
    #[command(flatten)]
    pub(crate) publish_endpoint: PublishEndpointArgs,
    /// How many verified token signatures to remember, so a token reviewed again skips the
    /// signature check (about 1.1 KiB each when full; 0 turns the cache off). Object checks
    /// run on every review regardless.
    #[arg(long = "signature-cache-size", value_name = "ENTRIES", default_value_t = warrant_issuer::DEFAULT_SIGNATURE_CACHE_ENTRIES, help_heading = "Reviews")]
    pub(crate) signature_cache_entries: u64,
    /// Publish each managed key also as a certificate in the JWKS (`x5c`, `x5t#S256`), for
    /// relying parties that read keys from certificates. Managed keys only.
    #[arg(long = "jwks-x5c", help_heading = "Discovery")]
    pub(crate) jwks_x5c: bool,
    /// Address to listen on.
    #[arg(
        long = "bind-address",
        default_value = "0.0.0.0",
        value_name = "IP",
        help_heading = "Serving"
    )]
    pub(crate) bind_address: IpAddr,
    /// Port to serve HTTPS on; 0 serves no HTTPS at all (only the signing socket, which
    /// --service-account-signing-endpoint must then give), as kube components read 0.
    #[arg(
        long = "secure-port",
        default_value_t = 8443,
        value_name = "PORT",
        help_heading = "Serving"
    )]
    pub(crate) secure_port: u16,
    /// Also serve /metrics, /livez, /readyz and /healthz, and nothing else, over plain HTTP
    /// without authentication on this address (kube-proxy's flag; e.g. 0.0.0.0:9090), for
    /// scrapers and probes that hold no credentials. Off by default: /metrics on the HTTPS port
    /// needs authorization.
    #[arg(
        long = "metrics-bind-address",
        value_name = "IP:PORT",
        help_heading = "Serving"
    )]
    pub(crate) metrics_bind_address: Option<std::net::SocketAddr>,
    /// The most client connections open at once, TLS handshakes included; at the limit an
    /// idle connection makes room for a new one, those that never finished a handshake or a
    /// request first. Default: from the descriptor limit (three quarters of what 512 kept for
    /// files and outgoing connections leave, at least 64).
    #[arg(
        long = "max-connections",
        value_name = "COUNT",
        help_heading = "Serving"
    )]
    pub(crate) max_connections: Option<usize>,
    /// The most client connections open at once from one client address (IPv6: one /64),
    /// handshakes included; at it, one of that address's own idle connections makes room.
    /// Default: half of --max-connections. Behind a proxy that hides client addresses, raise
    /// it to --max-connections.
    #[arg(
        long = "max-connections-per-address",
        value_name = "COUNT",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Serving"
    )]
    pub(crate) max_connections_per_address: Option<u64>,
    /// How long a TLS handshake may take.
    #[arg(long = "tls-handshake-timeout", default_value = "10s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Serving")]
    pub(crate) tls_handshake_timeout: std::time::Duration,
    /// How long a client has, after the handshake, to send its first request's headers (and
    /// any HTTP/1.1 request's headers), as kube-apiserver's ReadHeaderTimeout.
    #[arg(long = "request-header-timeout", default_value = "32s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Serving")]
    pub(crate) request_header_timeout: std::time::Duration,
    /// How long a connection may stay open with no request in flight (HTTP/1.1 keep-alive and
    /// HTTP/2), as kube-apiserver's IdleTimeout.
    #[arg(long = "connection-idle-timeout", default_value = "90s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Serving")]
    pub(crate) connection_idle_timeout: std::time::Duration,
    /// On SIGTERM, how long to keep serving with /readyz failing before the listener closes,
    /// so that endpoints and kube-apiserver's webhook stop sending first (kube-apiserver's
    /// flag). Requests in flight then get up to 30 s to finish. A second signal cuts it short.
    #[arg(long = "shutdown-delay-duration", default_value = "0s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Serving")]
    pub(crate) shutdown_delay: std::time::Duration,
    /// Serving certificate chain (PEM). Required unless --secure-port 0.
    #[arg(long = "tls-cert-file", value_name = "PATH", help_heading = "Serving")]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// Serving certificate's private key (PEM). Required unless --secure-port 0.
    #[arg(
        long = "tls-private-key-file",
        value_name = "PATH",
        help_heading = "Serving"
    )]
    pub(crate) tls_private_key_file: Option<PathBuf>,
    /// The lowest TLS version served: VersionTLS12 or VersionTLS13 (kube-apiserver's values;
    /// warrant's TLS library, rustls, speaks neither TLS 1.0 nor 1.1).
    #[arg(long = "tls-min-version", default_value = "VersionTLS12", value_parser = warrant_server::TlsMinVersion::parse, value_name = "VERSION", help_heading = "Serving")]
    pub(crate) tls_min_version: warrant_server::TlsMinVersion,
    /// The TLS 1.2 cipher suites allowed, comma-separated, in Go's names as kube-apiserver
    /// takes them (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    /// …). TLS 1.3's suites are always on, as in Go. Default: every suite rustls implements
    /// (ECDHE with AES-GCM or ChaCha20-Poly1305).
    #[arg(
        long = "tls-cipher-suites",
        value_delimiter = ',',
        value_name = "SUITES",
        help_heading = "Serving"
    )]
    pub(crate) tls_cipher_suites: Vec<String>,
    /// CA bundle that users' client certificates must chain to; a verified certificate's CN
    /// is the user name and each O a group.
    #[arg(
        long = "client-ca-file",
        value_name = "PATH",
        help_heading = "Who may call"
    )]
    pub(crate) client_ca_file: Option<PathBuf>,
    /// Static bearer tokens, kube-apiserver's CSV format: token,user,uid[,"group1,group2"].
    #[arg(
        long = "token-auth-file",
        value_name = "PATH",
        help_heading = "Who may call"
    )]
    pub(crate) token_auth_file: Option<PathBuf>,
    /// Front proxy, delegation and authorization (docs/security.md).
    #[command(flatten)]
    pub(crate) auth: crate::auth::AuthArgs,
    /// The audit log (docs/audit.md).
    #[command(flatten)]
    pub(crate) audit: crate::audit::AuditArgs,
    /// Token injection: the mutating webhook for pods (docs/injection.md).
    #[command(flatten)]
    pub(crate) injection: crate::injection::InjectionArgs,
    /// Pod certificates: the PodCertificateRequest signer (docs/pod-certificates.md).
    #[command(flatten)]
    pub(crate) pod_certificates: crate::podcert::PodCertArgs,
    /// Serve kube-apiserver's external JWT signer (KEP-740) on this Unix socket: give
    /// kube-apiserver the same path as its --service-account-signing-endpoint, and the same
    /// --service-account-issuer. Owner-only (0600) unless --signing-endpoint-group. See
    /// docs/external-signer.md.
    #[arg(
        long = "service-account-signing-endpoint",
        visible_alias = "signing-endpoint",
        value_name = "PATH",
        help_heading = "External signer"
    )]
    pub(crate) signing_endpoint: Option<PathBuf>,
    /// A group (name or number) whose members may use the signing socket too (mode 0660).
    #[arg(
        long = "signing-endpoint-group",
        value_name = "GROUP",
        requires = "signing_endpoint",
        help_heading = "External signer"
    )]
    pub(crate) signing_endpoint_group: Option<String>,
    /// Users (numbers) whose processes may use the signing socket, checked on every connection
    /// against the kernel's word (SO_PEERCRED). Default: the socket's owner (warrant's user)
    /// and root. Giving the list replaces the default.
    #[arg(
        long = "signing-endpoint-allowed-uids",
        value_name = "UID,...",
        value_delimiter = ',',
        requires = "signing_endpoint",
        help_heading = "External signer"
    )]
    pub(crate) signing_endpoint_allowed_uids: Option<Vec<u32>>,
    /// Primary groups (numbers) whose processes may use the signing socket, whatever their
    /// user. Default: the --signing-endpoint-group, if any. Giving the list replaces the
    /// default. A process that has the group only as a supplementary group is not seen as in
    /// it: allow its uid instead.
    #[arg(
        long = "signing-endpoint-allowed-gids",
        value_name = "GID,...",
        value_delimiter = ',',
        requires = "signing_endpoint",
        help_heading = "External signer"
    )]
    pub(crate) signing_endpoint_allowed_gids: Option<Vec<u32>>,
    /// How long a connection to the signing socket may stay open with no call in flight
    /// before it is closed (gRPC clients reconnect at their next call).
    #[arg(long = "signing-endpoint-idle-timeout", value_name = "DURATION", default_value = "90s", value_parser = crate::duration::parse_duration, help_heading = "External signer")]
    pub(crate) signing_endpoint_idle_timeout: std::time::Duration,
    /// The most connections to the signing socket open at once; more are closed at once.
    #[arg(
        long = "signing-endpoint-max-connections",
        value_name = "N",
        default_value = "64",
        value_parser = clap::value_parser!(u16).range(1..),
        help_heading = "External signer"
    )]
    pub(crate) signing_endpoint_max_connections: u16,
    /// Manifest of ServiceAccounts, Pods, Secrets and Nodes (YAML or JSON) that tokens bind
    /// to; reloaded when it changes. The standalone issuer.
    #[arg(long = "objects-file", value_name = "PATH", help_heading = "Objects")]
    pub(crate) objects_file: Option<PathBuf>,
    /// Kubeconfig of the cluster warrant works with: the ServiceAccounts, Pods, Secrets and
    /// Nodes tokens bind to (watched; unless --objects-file), and the --key-secret. Without it,
    /// warrant uses the in-cluster configuration when it runs in a pod.
    #[arg(long = "kubeconfig", value_name = "PATH", help_heading = "Objects")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// How long the cluster cache may go without a word from the API server about a kind
    /// (an event, or the bookmark sent about once a minute) before its records are not
    /// trusted: past it, reviews look objects up in the API server (and fail, with the reason,
    /// when it cannot answer) and /readyz fails. At least 90s. Default: no bound, as
    /// kube-apiserver (docs/cluster.md says which to choose).
    #[arg(long = "max-cache-staleness", value_name = "DURATION", value_parser = crate::duration::parse_staleness_bound, conflicts_with = "objects_file", help_heading = "Objects")]
    pub(crate) max_cache_staleness: Option<std::time::Duration>,
    /// Refuse Secret-bound tokens: TokenRequest answers 400 for a Secret binding, TokenReview
    /// refuses Secret-bound tokens already issued, and the cluster cache does not watch
    /// Secrets, so warrant needs no list/watch on secrets (docs/cluster.md).
    #[arg(long = "disable-secret-binding", help_heading = "Objects")]
    pub(crate) disable_secret_binding: bool,
}

/// `warrant local-setup`.
#[derive(Debug, Args)]
pub(crate) struct LocalSetupArgs {
    /// Directory to write the setup into.
    #[arg(long, default_value = ".warrant", value_name = "DIR")]
    pub(crate) dir: PathBuf,
    /// Address the server will listen on (in the certificate and kubeconfig).
    #[arg(long, default_value = "127.0.0.1", value_name = "IP")]
    pub(crate) address: IpAddr,
    /// Port the server will listen on.
    #[arg(long, default_value_t = 8443, value_name = "PORT")]
    pub(crate) port: u16,
}

/// `warrant verify`.
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The issuer to trust; its discovery document is fetched from
    /// <issuer>/.well-known/openid-configuration.
    #[arg(long, value_name = "URL")]
    pub(crate) issuer: String,
    /// Audience the token must carry (repeatable); default: the issuer.
    #[arg(long = "audience", value_name = "AUDIENCE")]
    pub(crate) audiences: Vec<String>,
    /// Extra CA certificates (PEM) to trust for the issuer's HTTPS, e.g. .warrant/ca.crt.
    #[arg(long, value_name = "PATH")]
    pub(crate) ca_file: Option<PathBuf>,
    /// The DPoP proof (RFC 9449) that came with a key-bound token (`cnf.jkt`), or `-` to read
    /// it from standard input: checked as a relying party checks it (signature by the bound
    /// key, `ath` the token's hash, `htm`/`htu` the request's, `iat` within 60 seconds of now).
    /// verify is one offline check and keeps no replay cache: it cannot tell a proof used
    /// before. A key-bound token without a proof is refused.
    #[arg(
        long = "dpop-proof",
        value_name = "JWT",
        requires_all = ["dpop_method", "dpop_uri"],
        help_heading = "Key-bound tokens"
    )]
    pub(crate) dpop_proof: Option<String>,
    /// The method of the request the proof came with (its `htm`), e.g. GET.
    #[arg(
        long = "dpop-method",
        value_name = "METHOD",
        requires = "dpop_proof",
        help_heading = "Key-bound tokens"
    )]
    pub(crate) dpop_method: Option<String>,
    /// The absolute URI of the request the proof came with (its `htu`; query ignored), e.g.
    /// https://vault.example/v1/auth/jwt/login.
    #[arg(
        long = "dpop-uri",
        value_name = "URI",
        requires = "dpop_proof",
        help_heading = "Key-bound tokens"
    )]
    pub(crate) dpop_uri: Option<String>,
    /// The client certificate (PEM; the first one in the file) of the TLS connection a
    /// certificate-bound token (`cnf["x5t#S256"]`, RFC 8705) came over: the token passes only
    /// if its SHA-256 thumbprint is the token's. A certificate-bound token without it is
    /// refused.
    #[arg(
        long = "client-certificate",
        value_name = "PATH",
        help_heading = "Key-bound tokens"
    )]
    pub(crate) client_certificate: Option<PathBuf>,
    /// The token, or `-` to read it from standard input.
    #[arg(value_name = "TOKEN")]
    pub(crate) token: String,
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    /// A kid is base64url and may start with `-`, as about one in 64 do: `keys revoke` must not
    /// take it for a flag (a test with a real key found it).
    #[test]
    fn a_kid_starting_with_a_hyphen_is_a_kid() {
        for args in [
            vec![
                "warrant",
                "keys",
                "revoke",
                "-Uq3f2QmZ8",
                "--key-dir",
                "keys",
            ],
            vec![
                "warrant",
                "keys",
                "revoke",
                "--key-dir",
                "keys",
                "-Uq3f2QmZ8",
            ],
        ] {
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            let Command::Keys(KeysCommand::Revoke(revoke)) = cli.command else {
                panic!("{args:?}: not keys revoke");
            };
            assert_eq!(revoke.kid, "-Uq3f2QmZ8");
        }
    }

    /// Every `warrant keys` command takes its store from --key-dir or --key-secret: without
    /// either, the message names both (not only --key-dir); with both, they conflict.
    #[test]
    fn keys_commands_need_a_key_dir_or_a_key_secret() {
        for command in [
            &["generate"][..],
            &["list"],
            &["rotate"],
            &["revoke", "kid-1"],
        ] {
            let args = |store: &[&'static str]| {
                let mut args = vec!["warrant", "keys"];
                args.extend_from_slice(command);
                args.extend_from_slice(store);
                args
            };
            let error = Cli::try_parse_from(args(&[])).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{command:?}"
            );
            let text = error.to_string();
            assert!(
                text.contains("--key-dir <DIR>") && text.contains("--key-secret <NAMESPACE/NAME>"),
                "{command:?}: {text}"
            );
            for store in [&["--key-dir", "keys"][..], &["--key-secret", "ns/keys"]] {
                Cli::try_parse_from(args(store))
                    .unwrap_or_else(|e| panic!("{command:?} {store:?}: {e}"));
            }
            let both = Cli::try_parse_from(args(&["--key-dir", "k", "--key-secret", "ns/k"]));
            assert_eq!(
                both.unwrap_err().kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{command:?}"
            );
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// kube components' logging flags, and warrant's older names for them, anywhere on the line.
    #[test]
    fn logging_flags_as_kube_components_spell_them() {
        let parse =
            |args: &[&str]| Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        for args in [
            &["warrant", "-v", "4", "completion", "bash"][..],
            &["warrant", "--v", "4", "completion", "bash"],
            &["warrant", "--v=4", "completion", "bash"],
            &["warrant", "completion", "bash", "-v=4"],
            &["warrant", "completion", "-v4", "bash"],
        ] {
            assert_eq!(parse(args).verbosity, Some(4), "{args:?}");
        }
        for args in [
            &["warrant", "--logging-format", "json", "completion", "bash"][..],
            &["warrant", "completion", "bash", "--log-format=json"],
        ] {
            assert!(
                matches!(parse(args).log_format, LogFormat::Json),
                "{args:?}"
            );
        }
        let cli = parse(&["warrant", "completion", "bash"]);
        assert!(matches!(cli.log_format, LogFormat::Text));
        assert_eq!((cli.verbosity, cli.log_level), (None, None));
        let cli = parse(&[
            "warrant",
            "--log-level",
            "debug",
            "-v",
            "5",
            "completion",
            "zsh",
        ]);
        assert_eq!(cli.log_level.as_deref(), Some("debug"));
        assert!(Cli::try_parse_from(["warrant", "-v", "high", "completion", "bash"]).is_err());
    }

    /// The pod certificate CA's key Secret is elected through a Lease of --key-lease-duration
    /// too: the flag goes with either key Secret (or both), and is refused with neither.
    #[test]
    fn the_lease_duration_goes_with_either_key_secret() {
        let lease = ["--key-lease-duration", "9s"];
        for secrets in [
            &["--key-secret", "ns/keys"][..],
            &["--pod-certificate-ca-key-secret", "ns/ca"],
            &[
                "--key-secret",
                "ns/keys",
                "--pod-certificate-ca-key-secret",
                "ns/ca",
            ],
        ] {
            let args = [&["warrant", "serve"][..], secrets, &lease].concat();
            let Command::Serve(serve) = Cli::try_parse_from(&args)
                .unwrap_or_else(|e| panic!("{secrets:?}: {e}"))
                .command
            else {
                panic!("not serve");
            };
            assert_eq!(serve.keys.key_lease_duration, 9, "{secrets:?}");
        }
        let alone = Cli::try_parse_from([&["warrant", "serve"][..], &lease].concat());
        assert_eq!(
            alone.unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        // Elsewhere --key-lease-duration goes with --key-secret alone, as before.
        let export = ["warrant", "discovery", "export", "--dir", "out"];
        let leased = [&export[..], &lease].concat();
        assert_eq!(
            Cli::try_parse_from(&leased).unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        Cli::try_parse_from([&leased[..], &["--key-secret", "ns/keys"]].concat()).unwrap();
    }

    #[test]
    fn tls_flags_take_kube_apiservers_values() {
        let serve = |extra: &[&str]| {
            let args = [&["warrant", "serve"][..], extra].concat();
            Cli::try_parse_from(args).map(|cli| match cli.command {
                Command::Serve(args) => args,
                _ => panic!("not serve"),
            })
        };
        let args = serve(&[]).unwrap();
        assert_eq!(args.tls_min_version, warrant_server::TlsMinVersion::Tls12);
        assert!(args.tls_cipher_suites.is_empty());
        let args = serve(&[
            "--tls-min-version",
            "VersionTLS13",
            "--tls-cipher-suites",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        ])
        .unwrap();
        assert_eq!(args.tls_min_version, warrant_server::TlsMinVersion::Tls13);
        assert_eq!(
            args.tls_cipher_suites,
            [
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_AES_128_GCM_SHA256"
            ]
        );
        let error = serve(&["--tls-min-version", "VersionTLS11"])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "VersionTLS11 is not supported: warrant's TLS library (rustls) supports only TLS 1.2 and 1.3"
            ),
            "{error}"
        );
    }

    /// `warrant serve --help` groups its flags under the headings of docs/configuration.md,
    /// and each flag is documented in the section its heading names.
    #[test]
    fn serve_flags_are_grouped_as_the_docs_are() {
        let docs = include_str!("../../../docs/configuration.md");
        let serve_docs = docs
            .split("\n## ")
            .find(|part| part.starts_with("`warrant serve`"))
            .expect("docs/configuration.md has a `warrant serve` part");
        let section = |heading: &str| {
            serve_docs
                .split("\n### ")
                .find(|part| part.starts_with(&format!("{heading}\n")))
        };
        let mut cli = Cli::command();
        cli.build();
        let serve = cli.find_subcommand("serve").expect("serve");
        let mut headings = Vec::new();
        for arg in serve.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            if long == "help" {
                continue;
            }
            let heading = arg
                .get_help_heading()
                .unwrap_or_else(|| panic!("--{long} has no help heading"));
            let text = section(heading).unwrap_or_else(|| {
                panic!("--{long} is under \"{heading}\", which docs/configuration.md has no section for")
            });
            let flag = if long == "v" {
                "`-v".to_owned()
            } else {
                format!("`--{long}")
            };
            assert!(
                [" ", "`", "["]
                    .iter()
                    .any(|next| text.contains(&format!("{flag}{next}"))),
                "--{long} is under \"{heading}\" but not documented in that section"
            );
            if !headings.contains(&heading) {
                headings.push(heading);
            }
        }
        for heading in [
            "Issuer and tokens",
            "Keys",
            "Discovery",
            "Reviews",
            "Serving",
            "Who may call",
            "External signer",
            "Objects",
            "Token injection",
            "Pod certificates",
            "Logging",
        ] {
            assert!(headings.contains(&heading), "no flag under \"{heading}\"");
        }
    }

    /// A command with subcommands names each of them in its own help line (`warrant --help`
    /// and `warrant keys --help` show it), so none is found only by accident.
    #[test]
    fn command_groups_name_their_subcommands() {
        let mut cli = Cli::command();
        cli.build();
        for group in cli
            .get_subcommands()
            .filter(|c| c.has_subcommands() && c.get_name() != "help")
        {
            let about = group
                .get_about()
                .map(ToString::to_string)
                .unwrap_or_default();
            for sub in group.get_subcommands() {
                let name = sub.get_name();
                if name == "help" {
                    continue;
                }
                assert!(
                    about.contains(name),
                    "`warrant {}`'s help line does not name `{name}`: {about}",
                    group.get_name()
                );
            }
        }
    }
}
