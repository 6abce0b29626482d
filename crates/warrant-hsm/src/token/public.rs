//! Reading a key's public half back from the token, as a [`VerifyingKey`] (so its kid and JWK
//! are exactly those of the same key loaded from PEM), from a public key object or, for RSA, the
//! private key object's public attributes. The public half stays on the token after the private
//! one is destroyed, so tokens a retired key signed still verify.

use aws_lc_rs::encoding::AsDer as _;
use aws_lc_rs::{rsa, signature};
use cryptoki::object::{Attribute, AttributeType, KeyType as CkKeyType, ObjectClass, ObjectHandle};
use warrant_token::{Algorithm, VerifyingKey};

use super::{Pooled, Token, find};
use crate::der;
use crate::error::{HsmError, Unsuitable};
use crate::uri::Pkcs11Uri;

/// A public key object on the token, read.
pub(crate) struct PublicObject {
    pub(crate) handle: ObjectHandle,
    /// `CKA_PRIVATE`: made by a logged-in session.
    pub(crate) private: bool,
    /// `CKA_LABEL`, if UTF-8.
    pub(crate) label: Option<String>,
    pub(crate) key: VerifyingKey,
    pub(crate) signature_len: usize,
}

impl Token {
    /// The public key of `id`, which stays on the token after the private key is destroyed
    /// (tokens it signed still verify until they expire). Blocks.
    pub fn public_key(&self, id: &[u8]) -> Result<VerifyingKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, _| {
            let private = find(&s.session, ObjectClass::PRIVATE_KEY, id)
                .map_err(|err| HsmError::pkcs11(&key_uri, "C_FindObjects", err))?;
            read_public_key(s, &key_uri, id, private.first().copied(), None).map(|(key, _)| key)
        })
    }
}

