//! What `warrant keys list --key-secret` says beside the keys: who writes the Secret (the
//! Lease's holder) and how this node's copy stands, in warrant-keys' status types, which the
//! server's `/readyz?verbose` prints from too.

use std::error::Error;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use jiff::Timestamp;
use warrant_keys::{
    CopyStatus, KeyHolder, KeyStore as _, LocalCopy, ManagedKeySet, SecretStore, StoreStatus,
    Stored, Unreadable, WriterStatus,
};

use crate::cli::ObjectName;

/// What `warrant keys list --key-secret` says beside the keys: whether they are the Secret's,
/// who writes them (the Lease's holder), and how this node's copy stands. Lines after the
/// table, or members of the JSON document.
pub(crate) struct About {
    store: StoreStatus,
    writer: WriterStatus,
    copy: Option<CopyStatus>,
}

impl About {
    /// The lines after the table, at `now`.
    pub(crate) fn lines(&self, now: Timestamp) -> Vec<String> {
        let mut lines = vec![
            format!("store: {}", self.store.text(now)),
            format!("writer: {}", self.writer.text()),
        ];
        lines.extend(self.copy.as_ref().map(|copy| copy.text(now)));
        lines
    }

    /// The members of the JSON document, at `now`.
    pub(crate) fn json(&self, now: Timestamp) -> serde_json::Map<String, serde_json::Value> {
        let mut members = serde_json::Map::new();
        members.insert("store".into(), self.store.json());
        members.insert("writer".into(), self.writer.json());
        if let Some(copy) = &self.copy {
            members.insert("copy".into(), copy.json(now));
        }
        members
    }
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
    let copy = copy_dir.map(|dir| LocalCopy::new(dir, holder).of_any_purpose());
    let seed = match &copy {
        Some(copy) => Some(copy.read().await),
        None => None,
    };
    let (keys, unreadable) = match (load().await, &seed) {
        (Ok(stored), _) => (stored.keys, None),
        (Err(error), Some(Ok(Some(seed)))) => {
            let unreadable = Unreadable {
                error: error.to_string(),
                copy: copy.as_ref().map(LocalCopy::describe).unwrap_or_default(),
                copy_written_at: seed.written_at,
            };
            (seed.keys.clone(), Some(unreadable))
        }
        (Err(error), _) => return Err(error),
    };
    let read = unreadable.is_none();
    let store = StoreStatus::Read {
        described: secret.describe(),
        written_by: secret.written_by(),
        unreadable,
    };
    let writer =
        WriterStatus::read(secret.client().clone(), &lease.namespace, &lease.name, now).await;
    let copy = copy
        .zip(seed)
        .map(|(copy, seed)| CopyStatus::read(&copy, &seed, read.then_some(&keys)));
    Ok((
        keys,
        About {
            store,
            writer,
            copy,
        },
    ))
}
