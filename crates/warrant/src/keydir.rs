//! `warrant keys generate|list|rotate|revoke`: an operator's commands on a key directory or a key
//! Secret. They use the same store and lifecycle as `serve`, so they are safe beside running
//! servers (writes are atomic and checked against the version read) and the servers pick up
//! their changes.

use std::error::Error;
use std::io::Write as _;

use jiff::Timestamp;
use serde_json::json;
use warrant_clock::Clock;
use warrant_issuer::validate_max_expiration;
use warrant_keys::{
    KeySchedule, KeyStore as _, ManagedKeySet, Replacement, RotationPolicy, StoreError, Stored,
};
use warrant_token::{ExpirationPolicy, SigningKey, signing_key_from_pem};

use crate::cli::{
    KeysCommand, KeysGenerateArgs, KeysListArgs, KeysRevokeArgs, KeysRotateArgs, ListFormat,
    RotationArgs,
};
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
    let store = Store::from_args(&args.store, "warrant keys generate").await?;
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
            let key = signing_key_from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()))?;
            // What kube-apiserver could have issued with it: its tokens must keep verifying.
            let max_seconds = match args.max_token_expiration {
                None | Some(0) => None,
                Some(seconds) => {
                    validate_max_expiration(seconds)?;
                    Some(seconds)
                }
            };
            let issued_under = ExpirationPolicy {
                max_seconds,
                extend: args.extend_token_expiration,
                ..ExpirationPolicy::default()
            };
            (key, issued_under.longest_token_seconds())
        }
        None => (
            SigningKey::generate(key_type(args.key_algorithm))?,
            MANAGED_DEFAULT_MAX_TOKEN_SECONDS,
        ),
    };
    let set = ManagedKeySet::first(key, now, max_token_seconds);
    store.save(&set, None).await.map_err(|e| match e {
        StoreError::Conflict { .. } => format!(
            "{} was created by another process meanwhile: `warrant keys list` shows its keys",
            store.describe()
        ),
        other => other.to_string(),
    })?;
    tracing::info!(store = %store.describe(), "created the managed keys");
    print(ListFormat::Text, &set, None, now)
}

