//! Destroying held keys that sign no more, or verify no more, in their holder (an HSM), until
//! they are gone: the store's writer's job (see `KeyManager`).
//!
//! What is due follows from the key set and `now` alone, so every writer finds the same work,
//! whoever wrote the change: a retired key's private half ([`Disposal::Retire`]), every revoked
//! key the store remembers with its locator ([`Disposal::Forget`]: `warrant keys revoke`
//! records a revocation without the holder, and the writer destroys the key when it reaches
//! it), and the keys this writer's own writes took out of the set (removed once their tokens
//! expired, or generated for a write that failed). A disposal that fails (the holder is out of
//! reach) stays due and is tried again at the manager's next look, which comes within seconds
//! while anything is due; each is asked once per process once it is done, so the holder is not
//! asked again about keys revoked long ago.
//!
//! The holder itself decides whether the object is the recorded key ([`KeyHolder::dispose`]);
//! one that is not is left alone and logged, and never asked about again by this process.

use std::collections::HashSet;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use warrant_token::SigningKey;

use crate::holder::{Disposal, Disposed, KeyHolder};
use crate::lifecycle::{FOLLOW_LAG_SECONDS, KeyState, ManagedKeySet};
use crate::metrics::KeyMetrics;

/// How long after a held key stops signing its private half is destroyed. Every process that
/// signs with the store's keys switches to the successor at the same scheduled second, but by
/// its own clock, and a signature asked for just before the switch may reach the holder just
/// after it: with one HSM token shared by the nodes of a control plane, destroying the key at
/// the second itself made a node whose clock ran a little behind, or whose request was in
/// flight, fail to sign. Clocks of one control plane agree within far less than this; the key
/// stays usable for signing this much longer than its schedule says, and no node uses it.
pub const RETIRE_DISPOSAL_GRACE_SECONDS: i64 = FOLLOW_LAG_SECONDS;

/// One key to dispose of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Due {
    kid: String,
    locator: String,
    disposal: Disposal,
    /// Why, for the log: `retired`, `revoked`, `removed`.
    why: &'static str,
}

/// What a store's writer still has to destroy in its holder, and what it has done.
#[derive(Debug, Default)]
pub(crate) struct Disposals {
    /// Keys this process's writes took out of the set, to forget: (kid, locator).
    left: Vec<(String, String, &'static str)>,
    /// Disposals done (destroyed, found gone, or refused as not the key), never asked again.
    done: HashSet<(String, Disposal)>,
    /// Disposals failing now: logged as errors when they start failing, quietly after.
    failing: HashSet<(String, Disposal)>,
    /// How many are still due after the last attempt.
    pending: usize,
    /// True for a key set whose retired keys still sign (see
    /// `KeyManager::keeping_retired_keys_whole`): nothing is disposed of at retirement, and a
    /// retired key is destroyed whole once it leaves the set.
    pub(crate) keep_retired: bool,
}

impl Disposals {
    /// Records that `keys` left the set through this process's write (`why`: `removed`, or
    /// `unused` for keys generated for a write that failed): they are to be forgotten in their
    /// holder. Keys not held in one are ignored.
    pub(crate) fn left_the_set<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a SigningKey>,
        why: &'static str,
    ) {
        for key in keys {
            if let Some(remote) = key.remote_key() {
                self.left
                    .push((key.kid().to_owned(), remote.locator(), why));
            }
        }
    }

    /// True while a disposal is due that failed at the last attempt: the owner looks again
    /// soon.
    pub(crate) fn pending(&self) -> bool {
        self.pending > 0
    }

    /// What is due at `now` for `keys`, not done yet.
    fn due(&self, keys: &ManagedKeySet, now: Timestamp) -> Vec<Due> {
        let grace_ago = now
            .checked_sub(SignedDuration::from_secs(RETIRE_DISPOSAL_GRACE_SECONDS))
            .unwrap_or(now);
        let retired = keys.keys().iter().filter_map(|key| {
            if self.keep_retired {
                return None;
            }
            let remote = key.key().remote_key()?;
            let retired_for_the_grace = keys.state_at(key.kid(), now) == Some(KeyState::Retired)
                && keys.state_at(key.kid(), grace_ago) == Some(KeyState::Retired);
            retired_for_the_grace.then(|| Due {
                kid: key.kid().to_owned(),
                locator: remote.locator(),
                disposal: Disposal::Retire,
                why: "retired",
            })
        });
        let revoked = keys.revocations().iter().filter_map(|r| {
            Some(Due {
                kid: r.kid.clone(),
                locator: r.held_in.clone()?,
                disposal: Disposal::Forget,
                why: "revoked",
            })
        });
        let left = self.left.iter().map(|(kid, locator, why)| Due {
            kid: kid.clone(),
            locator: locator.clone(),
            disposal: Disposal::Forget,
            why,
        });
        let mut seen = HashSet::new();
        retired
            .chain(revoked)
            .chain(left)
            .filter(|d| !self.done.contains(&(d.kid.clone(), d.disposal)))
            .filter(|d| seen.insert((d.kid.clone(), d.disposal)))
            .collect()
    }

