//! `warrant keys generate|list|rotate|revoke`: an operator's commands on a key directory or a key
//! Secret. They use the same store and lifecycle as `serve`, so they are safe beside running
//! servers (writes are atomic and checked against the version read) and the servers pick up
//! their changes.

use std::cell::{Cell, RefCell};
use std::error::Error;
use std::sync::Arc;

use jiff::Timestamp;
use warrant_clock::Clock;
use warrant_issuer::max_expiration_cap;
use warrant_keys::{
    Disposal, Disposed, Generate, HolderAdvice, KeyHolder, KeyPurpose, KeyState, KeyStore as _,
    ManagedKey, ManagedKeySet, Replacement, RotationPolicy, StoreError, Stored, check_signing_keys,
    with_held_keys,
};
use warrant_token::{ExpirationPolicy, SigningKey, signing_key_from_pem};

use crate::cli::{
    ImportedKeyLimits, KeysCommand, KeysGenerateArgs, KeysImportArgs, KeysListArgs, KeysRevokeArgs,
    KeysRotateArgs, ListFormat, RotationArgs, StoreArgs,
};
use crate::holder::Holder;
use crate::keys::{
    MANAGED_DEFAULT_MAX_TOKEN_SECONDS, Store, current_algorithm, key_type, policy,
    recorded_max_token_seconds,
};

/// How many times `rotate` and `revoke` recompute after losing a write to another writer.
const ATTEMPTS: usize = 5;

/// Runs a `warrant keys` command.
pub(crate) async fn run(command: KeysCommand) -> Result<(), Box<dyn Error>> {
    let now = Clock::System.now();
    match command {
        KeysCommand::Generate(args) => generate(&args, now).await,
        KeysCommand::List(args) => list(&args, now).await,
        KeysCommand::Rotate(args) => rotate(&args, now).await,
        KeysCommand::Revoke(args) => revoke(&args, now).await,
        KeysCommand::Import(args) => import(&args, now).await,
    }
}

/// The store the flags name, with the token of `--key-pkcs11-uri` or KMS of `--key-kms-uri`
/// (if given) as its holder.
async fn open_store(
    args: &StoreArgs,
    writer: &str,
) -> Result<(Store, Option<Holder>), Box<dyn Error>> {
    let holder = crate::holder::open(&args.pkcs11, &args.kms, None).await?;
    let store = Store::from_args(args, writer, holder.clone()).await?;
    Ok((store, holder))
}

mod about;
mod listing;
mod stand_in;

use listing::{print, print_about};
use stand_in::Unreachable;

/// Whether `revoke` reached the holder of `--key-pkcs11-uri` or `--key-kms-uri`.
enum Reached {
    /// It did.
    Yes,
    /// No holder was named.
    NoToken,
    /// It could not: the revocation is recorded without it.
    Unreachable {
        /// The holder, for messages: `the token`, `KMS`.
        what: &'static str,
        /// Why it could not be reached.
        cause: String,
        /// Who disposes of the revoked key instead, and when.
        retries: &'static str,
    },
}

/// The store for `revoke`: with the holder, as for every command; or, when the flags name a
/// holder that cannot be reached now, with [`Unreachable`] in its place, so that a leaked key
/// is taken out of the store (and so out of every JWKS) without it. Any other failure to open
/// the holder (a wrong PIN, a bad URI) is the command's error.
async fn open_store_to_revoke(args: &StoreArgs) -> Result<(Store, Reached), Box<dyn Error>> {
    const WRITER: &str = "warrant keys revoke";
    let (holder, reached) = match crate::holder::open(&args.pkcs11, &args.kms, None).await {
        Ok(None) => (None, Reached::NoToken),
        // Opening calls nothing in some holders (KMS is first asked when the store is read):
        // ask it now whether it answers.
        Ok(Some(holder)) => match holder.reachable().await {
            Ok(()) => (Some(holder), Reached::Yes),
            Err(error) => unreachable(holder.advice(), error.to_string()),
        },
        Err(error) if error.unavailable => {
            // What the holder said, without the flag the error names.
            let cause = error
                .error
                .source()
                .map_or_else(|| error.error.to_string(), ToString::to_string);
            unreachable(error.advice, cause)
        }
        Err(error) => return Err(error.into()),
    };
    Ok((Store::from_args(args, WRITER, holder).await?, reached))
}

