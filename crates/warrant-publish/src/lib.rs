//! warrant's discovery documents published where relying parties read them: buckets (S3, Google
//! Cloud Storage, Azure Blob, S3-compatible servers) and directories a web server serves.
//!
//! Clouds' workload-identity federation fetches an issuer's discovery document and JWKS from a
//! public HTTPS URL; most clusters do not expose their issuer, so the two documents are hosted
//! in a bucket. This crate keeps them there exactly as warrant serves them, and keeps a key from
//! signing before every bucket lists it:
//!
//! - [`Target`]: a `--publish-discovery` URL, its store (the `object_store` crate, with each
//!   cloud's credential chain from the environment) and the placement rule that ties the issuer
//!   URL and `jwks_uri` to the target's object keys, checked at startup ([`Placement`], or a
//!   [`PlacementError`] saying what does not agree).
//! - [`Publisher`]: rounds that write what differs (only then) and read it back, on every key
//!   change and on a timer (restoring what someone overwrote); its task is owned by a
//!   [`PublisherTask`]. Only the replica that writes the key store writes; others check.
//! - The activation gate: the publisher tells the key manager which keys every target lists, by
//!   kid and key material ([`Publisher::gate`], warrant-keys' `ActivationGate` and
//!   `ListedKeys`); the manager holds back a key due to sign that they do not all list
//!   (warrant-keys' `ManagedKeySet::hold_unlisted`).
//! - [`PublishHealth`] for readiness, [`PublishMetrics`] for Prometheus.

mod endpoint;
mod metrics;
mod placement;
mod publisher;
mod target;
mod webroot;

pub use endpoint::{Endpoint, EndpointError};
pub use metrics::PublishMetrics;
pub use placement::{DISCOVERY_SUFFIX, Kind, Placement, PlacementError};
pub use publisher::{
    CONTENT_TYPE, Documents, PublishError, PublishHealth, Publisher, PublisherTask, RECHECK, RETRY,
    TargetStatus,
};
pub use target::{ObjectError, Target, TargetError};
pub use webroot::{WebRoot, WebRootError};
