//! The leaf certificate, and the CA that signs it.
//!
//! A leaf is assembled here, field by field, rather than by a certificate builder: its key is
//! the request's SubjectPublicKeyInfo byte for byte (kube-apiserver compares them), its
//! subject is empty, its SAN is critical (RFC 5280 §4.2.1.6 for an empty subject) and holds
//! one SPIFFE ID and the DNS names the decision found (none unless the policy asks), and the signature comes from a [`CaSigner`], which may be a key in memory,
//! in a file, in a Secret, in an HSM or in a KMS: the core never knows which.
//!
//! The leaf: version 3, a random positive 128-bit serial, issuer = the CA's subject,
//! `basicConstraints` CA=false (critical), `keyUsage` digitalSignature (plus keyEncipherment
//! for RSA keys, which TLS 1.2's RSA key exchange uses) (critical), `extKeyUsage` clientAuth
//! and serverAuth, the SAN, and `authorityKeyIdentifier` when the CA has a subject key ID.
//! Every signature is verified against the CA's key before the leaf leaves this module: a
//! holder that returns a wrong or wrongly encoded signature fails here, not in a pod.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use aws_lc_rs::rand::SecureRandom as _;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair as _};
use jiff::Timestamp;
use x509_parser::prelude::{FromDer, ParsedExtension, X509Certificate};

use crate::der;
use crate::key::KeyType;

const OID_ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const OID_ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
const OID_RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
const OID_ED25519: &[u8] = &[0x2b, 0x65, 0x70];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
const OID_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f];
const OID_EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const OID_SUBJECT_KEY_ID: &[u8] = &[0x55, 0x1d, 0x0e];
const OID_AUTHORITY_KEY_ID: &[u8] = &[0x55, 0x1d, 0x23];
const OID_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
const OID_CLIENT_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// How a CA signs: the signature algorithm written into its certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaAlgorithm {
    /// ECDSA P-256 with SHA-256 (`ecdsa-with-SHA256`).
    EcdsaP256Sha256,
    /// ECDSA P-384 with SHA-384 (`ecdsa-with-SHA384`).
    EcdsaP384Sha384,
    /// RSA PKCS#1 v1.5 with SHA-256 (`sha256WithRSAEncryption`).
    RsaPkcs1Sha256,
    /// Ed25519.
    Ed25519,
}

impl CaAlgorithm {
    /// The DER AlgorithmIdentifier.
    fn identifier(self) -> Vec<u8> {
        let oid = |o: &[u8]| der::element(der::OID, o);
        match self {
            CaAlgorithm::RsaPkcs1Sha256 => {
                der::sequence(&[&oid(OID_RSA_SHA256), &der::element(der::NULL, &[])])
            }
            CaAlgorithm::EcdsaP256Sha256 | CaAlgorithm::EcdsaP384Sha384 | CaAlgorithm::Ed25519 => {
                der::sequence(&[&oid(self.oid())])
            }
        }
    }

    fn oid(self) -> &'static [u8] {
        match self {
            CaAlgorithm::EcdsaP256Sha256 => OID_ECDSA_SHA256,
            CaAlgorithm::EcdsaP384Sha384 => OID_ECDSA_SHA384,
            CaAlgorithm::RsaPkcs1Sha256 => OID_RSA_SHA256,
            CaAlgorithm::Ed25519 => OID_ED25519,
        }
    }

    fn verification(self) -> &'static dyn signature::VerificationAlgorithm {
        match self {
            CaAlgorithm::EcdsaP256Sha256 => &signature::ECDSA_P256_SHA256_ASN1,
            CaAlgorithm::EcdsaP384Sha384 => &signature::ECDSA_P384_SHA384_ASN1,
            CaAlgorithm::RsaPkcs1Sha256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            CaAlgorithm::Ed25519 => &signature::ED25519,
        }
    }
}

