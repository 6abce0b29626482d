//! What an outbound connection trusts the server by: the system's roots (through the
//! platform's verifier, as kube trusts a cluster without a CA of its own), the system's roots
//! and a CA file's certificates beside them (`warrant verify --ca-file`), or a CA file's
//! certificates alone (a private CA: the hub's `--warrant-ca-file`, the benchmark's CA), so
//! that no public CA can vouch for the server, as kubectl's `--certificate-authority` does.
//!
//! Who controls the input: the CA file is the operator's flag, read once, when the client is
//! built. A file that cannot be read, is not PEM or holds no certificate is refused, naming
//! the file: a trust setting that silently trusts nothing (or only the system) is a mistake
//! found late, on the first handshake.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

/// The certificates a server's must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The system's roots, through the platform's verifier.
    System,
    /// The system's roots, and these certificates beside them.
    SystemAnd(Vec<CertificateDer<'static>>),
    /// These certificates alone, checked by rustls' WebPKI verifier.
    Only(Vec<CertificateDer<'static>>),
}

/// A CA file that cannot be used. Each message names the file; the caller adds its flag.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A block of the file does not parse as PEM.
    #[error("{path}: not a PEM certificate bundle: {source}")]
    NotPem {
        /// The file.
        path: String,
        /// The PEM parser's reason.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The file holds no `CERTIFICATE` block.
    #[error("{path}: holds no CERTIFICATE block")]
    NoCertificate {
        /// The file.
        path: String,
    },
}

impl CaFileError {
    /// The file the error is about, as shown.
    pub fn path(&self) -> &str {
        match self {
            CaFileError::Read { path, .. }
            | CaFileError::NotPem { path, .. }
            | CaFileError::NoCertificate { path } => path,
        }
    }
}

/// The certificates of the PEM file at `path` (blocks of other kinds are skipped), in the
/// file's order: at least one.
pub fn ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, CaFileError> {
    let shown = || path.display().to_string();
    let pem = std::fs::read(path).map_err(|source| CaFileError::Read {
        path: shown(),
        source,
    })?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CaFileError::NotPem {
            path: shown(),
            source,
        })?;
    if certificates.is_empty() {
        return Err(CaFileError::NoCertificate { path: shown() });
    }
    Ok(certificates)
}

impl Trust {
    /// The system's roots and the certificates of the CA file at `path` beside them.
    pub fn system_and_file(path: &Path) -> Result<Trust, CaFileError> {
        ca_file(path).map(Trust::SystemAnd)
    }

    /// The certificates of the CA file at `path` alone.
    pub fn only_file(path: &Path) -> Result<Trust, CaFileError> {
        ca_file(path).map(Trust::Only)
    }

    /// The rustls client configuration of this trust: rustls on aws-lc-rs (the one crypto
    /// backend), its safe default protocol versions, no client certificate. Fails if the
    /// platform's verifier cannot start, or a certificate is not one rustls accepts as a root.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, rustls::Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let verifier = match self {
            Trust::System => rustls_platform_verifier::Verifier::new(provider)?,
            Trust::SystemAnd(extra) => {
                rustls_platform_verifier::Verifier::new_with_extra_roots(extra.clone(), provider)?
            }
            Trust::Only(certificates) => {
                let mut roots = rustls::RootCertStore::empty();
                for certificate in certificates {
                    roots.add(certificate.clone())?;
                }
                return Ok(builder.with_root_certificates(roots).with_no_client_auth());
            }
        };
        Ok(builder
            .dangerous() // the platform's verifier: the ordinary checks, not fewer
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_holds_certificates_and_errors_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let ca = warrant_testkit::TestCa::new("private");
        let other = warrant_testkit::TestCa::new("other");
        let bundle = dir.path().join("bundle.pem");
        // A key block between the certificates is skipped, not refused.
        std::fs::write(
            &bundle,
            format!(
                "{}{}{}",
                ca.pem(),
                ca.issue_server(&["s.example"]).key_pem(),
                other.pem()
            ),
        )
        .unwrap();
        assert_eq!(ca_file(&bundle).unwrap().len(), 2);
        assert!(matches!(
            Trust::only_file(&bundle).unwrap(),
            Trust::Only(certs) if certs.len() == 2
        ));

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let absent = dir.path().join("absent.pem");
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        for (path, says) in [
            (&empty, "holds no CERTIFICATE block"),
            (&absent, "No such file"),
            (&broken, "not a PEM certificate bundle"),
        ] {
            let err = Trust::system_and_file(path).unwrap_err();
            let said = err.to_string();
            assert!(said.starts_with(&path.display().to_string()), "{said}");
            assert!(said.contains(says), "{said}");
            assert_eq!(err.path(), path.display().to_string());
        }
    }

    #[test]
    fn every_trust_makes_a_client_configuration() {
        let ca = warrant_testkit::TestCa::new("private");
        let der = CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap();
        for trust in [
            Trust::System,
            Trust::SystemAnd(vec![der.clone()]),
            Trust::Only(vec![der]),
        ] {
            trust.client_config().unwrap();
        }
        let not_a_certificate = CertificateDer::from(vec![1, 2, 3]);
        assert!(
            Trust::Only(vec![not_a_certificate])
                .client_config()
                .is_err()
        );
    }
}
