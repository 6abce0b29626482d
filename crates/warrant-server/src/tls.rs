//! Serving the API over TLS: rustls (aws-lc-rs), HTTP/1.1 and HTTP/2 by ALPN, a serving
//! certificate reloaded when its files change, the verified client certificate attached to
//! every request on its connection, graceful shutdown.
//!
//! This is a small accept loop over tokio-rustls and hyper-util rather than axum-server: it is
//! where the peer certificate of a connection is at hand, to hand to the authenticator.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::authn::{ClientTrust, PeerCertificate};
use warrant_watch::{FileWatch, WatchError, watch_files};

/// A TLS handshake that takes longer than this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that sends no complete request headers for this long is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
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
    /// rustls refused the combination.
    #[error("TLS configuration: {0}")]
    Config(String),
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
    CertifiedKey::from_der(certs, key, &provider())
        .map_err(|e| TlsError::Config(format!("{}: {e}", files.key.display())))
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
/// has them (read afresh on every handshake).
pub fn server_config(
    certificate: &ServingCertificate,
    trust: &ClientTrust,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_client_cert_verifier(trust.handshake_verifier())
        .with_cert_resolver(Arc::new(certificate.clone()));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` on `listener` over TLS until `shutdown` completes, then lets in-flight requests
/// finish (up to a grace period).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(250);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            // Verified by the handshake against one of the client CAs; the authenticators
            // decide which.
            let certificate = stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|chain| PeerCertificate::new(chain.to_vec()))
                .unwrap_or_default();
            let service = tower::service_fn(move |mut request: http::Request<Incoming>| {
                request.extensions_mut().insert(certificate.clone());
                app.clone().oneshot(request)
            });
            let connection = builder.serve_connection_with_upgrades(
                TokioIo::new(stream),
                TowerToHyperService::new(service),
            );
            if let Err(e) = watcher.watch(connection.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period over; closing the remaining connections");
    }
}
