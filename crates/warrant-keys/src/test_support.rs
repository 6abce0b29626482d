//! What the key crate's tests share: a fixed start time and a rotation policy that is quick to
//! run (P-256 keys, a week's rotation, a day's publish-ahead and token lifetime).

use jiff::Timestamp;
use warrant_clock::Clock;
use warrant_token::KeyType;

use crate::lifecycle::{ManagedKeySet, RotationPolicy};

/// The tests' "now" at the start: the testkit's (2027-01-15).
pub(crate) const T0: i64 = warrant_testkit::NOW;
pub(crate) const HOUR: i64 = 3600;
pub(crate) const DAY: i64 = 24 * HOUR;

/// The instant `second` seconds after the epoch.
pub(crate) fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// Wall time that follows Tokio's (paused) clock from `T0`.
pub(crate) fn clock() -> Clock {
    Clock::follows_tokio(at(T0))
}

/// The kids of `set`, in its order.
pub(crate) fn kids(set: &ManagedKeySet) -> Vec<String> {
    set.keys().iter().map(|k| k.kid().to_owned()).collect()
}

/// P-256 keys rotated weekly, published a day ahead, for tokens of at most a day.
pub(crate) fn policy() -> RotationPolicy {
    RotationPolicy {
        key_type: KeyType::P256,
        rotation_period_seconds: 7 * DAY,
        publish_ahead_seconds: DAY,
        max_token_seconds: DAY,
    }
}

/// A [`crate::KeyHolder`] in memory, standing in for an HSM: it generates P-256 keys whose
/// private halves it keeps (as an HSM would), vouches for the keys it generated until they are
/// forgotten (a retired key's proof outlives its private half, as a token's public key object
/// does), records what it destroyed, and can be made unreachable.
#[derive(Default)]
pub(crate) struct FakeHolder {
    pub(crate) keys:
        std::sync::Mutex<std::collections::BTreeMap<String, warrant_token::SigningKey>>,
    /// The kids it vouches for, each for the purpose it was made for: those generated and not
    /// forgotten.
    pub(crate) proofs: std::sync::Mutex<std::collections::BTreeMap<String, crate::KeyPurpose>>,
    /// (kid, disposal) of each destruction that destroyed something.
    pub(crate) destroyed: std::sync::Mutex<Vec<(String, crate::Disposal)>>,
    /// How many times it was asked to vouch.
    pub(crate) vouches: std::sync::atomic::AtomicUsize,
    pub(crate) unreachable: std::sync::atomic::AtomicBool,
}

/// The fake holder's handle on one key: it only says where the key is (the manager's tests
/// never sign).
struct FakeRemote(String);

impl warrant_token::RemoteKey for FakeRemote {
    fn sign(&self, _: Vec<u8>) -> warrant_token::RemoteSignature<'_> {
        Box::pin(async { unreachable!("the key crate's tests do not sign") })
    }
    fn describe(&self) -> String {
        format!("fake holder, key {}", self.0)
    }
    fn locator(&self) -> String {
        format!("fake:{}", self.0)
    }
    fn unavailable(&self) -> Option<String> {
        None
    }
}

/// An error of the fake holder: `unavailable` or refused.
fn fake_error(unavailable: bool, message: &str) -> warrant_token::KeyError {
    warrant_token::KeyError::Remote(warrant_token::RemoteSignError {
        unavailable,
        source: std::sync::Arc::new(std::io::Error::other(message.to_owned())),
    })
}

impl FakeHolder {
    fn remote(kid: &str, public: warrant_token::VerifyingKey) -> warrant_token::SigningKey {
        warrant_token::SigningKey::remote(public, std::sync::Arc::new(FakeRemote(kid.to_owned())))
    }

    /// The kids whose private halves are still held.
    pub(crate) fn held(&self) -> Vec<String> {
        self.keys.lock().unwrap().keys().cloned().collect()
    }

    /// The kids of the keys destroyed with `disposal`, in order.
    pub(crate) fn destroyed(&self, disposal: crate::Disposal) -> Vec<String> {
        let destroyed = self.destroyed.lock().unwrap();
        destroyed
            .iter()
            .filter(|(_, d)| *d == disposal)
            .map(|(kid, _)| kid.clone())
            .collect()
    }

    /// Makes every call fail as unreachable (or work again).
    pub(crate) fn set_unreachable(&self, unreachable: bool) {
        self.unreachable
            .store(unreachable, std::sync::atomic::Ordering::SeqCst);
    }

    fn reachable(&self) -> Result<(), warrant_token::KeyError> {
        if self.unreachable.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(fake_error(true, "the fake holder is unreachable"));
        }
        Ok(())
    }
}