/// Every public key object with `CKA_ID` `id` that holds a key warrant can use, with its
/// `CKA_PRIVATE` and label. Objects that do not parse are skipped: a session without the PIN
/// can create public objects under any id, and such an object must not stop warrant; the
/// first one's error is returned only if none parses.
pub(crate) fn public_objects(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    id: &[u8],
) -> Result<(Vec<PublicObject>, Option<HsmError>), HsmError> {
    let handles = find(&s.session, ObjectClass::PUBLIC_KEY, id)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
    let mut objects = Vec::with_capacity(handles.len());
    let mut first_error = None;
    for handle in handles {
        let flags = s
            .session
            .get_attributes(handle, &[AttributeType::Private, AttributeType::Label])
            .map_err(|e| HsmError::pkcs11(key_uri, "C_GetAttributeValue", e))?;
        let (mut private, mut label) = (false, None);
        for a in flags {
            match a {
                Attribute::Private(v) => private = v,
                Attribute::Label(v) => label = String::from_utf8(v).ok(),
                _ => {}
            }
        }
        match read_key_object(s, key_uri, handle) {
            Ok((key, signature_len)) => objects.push(PublicObject {
                handle,
                private,
                label,
                key,
                signature_len,
            }),
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    Ok((objects, first_error))
}

/// The public key of `id` as a [`VerifyingKey`] (so the kid is exactly the rule of keys
/// loaded from PEM), and the length of the key's signatures. Read from a public key object:
/// the one holding `recorded` if given, else preferably one made by a logged-in session
/// (`CKA_PRIVATE`: warrant makes them so; keys made before, or by other tools, have public
/// ones); for RSA, the private key object's public attributes do when there is none.
pub(super) fn read_public_key(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    id: &[u8],
    private: Option<ObjectHandle>,
    recorded: Option<&VerifyingKey>,
) -> Result<(VerifyingKey, usize), HsmError> {
    let (mut objects, error) = public_objects(s, key_uri, id)?;
    objects.sort_by_key(|o| !o.private);
    let chosen = match recorded {
        Some(recorded) => objects
            .iter()
            .position(|o| &o.key == recorded)
            .or((!objects.is_empty()).then_some(0)),
        None => (!objects.is_empty()).then_some(0),
    };
    if let Some(chosen) = chosen {
        let object = objects.swap_remove(chosen);
        return Ok((object.key, object.signature_len));
    }
    if let Some(error) = error {
        return Err(error);
    }
    let source = private.ok_or_else(|| HsmError::ObjectMissing {
        uri: key_uri.to_string(),
        what: "public key",
    })?;
    read_key_object(s, key_uri, source)
}

/// The attributes that make up a public key: its type, and RSA's modulus and exponent or EC's
/// curve and point.
pub(crate) const PUBLIC_KEY_ATTRIBUTES: [AttributeType; 5] = [
    AttributeType::KeyType,
    AttributeType::Modulus,
    AttributeType::PublicExponent,
    AttributeType::EcParams,
    AttributeType::EcPoint,
];

/// The public key an object holds (a public key object, or an RSA private key object's public
/// attributes), and the length of its signatures.
pub(crate) fn read_key_object(
    s: &Pooled,
    key_uri: &Pkcs11Uri,
    source: ObjectHandle,
) -> Result<(VerifyingKey, usize), HsmError> {
    let attrs = s
        .session
        .get_attributes(source, &PUBLIC_KEY_ATTRIBUTES)
        .map_err(|e| HsmError::pkcs11(key_uri, "C_GetAttributeValue", e))?;
    let (mut key_type, mut n, mut e, mut params, mut point) = (None, None, None, None, None);
    for a in attrs {
        match a {
            Attribute::KeyType(t) => key_type = Some(t),
            Attribute::Modulus(v) => n = Some(v),
            Attribute::PublicExponent(v) => e = Some(v),
            Attribute::EcParams(v) => params = Some(v),
            Attribute::EcPoint(v) => point = Some(v),
            _ => {}
        }
    }
    let (key, signature_len) = match key_type {
        Some(t) if t == CkKeyType::RSA => rsa_public(key_uri, n, e)?,
        Some(t) if t == CkKeyType::EC => ec_public(key_uri, params.as_deref(), point)?,
        _ => return Err(HsmError::unsuitable(key_uri, Unsuitable::KeyType)),
    };
    let spki = key.as_der().map_err(|_| HsmError::PublicKey {
        uri: key_uri.to_string(),
        cause: warrant_token::KeyError::Crypto("encode a public key"),
    })?;
    let public =
        VerifyingKey::from_spki_der(spki.as_ref()).map_err(|cause| HsmError::PublicKey {
            uri: key_uri.to_string(),
            cause,
        })?;
    Ok((public, signature_len))
}

/// An RSA public key from its modulus `n` and exponent `e` (2048 to 8192 bits), and the
/// length of its signatures.
fn rsa_public(
    key_uri: &Pkcs11Uri,
    n: Option<Vec<u8>>,
    e: Option<Vec<u8>>,
) -> Result<(signature::ParsedPublicKey, usize), HsmError> {
    let (Some(n), Some(e)) = (n, e) else {
        return Err(missing(key_uri));
    };
    let n: Vec<u8> = n.iter().copied().skip_while(|&b| b == 0).collect();
    let bits = n
        .first()
        .map_or(0, |b| n.len() * 8 - b.leading_zeros() as usize);
    if !(2048..=8192).contains(&bits) {
        return Err(HsmError::unsuitable(key_uri, Unsuitable::RsaSize(bits)));
    }
    let len = n.len();
    let key = rsa::PublicKeyComponents { n, e }
        .to_parsed_public_key(&signature::RSA_PKCS1_2048_8192_SHA256)
        .map_err(|_| HsmError::unsuitable(key_uri, Unsuitable::KeyType))?;
    Ok((key, len))
}

/// An EC public key from its curve's `params` and its `point` (`CKA_EC_POINT`), and the
/// length of its signatures.
fn ec_public(
    key_uri: &Pkcs11Uri,
    params: Option<&[u8]>,
    point: Option<Vec<u8>>,
) -> Result<(signature::ParsedPublicKey, usize), HsmError> {
    let alg = params
        .and_then(der::ec_algorithm)
        .ok_or_else(|| HsmError::unsuitable(key_uri, Unsuitable::Curve))?;
    let coordinate =
        der::coordinate_len(alg).ok_or_else(|| HsmError::unsuitable(key_uri, Unsuitable::Curve))?;
    let value = point.ok_or_else(|| missing(key_uri))?;
    let point = der::ec_point(&value, coordinate).ok_or_else(|| HsmError::PublicKey {
        uri: key_uri.to_string(),
        cause: warrant_token::KeyError::Crypto("read CKA_EC_POINT"),
    })?;
    let verification: &'static signature::EcdsaVerificationAlgorithm = match alg {
        Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED,
        Algorithm::ES512 => &signature::ECDSA_P521_SHA512_FIXED,
        _ => &signature::ECDSA_P256_SHA256_FIXED,
    };
    let key =
        signature::ParsedPublicKey::new(verification, point).map_err(|_| HsmError::PublicKey {
            uri: key_uri.to_string(),
            cause: warrant_token::KeyError::Crypto("parse the EC point"),
        })?;
    Ok((key, 2 * coordinate))
}

/// The object at `key_uri` lacks an attribute a public key needs.
fn missing(key_uri: &Pkcs11Uri) -> HsmError {
    HsmError::ObjectMissing {
        uri: key_uri.to_string(),
        what: "public key",
    }
}
