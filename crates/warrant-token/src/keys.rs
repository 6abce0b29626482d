//! Key material: the public keys that verify tokens and the private keys that sign them.
//!
//! Keys are parsed once, when they are loaded, and kept parsed: signing and verifying never
//! re-read DER. Both key types are cheap to clone (an `Arc`), and their `Debug` shows only the
//! key ID and algorithm, so a key can be logged without leaking material.
//!
//! Supported, as in kube-apiserver: RSA (signing with RS256) and ECDSA on P-256, P-384 and P-521
//! (ES256, ES384, ES512). RSA keys must be 2048 to 8192 bits (kube-apiserver also accepts
//! shorter ones; aws-lc refuses to verify RS256 with them, and so does warrant).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    self, EcdsaKeyPair, EcdsaSigningAlgorithm, KeyPair as _, ParsedPublicKey, VerificationAlgorithm,
};
use aws_lc_rs::{digest, rsa};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;

use crate::der;
use crate::error::KeyError;
use crate::gojson;

/// A JWS signature algorithm that warrant signs and verifies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256; the only algorithm for RSA keys.
    RS256,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// ECDSA on P-384 with SHA-384.
    ES384,
    /// ECDSA on P-521 with SHA-512.
    ES512,
}

impl Algorithm {
    /// The JWS `alg` name.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::RS256 => "RS256",
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
            Algorithm::ES512 => "ES512",
        }
    }

    /// The algorithm for a JWS `alg` name; `None` for anything warrant does not accept
    /// (`none`, `HS256`, `PS256`, …).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "RS256" => Some(Algorithm::RS256),
            "ES256" => Some(Algorithm::ES256),
            "ES384" => Some(Algorithm::ES384),
            "ES512" => Some(Algorithm::ES512),
            _ => None,
        }
    }

    fn verification(self) -> &'static dyn VerificationAlgorithm {
        match self {
            Algorithm::RS256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::ES256 => &signature::ECDSA_P256_SHA256_FIXED,
            Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED,
            Algorithm::ES512 => &signature::ECDSA_P521_SHA512_FIXED,
        }
    }

    fn ecdsa_signing(self) -> Option<&'static EcdsaSigningAlgorithm> {
        match self {
            Algorithm::RS256 => None,
            Algorithm::ES256 => Some(&signature::ECDSA_P256_SHA256_FIXED_SIGNING),
            Algorithm::ES384 => Some(&signature::ECDSA_P384_SHA384_FIXED_SIGNING),
            Algorithm::ES512 => Some(&signature::ECDSA_P521_SHA512_FIXED_SIGNING),
        }
    }

    /// JWK curve name and coordinate length in bytes, for EC algorithms.
    fn curve(self) -> Option<(&'static str, usize)> {
        match self {
            Algorithm::RS256 => None,
            Algorithm::ES256 => Some(("P-256", 32)),
            Algorithm::ES384 => Some(("P-384", 48)),
            Algorithm::ES512 => Some(("P-521", 66)),
        }
    }

    fn from_curve_oid(oid: &[u8]) -> Option<Self> {
        match oid {
            der::OID_P256 => Some(Algorithm::ES256),
            der::OID_P384 => Some(Algorithm::ES384),
            der::OID_P521 => Some(Algorithm::ES512),
            _ => None,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::from_name(s)
            .ok_or_else(|| format!("unsupported algorithm {s:?}: use RS256, ES256, ES384 or ES512"))
    }
}

/// The kinds of key warrant generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// RSA, 2048 bits (RS256).
    Rsa2048,
    /// RSA, 3072 bits (RS256).
    Rsa3072,
    /// ECDSA P-256 (ES256).
    P256,
    /// ECDSA P-384 (ES384).
    P384,
    /// ECDSA P-521 (ES512).
    P521,
}

impl KeyType {
    /// The algorithm keys of this type sign with.
    pub fn algorithm(self) -> Algorithm {
        match self {
            KeyType::Rsa2048 | KeyType::Rsa3072 => Algorithm::RS256,
            KeyType::P256 => Algorithm::ES256,
            KeyType::P384 => Algorithm::ES384,
            KeyType::P521 => Algorithm::ES512,
        }
    }
}

/// The key ID kube-apiserver derives from a public key: base64url (no padding) of the SHA-256 of
/// the DER SubjectPublicKeyInfo. It must never change, or tokens already issued stop verifying.
pub fn key_id(spki_der: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, spki_der))
}

/// A public key that verifies tokens, parsed once.
#[derive(Clone)]
pub struct VerifyingKey {
    inner: Arc<PublicInner>,
}