/// What the fake holder advises: nothing a test reads.
static FAKE_ADVICE: crate::HolderAdvice = crate::HolderAdvice {
    flag: "--fake-holder",
    name: "the fake holder",
    short: "the fake holder",
    restore: "Restore it",
    docs: "nowhere",
    import: None,
    retries: "nothing retries",
};

/// The fake holder's answers, at once (it holds everything in memory); its
/// [`crate::KeyHolder`] methods hand them over as ready futures.
impl FakeHolder {
    /// A token key (what most tests make).
    pub(crate) fn generate(
        &self,
        key_type: KeyType,
    ) -> Result<warrant_token::SigningKey, warrant_token::KeyError> {
        self.generate_for(key_type, crate::KeyPurpose::Tokens)
    }

    pub(crate) fn generate_for(
        &self,
        key_type: KeyType,
        purpose: crate::KeyPurpose,
    ) -> Result<warrant_token::SigningKey, warrant_token::KeyError> {
        self.reachable()?;
        let key = warrant_token::SigningKey::generate(key_type)?;
        self.keys
            .lock()
            .unwrap()
            .insert(key.kid().to_owned(), key.clone());
        self.proofs
            .lock()
            .unwrap()
            .insert(key.kid().to_owned(), purpose);
        Ok(Self::remote(key.kid(), key.verifying_key().clone()))
    }

    pub(crate) fn vouch(
        &self,
        locator: &str,
        public: &warrant_token::VerifyingKey,
        purpose: crate::KeyPurpose,
    ) -> Result<(), warrant_token::KeyError> {
        self.vouches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.reachable()?;
        let kid = locator.strip_prefix("fake:").unwrap_or_default();
        match self.proofs.lock().unwrap().get(kid) {
            Some(made_for) if kid == public.kid() && *made_for == purpose => Ok(()),
            Some(made_for) if kid == public.kid() => Err(fake_error(
                false,
                &format!("the fake holder keeps this key for {made_for}, not {purpose}"),
            )),
            _ => Err(fake_error(false, "the fake holder holds no such key")),
        }
    }

    pub(crate) fn dispose(
        &self,
        locator: &str,
        kid: &str,
        disposal: crate::Disposal,
        purpose: crate::KeyPurpose,
    ) -> Result<crate::Disposed, warrant_token::KeyError> {
        self.reachable()?;
        if locator.strip_prefix("fake:") != Some(kid) {
            return Ok(crate::Disposed::NotTheKey(format!(
                "{locator} is not key {kid}"
            )));
        }
        if let Some(made_for) = self.proofs.lock().unwrap().get(kid)
            && *made_for != purpose
        {
            return Ok(crate::Disposed::NotTheKey(format!(
                "key {kid} is kept for {made_for}, not {purpose}"
            )));
        }
        let private = self.keys.lock().unwrap().remove(kid).is_some();
        let proof = disposal == crate::Disposal::Forget
            && self.proofs.lock().unwrap().remove(kid).is_some();
        if private || proof {
            self.destroyed
                .lock()
                .unwrap()
                .push((kid.to_owned(), disposal));
            Ok(crate::Disposed::Destroyed)
        } else {
            Ok(crate::Disposed::Gone)
        }
    }
}

impl crate::KeyHolder for FakeHolder {
    fn describe(&self) -> String {
        "fake holder".into()
    }

    fn advice(&self) -> &'static crate::HolderAdvice {
        &FAKE_ADVICE
    }

    fn generate(
        &self,
        key_type: KeyType,
        purpose: crate::KeyPurpose,
    ) -> crate::HolderFuture<'_, Result<warrant_token::SigningKey, warrant_token::KeyError>> {
        Box::pin(std::future::ready(self.generate_for(key_type, purpose)))
    }

    fn open(
        &self,
        locator: &str,
        public: warrant_token::VerifyingKey,
    ) -> Result<warrant_token::SigningKey, warrant_token::KeyError> {
        let kid = locator
            .strip_prefix("fake:")
            .ok_or_else(|| fake_error(false, "not a fake locator"))?;
        Ok(Self::remote(kid, public))
    }

    fn vouch<'a>(
        &'a self,
        locator: &'a str,
        public: &'a warrant_token::VerifyingKey,
        purpose: crate::KeyPurpose,
    ) -> crate::HolderFuture<'a, Result<(), warrant_token::KeyError>> {
        Box::pin(std::future::ready(self.vouch(locator, public, purpose)))
    }

    fn dispose<'a>(
        &'a self,
        locator: &'a str,
        kid: &'a str,
        disposal: crate::Disposal,
        purpose: crate::KeyPurpose,
    ) -> crate::HolderFuture<'a, Result<crate::Disposed, warrant_token::KeyError>> {
        Box::pin(std::future::ready(
            self.dispose(locator, kid, disposal, purpose),
        ))
    }
}
