//! Keys whose private half is held elsewhere (an HSM through PKCS#11, a cloud KMS): warrant
//! holds their public key and a [`RemoteKey`] that signs for it. A [`SigningKey`] made with
//! [`SigningKey::remote`] is used like any other (its kid, header, JWK and verification are
//! those of the public key); it signs only through the async methods
//! ([`SigningKey::sign_async`], [`SigningKey::sign_detached_async`]), because a remote signature
//! blocks on a device or a network and must not run on a request's thread.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A future a [`RemoteKey`] returns.
pub type RemoteSignature<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, RemoteSignError>> + Send + 'a>>;

/// A private key held elsewhere. Implementations run the signature off the async runtime's
/// worker threads (a pool of their own), and never log what they sign.
pub trait RemoteKey: Send + Sync + 'static {
    /// Signs `signing_input` (a JWS's `header.payload`) with the key's algorithm, returning the
    /// JWS signature: PKCS#1 v1.5 over SHA-256 for RS256, fixed-width `r || s` for ECDSA.
    fn sign(&self, signing_input: Vec<u8>) -> RemoteSignature<'_>;

    /// What holds the key, for messages: `PKCS#11 token "warrant", object id 0a1b…`.
    fn describe(&self) -> String;

    /// Where the private key is, as a URI that a key store records in place of the key
    /// (`pkcs11:token=warrant;id=%0a%1b;type=private`): enough to find it again, with nothing
    /// secret in it (no PIN, no module path).
    fn locator(&self) -> String;

    /// Why the key cannot sign now (its device is gone, its sessions are being reopened), or
    /// `None`. Readiness reports it; it is a cheap read, never a call to the device.
    fn unavailable(&self) -> Option<String>;
}

/// Why a remote key did not sign.
#[derive(Debug, Clone)]
pub struct RemoteSignError {
    /// True when the remote is not reachable now and a later attempt may succeed (TokenRequest
    /// answers 503 and Sign `UNAVAILABLE`); false when it refused this signature.
    pub unavailable: bool,
    /// What the remote said.
    pub source: Arc<dyn Error + Send + Sync>,
}

impl fmt::Display for RemoteSignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl Error for RemoteSignError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

impl PartialEq for RemoteSignError {
    fn eq(&self, other: &Self) -> bool {
        self.unavailable == other.unavailable && self.source.to_string() == other.source.to_string()
    }
}

impl Eq for RemoteSignError {}

impl fmt::Debug for dyn RemoteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}
