//! The Kubernetes Secret key store (`--key-secret NAMESPACE/NAME`): the stored form of
//! [`crate::encode`] as the `data` of one Secret, so replicas on any node share one key set.
//!
//! ```yaml
//! apiVersion: v1
//! kind: Secret
//! type: Opaque
//! metadata:
//!   name: warrant-keys
//!   namespace: warrant
//!   labels: {app.kubernetes.io/managed-by: warrant}
//!   annotations: {warrant.dev/written-by: warrant-7d9f-x2k4l}
//! data:
//!   keys.json: …            # the index: each key's kid, algorithm and schedule
//!   <kid>.pem: …            # one PKCS#8 private key per key
//! ```
//!
//! - **Version**: the Secret's `resourceVersion`. A write is a replace carrying the
//!   `resourceVersion` its writer read, so the API server refuses it (`409 Conflict`) if anyone
//!   wrote in between: two writers can never lose each other's keys; the loser re-reads and
//!   recomputes. The first write is a create, refused (`409 AlreadyExists`) if another writer
//!   created the Secret first. A Secret that exists with no data (created ahead by an operator,
//!   who may prefer not to grant `create`) is taken over; one that holds other data is never
//!   overwritten.
//! - **Atomicity**: the API server stores the whole Secret at once, so readers see the old set or
//!   the new one, never a mix.
//! - **Changes**: one watch of this Secret alone (a `metadata.name` field selector, which also lets
//!   RBAC restrict `list` and `watch` to it), metadata only: the private keys travel only in the
//!   reads. The watch also fires when it fails, so the owner re-reads at once and notices an
//!   outage (see [`crate::StoreHealth`]).
//! - **What is kept**: the labels and annotations an operator adds survive warrant's writes;
//!   `data` is warrant's alone.
//!
//! Messages name the Secret, never its data.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

use crate::holder::{Held, KeyHolder};
use tokio_util::task::AbortOnDropHandle;

use crate::lifecycle::ManagedKeySet;
use crate::purpose::KeyPurpose;
use crate::store::{ChangeFeed, KeyStore, Saved, StoreError, StoreVersion, Stored};
use crate::stored::{INDEX_FILE, decode, encode};

/// The label that marks the Secret as warrant's: `app.kubernetes.io/managed-by: warrant`.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "warrant";
/// The annotation naming the replica (its Lease identity) or command that last wrote the keys.
pub const WRITTEN_BY_ANNOTATION: &str = "warrant.dev/written-by";
/// The field manager of warrant's writes, as the API server records it.
const FIELD_MANAGER: &str = "warrant";

/// A key set kept in one Kubernetes Secret. Cheap to clone; clones share what they last read.
#[derive(Clone)]
pub struct SecretStore {
    client: kube::Client,
    namespace: String,
    name: String,
    writer: String,
    last: Arc<Mutex<Option<LastRead>>>,
    holder: Option<Held>,
    /// What its keys must be for; `None`: whatever it records.
    purpose: Option<KeyPurpose>,
}

/// What the last read saw, so a write can keep an operator's labels and annotations, the
/// Secret's type, and count generations.
#[derive(Debug, Clone)]
struct LastRead {
    version: String,
    metadata: ObjectMeta,
    type_: Option<String>,
    generation: u64,
}

