//! The shape every remote signer has, and how async code uses one without blocking the runtime.
//!
//! A remote signer holds no private key: it knows its algorithm and public key, and asks
//! something else (a PKCS#11 token here; a cloud KMS's `Sign` API would be one more
//! implementation) to sign a JWS signing input. Calls block: a network HSM or a KMS takes
//! milliseconds. [`SigningThreads`] runs them on tokio's blocking threads, at most `limit` at
//! once (for a token, one per session), so a slow HSM never stalls the runtime's workers and a
//! burst waits for a free session in an async queue instead of piling up threads.

use std::sync::Arc;

use tokio::sync::Semaphore;
use warrant_token::Algorithm;

use crate::error::HsmError;
use crate::token::HsmKey;

/// A boxed error with its cause chain, the cause of a [`SignError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a remote signer did not sign.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The signer cannot sign now and may soon (session lost, token absent, recovering,
    /// throttled): HTTP 503, gRPC `UNAVAILABLE`.
    #[error(transparent)]
    Unavailable(BoxError),
    /// Signing failed in a way retrying will not fix (the key is gone or unusable).
    #[error(transparent)]
    Failed(BoxError),
}

impl SignError {
    /// True for [`SignError::Unavailable`].
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SignError::Unavailable(_))
    }
}

impl From<HsmError> for SignError {
    fn from(err: HsmError) -> Self {
        if err.is_unavailable() {
            SignError::Unavailable(Box::new(err))
        } else {
            SignError::Failed(Box::new(err))
        }
    }
}

/// A key whose private half lives elsewhere. Methods block.
pub trait RemoteSigner: Send + Sync + 'static {
    /// The JWS algorithm the key signs with.
    fn algorithm(&self) -> Algorithm;
    /// The DER SubjectPublicKeyInfo of the public key (what the kid is computed from).
    fn public_key_spki(&self) -> &[u8];
    /// Signs `signing_input` (`base64url(header).base64url(payload)`), returning the JWS
    /// signature bytes (PKCS#1 v1.5 for RS256, fixed-width `r || s` for ES256/384/512).
    fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, SignError>;
}

impl RemoteSigner for HsmKey {
    fn algorithm(&self) -> Algorithm {
        self.verifying_key().algorithm()
    }

    fn public_key_spki(&self) -> &[u8] {
        self.verifying_key().spki_der()
    }

    fn sign(&self, signing_input: &[u8]) -> Result<Vec<u8>, SignError> {
        HsmKey::sign(self, signing_input).map_err(SignError::from)
    }
}

/// A bounded set of blocking threads for remote signing. Cheap to clone; clones share the bound.
#[derive(Debug, Clone)]
pub struct SigningThreads {
    permits: Arc<Semaphore>,
}

impl SigningThreads {
    /// At most `limit` (at least 1) signatures in progress at once.
    pub fn new(limit: usize) -> Self {
        SigningThreads {
            permits: Arc::new(Semaphore::new(limit.max(1))),
        }
    }

    /// Signs on a blocking thread once one of the `limit` places is free. A caller that stops
    /// waiting does not free the place early: the signature in progress keeps it until done.
    pub async fn sign(
        &self,
        signer: Arc<dyn RemoteSigner>,
        signing_input: Vec<u8>,
    ) -> Result<Vec<u8>, SignError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|closed| SignError::Unavailable(Box::new(closed)))?;
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            signer.sign(&signing_input)
        });
        match job.await {
            Ok(result) => result,
            Err(join) => Err(SignError::Failed(Box::new(join))),
        }
    }

    /// How many more signatures could start now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

/// A remote signer for async code: [`RemoteSigner::sign`] on [`SigningThreads`].
#[derive(Clone)]
pub struct AsyncSigner {
    signer: Arc<dyn RemoteSigner>,
    threads: SigningThreads,
}

impl std::fmt::Debug for AsyncSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSigner")
            .field("alg", &self.signer.algorithm())
            .field("kid", &warrant_token::key_id(self.signer.public_key_spki()))
            .finish()
    }
}

impl AsyncSigner {
    /// `signer`, signing on `threads`.
    pub fn new(signer: Arc<dyn RemoteSigner>, threads: SigningThreads) -> Self {
        AsyncSigner { signer, threads }
    }

    /// A key on a token, signing on the token's threads (one per session).
    pub fn for_hsm_key(key: HsmKey) -> Self {
        let threads = key.token().signing_threads().clone();
        AsyncSigner::new(Arc::new(key), threads)
    }

    /// The signer.
    pub fn signer(&self) -> &Arc<dyn RemoteSigner> {
        &self.signer
    }

    /// Signs `signing_input` off the runtime's worker threads.
    pub async fn sign(&self, signing_input: impl Into<Vec<u8>>) -> Result<Vec<u8>, SignError> {
        self.threads
            .sign(self.signer.clone(), signing_input.into())
            .await
    }
}
