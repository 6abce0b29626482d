//! A token as the holder of a managed key set's private keys ([`warrant_keys::KeyHolder`]).
//!
//! **Object ids.** A generated key's `CKA_ID` is 16 random bytes (aws-lc's generator), not
//! derived from the kid: the kid is a hash of the public key, which exists only once the token
//! has made the key, and an id fixed before generation lets a failed generation be told apart
//! from an existing key ([`HsmError::ObjectExists`]). `CKA_LABEL` is then set to the kid, so
//! `pkcs11-tool --list-objects` shows the same name as the JWKS. An imported key gets a random
//! id too, and its kid (known from the PEM) as its label.
//!
//! **What the store records** is [`RemoteKey::locator`](warrant_token::RemoteKey::locator):
//! `pkcs11:token=LABEL;type=private;id=%..`, no PIN, no module path, no slot number. A locator
//! naming another token (a different label or serial) is refused rather than looked up here.
//!
//! **What the store's entries are checked against**: the token's own objects, see
//! `token/ownership.rs` (a public key object only a session with the PIN can create vouches for a
//! key; only an object proven to be the recorded key is destroyed).

use std::sync::Arc;

use aws_lc_rs::rand::{SecureRandom as _, SystemRandom};
use tokio::sync::watch;
use warrant_keys::{
    Disposal, Disposed, Health, HolderAdvice, HolderFuture, KeyHolder, KeyPurpose, Recovery,
};
use warrant_token::{KeyError, KeyType, PemKey, RemoteSignError, SigningKey, VerifyingKey};

use crate::error::{HsmError, LocatorError};
use crate::remote::{Pkcs11Key, find_recorded, remote_sign_error, token_name};
use crate::token::{Token, object_label};
use crate::uri::Pkcs11Uri;

/// The length of the `CKA_ID` of keys warrant creates.
pub const KEY_ID_LEN: usize = 16;

/// A token holding a managed key set's private keys. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Pkcs11Holder {
    token: Token,
}

impl Pkcs11Holder {
    /// Keys on `token`.
    pub fn new(token: Token) -> Self {
        Pkcs11Holder { token }
    }

    /// The token.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Imports the private key in `pem` (PKCS#8, PKCS#1 or SEC1; kubeadm's `sa.key`, a managed
    /// key's file) as a non-extractable key labelled with its kid for `purpose`
    /// ([`object_label`]), and returns it as a key this holder signs with, with the same kid.
    /// Blocks.
    pub fn import_pem(&self, pem: &[u8], purpose: KeyPurpose) -> Result<SigningKey, HsmError> {
        let kid = warrant_token::parse_pem_keys(pem)
            .map_err(HsmError::Import)?
            .into_iter()
            .find_map(|k| match k {
                PemKey::Private(k) => Some(k.kid().to_owned()),
                PemKey::Public(_) => None,
            })
            .ok_or(HsmError::ImportUnsupported("the PEM holds no private key"))?;
        let key = self
            .token
            .import_pem(pem, &new_id()?, &object_label(purpose, &kid))?;
        Ok(remote(Pkcs11Key::new(key)))
    }

    /// The `CKA_ID` a locator names, after checking it is on this token.
    pub fn locator_id(&self, locator: &str) -> Result<Vec<u8>, HsmError> {
        let uri = Pkcs11Uri::parse(locator).map_err(LocatorError::Parse)?;
        if !uri.same_token(self.token.uri()) {
            return Err(LocatorError::OtherToken {
                locator: uri.to_string(),
                token: self.token.uri().to_string(),
            }
            .into());
        }
        let id = uri
            .object_id()
            .ok_or_else(|| LocatorError::NoId(uri.to_string()))?;
        Ok(id.to_vec())
    }

    /// Checks that `key`, as a key store recorded it, can sign: its private object is on this
    /// token, sensitive, not extractable, of the recorded algorithm and an accepted size, and
    /// is the recorded key. [`KeyHolder::open`] does not look (a retired key's object is gone
    /// on purpose); a server checks the keys that can still sign with this at startup
    /// ([`warrant_keys::check_signing_keys`]), so a
    /// missing or unsuitable object is one startup error rather than a failure at the first
    /// signature. A key made before warrant took every use but signing from its keys
    /// (`CKA_DECRYPT`, `CKA_UNWRAP`, `CKA_DERIVE`) loses them here, said in the log; a token
    /// that refuses is warned about, not fatal. Blocks.
    pub fn check(&self, key: &SigningKey) -> Result<(), HsmError> {
        let remote = key.remote_key().ok_or(LocatorError::NotHeld)?;
        let id = self.locator_id(&remote.locator())?;
        let found = find_recorded(&self.token, &id, key.verifying_key())?;
        match self.token.restrict_to_signing(&id) {
            Ok(true) => tracing::warn!(
                kid = %key.kid(), uri = %found.uri(),
                "the key could also decrypt, unwrap or derive in the token; it now only signs (CKA_DECRYPT, CKA_UNWRAP and CKA_DERIVE set false)"
            ),
            Ok(false) => {}
            Err(error) => tracing::warn!(
                kid = %key.kid(), %error,
                "the key can also decrypt, unwrap or derive in the token, and the token refused to take that away: set CKA_DECRYPT, CKA_UNWRAP and CKA_DERIVE false on it with the vendor's tools"
            ),
        }
        Ok(())
    }

    fn generate_key(&self, key_type: KeyType, purpose: KeyPurpose) -> Result<SigningKey, HsmError> {
        let key = self
            .token
            .generate_labelled_by_kid(key_type, &new_id()?, purpose)?;
        Ok(remote(Pkcs11Key::new(key)))
    }
}

