//! What warrant's tests and benchmarks share, written once: the standard issuer, tokens, time
//! and UIDs ([`ISSUER`], [`ADMIN`], [`NOW`], ...), object fixtures ([`record`], [`pod`],
//! [`Crowd`]), a test CA ([`TestCa`]), a DPoP client's key ([`DpopHolder`]) and, with the `state` feature, the API state every
//! front-end test starts from ([`state`]).
//!
//! Test support, never shipped: a fixture that cannot be built is a broken test, so this crate
//! panics (with a message) where library code would return an error.

#![allow(clippy::expect_used, clippy::panic)]

mod ca;
mod dpop;
#[cfg(feature = "rotation")]
mod memory_holder;
mod objects;
#[cfg(feature = "rotation")]
pub mod purposes;
#[cfg(feature = "rotation")]
pub mod rotation;
#[cfg(feature = "servers")]
pub mod servers;
pub mod signatures;
#[cfg(feature = "signing-rate")]
pub mod signing_rate;
#[cfg(feature = "softhsm")]
pub mod softhsm;
#[cfg(feature = "state")]
mod state;
pub mod tools;

pub use ca::{Issued, TestCa};
pub use dpop::{DpopHolder, sha256_b64url};
#[cfg(feature = "rotation")]
pub use memory_holder::MemoryHolder;
pub use objects::{Crowd, MANIFEST, pod, record};
#[cfg(feature = "state")]
pub use state::{StateBuilder, key, settings, state};

/// The issuer (and API audience) of the standard test state.
pub const ISSUER: &str = "https://warrant.test";
/// The static token of `admin` (group `system:masters`), in every test state's token file.
pub const ADMIN: &str = "admin-token";
/// The tests' `now`, in seconds since the epoch (2027-01-15).
pub const NOW: i64 = 1_800_000_000;
/// ServiceAccount `demo/app`'s UID.
pub const SA_UID: &str = "11111111-1111-1111-1111-111111111111";
/// Pod `demo/app-0`'s UID.
pub const POD_UID: &str = "22222222-2222-2222-2222-222222222222";
/// Node `node-1`'s UID.
pub const NODE_UID: &str = "33333333-3333-3333-3333-333333333333";
/// The annotations of a ServiceAccount token injection gives AWS and Azure (the captured
/// AdmissionReviews' `apps/s3-reader`, whose EKS and Azure Workload Identity annotations these
/// are with warrant's prefix): tests/vectors/admission's expected pods are made with them.
pub const INJECTED_ANNOTATIONS: [(&str, &str); 3] = [
    (
        "aws.warrant.dev/role-arn",
        "arn:aws:iam::111122223333:role/s3-reader",
    ),
    (
        "azure.warrant.dev/client-id",
        "00000000-1111-2222-3333-444444444444",
    ),
    (
        "azure.warrant.dev/tenant-id",
        "55555555-6666-7777-8888-999999999999",
    ),
];
/// Secret `demo/app-token`'s UID.
pub const SECRET_UID: &str = "44444444-4444-4444-4444-444444444444";
