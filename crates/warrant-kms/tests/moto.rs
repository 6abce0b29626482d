//! The KMS key holder against moto's KMS server on loopback: keys generated and tagged in KMS,
//! signatures that verify, the store's claims checked against KMS, disposal, a key disabled
//! behind warrant's back, KMS unreachable and back.
//!
//! moto's `Sign` with `MessageType DIGEST` hashes the digest again (AWS does not), so these
//! tests sign inputs up to 4096 bytes, which warrant sends `RAW`: the mode both agree on. moto
//! also signs with a disabled key (AWS answers `DisabledException`): what these tests check of
//! a disabled key is KMS's state, and what warrant learns of it from `DescribeKey`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use aws_sdk_kms::types::KeyState;
use warrant_keys::KeyPurpose;
use warrant_keys::{Disposal, Disposed, KeyHolder};
use warrant_kms::{
    Health, KID_TAG, Kms, KmsConfig, KmsError, KmsHolder, KmsKey, KmsMetrics, KmsUri,
    RecoveryPolicy, STORE_TAG,
};
use warrant_testkit::servers::{Emulator, Proxy};
use warrant_testkit::signatures::verify_signature as verify;
use warrant_token::{KeyType, VerifyingKey};

fn credentials() -> aws_credential_types::Credentials {
    aws_credential_types::Credentials::new("testing", "testing", None, None, "test")
}

async fn open(endpoint: &str, name: &str) -> Kms {
    let uri: KmsUri = format!("aws-kms://us-east-1/{name}").parse().unwrap();
    let config = KmsConfig::new(uri)
        .endpoint(endpoint)
        .credentials(credentials())
        .deadline(Duration::from_secs(3));
    Kms::open(config, KmsMetrics::default()).await.unwrap()
}

async fn tags(kms: &Kms, arn: &str) -> Vec<(String, String)> {
    let answer = kms
        .client()
        .list_resource_tags()
        .key_id(arn)
        .send()
        .await
        .unwrap();
    answer
        .tags()
        .iter()
        .map(|t| (t.tag_key().to_owned(), t.tag_value().to_owned()))
        .collect()
}

async fn state(kms: &Kms, arn: &str) -> KeyState {
    kms.client()
        .describe_key()
        .key_id(arn)
        .send()
        .await
        .unwrap()
        .key_metadata()
        .unwrap()
        .key_state()
        .unwrap()
        .clone()
}

/// moto's DisableKey and EnableKey take the key ID, not the ARN.
fn key_id(arn: &str) -> &str {
    arn.rsplit_once(":key/").unwrap().1
}

fn arn_of(key: &warrant_token::SigningKey) -> String {
    key.remote_key().unwrap().locator()
}

