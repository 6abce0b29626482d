//! Why a key store could not be read or written: shared by the stores and by the encoding of a
//! key set into stored files (`stored.rs`), which each build on it.

use std::path::PathBuf;
use std::sync::Arc;

use warrant_token::KeyError;

use crate::lifecycle::LifecycleError;
use crate::purpose::KeyPurpose;

/// Why a store could not be read or written. Messages name the store and never contain key
/// material.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// Another writer changed the store since it was read.
    #[error("{store}: the key set was changed by another writer since it was read")]
    Conflict {
        /// The store.
        store: String,
    },
    /// A file could not be read or written.
    #[error("{store}: {path}: {source}")]
    Io {
        /// The store.
        store: String,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The store is somewhere others could change it: private keys are not kept there.
    #[error("{store}: {reason}")]
    Insecure {
        /// The store.
        store: String,
        /// What is wrong, and how to fix it.
        reason: String,
    },
    /// The stored data is not a valid key set.
    #[error("{store}: {reason}")]
    Corrupt {
        /// The store.
        store: String,
        /// What is wrong.
        reason: String,
    },
    /// A stored key does not load, or a key could not be encoded.
    #[error("{store}: key {kid}: {source}")]
    Key {
        /// The store.
        store: String,
        /// The key's ID as recorded.
        kid: String,
        /// What is wrong with it.
        #[source]
        source: KeyError,
    },
    /// The records are inconsistent.
    #[error("{store}: {source}")]
    Lifecycle {
        /// The store.
        store: String,
        /// What is inconsistent.
        #[source]
        source: LifecycleError,
    },
    /// The store records keys held in a [`crate::KeyHolder`] (an HSM), and this process has
    /// none, or a different one.
    #[error("{store}: key {kid} is held in {locator}, but warrant was started {instead}")]
    HeldElsewhere {
        /// The store.
        store: String,
        /// The key.
        kid: String,
        /// Where the store says its private key is.
        locator: String,
        /// What this process has instead, and what to do.
        instead: String,
    },
    /// The store holds private keys itself, and this process keeps keys in a
    /// [`crate::KeyHolder`]: they are never mixed.
    #[error(
        "{store}: key {kid} is a private key in the store, but warrant was started with keys in {holder}; import the store's keys into it first (warrant keys import), or start without it"
    )]
    PrivateKeyInStore {
        /// The store.
        store: String,
        /// The key.
        kid: String,
        /// The holder this process uses.
        holder: String,
    },
    /// The store lists a held key that its holder does not vouch for: whoever wrote the entry
    /// could write the store, not the holder. The whole store is refused (a running server keeps
    /// the keys in force); the entry must be taken out of the store, or the key restored in the
    /// holder.
    #[error(
        "{store}: key {kid} is not vouched for by {holder}: the store says it is held in {locator}, and {source}. The store is refused: remove the entry if warrant did not write it (it could make warrant trust a key it does not hold), or restore the key's objects from the holder's backup"
    )]
    NotVouched {
        /// The store.
        store: String,
        /// The entry's key ID.
        kid: String,
        /// Where the entry says the key is.
        locator: String,
        /// The holder.
        holder: String,
        /// What the holder said.
        #[source]
        source: Box<KeyError>,
    },
    /// The store records keys for another purpose than the one it was opened for: the token
    /// keys' store named as the pod certificate CA's, or the reverse (one directory or Secret
    /// for both), or an entry rewritten by whoever can write the store.
    #[error(
        "{store} holds {} (its keys.json says its purpose is {recorded}), and is read here for {}: each key set needs a store of its own (--key-dir or --key-secret for the token keys, --pod-certificate-ca-key-dir or --pod-certificate-ca-key-secret for the CA's)",
        recorded.keys(),
        expected.keys()
    )]
    OtherPurpose {
        /// The store.
        store: String,
        /// What its keys are for, as it says.
        recorded: KeyPurpose,
        /// What it is read for.
        expected: KeyPurpose,
    },
    /// A held key that this process has not vouched for yet could not be checked: its holder
    /// cannot be reached now. The store is not read until it can be.
    #[error("{store}: cannot check key {kid} with {holder}, which cannot be reached: {source}")]
    HolderUnavailable {
        /// The store.
        store: String,
        /// The entry's key ID.
        kid: String,
        /// The holder.
        holder: String,
        /// What failed.
        #[source]
        source: Box<KeyError>,
    },
    /// The store cannot be reached (an API server down, a test's simulated outage).
    #[error("{store}: unavailable: {reason}")]
    Unavailable {
        /// The store.
        store: String,
        /// Why.
        reason: String,
    },
}
