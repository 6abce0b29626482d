//! A managed key set rotating with its keys in KMS (moto on loopback): warrant-keys'
//! `KeyManager` over a store whose holder is KMS, driven by Tokio's paused clock (the manager
//! wakes at each scheduled change; no test sleeps through the schedule). The next key is
//! generated in KMS, published ahead, signs from its activation; its predecessor is disabled in
//! KMS when it retires, and scheduled for deletion when it leaves the key set.
//!
//! KMS calls go over real sockets: on a paused runtime, Tokio would jump the clock to the next
//! timer while a call waits for moto (firing its deadline), so signatures and KMS queries run
//! on a real-time runtime of their own ([`real`]) while the paused one waits.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kms::types::KeyState as KmsKeyState;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jiff::Timestamp;
use tokio::sync::mpsc;
use warrant_clock::Clock;
use warrant_keys::{
    KeyManager, KeyMetrics, KeySet, KeyState, KeyStore as _, MemoryStore, RotationPolicy, Writer,
};
use warrant_kms::{Kms, KmsConfig, KmsHolder, KmsMetrics, KmsUri};
use warrant_testkit::servers::Emulator;
use warrant_token::{Algorithm, KeyType, SigningKey, VerifyingKey};

const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// Runs `work` to completion on a real-time runtime of its own, blocking the caller (a paused
/// runtime's only thread, which so does not advance its clock meanwhile).
fn real<T: Send>(work: impl Future<Output = T> + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(work)
            })
            .join()
            .unwrap()
    })
}

fn verify(key: &VerifyingKey, message: &[u8], signature: &[u8]) {
    use aws_lc_rs::signature as sig;
    let alg: &dyn sig::VerificationAlgorithm = match key.algorithm() {
        Algorithm::RS256 => &sig::RSA_PKCS1_2048_8192_SHA256,
        Algorithm::ES256 => &sig::ECDSA_P256_SHA256_FIXED,
        Algorithm::ES384 => &sig::ECDSA_P384_SHA384_FIXED,
        Algorithm::ES512 => &sig::ECDSA_P521_SHA512_FIXED,
    };
    sig::ParsedPublicKey::new(alg, key.spki_der())
        .unwrap()
        .verify_sig(message, signature)
        .expect("the signature verifies under the published key");
}