#[tokio::test(flavor = "multi_thread")]
async fn keys_are_generated_tagged_and_sign_in_kms() {
    let moto = Emulator::moto().await;
    let kms = open(&format!("http://127.0.0.1:{}", moto.port()), "prod").await;
    let holder = KmsHolder::new(kms.clone());
    for key_type in [KeyType::P256, KeyType::P384, KeyType::Rsa2048] {
        let h = holder.clone();
        let key = h.generate(key_type, KeyPurpose::Tokens).await.unwrap();
        let arn = arn_of(&key);
        assert!(arn.starts_with("arn:aws:kms:us-east-1:"), "{arn}");
        let mut found = tags(&kms, &arn).await;
        found.sort();
        assert_eq!(
            found,
            vec![
                (KID_TAG.to_owned(), key.kid().to_owned()),
                (STORE_TAG.to_owned(), "prod".to_owned())
            ]
        );
        // Signed in KMS (RAW), as a JWS signature that verifies under the published key.
        let remote = KmsKey::new(kms.clone(), arn.clone(), key.verifying_key().clone());
        for len in [20, 4096] {
            let input = vec![b'e'; len];
            let signature = remote.sign(input.clone()).await.unwrap();
            verify(key.verifying_key(), &input, &signature);
        }
        // The store's claim checks out against KMS.
        let (h, public) = (holder.clone(), key.verifying_key().clone());
        h.vouch(&arn, &public, KeyPurpose::Tokens).await.unwrap();
    }
    assert!(kms.metrics().count("sign", "ok") >= 6);
    assert_eq!(kms.metrics().count("create_key", "ok"), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_writer_cannot_make_warrant_trust_or_destroy_a_key_kms_does_not_hold_for_it() {
    let moto = Emulator::moto().await;
    let endpoint = format!("http://127.0.0.1:{}", moto.port());
    let kms = open(&endpoint, "prod").await;
    let holder = KmsHolder::new(kms.clone());
    let h = holder.clone();
    let ours = h.generate(KeyType::P256, KeyPurpose::Tokens).await.unwrap();

    // Another application's signing key in the same account: no warrant tags.
    let theirs = kms
        .client()
        .create_key()
        .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
        .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
        .send()
        .await
        .unwrap();
    let theirs = theirs.key_metadata().unwrap().arn().unwrap().to_owned();
    let their_public = VerifyingKey::from_spki_der(
        kms.client()
            .get_public_key()
            .key_id(&theirs)
            .send()
            .await
            .unwrap()
            .public_key()
            .unwrap()
            .as_ref(),
    )
    .unwrap();
    // Another warrant deployment's key (another store name).
    let staging = KmsHolder::new(open(&endpoint, "staging").await);
    let other = staging
        .generate(KeyType::P256, KeyPurpose::Tokens)
        .await
        .unwrap();

    for (arn, public, why) in [
        (
            theirs.clone(),
            their_public.clone(),
            "no warrant.dev/store tag",
        ),
        (
            arn_of(&other),
            other.verifying_key().clone(),
            "another warrant key set",
        ),
        // Our key's ARN with another public key: its kid tag names another key.
        (arn_of(&ours), their_public.clone(), "it is another key"),
    ] {
        let h = holder.clone();
        let (a, p) = (arn.clone(), public.clone());
        let err = h.vouch(&a, &p, KeyPurpose::Tokens).await.unwrap_err();
        assert!(err.to_string().contains(why), "{arn}: {err}");
        // And warrant leaves it alone when a store entry asks it to destroy it.
        let h = holder.clone();
        let kid = public.kid().to_owned();
        let a = arn.clone();
        let disposed = h
            .dispose(&a, &kid, Disposal::Forget, KeyPurpose::Tokens)
            .await
            .unwrap();
        assert!(matches!(disposed, Disposed::NotTheKey(_)), "{disposed:?}");
        assert_eq!(state(&kms, &arn).await, KeyState::Enabled, "{arn}");
    }
    // A locator in another region, or no KMS ARN at all, names nothing of warrant's here.
    let h = holder.clone();
    let public = ours.verifying_key().clone();
    let err = h
        .vouch(
            "arn:aws:kms:eu-west-1:123456789012:key/0c8c3a77-9ac3-4a2f-9f4e-1a2b3c4d5e6f",
            &public,
            KeyPurpose::Tokens,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("eu-west-1"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn retirement_disables_and_forgetting_schedules_deletion() {
    let moto = Emulator::moto().await;
    let kms = open(&format!("http://127.0.0.1:{}", moto.port()), "prod").await;
    let holder = KmsHolder::new(kms.clone());
    let h = holder.clone();
    let key = h.generate(KeyType::P256, KeyPurpose::Tokens).await.unwrap();
    let (arn, kid) = (arn_of(&key), key.kid().to_owned());
    let dispose = async |disposal| {
        holder
            .dispose(&arn, &kid, disposal, KeyPurpose::Tokens)
            .await
    };

    assert_eq!(
        dispose(Disposal::Retire).await.unwrap(),
        Disposed::Destroyed
    );
    assert_eq!(state(&kms, &arn).await, KeyState::Disabled);
    // It still verifies: KMS vouches for it while the store lists it.
    let (h, a, p) = (holder.clone(), arn.clone(), key.verifying_key().clone());
    h.vouch(&a, &p, KeyPurpose::Tokens).await.unwrap();

    assert_eq!(
        dispose(Disposal::Forget).await.unwrap(),
        Disposed::Destroyed
    );
    assert_eq!(state(&kms, &arn).await, KeyState::PendingDeletion);
    let described = kms
        .client()
        .describe_key()
        .key_id(&arn)
        .send()
        .await
        .unwrap();
    let meta = described.key_metadata().unwrap();
    // Counted from the key's creation, a moment ago on moto's clock.
    let window = meta.deletion_date().unwrap().secs() - meta.creation_date().unwrap().secs();
    assert!(
        (7 * 86_400..=7 * 86_400 + 60).contains(&window),
        "deletion in {window} s, not KMS's 7-day minimum"
    );
    // Again: nothing left to do.
    assert_eq!(dispose(Disposal::Forget).await.unwrap(), Disposed::Gone);
}

#[tokio::test(flavor = "multi_thread")]
async fn revoking_an_enabled_key_disables_it_at_once() {
    let moto = Emulator::moto().await;
    let kms = open(&format!("http://127.0.0.1:{}", moto.port()), "prod").await;
    let holder = KmsHolder::new(kms.clone());
    let h = holder.clone();
    let key = h
        .generate(KeyType::Rsa2048, KeyPurpose::Tokens)
        .await
        .unwrap();
    let (h, arn, kid) = (holder.clone(), arn_of(&key), key.kid().to_owned());
    let a = arn.clone();
    let disposed = h
        .dispose(&a, &kid, Disposal::Forget, KeyPurpose::Tokens)
        .await
        .unwrap();
    assert_eq!(disposed, Disposed::Destroyed);
    assert_eq!(state(&kms, &arn).await, KeyState::PendingDeletion);
}

/// A revoked key enabled again in KMS behind warrant's back (its deletion cancelled) is
/// counted by the recovery task's checks, which an alert reads; disabled again, it is not.
#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_key_enabled_again_in_kms_is_counted() {
    let moto = Emulator::moto().await;
    let kms = open(&format!("http://127.0.0.1:{}", moto.port()), "prod").await;
    let holder = KmsHolder::new(kms.clone());
    let h = holder.clone();
    let key = h.generate(KeyType::P256, KeyPurpose::Tokens).await.unwrap();
    let (h, arn, kid) = (holder.clone(), arn_of(&key), key.kid().to_owned());
    let a = arn.clone();
    let disposed = h
        .dispose(&a, &kid, Disposal::Forget, KeyPurpose::Tokens)
        .await
        .unwrap();
    assert_eq!(disposed, Disposed::Destroyed);
    let recovery = tokio::spawn({
        let kms = kms.clone();
        async move {
            kms.run_recovery(RecoveryPolicy {
                probe_interval: Duration::from_millis(50),
                ..RecoveryPolicy::default()
            })
            .await;
        }
    });
    assert_eq!(kms.metrics().revoked_keys_enabled_now(), 0);

    let client = kms.client();
    client
        .cancel_key_deletion()
        .key_id(key_id(&arn))
        .send()
        .await
        .unwrap();
    client
        .enable_key()
        .key_id(key_id(&arn))
        .send()
        .await
        .unwrap();
    until(|| (kms.metrics().revoked_keys_enabled_now() == 1).then_some(())).await;

    client
        .disable_key()
        .key_id(key_id(&arn))
        .send()
        .await
        .unwrap();
    until(|| (kms.metrics().revoked_keys_enabled_now() == 0).then_some(())).await;
    recovery.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_key_disabled_behind_warrants_back_is_named_and_signs_again_once_enabled() {
    let moto = Emulator::moto().await;
    let kms = open(&format!("http://127.0.0.1:{}", moto.port()), "prod").await;
    let holder = KmsHolder::new(kms.clone());
    let h = holder.clone();
    let key = h.generate(KeyType::P256, KeyPurpose::Tokens).await.unwrap();
    let arn = arn_of(&key);
    let remote = KmsKey::new(kms.clone(), arn.clone(), key.verifying_key().clone());
    remote.sign(b"a.b".to_vec()).await.unwrap();
    kms.client()
        .disable_key()
        .key_id(key_id(&arn))
        .send()
        .await
        .unwrap();

    // The recovery task asks KMS about every key that signed, and finds it disabled.
    let recovery = tokio::spawn({
        let kms = kms.clone();
        async move {
            kms.run_recovery(RecoveryPolicy {
                probe_interval: Duration::from_millis(50),
                ..RecoveryPolicy::default()
            })
            .await;
        }
    });
    let unavailable = until(|| warrant_token::RemoteKey::unavailable(&remote)).await;
    assert!(
        unavailable.contains(&arn)
            && unavailable.contains(key.kid())
            && unavailable.contains("Disabled"),
        "{unavailable}"
    );
    // It signs nothing, at once, with an error naming the key and its state.
    let err = remote.sign(b"a.b".to_vec()).await.unwrap_err();
    assert!(matches!(err, KmsError::KeyState { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&arn) && err.to_string().contains(key.kid()),
        "{err}"
    );
    assert_eq!(kms.metrics().count("sign", "disabled"), 1);

    // Enabled again: the next check finds it, and it signs.
    kms.client()
        .enable_key()
        .key_id(key_id(&arn))
        .send()
        .await
        .unwrap();
    until(|| {
        warrant_token::RemoteKey::unavailable(&remote)
            .is_none()
            .then_some(())
    })
    .await;
    let signature = remote.sign(b"a.b".to_vec()).await.unwrap();
    verify(key.verifying_key(), b"a.b", &signature);
    recovery.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn kms_unreachable_fails_fast_names_the_key_and_recovers() {
    let moto = Emulator::moto().await;
    let mut proxy = Proxy::start(moto.port()).await;
    let kms = open(&proxy.endpoint(), "prod").await;
    let holder = KmsHolder::new(kms.clone());
    let h = holder.clone();
    let key = h.generate(KeyType::P256, KeyPurpose::Tokens).await.unwrap();
    let arn = arn_of(&key);
    let remote = KmsKey::new(kms.clone(), arn.clone(), key.verifying_key().clone());
    remote.sign(b"a.b".to_vec()).await.unwrap();

    proxy.down();
    let err = remote.sign(b"a.b".to_vec()).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(matches!(err, KmsError::Unreachable { .. }), "{err:?}");
    assert!(!kms.health().is_healthy());
    let why = warrant_token::RemoteKey::unavailable(&remote).expect("readiness says why");
    assert!(why.contains(key.kid()) && why.contains(&arn), "{why}");
    // Later calls fail at once, counted as such.
    let err = remote.sign(b"a.b".to_vec()).await.unwrap_err();
    assert!(matches!(err, KmsError::Unavailable { .. }), "{err:?}");
    assert_eq!(kms.metrics().count("sign", "unavailable"), 1);

    proxy.up().await;
    let recovery = tokio::spawn({
        let kms = kms.clone();
        async move {
            kms.run_recovery(RecoveryPolicy {
                initial_backoff: Duration::from_millis(20),
                max_backoff: Duration::from_millis(100),
                probe_interval: Duration::from_secs(10),
            })
            .await;
        }
    });
    let mut health = kms.subscribe_health();
    tokio::time::timeout(Duration::from_secs(30), health.wait_for(Health::is_healthy))
        .await
        .expect("KMS healthy again once it answers")
        .unwrap();
    let signature = remote.sign(b"a.b".to_vec()).await.unwrap();
    verify(key.verifying_key(), b"a.b", &signature);
    recovery.abort();
    drop(moto);
}

/// Waits (a while, on the machine's clock: moto answers on it) until `found` has something.
async fn until<T>(mut found: impl FnMut() -> Option<T>) -> T {
    for _ in 0..400 {
        if let Some(found) = found() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within 20 s");
}
