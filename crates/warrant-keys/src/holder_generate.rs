//! New keys for the lifecycle's pure functions, made by an async holder.
//!
//! A rotation, an operator's early rotation and a revocation are pure functions of the
//! records, the policy and `now`, which ask a `generate` callback for each new key they need
//! (randomness is its only effect, see `lifecycle.rs`). A holder makes keys asynchronously (a
//! network call to KMS, a PKCS#11 call on a blocking thread), and a pure function cannot await.
//! So [`with_held_keys`] runs the change twice: once with keys made in memory, only to learn
//! which keys it asks for (they are thrown away; the change records keys and nothing else about
//! them), then the holder makes those keys, and the change runs again with them, in the same
//! order. Being pure, it asks for the same keys the second time.

use std::collections::VecDeque;
use std::sync::Arc;

use warrant_token::{KeyError, KeyType, RemoteSignError, SigningKey};

use crate::holder::KeyHolder;
use crate::purpose::KeyPurpose;

/// What a change asks for each new key.
pub type Generate<'a> = dyn FnMut(KeyType) -> Result<SigningKey, KeyError> + 'a;

/// Runs `change` with new keys made in `holder` for `purpose` (see the module's doc). The holder stops at
/// its first error, which the change then gets for that key and for any it asks for after
/// (the holder is not asked again within one change).
pub async fn with_held_keys<T>(
    holder: &dyn KeyHolder,
    purpose: KeyPurpose,
    mut change: impl FnMut(&mut Generate<'_>) -> T,
) -> T {
    let mut asked = Vec::new();
    // In memory and P-256, whatever was asked: cheap, and only counted.
    let _ = change(&mut |key_type| {
        asked.push(key_type);
        SigningKey::generate(KeyType::P256)
    });
    let mut made = VecDeque::with_capacity(asked.len());
    let mut failed = None;
    for key_type in asked {
        match holder.generate(key_type, purpose).await {
            Ok(key) => made.push_back(key),
            Err(error) => {
                failed = Some(error);
                break;
            }
        }
    }
    change(&mut |_| match made.pop_front() {
        Some(key) => Ok(key),
        None => Err(failed.clone().unwrap_or_else(|| {
            KeyError::Remote(RemoteSignError {
                unavailable: false,
                source: Arc::new(std::io::Error::other(
                    "the change asked for more keys than it did when it was first run",
                )),
            })
        })),
    })
}
