//! Finding a key on the token: its private key object by `CKA_ID` (only `CKA_PRIVATE` ones),
//! checked to be fit to sign (sensitive, not extractable, an accepted type and size) before it
//! becomes an [`HsmKey`]; its flags as read back; and the list of keys on the token.

use std::sync::Arc;

use cryptoki::error::Error as CkError;
use cryptoki::object::{Attribute, AttributeType, KeyType as CkKeyType, ObjectClass, ObjectHandle};
use cryptoki::session::Session;
use warrant_token::{Algorithm, VerifyingKey};

use super::public::read_public_key;
use super::{HsmKey, Pooled, Token};
use crate::der;
use crate::error::{HsmError, Unsuitable};
use crate::module::Entered;
use crate::uri::Pkcs11Uri;

/// What a key object's flags say, read back through PKCS#11.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAttributes {
    /// `CKA_TOKEN`: stored on the token (not a session object).
    pub token: bool,
    /// `CKA_PRIVATE`: only visible after login.
    pub private: bool,
    /// `CKA_SENSITIVE`: the private value cannot be read.
    pub sensitive: bool,
    /// `CKA_EXTRACTABLE`: can be wrapped out of the token.
    pub extractable: bool,
    /// `CKA_ALWAYS_SENSITIVE`: has been sensitive since creation.
    pub always_sensitive: bool,
    /// `CKA_NEVER_EXTRACTABLE`: has never been extractable.
    pub never_extractable: bool,
    /// `CKA_SIGN`.
    pub sign: bool,
    /// `CKA_DECRYPT`: warrant's keys never decrypt.
    pub decrypt: bool,
    /// `CKA_UNWRAP`: warrant's keys never unwrap other keys into the token.
    pub unwrap: bool,
    /// `CKA_DERIVE`: warrant's keys never derive other keys.
    pub derive: bool,
}

/// A key on the token, as [`Token::list_keys`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// `CKA_ID`.
    pub id: Vec<u8>,
    /// `CKA_LABEL`, if UTF-8.
    pub label: Option<String>,
    /// True when the private key object exists (false once destroyed).
    pub has_private: bool,
    /// True when the public key object exists.
    pub has_public: bool,
}

