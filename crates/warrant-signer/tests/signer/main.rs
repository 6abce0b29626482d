//! The signer over its Unix socket with a real gRPC client (tonic), as kube-apiserver calls it:
//! what Sign returns, what it refuses, what FetchKeys and Metadata say, and rotation with the
//! clock as a parameter.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod codes;
mod connections;
mod control_plane;
mod kube_vectors;
mod rotation;
mod sign;
mod support;
