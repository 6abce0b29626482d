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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A signer that records which thread signs and how many sign at once, and holds each call
    /// until the test lets it go.
    struct Recording {
        threads: Mutex<Vec<std::thread::ThreadId>>,
        current: AtomicUsize,
        most: AtomicUsize,
        entered: std::sync::mpsc::SyncSender<()>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl RemoteSigner for Recording {
        fn algorithm(&self) -> Algorithm {
            Algorithm::ES256
        }
        fn public_key_spki(&self) -> &[u8] {
            &[]
        }
        fn sign(&self, input: &[u8]) -> Result<Vec<u8>, SignError> {
            self.threads
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.entered.send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
            self.current.fetch_sub(1, Ordering::SeqCst);
            Ok(input.to_vec())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn signing_runs_off_the_runtime_thread_and_within_the_bound() {
        let (entered_tx, entered_rx) = std::sync::mpsc::sync_channel(16);
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let recording = Arc::new(Recording {
            threads: Mutex::default(),
            current: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            entered: entered_tx,
            release: Mutex::new(release_rx),
        });
        let signer = AsyncSigner::new(recording.clone(), SigningThreads::new(2));
        let calls: Vec<_> = (0..5u8)
            .map(|i| {
                let signer = signer.clone();
                tokio::spawn(async move { signer.sign(vec![i]).await })
            })
            .collect();
        // Two calls get in; the others wait for a place (asynchronously: this runtime has one
        // thread, and it is free to run this test).
        let blocking = tokio::task::spawn_blocking(move || {
            entered_rx.recv().unwrap();
            entered_rx.recv().unwrap();
            entered_rx
        });
        let entered_rx = blocking.await.unwrap();
        assert_eq!(signer.threads.available(), 0);
        for _ in 0..5 {
            release_tx.send(()).unwrap();
        }
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await.unwrap().unwrap(), vec![i as u8]);
        }
        drop(entered_rx);
        assert_eq!(
            recording.most.load(Ordering::SeqCst),
            2,
            "more than the bound signed at once"
        );
        let runtime_thread = std::thread::current().id();
        assert!(
            recording
                .threads
                .lock()
                .unwrap()
                .iter()
                .all(|&t| t != runtime_thread)
        );
        assert_eq!(signer.threads.available(), 2);
    }

    #[test]
    fn hsm_errors_map_to_unavailable_or_failed() {
        let lost = HsmError::NoToken {
            uri: "pkcs11:token=t".into(),
            present: vec![],
        };
        assert!(SignError::from(lost).is_unavailable());
        let missing = HsmError::ObjectMissing {
            uri: "pkcs11:token=t;id=%01".into(),
            what: "private key",
        };
        let err = SignError::from(missing);
        assert!(!err.is_unavailable());
        assert_eq!(
            err.to_string(),
            "pkcs11:token=t;id=%01: no private key object with this CKA_ID on the token"
        );
    }
}