/// [`Unreachable`] in place of the holder `advice` describes, which cannot be reached because
/// of `cause`.
fn unreachable(advice: &'static HolderAdvice, cause: String) -> (Option<Holder>, Reached) {
    tracing::warn!(%cause, "{} cannot be reached: recording the revocation without it", advice.short);
    let stand_in: Holder = Arc::new(Unreachable {
        advice,
        cause: cause.clone(),
    });
    let reached = Reached::Unreachable {
        what: advice.short,
        cause,
        retries: advice.retries,
    };
    (Some(stand_in), reached)
}

/// New keys for a lifecycle change: in the store's holder if it has one, else in memory. The
/// keys made in the holder are remembered, so those a lost write left unused are destroyed
/// again.
struct Generator {
    holder: Option<Holder>,
    made: RefCell<Vec<SigningKey>>,
    /// What the keys it made are for: the set's it last ran a change on.
    purpose: Cell<KeyPurpose>,
}

impl Generator {
    fn new(store: &Store) -> Self {
        Generator {
            holder: warrant_keys::KeyStore::holder(store),
            made: RefCell::new(Vec::new()),
            purpose: Cell::new(KeyPurpose::default()),
        }
    }

    /// Runs `change` (a rotation, a revocation) of `keys` with the new keys it asks for, made
    /// for what `keys` are for.
    async fn run<T>(
        &self,
        keys: &ManagedKeySet,
        mut change: impl FnMut(&mut Generate<'_>) -> T,
    ) -> T {
        let Some(holder) = &self.holder else {
            return change(&mut SigningKey::generate);
        };
        self.purpose.set(keys.purpose());
        with_held_keys(&**holder, keys.purpose(), |generate| {
            change(&mut |key_type| {
                let key = generate(key_type)?;
                // Only the holder's keys: the first run's, in memory, only count.
                if key.remote_key().is_some() {
                    self.made.borrow_mut().push(key.clone());
                }
                Ok(key)
            })
        })
        .await
    }

    /// Destroys, in the holder, the keys made here that `saved` does not hold (all of them
    /// when nothing was saved): a generation whose write was lost leaves no object behind.
    async fn clean_up(&self, saved: Option<&ManagedKeySet>) {
        let Some(holder) = &self.holder else { return };
        let made = self.made.borrow().clone();
        for key in &made {
            let kept = saved.is_some_and(|set| set.keys().iter().any(|k| k.kid() == key.kid()));
            if !kept {
                let purpose = self.purpose.get();
                dispose(
                    holder.as_ref(),
                    key,
                    (Disposal::Forget, purpose),
                    UNRECORDED,
                )
                .await;
            }
        }
    }
}

/// What happens to a key no store records when it cannot be destroyed.
const UNRECORDED: &str =
    "no key store records it, so nothing will retry: destroy it with the HSM's own tools";

/// Disposes of `key` in `holder` (see [`dispose_at`]); nothing for a key not held there.
async fn dispose(
    holder: &dyn KeyHolder,
    key: &SigningKey,
    disposal: (Disposal, KeyPurpose),
    after_failure: &str,
) {
    if let Some(remote) = key.remote_key() {
        let locator = remote.locator();
        dispose_at(holder, key.kid(), &locator, disposal, after_failure).await;
    }
}

/// Disposes of key `kid`, held at `locator` for a purpose, in `holder`, saying what happened:
/// logs "destroyed" only when something was, and on failure what happens next
/// (`after_failure`). Never fatal: the command's change is made either way.
async fn dispose_at(
    holder: &dyn KeyHolder,
    kid: &str,
    locator: &str,
    (disposal, purpose): (Disposal, KeyPurpose),
    after_failure: &str,
) {
    let described = holder.describe();
    match holder.dispose(locator, kid, disposal, purpose).await {
        Ok(Disposed::Destroyed) => {
            tracing::info!(%kid, holder = %described, %disposal, "key destroyed in the token");
        }
        Ok(Disposed::Gone) => {
            tracing::info!(%kid, holder = %described, "nothing of the key was left in the token to destroy");
        }
        Ok(Disposed::NotTheKey(reason)) => {
            tracing::error!(%kid, holder = %described, %reason, "not destroying what the key store names: it is not the recorded key");
        }
        Err(error) => {
            tracing::error!(%kid, holder = %described, %error, "cannot destroy the key in the token now; {after_failure}");
        }
    }
}

async fn load(store: &Store) -> Result<Stored, Box<dyn Error>> {
    store.load().await?.ok_or_else(|| {
        format!(
            "{} holds no managed keys: `warrant keys generate {1}` creates them (so does `warrant serve {1}` at its first start)",
            store.describe(),
            store.flag()
        )
        .into()
    })
}

async fn generate(args: &KeysGenerateArgs, now: Timestamp) -> Result<(), Box<dyn Error>> {
    let (store, holder) = open_store(&args.store, "warrant keys generate").await?;
    if let Some(stored) = store.load().await? {
        return Err(format!(
            "{} already holds {} managed keys: `warrant keys list` shows them, `warrant keys rotate` starts a rotation",
            store.describe(),
            stored.keys.keys().len()
        )
        .into());
    }
    let (key, max_token_seconds) = match &args.signing_key_file {
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|e| format!("failed to read {}: {e}", path.display()))?;
            let key = match &holder {
                Some(holder) => holder
                    .import_pem(&pem, KeyPurpose::Tokens)
                    .await
                    .map_err(|e| e.to_string()),
                None => signing_key_from_pem(&pem).map_err(|e| e.to_string()),
            }
            .map_err(|e| format!("{}: {e}", path.display()))?;
            // What kube-apiserver could have issued with it: its tokens must keep verifying.
            let longest = longest_issued(&args.limits)?;
            (key, longest)
        }
        None => (
            match &holder {
                Some(holder) => {
                    let key_type = key_type(args.key_algorithm);
                    holder.generate(key_type, KeyPurpose::Tokens).await?
                }
                None => SigningKey::generate(key_type(args.key_algorithm))?,
            },
            MANAGED_DEFAULT_MAX_TOKEN_SECONDS,
        ),
    };
    let set = ManagedKeySet::first(key.clone(), now, max_token_seconds);
    save_first(&store, &set, holder, &key).await?;
    tracing::info!(store = %store.describe(), "created the managed keys");
    print(ListFormat::Text, &set, None, now)
}

