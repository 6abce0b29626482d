//! The requested key: the one thing of a request that reaches the certificate.
//!
//! From a 1.36 `stubPKCS10Request` only the SubjectPublicKeyInfo is read: the walk stops at it,
//! so the request's subject, SANs, attributes and extensions are never even parsed (kube-apiserver
//! accepts stub requests carrying `CN=evil` or a URI SAN naming another service account; see
//! the crate's docs). From a 1.35 PCR, `pkixPublicKey` is that SPKI already. kube-apiserver
//! verified the request's self-signature or the proof of possession at create, and its key
//! type, so neither is checked again here.
//!
//! The SPKI is kept byte for byte: the leaf carries exactly the bytes the kubelet sent, which
//! is what kube-apiserver's "issued to the requested public key" rule compares with.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::der;

/// `rsaEncryption` (1.2.840.113549.1.1.1).
const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// `id-ecPublicKey` (1.2.840.10045.2.1).
const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// `prime256v1` (1.2.840.10045.3.1.7).
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// `secp384r1` (1.3.132.0.34).
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
/// `secp521r1` (1.3.132.0.35).
const OID_P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];
/// `id-Ed25519` (1.3.101.112).
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];

/// The key types of a pod's `podCertificate` source (`keyType`), as kube names them. The
/// wire names are the serde names, so a policy lists them as a pod spec does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KeyType {
    /// RSA with a 3072-bit modulus.
    #[serde(rename = "RSA3072")]
    Rsa3072,
    /// RSA with a 4096-bit modulus.
    #[serde(rename = "RSA4096")]
    Rsa4096,
    /// ECDSA on P-256.
    #[serde(rename = "ECDSAP256")]
    EcdsaP256,
    /// ECDSA on P-384.
    #[serde(rename = "ECDSAP384")]
    EcdsaP384,
    /// ECDSA on P-521.
    #[serde(rename = "ECDSAP521")]
    EcdsaP521,
    /// Ed25519.
    #[serde(rename = "ED25519")]
    Ed25519,
}

impl KeyType {
    /// Every key type kube-apiserver v1.36 accepts, in kube's order.
    pub const ALL: [KeyType; 6] = [
        KeyType::Rsa3072,
        KeyType::Rsa4096,
        KeyType::EcdsaP256,
        KeyType::EcdsaP384,
        KeyType::EcdsaP521,
        KeyType::Ed25519,
    ];

    /// kube's name (`ECDSAP256`).
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Rsa3072 => "RSA3072",
            KeyType::Rsa4096 => "RSA4096",
            KeyType::EcdsaP256 => "ECDSAP256",
            KeyType::EcdsaP384 => "ECDSAP384",
            KeyType::EcdsaP521 => "ECDSAP521",
            KeyType::Ed25519 => "ED25519",
        }
    }

    /// Whether the key is RSA (it may then also encipher keys, `keyEncipherment`).
    pub fn is_rsa(self) -> bool {
        matches!(self, KeyType::Rsa3072 | KeyType::Rsa4096)
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a key is, when it is none of [`KeyType`]: enough for a message that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OtherKey {
    /// RSA with another modulus size (in bits), e.g. 2048.
    Rsa {
        /// The modulus size in bits.
        bits: usize,
    },
    /// ECDSA on another curve, named by its OID's dotted form.
    EcCurve {
        /// The curve's OID, dotted.
        curve: String,
    },
    /// Another algorithm, named by its OID's dotted form.
    Algorithm {
        /// The algorithm's OID, dotted.
        oid: String,
    },
}

impl fmt::Display for OtherKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtherKey::Rsa { bits } => write!(f, "an RSA key with a {bits}-bit modulus"),
            OtherKey::EcCurve { curve } => write!(f, "an elliptic-curve key on curve {curve}"),
            OtherKey::Algorithm { oid } => write!(f, "a key of algorithm {oid}"),
        }
    }
}

