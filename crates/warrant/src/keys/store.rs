//! The managed key store `serve` and `warrant keys` open: a key directory, a Secret, or a
//! Secret copied to this node, as one [`KeyStore`].

use std::error::Error;
use std::path::Path;
use std::sync::Arc;

use warrant_keys::{
    ChangeFeed, CopiedStore, DirStore, KeyHolder, KeyPurpose, KeyStore, ManagedKeySet, Saved,
    SecretStore, StoreError, StoreVersion, Stored,
};
use warrant_objects::kube::cluster_client;

use crate::cli::StoreArgs;

/// A managed key store of either kind.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    /// `--key-dir`.
    Dir(DirStore),
    /// `--key-secret`.
    Secret(SecretStore),
    /// `--key-secret` with `--key-copy-dir`: the Secret, copied to this node.
    Copied(CopiedStore<SecretStore>),
}

impl Store {
    /// The store of `warrant keys`' flags; `writer` is recorded on a Secret's writes.
    /// With `holder` (`--key-pkcs11-uri`, `--key-kms-uri`), the store's private keys are held there.
    pub(crate) async fn from_args(
        args: &StoreArgs,
        writer: &str,
        holder: Option<Arc<dyn KeyHolder>>,
    ) -> Result<Self, Box<dyn Error>> {
        let store = match (&args.key_dir, &args.key_secret) {
            (Some(dir), _) => Store::Dir(DirStore::new(dir)),
            (None, Some(secret)) => Store::Secret(
                SecretStore::new(
                    client(args.kubeconfig.as_deref()).await?,
                    &secret.namespace,
                    &secret.name,
                )
                .with_writer(writer),
            ),
            (None, None) => return Err("either --key-dir or --key-secret must be set".into()),
        };
        // A command works on a store of either purpose, its holder asked about each key for
        // the purpose the store records.
        Ok(store.held_by(holder).keys_for(None))
    }

    /// This store, holding keys for `purpose` (`None`: whatever it records). A local copy
    /// was given its purpose when it was opened.
    pub(crate) fn keys_for(self, purpose: Option<KeyPurpose>) -> Self {
        match (self, purpose) {
            (Store::Dir(store), Some(p)) => Store::Dir(store.for_purpose(p)),
            (Store::Dir(store), None) => Store::Dir(store.of_any_purpose()),
            (Store::Secret(store), Some(p)) => Store::Secret(store.for_purpose(p)),
            (Store::Secret(store), None) => Store::Secret(store.of_any_purpose()),
            (store @ Store::Copied(_), _) => store,
        }
    }

    /// This store, its private keys held by `holder` if given.
    pub(crate) fn held_by(self, holder: Option<Arc<dyn KeyHolder>>) -> Self {
        match (self, holder) {
            (Store::Dir(store), Some(holder)) => Store::Dir(store.with_holder(holder)),
            (Store::Secret(store), Some(holder)) => Store::Secret(store.with_holder(holder)),
            (store, _) => store,
        }
    }

    /// The flag that names this store, for messages: `--key-dir DIR`.
    pub(crate) fn flag(&self) -> String {
        match self {
            Store::Dir(dir) => format!("--key-dir {}", dir.dir().display()),
            Store::Secret(secret) => {
                format!("--key-secret {}/{}", secret.namespace(), secret.name())
            }
            Store::Copied(copied) => Store::Secret(copied.store().clone()).flag(),
        }
    }
}

impl KeyStore for Store {
    fn describe(&self) -> String {
        match self {
            Store::Dir(store) => store.describe(),
            Store::Secret(store) => store.describe(),
            Store::Copied(store) => store.describe(),
        }
    }

    async fn load(&self) -> Result<Option<Stored>, StoreError> {
        match self {
            Store::Dir(store) => store.load().await,
            Store::Secret(store) => store.load().await,
            Store::Copied(store) => store.load().await,
        }
    }

    async fn save_after(
        &self,
        keys: &ManagedKeySet,
        expected: Option<&StoreVersion>,
        generation: u64,
    ) -> Result<Saved, StoreError> {
        match self {
            Store::Dir(store) => store.save_after(keys, expected, generation).await,
            Store::Secret(store) => store.save_after(keys, expected, generation).await,
            Store::Copied(store) => store.save_after(keys, expected, generation).await,
        }
    }

    fn watch(&self) -> Result<ChangeFeed, StoreError> {
        match self {
            Store::Dir(store) => store.watch(),
            Store::Secret(store) => store.watch(),
            Store::Copied(store) => store.watch(),
        }
    }

    fn holder(&self) -> Option<Arc<dyn KeyHolder>> {
        match self {
            Store::Dir(store) => store.holder(),
            Store::Secret(store) => store.holder(),
            Store::Copied(store) => store.holder(),
        }
    }

    fn purpose(&self) -> Option<KeyPurpose> {
        match self {
            Store::Dir(store) => store.purpose(),
            Store::Secret(store) => store.purpose(),
            Store::Copied(store) => store.purpose(),
        }
    }
}

/// The client for the cluster of `--kubeconfig` (else the in-cluster configuration).
pub(crate) async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, Box<dyn Error>> {
    cluster_client(kubeconfig)
        .await
        .map_err(|e| format!("the key Secret needs a cluster connection: {e}").into())
}
