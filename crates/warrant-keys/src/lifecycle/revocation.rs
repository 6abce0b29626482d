//! An operator's revocation ([`ManagedKeySet::revoke`]): what it did ([`Revoked`]), the key
//! that took over signing ([`Replacement`]), and why one is refused ([`RevokeError`]). The
//! record it leaves, a [`Revocation`], is kept with the set.

use jiff::Timestamp;
use warrant_token::{KeyError, KeyType, SigningKey};

use super::policy::RotationPolicy;
use super::{KeyState, ManagedKey, ManagedKeySet, Revocation, whole_second};

/// Why a key could not be revoked.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    /// No such key.
    #[error("there is no key {0}: `warrant keys list` shows the keys")]
    Unknown(String),
    /// Revoked already.
    #[error("key {kid} was revoked already, at {at}")]
    AlreadyRevoked {
        /// The key ID.
        kid: String,
        /// When.
        at: Timestamp,
    },
}

/// What a revocation did.
#[derive(Debug, Clone)]
pub struct Revoked {
    /// The set without the key.
    pub keys: ManagedKeySet,
    /// The state the key was in.
    pub was: KeyState,
    /// The key that signs from now on, when the revoked key was signing: the next key brought
    /// forward, or a new one.
    pub replaced_by: Option<Replacement>,
}

/// The key that took over signing from a revoked key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replacement {
    /// The next key, published since the given time, signs now instead of at its activation.
    BroughtForward {
        /// Its kid.
        kid: String,
        /// When it was published (relying parties that fetched the JWKS since have it).
        published_at: Timestamp,
    },
    /// A new key, published and signing now (no relying party has fetched it yet).
    New {
        /// Its kid.
        kid: String,
    },
    /// None yet: no key could be made (the key holder cannot be reached). Nothing signs until
    /// the store's writer makes one (see [`ManagedKeySet::stopped`]).
    Pending {
        /// Why no key could be made.
        cause: String,
    },
}

impl ManagedKeySet {
    /// An operator's revocation (`warrant keys revoke`): key `kid` leaves the set at once (so
    /// it leaves the JWKS and verifies nothing), and is remembered for good (see
    /// [`Revocation`]). If it was signing, a key signs in its place from `now`, without
    /// waiting for publish-ahead: the next key, if one is published, brought forward (relying
    /// parties that fetched the JWKS since its publication have it already); else a new key.
    /// If `generate` cannot make that new key (its holder out of reach), the revocation is
    /// recorded all the same, and signing stops ([`stopped`](Self::stopped)): no key signs
    /// until the store's writer can make one, which then signs at once. A revocation is about
    /// the relying parties, never the holder: it is never refused for want of a new key. The
    /// set is first brought up to date with [`rotate`](Self::rotate) if `generate` can make the
    /// keys that needs; else the rotation is left to the store's writer.
    ///
    /// Keys retired before the revoked one keep verifying until `now` plus their token
    /// lifetime at the latest: their retirement moves to the replacement's activation.
    pub fn revoke(
        &self,
        kid: &str,
        policy: &RotationPolicy,
        now: Timestamp,
        mut generate: impl FnMut(KeyType) -> Result<SigningKey, KeyError>,
    ) -> Result<Revoked, RevokeError> {
        let now = whole_second(now);
        if let Some(r) = self.revoked.iter().find(|r| r.kid == kid) {
            return Err(RevokeError::AlreadyRevoked {
                kid: kid.to_owned(),
                at: r.revoked_at,
            });
        }
        // Whatever rotation is due is done first, if a key can be made for it; if not (a
        // holder out of reach), it is left to the store's writer: a revocation never waits for
        // a new key unless it needs one to sign (below).
        let mut set = match self.rotate(policy, now, &mut generate) {
            Ok(Some(rotated)) => rotated,
            Ok(None) | Err(_) => self.clone(),
        };
        let index = set
            .keys
            .iter()
            .position(|k| k.kid() == kid)
            .ok_or_else(|| RevokeError::Unknown(kid.to_owned()))?;
        let was = set.state_of(index, now);
        let key = set.keys.remove(index);
        set.revoked.push(Revocation {
            kid: key.kid().to_owned(),
            revoked_at: now,
            forget_at: key.removed_after(now),
            held_in: key.key().remote_key().map(|remote| remote.locator()),
        });
        let replaced_by = if was == KeyState::Active {
            // The keys after it in activation order had not activated: the first takes over.
            Some(match set.keys.get_mut(index) {
                Some(next) => {
                    next.activate_at = now;
                    Replacement::BroughtForward {
                        kid: next.kid().to_owned(),
                        published_at: next.published_at,
                    }
                }
                None => match generate(policy.key_type) {
                    Ok(key) => {
                        let new = ManagedKey::new(key, now, now, policy.max_token_seconds);
                        let kid = new.kid().to_owned();
                        set.keys.push(new);
                        Replacement::New { kid }
                    }
                    Err(cause) => {
                        set.stopped = Some(now);
                        Replacement::Pending {
                            cause: cause.to_string(),
                        }
                    }
                },
            })
        } else {
            None
        };
        Ok(Revoked {
            keys: set,
            was,
            replaced_by,
        })
    }
}
