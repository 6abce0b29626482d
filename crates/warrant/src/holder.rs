//! Where the managed keys' private halves are held, when not in the store: a PKCS#11 token
//! (`--key-pkcs11-uri`) or AWS KMS (`--key-kms-uri`), at most one. Each is a
//! `warrant_keys::KeyHolder` to the key store and a `RemoteKey` to the issuer; what differs
//! (opening, the startup check of the keys that sign, the recovery task) is dispatched here.

use std::error::Error;
use std::sync::Arc;

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;
use warrant_keys::{KeyHolder, KeyState, ManagedKeySet};
use warrant_token::SigningKey;

use crate::cli::{KmsArgs, Pkcs11Args};
use crate::hsm::{self, Pkcs11};
use crate::kms::{self, AwsKms};

/// The holder of the managed keys.
#[derive(Debug, Clone)]
pub(crate) enum Holder {
    /// `--key-pkcs11-uri`.
    Pkcs11(Pkcs11),
    /// `--key-kms-uri`.
    Kms(AwsKms),
}

impl Holder {
    /// The holder the flags name (clap lets at most one be given), or `None`. `registry` gets
    /// its metrics (`serve`).
    pub(crate) async fn open(
        pkcs11: &Pkcs11Args,
        kms: &KmsArgs,
        registry: Option<&mut Registry>,
    ) -> Result<Option<Holder>, Box<dyn Error>> {
        if kms.key_kms_uri.is_some() {
            return Ok(kms::open(kms, registry).await?.map(Holder::Kms));
        }
        Ok(hsm::open(pkcs11, registry).await?.map(Holder::Pkcs11))
    }

    /// The holder, as a key store takes it.
    pub(crate) fn key_holder(&self) -> Arc<dyn KeyHolder> {
        match self {
            Holder::Pkcs11(pkcs11) => pkcs11.key_holder(),
            Holder::Kms(kms) => Arc::new(kms.holder().clone()),
        }
    }

    /// Checks that every key of `keys` that signs at `now`, or is scheduled to, can sign in
    /// the holder (a startup error otherwise, naming the key).
    pub(crate) async fn check_signing_keys(
        &self,
        keys: &ManagedKeySet,
        now: Timestamp,
    ) -> Result<(), Box<dyn Error>> {
        match self {
            Holder::Pkcs11(pkcs11) => pkcs11.check_signing_keys(keys, now).await?,
            Holder::Kms(kms) => kms.check_signing_keys(keys, now).await?,
        }
        Ok(())
    }

    /// Starts the holder's recovery task; it stops when the handle is dropped.
    pub(crate) fn keep_healthy(&self) -> AbortOnDropHandle<()> {
        match self {
            Holder::Pkcs11(pkcs11) => pkcs11.keep_healthy(),
            Holder::Kms(kms) => kms.keep_healthy(),
        }
    }
}

/// The keys of `keys` that sign at `now` or are scheduled to (the active key and its published
/// successors), with their states: what a holder checks at startup. Retired keys are left out:
/// their private halves are destroyed (a token) or disabled (KMS) on purpose.
pub(crate) fn signing_keys(keys: &ManagedKeySet, now: Timestamp) -> Vec<(KeyState, SigningKey)> {
    keys.keys()
        .iter()
        .filter_map(|k| match keys.state_at(k.kid(), now)? {
            state @ (KeyState::Active | KeyState::Next) => Some((state, k.key().clone())),
            KeyState::Retired | KeyState::Removed => None,
        })
        .collect()
}

/// The first key of `keys` that signs at `now` or is scheduled to ([`signing_keys`]) that
/// `check` (a holder's blocking check) refuses, with its state and why; `None` if every one
/// can sign. The checks run on a blocking thread.
pub(crate) async fn first_unusable<C: Send + 'static>(
    keys: &ManagedKeySet,
    now: Timestamp,
    check: impl Fn(&SigningKey) -> Result<(), C> + Send + 'static,
) -> Result<Option<(String, KeyState, C)>, tokio::task::JoinError> {
    let signing = signing_keys(keys, now);
    tokio::task::spawn_blocking(move || {
        signing.into_iter().find_map(|(state, key)| {
            check(&key)
                .err()
                .map(|cause| (key.kid().to_owned(), state, cause))
        })
    })
    .await
}
