//! How managed keys rotate: the [`RotationPolicy`], and the limits it is checked against, each
//! with the reason for its value.

use warrant_token::KeyType;

use super::REMOVAL_LEEWAY_SECONDS;

/// The shortest `publish-ahead` accepted: the documents' smallest max-age, so a relying party
/// that honours max-age has always refetched the JWKS before a key it did not have signs.
pub const MIN_PUBLISH_AHEAD_SECONDS: i64 = 60;

/// How long a replica that follows a shared store (`--key-secret`) may take to hear of a key its
/// writer created: a watch event within a second; without one, a follower re-reads the store
/// every 10 s while a successor is due and unseen. Thirty seconds also cover the writer's key
/// generation (seconds in some HSMs) and clock skew between the nodes.
pub const FOLLOW_LAG_SECONDS: i64 = 30;

/// The shortest `publish-ahead` accepted for a shared store: a key must reach every replica
/// ([`FOLLOW_LAG_SECONDS`]) and then whoever re-reads what that replica publishes, at least every
/// [`MIN_PUBLISH_AHEAD_SECONDS`] (the documents' smallest max-age, and the smallest refresh hint
/// kube-apiserver gets from FetchKeys, which it honours to the second), before any replica
/// signs with it.
pub const MIN_SHARED_PUBLISH_AHEAD_SECONDS: i64 = MIN_PUBLISH_AHEAD_SECONDS + FOLLOW_LAG_SECONDS;

/// The longest lead of the activation gate (see [`ManagedKeySet::hold_unlisted`]): the
/// documents' longest `max-age` (warrant-issuer's `DOCUMENT_MAX_AGE_SECONDS`), so a relying
/// party that honours it has re-read a bucket's JWKS after the gate last found the key there.
///
/// [`ManagedKeySet::hold_unlisted`]: super::ManagedKeySet::hold_unlisted
pub const GATE_LEAD_MAX_SECONDS: i64 = 3600;

/// How managed keys rotate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotationPolicy {
    /// The kind of key generated.
    pub key_type: KeyType,
    /// How long each key signs before its successor takes over.
    pub rotation_period_seconds: i64,
    /// How long a key is published before it signs: long enough for every relying party to
    /// have re-read the JWKS.
    pub publish_ahead_seconds: i64,
    /// The longest lifetime of a token issued now (see
    /// [`ExpirationPolicy::longest_token_seconds`](warrant_token::ExpirationPolicy::longest_token_seconds)).
    /// A key keeps verifying for this long after it retires.
    pub max_token_seconds: i64,
}

impl RotationPolicy {
    /// Default rotation period: a week. Short enough that a leaked key is useful for days, not
    /// months; long enough that the JWKS holds only a few keys.
    pub const DEFAULT_ROTATION_PERIOD_SECONDS: i64 = 7 * 24 * 3600;
    /// Default publish-ahead: a day. Relying parties re-read a JWKS every few minutes to a few
    /// hours; a day covers the slow ones with room to spare.
    pub const DEFAULT_PUBLISH_AHEAD_SECONDS: i64 = 24 * 3600;

    /// Checks that the policy can keep its promises.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.publish_ahead_seconds < MIN_PUBLISH_AHEAD_SECONDS {
            return Err(PolicyError::PublishAheadTooShort(
                self.publish_ahead_seconds,
            ));
        }
        if self.rotation_period_seconds <= self.publish_ahead_seconds {
            return Err(PolicyError::PeriodNotAfterPublishAhead {
                period: self.rotation_period_seconds,
                publish_ahead: self.publish_ahead_seconds,
            });
        }
        if self.max_token_seconds <= 0 {
            return Err(PolicyError::MaxTokenSeconds(self.max_token_seconds));
        }
        Ok(())
    }

    /// Checks, beyond [`validate`](Self::validate), that the policy can keep its promise when
    /// replicas on several machines share the store and one of them writes it: each new key
    /// reaches every replica, and every reader of every replica, before it signs (see
    /// [`MIN_SHARED_PUBLISH_AHEAD_SECONDS`]).
    pub fn validate_shared(&self) -> Result<(), PolicyError> {
        self.validate()?;
        if self.publish_ahead_seconds < MIN_SHARED_PUBLISH_AHEAD_SECONDS {
            return Err(PolicyError::SharedPublishAheadTooShort(
                self.publish_ahead_seconds,
            ));
        }
        Ok(())
    }

    /// How long before its activation a key must be listed by every place the documents are
    /// published to (the activation gate, [`ManagedKeySet::hold_unlisted`]): half the
    /// publish-ahead, at most [`GATE_LEAD_MAX_SECONDS`]. Half, so a successor created
    /// publish-ahead before it activates has half of that to reach the buckets before the gate
    /// looks.
    ///
    /// [`ManagedKeySet::hold_unlisted`]: super::ManagedKeySet::hold_unlisted
    pub fn gate_lead_seconds(&self) -> i64 {
        (self.publish_ahead_seconds / 2).clamp(1, GATE_LEAD_MAX_SECONDS)
    }

    /// The most keys the JWKS holds at once under this policy: the next key, the active one,
    /// and every key retired within the last token lifetime (plus leeway).
    pub fn most_published_keys(&self) -> i64 {
        let period = self.rotation_period_seconds.max(1);
        let retained = self
            .max_token_seconds
            .saturating_add(REMOVAL_LEEWAY_SECONDS)
            .saturating_add(period - 1)
            / period;
        retained.saturating_add(2)
    }
}

/// A rotation policy that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Publish-ahead below the minimum.
    #[error(
        "--key-publish-ahead of {0}s is too short: relying parties need time to fetch a key before it signs (at least {MIN_PUBLISH_AHEAD_SECONDS}s; the default is 24h)"
    )]
    PublishAheadTooShort(i64),
    /// A rotation period that does not leave room to publish the successor ahead.
    #[error(
        "--key-rotation-period ({period}s) must be longer than --key-publish-ahead ({publish_ahead}s): each key is published that long before it takes over"
    )]
    PeriodNotAfterPublishAhead {
        /// The rotation period.
        period: i64,
        /// The publish-ahead.
        publish_ahead: i64,
    },
    /// Publish-ahead too short for replicas that share a store.
    #[error(
        "--key-publish-ahead of {0}s is too short for keys shared through a Kubernetes Secret: a new key must reach every replica (up to {FOLLOW_LAG_SECONDS}s) and then every client of each, kube-apiserver's FetchKeys included, which re-read it at least every {MIN_PUBLISH_AHEAD_SECONDS}s, before it signs (at least {MIN_SHARED_PUBLISH_AHEAD_SECONDS}s; the default is 24h)"
    )]
    SharedPublishAheadTooShort(i64),
    /// A non-positive token lifetime.
    #[error("the longest token lifetime must be positive, got {0}s")]
    MaxTokenSeconds(i64),
}