/// Why a CA did not sign.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SignError {
    /// The key's holder cannot sign now (unreachable, sessions reopening, throttled, key
    /// disabled by an operator): a later attempt may succeed. The PCR is requeued.
    #[error("the CA key cannot sign now: {0}")]
    Unavailable(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The holder refused this signature for good (e.g. the message is too large for it).
    /// The PCR fails. A holder reports a key-wide condition an operator can mend as
    /// [`SignError::Unavailable`] instead: a Failed PCR is never asked again.
    #[error("the CA key refused to sign: {0}")]
    Refused(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

/// A future a [`CaSigner`] returns: the signature, in X.509's encoding.
pub type CaSignature<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, SignError>> + Send + 'a>>;

/// A CA key with its certificate: what signs leaves. Implementations hold the key (in memory,
/// a file, a Secret, an HSM, a KMS); the core only asks for signatures. `sign` is async
/// because a held key signs on a device or over a network: an implementation that blocks runs
/// the blocking part on a pool of its own (as `warrant_token::RemoteKey`s do), never on the
/// caller's runtime worker. A key in memory returns a ready future.
pub trait CaSigner: Send + Sync {
    /// The signature algorithm of the CA's key.
    fn algorithm(&self) -> CaAlgorithm;
    /// The CA's certificate, parsed once.
    fn certificate(&self) -> &CaCertificate;
    /// The certificates a leaf's chain carries after the leaf, DER, nearest first: this CA's
    /// own certificate when it is an intermediate, then its issuers up to (not including) the
    /// root. Empty for a root CA (the default).
    fn chain(&self) -> &[Vec<u8>] {
        &[]
    }
    /// Signs a DER TBSCertificate; the signature in X.509's encoding (for ECDSA a DER
    /// `Ecdsa-Sig-Value`: holders that return raw `r || s` convert with
    /// [`ecdsa_signature_to_der`]).
    fn sign(&self, tbs: Vec<u8>) -> CaSignature<'_>;
    /// Why the CA's key cannot sign now although it is the CA in force (its holder, a PKCS#11
    /// token or KMS, out of reach), or `None`: a cheap read of what the holder last saw, never
    /// a call to it. The signer is not ready meanwhile, so that an operator and the probes see
    /// why PCRs wait. `None` for a key in memory (the default).
    fn unavailable(&self) -> Option<String> {
        None
    }
}

impl fmt::Debug for dyn CaSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CaSigner({:?})", self.certificate())
    }
}

/// Why a CA certificate is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaError {
    /// It does not parse as X.509.
    #[error("the CA certificate does not parse as X.509")]
    Parse,
    /// It is not a CA (no basicConstraints CA=true).
    #[error("the CA certificate is not a CA certificate (basicConstraints CA=true is missing)")]
    NotACa,
    /// A key could not be generated or read.
    #[error("the CA key could not be made: {0}")]
    Key(String),
}

/// The parts of a CA certificate that signing and checking leaves need.
#[derive(Clone, PartialEq, Eq)]
pub struct CaCertificate {
    der: Vec<u8>,
    subject: Vec<u8>,
    subject_key_id: Option<Vec<u8>>,
    public_key: Vec<u8>,
    not_before: Timestamp,
    not_after: Timestamp,
}

impl fmt::Debug for CaCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaCertificate")
            .field("key_id", &self.key_id())
            .field("not_after", &self.not_after)
            .finish()
    }
}

impl CaCertificate {
    /// Reads a CA certificate (DER).
    pub fn from_der(der: &[u8]) -> Result<Self, CaError> {
        let cert = match X509Certificate::from_der(der) {
            Ok(([], cert)) => cert,
            _ => return Err(CaError::Parse),
        };
        match cert.basic_constraints() {
            Ok(Some(bc)) if bc.value.ca => {}
            _ => return Err(CaError::NotACa),
        }
        let subject_key_id = cert
            .iter_extensions()
            .find_map(|e| match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
                _ => None,
            });
        let time = |t: i64| Timestamp::from_second(t).map_err(|_| CaError::Parse);
        Ok(CaCertificate {
            der: der.to_vec(),
            subject: cert.subject().as_raw().to_vec(),
            subject_key_id,
            public_key: cert.public_key().subject_public_key.data.to_vec(),
            not_before: time(cert.validity().not_before.timestamp())?,
            not_after: time(cert.validity().not_after.timestamp())?,
        })
    }

    /// The certificate, DER.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// The start of its validity.
    pub fn not_before(&self) -> Timestamp {
        self.not_before
    }

    /// The end of its validity: no leaf it signs may outlive it.
    pub fn not_after(&self) -> Timestamp {
        self.not_after
    }

    /// How audit and messages name the CA: the hex of its subject key ID, or else the
    /// SHA-256 of the certificate.
    pub fn key_id(&self) -> String {
        match &self.subject_key_id {
            Some(id) => crate::key::hex(id),
            None => crate::key::hex(
                aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &self.der).as_ref(),
            ),
        }
    }
}

