//! Signing in the token: [`HsmKey`] is a key found there, and its signature is one `C_Sign` on
//! a pooled session. Blocking: async code signs through [`crate::Pkcs11Key`], on the token's
//! [`BlockingSemaphore`](crate::BlockingSemaphore).

use std::fmt;
use std::sync::Arc;

use aws_lc_rs::digest;
use cryptoki::error::Error as CkError;
use cryptoki::error::RvError;
use cryptoki::mechanism::Mechanism;
use warrant_token::{Algorithm, VerifyingKey};

use super::Token;
use crate::error::HsmError;
use crate::uri::Pkcs11Uri;

/// A key in a token: a reference (`CKA_ID`) and its public key, read from the token. Signing
/// happens in the token. Cheap to clone. `Debug` shows the kid and the URI.
#[derive(Clone)]
pub struct HsmKey {
    pub(super) token: Token,
    pub(super) id: Arc<[u8]>,
    pub(super) uri: Arc<Pkcs11Uri>,
    pub(super) public: VerifyingKey,
    pub(super) signature_len: usize,
}

impl fmt::Debug for HsmKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HsmKey")
            .field("kid", &self.public.kid())
            .field("uri", &self.uri.to_string())
            .finish()
    }
}

impl HsmKey {
    /// The key's `CKA_ID`.
    pub fn id(&self) -> &[u8] {
        &self.id
    }

    /// The key's URI (token, `id`, and `object` label when known).
    pub fn uri(&self) -> &Pkcs11Uri {
        &self.uri
    }

    /// The public key, with the kid kube-apiserver's rule gives it.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// The key ID.
    pub fn kid(&self) -> &str {
        self.public.kid()
    }

    /// The token the key is on.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Signs `signing_input` (a JWS's `header.payload`) in the token, returning the JWS
    /// signature bytes. Blocks: from async code use [`crate::Pkcs11Key`].
    pub fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, HsmError> {
        self.token.sign(self, signing_input)
    }
}

impl Token {
    /// Signs `message` with the private key `id`: RS256 as `CKM_SHA256_RSA_PKCS` over the
    /// message; ES256/384/512 hashed here (aws-lc) and signed with `CKM_ECDSA`, whose `r || s`
    /// output is already JWS's signature format. Blocks.
    fn sign(&self, key: &HsmKey, message: &[u8]) -> Result<Vec<u8>, HsmError> {
        let (mechanism, digest) = mechanism(key.public.algorithm(), message);
        let data = digest.as_ref().map_or(message, |d| d.as_ref());
        let signature = self.call("sign", |s, e| {
            let handle = self.private_handle(e, s, &key.uri, &key.id)?;
            match s.session.sign(&mechanism, handle, data) {
                // The object went away (destroyed by another replica, or the token changed):
                // find it again once.
                Err(CkError::Pkcs11(
                    RvError::ObjectHandleInvalid | RvError::KeyHandleInvalid,
                    _,
                )) => {
                    s.handles.remove(&key.id[..]);
                    let handle = self.private_handle(e, s, &key.uri, &key.id)?;
                    s.session.sign(&mechanism, handle, data)
                }
                other => other,
            }
            .map_err(|err| HsmError::pkcs11(&key.uri, "C_Sign", err))
        })?;
        if signature.len() != key.signature_len {
            return Err(HsmError::SignatureLength {
                uri: key.uri.to_string(),
                len: signature.len(),
                expected: key.signature_len,
            });
        }
        Ok(signature)
    }
}

/// How a key of `alg` signs `message` in a token: the mechanism, and the digest to sign when
/// the mechanism does not hash (ECDSA; hashed here with aws-lc), else `message` itself.
pub(crate) fn mechanism(
    alg: Algorithm,
    message: &[u8],
) -> (Mechanism<'static>, Option<digest::Digest>) {
    match alg {
        Algorithm::RS256 => (Mechanism::Sha256RsaPkcs, None),
        Algorithm::ES256 => (
            Mechanism::Ecdsa,
            Some(digest::digest(&digest::SHA256, message)),
        ),
        Algorithm::ES384 => (
            Mechanism::Ecdsa,
            Some(digest::digest(&digest::SHA384, message)),
        ),
        Algorithm::ES512 => (
            Mechanism::Ecdsa,
            Some(digest::digest(&digest::SHA512, message)),
        ),
    }
}
