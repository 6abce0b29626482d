//! What both sides of warrant's wire share, so that neither writes it again: the Kubernetes
//! wire types warrant serves and its clients send ([`wire`]), the API groups and versions
//! ([`groups`]), the well-known paths, and the contract between token injection's webhook and
//! the token agent it puts into pods ([`agent_contract`]).
//!
//! The server (warrant-server) and the clients (warrant-client: the credential plugin and the
//! token agent) both depend on this crate, and neither on the other: a client is built without
//! the server's HTTP stack (kanidm's `proto` crate). No I/O here, only types, constants and
//! their serde forms.

pub mod agent_contract;
pub mod groups;
pub mod wire;

/// Where the OIDC discovery document is served (below the issuer, as OIDC has it).
pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";
/// Where the JWKS is served; the discovery document's default `jwks_uri` points here.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
/// Where the SPIFFE trust bundle is served.
pub const SPIFFE_BUNDLE_PATH: &str = "/.well-known/spiffe-bundle";
/// Where kube-apiserver sends pods for token injection (a MutatingWebhookConfiguration's
/// `clientConfig.service.path`).
pub const ADMISSION_PATH: &str = "/mutate/pods";
