//! `warrant discovery export` and `warrant discovery publish`: the two documents relying
//! parties fetch, written where they are hosted when warrant itself is not reachable from
//! outside (a private cluster). Both are one publish round of warrant-publish's `Publisher`
//! (the same rendering, layout, writer and read-back as `serve --publish-discovery`): `publish`
//! to its targets, `export` to `--dir` as a directory target staged for hosting elsewhere
//! (warrant-publish's `Target::export_dir`). They write the bytes `serve` would answer with now;
//! with managed keys they must run again by the time the key set next changes (logged), or
//! simply every hour.

use std::error::Error;
use std::path::Path;

use jiff::Timestamp;
use warrant_clock::Clock;
use warrant_issuer::{Published, validate_issuers};
use warrant_keys::{DirStore, KeySet, KeyStore as _, SecretStore, StaticKeys};
use warrant_publish::{Publisher, Target};

use crate::cli::{DiscoveryExportArgs, DiscoveryPublishArgs, KeySourceArgs};
use crate::keys::{
    KeySource, ManagedStore, Store, client, current_algorithm, policy, recorded_max_token_seconds,
};
use crate::serve::jwks_uri;
use warrant_proto::DISCOVERY_PATH;

/// `warrant discovery export`: a round to `--dir`, each document at its URL's path below it
/// (the discovery document below the issuer's path, the JWKS at `jwks_uri`'s), as a `file://`
/// target lays them out. Unlike a `file://` target, `jwks_uri` may be on another host than the
/// issuer (`--external-hostname`, a CDN): its file is then for that host to serve, and the log
/// says which URL each file must be served at.
pub(crate) async fn run(args: &DiscoveryExportArgs) -> Result<(), Box<dyn Error>> {
    validate_issuers(&args.issuers)?;
    let jwks_uri = jwks_uri(
        &args.issuers,
        args.jwks_uri.as_deref(),
        args.external_hostname.as_deref(),
        args.secure_port,
    )?;
    let now = Clock::System.now();
    let (published, next_change) = published(
        &args.issuers,
        &jwks_uri,
        &args.keys,
        args.kubeconfig.as_deref(),
        now,
    )
    .await?;
    let targets = vec![Target::export_dir(&args.dir)?];
    let publisher = round(targets, &args.issuers, &jwks_uri, &published, now).await?;
    let issuer = warrant_issuer::first_issuer(&args.issuers);
    let dir = args.dir.display();
    for (_, placement) in publisher.targets() {
        tracing::info!(
            file = %format!("{dir}/{}", placement.discovery),
            serve_at = %format!("{}{DISCOVERY_PATH}", issuer.trim_end_matches('/')),
            "exported the discovery document: serve the file at serve_at"
        );
        tracing::info!(
            file = %format!("{dir}/{}", placement.jwks),
            serve_at = %jwks_uri,
            "exported the JWKS: serve the file at serve_at (the discovery document's jwks_uri, on whichever host it names)"
        );
    }
    match next_change {
        Some(next) => tracing::info!(
            dir = %dir,
            keys = published.keys().verifying().len(),
            next_change = %next,
            "exported the discovery documents; the keys change next at next_change: export again by then"
        ),
        None => tracing::info!(
            dir = %dir,
            keys = published.keys().verifying().len(),
            "exported the discovery documents; export again whenever the key files change"
        ),
    }
    Ok(())
}

/// `warrant discovery publish`: a round to each target, read back and checked. Fails if any
/// target fails.
pub(crate) async fn publish(args: &DiscoveryPublishArgs) -> Result<(), Box<dyn Error>> {
    validate_issuers(&args.issuers)?;
    let jwks_uri = jwks_uri(&args.issuers, args.jwks_uri.as_deref(), None, 443)?;
    let now = Clock::System.now();
    let (published, next_change) = published(
        &args.issuers,
        &jwks_uri,
        &args.keys,
        args.kubeconfig.as_deref(),
        now,
    )
    .await?;
    let endpoint = args.endpoint.endpoint();
    let targets = args
        .targets
        .iter()
        .map(|url| Target::open(url, &endpoint, &[]))
        .collect::<Result<Vec<_>, _>>()?;
    let publisher = round(targets, &args.issuers, &jwks_uri, &published, now).await?;
    for (target, placement) in publisher.targets() {
        tracing::info!(
            target = %target.url(),
            discovery = %placement.discovery,
            jwks = %placement.jwks,
            next_change = %next_change.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
            "published the discovery documents (read back); with managed keys, publish again before next_change, or let serve --publish-discovery keep them current"
        );
    }
    Ok(())
}

