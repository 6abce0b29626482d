//! Revocations that stay revoked: every read of a key store is checked against what this
//! process has seen of the store before, so a store put back to an older key set (a restored
//! backup, an etcd restore, `kubectl replace` with last week's YAML, a Secret refilled from a
//! node's older local copy) cannot bring a revoked key back.
//!
//! What is remembered: the highest generation seen (every write numbers the key set after the
//! last, see [`crate::KeyStore::save_after`]) and every revocation (kept for good, see
//! [`crate::Revocation`]), in memory and in the node's local copy ([`crate::LocalCopy`]).
//! A read is refused when it lists a revoked key again, lacks a revocation, or has a lower
//! generation. Refusing keeps what is remembered in force; the store's writer (the Lease
//! holder) then writes it back forward, numbered after both, so the store is repaired rather
//! than the replica rolled back. Costs nothing worth stating: a comparison of kids per read.

use std::fmt;

use crate::lifecycle::ManagedKeySet;

/// Why a read of the key store was refused as older than what was seen before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rollback {
    /// The store lists, as a key, one that was revoked.
    RevokedKeyListed {
        /// The revoked key.
        kid: String,
    },
    /// The store no longer records a revocation.
    RevocationDropped {
        /// The revoked key.
        kid: String,
    },
    /// The store's key set is numbered lower than one seen before.
    GenerationBack {
        /// The highest generation seen.
        seen: u64,
        /// The generation read.
        read: u64,
    },
}

impl Rollback {
    /// Every [`reason`](Self::reason), so the metric exports each from the start (an alert on
    /// its increase then sees the first one).
    pub(crate) const REASONS: [&str; 3] = [
        "revoked_key_listed",
        "revocation_dropped",
        "generation_back",
    ];

    /// The metric label (`warrant_keys_store_rollbacks_total{reason}`).
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Rollback::RevokedKeyListed { .. } => "revoked_key_listed",
            Rollback::RevocationDropped { .. } => "revocation_dropped",
            Rollback::GenerationBack { .. } => "generation_back",
        }
    }
}

impl fmt::Display for Rollback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rollback::RevokedKeyListed { kid } => write!(
                f,
                "it lists key {kid} again, which was revoked: an older key set was put back"
            ),
            Rollback::RevocationDropped { kid } => write!(
                f,
                "it no longer records the revocation of key {kid}: an older key set was put back"
            ),
            Rollback::GenerationBack { seen, read } => write!(
                f,
                "its key set is generation {read}, older than generation {seen} read or written before: an older key set was put back"
            ),
        }
    }
}

/// Checks a key set read as `generation` against `known` (what was last accepted or written,
/// with every revocation seen) and `highest` (the highest generation seen).
pub(crate) fn check(
    known: &ManagedKeySet,
    highest: u64,
    read: &ManagedKeySet,
    generation: u64,
) -> Result<(), Rollback> {
    for revocation in known.revocations() {
        let kid = &revocation.kid;
        if read.keys().iter().any(|k| k.kid() == kid) {
            return Err(Rollback::RevokedKeyListed { kid: kid.clone() });
        }
        if !read.revocations().iter().any(|r| &r.kid == kid) {
            return Err(Rollback::RevocationDropped { kid: kid.clone() });
        }
    }
    if generation < highest {
        return Err(Rollback::GenerationBack {
            seen: highest,
            read: generation,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
