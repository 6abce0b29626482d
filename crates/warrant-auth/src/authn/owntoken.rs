//! warrant's own tokens: a bearer token warrant issued for one of its API audiences
//! (`--api-audiences`) authenticates as its service account, exactly as the TokenReview
//! endpoint would review it (signature, issuer, audience, time, then the service account and
//! the bound object must still exist with the same UIDs).
//!
//! The token agent's audience (`--token-agent-audience`) is accepted too, for a token that
//! names it: where warrant is the cluster's signer, the pod token a token agent presents is
//! one of warrant's own, projected for that audience so that kube-apiserver never accepts it.
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

use http::HeaderMap;
use jiff::Timestamp;
use warrant_token::{
    Binding, CertificateEvidence, Cnf, DpopError, Evidence, ProofRequest, UserInfo, check_binding,
};

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
        /// The token's `cnf` claim, if any: then it authenticates only with the proof of every
        /// binding it names (`warrant_token::check_binding`), and not at all if warrant does not
        /// understand it.
        cnf: Option<Cnf>,
    },
}

/// Reviews bearer tokens as warrant's own for its API audiences (or the token agent's): the
/// server's TokenReview, the one review of a token (signature, issuer, audience, time, then
/// the objects).
pub trait OwnTokens: Send + Sync {
    /// Reviews `token` at `now`, for `audience` (the token agent's, when the token names it),
    /// or for the API audiences when `None`.
    fn review<'a>(
        &'a self,
        token: &'a str,
        audience: Option<&'a str>,
        now: Timestamp,
    ) -> Pin<Box<dyn Future<Output = OwnTokenReview> + Send + 'a>>;
}

/// How a token was presented: as a bearer token, or under the `DPoP` scheme with a proof.
pub(crate) enum Presented<'a> {
    /// `Authorization: Bearer <token>` on a connection that presented `peer` (perhaps nothing).
    Bearer { peer: &'a PeerCertificate },
    /// `Authorization: DPoP <token>` with the request's `DPoP` proof, checked against this
    /// request by `proofs`, on a connection that presented `peer` (perhaps nothing).
    Dpop {
        proofs: &'a ProofChecker,
        headers: &'a HeaderMap,
        target: &'a RequestTarget<'a>,
        peer: &'a PeerCertificate,
    },
}

/// Authenticates `token` through `own`, then its key binding through the one check of it
/// (`warrant_token::check_binding`): every binding its `cnf` names must be proven on this
/// request, a DPoP key (`cnf.jkt`) by the `DPoP` proof under the DPoP scheme (RFC 9449 §7), a
/// certificate (`cnf.x5t#S256`) by this connection's (RFC 8705 §3); a `cnf` warrant does not
/// understand is refused; a token that is not bound to a DPoP key is refused under the DPoP
/// scheme (it proves nothing the proof could confirm). The proof is charged, in the replay
/// cache, to the service account the token names.
pub(crate) async fn authenticate(
    own: &dyn OwnTokens,
    token: &str,
    audience: Option<&str>,
    presented: Presented<'_>,
    now: Timestamp,
) -> Outcome {
    let (info, binding, cnf) = match own.review(token, audience, now).await {
        OwnTokenReview::NotMine => return Outcome::NotMine,
        OwnTokenReview::Invalid(why) => return Outcome::Failed(Failure::OwnToken(why)),
        OwnTokenReview::Valid { user, binding, cnf } => (user, binding, cnf),
    };
    let (peer, proofs) = match &presented {
        Presented::Bearer { peer } => (*peer, None),
        Presented::Dpop {
            proofs,
            headers,
            target,
            peer,
        } => (*peer, Some((*proofs, *headers, *target))),
    };
    let thumbprint = peer.thumbprint();
    let evidence = Evidence {
        dpop_proof: proofs.is_some(),
        certificate: thumbprint
            .as_deref()
            .map_or(CertificateEvidence::None, CertificateEvidence::Connection),
    };
    let prove = |jkt: &str| {
        let (proofs, headers, target) = proofs.ok_or(DpopError::NotOne)?;
        let uri = proofs
            .target_uri(target.uri, headers)
            .ok_or(DpopError::Uri)?;
        let request = ProofRequest {
            method: target.method.as_str(),
            uri: &uri,
            access_token: Some(token),
            bound_to: Some(jkt),
        };
        // No `DPoP` header under the DPoP scheme: not exactly one proof.
        proofs
            .check(headers, &request, &info.username, now)?
            .ok_or(DpopError::NotOne)
    };
    let bound_to = match check_binding(cnf.as_ref(), &evidence, prove) {
        Ok(bound_to) => bound_to.cloned(),
        Err(why) => return Outcome::Failed(Failure::KeyBinding(why)),
    };
    let mut user = User::new(info.username, info.uid, info.groups, Via::OwnToken(binding));
    user.extra = info.extra;
    user.bound_to = bound_to;
    Outcome::User(Arc::new(user))
}
