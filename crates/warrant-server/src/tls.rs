//! Serving the API over TLS: rustls (aws-lc-rs), HTTP/1.1 and HTTP/2 by ALPN, a serving
//! certificate reloaded when its files change, the verified client certificate attached to
//! every request on its connection, graceful shutdown. The versions and cipher suites are
//! kube-apiserver's flags with Go's meaning ([`TlsSettings`]), within what rustls implements:
//! TLS 1.2 and 1.3, ECDHE key exchange and AEAD ciphers only.
//!
//! This is a small accept loop over tokio-rustls and hyper-util rather than axum-server: it is
//! where the peer certificate of a connection is at hand, to hand to the authenticator.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::Api;
use arc_swap::ArcSwap;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rustls::CipherSuite;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::connections::{Closed, Connection, Connections, ServeOptions};
use warrant_auth::loglimit::Throttle;
use warrant_auth::{ClientTrust, PeerCertificate};
use warrant_watch::{FileWatch, WatchError, watch_files};

/// How long in-flight requests get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The serving certificate and key files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// `--tls-cert-file`: the serving certificate chain (PEM).
    pub cert: PathBuf,
    /// `--tls-private-key-file`: its key (PEM).
    pub key: PathBuf,
}

/// Why TLS could not be set up. Each names the file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the combination; `what` names the file or the part refused.
    #[error("TLS configuration: {what}: {source}")]
    Config {
        /// The key file, or the part of the configuration refused.
        what: String,
        /// rustls's reason.
        #[source]
        source: rustls::Error,
    },
    /// `--tls-min-version` names a version kube-apiserver takes but rustls does not speak.
    #[error(
        "{name} is not supported: warrant's TLS library (rustls) supports only TLS 1.2 and 1.3 (use VersionTLS12 or VersionTLS13)"
    )]
    UnsupportedVersion {
        /// The value given.
        name: String,
    },
    /// `--tls-min-version` names no TLS version at all (kube-apiserver's message).
    #[error("unknown tls version {name:?}: use VersionTLS12 or VersionTLS13")]
    UnknownVersion {
        /// The value given.
        name: String,
    },
    /// `--tls-cipher-suites` names a suite kube-apiserver (Go) accepts but rustls does not
    /// implement.
    #[error(
        "--tls-cipher-suites: {name} is not implemented by warrant's TLS library (rustls implements no CBC, RC4 or 3DES suite and no RSA key exchange); supported: {SUPPORTED_NAMES}"
    )]
    UnimplementedCipherSuite {
        /// The name given.
        name: String,
    },
    /// `--tls-cipher-suites` names no cipher suite Go knows (kube-apiserver's message).
    #[error(
        "--tls-cipher-suites: cipher suite {name} not supported or doesn't exist; supported: {SUPPORTED_NAMES}"
    )]
    UnknownCipherSuite {
        /// The name given.
        name: String,
    },
    /// The TLS 1.2 suites lack the one HTTP/2 requires (RFC 7540 §9.2.2), which Go's HTTP/2
    /// server, and so kube-apiserver, refuses to start without.
    #[error(
        "--tls-cipher-suites is missing an HTTP/2-required AES_128_GCM_SHA256 cipher (need at least one of TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), as kube-apiserver requires"
    )]
    Http2CipherSuiteMissing,
}

fn file_error(path: &std::path::Path, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The lowest TLS version the server speaks: kube-apiserver's `--tls-min-version`, with its
/// values. kube-apiserver also takes `VersionTLS10` and `VersionTLS11`; rustls speaks neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsMinVersion {
    /// `VersionTLS12`, the default (as kube-apiserver's).
    #[default]
    Tls12,
    /// `VersionTLS13`: TLS 1.2 clients are refused at the handshake.
    Tls13,
}

impl TlsMinVersion {
    /// Reads kube-apiserver's name for a version (`VersionTLS12`, `VersionTLS13`); an empty
    /// value is the default, as for kube-apiserver.
    pub fn parse(name: &str) -> Result<TlsMinVersion, TlsError> {
        match name {
            "" | "VersionTLS12" => Ok(TlsMinVersion::Tls12),
            "VersionTLS13" => Ok(TlsMinVersion::Tls13),
            "VersionTLS10" | "VersionTLS11" => Err(TlsError::UnsupportedVersion {
                name: name.to_owned(),
            }),
            _ => Err(TlsError::UnknownVersion {
                name: name.to_owned(),
            }),
        }
    }