struct PublicInner {
    kid: String,
    alg: Algorithm,
    spki: Vec<u8>,
    key: ParsedPublicKey,
    jwk: String,
    /// RFC 7638 SHA-256 thumbprint, computed once.
    thumbprint: String,
}

impl VerifyingKey {
    /// Parses a DER SubjectPublicKeyInfo (the contents of a `PUBLIC KEY` PEM block).
    pub fn from_spki_der(spki: &[u8]) -> Result<Self, KeyError> {
        let invalid = |reason| KeyError::Invalid {
            label: "PUBLIC KEY",
            reason,
        };
        let (oid, params) =
            der::spki_algorithm(spki).ok_or(invalid("not a DER SubjectPublicKeyInfo"))?;
        let alg = match oid {
            der::OID_RSA => Algorithm::RS256,
            der::OID_EC => params
                .and_then(Algorithm::from_curve_oid)
                .ok_or(KeyError::Curve)?,
            _ => return Err(invalid("not an RSA or ECDSA key")),
        };
        let key = ParsedPublicKey::new(alg.verification(), spki)
            .map_err(|_| invalid("the key does not parse"))?;
        Self::from_parsed(alg, &key)
    }

    /// Builds a key from a JWK (RSA `n`/`e` or EC `crv`/`x`/`y`), as found in a JWKS document.
    /// The key ID is derived from the key, not taken from the JWK's `kid`.
    pub fn from_jwk(jwk: &serde_json::Value) -> Result<Self, KeyError> {
        let field = |name: &'static str| -> Result<Vec<u8>, KeyError> {
            let text = jwk
                .get(name)
                .and_then(|v| v.as_str())
                .ok_or(KeyError::Jwk(name))?;
            URL_SAFE_NO_PAD
                .decode(text)
                .map_err(|_| KeyError::Jwk(name))
        };
        match jwk.get("kty").and_then(|v| v.as_str()) {
            Some("RSA") => {
                let components = rsa::PublicKeyComponents {
                    n: field("n")?,
                    e: field("e")?,
                };
                let key = components
                    .to_parsed_public_key(&signature::RSA_PKCS1_2048_8192_SHA256)
                    .map_err(|_| KeyError::Jwk("RSA key does not parse"))?;
                Self::from_parsed(Algorithm::RS256, &key)
            }
            Some("EC") => {
                let alg = match jwk.get("crv").and_then(|v| v.as_str()) {
                    Some("P-256") => Algorithm::ES256,
                    Some("P-384") => Algorithm::ES384,
                    Some("P-521") => Algorithm::ES512,
                    _ => return Err(KeyError::Curve),
                };
                let (x, y) = (field("x")?, field("y")?);
                let mut point = Vec::with_capacity(1 + x.len() + y.len());
                point.push(0x04);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                let key = ParsedPublicKey::new(alg.verification(), &point)
                    .map_err(|_| KeyError::Jwk("EC point is not on the curve"))?;
                Self::from_parsed(alg, &key)
            }
            _ => Err(KeyError::Jwk("kty must be RSA or EC")),
        }
    }

    /// Completes a key from aws-lc's parsed form. The SubjectPublicKeyInfo is re-encoded
    /// canonically (RSA with NULL parameters; EC with a named curve and an uncompressed point),
    /// which is what Go's `x509.MarshalPKIXPublicKey` produces and so what the kid hashes.
    fn from_parsed(alg: Algorithm, parsed: &ParsedPublicKey) -> Result<Self, KeyError> {
        let spki = parsed
            .as_der()
            .map_err(|_| KeyError::Crypto("encode a public key"))?;
        let spki = spki.as_ref().to_vec();
        let kid = key_id(&spki);
        let (jwk, thumbprint) = match alg.curve() {
            None => {
                let rsa = rsa::PublicKey::from_der(&spki)
                    .map_err(|_| KeyError::Crypto("read an RSA public key"))?;
                let n = rsa.modulus().big_endian_without_leading_zero();
                let bits = n
                    .first()
                    .map_or(0, |b| n.len() * 8 - b.leading_zeros() as usize);
                if !(2048..=8192).contains(&bits) {
                    return Err(KeyError::RsaSize(bits));
                }
                let e = rsa.exponent().big_endian_without_leading_zero();
                (
                    render_jwk(&kid, alg, None, Some((n, e))),
                    thumbprint(alg, None, Some((n, e))),
                )
            }
            Some((_, len)) => {
                // The canonical SPKI ends with the BIT STRING holding 0x04 || X || Y.
                let point = spki
                    .get(spki.len().saturating_sub(2 * len + 1)..)
                    .unwrap_or_default();
                match point.split_first() {
                    Some((0x04, xy)) if xy.len() == 2 * len => {
                        let (x, y) = xy.split_at(len);
                        (
                            render_jwk(&kid, alg, Some((x, y)), None),
                            thumbprint(alg, Some((x, y)), None),
                        )
                    }
                    _ => return Err(KeyError::Crypto("encode an EC public key")),
                }
            }
        };
        // Parse once more from the canonical bytes so the kept key and the kid agree exactly.
        let key = ParsedPublicKey::new(alg.verification(), &spki)
            .map_err(|_| KeyError::Crypto("parse a public key"))?;
        Ok(VerifyingKey {
            inner: Arc::new(PublicInner {
                kid,
                alg,
                spki,
                key,
                jwk,
                thumbprint,
            }),
        })
    }

    /// The key ID (see [`key_id`]).
    pub fn kid(&self) -> &str {
        &self.inner.kid
    }

    /// The algorithm this key verifies.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.alg
    }

    /// The canonical DER SubjectPublicKeyInfo.
    pub fn spki_der(&self) -> &[u8] {
        &self.inner.spki
    }

    /// The key's JWK, as it appears in the JWKS document.
    pub fn jwk_json(&self) -> &str {
        &self.inner.jwk
    }

    /// The key's RFC 7638 JWK thumbprint (SHA-256, base64url): what a key-bound token's
    /// `cnf.jkt` names. See [`crate::jwk_thumbprint`].
    pub fn thumbprint(&self) -> &str {
        &self.inner.thumbprint
    }

    /// The key's SubjectPublicKeyInfo as a `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        pem_encode("PUBLIC KEY", &self.inner.spki)
    }

    /// True when `signature` over `message` verifies with this key. The signature is in JWS form
    /// (PKCS#1 v1.5 for RS256, fixed-width `r || s` for ECDSA): what a key holder's answer is
    /// checked with before it is used.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        self.inner.key.verify_sig(message, signature).is_ok()
    }
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.inner.spki == other.inner.spki
    }
}

