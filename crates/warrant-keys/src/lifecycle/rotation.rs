//! The records changed over time: scheduled rotation ([`ManagedKeySet::rotate`]), an
//! operator's early rotation ([`ManagedKeySet::rotate_early`]), and the activation gate, which
//! holds back a key the publish targets do not list yet ([`ManagedKeySet::hold_unlisted`]).

use jiff::Timestamp;
use warrant_token::{KeyError, KeyType, SigningKey};

use super::policy::RotationPolicy;
use super::{KeyState, ManagedKey, ManagedKeySet, plus, whole_second};
use crate::ListedKeys;

/// A key the activation gate held back: it was due to sign at `from`, and now signs at `to`
/// at the earliest (the key before it signs until then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The key ID.
    pub kid: String,
    /// When it was due to activate.
    pub from: Timestamp,
    /// When it activates now.
    pub to: Timestamp,
}

impl ManagedKeySet {
    /// Rotation: the records as they should be at `now` under `policy`, or `None` if they
    /// already are. It drops removed keys; activates the earliest key at once if none has
    /// activated yet (a new set: nothing has signed, so nothing can be stale); raises the token
    /// lifetime recorded on keys that still sign or will, if the policy now allows longer
    /// tokens; and creates the successor once it is due (see [`successor`](Self::successor)),
    /// activating when it must or, if rotation runs late, `publish-ahead` after now.
    ///
    /// `generate` makes a new key of `policy.key_type` (randomness is its only effect).
    pub fn rotate(
        &self,
        policy: &RotationPolicy,
        now: Timestamp,
        mut generate: impl FnMut(KeyType) -> Result<SigningKey, KeyError>,
    ) -> Result<Option<ManagedKeySet>, KeyError> {
        let now = whole_second(now);
        let mut changed = false;
        let mut keys: Vec<ManagedKey> = Vec::with_capacity(self.keys.len() + 1);
        for (i, key) in self.keys.iter().enumerate() {
            if self.state_of(i, now) == KeyState::Removed {
                changed = true;
            } else {
                keys.push(key.clone());
            }
        }
        if keys.is_empty() || self.stopped_at(now).is_some() {
            // A new set, or nothing signs since the signing key was revoked: a key that signs
            // at once (nothing can have a stale copy of the key set without it that matters:
            // no token has been signed since).
            keys.push(ManagedKey::new(
                generate(policy.key_type)?,
                now,
                now,
                policy.max_token_seconds,
            ));
            changed = true;
        } else if let Some(first) = keys.first_mut()
            && first.activate_at > now
        {
            // Nothing has ever signed: the earliest key starts now.
            first.activate_at = now;
            changed = true;
        }
        let active = keys.iter().rposition(|k| k.activate_at <= now).unwrap_or(0);
        for key in keys.iter_mut().skip(active) {
            if key.max_token_seconds < policy.max_token_seconds {
                key.max_token_seconds = policy.max_token_seconds;
                changed = true;
            }
        }
        // Revocations are never dropped (see `Revocation`). The stop is, once no key that
        // signed before it remains (it was their retirement).
        let revoked = self.revoked.clone();
        let stopped = self
            .stopped
            .filter(|stop| keys.iter().any(|k| k.activate_at < *stop));
        changed |= stopped != self.stopped;
        let mut set = ManagedKeySet {
            keys,
            revoked,
            stopped,
            purpose: self.purpose,
        };
        if let Some(successor) = set.successor(policy, now)
            && successor.create_at <= now
        {
            set.keys.push(ManagedKey::new(
                generate(policy.key_type)?,
                now,
                successor.activate_at,
                policy.max_token_seconds,
            ));
            changed = true;
        }
        Ok(changed.then_some(set))
    }

    /// The activation gate: no key signs before every publish target lists it. Each key that
    /// is not signing yet, activates within the gate's lead ([`RotationPolicy::gate_lead_seconds`])
    /// of `now`, and that `listed` (what every published JWKS lists, as read back) does not list
    /// by its own key material ([`ListedKeys::lists`]) is held:
    /// its activation moves to `now` plus twice the lead, and the key signing now signs on
    /// until then (its retirement, and so its removal, move with it). `None` if no key is held.
    ///
    /// Bounded: each hold moves an activation at most two leads ahead of `now`, so once the
    /// targets list the key it signs within two leads; while they do not, it is held again a
    /// lead later (one store write per lead). The gate never holds the first key of a set
    /// (nothing signs before it) and never takes back a key already signing. Pure, like
    /// [`rotate`](Self::rotate): the key manager calls it as the store's writer.
    pub fn hold_unlisted(
        &self,
        policy: &RotationPolicy,
        now: Timestamp,
        listed: &ListedKeys,
    ) -> Option<(ManagedKeySet, Vec<Hold>)> {
        let now = whole_second(now);
        let active = self.active_index(now)?;
        let lead = policy.gate_lead_seconds();
        let horizon = plus(now, lead);
        let until = plus(now, lead.saturating_mul(2));
        let mut set = self.clone();
        let mut holds = Vec::new();
        for key in set.keys.iter_mut().skip(active + 1) {
            if key.activate_at > now
                && key.activate_at <= horizon
                && !listed.lists(key.key.verifying_key())
            {
                holds.push(Hold {
                    kid: key.kid().to_owned(),
                    from: key.activate_at,
                    to: until,
                });
                key.activate_at = until;
            }
        }
        if holds.is_empty() {
            return None;
        }
        set.keys.sort_by(|a, b| {
            (a.activate_at, a.published_at, a.kid()).cmp(&(b.activate_at, b.published_at, b.kid()))
        });
        Some((set, holds))
    }

    /// When the activation gate next has to look: the earliest time a key not signing yet
    /// enters the gate's lead, if that is after `now`. Keys already within it are looked at
    /// whenever what the targets list changes.
    pub fn next_gate_check(&self, policy: &RotationPolicy, now: Timestamp) -> Option<Timestamp> {
        let lead = policy.gate_lead_seconds();
        self.keys
            .iter()
            .filter(|k| k.activate_at > now)
            .map(|k| plus(k.activate_at, -lead))
            .filter(|t| *t > now)
            .min()
    }

    /// An operator's rotation (`warrant keys rotate`): start the next rotation now instead of
    /// when it is due. If a next key already exists, it activates at the earliest safe moment
    /// (`publish-ahead` after it was published, and not before `now`); otherwise a successor is
    /// created now and activates `publish-ahead` from now. The set is first brought up to date
    /// with [`rotate`](Self::rotate). `None` if nothing could be brought forward.
    pub fn rotate_early(
        &self,
        policy: &RotationPolicy,
        now: Timestamp,
        mut generate: impl FnMut(KeyType) -> Result<SigningKey, KeyError>,
    ) -> Result<Option<ManagedKeySet>, KeyError> {
        let now = whole_second(now);
        let rotated = self.rotate(policy, now, &mut generate)?;
        let changed = rotated.is_some();
        let mut set = rotated.unwrap_or_else(|| self.clone());
        let active = set.active_index(now).unwrap_or(0);
        if let Some(next) = set.keys.get_mut(active + 1) {
            let earliest = plus(next.published_at, policy.publish_ahead_seconds).max(now);
            if earliest < next.activate_at {
                next.activate_at = earliest;
                return Ok(Some(set));
            }
            return Ok(changed.then_some(set));
        }
        set.keys.push(ManagedKey::new(
            generate(policy.key_type)?,
            now,
            plus(now, policy.publish_ahead_seconds),
            policy.max_token_seconds,
        ));
        Ok(Some(set))
    }
}
