//! The startup check of a held key set: every key that signs now or is scheduled to must be
//! able to sign in its holder, or the server does not start, saying which key and what to do.

use std::error::Error;

use jiff::Timestamp;
use warrant_token::{KeyError, SigningKey};

use crate::holder::{HolderAdvice, KeyHolder};
use crate::lifecycle::{KeyState, ManagedKeySet};

/// The keys of `keys` that sign at `now` or are scheduled to (the active key and its published
/// successors), with their states: what a holder checks at startup. Retired keys are left out:
/// their private halves are destroyed (a token) or disabled (KMS) on purpose.
pub fn signing_keys(keys: &ManagedKeySet, now: Timestamp) -> Vec<(KeyState, SigningKey)> {
    keys.keys()
        .iter()
        .filter_map(|k| match keys.state_at(k.kid(), now)? {
            state @ (KeyState::Active | KeyState::Next) => Some((state, k.key().clone())),
            KeyState::Retired | KeyState::Removed => None,
        })
        .collect()
}

/// Checks that every key of `keys` that signs at `now`, or is scheduled to, can sign in
/// `holder` ([`KeyHolder::check`]). The first key that cannot is the error, naming it.
pub async fn check_signing_keys(
    holder: &dyn KeyHolder,
    keys: &ManagedKeySet,
    now: Timestamp,
) -> Result<(), KeyUnusable> {
    for (state, key) in signing_keys(keys, now) {
        if let Err(cause) = holder.check(&key).await {
            let unavailable = matches!(&cause, KeyError::Remote(e) if e.unavailable);
            return Err(KeyUnusable {
                advice: holder.advice(),
                kid: key.kid().to_owned(),
                state,
                cause: Box::new(cause),
                replaceable: !unavailable,
            });
        }
    }
    Ok(())
}

/// A key that signs now or is scheduled to (active or next) cannot sign in its holder: a
/// token's private object missing, extractable, not sensitive, of another type or size than
/// recorded, or another key; a KMS key disabled, pending deletion, deleted, of another spec,
/// or another key; or the holder cannot be reached.
#[derive(Debug, thiserror::Error)]
#[error("{}: the {state} key {kid} cannot sign: {cause}{}", .advice.flag, self.advice())]
pub struct KeyUnusable {
    advice: &'static HolderAdvice,
    /// The key's kid.
    kid: String,
    /// `active` or `next`.
    state: KeyState,
    /// What the holder says (it names the key's URI or ARN).
    #[source]
    cause: Box<dyn Error + Send + Sync>,
    /// False when the holder is only unavailable (nothing to replace).
    replaceable: bool,
}

impl KeyUnusable {
    /// What an operator can do about the key (nothing to add when the holder is only
    /// unavailable: that passes).
    fn advice(&self) -> String {
        if self.replaceable {
            format!(
                ". {}, or replace the key at once with `warrant keys revoke {}` ({})",
                self.advice.restore, self.kid, self.advice.docs
            )
        } else {
            String::new()
        }
    }
}
