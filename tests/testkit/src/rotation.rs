//! The rotation scenario every key holder runs, written once: warrant-keys' `KeyManager` over a
//! store whose private keys a [`KeyHolder`] holds (in memory, a PKCS#11 token, AWS KMS), driven
//! by Tokio's paused clock from [`NOW`](crate::NOW). It asserts what an operator and a relying
//! party notice: the first key generated in the holder and signing at once; its successor
//! generated in the holder six days on and published a day ahead; the successor signing from
//! its activation while the retired key stays published; the retired key's private half
//! disposed of in the holder once [`RETIRE_DISPOSAL_GRACE_SECONDS`] have passed, not before;
//! the retired key leaving the key set (and the holder forgetting it) once its last token has
//! expired; every signature checked from the published key of its kid alone; the store never
//! holding key material.
//!
//! Each holder's tests implement [`HolderUnderTest`] (how to ask the holder itself what it
//! holds) and call [`keys_rotate_in_the_holder`].
//!
//! A holder may talk over sockets (KMS): on a paused runtime Tokio would jump the clock to the
//! next timer while a call waits for an answer, firing its deadline. So signatures and the
//! holder's probes run on a thread with a real-time runtime of its own ([`off_the_clock`]),
//! while the paused runtime's only thread waits (and so does not advance its clock).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jiff::Timestamp;
use tokio::sync::mpsc;
use warrant_clock::Clock;
use warrant_keys::{
    Disposal, Disposed, HolderAdvice, HolderFuture, KeyHolder, KeyManager, KeyMetrics, KeyPurpose,
    KeySet, KeyState, KeyStore as _, MemoryStore, RETIRE_DISPOSAL_GRACE_SECONDS, RotationPolicy,
    Writer,
};
use warrant_token::{KeyError, KeyType, SigningKey, VerifyingKey};

use crate::signatures::verify_signature;

const DAY: i64 = 86_400;

/// What a holder says of one of its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InHolder {
    /// Its private half is there and may sign.
    Signs,
    /// Its private half is disposed of (destroyed, disabled); the holder still vouches for it.
    Retired,
    /// The holder has forgotten it (destroyed all of it, scheduled its deletion).
    Forgotten,
}

/// A key holder under test, and how to ask it (never the store) what it holds.
pub trait HolderUnderTest: Sync {
    /// The holder, as the store holds it.
    fn holder(&self) -> Arc<dyn KeyHolder>;

    /// What the holder itself says of `key`. Runs on a thread of its own with a real-time Tokio
    /// runtime entered, so it may block or `Handle::current().block_on`.
    fn state(&self, key: &SigningKey) -> InHolder;

    /// Whether the holder refuses to sign with a key it says is [`InHolder::Retired`] (moto signs
    /// with a disabled KMS key, which AWS refuses).
    fn refuses_retired(&self) -> bool {
        true
    }

    /// Checks a holder-specific property of a key it just generated (an HSM's non-extractable
    /// attributes), and `signature` over `message` with verifiers of its own (`openssl`). Runs
    /// like [`state`](Self::state).
    fn check(&self, _key: &SigningKey, _message: &[u8], _signature: &[u8]) {}
}

/// Runs `work` to completion on a thread with a real-time runtime of its own, blocking the
/// caller (a paused runtime's only thread, which so does not advance its clock meanwhile).
pub fn off_the_clock<T: Send>(work: impl Future<Output = T> + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(work)
            })
            .join()
            .expect("the work does not panic")
    })
}

/// A holder whose every call runs [off the clock](off_the_clock), blocking the paused
/// runtime's thread meanwhile: a holder's calls take real time (KMS's deadline is on tokio's
/// clock, which would race ahead of an answer from a real emulator), and the scenario's clock
/// must not move while one is in progress.
struct OffTheClock(Arc<dyn KeyHolder>);

impl KeyHolder for OffTheClock {
    fn describe(&self) -> String {
        self.0.describe()
    }

