//! End-to-end tests: the real `warrant` binary, started as a user starts it (`local-setup`, then
//! `serve`), driven by real clients: kubectl for TokenRequest and TokenReview, an HTTPS client
//! for the rest. Nothing leaves the loopback interface.
//!
//! These tests need `kubectl` and `openssl` on the PATH (`.ci/run` checks).

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod audit;
mod auth;
mod bad_input;
mod claims;
mod client_certs;
mod cluster;
mod control_plane;
mod credential;
mod deploy;
mod docs;
mod errors;
mod getting_started;
mod hardening;
mod held;
mod hsm;
mod injection;
mod keybinding;
mod keys;
mod kms;
mod metrics_listener;
mod oidc;
mod pki;
mod pod_ca_keys;
mod pod_certificates;
mod pod_certificates_live;
mod publish;
mod recipes;
mod release;
mod reviews;
mod secret_keys;
mod signer;
mod support;
mod tokens;
mod validation;
