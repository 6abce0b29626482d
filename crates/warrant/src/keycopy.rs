//! `serve --key-secret --key-copy-dir`: a node's local copy of the shared key Secret, so that a
//! control plane starts cold (see warrant-keys' `LocalCopy`, and docs/external-signer.md,
//! "Several control-plane nodes").

use std::error::Error;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::json;
use warrant_clock::Clock;
use warrant_keys::{
    KeyHolder, KeyPurpose, KeyStore as _, LeaseHolder, LocalCopy, ManagedKeySet, SecretStore, Seed,
    StoreError, Stored,
};
use warrant_server::AppState;

use crate::cli::ObjectName;

/// The node's copy in `dir` of keys for `purpose`, their private halves in `holder` (the
/// store's), and what it holds now. A directory others may write to stops the start, as a key directory's would; a
/// copy that cannot be read otherwise is logged and not used (the Secret must then answer,
/// and its keys replace the copy's).
pub(crate) async fn open(
    dir: &Path,
    holder: Option<Arc<dyn KeyHolder>>,
    purpose: KeyPurpose,
) -> Result<(Arc<LocalCopy>, Option<Seed>), Box<dyn Error>> {
    let copy = Arc::new(LocalCopy::new(dir, holder).for_purpose(purpose));
    let seed = match copy.read().await {
        Ok(seed) => seed,
        Err(error @ StoreError::Insecure { .. }) => {
            return Err(format!("--key-copy-dir: {error}").into());
        }
        // The copy's held keys are vouched for by the holder, as the Secret's are: with the
        // holder unreachable neither can be used, and saying "waiting for the Secret" would
        // send the operator to the wrong component.
        Err(error @ StoreError::HolderUnavailable { .. }) => {
            tracing::error!(%error, "cannot use the local copy of the key Secret: its keys' holder cannot be reached to vouch for them; the Secret's keys need the holder too");
            None
        }
        Err(error) => {
            tracing::error!(%error, "cannot read the local copy of the key Secret: this replica starts only once the Secret answers, and then rewrites the copy");
            None
        }
    };
    match &seed {
        Some(seed) => {
            tracing::info!(copy = %copy.describe(), written_at = %seed.written_at, keys = seed.keys.keys().len(), "local copy of the key Secret read");
        }
        None => {
            tracing::info!(copy = %copy.describe(), "no local copy of the key Secret yet: it is written once the Secret is read");
        }
    }
    Ok((copy, seed))
}

/// Reports the copy in `/readyz?verbose` (`key-copy`): when it was written (and how long ago),
/// and whether it
/// holds the Secret's keys or is being served until the Secret answers. Informational: a
/// replica serving its copy is ready, as kube-apiserver needs it to be.
pub(crate) fn report(state: &AppState, name: &'static str, copy: &LocalCopy, clock: Clock) {
    let described = copy.dir().display().to_string();
    let copy_state = copy.state();
    state.add_report(name, move || {
        let now = clock.now();
        format!("{described} {}", copy_state.borrow().summary(now))
    });
}

/// What `warrant keys list --key-secret` says beside the keys: whether they are the Secret's,
/// who writes them (the Lease's holder), and how this node's copy stands. Lines after the
/// table, or members of the JSON document.
pub(crate) struct About {
    pub(crate) json: serde_json::Map<String, serde_json::Value>,
    pub(crate) lines: Vec<String>,
}