/// Saves the first keys of an empty store; if that fails, destroys the key made for it in the
/// holder.
async fn save_first(
    store: &Store,
    set: &ManagedKeySet,
    holder: Option<Holder>,
    key: &SigningKey,
) -> Result<(), Box<dyn Error>> {
    let Err(e) = store.save(set, None).await else {
        return Ok(());
    };
    if let Some(holder) = holder {
        let disposal = (Disposal::Forget, set.purpose());
        dispose(&*holder, key, disposal, UNRECORDED).await;
    }
    Err(match e {
        StoreError::Conflict { .. } => format!(
            "{} was created by another process meanwhile: `warrant keys list` shows its keys",
            store.describe()
        )
        .into(),
        other => other.into(),
    })
}

async fn list(args: &KeysListArgs, now: Timestamp) -> Result<(), Box<dyn Error>> {
    let (store, holder) = open_store(&args.store, "warrant keys list").await?;
    // With a Secret, beside its keys: who writes them, and this node's copy; the copy's keys
    // when the Secret cannot be read.
    let (keys, about) = match &store {
        Store::Secret(secret) => {
            let lease = crate::keys::lease_of(
                args.store
                    .key_secret
                    .as_ref()
                    .ok_or("--key-secret is required")?,
                args.key_lease.as_ref(),
            );
            let (keys, about) = about::about(
                secret,
                &lease,
                args.key_copy_dir.as_deref(),
                holder,
                now,
                || load(&store),
            )
            .await?;
            (keys, Some(about))
        }
        _ => (load(&store).await?.keys, None),
    };
    let policy = policy(
        &args.rotation,
        current_algorithm(&keys, now),
        recorded_max_token_seconds(&keys, now),
    );
    policy.validate()?;
    print_about(args.output, &keys, Some(&policy), now, about.as_ref())
}

