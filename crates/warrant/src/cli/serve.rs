//! `warrant serve`'s command line: every flag of the server, by section (the command is
//! `crate::serve`).

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{ArgAction, Args};

use super::discovery::PublishEndpointArgs;
use super::key_flags::KeySourceArgs;

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
    pub(crate) pod_certificates: super::pod_certificates::PodCertArgs,
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