/// What goes into a leaf besides the CA's part.
#[derive(Debug, Clone)]
pub struct LeafSpec<'a> {
    /// The requested SubjectPublicKeyInfo, as sent.
    pub spki: &'a [u8],
    /// Its type (for the key usage).
    pub key_type: KeyType,
    /// The SPIFFE ID, the one URI SAN.
    pub spiffe_id: &'a str,
    /// DNS names (IA5 text, already checked to be DNS names); written sorted, once each.
    pub dns_names: &'a [String],
    /// notBefore (whole seconds).
    pub not_before: Timestamp,
    /// notAfter (whole seconds).
    pub not_after: Timestamp,
}

/// A signed leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedLeaf {
    /// The leaf, DER.
    pub der: Vec<u8>,
    /// Its serial, lowercase hex (as audit records it).
    pub serial_hex: String,
}

/// Why a leaf was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IssueError {
    /// The CA did not sign.
    #[error(transparent)]
    Sign(#[from] SignError),
    /// The CA's signature does not verify with the CA certificate's key: the holder is broken
    /// (a raw ECDSA signature not converted, the wrong key).
    #[error("the CA's signature does not verify with the CA certificate's key ({key_id})")]
    BadSignature {
        /// The CA's key ID.
        key_id: String,
    },
    /// No randomness for the serial.
    #[error("no randomness for a serial number")]
    Random,
}

/// Assembles, signs and checks one leaf.
pub async fn sign_leaf(ca: &dyn CaSigner, leaf: &LeafSpec<'_>) -> Result<SignedLeaf, IssueError> {
    let mut serial = [0u8; 16];
    aws_lc_rs::rand::SystemRandom::new()
        .fill(&mut serial)
        .map_err(|_| IssueError::Random)?;
    // Positive, non-zero and always 16 bytes: top bit clear, next bit set.
    serial[0] = (serial[0] & 0x7f) | 0x40;
    let issuer = ca.certificate();
    let key_usage: &[u8] = if leaf.key_type.is_rsa() {
        &[0x03, 0x02, 0x05, 0xa0] // digitalSignature, keyEncipherment
    } else {
        &[0x03, 0x02, 0x07, 0x80] // digitalSignature
    };
    let eku = der::sequence(&[
        &der::element(der::OID, OID_CLIENT_AUTH),
        &der::element(der::OID, OID_SERVER_AUTH),
    ]);
    // GeneralNames: uniformResourceIdentifier [6], then each dNSName [2], both IA5String.
    let mut dns_names: Vec<&str> = leaf.dns_names.iter().map(String::as_str).collect();
    dns_names.sort_unstable();
    dns_names.dedup();
    let mut names = der::element(0x86, leaf.spiffe_id.as_bytes());
    for name in dns_names {
        der::write(&mut names, 0x82, name.as_bytes());
    }
    let san = der::element(der::SEQUENCE, &names);
    let mut extensions = vec![
        extension(OID_BASIC_CONSTRAINTS, true, &der::sequence(&[])),
        extension(OID_KEY_USAGE, true, key_usage),
        extension(OID_EXT_KEY_USAGE, false, &eku),
        extension(OID_SUBJECT_ALT_NAME, true, &san),
    ];
    if let Some(id) = &issuer.subject_key_id {
        let aki = der::sequence(&[&der::element(0x80, id)]);
        extensions.push(extension(OID_AUTHORITY_KEY_ID, false, &aki));
    }
    let tbs = tbs_certificate(TbsParts {
        serial: &serial,
        algorithm: ca.algorithm(),
        issuer: &issuer.subject,
        not_before: leaf.not_before,
        not_after: leaf.not_after,
        subject: &der::sequence(&[]),
        spki: leaf.spki,
        extensions: &extensions,
    });
    let signature = ca.sign(tbs.clone()).await?;
    let verifier = signature::UnparsedPublicKey::new(
        ca.algorithm().verification(),
        issuer.public_key.as_slice(),
    );
    if verifier.verify(&tbs, &signature).is_err() {
        return Err(IssueError::BadSignature {
            key_id: issuer.key_id(),
        });
    }
    Ok(SignedLeaf {
        der: certificate(&tbs, ca.algorithm(), &signature),
        serial_hex: crate::key::hex(&serial),
    })
}

