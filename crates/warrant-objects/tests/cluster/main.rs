//! The cluster source against the loopback Kubernetes fixture: kube-rs talks real HTTP to a
//! server that speaks the list/watch protocol, and the tests check what `Objects` and
//! `check_token_objects` answer as the cluster changes and misbehaves.
//!
//! One test binary with modules, so the crate's tests link once. Tests never sleep: they wait
//! for the cache or the fixture to reach a state, with a timeout as a safety net.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod input;
mod lookups;
mod recovery;
mod support;
mod tokens;