/// Why a request's key material is unusable (the decision denies it, `InvalidKeyMaterial`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// `stubPKCS10Request` is not a DER PKCS#10 request (as far as its key).
    #[error("spec.stubPKCS10Request is not a DER PKCS#10 certification request")]
    NotACsr,
    /// The SubjectPublicKeyInfo does not parse.
    #[error("the {field} is not a DER SubjectPublicKeyInfo")]
    NotAnSpki {
        /// Where the key came from (`spec.pkixPublicKey`, or the request's key).
        field: &'static str,
    },
}

/// The requested public key: its SubjectPublicKeyInfo as sent, and what it is.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestedKey {
    spki: Vec<u8>,
    kind: Result<KeyType, OtherKey>,
}

impl fmt::Debug for RequestedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestedKey")
            .field("kind", &self.kind)
            .field("spki_sha256", &self.spki_sha256_hex())
            .finish()
    }
}

impl RequestedKey {
    /// The key of a DER PKCS#10 request: its SubjectPublicKeyInfo, nothing else read.
    pub fn from_csr(csr: &[u8]) -> Result<Self, KeyError> {
        let request = der::expect(csr, der::SEQUENCE).ok_or(KeyError::NotACsr)?;
        let info = der::expect(request.contents, der::SEQUENCE).ok_or(KeyError::NotACsr)?;
        let version = der::expect(info.contents, der::INTEGER).ok_or(KeyError::NotACsr)?;
        let subject = der::expect(version.rest, der::SEQUENCE).ok_or(KeyError::NotACsr)?;
        let spki = der::expect(subject.rest, der::SEQUENCE).ok_or(KeyError::NotACsr)?;
        Self::from_spki_field(spki.whole, "key of spec.stubPKCS10Request")
    }

    /// A DER SubjectPublicKeyInfo (a 1.35 PCR's `pkixPublicKey`).
    pub fn from_spki(spki: &[u8]) -> Result<Self, KeyError> {
        Self::from_spki_field(spki, "spec.pkixPublicKey")
    }

    fn from_spki_field(spki: &[u8], field: &'static str) -> Result<Self, KeyError> {
        let bad = KeyError::NotAnSpki { field };
        let outer = der::read(spki)
            .filter(|t| t.tag == der::SEQUENCE && t.rest.is_empty())
            .ok_or(bad.clone())?;
        let algorithm = der::expect(outer.contents, der::SEQUENCE).ok_or(bad.clone())?;
        let bits = der::read(algorithm.rest)
            .filter(|t| t.tag == der::BIT_STRING && t.rest.is_empty())
            .ok_or(bad.clone())?;
        let oid = der::expect(algorithm.contents, der::OID).ok_or(bad.clone())?;
        let (unused, key) = bits.contents.split_first().ok_or(bad.clone())?;
        if *unused != 0 {
            return Err(bad);
        }
        let kind = match oid.contents {
            OID_RSA => classify_rsa(key).ok_or(bad)?,
            OID_EC => {
                let curve = der::expect(oid.rest, der::OID).ok_or(bad)?;
                match curve.contents {
                    OID_P256 => Ok(KeyType::EcdsaP256),
                    OID_P384 => Ok(KeyType::EcdsaP384),
                    OID_P521 => Ok(KeyType::EcdsaP521),
                    other => Err(OtherKey::EcCurve {
                        curve: dotted(other),
                    }),
                }
            }
            OID_ED25519 if key.len() == 32 => Ok(KeyType::Ed25519),
            OID_ED25519 => return Err(bad),
            other => Err(OtherKey::Algorithm { oid: dotted(other) }),
        };
        Ok(RequestedKey {
            spki: spki.to_vec(),
            kind,
        })
    }

    /// The SubjectPublicKeyInfo, as the request carried it.
    pub fn spki(&self) -> &[u8] {
        &self.spki
    }

    /// The key's type, or what it is when kube has no name for it.
    pub fn key_type(&self) -> Result<KeyType, &OtherKey> {
        self.kind.as_ref().copied()
    }

