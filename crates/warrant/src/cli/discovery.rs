//! `warrant discovery …`'s command lines (the commands are `crate::export`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::key_flags::KeySourceArgs;

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
