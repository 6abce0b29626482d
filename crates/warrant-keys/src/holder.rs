//! Where the private keys of a managed key set live when not in the store itself: a
//! [`KeyHolder`] (an HSM through PKCS#11; a cloud KMS would be another) generates keys inside
//! itself, finds them again from the locator the store records, vouches for them, and destroys
//! them when they stop signing.
//!
//! A store with a holder keeps, per key, its public key and the locator of its private key
//! (`pkcs11:token=…;id=…;type=private`), never key material: see `stored.rs`. A store written
//! with a holder refuses to be read without one, and the reverse, each saying what to do.
//!
//! **The rule: whatever a store entry claims about a held key is checked against the holder,
//! never believed.** The store holds nothing secret, so many can write it (whoever may `update`
//! the key Secret, whoever can write the key directory); that must not let them make warrant
//! trust, or destroy, a key the holder does not hold for it. So:
//!
//! - every held key a store lists, retired keys included, is [vouched for](KeyHolder::vouch) by
//!   the holder itself before warrant publishes or verifies with it; one entry that is not
//!   makes the whole store refused (the keys in force stay, see `KeyManager`), with an error
//!   naming the entry ([`StoreError::NotVouched`]). [`Held`] asks once per key and remembers
//!   the answer while the key stays in the store, so reading the store again (a revocation, a
//!   rotation by another replica) needs the holder only for keys it has not seen;
//! - a key is [disposed of](KeyHolder::dispose) only if the holder finds that the object at the
//!   locator is the recorded key; anything else is left alone and said
//!   ([`Disposed::NotTheKey`]).
//!
//! What proves a key, and what "the recorded key" means, is the holder's own: a PKCS#11 token
//! keeps a public key object only a logged-in session can create (`warrant-hsm`); a KMS would
//! ask its own API. The proof must live in the holder, not in a process's memory: another
//! replica, on another node, checks the same store against the same holder.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use warrant_token::{KeyError, KeyType, SigningKey, VerifyingKey};

use crate::store_error::StoreError;

/// Holds the private keys of a managed key set. Every method but [`open`](Self::open) and
/// [`describe`](Self::describe) may block (a device, a network): call them from a blocking
/// thread.
pub trait KeyHolder: Send + Sync + 'static {
    /// What holds the keys, for messages: `PKCS#11 token "warrant"`.
    fn describe(&self) -> String;

    /// A new key of `key_type`, generated inside the holder; its private half never leaves it.
    /// The holder keeps what it needs to [vouch](Self::vouch) for the key for as long as the key
    /// is not [forgotten](Disposal::Forget), its retirement included. A generation that fails
    /// part way leaves nothing behind.
    fn generate(&self, key_type: KeyType) -> Result<SigningKey, KeyError>;

    /// A handle on the key at `locator` (as [`warrant_token::RemoteKey::locator`] gave it), whose
    /// public key the store recorded as `public`. Touches nothing in the holder and checks
    /// nothing: a store [vouches](Self::vouch) for every key before it opens it.
    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError>;

    /// Confirms, by asking the holder itself and never the store, that it holds at `locator` a
    /// key it keeps for warrant whose public key is `public`: one that [`generate`] made (or an
    /// import), whose private half may since have been destroyed at its retirement, and that
    /// was not [forgotten](Disposal::Forget). Whoever can write the store but has no access of
    /// its own to the holder must not be able to make this succeed for a key of their choosing.
    ///
    /// An error whose [`KeyError::Remote`] is `unavailable` means the holder could not be
    /// asked now (the store is then neither believed nor refused, only not read yet); any other
    /// error means it does not vouch for the key.
    ///
    /// [`generate`]: Self::generate
    fn vouch(&self, locator: &str, public: &VerifyingKey) -> Result<(), KeyError>;

    /// Disposes of key `kid` at `locator`, but only if the holder finds that what is there is
    /// that key, kept for warrant (see [`vouch`](Self::vouch)); anything else is left alone
    /// ([`Disposed::NotTheKey`]). Disposing of a key already gone is [`Disposed::Gone`].
    fn dispose(&self, locator: &str, kid: &str, disposal: Disposal) -> Result<Disposed, KeyError>;
}

impl std::fmt::Debug for dyn KeyHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What to destroy of a key in its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposal {
    /// The key signs no more but still verifies (retired): destroy its private half, and keep
    /// what lets the holder vouch for it, since the store lists it until its tokens expire.
    Retire,
    /// The key verifies no more (removed once its tokens expired, or revoked): destroy all of
    /// it, so that no store can bring it back.
    Forget,
}

impl std::fmt::Display for Disposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Disposal::Retire => "retire",
            Disposal::Forget => "forget",
        })
    }
}

/// What a [`KeyHolder::dispose`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposed {
    /// Something of the key was destroyed.
    Destroyed,
    /// Nothing of the key was left to destroy (done before, by this process or another).
    Gone,
    /// What is at the locator is not the recorded key (another application's, or nothing warrant
    /// made): nothing was destroyed. Says why, naming the object, never key material.
    NotTheKey(String),
}

/// A key store's holder, with the keys it vouched for at the store's last good read. Cheap to
/// clone; clones share what was vouched for (a store and its clones are one store).
#[derive(Clone)]
pub struct Held {
    holder: Arc<dyn KeyHolder>,
    /// (kid, locator) of every held key of the last store read that checked out.
    vouched: Arc<Mutex<BTreeSet<(String, String)>>>,
}

impl Held {
    /// The keys of a store held by `holder`, none vouched for yet.
    pub fn new(holder: Arc<dyn KeyHolder>) -> Self {
        Held {
            holder,
            vouched: Arc::default(),
        }
    }

    /// The holder.
    pub fn holder(&self) -> &Arc<dyn KeyHolder> {
        &self.holder
    }

    /// Has the holder vouch for each of `keys` (kid, locator, public key) of one store read,
    /// asking only about those the last good read did not list, and then remembers exactly
    /// `keys`: a key that left the store is asked about again should it come back. The first
    /// key it does not vouch for (or cannot be asked about) refuses the whole read: the error
    /// names it. Blocks when it asks.
    pub(crate) fn vouch_all(
        &self,
        store: &str,
        keys: &[(String, String, VerifyingKey)],
    ) -> Result<(), StoreError> {
        let known = self
            .vouched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (kid, locator, public) in keys {
            if known.contains(&(kid.clone(), locator.clone())) {
                continue;
            }
            self.holder.vouch(locator, public).map_err(|source| {
                let unavailable = matches!(&source, KeyError::Remote(e) if e.unavailable);
                if unavailable {
                    StoreError::HolderUnavailable {
                        store: store.to_owned(),
                        kid: kid.clone(),
                        holder: self.holder.describe(),
                        source: Box::new(source),
                    }
                } else {
                    StoreError::NotVouched {
                        store: store.to_owned(),
                        kid: kid.clone(),
                        locator: locator.clone(),
                        holder: self.holder.describe(),
                        source: Box::new(source),
                    }
                }
            })?;
        }
        *self.vouched.lock().unwrap_or_else(PoisonError::into_inner) = keys
            .iter()
            .map(|(kid, locator, _)| (kid.clone(), locator.clone()))
            .collect();
        Ok(())
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.holder.describe())
    }
}