    /// kube-apiserver's name for it.
    pub fn name(self) -> &'static str {
        match self {
            TlsMinVersion::Tls12 => "VersionTLS12",
            TlsMinVersion::Tls13 => "VersionTLS13",
        }
    }

    fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        match self {
            TlsMinVersion::Tls12 => TLS12_AND_13,
            TlsMinVersion::Tls13 => TLS13_ONLY,
        }
    }
}

static TLS12_AND_13: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];
static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// Go's names (which kube-apiserver's `--tls-cipher-suites` takes) for the TLS 1.2 suites of
/// rustls's aws-lc-rs provider, with Go's older names for the ChaCha20 ones.
const TLS12_SUITES: &[(&str, CipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The TLS 1.3 suites. Go does not let them be configured (all are always on) and ignores
/// them in the list; so does warrant.
const TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The suites Go knows (`tls.CipherSuites()` and `tls.InsecureCipherSuites()`, so values
/// kube-apiserver takes) that rustls does not implement: CBC, RC4, 3DES, RSA key exchange.
const UNIMPLEMENTED_SUITES: &[&str] = &[
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Every name `--tls-cipher-suites` takes, for its error messages.
const SUPPORTED_NAMES: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 (or TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305), TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 (or TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305); and, always on whether listed or not, TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256";

/// The server's TLS protocol settings: kube-apiserver's `--tls-min-version` and
/// `--tls-cipher-suites`, with their meaning in Go's crypto/tls. The suite list restricts the
/// TLS 1.2 suites only: TLS 1.3's are always on (Go does not let them be configured), and with
/// a minimum of TLS 1.3 the list has no effect. The order of the list does not matter (Go has
/// ignored it since 1.17): the client's preference decides among the suites allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    min_version: TlsMinVersion,
    /// The TLS 1.2 suites allowed; `None`: every one rustls implements (all ECDHE with AEAD).
    tls12_suites: Option<Vec<CipherSuite>>,
}

impl TlsSettings {
    /// The settings for `min_version` and the suites `cipher_suites` names (Go's names, as
    /// kube-apiserver takes them; empty entries are skipped, and no entry at all means the
    /// defaults). Refused, naming the suite: a name Go does not know, and, where TLS 1.2 is
    /// on, one rustls does not implement, or a list without the suite HTTP/2 requires (which
    /// kube-apiserver refuses too).
    pub fn new(
        min_version: TlsMinVersion,
        cipher_suites: &[String],
    ) -> Result<TlsSettings, TlsError> {
        let mut tls12 = Vec::new();
        let mut unimplemented = None;
        let mut listed = false;
        for name in cipher_suites
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
        {
            listed = true;
            if let Some((_, suite)) = TLS12_SUITES.iter().find(|(known, _)| *known == name) {
                if !tls12.contains(suite) {
                    tls12.push(*suite);
                }
            } else if UNIMPLEMENTED_SUITES.contains(&name) {
                unimplemented.get_or_insert(name);
            } else if !TLS13_SUITES.contains(&name) {
                return Err(TlsError::UnknownCipherSuite {
                    name: name.to_owned(),
                });
            }
        }
        if !listed {
            return Ok(TlsSettings {
                min_version,
                tls12_suites: None,
            });
        }
        if min_version == TlsMinVersion::Tls13 {
            tracing::warn!(
                "--tls-cipher-suites has no effect with --tls-min-version VersionTLS13: TLS 1.3's suites are always on"
            );
            return Ok(TlsSettings {
                min_version,
                tls12_suites: None,
            });
        }
        if let Some(name) = unimplemented {
            return Err(TlsError::UnimplementedCipherSuite {
                name: name.to_owned(),
            });
        }
        if !tls12.iter().any(|suite| {
            matches!(
                suite,
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                    | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            )
        }) {
            return Err(TlsError::Http2CipherSuiteMissing);
        }
        Ok(TlsSettings {
            min_version,
            tls12_suites: Some(tls12),
        })
    }

    /// The lowest TLS version served.
    pub fn min_version(&self) -> TlsMinVersion {
        self.min_version
    }

    /// The crypto provider with the suites allowed: every TLS 1.3 suite, and the TLS 1.2 ones
    /// listed (all, with no list).
    fn provider(&self) -> CryptoProvider {
        let mut provider = rustls::crypto::aws_lc_rs::default_provider();
        if let Some(allowed) = &self.tls12_suites {
            provider.cipher_suites.retain(|suite| {
                suite.version() == &rustls::version::TLS13 || allowed.contains(&suite.suite())
            });
        }
        provider
    }
}

/// Reads a certificate chain and its key, and checks that they belong together.
fn read_pair(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| file_error(&files.cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(&files.cert, e))?;
    if certs.is_empty() {
        return Err(file_error(&files.cert, "no CERTIFICATE block found"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error(&files.key, e))?;
    CertifiedKey::from_der(certs, key, &provider()).map_err(|source| TlsError::Config {
        what: files.key.display().to_string(),
        source,
    })
}

/// When a certificate stops being valid, in seconds since the epoch.
fn not_after(pair: &CertifiedKey) -> Option<i64> {
    let der = pair.cert.first()?;
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(certificate.validity().not_after.timestamp())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

#[derive(Debug)]
struct CertificateInner {
    files: TlsFiles,
    current: ArcSwap<CertifiedKey>,
    reloads: Family<ReloadLabels, Counter>,
    expiry: Gauge,
    generation: watch::Sender<u64>,
}

/// The serving certificate and key, reloaded from their files when they change (cert-manager
/// and Secret volumes rotate them in place), so rotation needs no restart. A pair that does not
/// load (a half-written file, a key that does not match the certificate) is refused and the
/// last good pair keeps serving; each attempt is counted in
/// `warrant_tls_serving_certificate_reloads_total{result}`. New connections get the new pair;
/// open ones keep the one they started with.
#[derive(Debug, Clone)]
pub struct ServingCertificate {
    inner: Arc<CertificateInner>,
}

impl ServingCertificate {
    /// Loads the pair; an unusable pair is an error (warrant does not start).
    pub fn load(files: &TlsFiles) -> Result<ServingCertificate, TlsError> {
        let pair = read_pair(files)?;
        let expiry = Gauge::default();
        if let Some(t) = not_after(&pair) {
            expiry.set(t);
        }
        Ok(ServingCertificate {
            inner: Arc::new(CertificateInner {
                files: files.clone(),
                current: ArcSwap::from_pointee(pair),
                reloads: Family::default(),
                expiry,
                generation: watch::Sender::new(0),
            }),
        })
    }

    /// Registers the reload counter and `warrant_tls_serving_certificate_expiration_timestamp_seconds`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_tls_serving_certificate_reloads",
            "Reloads of the serving certificate and key, by result (success, failure)",
            self.inner.reloads.clone(),
        );
        registry.register(
            "warrant_tls_serving_certificate_expiration_timestamp_seconds",
            "When the serving certificate in use expires (its notAfter)",
            self.inner.expiry.clone(),
        );
    }

    /// Rereads the files now. On failure the last good pair keeps serving.
    pub fn reload(&self) -> Result<(), TlsError> {
        let inner = &self.inner;
        let result = read_pair(&inner.files);
        let outcome = match result {
            Ok(pair) => {
                if let Some(t) = not_after(&pair) {
                    inner.expiry.set(t);
                }
                inner.current.store(Arc::new(pair));
                inner
                    .reloads
                    .get_or_create(&ReloadLabels { result: "success" })
                    .inc();
                tracing::info!(cert = %inner.files.cert.display(), "reloaded the serving certificate");
                Ok(())
            }
            Err(error) => {
                inner
                    .reloads
                    .get_or_create(&ReloadLabels { result: "failure" })
                    .inc();
                tracing::error!(%error, "reloading the serving certificate failed; still serving the last good one");
                Err(error)
            }
        };
        inner.generation.send_modify(|g| *g = g.wrapping_add(1));
        outcome
    }

    /// Reloads the pair whenever either file changes, until the guard is dropped. Must be
    /// called within a Tokio runtime.
    pub fn watch(&self) -> Result<FileWatch, WatchError> {
        let this = self.clone();
        let files = [self.inner.files.cert.clone(), self.inner.files.key.clone()];
        watch_files(&files, move || {
            let _ = this.reload();
        })
    }

    /// A receiver that changes after every reload attempt.
    pub fn reloads(&self) -> watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// The certificate chain in use (end entity first).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.inner.current.load().cert.clone()
    }
}

impl ResolvesServerCert for ServingCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.inner.current.load_full())
    }
}

