//! A root CA whose key is one of warrant's signing keys ([`KeyCa`]), in memory or held in a
//! PKCS#11 token or KMS: what `serve --pod-certificate-ca-key-dir` (or `-key-secret`) signs
//! pod certificates with. Each key is a root, which every replica makes alike from the key and
//! its publication time (see `RootTemplate`), so the certificate itself is never stored.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use warrant_token::{Algorithm, KeyError, SigningKey};

use crate::certificate::{
    CaAlgorithm, CaCertificate, CaSignature, CaSigner, RootTemplate, SignError,
    ecdsa_signature_to_der,
};

/// The algorithm a CA key of `algorithm` writes into certificates; `None` for one X.509 signing
/// does not take here (ES512: kube and most TLS stacks refuse P-521 roots).
fn ca_algorithm(algorithm: Algorithm) -> Option<CaAlgorithm> {
    match algorithm {
        Algorithm::ES256 => Some(CaAlgorithm::EcdsaP256Sha256),
        Algorithm::ES384 => Some(CaAlgorithm::EcdsaP384Sha384),
        Algorithm::RS256 => Some(CaAlgorithm::RsaPkcs1Sha256),
        Algorithm::ES512 => None,
    }
}

/// A root CA whose key is a managed key, wherever it is held.
pub struct KeyCa {
    key: SigningKey,
    algorithm: CaAlgorithm,
    certificate: CaCertificate,
}

impl std::fmt::Debug for KeyCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCa")
            .field("kid", &self.key.kid())
            .field("certificate", &self.certificate)
            .finish()
    }
}

impl KeyCa {
    /// Makes `key`'s root: subject and issuer `CN=warrant pod CA <kid>`, valid from
    /// `published_at` for `validity_seconds`, self-signed by the key where it is held (one
    /// signature). The error names the key.
    pub async fn root(
        key: &SigningKey,
        published_at: Timestamp,
        validity_seconds: i64,
    ) -> Result<KeyCa, String> {
        let kid = key.kid();
        let algorithm = ca_algorithm(key.algorithm()).ok_or_else(|| {
            format!(
                "CA key {kid} is {}, which no pod certificate CA signs with (ES256, ES384 or RS256)",
                key.algorithm().name()
            )
        })?;
        let not_before = published_at;
        let not_after = not_before.saturating_add(SignedDuration::from_secs(validity_seconds));
        let not_after = not_after.map_err(|e| format!("CA key {kid}: {e}"))?;
        let template = RootTemplate::new(
            algorithm,
            key.verifying_key().spki_der(),
            &format!("warrant pod CA {kid}"),
            not_before,
            not_after,
        )
        .map_err(|e| format!("CA key {kid}: {e}"))?;
        let signature = signature(key, algorithm, template.tbs().to_vec())
            .await
            .map_err(|e| format!("CA key {kid} could not sign its root: {e}"))?;
        let certificate = template
            .finish(&signature)
            .map_err(|e| format!("CA key {kid}: {e}"))?;
        Ok(KeyCa {
            key: key.clone(),
            algorithm,
            certificate,
        })
    }

    /// `key` as the CA of `certificate`, a root made for it before (by [`root`](Self::root), in
    /// this process or another): no signature is made. Refused, naming the key, when the
    /// certificate does not hold the key or the key signs no X.509.
    pub fn with_root(key: SigningKey, certificate: CaCertificate) -> Result<KeyCa, String> {
        use x509_parser::prelude::{FromDer as _, X509Certificate};
        let kid = key.kid().to_owned();
        let algorithm = ca_algorithm(key.algorithm())
            .ok_or_else(|| format!("CA key {kid} is {}", key.algorithm().name()))?;
        let (_, parsed) = X509Certificate::from_der(certificate.der())
            .map_err(|e| format!("CA key {kid}: its root does not parse: {e}"))?;
        if parsed.public_key().raw != key.verifying_key().spki_der() {
            return Err(format!("CA key {kid}: the root holds another key"));
        }
        Ok(KeyCa {
            key,
            algorithm,
            certificate,
        })
    }

    /// The CA's key.
    pub fn key(&self) -> &SigningKey {
        &self.key
    }

    /// The key's ID.
    pub fn kid(&self) -> &str {
        self.key.kid()
    }
}

/// `message` signed by `key`, in X.509's encoding (ECDSA as DER).
async fn signature(
    key: &SigningKey,
    algorithm: CaAlgorithm,
    message: Vec<u8>,
) -> Result<Vec<u8>, SignError> {
    let raw = key
        .sign_message(message)
        .await
        .map_err(|error| match error {
            KeyError::Remote(remote) if remote.unavailable => {
                SignError::Unavailable(Arc::new(remote))
            }
            other => SignError::Refused(Arc::new(other)),
        })?;
    match algorithm {
        CaAlgorithm::EcdsaP256Sha256 | CaAlgorithm::EcdsaP384Sha384 => ecdsa_signature_to_der(&raw)
            .ok_or_else(|| {
                SignError::Refused(Arc::new(std::io::Error::other(
                    "the key's holder returned an ECDSA signature of odd length",
                )))
            }),
        CaAlgorithm::RsaPkcs1Sha256 | CaAlgorithm::Ed25519 => Ok(raw),
    }
}

impl CaSigner for KeyCa {
    fn algorithm(&self) -> CaAlgorithm {
        self.algorithm
    }

    fn certificate(&self) -> &CaCertificate {
        &self.certificate
    }

    fn sign(&self, tbs: Vec<u8>) -> CaSignature<'_> {
        Box::pin(signature(&self.key, self.algorithm, tbs))
    }

    fn unavailable(&self) -> Option<String> {
        self.key
            .remote_key()
            .and_then(|remote| remote.unavailable())
    }
}