    /// When a retired key's disposal next falls due after `now` (its retirement plus
    /// [`RETIRE_DISPOSAL_GRACE_SECONDS`]), for the writer to wake then.
    pub(crate) fn next_due(&self, keys: &ManagedKeySet, now: Timestamp) -> Option<Timestamp> {
        if self.keep_retired {
            return None;
        }
        let held: HashSet<&str> = keys
            .keys()
            .iter()
            .filter(|key| key.key().remote_key().is_some())
            .map(|key| key.kid())
            .collect();
        keys.schedule(now)
            .into_iter()
            .filter(|s| held.contains(s.kid.as_str()))
            .filter(|s| !self.done.contains(&(s.kid.clone(), Disposal::Retire)))
            .filter_map(|s| {
                s.retire_at?
                    .checked_add(SignedDuration::from_secs(RETIRE_DISPOSAL_GRACE_SECONDS))
                    .ok()
            })
            .filter(|due| *due > now)
            .min()
    }

    /// Disposes of what is due at `now` for `keys` in `holder`; records
    /// what was done, and keeps what failed due.
    pub(crate) async fn run(
        &mut self,
        holder: Arc<dyn KeyHolder>,
        keys: &ManagedKeySet,
        now: Timestamp,
        metrics: &KeyMetrics,
    ) {
        let due = self.due(keys, now);
        if due.is_empty() {
            self.pending = 0;
            metrics.disposals_pending(0);
            return;
        }
        let described = holder.describe();
        let mut answers = Vec::with_capacity(due.len());
        for d in due.iter().cloned() {
            let answer = holder
                .dispose(&d.locator, &d.kid, d.disposal, keys.purpose())
                .await;
            answers.push((d, answer, described.clone()));
        }
        let mut pending = due.len();
        for (due, answer, holder) in answers {
            let key = (due.kid.clone(), due.disposal);
            let Due {
                kid, locator, why, ..
            } = &due;
            match answer {
                Ok(Disposed::Destroyed) => {
                    metrics.disposed("destroyed");
                    match due.disposal {
                        Disposal::Retire => tracing::info!(
                            %kid, %holder,
                            "private key destroyed: the key signs no more (it stays published, and its holder vouches for it, until its tokens have expired)"
                        ),
                        Disposal::Forget => tracing::info!(
                            %kid, %holder, %why,
                            "key destroyed in its holder: it verifies nothing any more, and no key store can bring it back"
                        ),
                    }
                }
                Ok(Disposed::Gone) => {
                    metrics.disposed("gone");
                    tracing::debug!(%kid, %holder, disposal = %due.disposal, "nothing left of the key to destroy");
                }
                Ok(Disposed::NotTheKey(reason)) => {
                    metrics.disposed("not_the_key");
                    tracing::error!(
                        %kid, %locator, %holder, %why, %reason,
                        "not destroying what the key store names: it is not the recorded key (the store's entry may not be warrant's own)"
                    );
                }
                Err(error) => {
                    metrics.disposed("failed");
                    if self.failing.insert(key) {
                        tracing::error!(
                            %kid, %holder, %why, disposal = %due.disposal, %error,
                            "cannot destroy a key that must go; retrying every few seconds until it is gone"
                        );
                    } else {
                        tracing::debug!(%kid, %error, "still cannot destroy the key; retrying");
                    }
                    continue;
                }
            }
            pending -= 1;
            if due.disposal == Disposal::Forget {
                self.left.retain(|(k, _, _)| k != kid);
            }
            self.failing.remove(&key);
            self.done.insert(key);
        }
        self.pending = pending;
        metrics.disposals_pending(pending);
    }
}
