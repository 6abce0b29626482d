//! A managed key set rotating with its keys in a real token: warrant-keys' `KeyManager` over a
//! store whose holder is the token, driven by Tokio's paused clock (the manager wakes at each
//! scheduled change; no test sleeps). The next key is generated in the token, published ahead,
//! signs from its activation; its predecessor's private object is destroyed when it retires,
//! while its public key stays published until its tokens have expired.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jiff::Timestamp;
use tokio::sync::mpsc;
use warrant_clock::Clock;
use warrant_hsm::{Pkcs11Holder, Pkcs11Uri};
use warrant_keys::{
    KeyManager, KeyMetrics, KeySet, KeyState, KeyStore as _, MemoryStore, RotationPolicy, Writer,
};
use warrant_token::{KeyType, SigningKey};

use crate::support::verify_everywhere;

const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// The `CKA_ID` of a key held in the token, from the locator a store records.
fn object_id(key: &SigningKey) -> Vec<u8> {
    let locator: Pkcs11Uri = key
        .remote_key()
        .expect("held in the token")
        .locator()
        .parse()
        .unwrap();
    locator.object_id().unwrap().to_vec()
}

/// Whether the token holds the private object of `key` (its public object always stays).
fn has_private(holder: &Pkcs11Holder, key: &SigningKey) -> bool {
    let id = object_id(key);
    let entry = holder
        .token()
        .list_keys()
        .unwrap()
        .into_iter()
        .find(|e| e.id == id)
        .unwrap();
    assert!(entry.has_public, "the public key object stays on the token");
    entry.has_private
}

/// Signs with the key of `keys` that signs at `now`, as the issuer core does, and checks the
/// signature against the published key of that kid alone (aws-lc and openssl); returns the kid.
async fn sign_and_verify(hsm: &crate::support::SoftHsm, keys: &KeySet, now: Timestamp) -> String {
    let key = keys.signing_at(now);
    let claims = B64.encode(r#"{"sub":"system:serviceaccount:default:app"}"#);
    let detached = key
        .sign_detached_async(&claims)
        .await
        .expect("the key signs in the token");
    let header: serde_json::Value =
        serde_json::from_slice(&B64.decode(&detached.header).unwrap()).unwrap();
    let kid = header["kid"].as_str().unwrap().to_owned();
    let published = keys
        .verifying()
        .iter()
        .find(|k| k.kid() == kid)
        .expect("the signing key is published");
    let input = format!("{}.{claims}", detached.header);
    verify_everywhere(
        hsm.dir(),
        published,
        input.as_bytes(),
        &B64.decode(&detached.signature).unwrap(),
    );
    kid
}

hsm_test!(
    fn keys_rotate_in_the_token_on_a_paused_clock(hsm) {
        hsm.init_token("rotation");
        let holder = Pkcs11Holder::new(hsm.open("rotation").unwrap());
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
            let manager = KeyManager::open(store.clone(), policy, Writer::Always, KeyMetrics::new(), clock.now())
                .await
                .unwrap();
            let first = manager.keys().keys()[0].key().clone();
            assert!(has_private(&holder, &first), "the first key is generated in the token");
            let (sender, mut published) = mpsc::unbounded_channel();
            let inner = clock.clone();
            let _task = manager
                .spawn(clock.clone(), move |keys: KeySet| sender.send((inner.now(), keys)).unwrap())
                .unwrap();

            // At once: the first key signs, in the token.
            let (now, keys) = published.recv().await.unwrap();
            assert_eq!(now.as_second(), T0, "woken at the second");
            assert_eq!(sign_and_verify(hsm, &keys, now).await, first.kid());

            // Six days on, the next key is generated in the token and published a day ahead;
            // the first still signs.
            let (now, keys) = published.recv().await.unwrap();
            assert_eq!(now.as_second(), T0 + 6 * DAY, "woken at the second");
            let stored = store.load().await.unwrap().unwrap();
            let next = stored.keys.keys().iter().find(|k| k.kid() != first.kid()).unwrap().key().clone();
            assert_eq!(stored.keys.state_at(next.kid(), now), Some(KeyState::Next));
            assert!(has_private(&holder, &next));
            let attrs = holder.token().key_attributes(&object_id(&next)).unwrap();
            assert!(attrs.sensitive && !attrs.extractable && attrs.never_extractable, "{attrs:?}");
            let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
            assert_eq!(kids, [first.kid(), next.kid()]);
            assert_eq!(sign_and_verify(hsm, &keys, now).await, first.kid());
            // The store records the public key and the locator, never key material.
            let files = store.files().unwrap();
            assert!(files.values().all(|f| !String::from_utf8_lossy(f).contains("PRIVATE KEY")));

            // At activation the next key signs, and the first retires: its public key stays
            // published for the tokens it signed, and its private object is destroyed once the
            // grace has passed (until then a process sharing the token whose clock is a little
            // behind, or whose signature was asked for just before the switch, still signs).
            let (now, keys) = published.recv().await.unwrap();
            assert_eq!(now.as_second(), T0 + 7 * DAY, "woken at the second");
            assert_eq!(sign_and_verify(hsm, &keys, now).await, next.kid());
            assert!(keys.verifying().iter().any(|k| k.kid() == first.kid()), "the retired key stays published");
            assert!(has_private(&holder, &first), "destroyed at the switch");
            first.sign_detached_async("e30").await.unwrap();
            let grace = warrant_keys::RETIRE_DISPOSAL_GRACE_SECONDS;
            let mut waited = 0;
            while has_private(&holder, &first) {
                assert!(waited <= grace + 5, "not destroyed {waited}s after it retired");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                waited += 1;
            }
            assert!(waited >= grace - 1, "destroyed {waited}s after it retired, within the grace");
            assert!(!has_private(&holder, &first), "the retired key's private object is destroyed");
            assert!(has_private(&holder, &next));
            let err = first.sign_detached_async("e30").await.unwrap_err();
            assert!(err.to_string().contains("no private key object"), "{err}");

            // A day and a minute later its last token has expired and it leaves the JWKS.
            let (now, keys) = published.recv().await.unwrap();
            assert_eq!(now.as_second(), T0 + 8 * DAY + 60, "woken at the second");
            let kids: Vec<&str> = keys.verifying().iter().map(|k| k.kid()).collect();
            assert_eq!(kids, [next.kid()]);
            assert_eq!(sign_and_verify(hsm, &keys, now).await, next.kid());
        });
    }
);