/// The rustls configuration: `certificate` for the server, client certificates as `trust`
/// has them (read afresh on every handshake), versions and cipher suites as `settings` allow.
pub fn server_config(
    certificate: &ServingCertificate,
    trust: &ClientTrust,
    settings: &TlsSettings,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(settings.provider()))
        .with_protocol_versions(settings.min_version.versions())
        .map_err(|source| TlsError::Config {
            what: "protocol versions".to_owned(),
            source,
        })?
        .with_client_cert_verifier(trust.handshake_verifier())
        .with_cert_resolver(Arc::new(certificate.clone()));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` on `listener` over TLS until `shutdown` completes, then lets in-flight requests
/// finish (up to a grace period). `connections` holds the limit and counts (see
/// [`crate::connections`]); `options` the timeouts.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Api,
    options: ServeOptions,
    connections: Connections,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    // Not owned task handles: at shutdown the connections are drained (each told to stop, then
    // waited for), which aborting them would not allow.
    let stopping = CancellationToken::new();
    let tasks = TaskTracker::new();
    let options = Arc::new(options);
    let mut accept_errors = Throttle::new(Duration::from_secs(1));
    let mut backoff = ACCEPT_BACKOFF_MIN;
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    conn
                }
                Err(e) => {
                    // Out of descriptors and the like: free one if an idle connection holds it,
                    // wait a growing while, and say so once a second, with a count.
                    connections.accept_error();
                    let shed = connections.shed_one(Instant::now());
                    if let Some(left_out) = accept_errors.allow(Instant::now()) {
                        tracing::warn!(error = %e, failures_not_logged = left_out, shed_an_idle_connection = shed, "accepting a connection failed");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(connection) = connections.admit(peer.ip(), Instant::now()) else {
            tracing::debug!(%peer, "connection refused: at a connection limit with none that may make room");
            continue;
        };
        // Each answer goes out when written, as Go's servers (kube-apiserver's) send theirs:
        // with Nagle's algorithm, an HTTP/2 frame written after another still unacknowledged
        // waited for the client's delayed ACK, 40 ms (seen as the p99 of the h2 bench rows).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "could not set TCP_NODELAY");
        }
        let acceptor = acceptor.clone();
        let app = app.clone();
        let options = options.clone();
        let stopping = stopping.clone();
        tasks.spawn(async move {
            serve_connection(tcp, peer, acceptor, app, &options, connection, stopping).await;
        });
    }
    drop(listener);
    stopping.cancel();
    tasks.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period over; closing the remaining connections");
    }
}

/// The shortest and longest waits after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One connection, from the handshake to its close.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    acceptor: TlsAcceptor,
    app: Api,
    options: &ServeOptions,
    connection: Arc<Connection>,
    stopping: CancellationToken,
) {
    let handshake = tokio::select! {
        result = tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)) => result,
        () = connection.shed() => {
            connection.closed(Closed::Shed);
            return;
        }
    };
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            connection.closed(Closed::HandshakeFailed);
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            connection.closed(Closed::HandshakeTimeout);
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let tls = stream.get_ref().1;
    // Verified by the handshake against one of the client CAs; the authenticators decide which.
    let certificate = tls
        .peer_certificates()
        .map(|chain| PeerCertificate::new(chain.to_vec()))
        .unwrap_or_default();
    // ALPN decides the protocol; a client that offers none speaks HTTP/1.1 (as with Go's
    // server). No bytes are read to guess it, so nothing waits unbounded for them.
    let h2 = tls.alpn_protocol() == Some(b"h2".as_slice());
    connection.handshaken(if h2 { "h2" } else { "http1" }, Instant::now());
    let requests = connection.clone();
    let mark = connection.mark();
    let service = tower::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(certificate.clone());
        request.extensions_mut().insert(mark.clone());
        request
            .extensions_mut()
            .insert(crate::audit::ClientAddress(peer));
        let in_flight = InFlight::begin(requests.clone());
        let response = app.clone().oneshot(request);
        async move {
            let response = response.await;
            drop(in_flight);
            response
        }
    });
    let service = TowerToHyperService::new(service);
    let io = TokioIo::new(stream);
    let ended = if h2 {
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(250)
            .keep_alive_interval(Some(options.h2_ping_interval))
            .keep_alive_timeout(options.h2_ping_timeout);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        drive(
            conn,
            |c| c.graceful_shutdown(),
            &connection,
            options,
            &stopping,
        )
        .await
    } else {
        let mut builder = hyper::server::conn::http1::Builder::new();
        // The first request's wait is the watchdog's (it counts the close); hyper's own timer,
        // a grace later, bounds the headers of the requests after it.
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(options.first_request_timeout + CLOSE_GRACE);
        let conn = builder.serve_connection(io, service).with_upgrades();
        tokio::pin!(conn);
        drive(
            conn,
            |c| c.graceful_shutdown(),
            &connection,
            options,
            &stopping,
        )
        .await
    };
    if let Err(e) = ended {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// A request in flight on its connection, until answered or abandoned (an HTTP/2 stream reset
/// drops it unanswered).
struct InFlight(Arc<Connection>);

impl InFlight {
    fn begin(connection: Arc<Connection>) -> Self {
        connection.begin();
        InFlight(connection)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end(Instant::now());
    }
}

/// Runs a connection to its end, shutting it down gracefully (HTTP/2: GOAWAY; HTTP/1.1: closed
/// once the request in flight is answered) when it idles out, is shed, or the server stops.
async fn drive<C>(
    mut conn: std::pin::Pin<&mut C>,
    graceful: impl Fn(std::pin::Pin<&mut C>),
    connection: &Connection,
    options: &ServeOptions,
    stopping: &CancellationToken,
) -> Result<(), hyper::Error>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    tokio::select! {
        result = conn.as_mut() => return result,
        reason = connection.close_reason(options) => connection.closed(reason),
        () = stopping.cancelled() => {
            // The server's shutdown grace bounds what is left.
            graceful(conn.as_mut());
            return conn.await;
        }
    }
    // Nothing is in flight: a peer that does not take the hint (an HTTP/2 client that never
    // sent its preface, say) is dropped shortly after.
    graceful(conn.as_mut());
    tokio::time::timeout(CLOSE_GRACE, conn)
        .await
        .unwrap_or(Ok(()))
}

/// How long an idle or shed connection gets to close after being told to.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    fn tls12_allowed(settings: &TlsSettings) -> Vec<CipherSuite> {
        settings
            .provider()
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS12)
            .map(|s| s.suite())
            .collect()
    }

    fn tls13_allowed(settings: &TlsSettings) -> usize {
        settings
            .provider()
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .count()
    }

    #[test]
    fn min_versions_have_kube_apiservers_names() {
        assert_eq!(
            TlsMinVersion::parse("VersionTLS12").unwrap(),
            TlsMinVersion::Tls12
        );
        assert_eq!(
            TlsMinVersion::parse("VersionTLS13").unwrap(),
            TlsMinVersion::Tls13
        );
        assert_eq!(TlsMinVersion::parse("").unwrap(), TlsMinVersion::Tls12);
        assert_eq!(TlsMinVersion::default().name(), "VersionTLS12");
        for old in ["VersionTLS10", "VersionTLS11"] {
            let error = TlsMinVersion::parse(old).unwrap_err().to_string();
            assert_eq!(
                error,
                format!(
                    "{old} is not supported: warrant's TLS library (rustls) supports only TLS 1.2 and 1.3 (use VersionTLS12 or VersionTLS13)"
                )
            );
        }
        for wrong in ["1.2", "TLS12", "versiontls12", "VersionTLS14"] {
            let error = TlsMinVersion::parse(wrong).unwrap_err().to_string();
            assert_eq!(
                error,
                format!("unknown tls version \"{wrong}\": use VersionTLS12 or VersionTLS13")
            );
        }
    }

    #[test]
    fn versions_follow_the_minimum() {
        assert_eq!(TlsMinVersion::Tls12.versions().len(), 2);
        assert_eq!(
            TlsMinVersion::Tls13.versions(),
            &[&rustls::version::TLS13][..]
        );
    }

    #[test]
    fn no_list_allows_every_suite_rustls_has() {
        for list in [names(&[]), names(&[""]), names(&["", " "])] {
            let settings = TlsSettings::new(TlsMinVersion::Tls12, &list).unwrap();
            assert_eq!(settings, TlsSettings::default());
            assert_eq!(tls12_allowed(&settings).len(), 6);
            assert_eq!(tls13_allowed(&settings), 3);
        }
    }

    #[test]
    fn a_list_restricts_tls12_and_leaves_tls13_alone() {
        let settings = TlsSettings::new(
            TlsMinVersion::Tls12,
            &names(&[
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                " TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
                "TLS_AES_128_GCM_SHA256",
            ]),
        )
        .unwrap();
        let mut allowed = tls12_allowed(&settings);
        allowed.sort_by_key(|s| u16::from(*s));
        assert_eq!(
            allowed,
            [
                CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ]
        );
        // Listing one TLS 1.3 suite does not turn the others off, as in Go.
        assert_eq!(tls13_allowed(&settings), 3);
    }

    #[test]
    fn every_go_name_for_a_rustls_suite_is_taken() {
        for (name, suite) in TLS12_SUITES {
            let list = names(&[name, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
            let settings = TlsSettings::new(TlsMinVersion::Tls12, &list).unwrap();
            assert!(tls12_allowed(&settings).contains(suite), "{name}");
            assert!(SUPPORTED_NAMES.contains(name), "{name}");
        }
        // Each is one rustls implements.
        let all = rustls::crypto::aws_lc_rs::default_provider().cipher_suites;
        for (name, suite) in TLS12_SUITES {
            assert!(all.iter().any(|s| s.suite() == *suite), "{name}");
        }
    }

    #[test]
    fn suites_rustls_lacks_are_refused_by_name() {
        for name in UNIMPLEMENTED_SUITES {
            let list = names(&["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", name]);
            let error = TlsSettings::new(TlsMinVersion::Tls12, &list)
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!(
                    "--tls-cipher-suites: {name} is not implemented by warrant's TLS library (rustls implements no CBC, RC4 or 3DES suite and no RSA key exchange); supported: {SUPPORTED_NAMES}"
                )
            );
        }
    }

    #[test]
    fn unknown_suites_are_refused_as_kube_apiserver_does() {
        for name in [
            "TLS_FALLBACK_SCSV",
            "ECDHE-RSA-AES128-GCM-SHA256",
            "tls_aes_128_gcm_sha256",
        ] {
            let error = TlsSettings::new(TlsMinVersion::Tls13, &names(&[name]))
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                format!(
                    "--tls-cipher-suites: cipher suite {name} not supported or doesn't exist; supported: {SUPPORTED_NAMES}"
                )
            );
        }
    }

    #[test]
    fn tls12_needs_the_suite_http2_requires() {
        for list in [
            names(&["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]),
            names(&["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384"]),
        ] {
            let error = TlsSettings::new(TlsMinVersion::Tls12, &list).unwrap_err();
            assert!(
                matches!(error, TlsError::Http2CipherSuiteMissing),
                "{list:?}: {error}"
            );
        }
        for required in [
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ] {
            TlsSettings::new(TlsMinVersion::Tls12, &names(&[required])).unwrap();
        }
    }

    #[test]
    fn with_tls13_the_list_has_no_effect_but_is_read() {
        let list = names(&[
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            "TLS_RSA_WITH_AES_128_CBC_SHA",
        ]);
        let settings = TlsSettings::new(TlsMinVersion::Tls13, &list).unwrap();
        assert_eq!(settings.min_version(), TlsMinVersion::Tls13);
        assert_eq!(tls13_allowed(&settings), 3);
    }
}