impl SecretStore {
    /// The Secret `namespace/name`, reached with `client`. Nothing is read or written until the
    /// store is loaded or saved. Writes record `warrant` as their writer until
    /// [`with_writer`](Self::with_writer) names one.
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        SecretStore {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            writer: MANAGED_BY.to_owned(),
            last: Arc::new(Mutex::new(None)),
            holder: None,
            purpose: Some(KeyPurpose::Tokens),
        }
    }

    store_builders!(
        "the Secret records their public keys and where they are, and holds no key material."
    );

    /// Records `identity` (the replica's Lease identity, or an operator command) in the
    /// [`WRITTEN_BY_ANNOTATION`] of every write, so `kubectl describe` tells who wrote last.
    pub fn with_writer(mut self, identity: impl Into<String>) -> Self {
        self.writer = identity.into();
        self
    }

    /// The Secret's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Secret's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client the Secret is reached with.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Who wrote the Secret last, as its [`WRITTEN_BY_ANNOTATION`] said when it was last read or
    /// written by this store.
    pub fn written_by(&self) -> Option<String> {
        self.last_read()?
            .metadata
            .annotations?
            .get(WRITTEN_BY_ANNOTATION)
            .cloned()
    }

    fn api(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn remember(&self, last: Option<LastRead>) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = last;
    }

    fn last_read(&self) -> Option<LastRead> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn conflict(&self) -> StoreError {
        StoreError::Conflict {
            store: self.describe(),
        }
    }

    /// An API failure as a store error: `409` (and `404` for a Secret deleted since it was read)
    /// is a lost race; anything else leaves the store unavailable for now.
    fn api_error(&self, error: kube::Error) -> StoreError {
        match &error {
            kube::Error::Api(status) if status.code == 409 || status.code == 404 => self.conflict(),
            _ => self.unavailable(&error),
        }
    }

    fn unavailable(&self, error: &kube::Error) -> StoreError {
        let reason = match error {
            kube::Error::Api(status) => format!(
                "the API server answered {} {}: {}",
                status.code, status.reason, status.message
            ),
            // A decoding error may quote what it could not decode: the Secret's data.
            kube::Error::SerdeError(_) => "the API server's answer is not a valid Secret".into(),
            other => other.to_string(),
        };
        StoreError::Unavailable {
            store: self.describe(),
            reason,
        }
    }

    /// The Secret as it is now, `None` if it does not exist.
    async fn get(&self) -> Result<Option<Secret>, StoreError> {
        self.api()
            .get_opt(&self.name)
            .await
            .map_err(|e| self.unavailable(&e))
    }

    /// Whether `secret` holds a warrant key set, nothing yet, or something else.
    fn contents(&self, secret: &Secret) -> Result<Contents, StoreError> {
        let empty = secret.data.as_ref().is_none_or(BTreeMap::is_empty);
        let ours = secret
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .is_some_and(|v| v == MANAGED_BY);
        match secret.data.as_ref().and_then(|d| d.get(INDEX_FILE)) {
            Some(_) => Ok(Contents::KeySet),
            None if empty || ours => Ok(Contents::Nothing),
            None => Err(StoreError::Corrupt {
                store: self.describe(),
                reason: format!(
                    "the Secret holds data but no {INDEX_FILE}: it is not a warrant key set, and warrant will not overwrite it (name another Secret, or empty this one)"
                ),
            }),
        }
    }

    /// The Secret that stores `keys` as written generation `generation`, over what was read.
    fn build(
        &self,
        keys: &ManagedKeySet,
        generation: u64,
        base: Option<&LastRead>,
        resource_version: Option<String>,
    ) -> Result<Secret, StoreError> {
        let encoded = encode(keys, generation).map_err(|(kid, source)| StoreError::Key {
            store: self.describe(),
            kid,
            source,
        })?;
        let data: BTreeMap<String, ByteString> = encoded
            .files()
            .map(|(name, bytes)| (name.to_owned(), ByteString(bytes.to_vec())))
            .collect();
        let mut metadata = base.map(|b| b.metadata.clone()).unwrap_or_default();
        metadata.name = Some(self.name.clone());
        metadata.namespace = Some(self.namespace.clone());
        metadata.resource_version = resource_version;
        metadata.managed_fields = None;
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned());
        metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(WRITTEN_BY_ANNOTATION.to_owned(), self.writer.clone());
        Ok(Secret {
            metadata,
            type_: Some(
                base.and_then(|b| b.type_.clone())
                    .unwrap_or_else(|| "Opaque".to_owned()),
            ),
            data: Some(data),
            ..Secret::default()
        })
    }

    /// Remembers a Secret this store just read or wrote.
    fn read(&self, secret: Secret, generation: u64) -> Result<StoreVersion, StoreError> {
        let version = secret
            .metadata
            .resource_version
            .clone()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| StoreError::Corrupt {
                store: self.describe(),
                reason: "the API server sent the Secret without a resourceVersion".into(),
            })?;
        self.remember(Some(LastRead {
            version: version.clone(),
            metadata: secret.metadata,
            type_: secret.type_,
            generation,
        }));
        Ok(StoreVersion(version))
    }

    fn post_params() -> PostParams {
        PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        }
    }
}

