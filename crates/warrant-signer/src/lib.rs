//! warrant as kube-apiserver's external JWT signer (KEP-740, `ExternalJWTSigner` v1).
//!
//! kube-apiserver started with `--service-account-signing-endpoint=PATH` (and no key files)
//! asks the service on that Unix socket for every signature and for the public keys it verifies
//! with and publishes. This crate is that service, over warrant's own key set: the keys that
//! sign warrant's tokens sign the cluster's, rotate on warrant's schedule, and are published by
//! both kube-apiserver and warrant, so either can review any token of the cluster.
//!
//! - [`service`]: the three RPCs, on the [`Issuer`](warrant_issuer::Issuer) the HTTPS API serves too: `Sign` checks
//!   what it is asked to sign and signs it as given; `FetchKeys` lists every published key with
//!   a refresh hint that runs down to the next scheduled key change; `Metadata` gives the longest
//!   token lifetime the keys stay published for.
//! - [`socket`]: the Unix socket, owner-only (and an optional group) from the moment it exists,
//!   a stale file from a crash replaced, a live one never taken over.
//! - [`connections`]: who may connect (`SO_PEERCRED`), how many at once, how long idle.
//! - [`metrics`]: per RPC, counts by result, refusals by reason, latency.
//!
//! The wire format comes from `proto/externaljwt.proto`, compiled at build time by protox (pure
//! Rust) and tonic-prost-build.

pub mod connections;
pub mod metrics;
pub mod peer;
pub mod service;
pub mod socket;

/// The messages and the service of `proto/externaljwt.proto` (package `v1`).
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
pub mod proto {
    tonic::include_proto!("v1");
}

pub use connections::{ServeOptions, serve};
pub use metrics::SignerMetrics;
pub use peer::{Peer, PeerPolicy};
pub use service::{ORDINARY_MAX_METADATA, Signer};
pub use socket::{BoundSocket, SocketError, SocketOptions, bind};
/// gRPC status codes and statuses, for callers of the client.
pub use tonic::{Code, Status};

/// A client over the Unix socket, as kube-apiserver connects (feature `client`).
#[cfg(feature = "client")]
pub mod client {
    use std::path::Path;

    use hyper_util::rt::TokioIo;
    use tonic::transport::{Channel, Endpoint};

    use crate::proto::external_jwt_signer_client::ExternalJwtSignerClient;

    /// A client of the socket, as [`connect`] returns it.
    pub type SignerClient = ExternalJwtSignerClient<Channel>;

    /// Connects to the signer at `path`. The URI is a placeholder (the socket is the address),
    /// as in kube-apiserver's own client.
    pub async fn connect(path: &Path) -> Result<SignerClient, tonic::transport::Error> {
        let path = path.to_owned();
        let channel = Endpoint::from_static("http://localhost")
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
            .await?;
        Ok(ExternalJwtSignerClient::new(channel))
    }
}
