//! warrant's one policy for outbound HTTP, as kube-client builds its one connector from one
//! configuration. Three ideas, each written once:
//!
//! - **What a server is trusted by** ([`Trust`]): the system's roots, a CA file's certificates
//!   beside them, or a CA file's alone; a CA file is read by [`ca_file`], whose errors name it.
//! - **Where plain HTTP may go** ([`Destination`]): `https://` anywhere, `http://` only to a
//!   loopback host ([`is_loopback_host`]), so KMS's endpoint and a bucket's cannot disagree
//!   about an address.
//! - **The connector** ([`https_connector`]): hyper-util's TCP connector under hyper-rustls
//!   on aws-lc-rs, from a [`Trust`] and [`Options`] (plain HTTP allowed, connect timeout,
//!   `TCP_NODELAY`).
//!
//! Its users: the AWS SDK's HTTP client for KMS (warrant-kms), `warrant verify`'s fetches, the
//! credential plugin's and the token agent's TokenRequest (warrant-client, under kube's
//! layers), the benchmark's preflight. Publishing to buckets (warrant-publish) checks its
//! endpoint here but connects through object_store's own client (reqwest), which takes no
//! connector of ours (docs/decisions.md).

mod connector;
mod endpoint;
mod trust;

pub use connector::{HttpsConnector, Options, https_connector};
pub use endpoint::{Destination, is_loopback_host};
pub use trust::{CaFileError, Trust, ca_file};
