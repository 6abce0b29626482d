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

use aws_sdk_kms::types::KeyState;

use crate::client::Kms;
use crate::error::KmsError;

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

    fn enabled(&self) -> usize {
        self.keys.values().filter(|k| k.enabled).count()
    }
}

impl Kms {
    /// Asks KMS about each revoked or removed key; counts those it says are enabled.
    pub(crate) async fn check_revoked(&self) {
        let keys: Vec<(String, String)> = self
            .revoked_keys()
            .keys
            .iter()
            .map(|(arn, key)| (arn.clone(), key.kid.clone()))
            .collect();
        for (arn, kid) in keys {
            let enabled = match self.describe(&arn, Some(&kid)).await {
                Ok(meta) => meta.key_state() == Some(&KeyState::Enabled),
                Err(KmsError::NotFound { .. }) => {
                    self.revoked_keys().keys.remove(&arn);
                    continue;
                }
                // Not known now (KMS's health says why): as it was.
                Err(_) => continue,
            };
            let mut revoked = self.revoked_keys();
            let Some(key) = revoked.keys.get_mut(&arn) else {
                continue;
            };
            if enabled && !key.enabled {
                tracing::error!(
                    %kid, %arn,
                    "a key revoked or removed from the key set is enabled in KMS: whoever may call kms:Sign on it signs tokens with a kid warrant no longer publishes; disable it (aws kms disable-key) and schedule its deletion (aws kms schedule-key-deletion), and find who enabled it (CloudTrail)"
                );
            }
            key.enabled = enabled;
        }
        let enabled = self.revoked_keys().enabled();
        self.metrics().revoked_keys_enabled(enabled);
    }
}
