//! The pod certificate CA from files (`--pod-certificate-ca-cert-file`,
//! `--pod-certificate-ca-key-file`, `--pod-certificate-ca-bundle-file`): the layout
//! cert-manager, step-ca and `openssl` leave (a Secret's `tls.crt` and `tls.key`), re-read when
//! they change, so a CA renewed in place signs from the next PCR on.
//!
//! The certificate file holds the CA's certificate first, then its issuers up to the root; the
//! root (the last, self-signed) is what relying parties trust, and the certificates between it
//! and the leaf go into every leaf's chain. A root alone is the common case. The key is the
//! first certificate's: PKCS#8 or SEC1 (`EC PRIVATE KEY`), P-256 or P-384.
//!
//! A set of files that does not load (unreadable, a key that is not the certificate's, a
//! certificate that is no CA) keeps the last good CA in force and says why in the log and in
//! `/readyz?verbose` (`pod-certificate-ca`); with none loaded yet, `serve` does not start.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use warrant_podcert::{
    CaAlgorithm, CaCertificate, CaCurve, CaSet, CaSignature, CaSigner, MemoryCa,
};
use warrant_watch::{FileWatch, watch_files};

/// The files of a CA.
#[derive(Debug, Clone)]
pub(crate) struct CaFiles {
    /// The CA's certificate, then its issuers up to the root (PEM).
    pub(crate) cert: PathBuf,
    /// The CA's key (PEM: PKCS#8 or SEC1).
    pub(crate) key: PathBuf,
    /// Further roots to trust (a previous CA's, during a rotation), published beside the
    /// current root (PEM).
    pub(crate) bundle: Option<PathBuf>,
}

impl CaFiles {
    /// Reads the files into the CA that signs and the roots to publish (the current root
    /// first, then the bundle's, without duplicates).
    pub(crate) fn load(&self) -> Result<CaSet, String> {
        let certificates = read_certificates(&self.cert)?;
        let (first, issuers) = certificates
            .split_first()
            .ok_or_else(|| format!("{}: no CERTIFICATE in the file", self.cert.display()))?;
        let key = PrivateKeyDer::from_pem_file(&self.key).map_err(|e| {
            format!(
                "{}: not a PEM private key ({e}); give a PKCS#8 or SEC1 EC key",
                self.key.display()
            )
        })?;
        let pkcs8 = match key {
            PrivateKeyDer::Pkcs8(key) => key.secret_pkcs8_der().to_vec(),
            PrivateKeyDer::Sec1(key) => sec1_to_pkcs8(key.secret_sec1_der())
                .ok_or_else(|| format!("{}: the EC key does not parse", self.key.display()))?,
            _ => {
                return Err(format!(
                    "{}: an RSA key; the pod certificate CA's key is ECDSA P-256 or P-384",
                    self.key.display()
                ));
            }
        };
        let ca = [CaCurve::P256, CaCurve::P384]
            .into_iter()
            .find_map(|curve| MemoryCa::from_parts(curve, &pkcs8, first).ok())
            .ok_or_else(|| {
                // The certificate alone says what was wrong with it, if anything.
                match CaCertificate::from_der(first) {
                    Err(e) => format!("{}: {e}", self.cert.display()),
                    Ok(_) => format!(
                        "{} is not the key of {}'s first certificate, or not a P-256 or P-384 key",
                        self.key.display(),
                        self.cert.display()
                    ),
                }
            })?;
        // The chain after the leaf: this CA when an intermediate, and the issuers below the
        // root. A lone certificate is its own root.
        let (root, chain) = match issuers.split_last() {
            None => (first.clone(), Vec::new()),
            Some((root, between)) => {
                let mut chain = vec![first.clone()];
                chain.extend(between.iter().cloned());
                (root.clone(), chain)
            }
        };
        let root = CaCertificate::from_der(&root)
            .map_err(|e| format!("{}: the last certificate: {e}", self.cert.display()))?;
        let mut trusted = vec![root];
        if let Some(bundle) = &self.bundle {
            for der in read_certificates(bundle)? {
                let certificate = CaCertificate::from_der(&der)
                    .map_err(|e| format!("{}: {e}", bundle.display()))?;
                if !trusted.contains(&certificate) {
                    trusted.push(certificate);
                }
            }
        }
        Ok(CaSet {
            signing: Ok(Arc::new(FileCa { ca, chain })),
            trusted,
        })
    }

    /// Loads the files (an error if they do not load now), then keeps `sender` current as
    /// they change until the returned watch is dropped. A change that does not load keeps
    /// the CA in force, logged and in `failure`.
    pub(crate) fn watch(
        self,
        failure: watch::Sender<Option<String>>,
    ) -> Result<(watch::Receiver<CaSet>, FileWatch), String> {
        let first = self.load()?;
        let (sender, receiver) = watch::channel(first);
        let mut paths = vec![self.cert.clone(), self.key.clone()];
        paths.extend(self.bundle.clone());
        let files = self.clone();
        let file_watch = watch_files(&paths, move || match files.load() {
            Ok(set) => {
                let kid = set
                    .signing
                    .as_ref()
                    .map(|ca| ca.certificate().key_id())
                    .unwrap_or_default();
                tracing::info!(ca_key_id = %kid, roots = set.trusted.len(), "pod certificate CA reloaded");
                sender.send_replace(set);
                failure.send_replace(None);
            }
            Err(why) => {
                tracing::error!(error = %why, "pod certificate CA files changed but do not load; the CA loaded before stays in force");
                failure.send_replace(Some(why));
            }
        })
        .map_err(|e| e.to_string())?;
        Ok((receiver, file_watch))
    }
}