struct TbsParts<'a> {
    serial: &'a [u8],
    algorithm: CaAlgorithm,
    issuer: &'a [u8],
    not_before: Timestamp,
    not_after: Timestamp,
    subject: &'a [u8],
    spki: &'a [u8],
    extensions: &'a [Vec<u8>],
}

fn tbs_certificate(p: TbsParts<'_>) -> Vec<u8> {
    let version = der::element(0xa0, &der::element(der::INTEGER, &[2]));
    let validity = der::sequence(&[&der::time(p.not_before), &der::time(p.not_after)]);
    let extensions = der::element(0xa3, &der::element(der::SEQUENCE, &p.extensions.concat()));
    der::sequence(&[
        &version,
        &der::unsigned_integer(p.serial),
        &p.algorithm.identifier(),
        p.issuer,
        &validity,
        p.subject,
        p.spki,
        &extensions,
    ])
}

fn certificate(tbs: &[u8], algorithm: CaAlgorithm, signature: &[u8]) -> Vec<u8> {
    der::sequence(&[tbs, &algorithm.identifier(), &der::bit_string(signature)])
}

fn extension(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let oid = der::element(der::OID, oid);
    let value = der::element(der::OCTET_STRING, value);
    if critical {
        der::sequence(&[&oid, &der::element(der::BOOLEAN, &[0xff]), &value])
    } else {
        der::sequence(&[&oid, &value])
    }
}

/// The unsigned part of a self-signed certificate for a key held anywhere (memory, a Secret, an
/// HSM, a KMS): subject and issuer `CN=<common name>`, a serial and subject key ID derived
/// from the key (the leftmost 160 bits of the SHA-256 of its public key, RFC 7093 §2 method
/// 1), and either a CA's extensions ([`RootTemplate::new`]: a pod certificate CA's root) or a
/// signing key's ([`RootTemplate::signing_key`]: a token key's certificate for a JWKS's
/// `x5c`). The same inputs always give the same bytes, so replicas holding one key make
/// certificates that differ only in the signature's randomness (none for RSA's PKCS#1 v1.5,
/// see [`equivalent_roots`]).
#[derive(Debug, Clone)]
pub struct RootTemplate {
    tbs: Vec<u8>,
    algorithm: CaAlgorithm,
    /// The subjectPublicKey bits, which verify the self-signature.
    public_key: Vec<u8>,
}

impl RootTemplate {
    /// A root CA's template for the key `spki` (a DER SubjectPublicKeyInfo) signing with
    /// `algorithm`, valid from `not_before` to `not_after` (whole seconds): CA=true (critical),
    /// keyCertSign and cRLSign (critical).
    pub fn new(
        algorithm: CaAlgorithm,
        spki: &[u8],
        common_name: &str,
        not_before: Timestamp,
        not_after: Timestamp,
    ) -> Result<Self, CaError> {
        Self::build(algorithm, spki, common_name, (not_before, not_after), true)
    }

    /// A signing key's template, as [`new`](Self::new) but CA=false (critical) and
    /// digitalSignature (critical): a certificate that carries the key, for relying parties
    /// that want one (a JWKS's `x5c`), and signs nothing but what the key signs.
    pub fn signing_key(
        algorithm: CaAlgorithm,
        spki: &[u8],
        common_name: &str,
        not_before: Timestamp,
        not_after: Timestamp,
    ) -> Result<Self, CaError> {
        Self::build(algorithm, spki, common_name, (not_before, not_after), false)
    }

