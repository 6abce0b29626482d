//! The serving certificate and key: read from their files, checked to belong together, and
//! reloaded when the files change, with the reloads and the expiry as metrics.

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
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
use tokio::sync::watch;
use warrant_watch::{FileWatch, WatchError, watch_files};

use super::{LOG_TARGET, TlsError};

/// The serving certificate and key files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// `--tls-cert-file`: the serving certificate chain (PEM).
    pub cert: PathBuf,
    /// `--tls-private-key-file`: its key (PEM).
    pub key: PathBuf,
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
                tracing::info!(target: LOG_TARGET, cert = %inner.files.cert.display(), "reloaded the serving certificate");
                Ok(())
            }
            Err(error) => {
                inner
                    .reloads
                    .get_or_create(&ReloadLabels { result: "failure" })
                    .inc();
                tracing::error!(target: LOG_TARGET, %error, "reloading the serving certificate failed; still serving the last good one");
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
