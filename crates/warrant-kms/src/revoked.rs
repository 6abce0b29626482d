//! Keys warrant revoked or removed, watched in KMS until KMS deletes them.
//!
//! A key leaves the key set for good when it is revoked (`warrant keys revoke`) or removed (its
//! last token expired): the store's writer then disables it in KMS and schedules its deletion
//! (`ownership.rs`). Until KMS deletes it, seven days later, the key can be enabled again
//! (`aws kms cancel-key-deletion`, `aws kms enable-key`), and the disabling itself can fail
//! (`kms:DisableKey` denied): then whoever may call `kms:Sign` on it signs tokens with a kid
//! warrant revoked, which a relying party that still holds an old JWKS accepts.
//!
//! So every key a disposal proved to be the store's is remembered, and the recovery task asks
//! KMS about each while KMS is healthy, every `probe_interval` (10 s): the gauge
//! `warrant_kms_revoked_keys_enabled` counts those KMS says are `Enabled`, and each is logged
//! as an error when it is first found so (the alert WarrantKmsRevokedKeyEnabled,
//! docs/alerts.md). A key KMS no longer knows is forgotten. Only the writer disposes of keys, so
//! only its gauge counts them; every process remembers the keys its own disposals reached
//! (each process disposes of every revocation the store remembers once, at its start).

use std::collections::BTreeMap;

/// The keys disposed of as revoked or removed, by ARN: their kid, and whether KMS last said
/// they are enabled.
#[derive(Debug, Default)]
pub(crate) struct RevokedKeys {
    keys: BTreeMap<String, Revoked>,
}

#[derive(Debug)]
struct Revoked {
    kid: String,
    enabled: bool,
}

impl RevokedKeys {
    /// Remembers key `kid` at `arn`, which a disposal proved to be the store's and is
    /// disabling and scheduling for deletion.
    pub(crate) fn insert(&mut self, arn: &str, kid: &str) {
        self.keys.entry(arn.to_owned()).or_insert_with(|| Revoked {
            kid: kid.to_owned(),
            enabled: false,
        });
    }

    /// How many KMS last said are enabled.
    pub(crate) fn enabled(&self) -> usize {
        self.keys.values().filter(|k| k.enabled).count()
    }

    /// Every key remembered: its ARN and kid.
    pub(crate) fn listed(&self) -> Vec<(String, String)> {
        let keys = self.keys.iter();
        keys.map(|(arn, key)| (arn.clone(), key.kid.clone()))
            .collect()
    }

    /// Forgets the key at `arn` (KMS no longer knows it).
    pub(crate) fn forget(&mut self, arn: &str) {
        self.keys.remove(arn);
    }

    /// Records what KMS says of the key at `arn`; true if it is enabled and was not.
    pub(crate) fn found(&mut self, arn: &str, enabled: bool) -> bool {
        let Some(key) = self.keys.get_mut(arn) else {
            return false;
        };
        let newly = enabled && !key.enabled;
        key.enabled = enabled;
        newly
    }
}