/// Signs with the key of `keys` that signs at `now`, as the issuer core does, and checks the
/// signature against the published key of that kid alone; returns the kid.
fn sign_and_verify(keys: &KeySet, now: Timestamp) -> String {
    let key = keys.signing_at(now).clone();
    let claims = B64.encode(r#"{"sub":"system:serviceaccount:default:app"}"#);
    let detached = real(key.sign_detached_async(&claims)).expect("the key signs in KMS");
    let header: serde_json::Value =
        serde_json::from_slice(&B64.decode(&detached.header).unwrap()).unwrap();
    let kid = header["kid"].as_str().unwrap().to_owned();
    let published = keys
        .verifying()
        .iter()
        .find(|k| k.kid() == kid)
        .expect("the signing key is published");
    let input = format!("{}.{claims}", detached.header);
    verify(
        published,
        input.as_bytes(),
        &B64.decode(&detached.signature).unwrap(),
    );
    kid
}

/// The key's state in KMS, once it is `wanted` (a disposal runs on a blocking thread after the
/// change is published): asked on the real-time runtime, a few seconds at most.
fn state_becomes(kms: &Kms, key: &SigningKey, wanted: KmsKeyState) {
    let arn = key.remote_key().unwrap().locator();
    real(async {
        let mut last = None;
        for _ in 0..100 {
            let described = kms
                .client()
                .describe_key()
                .key_id(&arn)
                .send()
                .await
                .unwrap();
            let state = described
                .key_metadata()
                .unwrap()
                .key_state()
                .unwrap()
                .clone();
            if state == wanted {
                return;
            }
            last = Some(state);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{arn} stayed {last:?}, not {wanted:?}");
    });
}

#[test]
fn keys_rotate_in_kms_on_a_paused_clock() {
    let setup = tokio::runtime::Runtime::new().unwrap();
    let (moto, kms) = setup.block_on(async {
        let moto = Emulator::moto().await;
        let uri: KmsUri = "aws-kms://us-east-1/rotation".parse().unwrap();
        let config = KmsConfig::new(uri)
            .endpoint(format!("http://127.0.0.1:{}", moto.port()))
            .credentials(aws_credential_types::Credentials::new(
                "testing", "testing", None, None, "test",
            ));
        (
            moto,
            Kms::open(config, KmsMetrics::default()).await.unwrap(),
        )
    });
    let holder = KmsHolder::new(kms.clone()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = MemoryStore::new().with_holder(Arc::new(holder.clone()));
        let policy = RotationPolicy {
            key_type: KeyType::P256,
            rotation_period_seconds: 7 * DAY,
            publish_ahead_seconds: DAY,
            max_token_seconds: DAY,
        };
        let clock = Clock::follows_tokio(at(T0));
        let manager = KeyManager::open(
            store.clone(),
            policy,
            Writer::Always,
            KeyMetrics::new(),
            clock.now(),
        )
        .await
        .unwrap();
        let first = manager.keys().keys()[0].key().clone();
        state_becomes(&kms, &first, KmsKeyState::Enabled);
        let (sender, mut published) = mpsc::unbounded_channel();
        let inner = clock.clone();
        let _task = manager
            .spawn(clock.clone(), move |keys: KeySet| {
                sender.send((inner.now(), keys)).unwrap();
            })
            .unwrap();

        // At once: the first key signs, in KMS.
        let (now, keys) = published.recv().await.unwrap();
        assert_eq!(now.as_second(), T0);
        assert_eq!(sign_and_verify(&keys, now), first.kid());

        // Six days on, the next key is generated in KMS and published a day ahead; the first
        // still signs.
        let (now, keys) = published.recv().await.unwrap();
        assert_eq!(now.as_second(), T0 + 6 * DAY, "woken at the second");
        let stored = store.load().await.unwrap().unwrap();
        let next = stored
            .keys
            .keys()
            .iter()
            .find(|k| k.kid() != first.kid())
            .unwrap()
            .key()
            .clone();
        assert_eq!(stored.keys.state_at(next.kid(), now), Some(KeyState::Next));
        assert!(
            next.remote_key()
                .unwrap()
                .locator()
                .starts_with("arn:aws:kms:us-east-1:")
        );
        state_becomes(&kms, &next, KmsKeyState::Enabled);
        let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [first.kid(), next.kid()]);
        assert_eq!(sign_and_verify(&keys, now), first.kid());
        let files = store.files().unwrap();
        assert!(
            files
                .values()
                .all(|f| !String::from_utf8_lossy(f).contains("PRIVATE KEY"))
        );

        // At activation the next key signs; the first retires: its public key still published
        // for the tokens it signed, and disabled in KMS once the grace has passed (a replica
        // whose clock is a little behind may still sign with it until then).
        let (now, keys) = published.recv().await.unwrap();
        assert_eq!(now.as_second(), T0 + 7 * DAY, "woken at the second");
        assert_eq!(sign_and_verify(&keys, now), next.kid());
        assert!(keys.verifying().iter().any(|k| k.kid() == first.kid()));
        state_becomes(&kms, &first, KmsKeyState::Enabled);
        let grace = warrant_keys::RETIRE_DISPOSAL_GRACE_SECONDS.unsigned_abs();
        tokio::time::sleep(Duration::from_secs(grace + 1)).await;
        state_becomes(&kms, &first, KmsKeyState::Disabled);

        // Once its last token has expired it leaves the JWKS, and KMS deletes it in 7 days.
        let (now, keys) = published.recv().await.unwrap();
        assert_eq!(now.as_second(), T0 + 8 * DAY + 60, "woken at the second");
        let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [next.kid()]);
        assert_eq!(sign_and_verify(&keys, now), next.kid());
        state_becomes(&kms, &first, KmsKeyState::PendingDeletion);
        state_becomes(&kms, &next, KmsKeyState::Enabled);
    });
    drop(moto);
}
