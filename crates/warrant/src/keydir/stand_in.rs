//! The stand-in `warrant keys revoke` reads a store of held keys through when their holder
//! cannot be reached.

use std::sync::Arc;

use warrant_keys::{Disposal, Disposed, HolderAdvice, HolderFuture, KeyHolder, KeyPurpose};
use warrant_token::{
    KeyError, KeyType, RemoteKey, RemoteSignError, RemoteSignature, SigningKey, VerifyingKey,
};

/// Stands in for a holder (a token, KMS) that cannot be reached, for `revoke` only: it reads a
/// store of held keys as it is, so that a key can be taken out of it. It vouches for every
/// entry without asking, which is sound only because of what `revoke` does with what it reads:
/// it writes the same entries back minus the revoked key (and its files), adds a revocation
/// (and, for a signing key with no successor, stops signing), and never signs or publishes;
/// every server vouches for each entry with its holder when it reads the result, as it does
/// for any write. Its keys cannot sign, and it makes and destroys nothing.
pub(super) struct Unreachable {
    /// The holder it stands in for.
    pub(super) advice: &'static HolderAdvice,
    pub(super) cause: String,
}

impl Unreachable {
    fn error(&self) -> KeyError {
        KeyError::Remote(RemoteSignError {
            unavailable: true,
            source: Arc::new(std::io::Error::other(format!(
                "{} cannot be reached: {}",
                self.advice.name, self.cause
            ))),
        })
    }
}

impl KeyHolder for Unreachable {
    fn describe(&self) -> String {
        format!("{} (unreachable)", self.advice.name)
    }

    fn advice(&self) -> &'static HolderAdvice {
        self.advice
    }

    fn generate(
        &self,
        _: KeyType,
        _: KeyPurpose,
    ) -> HolderFuture<'_, Result<SigningKey, KeyError>> {
        Box::pin(std::future::ready(Err(self.error())))
    }

    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError> {
        let key = UnreachableKey {
            holder: self.advice.name,
            locator: locator.to_owned(),
            cause: self.cause.clone(),
        };
        Ok(SigningKey::remote(public, Arc::new(key)))
    }

    fn vouch<'a>(
        &'a self,
        _: &'a str,
        _: &'a VerifyingKey,
        _: KeyPurpose,
    ) -> HolderFuture<'a, Result<(), KeyError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn dispose<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Disposal,
        _: KeyPurpose,
    ) -> HolderFuture<'a, Result<Disposed, KeyError>> {
        Box::pin(std::future::ready(Err(self.error())))
    }
}

/// A key [`Unreachable`] read: it keeps its locator, so the store is written back unchanged.
struct UnreachableKey {
    holder: &'static str,
    locator: String,
    cause: String,
}

impl RemoteKey for UnreachableKey {
    fn sign(&self, _: Vec<u8>) -> RemoteSignature<'_> {
        let (holder, cause) = (self.holder, self.cause.clone());
        Box::pin(async move {
            Err(RemoteSignError {
                unavailable: true,
                source: Arc::new(std::io::Error::other(format!(
                    "{holder} cannot be reached: {cause}"
                ))),
            })
        })
    }

    fn describe(&self) -> String {
        format!("{} (unreachable), {}", self.holder, self.locator)
    }

    fn locator(&self) -> String {
        self.locator.clone()
    }

    fn unavailable(&self) -> Option<String> {
        Some(self.cause.clone())
    }
}
