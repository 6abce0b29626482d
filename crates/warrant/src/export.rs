//! `warrant discovery export`: the two documents relying parties fetch, written as static
//! files, so an operator can host them in a bucket or on any web server when warrant itself is
//! not reachable from outside (a private cluster). They are the bytes `serve` would answer with
//! now; with managed keys they must be exported again by the time the key set next changes
//! (logged), or simply every hour.

use std::error::Error;
use std::path::Path;

use jiff::Timestamp;
use warrant_clock::Clock;
use warrant_issuer::{url_path, validate_issuers};
use warrant_keys::{DirStore, KeySet, KeyStore as _, SecretStore, StaticKeys};
use warrant_token::{render_discovery, render_jwks};

use crate::cli::{DiscoveryExportArgs, DiscoveryPublishArgs};
use crate::keys::{
    KeySource, ManagedStore, Store, client, current_algorithm, policy, recorded_max_token_seconds,
};
use crate::serve::jwks_uri;
use warrant_server::{DISCOVERY_PATH, JWKS_PATH};

/// Writes the documents.
pub(crate) async fn run(args: &DiscoveryExportArgs) -> Result<(), Box<dyn Error>> {
    validate_issuers(&args.issuers)?;
    let jwks_uri = jwks_uri(
        &args.issuers,
        args.jwks_uri.as_deref(),
        args.external_hostname.as_deref(),
        args.secure_port,
    )?;
    let now = Clock::System.now();
    // Publishing needs only public keys, but a store of held keys is read with its holder.
    let pkcs11 = crate::hsm::open(&args.keys.pkcs11, None).await?;
    let keys = key_set(
        &KeySource::from_args(&args.keys)?,
        args.kubeconfig.as_deref(),
        pkcs11.as_ref().map(crate::hsm::Pkcs11::key_holder),
        now,
    )
    .await?;
    let issuer = warrant_issuer::first_issuer(&args.issuers);
    let discovery = render_discovery(issuer, &jwks_uri, keys.verifying())
        .map_err(|e| format!("cannot publish discovery for this issuer: {e}"))?;
    let jwks = render_jwks(keys.verifying());
    // Under the export directory, the paths relying parties fetch: the discovery document
    // below the issuer's path (`tenant-a/.well-known/…` for `https://host/tenant-a`), the JWKS
    // where the document's jwks_uri points.
    let discovery_path = format!("{}{DISCOVERY_PATH}", url_path(issuer));
    let jwks_path = match url_path(&jwks_uri) {
        path if path.is_empty() => JWKS_PATH.to_owned(),
        path => path,
    };
    write(
        &args.dir,
        discovery_path.trim_start_matches('/'),
        &discovery,
    )?;
    write(&args.dir, jwks_path.trim_start_matches('/'), &jwks)?;
    match keys.next_change() {
        Some(next) => tracing::info!(
            dir = %args.dir.display(),
            keys = keys.verifying().len(),
            next_change = %next,
            "exported the discovery documents; the keys change next at next_change: export again by then"
        ),
        None => tracing::info!(
            dir = %args.dir.display(),
            keys = keys.verifying().len(),
            "exported the discovery documents; export again whenever the key files change"
        ),
    }
    Ok(())
}

/// `warrant discovery publish`: the documents `serve` would answer with now, written to each
/// target through warrant-publish (the same rendering, headers and placement rule as
/// `serve --publish-discovery`), read back, and checked. Fails if any target fails.
pub(crate) async fn publish(args: &DiscoveryPublishArgs) -> Result<(), Box<dyn Error>> {
    validate_issuers(&args.issuers)?;
    let jwks_uri = jwks_uri(&args.issuers, args.jwks_uri.as_deref(), None, 443)?;
    let now = Clock::System.now();
    let pkcs11 = crate::hsm::open(&args.keys.pkcs11, None).await?;
    let keys = key_set(
        &KeySource::from_args(&args.keys)?,
        args.kubeconfig.as_deref(),
        pkcs11.as_ref().map(crate::hsm::Pkcs11::key_holder),
        now,
    )
    .await?;
    let settings = warrant_issuer::Settings {
        issuers: args.issuers.clone(),
        api_audiences: args.issuers.clone(),
        jwks_uri: jwks_uri.clone(),
        expiration: warrant_token::ExpirationPolicy::default(),
        signature_cache_entries: 0,
    };
    let next_change = keys.next_change();
    let published = warrant_issuer::Published::new(&settings, keys);
    let issuer = warrant_issuer::first_issuer(&args.issuers);
    let endpoint = args.endpoint.endpoint();
    let targets = args
        .targets
        .iter()
        .map(|url| warrant_publish::Target::open(url, &endpoint, &[]))
        .collect::<Result<Vec<_>, _>>()?;
    let mut publisher = warrant_publish::Publisher::new(
        targets,
        issuer,
        &jwks_uri,
        warrant_publish::PublishMetrics::new(),
    )?;
    publisher.round(&published, now, true).await?;
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

/// Writes `dir/path` through a temporary file renamed over it, so a web server or a bucket
/// sync never serves half a document.
fn write(dir: &Path, path: &str, bytes: &[u8]) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // As a file:// target writes: below the directory, no symbolic link is followed.
    warrant_publish::WebRoot::new(dir.to_owned()).write(path, bytes)?;
    Ok(())
}
