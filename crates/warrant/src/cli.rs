//! The command line. Flags mirror kube-apiserver's names wherever the meaning is the same.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

/// warrant: a standalone, Kubernetes-compatible service-account token issuer.
#[derive(Debug, Parser)]
#[command(name = "warrant", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, help_heading = "Logging")]
    pub(crate) log_format: LogFormat,
    /// Log filter, in tracing's syntax (e.g. `info`, `warrant_server=debug`); RUST_LOG overrides.
    #[arg(long, global = true, default_value = "info", help_heading = "Logging")]
    pub(crate) log_level: String,
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
}

/// `warrant serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Issuer of new tokens (the first) and accepted issuers (all). Repeatable.
    #[arg(long = "service-account-issuer", value_name = "URL")]
    pub(crate) issuers: Vec<String>,
    /// Audiences of warrant's own API; default: the issuers. Comma-separated, repeatable.
    #[arg(
        long = "api-audiences",
        value_delimiter = ',',
        value_name = "AUDIENCES"
    )]
    pub(crate) api_audiences: Vec<String>,
    /// PEM file whose first private key signs tokens.
    #[arg(long = "service-account-signing-key-file", value_name = "PATH")]
    pub(crate) signing_key_file: PathBuf,
    /// PEM file of keys that verify tokens (the signing key always does). Repeatable.
    #[arg(long = "service-account-key-file", value_name = "PATH")]
    pub(crate) key_files: Vec<PathBuf>,
    /// Longest lifetime a TokenRequest gets (Go duration, 1h to 2^32 s); longer requests are
    /// shortened with a warning. Default: no cap.
    #[arg(long = "service-account-max-token-expiration", value_name = "DURATION", value_parser = crate::duration::parse_seconds)]
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
        value_name = "BOOL"
    )]
    pub(crate) extend_token_expiration: bool,
    /// The JWKS URL the discovery document names (https). Default:
    /// https://<external-hostname>/openid/v1/jwks, else <issuer>/openid/v1/jwks.
    #[arg(long = "service-account-jwks-uri", value_name = "URL")]
    pub(crate) jwks_uri: Option<String>,
    /// The host (and port) relying parties reach warrant at, for the default JWKS URL.
    #[arg(long = "external-hostname", value_name = "HOST[:PORT]")]
    pub(crate) external_hostname: Option<String>,
    /// Address to listen on.
    #[arg(long = "bind-address", default_value = "0.0.0.0", value_name = "IP")]
    pub(crate) bind_address: IpAddr,
    /// Port to serve HTTPS on.
    #[arg(long = "secure-port", default_value_t = 8443, value_name = "PORT")]
    pub(crate) secure_port: u16,
    /// Serving certificate chain (PEM).
    #[arg(long = "tls-cert-file", value_name = "PATH")]
    pub(crate) tls_cert_file: PathBuf,
    /// Serving certificate's private key (PEM).
    #[arg(long = "tls-private-key-file", value_name = "PATH")]
    pub(crate) tls_private_key_file: PathBuf,
    /// CA bundle that users' client certificates must chain to; a verified certificate's CN
    /// is the user name and each O a group.
    #[arg(long = "client-ca-file", value_name = "PATH")]
    pub(crate) client_ca_file: Option<PathBuf>,
    /// Static bearer tokens, kube-apiserver's CSV format: token,user,uid[,"group1,group2"].
    #[arg(long = "token-auth-file", value_name = "PATH")]
    pub(crate) token_auth_file: Option<PathBuf>,
    /// Manifest of ServiceAccounts, Pods, Secrets and Nodes (YAML or JSON) that tokens bind
    /// to; reloaded when it changes. The standalone issuer.
    #[arg(
        long = "objects-file",
        value_name = "PATH",
        conflicts_with = "kubeconfig"
    )]
    pub(crate) objects_file: Option<PathBuf>,
    /// Kubeconfig of the cluster whose ServiceAccounts, Pods, Secrets and Nodes tokens bind to
    /// (watched). Without it or --objects-file, warrant uses the in-cluster configuration when
    /// it runs in a pod.
    #[arg(long = "kubeconfig", value_name = "PATH")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Front proxy, delegation and authorization (docs/security.md).
    #[command(flatten)]
    pub(crate) auth: crate::auth::AuthArgs,
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
    /// The token, or `-` to read it from standard input.
    #[arg(value_name = "TOKEN")]
    pub(crate) token: String,
}
