//! warrant-hsm against a real PKCS#11 module, SoftHSM2 (Debian package `softhsm2`; `.ci/run`
//! installs it, with OpenSC's `pkcs11-tool`).
//!
//! A PKCS#11 module is initialized once per process and reads `SOFTHSM2_CONF` then, so each
//! test runs in a process of its own: the test re-runs this binary filtered to itself, with a
//! fresh temporary token directory and `SOFTHSM2_CONF` pointing at its own configuration (see
//! `support::isolated`). Tests therefore run in parallel without sharing tokens or environment.
//! The module is `WARRANT_HSM_MODULE`, or Debian's path.

// Test support code outside #[test] functions panics on purpose: a failed step fails the test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[macro_use]
mod support;

mod faults;
mod forgery;
mod holder;
mod keys;
mod recovery;
mod replicas;
mod rotation;