impl Token {
    /// The key with `CKA_ID` `id`, checked: a private key object that signs, is sensitive and
    /// not extractable, RSA of 2048 to 8192 bits or EC on P-256/P-384/P-521 (and of algorithm
    /// `expected`, when given), with its public key read from the token. Blocks.
    pub fn key(&self, id: &[u8], expected: Option<Algorithm>) -> Result<HsmKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, e| {
            self.load_key(e, s, &key_uri, id, expected, None)
        })
    }

    /// [`key`](Self::key) for a key whose public half a key store recorded as `recorded`: the
    /// public key is read from the object holding it, if several share the id. Blocks.
    pub(crate) fn recorded_key(
        &self,
        id: &[u8],
        recorded: &VerifyingKey,
    ) -> Result<HsmKey, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, e| {
            self.load_key(
                e,
                s,
                &key_uri,
                id,
                Some(recorded.algorithm()),
                Some(recorded),
            )
        })
    }

    /// Reads the flags of `id`'s private key object. Blocks.
    pub fn key_attributes(&self, id: &[u8]) -> Result<KeyAttributes, HsmError> {
        let key_uri = self.inner.uri.with_object(id, None);
        self.call("find", |s, e| {
            let handle = self.private_handle(e, s, &key_uri, id)?;
            let attrs = s
                .session
                .get_attributes(
                    handle,
                    &[
                        AttributeType::Token,
                        AttributeType::Private,
                        AttributeType::Sensitive,
                        AttributeType::Extractable,
                        AttributeType::AlwaysSensitive,
                        AttributeType::NeverExtractable,
                        AttributeType::Sign,
                        AttributeType::Decrypt,
                        AttributeType::Unwrap,
                        AttributeType::Derive,
                    ],
                )
                .map_err(|err| HsmError::pkcs11(&key_uri, "C_GetAttributeValue", err))?;
            let mut out = KeyAttributes {
                token: false,
                private: false,
                sensitive: false,
                extractable: true,
                always_sensitive: false,
                never_extractable: false,
                sign: false,
                // Absent: a usage the token does not have for this kind of key.
                decrypt: false,
                unwrap: false,
                derive: false,
            };
            for a in attrs {
                match a {
                    Attribute::Token(v) => out.token = v,
                    Attribute::Private(v) => out.private = v,
                    Attribute::Sensitive(v) => out.sensitive = v,
                    Attribute::Extractable(v) => out.extractable = v,
                    Attribute::AlwaysSensitive(v) => out.always_sensitive = v,
                    Attribute::NeverExtractable(v) => out.never_extractable = v,
                    Attribute::Sign(v) => out.sign = v,
                    Attribute::Decrypt(v) => out.decrypt = v,
                    Attribute::Unwrap(v) => out.unwrap = v,
                    Attribute::Derive(v) => out.derive = v,
                    _ => {}
                }
            }
            Ok(out)
        })
    }

    /// The key objects on the token, by `CKA_ID`. Blocks.
    pub fn list_keys(&self) -> Result<Vec<KeyEntry>, HsmError> {
        let uri = self.inner.uri.clone();
        self.call("find", |s, _| {
            let mut entries: Vec<KeyEntry> = Vec::new();
            for class in [ObjectClass::PRIVATE_KEY, ObjectClass::PUBLIC_KEY] {
                let handles = s
                    .session
                    .find_objects(&[Attribute::Class(class)])
                    .map_err(|e| HsmError::pkcs11(&uri, "C_FindObjects", e))?;
                for h in handles {
                    let attrs = s
                        .session
                        .get_attributes(h, &[AttributeType::Id, AttributeType::Label])
                        .map_err(|e| HsmError::pkcs11(&uri, "C_GetAttributeValue", e))?;
                    let mut id = None;
                    let mut label = None;
                    for a in attrs {
                        match a {
                            Attribute::Id(v) => id = Some(v),
                            Attribute::Label(v) => label = String::from_utf8(v).ok(),
                            _ => {}
                        }
                    }
                    let Some(id) = id else { continue };
                    let pos = match entries.iter().position(|e| e.id == id) {
                        Some(pos) => pos,
                        None => {
                            entries.push(KeyEntry {
                                id,
                                label: None,
                                has_private: false,
                                has_public: false,
                            });
                            entries.len() - 1
                        }
                    };
                    if let Some(entry) = entries.get_mut(pos) {
                        if class == ObjectClass::PRIVATE_KEY {
                            entry.has_private = true;
                        } else {
                            entry.has_public = true;
                        }
                        entry.label = entry.label.take().or(label);
                    }
                }
            }
            entries.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(entries)
        })
    }

    /// The private key handle of `id` in this session (cached), or why not.
    pub(super) fn private_handle(
        &self,
        entered: &Entered<'_>,
        s: &mut Pooled,
        key_uri: &Pkcs11Uri,
        id: &[u8],
    ) -> Result<ObjectHandle, HsmError> {
        if let Some(&h) = s.handles.get(id) {
            return Ok(h);
        }
        let found = find(&s.session, ObjectClass::PRIVATE_KEY, id)
            .map_err(|e| HsmError::pkcs11(key_uri, "C_FindObjects", e))?;
        match found.as_slice() {
            [h] => {
                s.handles.insert(id.to_vec(), *h);
                Ok(*h)
            }
            [] => {
                self.confirm_present(entered)?;
                Err(HsmError::ObjectMissing {
                    uri: key_uri.to_string(),
                    what: "private key",
                })
            }
            _ => Err(HsmError::DuplicateId {
                uri: key_uri.to_string(),
                count: found.len(),
            }),
        }
    }

    pub(super) fn load_key(
        &self,
        e: &Entered<'_>,
        s: &mut Pooled,
        key_uri: &Pkcs11Uri,
        id: &[u8],
        expected: Option<Algorithm>,
        recorded: Option<&VerifyingKey>,
    ) -> Result<HsmKey, HsmError> {
        let handle = self.private_handle(e, s, key_uri, id)?;
        let private = PrivateKeyAttributes::read(s, key_uri, handle)?;
        let key_uri = self.inner.uri.with_object(id, private.label.as_deref());
        let unsuitable = |problem| HsmError::unsuitable(&key_uri, problem);
        let alg = private.signing_algorithm(&key_uri)?;
        if let Some(expected) = expected
            && expected != alg
        {
            return Err(unsuitable(Unsuitable::Algorithm {
                expected,
                found: alg,
            }));
        }
        let (public, signature_len) = read_public_key(s, &key_uri, id, Some(handle), recorded)?;
        if public.algorithm() != alg {
            return Err(unsuitable(Unsuitable::Algorithm {
                expected: alg,
                found: public.algorithm(),
            }));
        }
        Ok(HsmKey {
            token: self.clone(),
            id: Arc::from(id),
            uri: Arc::new(key_uri),
            public,
            signature_len,
        })
    }
}

