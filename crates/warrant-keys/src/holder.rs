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
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use warrant_token::{KeyError, KeyType, SigningKey, VerifyingKey};

use crate::holder_health::{Health, Recovery, RecoveryPolicy};
use crate::purpose::KeyPurpose;
use crate::store_error::StoreError;

/// What a holder's async methods return: a future that may run on any of the runtime's threads.
pub type HolderFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Holds the private keys of a managed key set: one complete value (rustls' `CryptoProvider`
/// is the model), so that the stores, the manager and the binary hold an `Arc<dyn KeyHolder>`
/// and never ask which holder they have. Everything that asks the holder is async; a holder
/// whose calls block (a PKCS#11 token) runs them on tokio's blocking threads itself.
///
/// Health and recovery are part of it: [`health`](Self::health) follows whether it can be
/// called now, and [`keep_healthy`](crate::keep_healthy), one loop for every holder, drives
/// [`probe`](Self::probe) and [`recover`](Self::recover) under the holder's own
/// [`recovery_policy`](Self::recovery_policy). A holder in memory keeps the defaults: always
/// healthy, nothing to recover.
pub trait KeyHolder: Send + Sync + 'static {
    /// What holds the keys, for messages: `PKCS#11 token "warrant"`.
    fn describe(&self) -> String;

    /// What an operator is told about this holder (its flag, how to restore a key, whether it
    /// imports keys).
    fn advice(&self) -> &'static HolderAdvice;

    /// A new key of `key_type` for `purpose`, generated inside the holder; its private half
    /// never leaves it. The holder keeps what it needs to [vouch](Self::vouch) for the key, for
    /// that purpose and no other, for as long as the key is not [forgotten](Disposal::Forget),
    /// its retirement included. A generation that fails part way leaves nothing behind.
    fn generate(
        &self,
        key_type: KeyType,
        purpose: KeyPurpose,
    ) -> HolderFuture<'_, Result<SigningKey, KeyError>>;

    /// A handle on the key at `locator` (as [`warrant_token::RemoteKey::locator`] gave it), whose
    /// public key the store recorded as `public`. Touches nothing in the holder and checks
    /// nothing: a store [vouches](Self::vouch) for every key before it opens it.
    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError>;

    /// Confirms, by asking the holder itself and never the store, that it holds at `locator` a
    /// key it keeps for warrant, for `purpose`, whose public key is `public`: one that
    /// [`generate`] made for that purpose (or an import), whose private half may since have
    /// been destroyed at its retirement, and that was not [forgotten](Disposal::Forget).
    /// Whoever can write the store but has no access of its own to the holder must not be able
    /// to make this succeed for a key of their choosing, nor for a key warrant keeps for another
    /// purpose (a CA key listed in the token keys' store).
    ///
    /// An error whose [`KeyError::Remote`] is `unavailable` means the holder could not be
    /// asked now (the store is then neither believed nor refused, only not read yet); any other
    /// error means it does not vouch for the key.
    ///
    /// [`generate`]: Self::generate
    fn vouch<'a>(
        &'a self,
        locator: &'a str,
        public: &'a VerifyingKey,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<(), KeyError>>;

    /// Disposes of key `kid` at `locator`, but only if the holder finds that what is there is
    /// that key, kept for warrant for `purpose` (see [`vouch`](Self::vouch)); anything else is
    /// left alone ([`Disposed::NotTheKey`]). Disposing of a key already gone is
    /// [`Disposed::Gone`].
    fn dispose<'a>(
        &'a self,
        locator: &'a str,
        kid: &'a str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<Disposed, KeyError>>;

    /// Checks that `key`, as a store recorded it, can sign in the holder now (its private half
    /// present, usable and the recorded key). [`open`](Self::open) does not look (a retired
    /// key's private half is gone on purpose); a server checks the keys that sign now or will
    /// with this at startup ([`check_signing_keys`](crate::check_signing_keys)).
    fn check<'a>(&'a self, key: &'a SigningKey) -> HolderFuture<'a, Result<(), KeyError>> {
        let _ = key;
        Box::pin(std::future::ready(Ok(())))
    }

    /// The private key in `pem` (PKCS#8, PKCS#1 or SEC1), imported into the holder with the
    /// same kid, for `purpose`. A holder that cannot import refuses with
    /// [`HolderAdvice::import`].
    fn import_pem<'a>(
        &'a self,
        pem: &'a [u8],
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<SigningKey, KeyError>> {
        let _ = (pem, purpose);
        let refused = self
            .advice()
            .import
            .unwrap_or("this key holder imports no keys");
        Box::pin(std::future::ready(Err(KeyError::Remote(
            warrant_token::RemoteSignError {
                unavailable: false,
                source: Arc::new(std::io::Error::other(refused)),
            },
        ))))
    }

    /// Whether the holder can be called now; the error says why not. Opening a holder calls
    /// nothing in it (KMS is first asked when a key is), so a command that must know asks this.
    fn reachable(&self) -> HolderFuture<'_, Result<(), KeyError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Follows the holder's health (for readiness and [`keep_healthy`](crate::keep_healthy)).
    fn health(&self) -> watch::Receiver<Health> {
        watch::channel(Health::Healthy).1
    }

    /// While healthy, every [`RecoveryPolicy::probe_interval`]: looks for what broke while idle
    /// (a token gone, a key disabled behind warrant's back), updating the health.
    fn probe(&self) -> HolderFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// While unavailable: one attempt at being callable again.
    fn recover(&self) -> HolderFuture<'_, Recovery> {
        Box::pin(std::future::ready(Recovery::Recovered))
    }

    /// How [`keep_healthy`](crate::keep_healthy) waits for this holder.
    fn recovery_policy(&self) -> RecoveryPolicy {
        RecoveryPolicy::default()
    }
}

