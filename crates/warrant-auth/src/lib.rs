//! Who may call warrant, and what they may do: kube-apiserver's authentication, authorization
//! and (for TokenRequest) admission, as warrant's HTTP API applies them.
//!
//! - [`authn`]: the authenticator chain (front proxy, client certificates, the token file,
//!   warrant's own tokens, kube-apiserver's TokenReview), each module saying what it trusts.
//! - [`authz`]: the authorizers (always-allowed groups, self-service, the policy file,
//!   kube-apiserver's SubjectAccessReview) and admission of a token request (the caller's own
//!   binding, node restriction, the grant's limits).
//! - [`delegation`]: asking kube-apiserver, cached and bounded, for both.
//!
//! This crate knows nothing of HTTP routing or of the server's state: each authenticator and
//! authorizer owns the handles it needs (trust anchors, clients, the policy, the objects), the
//! server hands in what only it has (its review of its own tokens, [`authn::OwnTokens`]; the
//! request's attributes, [`authz::Attributes`]), and refusals come back as [`Refusal`], which
//! the server renders as kube's `Status`. Cargo forbids cycles between crates, so none can come
//! back.

pub mod authn;
pub mod authz;
pub mod delegation;

pub use authn::{
    Authenticator, CaBundle, CaError, Caller, ClientCertificateError, ClientTrust,
    DelegatedAuthentication, Follow, FrontProxy, OwnTokenReview, OwnTokens, PeerCertificate,
    ProofChecker, RequestHeaders, RequestTarget, TokenFile, TokenFileError, User, Via,
    follow_extension_authentication,
};
pub use authz::{
    Attributes, AuthorizationPolicyError, Authorized, Authorizer, DEFAULT_ALWAYS_ALLOW_GROUPS,
    DEFAULT_ALWAYS_ALLOW_PATHS, Decided, DelegatedAuthorization, Grant, Policy, PolicyFile,
    ResourceAttributes, TokenAsk, Verdict,
};
pub use delegation::{
    Backoff, DEFAULT_MAX_IN_FLIGHT, DelegationError, DelegationOptions, MAX_DELEGATED_TOKEN_BYTES,
    OVERLOAD_RETRY_AFTER_SECONDS,
};

/// Why a request is refused, in kube's terms; the server answers each with kube's `Status`.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// 401: no valid credentials (the reason is logged, never sent).
    Unauthorized,
    /// 401 for a key-bound token presented without a valid DPoP proof (as a bearer token, with
    /// no proof, or with one that does not fit): RFC 9449's `WWW-Authenticate: DPoP
    /// error="invalid_dpop_proof"` tells the client what is missing. The reason is logged.
    InvalidDpopProof,
    /// 429: too many lookups in flight to take another; retry after the given seconds
    /// ([`Refusal::overloaded`]).
    TooManyRequests {
        /// `Retry-After`.
        retry_after_seconds: u32,
    },
    /// 403 in kube's words: `<resource[.group]> "<name>" is forbidden: <reason>`.
    Forbidden {
        /// The API group; empty for the core group.
        group: String,
        /// The resource; empty for a non-resource path.
        resource: String,
        /// The object's name; may be empty.
        name: String,
        /// Why.
        reason: String,
    },
    /// 404 for a named object: `pods "p1" not found`.
    NotFound {
        /// The resource (`pods`).
        resource: String,
        /// The name.
        name: String,
    },
    /// 503: authorization could not be decided (kube-apiserver's SubjectAccessReview could
    /// not be had, and no other authorizer allowed). The cause is a value; the server words it.
    Undecided(DelegationError),
}

impl Refusal {
    /// The one answer when a delegation has too many lookups in flight to start another,
    /// authentication and authorization alike: 429, retry after
    /// [`OVERLOAD_RETRY_AFTER_SECONDS`] (see [`delegation`]).
    pub fn overloaded() -> Refusal {
        Refusal::TooManyRequests {
            retry_after_seconds: OVERLOAD_RETRY_AFTER_SECONDS,
        }
    }

    /// Authorization that could not be decided: [`Refusal::overloaded`] for overload, 503
    /// otherwise.
    pub fn undecided(error: DelegationError) -> Refusal {
        if error.is_overload() {
            Refusal::overloaded()
        } else {
            Refusal::Undecided(error)
        }
    }
}