    fn advice(&self) -> &'static HolderAdvice {
        self.0.advice()
    }

    fn generate(
        &self,
        key_type: KeyType,
        purpose: KeyPurpose,
    ) -> HolderFuture<'_, Result<SigningKey, KeyError>> {
        let generated = off_the_clock(self.0.generate(key_type, purpose));
        Box::pin(std::future::ready(generated))
    }

    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError> {
        self.0.open(locator, public)
    }

    fn vouch<'a>(
        &'a self,
        locator: &'a str,
        public: &'a VerifyingKey,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<(), KeyError>> {
        let vouched = off_the_clock(self.0.vouch(locator, public, purpose));
        Box::pin(std::future::ready(vouched))
    }

    fn dispose<'a>(
        &'a self,
        locator: &'a str,
        kid: &'a str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<Disposed, KeyError>> {
        let disposed = off_the_clock(self.0.dispose(locator, kid, disposal, purpose));
        Box::pin(std::future::ready(disposed))
    }
}

/// The rotation scenario (see the module's documentation) on a paused clock.
pub fn keys_rotate_in_the_holder(under_test: &impl HolderUnderTest) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a paused runtime");
    runtime.block_on(scenario(under_test));
}

/// Runs `probe` on a thread of its own with a real-time runtime entered (the probe may
/// `Handle::current().block_on`: the runtime's worker drives its I/O meanwhile), blocking the
/// caller like [`off_the_clock`].
fn probe<T: Send>(probe: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("a runtime");
                let _entered = runtime.enter();
                probe()
            })
            .join()
            .expect("the probe does not panic")
    })
}

/// What the holder says of `key`, asked off the paused clock.
fn state(under_test: &impl HolderUnderTest, key: &SigningKey) -> InHolder {
    probe(|| under_test.state(key))
}