/// The keys to list and what to say about them: the Secret's, as `load` reads them, or, when it
/// cannot be read and `copy_dir` holds a copy, the copy's (saying so). The copy is only read,
/// never written: it is the node's warrant's. `lease` elects the Secret's writer.
pub(crate) async fn about<F, Fut>(
    secret: &SecretStore,
    lease: &ObjectName,
    copy_dir: Option<&Path>,
    holder: Option<Arc<dyn KeyHolder>>,
    now: Timestamp,
    load: F,
) -> Result<(ManagedKeySet, About), Box<dyn Error>>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Stored, Box<dyn Error>>>,
{
    let store = secret.describe();
    let copy = copy_dir.map(|dir| LocalCopy::new(dir, holder).of_any_purpose());
    let seed = match &copy {
        Some(copy) => Some(copy.read().await),
        None => None,
    };
    let mut lines = Vec::new();
    let (keys, read) = match (load().await, &seed) {
        (Ok(stored), _) => (stored.keys, None),
        (Err(error), Some(Ok(Some(seed)))) => {
            let copy = copy.as_ref().map(LocalCopy::describe).unwrap_or_default();
            lines.push(format!(
                "store: {store} cannot be read ({error}): the keys above are the {copy}'s, written at {}",
                seed.written_at
            ));
            (seed.keys.clone(), Some(error.to_string()))
        }
        (Err(error), _) => return Err(error),
    };
    let written_by = secret.written_by();
    if read.is_none() {
        lines.push(format!(
            "store: {store}, last written by {}",
            written_by.as_deref().unwrap_or("-")
        ));
    }
    let mut json = serde_json::Map::new();
    json.insert(
        "store".into(),
        json!({"name": store, "read": read.is_none(), "error": read, "writtenBy": written_by}),
    );
    let (line, writer) = lease_writer(secret, lease, now).await;
    lines.push(line);
    json.insert("writer".into(), writer);
    if let (Some(copy), Some(seed)) = (&copy, seed) {
        let (line, value) = copy_state(copy, seed, read.is_none().then_some(&keys), now);
        lines.push(line);
        json.insert("copy".into(), value);
    }
    Ok((keys, About { json, lines }))
}

/// Who writes the keys, as the Lease says: a line, and the JSON member `writer`.
async fn lease_writer(
    secret: &SecretStore,
    lease: &ObjectName,
    now: Timestamp,
) -> (String, serde_json::Value) {
    let holder = LeaseHolder::read(secret.client().clone(), &lease.namespace, &lease.name).await;
    match holder {
        Ok(Some(holder)) if !holder.expired_at(now) => (
            format!(
                "writer: {} holds the Lease {lease} (renewed at {})",
                holder.identity.as_deref().unwrap_or("-"),
                holder.renewed_at.map(|t| t.to_string()).unwrap_or_default()
            ),
            json!({"lease": lease.to_string(), "holder": holder.identity, "renewedAt": holder.renewed_at.map(|t| t.to_string())}),
        ),
        Ok(Some(holder)) => (
            format!(
                "writer: none: the Lease {lease} is free or ran out (last held by {}, renewed at {}); no replica writes the keys until one takes it",
                holder.identity.as_deref().unwrap_or("-"),
                holder.renewed_at.map(|t| t.to_string()).unwrap_or_default()
            ),
            json!({"lease": lease.to_string(), "holder": null, "lastHolder": holder.identity}),
        ),
        Ok(None) => (
            format!("writer: none yet: the Lease {lease} does not exist"),
            json!({"lease": lease.to_string(), "holder": null}),
        ),
        Err(error) => (
            format!("writer: unknown: the Lease {lease} cannot be read: {error}"),
            json!({"lease": lease.to_string(), "error": error.to_string()}),
        ),
    }
}

/// How this node's copy stands (`seed`, its read), against the store's keys when they were
/// read (`store_keys`): a line, and the JSON member `copy`.
fn copy_state(
    copy: &LocalCopy,
    seed: Result<Option<Seed>, StoreError>,
    store_keys: Option<&ManagedKeySet>,
    now: Timestamp,
) -> (String, serde_json::Value) {
    let described = copy.describe();
    match seed {
        Ok(Some(seed)) => {
            let age = now.as_second().saturating_sub(seed.written_at.as_second());
            let same = store_keys.map(|keys| seed.keys.same_records(keys));
            let state = match same {
                Some(true) => "holding the store's keys",
                Some(false) => {
                    "holding other keys than the store's (the node's warrant replaces them at its next read of the store)"
                }
                None => "listed above",
            };
            (
                format!(
                    "{described}: written at {} ({age} s ago), {state}",
                    seed.written_at
                ),
                json!({"dir": copy.dir(), "writtenAt": seed.written_at.to_string(), "ageSeconds": age, "sameAsStore": same}),
            )
        }
        Ok(None) => (
            format!("{described}: none yet"),
            json!({"dir": copy.dir(), "writtenAt": null}),
        ),
        Err(error) => (
            format!("{described}: cannot be read: {error}"),
            json!({"dir": copy.dir(), "error": error.to_string()}),
        ),
    }
}
