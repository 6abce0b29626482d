//! A key Secret shared by replicas, assembled in one place: the Secret, the election of its
//! writer through a Lease, and this node's local copy (`--key-copy-dir`), with what each
//! replica reports of them ([`status`]). The server opens one per managed key set kept in a
//! Secret (the token keys, the pod certificate CA's); `warrant keys list` reads the same facts
//! through the same status types.

mod status;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use crate::copy::{CopiedStore, LocalCopy};
use crate::holder::KeyHolder;
use crate::leader::{Leadership, LeaseConfig, LeaseError};
use crate::manager::{Seed, Writer};
use crate::metrics::KeyMetrics;
use crate::purpose::KeyPurpose;
use crate::secret::SecretStore;
use crate::store::StoreError;

pub use status::{CopyStatus, StoreStatus, Unreadable, WriterStatus};

/// Where a shared key Secret is and how this replica takes part.
#[derive(Debug, Clone)]
pub struct SharedSecretConfig {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The Lease that elects the Secret's writer, with this replica's identity.
    pub lease: LeaseConfig,
    /// This node's local copy, if it keeps one.
    pub copy_dir: Option<PathBuf>,
    /// Where the keys' private halves are held, if not in the Secret.
    pub holder: Option<Arc<dyn KeyHolder>>,
    /// What the keys are for; a Secret (or copy) recording another purpose is refused.
    pub purpose: KeyPurpose,
}

/// Why a shared key Secret could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SharedSecretError {
    /// The election could not be joined.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The local copy's directory may not be used (others may write to it).
    #[error("{0}")]
    Copy(StoreError),
}

/// A shared key Secret opened by one replica: the store to manage, whether this replica writes
/// it, and the keys of this node's copy to start from.
#[derive(Debug)]
pub struct SharedSecret {
    secret: SecretStore,
    leadership: Leadership,
    /// `LEASE as IDENTITY`.
    election: String,
    copy: Option<Arc<LocalCopy>>,
    seed: Option<Seed>,
}

impl SharedSecret {
    /// Joins the election of `config`'s Lease (in the background with a local copy, since the
    /// replica may start before the API server answers) and reads the copy. A copy directory
    /// others may write to stops the start, as a key directory's would; a copy that cannot be
    /// read otherwise is logged and not used (the Secret must then answer, and its keys
    /// replace the copy's).
    pub async fn open(
        client: kube::Client,
        config: SharedSecretConfig,
        metrics: &KeyMetrics,
    ) -> Result<Self, SharedSecretError> {
        let SharedSecretConfig {
            namespace,
            name,
            lease,
            copy_dir,
            holder,
            purpose,
        } = config;
        let leadership = if copy_dir.is_some() {
            Leadership::start_in_background(client.clone(), &lease, metrics.clone())?
        } else {
            Leadership::start(client.clone(), &lease, metrics.clone()).await?
        };
        let election = format!("{}/{} as {}", lease.namespace, lease.name, lease.identity);
        tracing::info!(secret = %format!("{namespace}/{name}"), lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "managed keys in a Kubernetes Secret; the replica holding the Lease writes them");
        let secret = SecretStore::new(client, &namespace, &name)
            .with_writer(lease.identity.clone())
            .for_purpose(purpose);
        let secret = match &holder {
            Some(holder) => secret.with_holder(holder.clone()),
            None => secret,
        };
        let (copy, seed) = match copy_dir {
            Some(dir) => {
                let copy = Arc::new(LocalCopy::new(dir, holder).for_purpose(purpose));
                let seed = read_copy(&copy).await?;
                (Some(copy), seed)
            }
            None => (None, None),
        };
        Ok(SharedSecret {
            secret,
            leadership,
            election,
            copy,
            seed,
        })
    }

    /// The Secret. Clones share what was last read (the writer's name in reports).
    pub fn secret(&self) -> &SecretStore {
        &self.secret
    }

    /// The Secret copied to this node, when it keeps a copy.
    pub fn copied(&self) -> Option<CopiedStore<SecretStore>> {
        let copy = self.copy.as_ref()?;
        Some(CopiedStore::new(self.secret.clone(), copy.clone()))
    }

    /// The copy's keys, to start from while the Secret does not answer (once).
    pub fn take_seed(&mut self) -> Option<Seed> {
        self.seed.take()
    }

    /// Writes the Secret while it holds the Lease.
    pub fn writer(&self) -> Writer {
        Writer::WhileLeader(self.leadership.leading())
    }

    /// What this replica reports of the Secret from now on.
    pub fn reports(&self) -> SharedReports {
        SharedReports {
            election: self.election.clone(),
            leading: self.leadership.leading(),
            secret: self.secret.clone(),
            copy: self.copy.clone(),
        }
    }

    /// The election, to release when the replica stops.
    pub fn into_leadership(self) -> Leadership {
        self.leadership
    }
}

/// A replica's view of its shared Secret, for its readiness report.
#[derive(Debug, Clone)]
pub struct SharedReports {
    election: String,
    leading: watch::Receiver<bool>,
    secret: SecretStore,
    copy: Option<Arc<LocalCopy>>,
}

impl SharedReports {
    /// Who writes the Secret.
    pub fn writer(&self) -> WriterStatus {
        WriterStatus::Replica {
            election: self.election.clone(),
            leading: *self.leading.borrow(),
            last_writer: self.secret.written_by(),
        }
    }

    /// Whether this node keeps a copy.
    pub fn keeps_copy(&self) -> bool {
        self.copy.is_some()
    }

    /// How this node's copy stands, if it keeps one.
    pub fn copy(&self) -> Option<CopyStatus> {
        let copy = self.copy.as_ref()?;
        Some(CopyStatus::Kept {
            dir: copy.dir().to_owned(),
            state: copy.state().borrow().clone(),
        })
    }
}

/// What the copy holds, or `None` if it holds nothing usable (said in the log); an error only
/// for a directory others may write to.
async fn read_copy(copy: &LocalCopy) -> Result<Option<Seed>, SharedSecretError> {
    let seed = match copy.read().await {
        Ok(seed) => seed,
        Err(error @ StoreError::Insecure { .. }) => return Err(SharedSecretError::Copy(error)),
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
    Ok(seed)
}
