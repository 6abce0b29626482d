//! The API through its router, without a socket: every TokenRequest and TokenReview rule and
//! message of spec §3–§5, the documents (OpenAPI included), and the limits. The end-to-end
//! tests under `tests/e2e` repeat the essentials through the real binary with kubectl.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod admission;
mod audit;
mod authz;
mod claims;
mod configmap;
mod delegated;
mod documents;
mod dpop;
mod frontproxy;
mod keybinding;
mod limits;
mod node;
mod openapi;
mod support;
mod tls;
mod tokenrequest;
mod tokenreview;
mod webhook;
