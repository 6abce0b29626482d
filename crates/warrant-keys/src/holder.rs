//! Where the private keys of a managed key set live when not in the store itself: a
//! [`KeyHolder`] (an HSM through PKCS#11; a cloud KMS would be another) generates keys inside
//! itself, finds them again from the locator the store records, and destroys them when they
//! stop signing.
//!
//! A store with a holder keeps, per key, its public key and the locator of its private key
//! (`pkcs11:token=…;id=…;type=private`), never key material: see `stored.rs`. A store written
//! with a holder refuses to be read without one, and the reverse, each saying what to do.

use warrant_token::{KeyError, KeyType, SigningKey, VerifyingKey};

/// Holds the private keys of a managed key set. Every method may block (a device, a network):
/// call them from a blocking thread.
pub trait KeyHolder: Send + Sync + 'static {
    /// What holds the keys, for messages: `PKCS#11 token "warrant"`.
    fn describe(&self) -> String;

    /// A new key of `key_type`, generated inside the holder; its private half never leaves it.
    /// A generation that fails part way leaves nothing behind.
    fn generate(&self, key_type: KeyType) -> Result<SigningKey, KeyError>;

    /// The key at `locator` (as [`warrant_token::RemoteKey::locator`] gave it), whose public key
    /// the store recorded as `public`. Does not require the private key to exist: a retired
    /// key's has been destroyed, and it is never asked to sign.
    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError>;

    /// Destroys `key`'s private half, when it signs no more. Destroying one already gone
    /// succeeds.
    fn destroy(&self, key: &SigningKey) -> Result<(), KeyError>;
}

impl std::fmt::Debug for dyn KeyHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}