impl Eq for VerifyingKey {}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.inner.kid)
            .field("alg", &self.inner.alg)
            .finish()
    }
}

/// One JWK in go-jose's field order: `use, kty, kid, crv, alg, x, y, n, e`.
#[derive(Serialize)]
struct Jwk<'a> {
    #[serde(rename = "use")]
    use_: &'static str,
    kty: &'static str,
    kid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    crv: Option<&'static str>,
    alg: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    x: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    y: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    e: Option<String>,
}

fn render_jwk(
    kid: &str,
    alg: Algorithm,
    ec: Option<(&[u8], &[u8])>,
    rsa: Option<(&[u8], &[u8])>,
) -> String {
    let b64 = |b: &[u8]| URL_SAFE_NO_PAD.encode(b);
    let jwk = Jwk {
        use_: "sig",
        kty: if ec.is_some() { "EC" } else { "RSA" },
        kid,
        crv: alg.curve().map(|(name, _)| name),
        alg: alg.name(),
        x: ec.map(|(x, _)| b64(x)),
        y: ec.map(|(_, y)| b64(y)),
        n: rsa.map(|(n, _)| b64(n)),
        e: rsa.map(|(_, e)| b64(e)),
    };
    // Strings only: serializing cannot fail, and JSON is UTF-8; an empty JWK must never be
    // published if it somehow did.
    #[allow(clippy::expect_used)]
    let json = gojson::to_vec(&jwk).expect("a JWK always serializes");
    #[allow(clippy::expect_used)]
    String::from_utf8(json).expect("JSON is UTF-8")
}

/// RFC 7638: base64url(SHA-256) of the required members in lexicographic order, without
/// whitespace (EC: `crv`, `kty`, `x`, `y`; RSA: `e`, `kty`, `n`), from the canonical components
/// (modulus without leading zeros, coordinates at full width). Members are base64url or a curve
/// name: nothing to escape.
fn thumbprint(alg: Algorithm, ec: Option<(&[u8], &[u8])>, rsa: Option<(&[u8], &[u8])>) -> String {
    let b64 = |b: &[u8]| URL_SAFE_NO_PAD.encode(b);
    let members = match (ec, rsa) {
        (Some((x, y)), _) => format!(
            r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#,
            alg.curve().map_or("", |(name, _)| name),
            b64(x),
            b64(y)
        ),
        (None, Some((n, e))) => format!(r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#, b64(e), b64(n)),
        (None, None) => String::new(),
    };
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, members.as_bytes()))
}