/// What a private key object says of itself: what it may do and what key it is.
struct PrivateKeyAttributes {
    key_type: Option<CkKeyType>,
    sign: bool,
    extractable: bool,
    sensitive: bool,
    params: Option<Vec<u8>>,
    /// `CKA_LABEL`, if UTF-8.
    label: Option<String>,
}

impl PrivateKeyAttributes {
    /// Reads the object `handle`. One the token does not answer for counts as extractable,
    /// not sensitive and unable to sign.
    fn read(s: &Pooled, key_uri: &Pkcs11Uri, handle: ObjectHandle) -> Result<Self, HsmError> {
        let attrs = s
            .session
            .get_attributes(
                handle,
                &[
                    AttributeType::KeyType,
                    AttributeType::Sign,
                    AttributeType::Extractable,
                    AttributeType::Sensitive,
                    AttributeType::EcParams,
                    AttributeType::Label,
                ],
            )
            .map_err(|err| HsmError::pkcs11(key_uri, "C_GetAttributeValue", err))?;
        let mut read = PrivateKeyAttributes {
            key_type: None,
            sign: false,
            extractable: true,
            sensitive: false,
            params: None,
            label: None,
        };
        for a in attrs {
            match a {
                Attribute::KeyType(t) => read.key_type = Some(t),
                Attribute::Sign(v) => read.sign = v,
                Attribute::Extractable(v) => read.extractable = v,
                Attribute::Sensitive(v) => read.sensitive = v,
                Attribute::EcParams(v) => read.params = Some(v),
                Attribute::Label(v) => read.label = String::from_utf8(v).ok(),
                _ => {}
            }
        }
        Ok(read)
    }

    /// The algorithm the key signs with, if it is a key warrant signs with: never
    /// extractable, sensitive, allowed to sign, RSA or EC on a known curve.
    fn signing_algorithm(&self, key_uri: &Pkcs11Uri) -> Result<Algorithm, HsmError> {
        let unsuitable = |problem| HsmError::unsuitable(key_uri, problem);
        if self.extractable {
            return Err(unsuitable(Unsuitable::Extractable));
        }
        if !self.sensitive {
            return Err(unsuitable(Unsuitable::NotSensitive));
        }
        if !self.sign {
            return Err(unsuitable(Unsuitable::CannotSign));
        }
        match self.key_type {
            Some(t) if t == CkKeyType::RSA => Ok(Algorithm::RS256),
            Some(t) if t == CkKeyType::EC => self
                .params
                .as_deref()
                .and_then(der::ec_algorithm)
                .ok_or_else(|| unsuitable(Unsuitable::Curve)),
            _ => Err(unsuitable(Unsuitable::KeyType)),
        }
    }
}

/// The objects of `class` with `CKA_ID` `id`. Private key objects only if `CKA_PRIVATE`: one a
/// session without the PIN made is not warrant's, whatever id it claims.
pub(crate) fn find(
    session: &Session,
    class: ObjectClass,
    id: &[u8],
) -> Result<Vec<ObjectHandle>, CkError> {
    let mut template = vec![Attribute::Class(class), Attribute::Id(id.to_vec())];
    if class == ObjectClass::PRIVATE_KEY {
        template.push(Attribute::Private(true));
    }
    session.find_objects(&template)
}