    fn build(
        algorithm: CaAlgorithm,
        spki: &[u8],
        common_name: &str,
        (not_before, not_after): (Timestamp, Timestamp),
        ca: bool,
    ) -> Result<Self, CaError> {
        let public_key = match x509_parser::x509::SubjectPublicKeyInfo::from_der(spki) {
            Ok(([], info)) => info.subject_public_key.data.to_vec(),
            _ => return Err(CaError::Key("the public key is not a DER SPKI".into())),
        };
        let name = der::sequence(&[&der::element(
            der::SET,
            &der::sequence(&[
                &der::element(der::OID, OID_COMMON_NAME),
                &der::element(der::UTF8_STRING, common_name.as_bytes()),
            ]),
        )]);
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &public_key);
        let key_id = digest.as_ref().get(..20).unwrap_or_default();
        let (constraints, usage): (Vec<u8>, &[u8]) = if ca {
            (
                der::sequence(&[&der::element(der::BOOLEAN, &[0xff])]),
                &[0x03, 0x02, 0x01, 0x06], // keyCertSign, cRLSign
            )
        } else {
            (der::sequence(&[]), &[0x03, 0x02, 0x07, 0x80]) // digitalSignature
        };
        let extensions = [
            extension(OID_BASIC_CONSTRAINTS, true, &constraints),
            extension(OID_KEY_USAGE, true, usage),
            extension(
                OID_SUBJECT_KEY_ID,
                false,
                &der::element(der::OCTET_STRING, key_id),
            ),
        ];
        let tbs = tbs_certificate(TbsParts {
            serial: key_id.get(..16).unwrap_or_default(),
            algorithm,
            issuer: &name,
            not_before,
            not_after,
            subject: &name,
            spki,
            extensions: &extensions,
        });
        Ok(RootTemplate {
            tbs,
            algorithm,
            public_key,
        })
    }

    /// The DER TBSCertificate, for the key to sign.
    pub fn tbs(&self) -> &[u8] {
        &self.tbs
    }

    /// The root, with the key's signature over [`tbs`](Self::tbs) in X.509's encoding: checked
    /// against the key before it is returned, so a holder's wrong signature never becomes a
    /// trust anchor.
    pub fn finish(&self, signature: &[u8]) -> Result<CaCertificate, CaError> {
        CaCertificate::from_der(&self.finish_der(signature)?)
    }

    /// The certificate (DER), with the key's signature over [`tbs`](Self::tbs) in X.509's
    /// encoding, checked against the key first: what a signing key's template makes.
    pub fn finish_der(&self, signature: &[u8]) -> Result<Vec<u8>, CaError> {
        signature::UnparsedPublicKey::new(self.algorithm.verification(), &self.public_key)
            .verify(&self.tbs, signature)
            .map_err(|_| CaError::Key("the self-signature does not verify with the key".into()))?;
        Ok(certificate(&self.tbs, self.algorithm, signature))
    }
}

/// True when two root certificates are interchangeable for every verifier: the same bytes, or
/// the same TBSCertificate (subject, key, validity, extensions) where both self-signatures
/// verify with that key. Replicas that make the root of one held CA key each sign it
/// themselves ([`RootTemplate`]); a trust bundle holding any of their roots is current.
pub fn equivalent_roots(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let (Ok(([], a)), Ok(([], b))) = (X509Certificate::from_der(a), X509Certificate::from_der(b))
    else {
        return false;
    };
    a.tbs_certificate.as_ref() == b.tbs_certificate.as_ref() && self_signed(&a) && self_signed(&b)
}

/// True when `cert`'s signature verifies with its own key (a root's self-signature).
fn self_signed(cert: &X509Certificate<'_>) -> bool {
    let oid = cert.signature_algorithm.algorithm.as_bytes();
    let algorithm = [
        CaAlgorithm::EcdsaP256Sha256,
        CaAlgorithm::EcdsaP384Sha384,
        CaAlgorithm::RsaPkcs1Sha256,
        CaAlgorithm::Ed25519,
    ]
    .into_iter()
    .find(|a| a.oid() == oid);
    algorithm.is_some_and(|algorithm| {
        signature::UnparsedPublicKey::new(
            algorithm.verification(),
            cert.public_key().subject_public_key.data.as_ref(),
        )
        .verify(cert.tbs_certificate.as_ref(), &cert.signature_value.data)
        .is_ok()
    })
}

