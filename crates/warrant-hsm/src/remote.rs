//! A key in a token as warrant-token's [`RemoteKey`]: what the issuer core signs with.
//!
//! Two layers, each one idea: the device layer is blocking ([`HsmKey::sign`] is a PKCS#11
//! call, run on the token's [`crate::BlockingSemaphore`]); the key layer is async ([`RemoteKey`], which the
//! issuer core awaits for both front ends). [`Pkcs11Key`] joins them. A cloud KMS's key would be
//! one more [`RemoteKey`] (its SDK is already async, so it needs no threads) and a
//! `warrant_keys::KeyHolder` beside it; nothing above those two traits changes.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use warrant_token::{RemoteKey, RemoteSignError, RemoteSignature, VerifyingKey};

use crate::error::{HsmError, Unsuitable};
use crate::token::{Health, HsmKey, Token};
use crate::uri::Pkcs11Uri;

/// A key in a token that the issuer signs with ([`warrant_token::SigningKey::remote`]). It
/// holds the public key the key store recorded and the object's `CKA_ID`; the private key
/// object is looked up at the first signature (a retired key's has been destroyed, and it is
/// never asked), then checked to be the recorded key. Cheap to clone.
#[derive(Clone)]
pub struct Pkcs11Key {
    inner: Arc<Inner>,
}

struct Inner {
    token: Token,
    id: Vec<u8>,
    public: VerifyingKey,
    locator: Pkcs11Uri,
    /// The key once found on the token.
    found: Mutex<Option<HsmKey>>,
}

impl fmt::Debug for Pkcs11Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11Key")
            .field("kid", &self.inner.public.kid())
            .field("locator", &self.inner.locator.to_string())
            .finish()
    }
}

impl Pkcs11Key {
    /// A key just found, generated or imported on its token.
    pub fn new(key: HsmKey) -> Self {
        let token = key.token().clone();
        let this = Pkcs11Key::on_token(token, key.id(), key.verifying_key().clone());
        *this.lock() = Some(key);
        this
    }

    /// The key `id` on `token`, whose public key a key store recorded as `public`. Touches
    /// nothing on the token.
    pub fn on_token(token: Token, id: &[u8], public: VerifyingKey) -> Self {
        let locator = token.uri().key_locator(id);
        Pkcs11Key {
            inner: Arc::new(Inner {
                token,
                id: id.to_vec(),
                public,
                locator,
                found: Mutex::new(None),
            }),
        }
    }

    /// The object's `CKA_ID`.
    pub fn id(&self) -> &[u8] {
        &self.inner.id
    }

    /// The token the key is on.
    pub fn token(&self) -> &Token {
        &self.inner.token
    }

    /// The public key the store recorded.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.inner.public
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<HsmKey>> {
        self.inner
            .found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The key on the token, found and checked once. Blocks.
    fn find(&self) -> Result<HsmKey, HsmError> {
        if let Some(key) = self.lock().clone() {
            return Ok(key);
        }
        let key = find_recorded(&self.inner.token, &self.inner.id, &self.inner.public)?;
        *self.lock() = Some(key.clone());
        Ok(key)
    }

    /// Signs `signing_input` on a blocking thread, once the token's semaphore gives a place.
    pub async fn sign(&self, signing_input: Vec<u8>) -> Result<Vec<u8>, HsmError> {
        let this = self.clone();
        self.inner
            .token
            .signing_threads()
            .run(move || this.find()?.sign(&signing_input))
            .await
    }
}

/// The private key `id` on `token`, checked to be usable ([`Token::key`]: present, sensitive,
/// not extractable, of `public`'s algorithm and an accepted size) and to be the key whose
/// public half a key store recorded as `public`. Blocks.
pub(crate) fn find_recorded(
    token: &Token,
    id: &[u8],
    public: &VerifyingKey,
) -> Result<HsmKey, HsmError> {
    let key = token.recorded_key(id, public)?;
    if key.verifying_key() != public {
        return Err(HsmError::Unsuitable {
            uri: key.uri().to_string(),
            problem: Unsuitable::NotRecorded {
                recorded: public.kid().to_owned(),
                found: key.kid().to_owned(),
            },
        });
    }
    Ok(key)
}

/// The error a [`RemoteKey`] reports for `err`: unavailable when the token may come back.
pub fn remote_sign_error(err: HsmError) -> RemoteSignError {
    RemoteSignError {
        unavailable: err.is_unavailable(),
        source: Arc::new(err),
    }
}

/// How messages name a token: `PKCS#11 token "warrant"`, or its URI when it has no label.
pub(crate) fn token_name(uri: &Pkcs11Uri) -> String {
    match uri.token_label() {
        Some(label) => format!("PKCS#11 token {label:?}"),
        None => format!("PKCS#11 token {uri}"),
    }
}

impl RemoteKey for Pkcs11Key {
    fn sign(&self, signing_input: Vec<u8>) -> RemoteSignature<'_> {
        Box::pin(async move {
            Pkcs11Key::sign(self, signing_input)
                .await
                .map_err(remote_sign_error)
        })
    }

    fn describe(&self) -> String {
        let id: String = self.inner.id.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}, object id {id}", token_name(self.inner.token.uri()))
    }

    fn locator(&self) -> String {
        self.inner.locator.to_string()
    }

    fn unavailable(&self) -> Option<String> {
        match self.inner.token.health() {
            Health::Healthy => None,
            unhealthy => Some(unhealthy.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hsm_errors_map_to_unavailable_or_not() {
        let lost = HsmError::NoToken {
            uri: "pkcs11:token=t".into(),
            present: vec![],
        };
        assert!(remote_sign_error(lost).unavailable);
        let missing = HsmError::ObjectMissing {
            uri: "pkcs11:token=t;id=%01".into(),
            what: "private key",
        };
        let err = remote_sign_error(missing);
        assert!(!err.unavailable);
        assert_eq!(
            err.to_string(),
            "pkcs11:token=t;id=%01: no private key object with this CKA_ID on the token"
        );
    }
}