/// A private key that signs tokens, parsed once, with the public half that verifies them.
#[derive(Clone)]
pub struct SigningKey {
    inner: Arc<PrivateInner>,
}

struct PrivateInner {
    signer: Signer,
    public: VerifyingKey,
    /// The base64url JOSE header `{"alg":…,"kid":…}`, built once.
    header: String,
}

enum Signer {
    Rsa(rsa::KeyPair),
    Ec(EcdsaKeyPair),
    /// Held elsewhere (an HSM): signs only asynchronously.
    Remote(Arc<dyn crate::RemoteKey>),
}

impl SigningKey {
    /// Generates a new key.
    pub fn generate(key_type: KeyType) -> Result<Self, KeyError> {
        let failed = |_| KeyError::Crypto("generate a key");
        match key_type {
            KeyType::Rsa2048 => {
                Self::from_rsa(rsa::KeyPair::generate(rsa::KeySize::Rsa2048).map_err(failed)?)
            }
            KeyType::Rsa3072 => {
                Self::from_rsa(rsa::KeyPair::generate(rsa::KeySize::Rsa3072).map_err(failed)?)
            }
            KeyType::P256 | KeyType::P384 | KeyType::P521 => {
                let alg = key_type.algorithm();
                let signing = alg.ecdsa_signing().ok_or(KeyError::Curve)?;
                Self::from_ec(alg, EcdsaKeyPair::generate(signing).map_err(failed)?)
            }
        }
    }