/// A raw ECDSA signature (`r || s`, each the curve's size, as PKCS#11 and JWS have it) as the
/// DER `Ecdsa-Sig-Value` X.509 wants; `None` for an empty or odd-length input.
pub fn ecdsa_signature_to_der(raw: &[u8]) -> Option<Vec<u8>> {
    if raw.is_empty() || !raw.len().is_multiple_of(2) {
        return None;
    }
    let (r, s) = raw.split_at(raw.len() / 2);
    Some(der::sequence(&[
        &der::unsigned_integer(r),
        &der::unsigned_integer(s),
    ]))
}

/// A CA whose ECDSA key is in memory: a self-signed root (P-256 or P-384). Tests use it, and a
/// key directory can keep one (its PKCS#8 and certificate) as files.
pub struct MemoryCa {
    key: EcdsaKeyPair,
    algorithm: CaAlgorithm,
    certificate: CaCertificate,
}

impl fmt::Debug for MemoryCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryCa")
            .field("certificate", &self.certificate)
            .finish()
    }
}

/// The curves a [`MemoryCa`] can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaCurve {
    /// P-256, signing with SHA-256.
    P256,
    /// P-384, signing with SHA-384.
    P384,
}

impl CaCurve {
    fn signing(self) -> &'static signature::EcdsaSigningAlgorithm {
        match self {
            CaCurve::P256 => &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
            CaCurve::P384 => &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
        }
    }
}

impl MemoryCa {
    /// A new key and a self-signed root certificate for it: subject `CN=<common_name>`,
    /// CA=true, keyCertSign and cRLSign, valid from `not_before` to `not_after`.
    pub fn generate(
        curve: CaCurve,
        common_name: &str,
        not_before: Timestamp,
        not_after: Timestamp,
    ) -> Result<(Self, Vec<u8>), CaError> {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(curve.signing(), &aws_lc_rs::rand::SystemRandom::new())
                .map_err(|_| CaError::Key("key generation failed".into()))?;
        let key = EcdsaKeyPair::from_pkcs8(curve.signing(), pkcs8.as_ref())
            .map_err(|e| CaError::Key(e.to_string()))?;
        let (algorithm, curve_oid) = match curve {
            CaCurve::P256 => (CaAlgorithm::EcdsaP256Sha256, OID_P256),
            CaCurve::P384 => (CaAlgorithm::EcdsaP384Sha384, OID_P384),
        };
        let spki = der::sequence(&[
            &der::sequence(&[
                &der::element(der::OID, OID_EC_PUBLIC_KEY),
                &der::element(der::OID, curve_oid),
            ]),
            &der::bit_string(key.public_key().as_ref()),
        ]);
        let root = RootTemplate::new(algorithm, &spki, common_name, not_before, not_after)?;
        let signature = key
            .sign(&aws_lc_rs::rand::SystemRandom::new(), root.tbs())
            .map_err(|_| CaError::Key("self-signature failed".into()))?;
        let der = root.finish(signature.as_ref())?.der().to_vec();
        let ca = MemoryCa::from_parts(curve, pkcs8.as_ref(), &der)?;
        Ok((ca, pkcs8.as_ref().to_vec()))
    }

    /// A CA from its PKCS#8 key and its certificate (DER), as a key directory keeps them.
    pub fn from_parts(curve: CaCurve, pkcs8: &[u8], certificate: &[u8]) -> Result<Self, CaError> {
        let key = EcdsaKeyPair::from_pkcs8(curve.signing(), pkcs8)
            .map_err(|e| CaError::Key(e.to_string()))?;
        let certificate = CaCertificate::from_der(certificate)?;
        let algorithm = match curve {
            CaCurve::P256 => CaAlgorithm::EcdsaP256Sha256,
            CaCurve::P384 => CaAlgorithm::EcdsaP384Sha384,
        };
        if certificate.public_key != key.public_key().as_ref() {
            return Err(CaError::Key("the key is not the certificate's".into()));
        }
        Ok(MemoryCa {
            key,
            algorithm,
            certificate,
        })
    }
}

impl CaSigner for MemoryCa {
    fn algorithm(&self) -> CaAlgorithm {
        self.algorithm
    }

    fn certificate(&self) -> &CaCertificate {
        &self.certificate
    }