/// Waits until the holder says `wanted` of `key`: a disposal runs on a blocking thread after
/// the change that caused it, so the paused clock moves on a little at a time meanwhile
/// (Tokio does not advance it while a blocking task runs).
async fn becomes(under_test: &impl HolderUnderTest, key: &SigningKey, wanted: InHolder) {
    let mut last = InHolder::Signs;
    for _ in 0..200 {
        last = state(under_test, key);
        if last == wanted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("key {} stayed {last:?}, not {wanted:?}", key.kid());
}

/// Signs with the key of `keys` that signs at `now`, as the issuer core does, and checks the
/// signature against the published key of that kid alone; returns the kid.
fn sign_and_verify(under_test: &impl HolderUnderTest, keys: &KeySet, now: Timestamp) -> String {
    let key = keys.signing_at(now).expect("a key signs").clone();
    let claims = B64.encode(r#"{"sub":"system:serviceaccount:default:app"}"#);
    let detached =
        off_the_clock(key.sign_detached_async(&claims)).expect("the key signs in the holder");
    let header: serde_json::Value =
        serde_json::from_slice(&B64.decode(&detached.header).expect("base64url"))
            .expect("a JSON header");
    let kid = header
        .get("kid")
        .and_then(serde_json::Value::as_str)
        .expect("a kid")
        .to_owned();
    let published = keys
        .verifying()
        .iter()
        .find(|k| k.kid() == kid)
        .expect("the signing key is published");
    let input = format!("{}.{claims}", detached.header);
    let signature = B64.decode(&detached.signature).expect("base64url");
    verify_signature(published, input.as_bytes(), &signature);
    probe(|| under_test.check(&key, input.as_bytes(), &signature));
    kid
}

fn kids(keys: &KeySet) -> Vec<&str> {
    keys.verifying().iter().map(|k| k.kid()).collect()
}

async fn scenario(under_test: &impl HolderUnderTest) {
    let t0 = crate::NOW;
    let store = MemoryStore::new().with_holder(Arc::new(OffTheClock(under_test.holder())));
    let policy = RotationPolicy {
        key_type: KeyType::P256,
        rotation_period_seconds: 7 * DAY,
        publish_ahead_seconds: DAY,
        max_token_seconds: DAY,
    };
    let clock = Clock::follows_tokio(Timestamp::from_second(t0).expect("a time"));
    let manager = KeyManager::open(
        store.clone(),
        policy,
        Writer::Always,
        KeyMetrics::new(),
        clock.now(),
    )
    .await
    .expect("the manager opens");
    let first = manager
        .keys()
        .keys()
        .first()
        .expect("a first key")
        .key()
        .clone();
    assert_eq!(
        state(under_test, &first),
        InHolder::Signs,
        "the first key is generated in the holder"
    );
    let (sender, mut published) = mpsc::unbounded_channel();
    let inner = clock.clone();
    let _task = manager
        .spawn(clock.clone(), move |keys: KeySet| {
            sender
                .send((inner.now().as_second(), keys))
                .expect("the test listens");
        })
        .expect("the manager runs");

    // At once: the first key signs, in the holder.
    let (now, keys) = published.recv().await.expect("published");
    assert_eq!(now, t0, "published at once");
    let at = |second| Timestamp::from_second(second).expect("a time");
    assert_eq!(sign_and_verify(under_test, &keys, at(now)), first.kid());

    // Six days on, the next key is generated in the holder and published a day ahead; the
    // first still signs.
    let (now, keys) = published.recv().await.expect("published");
    assert_eq!(now, t0 + 6 * DAY, "woken at the second");
    let stored = store.load().await.expect("loads").expect("a key set");
    let next = stored
        .keys
        .keys()
        .iter()
        .find(|k| k.kid() != first.kid())
        .expect("a successor")
        .key()
        .clone();
    assert_eq!(
        stored.keys.state_at(next.kid(), at(now)),
        Some(KeyState::Next)
    );
    assert_eq!(
        state(under_test, &next),
        InHolder::Signs,
        "the successor is generated in the holder"
    );
    assert_eq!(kids(&keys), [first.kid(), next.kid()], "published ahead");
    assert_eq!(sign_and_verify(under_test, &keys, at(now)), first.kid());
    // The store records public keys and locators, never key material.
    let files = store.files().expect("the store's files");
    assert!(
        files
            .values()
            .all(|f| !String::from_utf8_lossy(f).contains("PRIVATE KEY")),
        "the store holds a private key"
    );

    // At activation the next key signs and the first retires: its public key stays published
    // for the tokens it signed, and its private half stays in the holder for the grace (a
    // process sharing the holder whose clock is a little behind, or whose signature was asked
    // for just before the switch, still signs with it), then is disposed of.
    let (now, keys) = published.recv().await.expect("published");
    assert_eq!(now, t0 + 7 * DAY, "woken at the second");
    assert_eq!(sign_and_verify(under_test, &keys, at(now)), next.kid());
    assert!(
        kids(&keys).contains(&first.kid()),
        "the retired key stays published"
    );
    let grace = RETIRE_DISPOSAL_GRACE_SECONDS.unsigned_abs();
    tokio::time::sleep(Duration::from_secs(grace - 1)).await;
    tokio::task::yield_now().await;
    assert_eq!(
        state(under_test, &first),
        InHolder::Signs,
        "disposed of within the grace"
    );
    off_the_clock(first.sign_detached_async("e30")).expect("it signs within the grace");
    tokio::time::sleep(Duration::from_secs(2)).await;
    becomes(under_test, &first, InHolder::Retired).await;
    assert_eq!(state(under_test, &next), InHolder::Signs);
    if under_test.refuses_retired() {
        off_the_clock(first.sign_detached_async("e30")).expect_err("a retired key signs no more");
    }

    // A day and a minute after the switch its last token has expired: it leaves the key set,
    // and the holder forgets it.
    let (now, keys) = published.recv().await.expect("published");
    assert_eq!(now, t0 + 8 * DAY + 60, "woken at the second");
    assert_eq!(kids(&keys), [next.kid()]);
    assert_eq!(sign_and_verify(under_test, &keys, at(now)), next.kid());
    becomes(under_test, &first, InHolder::Forgotten).await;
    assert_eq!(state(under_test, &next), InHolder::Signs);
}
