//! What the key crate's tests share: a fixed start time and a rotation policy that is quick to
//! run (P-256 keys, a week's rotation, a day's publish-ahead and token lifetime).

use jiff::Timestamp;
use warrant_token::KeyType;

use crate::lifecycle::RotationPolicy;

/// The tests' "now" at the start: 2027-01-15.
pub(crate) const T0: i64 = 1_800_000_000;
pub(crate) const HOUR: i64 = 3600;
pub(crate) const DAY: i64 = 24 * HOUR;

/// The instant `second` seconds after the epoch.
pub(crate) fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
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
/// private halves it keeps (as an HSM would), and records what it generated and destroyed.
#[derive(Default)]
pub(crate) struct FakeHolder {
    pub(crate) keys:
        std::sync::Mutex<std::collections::BTreeMap<String, warrant_token::SigningKey>>,
    pub(crate) destroyed: std::sync::Mutex<Vec<String>>,
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

impl FakeHolder {
    fn remote(kid: &str, public: warrant_token::VerifyingKey) -> warrant_token::SigningKey {
        warrant_token::SigningKey::remote(public, std::sync::Arc::new(FakeRemote(kid.to_owned())))
    }

    /// The kids whose private halves are still held.
    pub(crate) fn held(&self) -> Vec<String> {
        self.keys.lock().unwrap().keys().cloned().collect()
    }
}

impl crate::KeyHolder for FakeHolder {
    fn describe(&self) -> String {
        "fake holder".into()
    }

    fn generate(
        &self,
        key_type: KeyType,
    ) -> Result<warrant_token::SigningKey, warrant_token::KeyError> {
        let key = warrant_token::SigningKey::generate(key_type)?;
        self.keys
            .lock()
            .unwrap()
            .insert(key.kid().to_owned(), key.clone());
        Ok(Self::remote(key.kid(), key.verifying_key().clone()))
    }

    fn open(
        &self,
        locator: &str,
        public: warrant_token::VerifyingKey,
    ) -> Result<warrant_token::SigningKey, warrant_token::KeyError> {
        let kid = locator.strip_prefix("fake:").unwrap();
        assert_eq!(kid, public.kid(), "the locator names the key's own object");
        Ok(Self::remote(kid, public))
    }

    fn destroy(&self, key: &warrant_token::SigningKey) -> Result<(), warrant_token::KeyError> {
        self.keys.lock().unwrap().remove(key.kid());
        self.destroyed.lock().unwrap().push(key.kid().to_owned());
        Ok(())
    }
}
