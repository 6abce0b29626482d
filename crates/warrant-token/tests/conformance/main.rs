//! Conformance tests of the token core against kube-apiserver's behaviour (spec §9), real tokens
//! from real clusters, and independent implementations (openssl, jsonwebtoken).
//!
//! One test binary with modules, so the crate's tests link once.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod audiences;
mod keys;
mod openssl;
mod rejections;
mod roundtrip;
mod support;
mod times;
mod vectors;
