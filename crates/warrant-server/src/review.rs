//! The one review of a token, used by TokenReview and by the own-token authenticator alike:
//! signature, issuer, audience and time (through the verified-signature cache), then, on every
//! review, the service account and the bound object in the object source.

use std::sync::Arc;

use jiff::Timestamp;
use warrant_objects::{ObjectError, Objects, check_token_objects};
use warrant_token::{Claims, TokenError, VerifiedToken};

use crate::metrics::{Metrics, ReviewResult};
use warrant_issuer::Published;

/// Why a token did not pass: the result to count, and the reason (kube's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Not mine, invalid, or undecidable.
    pub(crate) result: ReviewResult,
    /// Why, as TokenReview's `status.error` says it.
    pub(crate) reason: String,
    /// The token's claims, when its signature was good and an object check refused it (for
    /// the audit event: whose token it was).
    pub(crate) claims: Option<Arc<Claims>>,
}

impl Refused {
    /// True if the token is not warrant's at all.
    pub(crate) fn not_mine(&self) -> bool {
        self.result == ReviewResult::NotMine
    }
}

/// Reviews `token` for `audiences` (empty: the API audiences) at `now`, with the keys of
/// `published` and the objects of `objects`; counts the signature cache lookup in `metrics`.
pub(crate) async fn review_token(
    published: &Published,
    objects: &Objects,
    metrics: &Metrics,
    token: &str,
    audiences: &[String],
    now: Timestamp,
) -> Result<VerifiedToken, Refused> {
    let refused = |result, reason: String| Refused {
        result,
        reason,
        claims: None,
    };
    let (verified, lookup) = published.verify(token, audiences, now);
    metrics.signature_lookup(lookup);
    let verified = match verified {
        Ok(verified) => verified,
        Err(e @ TokenError::NotMine) => return Err(refused(ReviewResult::NotMine, e.to_string())),
        Err(e) => return Err(refused(ReviewResult::Invalid, e.to_string())),
    };
    let (result, reason) = match check_token_objects(objects, &verified.claims, now).await {
        Ok(()) => return Ok(verified),
        Err(e @ ObjectError::Lookup(_)) => (ReviewResult::Unavailable, e.to_string()),
        Err(e) => (ReviewResult::Invalid, e.to_string()),
    };
    Err(Refused {
        result,
        reason,
        claims: Some(verified.claims),
    })
}
