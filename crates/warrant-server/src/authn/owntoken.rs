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

use std::sync::Arc;

use jiff::Timestamp;
use warrant_objects::check_token_objects;
use warrant_token::TokenError;

use super::{Outcome, User, Via};
use crate::state::AppState;

/// Verifies `token` as one of warrant's own, for the API audiences.
pub(crate) async fn authenticate(state: &AppState, token: &str, now: Timestamp) -> Outcome {
    let published = state.published();
    // Through the verified-signature cache: a workload authenticates with the same token over
    // and over. The objects are still checked on every request.
    let (verified, lookup) = published.verify(token, &[], now);
    state.metrics().signature_lookup(lookup);
    let verified = match verified {
        Ok(verified) => verified,
        Err(TokenError::NotMine) => return Outcome::NotMine,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    if let Err(e) = check_token_objects(state.objects(), &verified.claims, now).await {
        return Outcome::Failed(e.to_string());
    }
    let info = verified.user_info();
    let mut user = User::new(
        info.username,
        info.uid,
        info.groups,
        Via::OwnToken(verified.claims.binding()),
    );
    user.extra = info.extra;
    Outcome::User(Arc::new(user))
}