impl std::fmt::Debug for dyn KeyHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// What an operator is told about a holder: constant per kind of holder, so it is known even
/// when the holder could not be opened.
#[derive(Debug)]
pub struct HolderAdvice {
    /// The flag that names it: `--key-pkcs11-uri`.
    pub flag: &'static str,
    /// The holder in a sentence: `the PKCS#11 token`, `AWS KMS`.
    pub name: &'static str,
    /// The holder in a short phrase: `the token`, `KMS`.
    pub short: &'static str,
    /// What an operator can do in the holder to make a key that cannot sign sign again.
    pub restore: &'static str,
    /// Where the docs say more.
    pub docs: &'static str,
    /// Why it imports no keys; `None` when it does.
    pub import: Option<&'static str>,
    /// What happens to a revoked key the command could not dispose of (it could not reach the
    /// holder): who disposes of it, and when.
    pub retries: &'static str,
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
    /// (purpose, kid, locator) of every held key of the last store read that checked out.
    vouched: Arc<Mutex<BTreeSet<(KeyPurpose, String, String)>>>,
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
    /// for `purpose`, asking only about those the last good read listed for another purpose or
    /// not at all, and then remembers exactly `keys`: a key that left the store is asked about
    /// again should it come back. The first key it does not vouch for (or cannot be asked
    /// about) refuses the whole read: the error names it.
    pub(crate) async fn vouch_all(
        &self,
        store: &str,
        purpose: KeyPurpose,
        keys: &[(String, String, VerifyingKey)],
    ) -> Result<(), StoreError> {
        let known = self
            .vouched
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (kid, locator, public) in keys {
            if known.contains(&(purpose, kid.clone(), locator.clone())) {
                continue;
            }
            let vouched = self.holder.vouch(locator, public, purpose).await;
            vouched.map_err(|source| {
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
            .map(|(kid, locator, _)| (purpose, kid.clone(), locator.clone()))
            .collect();
        Ok(())
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.holder.describe())
    }
}
