//! warrant's own tokens: a bearer token warrant issued for one of its API audiences
//! (`--api-audiences`) authenticates as its service account, exactly as the TokenReview
//! endpoint would review it (signature, issuer, audience, time, then the service account and
//! the bound object must still exist with the same UIDs).
//!
//! What this trusts: warrant's own verification keys and object source, nothing else. A token
//! issued for another audience (`vault`, a cloud) never authenticates here, so a relying party
//! that receives one cannot replay it against warrant. A token that is recognisably warrant's
//! but invalid is refused outright (see the chain in the parent module).
//!
//! No cache: every request re-checks the objects, so deleting the pod the token is bound to
//! ends its access at once (after kube's 60 s grace for objects being deleted).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use jiff::Timestamp;
use warrant_token::{Binding, Confirmation, UserInfo};

use http::HeaderMap;
use warrant_token::{DpopError, ProofRequest};

use super::dpop::ProofChecker;
use super::{Failure, Outcome, PeerCertificate, RequestTarget, User, Via};

/// What a review of a bearer token as one of warrant's own found.
#[derive(Debug, Clone, PartialEq, Eq)]
// `Valid` is the answer nearly every time, and it is moved once per request: boxing it would
// cost an allocation per request to save bytes on the rare answers.
#[allow(clippy::large_enum_variant)]
pub enum OwnTokenReview {
    /// Not warrant's token (another issuer, not a JWT): other authenticators may know it.
    NotMine,
    /// Warrant's token, and not valid (why, for the log).
    Invalid(String),
    /// Valid: who it names, and what it is bound to.
    Valid {
        /// The service account's user info.
        user: UserInfo,
        /// The object the token is bound to.
        binding: Binding,
        /// The key the token is bound to (`cnf`), if any: then it authenticates only with a
        /// proof of that key (see the parent module).
        cnf: Option<Confirmation>,
    },
}

/// Reviews bearer tokens as warrant's own for its API audiences: the server's TokenReview,
/// the one review of a token (signature, issuer, audience, time, then the objects).
pub trait OwnTokens: Send + Sync {
    /// Reviews `token` at `now`.
    fn review<'a>(
        &'a self,
        token: &'a str,
        now: Timestamp,
    ) -> Pin<Box<dyn Future<Output = OwnTokenReview> + Send + 'a>>;
}

/// How a token was presented: as a bearer token, or under the `DPoP` scheme with a proof.
pub(crate) enum Presented<'a> {
    /// `Authorization: Bearer <token>` on a connection that presented `peer` (perhaps nothing):
    /// a token bound to a DPoP key is refused, one bound to a certificate only passes if `peer`
    /// is that certificate (RFC 8705 §3).
    Bearer { peer: &'a PeerCertificate },
    /// `Authorization: DPoP <token>` with the request's `DPoP` proof, checked against this
    /// request by `proofs`.
    Dpop {
        proofs: &'a ProofChecker,
        headers: &'a HeaderMap,
        target: &'a RequestTarget<'a>,
    },
}

/// Authenticates `token` through `own`. A token bound to a DPoP key (`cnf.jkt`) authenticates
/// only under the DPoP scheme with a valid proof of its key (RFC 9449 §7): as a bearer token it
/// is refused, which is the point of binding it. A token bound to a certificate
/// (`cnf.x5t#S256`) authenticates only as a bearer token on a connection that presented that
/// certificate (RFC 8705 §3). A token that is not key-bound is refused under the DPoP scheme (it
/// proves nothing the proof could confirm).
pub(crate) async fn authenticate(
    own: &dyn OwnTokens,
    token: &str,
    presented: Presented<'_>,
    now: Timestamp,
) -> Outcome {
    let (info, binding, cnf) = match own.review(token, now).await {
        OwnTokenReview::NotMine => return Outcome::NotMine,
        OwnTokenReview::Invalid(why) => return Outcome::Failed(Failure::OwnToken(why)),
        OwnTokenReview::Valid { user, binding, cnf } => {
            (user, binding, cnf.filter(Confirmation::binds))
        }
    };
    let mut proven_key = None;
    match (&presented, &cnf) {
        (Presented::Bearer { .. }, None) => {}
        (Presented::Bearer { peer }, Some(cnf)) => match cnf.x5t_s256.as_deref() {
            Some(bound) if cnf.jkt.is_none() => {
                if peer.thumbprint().as_deref() != Some(bound) {
                    return Outcome::Failed(Failure::BoundCertificateMissing);
                }
            }
            _ => return Outcome::Failed(Failure::KeyBoundAsBearer),
        },
        (Presented::Dpop { .. }, None) => return Outcome::Failed(Failure::NotKeyBound),
        (
            Presented::Dpop {
                proofs,
                headers,
                target,
            },
            Some(cnf),
        ) => {
            let Some(jkt) = cnf.jkt.as_deref() else {
                // Bound to a certificate: not provable with a DPoP proof.
                return Outcome::Failed(Failure::CertificateBoundAsDpop);
            };
            let Some(uri) = proofs.target_uri(target.uri, headers) else {
                return Outcome::Failed(Failure::Proof(DpopError::Uri));
            };
            let request = ProofRequest {
                method: target.method.as_str(),
                uri: &uri,
                access_token: Some(token),
                bound_to: Some(jkt),
            };
            match proofs.check(headers, &request, now) {
                Ok(Some(proof)) => proven_key = Some(proof.jkt),
                Ok(None) => return Outcome::Failed(Failure::NoProof),
                Err(why) => return Outcome::Failed(Failure::Proof(why)),
            }
        }
    }
    let mut user = User::new(info.username, info.uid, info.groups, Via::OwnToken(binding));
    user.extra = info.extra;
    user.proven_key = proven_key;
    Outcome::User(Arc::new(user))
}
