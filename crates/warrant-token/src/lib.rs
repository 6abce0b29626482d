//! The token core of warrant: Kubernetes-compatible bound service-account tokens.
//!
//! This crate is pure: it performs no I/O and never reads the clock. Every function that depends
//! on the time takes `now` as an argument, so every time rule is testable to the second.
//!
//! - [`Claims`] are the claims kube-apiserver writes, serialised byte-identically.
//! - [`SigningKey`] and [`VerifyingKey`] hold RSA and ECDSA keys parsed once, with
//!   kube-apiserver's key ID ([`key_id`]); [`parse_pem_keys`] and friends read them from PEM.
//! - [`SigningKey::sign`] makes a compact JWS; [`Verifier::verify`] runs kube-apiserver's
//!   validation pipeline and returns a [`VerifiedToken`] or a [`TokenError`] whose message is
//!   kube-apiserver's.
//! - [`verify_proof`] checks a DPoP proof (RFC 9449) for key-bound tokens, whose `cnf` claim
//!   ([`Cnf`], read once) names a key by its [`jwk_thumbprint`] (RFC 7638) or a certificate by
//!   its [`certificate_thumbprint`] (RFC 8705); [`check_binding`] is the one check that every
//!   binding a token names was proven.
//! - [`render_jwks`] and [`render_discovery`] build the documents relying parties fetch.
//! - [`parse_claims_strictly`] reads claims to be signed so that no JWT reader can see other
//!   values in them (no repeated keys, no case variants of registered names).
//! - [`ExpirationPolicy`] decides a requested token's lifetime; [`UserInfo`] is what a valid
//!   token authenticates as.
//!
//! ```no_run
//! use warrant_token::*;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let key = SigningKey::generate(KeyType::P256)?;
//! let now = jiff::Timestamp::from_second(1_800_000_000)?;
//! let claims = Claims::new(NewToken {
//!     issuer: "https://issuer.example",
//!     namespace: "default",
//!     service_account: ObjectRef::new("app", "9f0c…"),
//!     audiences: vec!["vault".into()],
//!     binding: Binding::None,
//!     issued_at: now.as_second(),
//!     expires_at: now.as_second() + 3600,
//!     warn_after: None,
//!     jti: new_jti(),
//! });
//! let token = key.sign(&claims)?;
//! let verifier = Verifier::new(
//!     vec!["https://issuer.example".into()],
//!     vec!["https://issuer.example".into()],
//!     vec![key.verifying_key().clone()],
//! );
//! let verified = verifier.verify(&token, &["vault".into()], now)?;
//! assert_eq!(verified.user_info().username, "system:serviceaccount:default:app");
//! # Ok(())
//! # }
//! ```

mod claims;
mod cnf;
#[doc(hidden)]
pub mod der;
mod documents;
mod dpop;
mod error;
mod extra;
#[doc(hidden)]
pub mod fuzzing;
mod gojson;
mod goquote;
mod gourl;
mod jws;
mod key_binding;
mod keys;
mod lifetime;
mod numeric_date;
mod pem;
mod remote;
mod strict;
mod userinfo;
mod verify;

pub use claims::{
    Binding, BoundKind, BoundObjectReference, Claims, KubernetesClaims, NewToken, ObjectRef,
    SERVICE_ACCOUNT_USERNAME_PREFIX, is_service_account_username, new_jti,
    service_account_username,
};
pub use cnf::{CNF_JKT, CNF_X5T_S256, Cnf, CnfError, Confirmation, certificate_thumbprint};
pub use documents::{
    render_discovery, render_jwks, render_jwks_with_certificates, validate_issuer_url,
    validate_jwks_uri,
};
pub use dpop::{
    DEFAULT_PROOF_WINDOW_SECONDS, DPOP_ALGORITHMS, DPOP_PROOF_TYP, DpopError, MAX_JTI_BYTES,
    MAX_PROOF_BYTES, ProofRequest, VerifiedProof, access_token_hash, jwk_thumbprint,
    jwk_thumbprint_of, make_proof, proof_window, verify_proof,
};
pub use error::{DocumentError, KeyError, TokenError};
pub use extra::{
    AWS_TAGS_CLAIM, AwsTagError, ExtraClaims, aws_limits, aws_session_tags, aws_tag_char,
    check_aws_tag_key, check_aws_tag_keys, check_aws_tag_value, extra_claims_in, is_reserved_claim,
};
pub use gourl::path_unescape;
pub use jws::{DetachedSignature, header_key_id};
pub use key_binding::{BindingError, CertificateEvidence, Evidence, check_binding};
pub use keys::{Algorithm, KeyType, PrivateKeyPem, SigningKey, VerifyingKey, key_id};
pub use lifetime::{
    DEFAULT_EXPIRATION_SECONDS, EXTENDED_EXPIRATION_SECONDS, ExpirationPolicy, Lifetime,
    MAX_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS, WARN_ONLY_EXPIRATION_SECONDS,
    validate_expiration_seconds,
};
pub use pem::{PemKey, parse_pem_keys, signing_key_from_pem, verifying_keys_from_pem};
pub use remote::{RemoteKey, RemoteSignError, RemoteSignature};
pub use strict::{
    ClaimsJsonError, EncodedClaimsError, REGISTERED_CLAIMS, UnverifiedClaimsError,
    decode_claims_strictly, parse_claims_strictly, unverified_claims,
};
pub use userinfo::{
    EXTRA_CREDENTIAL_ID, EXTRA_NODE_NAME, EXTRA_NODE_UID, EXTRA_POD_NAME, EXTRA_POD_UID,
    GROUP_AUTHENTICATED, GROUP_SERVICE_ACCOUNTS, UserInfo, service_account_groups,
};
pub use verify::{
    LEEWAY_SECONDS, MAX_AUDIENCE_BYTES, MAX_AUDIENCES, MAX_TOKEN_BYTES, VerifiedToken, Verifier,
    audiences_over_limits,
};

/// Go's `%q` quoting, for messages that must match kube-apiserver's.
pub fn go_quote(s: &str) -> String {
    goquote::quote(s)
}

/// The most characters of a value a caller chose (a name, an `apiVersion`, an annotation) that
/// an error or a log line quotes: past it the value is cut, so a caller cannot make warrant's
/// answers or logs as large as its requests.
pub const QUOTED_VALUE_CHARS: usize = goquote::QUOTED_VALUE_CHARS;

/// A caller's value Go-quoted as an error quotes it, cut to [`QUOTED_VALUE_CHARS`] characters
/// (`…` after the quote says it was cut).
pub fn quote_value(s: &str) -> String {
    goquote::quote_cut(s)
}

/// A caller's value for a log field or a message that does not quote it: cut to
/// [`QUOTED_VALUE_CHARS`] characters, `…` after a cut.
pub fn cut_value(s: &str) -> std::borrow::Cow<'_, str> {
    goquote::cut(s)
}

/// Go's `%q` of a `[]string` (`["a" "b"]`), for the audience lists in kube's messages.
pub fn go_quote_list<S: AsRef<str>>(items: &[S]) -> String {
    goquote::quote_list(items)
}
