//! KMS's part in warrant-keys' recovery loop: how KMS is probed while healthy (each key that
//! signs, each key disposed of as revoked: `revoked.rs`) and asked again while not.

use std::sync::{Arc, PoisonError, Weak};

use aws_sdk_kms::types::KeyState;
use warrant_keys::{Recovery, RecoveryPolicy};

use super::{Kms, Signer};
use crate::error::KmsError;
use crate::holder::KmsHolder;

impl Kms {
    /// Keeps KMS's health current until dropped, with warrant-keys' one recovery loop
    /// ([`warrant_keys::keep_healthy`]): while KMS is unavailable, asks it again with backoff
    /// until it answers; while it is healthy, asks about each key that signs every
    /// `probe_interval`, so that a key disabled or deleted behind warrant's back shows in
    /// readiness, and one enabled again signs again; and about each key it disposed of as
    /// revoked or removed, so that one enabled again in KMS is counted and logged
    /// (`revoked.rs`).
    pub async fn run_recovery(&self, policy: RecoveryPolicy) {
        warrant_keys::keep_healthy(&KmsHolder::new(self.clone()), policy).await;
    }

    /// While healthy: asks about each key that signs and each key disposed of as revoked.
    pub(crate) async fn probe_keys(&self) {
        self.check_signers().await;
        self.check_revoked().await;
    }

    /// While unavailable: asks KMS about the last key warrant asked about (any answer but a
    /// credential error shows that KMS can be reached and the credentials work).
    pub(crate) async fn recover(&self) -> Recovery {
        if self.reachable().await.is_ok() {
            self.healed();
            return Recovery::Recovered;
        }
        Recovery::NotYet
    }

    /// Whether KMS can be reached with working credentials now: one `DescribeKey` of the last
    /// key asked about (or of an alias that need not exist: "not found" and "access denied" are
    /// answers too). The error is why not (unreachable, credentials failing).
    pub async fn reachable(&self) -> Result<(), KmsError> {
        let key = self
            .inner
            .last_key
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| format!("alias/{}/probe", self.inner.uri.name()));
        let client = self.inner.client.clone();
        match self
            .call_anyway(
                "probe",
                None,
                None,
                || client.describe_key().key_id(&key).send(),
                Ok,
            )
            .await
        {
            Err(err) if err.breaks_health() => Err(err),
            // Any answer, found or not, allowed or not: KMS is reachable.
            _ => Ok(()),
        }
    }

    /// Checks each key that signed, updating what it knows of the key's state.
    async fn check_signers(&self) {
        let signers: Vec<Arc<dyn Signer>> = {
            let mut signers = self
                .inner
                .signers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            signers.retain(|s| s.strong_count() > 0);
            signers.iter().filter_map(Weak::upgrade).collect()
        };
        for key in signers {
            key.check_state().await;
        }
    }

    /// Asks KMS about each revoked or removed key; counts those it says are enabled.
    pub(crate) async fn check_revoked(&self) {
        let keys = self.revoked_keys().listed();
        for (arn, kid) in keys {
            let enabled = match self.describe(&arn, Some(&kid)).await {
                Ok(meta) => meta.key_state() == Some(&KeyState::Enabled),
                Err(KmsError::NotFound { .. }) => {
                    self.revoked_keys().forget(&arn);
                    continue;
                }
                // Not known now (KMS's health says why): as it was.
                Err(_) => continue,
            };
            if self.revoked_keys().found(&arn, enabled) {
                tracing::error!(
                    %kid, %arn,
                    "a key revoked or removed from the key set is enabled in KMS: whoever may call kms:Sign on it signs tokens with a kid warrant no longer publishes; disable it (aws kms disable-key) and schedule its deletion (aws kms schedule-key-deletion), and find who enabled it (CloudTrail)"
                );
            }
        }
        let enabled = self.revoked_keys().enabled();
        self.metrics().revoked_keys_enabled(enabled);
    }
}