    /// Parses a PKCS#8 `PRIVATE KEY` (RSA or EC).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, KeyError> {
        let invalid = |reason| KeyError::Invalid {
            label: "PRIVATE KEY",
            reason,
        };
        match der::pkcs8_algorithm(der) {
            Some(der::OID_RSA) => match rsa::KeyPair::from_pkcs8(der) {
                Ok(key) => Self::from_rsa(key),
                Err(_) => Err(rsa_error(der, invalid("the RSA key does not parse"))),
            },
            Some(der::OID_EC) => Self::from_ec_der(der, "PRIVATE KEY"),
            Some(_) => Err(invalid("not an RSA or ECDSA key")),
            None => Err(invalid("not a DER PKCS#8 PrivateKeyInfo")),
        }
    }

    /// Parses a PKCS#1 `RSA PRIVATE KEY`.
    pub fn from_pkcs1_der(der: &[u8]) -> Result<Self, KeyError> {
        match rsa::KeyPair::from_der(der) {
            Ok(key) => Self::from_rsa(key),
            Err(_) => Err(rsa_error(
                der,
                KeyError::Invalid {
                    label: "RSA PRIVATE KEY",
                    reason: "the key does not parse",
                },
            )),
        }
    }

    /// Parses a SEC1 `EC PRIVATE KEY`.
    pub fn from_sec1_der(der: &[u8]) -> Result<Self, KeyError> {
        Self::from_ec_der(der, "EC PRIVATE KEY")
    }

    fn from_ec_der(der: &[u8], label: &'static str) -> Result<Self, KeyError> {
        // The curve is inside the DER; trying each is simpler than finding it, and runs only at
        // load time. A key on a curve other than these three fails all of them.
        for alg in [Algorithm::ES256, Algorithm::ES384, Algorithm::ES512] {
            let Some(signing) = alg.ecdsa_signing() else {
                continue;
            };
            if let Ok(key) = EcdsaKeyPair::from_private_key_der(signing, der) {
                return Self::from_ec(alg, key);
            }
        }
        Err(KeyError::Invalid {
            label,
            reason: "not an EC key on P-256, P-384 or P-521",
        })
    }

    fn from_rsa(key: rsa::KeyPair) -> Result<Self, KeyError> {
        let spki = key
            .public_key()
            .as_der()
            .map_err(|_| KeyError::Crypto("encode a public key"))?;
        let public = VerifyingKey::from_spki_der(spki.as_ref())?;
        Ok(Self::assemble(Signer::Rsa(key), public))
    }

    fn from_ec(alg: Algorithm, key: EcdsaKeyPair) -> Result<Self, KeyError> {
        let spki = key
            .public_key()
            .as_der()
            .map_err(|_| KeyError::Crypto("encode a public key"))?;
        let public = VerifyingKey::from_spki_der(spki.as_ref())?;
        debug_assert_eq!(public.algorithm(), alg);
        Ok(Self::assemble(Signer::Ec(key), public))
    }

    /// A key whose private half is held elsewhere: `public` is its public key (read from where
    /// it is held), `key` signs for it. See [`crate::RemoteKey`].
    pub fn remote(public: VerifyingKey, key: Arc<dyn crate::RemoteKey>) -> Self {
        Self::assemble(Signer::Remote(key), public)
    }

    /// The remote key this key signs with, if its private half is held elsewhere.
    pub fn remote_key(&self) -> Option<&dyn crate::RemoteKey> {
        match &self.inner.signer {
            Signer::Remote(key) => Some(&**key),
            Signer::Rsa(_) | Signer::Ec(_) => None,
        }
    }

    fn assemble(signer: Signer, public: VerifyingKey) -> Self {
        #[derive(Serialize)]
        struct Header<'a> {
            alg: &'static str,
            kid: &'a str,
        }
        // Two strings: serializing cannot fail, and an empty header must never be signed.
        #[allow(clippy::expect_used)]
        let header = gojson::to_vec(&Header {
            alg: public.algorithm().name(),
            kid: public.kid(),
        })
        .expect("a JWS header always serializes");
        let header = URL_SAFE_NO_PAD.encode(header);
        SigningKey {
            inner: Arc::new(PrivateInner {
                signer,
                public,
                header,
            }),
        }
    }

    /// The public half, which verifies this key's tokens.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.inner.public
    }

    /// The key ID.
    pub fn kid(&self) -> &str {
        self.inner.public.kid()
    }

    /// The algorithm this key signs with.
    pub fn algorithm(&self) -> Algorithm {
        self.inner.public.algorithm()
    }

    /// The base64url-encoded JOSE header of every token this key signs.
    pub(crate) fn encoded_header(&self) -> &str {
        &self.inner.header
    }

    /// Signs `message`, returning the raw JWS signature (PKCS#1 v1.5 for RSA, fixed-width
    /// `r || s` for ECDSA).
    pub(crate) fn sign_bytes(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let rng = SystemRandom::new();
        let failed = |_| KeyError::Crypto("sign");
        match &self.inner.signer {
            Signer::Rsa(key) => {
                let mut sig = vec![0; key.public_modulus_len()];
                key.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .map_err(failed)?;
                Ok(sig)
            }
            Signer::Ec(key) => Ok(key.sign(&rng, message).map_err(failed)?.as_ref().to_vec()),
            Signer::Remote(key) => Err(KeyError::HeldElsewhere(
                key.describe(),
                "it signs only asynchronously",
            )),
        }
    }

    /// [`sign_bytes`](Self::sign_bytes) for any key: a key in memory signs at once, a remote
    /// one is awaited.
    pub(crate) async fn sign_bytes_async(&self, message: Vec<u8>) -> Result<Vec<u8>, KeyError> {
        match &self.inner.signer {
            Signer::Remote(key) => key.sign(message).await.map_err(KeyError::Remote),
            Signer::Rsa(_) | Signer::Ec(_) => self.sign_bytes(&message),
        }
    }

    /// The private key as a PKCS#8 `PRIVATE KEY` PEM block, for writing to a key store.
    pub fn to_pkcs8_pem(&self) -> Result<PrivateKeyPem, KeyError> {
        let failed = |_| KeyError::Crypto("encode a private key");
        let der = match &self.inner.signer {
            Signer::Rsa(key) => key.as_der().map_err(failed)?.as_ref().to_vec(),
            Signer::Ec(key) => key.to_pkcs8v1().map_err(failed)?.as_ref().to_vec(),
            Signer::Remote(key) => {
                return Err(KeyError::HeldElsewhere(
                    key.describe(),
                    "its private key cannot be exported",
                ));
            }
        };
        Ok(PrivateKeyPem(pem_encode("PRIVATE KEY", &der)))
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid())
            .field("alg", &self.algorithm())
            .finish()
    }
}

/// aws-lc refuses RSA keys outside 2048 to 8192 bits without saying why; say why.
fn rsa_error(der: &[u8], otherwise: KeyError) -> KeyError {
    match der::rsa_private_modulus_bits(der) {
        Some(bits) if !(2048..=8192).contains(&bits) => KeyError::RsaSize(bits),
        _ => otherwise,
    }
}

/// PEM text of a private key. Its `Debug` is redacted so it cannot reach a log by accident.
pub struct PrivateKeyPem(String);

impl PrivateKeyPem {
    /// The PEM text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PrivateKeyPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKeyPem(<redacted>)")
    }
}

fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        #[allow(clippy::expect_used)]
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
