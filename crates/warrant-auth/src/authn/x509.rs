//! Client certificates: the CAs they are checked against and the user a certificate names
//! (the handshake's verifier, over every CA in force, is in [`super::trust`]).
//!
//! What this trusts: every CA in `--client-ca-file` (or the cluster's `client-ca-file`, when
//! warrant follows the `extension-apiserver-authentication` ConfigMap), completely. Any
//! certificate such a CA signs, with the client-auth usage and within its validity, is the user
//! its subject names: CN is the user name, each O a group, `system:masters` included. Whoever
//! holds such a CA's key can be anyone.
//!
//! The handshake accepts a certificate that chains to any configured CA (client or front-proxy)
//! and rejects every other certificate; a client without one is let in, for the other
//! authenticators. Which CA vouches for a certificate is decided per request, by each
//! authenticator against its own CA, so a front-proxy certificate is never a user and a user
//! certificate never a front proxy. The CAs can change while warrant runs (the ConfigMap), so
//! the handshake verifier reads the current set on every handshake.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

/// Why a CA bundle is unusable; `origin` names the file or ConfigMap key.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CaError {
    /// The file could not be read.
    #[error("{origin}: {source}")]
    Read {
        /// The file.
        origin: String,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The PEM does not parse.
    #[error("{origin}: {source}")]
    Pem {
        /// The file or key.
        origin: String,
        /// The PEM error.
        #[source]
        source: Arc<rustls_pki_types::pem::Error>,
    },
    /// The PEM holds no certificate.
    #[error("{origin}: no CERTIFICATE block found")]
    Empty {
        /// The file or key.
        origin: String,
    },
    /// A certificate is not usable as a trust anchor.
    #[error("{origin}: {source}")]
    Certificate {
        /// The file or key.
        origin: String,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
    /// No client-certificate verifier can be built over the bundle.
    #[error("{origin}: {source}")]
    Verifier {
        /// The file or key.
        origin: String,
        /// rustls's error.
        #[source]
        source: Arc<rustls::server::VerifierBuilderError>,
    },
}

/// Why a client certificate chain does not verify against a CA bundle. The cause is rustls's
/// own ([`rustls::CertificateError`] inside [`rustls::Error::InvalidCertificate`] for an
/// expired, unknown or misused certificate), kept as a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientCertificateError {
    /// No certificate was presented.
    #[error("no certificate")]
    Missing,
    /// The chain does not verify: it is not from this bundle's CAs, not valid now, or not for
    /// client authentication.
    #[error("x509: {0}")]
    Rejected(#[source] rustls::Error),
}

impl ClientCertificateError {
    /// rustls's reason a certificate was refused, if that was the cause.
    pub fn certificate_error(&self) -> Option<&rustls::CertificateError> {
        match self {
            ClientCertificateError::Rejected(rustls::Error::InvalidCertificate(e)) => Some(e),
            _ => None,
        }
    }
}

/// A bundle of CA certificates that client certificates are verified against (chain, validity
/// and the client-auth extended key usage, by webpki).
#[derive(Clone)]
pub struct CaBundle {
    /// This bundle's identity: each bundle parsed gets its own (clones share it), so what a
    /// connection remembers having verified against one never counts for its replacement.
    id: u64,
    origin: String,
    pub(crate) certificates: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle")
            .field("origin", &self.origin)
            .field("certificates", &self.certificates.len())
            .finish()
    }
}

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

pub(crate) fn roots(
    certificates: &[CertificateDer<'static>],
    origin: &str,
) -> Result<RootCertStore, CaError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate.clone())
            .map_err(|source| CaError::Certificate {
                origin: origin.to_owned(),
                source,
            })?;
    }
    Ok(roots)
}

impl CaBundle {
    /// Parses a PEM bundle; `origin` names it in errors and logs.
    pub fn from_pem(pem: &[u8], origin: &str) -> Result<CaBundle, CaError> {
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| CaError::Pem {
                origin: origin.to_owned(),
                source: Arc::new(e),
            })?;
        if certificates.is_empty() {
            return Err(CaError::Empty {
                origin: origin.to_owned(),
            });
        }
        let roots = roots(&certificates, origin)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| CaError::Verifier {
                origin: origin.to_owned(),
                source: Arc::new(e),
            })?;
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Ok(CaBundle {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            origin: origin.to_owned(),
            certificates,
            verifier,
        })
    }

    /// Reads a PEM bundle from a file.
    pub fn from_file(path: &Path) -> Result<CaBundle, CaError> {
        let origin = path.display().to_string();
        let pem = std::fs::read(path).map_err(|e| CaError::Read {
            origin: origin.clone(),
            source: Arc::new(e),
        })?;
        Self::from_pem(&pem, &origin)
    }

    /// This bundle's identity (never 0).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Where the bundle came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Checks that `chain` (end entity first) chains to this bundle, is valid at `now` and may
    /// be used for client authentication.
    pub(crate) fn verify(
        &self,
        chain: &[CertificateDer<'static>],
        now: Timestamp,
    ) -> Result<(), ClientCertificateError> {
        let Some((end_entity, intermediates)) = chain.split_first() else {
            return Err(ClientCertificateError::Missing);
        };
        let seconds = u64::try_from(now.as_second()).unwrap_or_default();
        let now = UnixTime::since_unix_epoch(Duration::from_secs(seconds));
        self.verifier
            .verify_client_cert(end_entity, intermediates, now)
            .map(|_| ())
            .map_err(ClientCertificateError::Rejected)
    }
}

/// The CN and the Os of a certificate's subject.
pub(crate) fn subject(der: &CertificateDer<'_>) -> Option<(String, Vec<String>)> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some((name, groups))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unusable bundle says where and why, the cause kept as a value.
    #[test]
    fn an_unusable_bundle_keeps_its_cause() {
        let empty = CaBundle::from_pem(b"not PEM at all", "ca.pem").unwrap_err();
        assert!(matches!(&empty, CaError::Empty { origin } if origin == "ca.pem"));
        assert_eq!(empty.to_string(), "ca.pem: no CERTIFICATE block found");
        let missing = CaBundle::from_file(Path::new("/nonexistent/ca.pem")).unwrap_err();
        let CaError::Read { origin, source } = &missing else {
            panic!("{missing:?}")
        };
        assert_eq!(origin, "/nonexistent/ca.pem");
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        let not_a_certificate = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let bad = CaBundle::from_pem(not_a_certificate, "ca.pem").unwrap_err();
        assert!(
            matches!(bad, CaError::Certificate { .. } | CaError::Verifier { .. }),
            "{bad:?}"
        );
        assert!(bad.to_string().starts_with("ca.pem: "), "{bad}");
    }
}
