//! The Kubernetes objects that warrant's tokens bind to: service accounts, pods, secrets and
//! nodes, reduced to what token issuance and review need (UIDs, a pod's service account and
//! node, deletion timestamps), never more. Secret data never enters this crate.
//!
//! An [`ObjectSource`] holds the records: a manifest file in the standalone issuer, a watch
//! cache of a cluster beside one. [`Objects`] is the handle the server uses: it reads the
//! in-memory copy, and only on a miss asks the source for a live lookup (a cluster source does a
//! GET, as kube-apiserver's token getter does; a file source has nothing more to ask).
//!
//! [`FileSource`] is the standalone issuer's source: a manifest file (`--objects-file`) of
//! ServiceAccounts, Pods, Secrets and Nodes, reloaded when it changes.

mod checks;
mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod kube;
mod manifest;
mod memory;
mod record;
mod source;

pub use checks::{ObjectError, check_token_objects};
pub use file::{FileSource, FileSourceWatch, ReloadStatus};
pub use manifest::ManifestError;
pub use memory::MemorySource;
pub use record::{Kind, PodInfo, Record, is_warrant_annotation};
pub use source::{
    ClientError, LiveError, LiveLookup, LookupError, ObjectSource, Objects, SECRET_BINDING_DISABLED,
};