/// A fresh `CKA_ID`.
fn new_id() -> Result<[u8; KEY_ID_LEN], HsmError> {
    let mut id = [0u8; KEY_ID_LEN];
    SystemRandom::new()
        .fill(&mut id)
        .map_err(|_| HsmError::Random)?;
    Ok(id)
}

fn remote(key: Pkcs11Key) -> SigningKey {
    let public = key.verifying_key().clone();
    SigningKey::remote(public, Arc::new(key))
}

fn key_error(err: HsmError) -> KeyError {
    KeyError::Remote(remote_sign_error(err))
}

/// What an operator is told about a token.
pub static ADVICE: HolderAdvice = HolderAdvice {
    flag: "--key-pkcs11-uri",
    name: "the PKCS#11 token",
    short: "the token",
    restore: "Restore the object from the token's backup",
    docs: "docs/keys.md, \"Keys in an HSM\"",
    import: None,
    retries: "the warrant server that writes this store destroys it once it reaches the token, retrying until it is gone (or the next `warrant serve` on this store does)",
};

/// The token's answers, blocking (the device layer): the [`KeyHolder`] methods run them on the
/// token's [`BlockingSemaphore`](crate::BlockingSemaphore).
impl Pkcs11Holder {
    /// A new key of `key_type` for `purpose` in the token ([`KeyHolder::generate`]). Blocks.
    pub fn generate(&self, key_type: KeyType, purpose: KeyPurpose) -> Result<SigningKey, KeyError> {
        self.generate_key(key_type, purpose).map_err(key_error)
    }

    /// Whether the token vouches for the key at `locator`, for `purpose`
    /// ([`KeyHolder::vouch`]). Blocks.
    pub fn vouch(
        &self,
        locator: &str,
        public: &VerifyingKey,
        purpose: KeyPurpose,
    ) -> Result<(), KeyError> {
        let id = self.locator_id(locator).map_err(key_error)?;
        self.token.vouch(&id, public, purpose).map_err(key_error)
    }

    /// Disposes of key `kid` at `locator`, kept for `purpose` ([`KeyHolder::dispose`]). Blocks.
    pub fn dispose(
        &self,
        locator: &str,
        kid: &str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> Result<Disposed, KeyError> {
        let id = match self.locator_id(locator) {
            Ok(id) => id,
            // A locator that names nothing on this token names nothing of warrant's here.
            Err(HsmError::Locator(error)) => return Ok(Disposed::NotTheKey(error.to_string())),
            Err(error) => return Err(key_error(error)),
        };
        self.token
            .dispose(&id, kid, disposal, purpose)
            .map_err(key_error)
    }

    /// Runs `call` with a clone of this holder on the token's blocking threads.
    fn blocking<'a, T: Send + 'static>(
        &self,
        call: impl FnOnce(Pkcs11Holder) -> Result<T, KeyError> + Send + 'static,
    ) -> HolderFuture<'a, Result<T, KeyError>> {
        let holder = self.clone();
        Box::pin(async move {
            let threads = holder.token.signing_threads().clone();
            let answer = threads.run(move || Ok(call(holder))).await;
            answer.map_err(key_error)?
        })
    }
}

impl KeyHolder for Pkcs11Holder {
    fn describe(&self) -> String {
        token_name(self.token.uri())
    }

    fn advice(&self) -> &'static HolderAdvice {
        &ADVICE
    }

    fn generate(
        &self,
        key_type: KeyType,
        purpose: KeyPurpose,
    ) -> HolderFuture<'_, Result<SigningKey, KeyError>> {
        self.blocking(move |holder| holder.generate(key_type, purpose))
    }

    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError> {
        let id = self.locator_id(locator).map_err(key_error)?;
        let key = Pkcs11Key::on_token(self.token.clone(), &id, public);
        Ok(remote(key))
    }

    fn vouch<'a>(
        &'a self,
        locator: &'a str,
        public: &'a VerifyingKey,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<(), KeyError>> {
        let (locator, public) = (locator.to_owned(), public.clone());
        self.blocking(move |holder| holder.vouch(&locator, &public, purpose))
    }

    fn dispose<'a>(
        &'a self,
        locator: &'a str,
        kid: &'a str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<Disposed, KeyError>> {
        let (locator, kid) = (locator.to_owned(), kid.to_owned());
        self.blocking(move |holder| holder.dispose(&locator, &kid, disposal, purpose))
    }

    fn check<'a>(&'a self, key: &'a SigningKey) -> HolderFuture<'a, Result<(), KeyError>> {
        let key = key.clone();
        self.blocking(move |holder| holder.check(&key).map_err(key_error))
    }

    fn import_pem<'a>(
        &'a self,
        pem: &'a [u8],
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<SigningKey, KeyError>> {
        let pem = pem.to_vec();
        self.blocking(move |holder| holder.import_pem(&pem, purpose).map_err(key_error))
    }

    /// The token was reached when it was opened, and its health says whether it still is.
    fn reachable(&self) -> HolderFuture<'_, Result<(), KeyError>> {
        let reached = match self.token.health() {
            Health::Healthy => Ok(()),
            Health::Unavailable { cause, .. } => Err(KeyError::Remote(RemoteSignError {
                unavailable: true,
                source: cause,
            })),
        };
        Box::pin(std::future::ready(reached))
    }

    fn health(&self) -> watch::Receiver<Health> {
        self.token.subscribe_health()
    }

    fn probe(&self) -> HolderFuture<'_, ()> {
        Box::pin(self.token.probe_now())
    }

    fn recover(&self) -> HolderFuture<'_, Recovery> {
        Box::pin(self.token.recover())
    }
}
