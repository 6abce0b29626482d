//! Reading keys from PEM, with kube-apiserver's rules for its two key flags.
//!
//! - `--service-account-key-file`: every key in the file verifies (private keys count as their
//!   public half): `PUBLIC KEY` (SPKI), `CERTIFICATE` (its key), `RSA PRIVATE KEY` (PKCS#1),
//!   `EC PRIVATE KEY` (SEC1) and `PRIVATE KEY` (PKCS#8), several per file. Blocks of other
//!   kinds (`EC PARAMETERS`, …) are skipped, as kube-apiserver skips them.
//! - `--service-account-signing-key-file`: the first private key in the file signs.
//!
//! One difference: kube-apiserver silently skips a key block it cannot parse; warrant reports
//! it, because a key that silently disappears makes every token it signed fail later.

use rustls_pki_types::pem::{self, PemObject, SectionKind};

use crate::der;
use crate::error::KeyError;
use crate::keys::{SigningKey, VerifyingKey};

/// A key found in PEM text.
#[derive(Debug, Clone)]
pub enum PemKey {
    /// A private key (which can also verify, through its public half).
    Private(SigningKey),
    /// A public key or a certificate's key.
    Public(VerifyingKey),
}

impl PemKey {
    /// The public key, whichever kind this is.
    pub fn verifying_key(&self) -> &VerifyingKey {
        match self {
            PemKey::Private(k) => k.verifying_key(),
            PemKey::Public(k) => k,
        }
    }
}

/// Every key in `data`, in file order.
pub fn parse_pem_keys(data: &[u8]) -> Result<Vec<PemKey>, KeyError> {
    if contains(data, b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || contains(data, b"Proc-Type: 4,ENCRYPTED")
    {
        return Err(KeyError::Encrypted);
    }
    let mut keys = Vec::new();
    for section in <(SectionKind, Vec<u8>) as PemObject>::pem_slice_iter(data) {
        let (kind, der) = section.map_err(|e| KeyError::Pem(describe(&e)))?;
        let key = match kind {
            SectionKind::PublicKey => PemKey::Public(VerifyingKey::from_spki_der(&der)?),
            SectionKind::Certificate => {
                let spki = der::certificate_spki(&der).ok_or(KeyError::Invalid {
                    label: "CERTIFICATE",
                    reason: "not a DER X.509 certificate",
                })?;
                PemKey::Public(VerifyingKey::from_spki_der(spki)?)
            }
            SectionKind::RsaPrivateKey => PemKey::Private(SigningKey::from_pkcs1_der(&der)?),
            SectionKind::EcPrivateKey => PemKey::Private(SigningKey::from_sec1_der(&der)?),
            SectionKind::PrivateKey => PemKey::Private(SigningKey::from_pkcs8_der(&der)?),
            _ => continue,
        };
        keys.push(key);
    }
    Ok(keys)
}

/// The keys of a `--service-account-key-file`: every key, as a verifying key.
pub fn verifying_keys_from_pem(data: &[u8]) -> Result<Vec<VerifyingKey>, KeyError> {
    let keys: Vec<VerifyingKey> = parse_pem_keys(data)?
        .iter()
        .map(|k| k.verifying_key().clone())
        .collect();
    if keys.is_empty() {
        return Err(KeyError::NoPublicKeys);
    }
    Ok(keys)
}

/// The key of a `--service-account-signing-key-file`: its first private key.
pub fn signing_key_from_pem(data: &[u8]) -> Result<SigningKey, KeyError> {
    parse_pem_keys(data)?
        .into_iter()
        .find_map(|k| match k {
            PemKey::Private(k) => Some(k),
            PemKey::Public(_) => None,
        })
        .ok_or(KeyError::NoPrivateKey)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Describes a PEM error without echoing the file's contents (which may be a private key).
fn describe(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a BEGIN line has no matching END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed".into(),
        pem::Error::Base64Decode(_) => "a block's base64 does not decode".into(),
        _ => "the text is not valid PEM".into(),
    }
}