/// What a Secret holds.
enum Contents {
    KeySet,
    /// Nothing yet: absent, empty, or emptied while labelled as warrant's.
    Nothing,
}

impl KeyStore for SecretStore {
    fn holder(&self) -> Option<Arc<dyn KeyHolder>> {
        self.holder.as_ref().map(|held| held.holder().clone())
    }

    fn purpose(&self) -> Option<KeyPurpose> {
        self.purpose
    }

    fn describe(&self) -> String {
        format!("Kubernetes Secret {}/{}", self.namespace, self.name)
    }

    async fn load(&self) -> Result<Option<Stored>, StoreError> {
        let Some(secret) = self.get().await? else {
            self.remember(None);
            return Ok(None);
        };
        match self.contents(&secret)? {
            Contents::Nothing => {
                self.read(secret, 0)?;
                Ok(None)
            }
            Contents::KeySet => {
                let store = self.describe();
                let data = secret.data.clone().unwrap_or_default();
                let index = data
                    .get(INDEX_FILE)
                    .map(|b| b.0.as_slice())
                    .unwrap_or_default();
                let (keys, generation) =
                    decode(&store, index, self.purpose, self.holder.as_ref(), |name| {
                        Ok(data.get(name).map(|b| b.0.clone()))
                    })?
                    .vouched()
                    .await?;
                let version = self.read(secret, generation)?;
                Ok(Some(Stored {
                    keys,
                    version,
                    generation,
                }))
            }
        }
    }

    async fn save_after(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
        after: u64,
    ) -> Result<Saved, StoreError> {
        let (base, resource_version, read) = match expected {
            Some(version) => {
                // Replace exactly the version read; keep what the read saw of the metadata.
                let last = self.last_read().filter(|l| l.version == version.0);
                let read = last.as_ref().map_or(0, |l| l.generation);
                (last, Some(version.0.clone()), read)
            }
            None => match self.get().await? {
                None => (None, None, 0),
                Some(existing) => match self.contents(&existing)? {
                    Contents::KeySet => return Err(self.conflict()),
                    Contents::Nothing => {
                        let version = self.read(existing, 0)?;
                        (self.last_read(), Some(version.0), 0)
                    }
                },
            },
        };
        let generation = read.max(after) + 1;
        let secret = self.build(keys, generation, base.as_ref(), resource_version.clone())?;
        let written = match resource_version {
            Some(_) => {
                self.api()
                    .replace(&self.name, &Self::post_params(), &secret)
                    .await
            }
            None => self.api().create(&Self::post_params(), &secret).await,
        }
        .map_err(|e| self.api_error(e))?;
        let version = self.read(written, generation)?;
        Ok(Saved {
            version,
            generation,
        })
    }

    fn watch(&self) -> Result<ChangeFeed, StoreError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| StoreError::Unavailable {
                store: self.describe(),
                reason: "cannot watch for changes outside a Tokio runtime".into(),
            })?;
        let api: Api<PartialObjectMeta<Secret>> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        let (sender, receiver) = mpsc::channel(1);
        let store = self.describe();
        let task = runtime.spawn(async move {
            let stream = watcher::watcher(api, config).default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut healthy = true;
            while let Some(event) = stream.next().await {
                let notify = match event {
                    // A (re)list is told once, when complete.
                    Ok(Event::Init | Event::InitApply(_)) => false,
                    Ok(Event::InitDone | Event::Apply(_) | Event::Delete(_)) => {
                        healthy = true;
                        true
                    }
                    Err(error) => {
                        tracing::debug!(%store, %error, "watch of the key Secret failed; it resumes after a backoff");
                        // The first failure makes the owner re-read now (and see the outage).
                        std::mem::replace(&mut healthy, false)
                    }
                };
                if notify && let Err(mpsc::error::TrySendError::Closed(())) = sender.try_send(())
                {
                    return;
                }
            }
        });
        Ok(ChangeFeed::from_channel(
            receiver,
            AbortOnDropHandle::new(task),
        ))
    }
}

impl std::fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretStore")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
