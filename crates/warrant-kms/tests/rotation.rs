//! The rotation scenario every key holder runs (warrant-testkit's `rotation`), with the keys in
//! KMS (moto on loopback): generated there with an ARN for locator, the retired key disabled
//! after the grace, and scheduled for deletion when it leaves the key set.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use aws_sdk_kms::types::KeyState as KmsKeyState;
use warrant_keys::KeyHolder;
use warrant_kms::{Kms, KmsConfig, KmsHolder, KmsMetrics, KmsUri};
use warrant_testkit::purposes::keys_of_one_purpose_serve_no_other;
use warrant_testkit::rotation::{HolderUnderTest, InHolder, keys_rotate_in_the_holder};
use warrant_testkit::servers::Emulator;
use warrant_token::SigningKey;

struct InKms {
    kms: Kms,
    holder: KmsHolder,
}

impl HolderUnderTest for InKms {
    fn holder(&self) -> Arc<dyn KeyHolder> {
        Arc::new(self.holder.clone())
    }

    fn state(&self, key: &SigningKey) -> InHolder {
        let arn = key.remote_key().unwrap().locator();
        assert!(arn.starts_with("arn:aws:kms:us-east-1:"), "{arn}");
        let described = tokio::runtime::Handle::current()
            .block_on(self.kms.client().describe_key().key_id(&arn).send())
            .unwrap();
        match described.key_metadata().unwrap().key_state().unwrap() {
            KmsKeyState::Enabled => InHolder::Signs,
            KmsKeyState::Disabled => InHolder::Retired,
            KmsKeyState::PendingDeletion => InHolder::Forgotten,
            other => panic!("{arn} is {other:?}"),
        }
    }

    /// moto signs with a disabled key (AWS answers `DisabledException`): docs/kms.md.
    fn refuses_retired(&self) -> bool {
        false
    }
}

/// moto on loopback and a KMS client of store `name` on it.
fn moto_kms(setup: &tokio::runtime::Runtime, name: &str) -> (Emulator, Kms) {
    setup.block_on(async {
        let moto = Emulator::moto().await;
        let uri: KmsUri = format!("aws-kms://us-east-1/{name}").parse().unwrap();
        let config = KmsConfig::new(uri)
            .endpoint(format!("http://127.0.0.1:{}", moto.port()))
            .credentials(aws_credential_types::Credentials::new(
                "testing", "testing", None, None, "test",
            ));
        (
            moto,
            Kms::open(config, KmsMetrics::default()).await.unwrap(),
        )
    })
}

#[test]
fn keys_rotate_in_kms_on_a_paused_clock() {
    let setup = tokio::runtime::Runtime::new().unwrap();
    let (moto, kms) = moto_kms(&setup, "rotation");
    let holder = KmsHolder::new(kms.clone());
    keys_rotate_in_the_holder(&InKms { kms, holder });
    drop(moto);
}

#[test]
fn kms_keeps_token_and_ca_keys_apart() {
    let setup = tokio::runtime::Runtime::new().unwrap();
    let (moto, kms) = moto_kms(&setup, "purposes");
    keys_of_one_purpose_serve_no_other(Arc::new(KmsHolder::new(kms)));
    drop(moto);
}