/// What [`update`] did.
enum Updated<T> {
    /// `change` found nothing to do: the keys as read.
    Unchanged(ManagedKeySet),
    /// The changed keys were saved; with what `change` said about them.
    Saved(ManagedKeySet, T),
}

/// An operator's change to the store: reads the keys, lets `change` compute new ones under the
/// policy the flags give (`None`: nothing to do), and saves them against the version read,
/// computing again from a fresh read when another writer got there first.
async fn update<T>(
    store: &Store,
    rotation: &RotationArgs,
    now: Timestamp,
    mut change: impl AsyncFnMut(
        &ManagedKeySet,
        &RotationPolicy,
    ) -> Result<Option<(ManagedKeySet, T)>, Box<dyn Error>>,
) -> Result<(Updated<T>, RotationPolicy), Box<dyn Error>> {
    for _ in 0..ATTEMPTS {
        let stored = load(store).await?;
        let policy = policy(
            rotation,
            current_algorithm(&stored.keys, now),
            recorded_max_token_seconds(&stored.keys, now),
        );
        policy.validate()?;
        let Some((changed, said)) = change(&stored.keys, &policy).await? else {
            return Ok((Updated::Unchanged(stored.keys), policy));
        };
        match store.save(&changed, Some(&stored.version)).await {
            Ok(_) => return Ok((Updated::Saved(changed, said), policy)),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(format!(
        "{}: another writer kept changing the keys; try again",
        store.describe()
    )
    .into())
}

async fn rotate(args: &KeysRotateArgs, now: Timestamp) -> Result<(), Box<dyn Error>> {
    let (store, holder) = open_store(&args.store, "warrant keys rotate").await?;
    // A rotation keeps the active key signing until its successor activates: refuse to plan
    // one around a key that cannot sign in its holder (revoke replaces such a key at once).
    if let Some(holder) = &holder {
        check_signing_keys(&**holder, &load(&store).await?.keys, now).await?;
    }
    let generator = Generator::new(&store);
    let result = update(&store, &args.rotation, now, async |keys, policy| {
        // Replicas sharing a Secret need longer to hear of the new key before it signs.
        if matches!(store, Store::Secret(_)) {
            policy.validate_shared()?;
        }
        Ok(generator
            .run(keys, |generate| keys.rotate_early(policy, now, generate))
            .await?
            .map(|rotated| (rotated, ())))
    })
    .await;
    generator
        .clean_up(match &result {
            Ok((Updated::Saved(keys, ()), _)) => Some(keys),
            _ => None,
        })
        .await;
    let (updated, policy) = result?;
    let keys = match updated {
        Updated::Unchanged(keys) => {
            tracing::info!(
                "nothing to bring forward: the next key already activates as early as --key-publish-ahead allows"
            );
            keys
        }
        Updated::Saved(rotated, ()) => {
            if let Some(next) = rotated
                .schedule(now)
                .iter()
                .find(|k| k.state == warrant_keys::KeyState::Next)
            {
                tracing::info!(kid = %next.kid, activate_at = %next.activate_at, "rotation started: the next key is published now and signs from its activation time");
            }
            rotated
        }
    };
    print(args.output, &keys, Some(&policy), now)
}

async fn revoke(args: &KeysRevokeArgs, now: Timestamp) -> Result<(), Box<dyn Error>> {
    let (store, reached) = open_store_to_revoke(&args.store).await?;
    let generator = Generator::new(&store);
    // Never refused for want of a successor (the holder away): the revocation is about the
    // relying parties; signing stops until the store's writer can make one.
    let result = update(&store, &args.rotation, now, async |keys, policy| {
        let revoked = generator
            .run(keys, |generate| {
                keys.revoke(&args.kid, policy, now, generate)
            })
            .await?;
        Ok(Some((revoked.keys.clone(), revoked)))
    })
    .await;
    generator
        .clean_up(match &result {
            Ok((Updated::Saved(keys, _), _)) => Some(keys),
            _ => None,
        })
        .await;
    let (updated, policy) = result?;
    let Updated::Saved(keys, revoked) = updated else {
        return Err("the revocation changed nothing".into());
    };
    // A revoked key must never sign again, nor be listed again by any store: destroyed at once
    // if the token can be reached, else by the store's writer (which retries until it is gone).
    let record = keys.revocations().iter().find(|r| r.kid == args.kid);
    if let (Some(holder), Some(locator)) = (
        warrant_keys::KeyStore::holder(&store),
        record.and_then(|r| r.held_in.as_deref()),
    ) {
        match &reached {
            Reached::Unreachable {
                what,
                cause,
                retries,
            } => {
                tracing::warn!(
                    kid = %args.kid, %cause,
                    "{what} cannot be reached: the revocation is recorded, and every server refuses the key as soon as it sees it; {retries}"
                );
            }
            Reached::Yes | Reached::NoToken => {
                let retries = holder.advice().retries;
                dispose_at(
                    holder.as_ref(),
                    &args.kid,
                    locator,
                    (Disposal::Forget, keys.purpose()),
                    retries,
                )
                .await;
            }
        }
    }
    tracing::error!(
        kid = %args.kid,
        was = %revoked.was,
        store = %store.describe(),
        "KEY REVOKED: it is out of the published keys, and every server reading this store refuses its tokens as soon as it sees the change"
    );
    say_replacement(revoked.replaced_by.as_ref());
    tracing::warn!(
        "relying parties that cached the JWKS trust the revoked key until they fetch it again (at most the documents' max-age, an hour); see docs/keys.md"
    );
    print(args.output, &keys, Some(&policy), now)
}

/// Says in the log which key signs after a revoked one, if it was signing.
fn say_replacement(replaced_by: Option<&Replacement>) {
    match replaced_by {
        Some(Replacement::BroughtForward { kid, published_at }) => tracing::warn!(
            %kid, %published_at,
            "the next key signs from now on, without waiting for publish-ahead: a relying party that has not fetched the JWKS since it was published refuses its tokens until it does"
        ),
        Some(Replacement::New { kid }) => tracing::warn!(
            %kid,
            "a new key signs from now on, without waiting for publish-ahead: a relying party refuses its tokens until it fetches the JWKS again"
        ),
        Some(Replacement::Pending { cause }) => tracing::error!(
            %cause,
            "NO KEY SIGNS from now on: the revoked key was signing, no successor was published, and none could be made; TokenRequest answers 503 and the signer's Sign UNAVAILABLE, saying why, until the warrant server that writes this store makes one, which it does as soon as the key holder answers"
        ),
        None => {}
    }
}

/// `warrant keys import`: every key of a PEM store into the token, with the same kids and
/// schedule, or one PEM file as the first key of an empty store.
async fn import(args: &KeysImportArgs, now: Timestamp) -> Result<(), Box<dyn Error>> {
    let (held, holder) = open_store(&args.store, "warrant keys import").await?;
    let Some(holder) = holder else {
        return Err("warrant keys import needs --key-pkcs11-uri: the token to import into".into());
    };
    if let Some(refused) = holder.advice().import {
        return Err(refused.into());
    }
    if let Some(path) = &args.from_pem {
        if let Some(stored) = held.load().await? {
            return Err(format!(
                "{} already holds {} managed keys: --from-pem imports the first key of an empty store (without --from-pem, `warrant keys import` moves a PEM store's keys into the token)",
                held.describe(),
                stored.keys.keys().len()
            )
            .into());
        }
        let pem =
            std::fs::read(path).map_err(|e| format!("failed to read {}: {e}", path.display()))?;
        let key = holder
            .import_pem(&pem, KeyPurpose::Tokens)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let longest = longest_issued(&args.limits)?;
        let set = ManagedKeySet::first(key.clone(), now, longest);
        save_first(&held, &set, Some(holder.clone()), &key).await?;
        tracing::info!(store = %held.describe(), holder = %holder.describe(), kid = %key.kid(), "imported the signing key into the token");
        return print(ListFormat::Text, &set, None, now);
    }
    // The same store read as it is: with private keys in it.
    let plain = Store::from_args(&args.store, "warrant keys import", None).await?;
    let stored = load(&plain).await?;
    let purpose = stored.keys.purpose();
    let mut imported = Vec::with_capacity(stored.keys.keys().len());
    let mut made = Vec::new();
    for key in stored.keys.keys() {
        let pem = key.key().to_pkcs8_pem()?;
        let in_token = match holder.import_pem(pem.as_str().as_bytes(), purpose).await {
            Ok(k) => k,
            Err(e) => {
                forget_unrecorded(&*holder, &made, purpose).await;
                return Err(format!("key {}: {e}", key.kid()).into());
            }
        };
        made.push(in_token.clone());
        imported.push(ManagedKey::new(
            in_token,
            key.published_at(),
            key.activate_at(),
            key.max_token_seconds(),
        ));
    }
    let set = ManagedKeySet::new(imported)?
        .with_revocations(stored.keys.revocations().to_vec())?
        .with_purpose(purpose);
    if let Err(e) = held.save(&set, Some(&stored.version)).await {
        forget_unrecorded(&*holder, &made, purpose).await;
        return Err(e.into());
    }
    // Keys that sign no more need no private half in the token either.
    for key in set.keys() {
        if set.state_at(key.kid(), now) == Some(KeyState::Retired) {
            dispose(
                &*holder,
                key.key(),
                (Disposal::Retire, purpose),
                holder.advice().retries,
            )
            .await;
        }
    }
    tracing::info!(store = %held.describe(), holder = %holder.describe(), keys = set.keys().len(), "imported the store's keys into the token; the store now records public keys and their locators only (delete any backup of the old key files)");
    print(ListFormat::Text, &set, None, now)
}

/// Destroys keys imported for `purpose` for a store write that did not happen.
async fn forget_unrecorded(holder: &dyn KeyHolder, keys: &[SigningKey], purpose: KeyPurpose) {
    for key in keys {
        dispose(holder, key, (Disposal::Forget, purpose), UNRECORDED).await;
    }
}

/// The longest token kube-apiserver could have issued with an imported key, from the
/// `--service-account-max-token-expiration` (0 or absent: no cap) and
/// `--service-account-extend-token-expiration` it used: how long the key stays published once
/// retired, so its tokens keep verifying.
fn longest_issued(limits: &ImportedKeyLimits) -> Result<i64, warrant_issuer::SettingsError> {
    Ok(ExpirationPolicy {
        max_seconds: max_expiration_cap(limits.max_token_expiration)?,
        extend: limits.extend_token_expiration,
        ..ExpirationPolicy::default()
    }
    .longest_token_seconds())
}