/// Every CERTIFICATE block of a PEM file, DER.
fn read_certificates(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    CertificateDer::pem_slice_iter(&text)
        .map(|c| c.map(|c| c.as_ref().to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not PEM certificates: {e}", path.display()))
}

/// A SEC1 `ECPrivateKey` as PKCS#8, for whichever of P-256 and P-384 it is.
fn sec1_to_pkcs8(sec1: &[u8]) -> Option<Vec<u8>> {
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_ASN1_SIGNING, ECDSA_P384_SHA384_ASN1_SIGNING, EcdsaKeyPair,
    };
    [
        &ECDSA_P256_SHA256_ASN1_SIGNING,
        &ECDSA_P384_SHA384_ASN1_SIGNING,
    ]
    .into_iter()
    .find_map(|alg| EcdsaKeyPair::from_private_key_der(alg, sec1).ok())
    .and_then(|key| key.to_pkcs8v1().ok())
    .map(|doc| doc.as_ref().to_vec())
}

/// A CA from files: the key in memory, and the certificates between its leaves and the root.
struct FileCa {
    ca: MemoryCa,
    chain: Vec<Vec<u8>>,
}

impl CaSigner for FileCa {
    fn algorithm(&self) -> CaAlgorithm {
        self.ca.algorithm()
    }

    fn certificate(&self) -> &CaCertificate {
        self.ca.certificate()
    }

    fn chain(&self) -> &[Vec<u8>] {
        &self.chain
    }

    fn sign(&self, tbs: Vec<u8>) -> CaSignature<'_> {
        self.ca.sign(tbs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::{SignedDuration, Timestamp};

    fn pem(label: &str, der: &[u8]) -> String {
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    fn root(name: &str) -> (MemoryCa, Vec<u8>) {
        // Loading checks no times (the decision does).
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        MemoryCa::generate(
            CaCurve::P256,
            name,
            now - SignedDuration::from_hours(1),
            now + SignedDuration::from_hours(24 * 30),
        )
        .unwrap()
    }

    fn files(dir: &Path, cert: &str, key: &str, bundle: Option<&str>) -> CaFiles {
        std::fs::write(dir.join("tls.crt"), cert).unwrap();
        std::fs::write(dir.join("tls.key"), key).unwrap();
        if let Some(bundle) = bundle {
            std::fs::write(dir.join("old.crt"), bundle).unwrap();
        }
        CaFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            bundle: bundle.map(|_| dir.join("old.crt")),
        }
    }

    /// A root and its PKCS#8 key load as a CA that is its own trust anchor; a previous root
    /// from the bundle is published after it.
    #[test]
    fn a_root_signs_and_the_bundle_adds_roots() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, pkcs8) = root("pod CA");
        let (old, _) = root("old pod CA");
        let set = files(
            dir.path(),
            &pem("CERTIFICATE", ca.certificate().der()),
            &pem("PRIVATE KEY", &pkcs8),
            Some(&pem("CERTIFICATE", old.certificate().der())),
        )
        .load()
        .unwrap();
        let signing = set.signing.as_ref().unwrap();
        assert_eq!(signing.certificate(), ca.certificate());
        assert!(signing.chain().is_empty());
        assert_eq!(
            set.trusted,
            vec![ca.certificate().clone(), old.certificate().clone()]
        );
    }

    /// openssl's default EC key form (SEC1) loads too.
    #[test]
    fn a_sec1_key_loads() {
        use aws_lc_rs::encoding::AsDer;
        let dir = tempfile::tempdir().unwrap();
        let (ca, pkcs8) = root("pod CA");
        let key = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            &pkcs8,
        )
        .unwrap();
        let sec1 = key.private_key().as_der().unwrap();
        let set = files(
            dir.path(),
            &pem("CERTIFICATE", ca.certificate().der()),
            &pem("EC PRIVATE KEY", sec1.as_ref()),
            None,
        )
        .load()
        .unwrap();
        assert!(set.signing.is_ok());
    }

    /// Each way the files can be wrong is refused with the file named, never the key's bytes.
    #[test]
    fn files_that_do_not_fit_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, pkcs8) = root("pod CA");
        let (_, other_key) = root("another CA");
        let cert = pem("CERTIFICATE", ca.certificate().der());
        let key = pem("PRIVATE KEY", &pkcs8);
        let wrong_key = files(dir.path(), &cert, &pem("PRIVATE KEY", &other_key), None)
            .load()
            .unwrap_err();
        assert!(wrong_key.contains("is not the key of"), "{wrong_key}");
        assert!(!wrong_key.contains(&key), "{wrong_key}");
        let no_cert = files(dir.path(), "nothing here\n", &key, None)
            .load()
            .unwrap_err();
        assert!(no_cert.contains("no CERTIFICATE"), "{no_cert}");
        let no_key = files(dir.path(), &cert, "", None).load().unwrap_err();
        assert!(no_key.contains("tls.key"), "{no_key}");
        let missing = CaFiles {
            cert: dir.path().join("absent.crt"),
            key: dir.path().join("tls.key"),
            bundle: None,
        }
        .load()
        .unwrap_err();
        assert!(missing.contains("cannot read") && missing.contains("absent.crt"));
    }
}
