//! Where the managed keys' private halves are held, when not in the store: a PKCS#11 token
//! (`--key-pkcs11-uri`) or AWS KMS (`--key-kms-uri`), at most one. Each is opened from its
//! flags (`hsm.rs`, `kms.rs`) into one value, a [`Holder`]: an `Arc<dyn KeyHolder>` that
//! carries everything the binary asks of it (its keys, the startup check of the keys that
//! sign, its health and recovery, whether it imports, its advice), so nothing past this file
//! asks which holder it has.

use std::error::Error;
use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;
use warrant_keys::{HolderAdvice, KeyHolder};

use crate::cli::{KmsArgs, Pkcs11Args};
use crate::{hsm, kms};

/// The holder of the managed keys.
pub(crate) type Holder = Arc<dyn KeyHolder>;

/// A holder the flags name could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub(crate) struct OpenError {
    /// What an operator is told about the holder the flags name.
    pub(crate) advice: &'static HolderAdvice,
    /// It could not be reached now (the token away), rather than being misconfigured.
    pub(crate) unavailable: bool,
    /// Why (it names the flag).
    #[source]
    pub(crate) error: Box<dyn Error + Send + Sync>,
}

/// The holder the flags name (clap lets at most one be given), or `None`. `registry` gets its
/// metrics (`serve`).
pub(crate) async fn open(
    pkcs11: &Pkcs11Args,
    kms: &KmsArgs,
    registry: Option<&mut Registry>,
) -> Result<Option<Holder>, OpenError> {
    if kms.key_kms_uri.is_some() {
        return match kms::open(kms, registry).await {
            Ok(holder) => Ok(holder.map(|h| Arc::new(h) as Holder)),
            Err(error) => Err(OpenError {
                advice: &warrant_kms::ADVICE,
                unavailable: false,
                error: Box::new(error),
            }),
        };
    }
    match hsm::open(pkcs11, registry).await {
        Ok(holder) => Ok(holder.map(|h| Arc::new(h) as Holder)),
        Err(error) => Err(OpenError {
            advice: &warrant_hsm::ADVICE,
            unavailable: error.is_unavailable(),
            error: Box::new(error),
        }),
    }
}

/// Starts the holder's recovery task (warrant-keys' one loop, under the holder's own policy);
/// it stops when the handle is dropped.
pub(crate) fn keep_healthy(holder: &Holder) -> AbortOnDropHandle<()> {
    let holder = holder.clone();
    AbortOnDropHandle::new(tokio::spawn(async move {
        warrant_keys::keep_healthy(&*holder, holder.recovery_policy()).await;
    }))
}