    /// Whether `spki` holds the same public key, compared as kube-apiserver does (the parsed
    /// key, not the bytes: an RSA modulus with a leading zero more is the same key).
    pub fn is_same_key_as(&self, spki: &[u8]) -> bool {
        match (canonical(&self.spki), canonical(spki)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// SHA-256 of the SubjectPublicKeyInfo, lowercase hex: how audit and logs name the key.
    pub fn spki_sha256_hex(&self) -> String {
        hex(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &self.spki).as_ref())
    }
}

/// A key as (algorithm, curve, key) with RSA's integers without leading zeros: equal for
/// equal keys whatever their encoding's slack.
fn canonical(spki: &[u8]) -> Option<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let outer = der::expect(spki, der::SEQUENCE)?;
    let algorithm = der::expect(outer.contents, der::SEQUENCE)?;
    let oid = der::expect(algorithm.contents, der::OID)?;
    let bits = der::expect(algorithm.rest, der::BIT_STRING)?;
    let key = bits.contents.get(1..)?;
    let curve = match oid.contents {
        OID_EC => der::expect(oid.rest, der::OID)?.contents.to_vec(),
        _ => Vec::new(),
    };
    let key = if oid.contents == OID_RSA {
        let rsa = der::expect(key, der::SEQUENCE)?;
        let n = der::expect(rsa.contents, der::INTEGER)?;
        let e = der::expect(n.rest, der::INTEGER)?;
        let trim = |v: &[u8]| {
            v.iter()
                .skip_while(|&&b| b == 0)
                .copied()
                .collect::<Vec<u8>>()
        };
        [trim(n.contents), vec![0xff], trim(e.contents)].concat()
    } else {
        key.to_vec()
    };
    Some((oid.contents.to_vec(), curve, key))
}

/// An RSA key's class by modulus size; `None` if the RSAPublicKey does not parse.
fn classify_rsa(key: &[u8]) -> Option<Result<KeyType, OtherKey>> {
    let rsa = der::read(key).filter(|t| t.tag == der::SEQUENCE && t.rest.is_empty())?;
    let modulus = der::expect(rsa.contents, der::INTEGER)?;
    der::expect(modulus.rest, der::INTEGER)?;
    let skip = modulus.contents.iter().take_while(|&&b| b == 0).count();
    let magnitude = modulus.contents.get(skip..)?;
    let bits = match magnitude.first() {
        Some(&top) => magnitude.len() * 8 - top.leading_zeros() as usize,
        None => 0,
    };
    Some(match bits {
        3072 => Ok(KeyType::Rsa3072),
        4096 => Ok(KeyType::Rsa4096),
        bits => Err(OtherKey::Rsa { bits }),
    })
}

/// An OID's contents in dotted form (`1.2.840.10045.3.1.7`).
fn dotted(oid: &[u8]) -> String {
    let mut arcs: Vec<u128> = Vec::new();
    let mut value: u128 = 0;
    for &b in oid {
        value = (value << 7) | u128::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
        if value > u128::MAX >> 8 {
            return "(unreadable OID)".to_owned();
        }
    }
    arcs.iter()
        .map(u128::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// Lowercase hex. Written digit by digit into one string: every issued certificate has three
/// of these (serial, SPKI digest, CA key ID), and a `format!` per byte was 3 % of a decision.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let digit = |nibble: u8| char::from(if nibble < 10 { b'0' } else { b'a' - 10 } + nibble);
    let mut text = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        text.push(digit(byte >> 4));
        text.push(digit(byte & 0x0f));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(
            hex(&[0x00, 0x09, 0x0a, 0x0f, 0x10, 0x7f, 0xa5, 0xff]),
            "00090a0f107fa5ff"
        );
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex(&every), expected);
    }

    #[test]
    fn oids_read_in_dotted_form() {
        assert_eq!(dotted(OID_P256), "1.2.840.10045.3.1.7");
        assert_eq!(dotted(OID_ED25519), "1.3.101.112");
        assert_eq!(dotted(&[0x2b, 0x81, 0x04, 0x00, 0x0a]), "1.3.132.0.10");
    }

    #[test]
    fn garbage_is_neither_a_request_nor_a_key() {
        assert_eq!(RequestedKey::from_csr(b"not DER"), Err(KeyError::NotACsr));
        assert_eq!(
            RequestedKey::from_spki(&[0x30, 0x00]),
            Err(KeyError::NotAnSpki {
                field: "spec.pkixPublicKey"
            })
        );
    }
}
