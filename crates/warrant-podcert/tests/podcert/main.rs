//! The signer core end to end: PCRs as kube-apiserver serves them, decided against live facts
//! and a policy, leaves checked by an independent reader, and kube-apiserver's status rules
//! checked against its own answers (`tests/vectors/`, captured from v1.36.2).
//!
//! One test binary with modules, as the workspace's other integration tests are.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod decisions;
mod robustness;
mod status_vectors;
mod support;