async fn list(args: &KeysListArgs, now: Timestamp) -> Result<(), Box<dyn Error>> {
    let stored = load(&Store::from_args(&args.store, "warrant keys list").await?).await?;
    let policy = policy(
        &args.rotation,
        current_algorithm(&stored.keys, now),
        recorded_max_token_seconds(&stored.keys, now),
    );
    policy.validate()?;
    print(args.output, &stored.keys, Some(&policy), now)
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
    mut change: impl FnMut(
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
        let Some((changed, said)) = change(&stored.keys, &policy)? else {
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
    let store = Store::from_args(&args.store, "warrant keys rotate").await?;
    let (updated, policy) = update(&store, &args.rotation, now, |keys, policy| {
        Ok(keys
            .rotate_early(policy, now, SigningKey::generate)?
            .map(|rotated| (rotated, ())))
    })
    .await?;
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
    let store = Store::from_args(&args.store, "warrant keys revoke").await?;
    let (updated, policy) = update(&store, &args.rotation, now, |keys, policy| {
        let revoked = keys.revoke(&args.kid, policy, now, SigningKey::generate)?;
        Ok(Some((revoked.keys.clone(), revoked)))
    })
    .await?;
    let Updated::Saved(keys, revoked) = updated else {
        return Err("the revocation changed nothing".into());
    };
    tracing::error!(
        kid = %args.kid,
        was = %revoked.was,
        store = %store.describe(),
        "KEY REVOKED: it is out of the published keys, and every server reading this store refuses its tokens as soon as it sees the change"
    );
    match &revoked.replaced_by {
        Some(Replacement::BroughtForward { kid, published_at }) => tracing::warn!(
            %kid, %published_at,
            "the next key signs from now on, without waiting for publish-ahead: a relying party that has not fetched the JWKS since it was published refuses its tokens until it does"
        ),
        Some(Replacement::New { kid }) => tracing::warn!(
            %kid,
            "a new key signs from now on, without waiting for publish-ahead: a relying party refuses its tokens until it fetches the JWKS again"
        ),
        None => {}
    }
    tracing::warn!(
        "relying parties that cached the JWKS trust the revoked key until they fetch it again (at most the documents' max-age, an hour); see docs/keys.md"
    );
    print(args.output, &keys, Some(&policy), now)
}

fn time(t: Option<Timestamp>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| t.to_string())
}

/// Prints a key set's schedule at `now`: a table, or JSON. With a policy, the planned
/// successor's times are shown for the last key (`~`: planned, not yet in the store).
fn print(
    format: ListFormat,
    keys: &ManagedKeySet,
    policy: Option<&RotationPolicy>,
    now: Timestamp,
) -> Result<(), Box<dyn Error>> {
    let schedule = keys.schedule(now);
    let successor = policy.and_then(|p| keys.successor(p, now));
    let next_change = policy.and_then(|p| keys.next_change(now, p));
    let mut out = std::io::stdout().lock();
    match format {
        ListFormat::Json => {
            let entry = |k: &KeySchedule| {
                json!({
                    "kid": k.kid,
                    "algorithm": k.algorithm.name(),
                    "state": k.state.name(),
                    "publishedAt": k.published_at.to_string(),
                    "activateAt": k.activate_at.to_string(),
                    "retireAt": k.retire_at.map(|t| t.to_string()),
                    "removeAt": k.remove_at.map(|t| t.to_string()),
                    "maxTokenSeconds": k.max_token_seconds,
                })
            };
            let document = json!({
                "now": now.to_string(),
                "keys": schedule.iter().map(entry).collect::<Vec<_>>(),
                "successor": successor.map(|s| json!({
                    "createAt": s.create_at.to_string(),
                    "activateAt": s.activate_at.to_string(),
                })),
                "nextChange": next_change.map(|t| t.to_string()),
                "revoked": keys.revocations().iter().map(|r| json!({
                    "kid": r.kid,
                    "revokedAt": r.revoked_at.to_string(),
                    "forgetAt": r.forget_at.to_string(),
                })).collect::<Vec<_>>(),
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&document)?)?;
        }
        ListFormat::Text => {
            writeln!(
                out,
                "{:<44}  {:<5}  {:<7}  {:<20}  {:<20}  {:<21}  {:<21}",
                "KID", "ALG", "STATE", "PUBLISHED", "ACTIVATES", "RETIRES", "REMOVED"
            )?;
            let last = schedule.len().saturating_sub(1);
            for (i, k) in schedule.iter().enumerate() {
                let (retires, removed) = match (k.retire_at, successor) {
                    (None, Some(s)) if i == last => (
                        format!("~{}", s.activate_at),
                        format!(
                            "~{}",
                            s.activate_at
                                .saturating_add(jiff::SignedDuration::from_secs(
                                    k.max_token_seconds
                                        .saturating_add(warrant_keys::REMOVAL_LEEWAY_SECONDS),
                                ))
                                .unwrap_or(Timestamp::MAX)
                        ),
                    ),
                    _ => (time(k.retire_at), time(k.remove_at)),
                };
                writeln!(
                    out,
                    "{:<44}  {:<5}  {:<7}  {:<20}  {:<20}  {:<21}  {:<21}",
                    k.kid,
                    k.algorithm.name(),
                    k.state.name(),
                    k.published_at,
                    k.activate_at,
                    retires,
                    removed
                )?;
            }
            if let Some(s) = successor {
                writeln!(
                    out,
                    "\n~ planned: the next key is created at {} and signs from {}.",
                    s.create_at.max(now),
                    s.activate_at
                )?;
            }
            for r in keys.revocations() {
                writeln!(
                    out,
                    "\nREVOKED {} at {}: its tokens are refused (the last of them expires at {} at the latest); the kid is remembered for good, so no key file can bring it back.",
                    r.kid, r.revoked_at, r.forget_at
                )?;
            }
        }
    }
    Ok(())
}