/// What `serve` would publish at `now` for `issuers`, `jwks_uri` and the keys of `keys`, and
/// when the key set next changes.
async fn published(
    issuers: &[String],
    jwks_uri: &str,
    keys: &KeySourceArgs,
    kubeconfig: Option<&Path>,
    now: Timestamp,
) -> Result<(Published, Option<Timestamp>), Box<dyn Error>> {
    // Publishing needs only public keys, but a store of held keys is read with its holder.
    let holder = crate::holder::open(&keys.pkcs11, &keys.kms, None).await?;
    let keys = key_set(&KeySource::from_args(keys)?, kubeconfig, holder, now).await?;
    let settings = warrant_issuer::Settings {
        issuers: issuers.to_vec(),
        api_audiences: issuers.to_vec(),
        jwks_uri: jwks_uri.to_owned(),
        expiration: warrant_token::ExpirationPolicy::default(),
        signature_cache_entries: 0,
        jwks_x5c: false,
    };
    let next_change = keys.next_change();
    Ok((Published::new(&settings, keys), next_change))
}

/// One writing round of `published` (for `issuers` and `jwks_uri`) to `targets`, after checking that it renders and that each
/// target can hold it (the placement rule): nothing is written unless every target can. Returns
/// the publisher that ran it (its targets and placements).
async fn round(
    targets: Vec<Target>,
    issuers: &[String],
    jwks_uri: &str,
    published: &Published,
    now: Timestamp,
) -> Result<Publisher, Box<dyn Error>> {
    published
        .discovery()
        .map_err(|e| warrant_publish::PublishError::Documents(e.clone()))?;
    let mut publisher = Publisher::new(
        targets,
        warrant_issuer::first_issuer(issuers),
        jwks_uri,
        warrant_publish::PublishMetrics::new(),
    )?;
    publisher.round(published, now, true).await?;
    Ok(publisher)
}

/// The keys `serve` would publish now. Managed keys are only read: exporting never rotates.
async fn key_set(
    source: &KeySource,
    kubeconfig: Option<&Path>,
    holder: Option<std::sync::Arc<dyn warrant_keys::KeyHolder>>,
    now: Timestamp,
) -> Result<KeySet, Box<dyn Error>> {
    match source {
        KeySource::Static(files) => Ok(StaticKeys::load(files)?
            .key_set()
            .ok_or("the signing key file holds no signing key")?),
        KeySource::Managed {
            store,
            rotation,
            extra,
        } => {
            let store = match store {
                ManagedStore::Dir(dir) => Store::Dir(DirStore::new(dir)),
                ManagedStore::Secret { secret, .. } => Store::Secret(SecretStore::new(
                    client(kubeconfig).await?,
                    &secret.namespace,
                    &secret.name,
                )),
            }
            .held_by(holder);
            let stored = store.load().await?.ok_or_else(|| {
                format!(
                    "{} holds no managed keys yet: `warrant keys generate {}` creates them",
                    store.describe(),
                    store.flag()
                )
            })?;
            let policy = policy(
                rotation,
                current_algorithm(&stored.keys, now),
                recorded_max_token_seconds(&stored.keys, now),
            );
            let extra = StaticKeys::load(extra)?;
            Ok(stored
                .keys
                .key_set_at(now, &policy)
                .ok_or_else(|| format!("{} holds no active key yet", store.describe()))?
                .with_extra_verifying(&extra.verifying))
        }
    }
}