    fn sign(&self, tbs: Vec<u8>) -> CaSignature<'_> {
        let signature = self
            .key
            .sign(&aws_lc_rs::rand::SystemRandom::new(), &tbs)
            .map(|s| s.as_ref().to_vec())
            .map_err(|e| SignError::Refused(Arc::new(e)));
        Box::pin(std::future::ready(signature))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_ecdsa_signature_verifies_once_converted_to_der() {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        for (fixed, asn1) in [
            (
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &signature::ECDSA_P256_SHA256_ASN1,
            ),
            (
                &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
                &signature::ECDSA_P384_SHA384_ASN1,
            ),
        ] {
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(fixed, &rng).unwrap();
            let key = EcdsaKeyPair::from_pkcs8(fixed, pkcs8.as_ref()).unwrap();
            // Many signatures, so that r or s with a high bit or a leading zero byte occur.
            for i in 0..64u8 {
                let raw = key.sign(&rng, &[i]).unwrap();
                let der = ecdsa_signature_to_der(raw.as_ref()).unwrap();
                signature::UnparsedPublicKey::new(asn1, key.public_key().as_ref())
                    .verify(&[i], &der)
                    .unwrap();
            }
        }
        assert_eq!(ecdsa_signature_to_der(&[1, 2, 3]), None);
        assert_eq!(ecdsa_signature_to_der(&[]), None);
    }

    #[test]
    fn roots_of_one_key_signed_twice_are_equivalent_and_a_forged_one_is_not() {
        use aws_lc_rs::encoding::AsDer as _;
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let from = Timestamp::from_second(1_800_000_000).unwrap();
        let to = Timestamp::from_second(1_900_000_000).unwrap();
        let signing = &signature::ECDSA_P256_SHA256_ASN1_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref()).unwrap();
        let spki = key.public_key().as_der().unwrap();
        let template = || {
            RootTemplate::new(
                CaAlgorithm::EcdsaP256Sha256,
                spki.as_ref(),
                "warrant pod CA",
                from,
                to,
            )
            .unwrap()
        };
        // Two replicas: the same template, byte for byte; two signatures.
        assert_eq!(template().tbs(), template().tbs());
        let sign = |t: &RootTemplate| key.sign(&rng, t.tbs()).unwrap().as_ref().to_vec();
        let one = template().finish(&sign(&template())).unwrap();
        let two = template().finish(&sign(&template())).unwrap();
        assert_ne!(one.der(), two.der());
        assert!(equivalent_roots(one.der(), two.der()));
        assert_eq!(one.not_before(), from);
        assert_eq!(one.not_after(), to);
        assert_eq!(one.key_id(), two.key_id());

        // A signature by another key is refused when finishing, and a root carrying one is
        // not taken for the real one.
        let other = EcdsaKeyPair::generate(signing).unwrap();
        let forged = other.sign(&rng, template().tbs()).unwrap();
        assert!(template().finish(forged.as_ref()).is_err());
        let forged_der = certificate(
            template().tbs(),
            CaAlgorithm::EcdsaP256Sha256,
            forged.as_ref(),
        );
        assert!(!equivalent_roots(one.der(), &forged_der));
        // Another validity is another root.
        let later = RootTemplate::new(
            CaAlgorithm::EcdsaP256Sha256,
            spki.as_ref(),
            "warrant pod CA",
            from,
            Timestamp::from_second(1_900_000_001).unwrap(),
        )
        .unwrap();
        let later = later.finish(&sign(&later)).unwrap();
        assert!(!equivalent_roots(one.der(), later.der()));
        assert!(!equivalent_roots(one.der(), b"not a certificate"));
    }

    #[test]
    fn a_memory_ca_reads_back_as_a_ca() {
        let from = Timestamp::from_second(1_800_000_000).unwrap();
        let to = Timestamp::from_second(1_900_000_000).unwrap();
        for curve in [CaCurve::P256, CaCurve::P384] {
            let (ca, pkcs8) = MemoryCa::generate(curve, "test root", from, to).unwrap();
            assert_eq!(ca.certificate().not_after(), to);
            let again = MemoryCa::from_parts(curve, &pkcs8, ca.certificate().der()).unwrap();
            assert_eq!(again.certificate(), ca.certificate());
        }
    }
}
