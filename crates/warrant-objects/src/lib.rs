//! The Kubernetes objects that warrant's tokens bind to: service accounts, pods, secrets and
//! nodes, reduced to what token issuance and review need (UIDs, a pod's service account and
//! node, deletion timestamps), never more. Secret data never enters this crate.
//!
//! An [`ObjectSource`] holds the records: a manifest file in the standalone issuer, a watch
//! cache of a cluster beside one. [`Objects`] is the handle the server uses: it reads the
//! in-memory copy, and only on a miss asks the source for a live lookup (a cluster source does a
//! GET, as kube-apiserver's token getter does; a file source has nothing more to ask).

mod checks;
pub mod kube;
mod record;
mod source;

pub use checks::{ObjectError, check_token_objects};
pub use record::{Kind, PodInfo, Record};
pub use source::{LiveLookup, LookupError, ObjectSource, Objects};
