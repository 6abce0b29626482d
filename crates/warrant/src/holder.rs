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
    /// the holder: a token's private object present, usable and the key the store recorded;
    /// a KMS key enabled, of the recorded spec and holding the recorded public key. The first
    /// key that cannot is the error (a startup error), naming it. The checks block, so they run
    /// on a blocking thread.
    pub(crate) async fn check_signing_keys(
        &self,
        keys: &ManagedKeySet,
        now: Timestamp,
    ) -> Result<(), Box<dyn Error>> {
        let signing = signing_keys(keys, now);
        let holder = self.clone();
        let unusable = tokio::task::spawn_blocking(move || {
            signing
                .into_iter()
                .find_map(|(state, key)| holder.check(&key, state).err())
        })
        .await
        .map_err(|e| format!("the thread checking the keys in their holder failed: {e}"))?;
        match unusable {
            None => Ok(()),
            Some(unusable) => Err(unusable.into()),
        }
    }

    /// Whether `key` (in `state`) can sign in the holder; blocks.
    fn check(&self, key: &SigningKey, state: KeyState) -> Result<(), KeyUnusable> {
        let unusable = |cause: Box<dyn Error + Send + Sync>,
                        unavailable: bool,
                        holder: &'static HolderText| KeyUnusable {
            holder,
            kid: key.kid().to_owned(),
            state,
            cause,
            replaceable: !unavailable,
        };
        match self {
            Holder::Pkcs11(pkcs11) => pkcs11.holder().check(key).map_err(|cause| {
                let unavailable = cause.is_unavailable();
                unusable(Box::new(cause), unavailable, &PKCS11)
            }),
            Holder::Kms(kms) => kms.holder().check(key).map_err(|cause| {
                let unavailable = cause.is_unavailable();
                unusable(Box::new(cause), unavailable, &KMS)
            }),
        }
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

/// What [`KeyUnusable`] says of a holder.
#[derive(Debug)]
struct HolderText {
    /// The flag that names it.
    flag: &'static str,
    /// What an operator can do in the holder to make the key sign again.
    restore: &'static str,
    /// Where the docs say more.
    docs: &'static str,
}

const PKCS11: HolderText = HolderText {
    flag: "--key-pkcs11-uri",
    restore: "Restore the object from the token's backup",
    docs: "docs/keys.md, \"Keys in an HSM\"",
};

const KMS: HolderText = HolderText {
    flag: "--key-kms-uri",
    restore: "Enable the key again in KMS (cancelling its deletion if scheduled)",
    docs: "docs/kms.md",
};

/// A key that signs now or is scheduled to (active or next) cannot sign in its holder: a
/// token's private object missing, extractable, not sensitive, of another type or size than
/// recorded, or another key; a KMS key disabled, pending deletion, deleted, of another spec,
/// or another key; or the holder cannot be reached.
#[derive(Debug, thiserror::Error)]
#[error("{}: the {state} key {kid} cannot sign: {cause}{}", .holder.flag, self.advice())]
pub(crate) struct KeyUnusable {
    holder: &'static HolderText,
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
                self.holder.restore, self.kid, self.holder.docs
            )
        } else {
            String::new()
        }
    }
}
