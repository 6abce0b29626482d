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
use warrant_token::{Binding, UserInfo};

use super::{Failure, Outcome, User, Via};

/// What a review of a bearer token as one of warrant's own found.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Authenticates `token` through `own`.
pub(crate) async fn authenticate(own: &dyn OwnTokens, token: &str, now: Timestamp) -> Outcome {
    match own.review(token, now).await {
        OwnTokenReview::NotMine => Outcome::NotMine,
        OwnTokenReview::Invalid(why) => Outcome::Failed(Failure::OwnToken(why)),
        OwnTokenReview::Valid {
            user: info,
            binding,
        } => {
            let mut user = User::new(info.username, info.uid, info.groups, Via::OwnToken(binding));
            user.extra = info.extra;
            Outcome::User(Arc::new(user))
        }
    }
}
