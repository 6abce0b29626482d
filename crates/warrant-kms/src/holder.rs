//! KMS as the holder of a managed key set's private keys ([`warrant_keys::KeyHolder`]).
//!
//! **Generating.** `CreateKey` with `KeyUsage SIGN_VERIFY`, the key spec of the key type
//! (`RSA_2048`, `RSA_3072`, `ECC_NIST_P256`, `ECC_NIST_P384`, `ECC_NIST_P521`), a description
//! and the tag `warrant.dev/store=NAME` (with `warrant.dev/purpose` for a CA key); then `GetPublicKey`, from which the kid comes exactly as
//! for a PEM key, and the tag `warrant.dev/kid=KID` (`ownership.rs`). If a step after the creation
//! fails, the key is scheduled for deletion again, so a failed generation leaves nothing that
//! signs.
//!
//! **What the store records** is the key's ARN, as [`RemoteKey::locator`]: nothing secret, and
//! enough to find the key again. An ARN in another region is refused rather than looked up.
//!
//! **Async.** `KeyHolder`'s methods are futures, and KMS's client is async: every call runs on
//! the caller's runtime, as signatures do ([`KmsKey`]); no thread or runtime of its own.
//!
//! [`RemoteKey::locator`]: warrant_token::RemoteKey::locator

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kms::types::{KeySpec, KeyUsageType};
use tokio::sync::watch;
use warrant_keys::{
    Disposal, Disposed, Health, HolderAdvice, HolderFuture, KeyHolder, KeyPurpose, Recovery,
    RecoveryPolicy,
};
use warrant_token::{KeyError, KeyType, RemoteSignError, SigningKey, VerifyingKey};

use crate::client::Kms;
use crate::error::KmsError;
use crate::key::{KmsKey, remote_sign_error};
use crate::ownership::{KID_TAG, PENDING_WINDOW_DAYS, STORE_TAG, key_arn, purpose_tag, tag};

/// KMS holding a managed key set's private keys. Cheap to clone.
#[derive(Debug, Clone)]
pub struct KmsHolder {
    kms: Kms,
}

/// What an operator is told about KMS.
pub static ADVICE: HolderAdvice = HolderAdvice {
    flag: "--key-kms-uri",
    name: "AWS KMS",
    short: "KMS",
    restore: "Enable the key again in KMS (cancelling its deletion if scheduled)",
    docs: "docs/kms.md",
    import: Some(
        "importing a private key into AWS KMS is not supported: warrant generates its keys in KMS. To move from PEM keys to KMS, create a new store with `warrant keys generate --key-kms-uri` and serve it with the old public keys as --service-account-key-file until the old tokens expire (docs/kms.md, \"Importing keys\")",
    ),
    retries: "the warrant server that writes this store disables it in KMS and schedules its deletion once KMS answers, retrying until it is done (or the next `warrant serve` on this store does); until then KMS would still sign with it for anyone allowed to call Sign on it (docs/kms.md)",
};

/// How the recovery loop waits for KMS: as for a token, but at most 5 s between probes of an
/// unavailable KMS (a call is cheap, and signing waits on it).
const RECOVERY: RecoveryPolicy = RecoveryPolicy {
    initial_backoff: Duration::from_millis(200),
    max_backoff: Duration::from_secs(5),
    probe_interval: Duration::from_secs(10),
};

impl KmsHolder {
    /// Keys in `kms`.
    pub fn new(kms: Kms) -> KmsHolder {
        KmsHolder { kms }
    }

    /// KMS.
    pub fn kms(&self) -> &Kms {
        &self.kms
    }

    /// Checks that `key`, as a key store recorded it, can sign: its KMS key is enabled, signs
    /// with the recorded algorithm, and holds the recorded public key. [`KeyHolder::open`]
    /// does not look (a retired key is disabled on purpose); a server checks the keys that can
    /// still sign with this at startup.
    pub async fn check_key(&self, key: &SigningKey) -> Result<(), KmsError> {
        let remote = key.remote_key().ok_or_else(|| KmsError::Locator {
            locator: key.kid().to_owned(),
            reason: "is a key in memory, not one held in KMS".into(),
        })?;
        let locator = remote.locator();
        let arn = key_arn(&locator, self.kms.uri().region())?;
        self.kms.check_signing(arn, key.verifying_key()).await
    }

    /// Generates a key of `key_type` in KMS (see the module's doc).
    pub async fn generate_key(
        &self,
        key_type: KeyType,
        purpose: KeyPurpose,
    ) -> Result<KmsKey, KmsError> {
        generate(&self.kms, key_type, purpose).await
    }

    fn open_key(&self, locator: &str, public: VerifyingKey) -> Result<KmsKey, KmsError> {
        let arn = key_arn(locator, self.kms.uri().region())?;
        Ok(KmsKey::new(self.kms.clone(), arn, public))
    }
}

/// The KMS key spec for `key_type`.
pub(crate) fn key_spec(key_type: KeyType) -> KeySpec {
    match key_type {
        KeyType::Rsa2048 => KeySpec::Rsa2048,
        KeyType::Rsa3072 => KeySpec::Rsa3072,
        KeyType::P256 => KeySpec::EccNistP256,
        KeyType::P384 => KeySpec::EccNistP384,
        KeyType::P521 => KeySpec::EccNistP521,
    }
}

async fn generate(kms: &Kms, key_type: KeyType, purpose: KeyPurpose) -> Result<KmsKey, KmsError> {
    let name = kms.uri().name().to_owned();
    let tags: Vec<_> = std::iter::once(tag(STORE_TAG, &name)?)
        .chain(purpose_tag(purpose)?)
        .collect();
    let client = kms.client().clone();
    let created = kms
        .call("create_key", None, None, || {
            client
                .create_key()
                .key_usage(KeyUsageType::SignVerify)
                .key_spec(key_spec(key_type))
                .description(format!(
                    "warrant signing key of {name} (its tags {STORE_TAG} and {KID_TAG} are how warrant knows it: do not change them)"
                ))
                .set_tags(Some(tags.clone()))
                .send()
        })
        .await?;
    let arn = created
        .key_metadata()
        .and_then(|m| m.arn())
        .ok_or_else(|| KmsError::Answer {
            kms: kms.name().to_owned(),
            op: "create_key",
            what: "no ARN for the new key".into(),
        })?
        .to_owned();
    match finish(kms, &arn, key_type).await {
        Ok(public) => {
            tracing::info!(kid = %public.kid(), %arn, "generated a key in KMS");
            Ok(KmsKey::new(kms.clone(), arn, public))
        }
        Err(err) => {
            // Nothing may sign with a key no store will record.
            let scheduled = kms
                .call("schedule_key_deletion", Some(&arn), None, || {
                    client
                        .schedule_key_deletion()
                        .key_id(crate::ownership::key_id(&arn))
                        .pending_window_in_days(PENDING_WINDOW_DAYS)
                        .send()
                })
                .await;
            if let Err(cleanup) = scheduled {
                tracing::error!(%arn, error = %cleanup, "a key whose generation failed could not be scheduled for deletion: delete it in KMS (aws kms schedule-key-deletion)");
            }
            Err(err)
        }
    }
}

/// What a new key signs to prove it holds the public key `GetPublicKey` answered. Not a JWS:
/// no relying party can take the signature for a token.
const CHALLENGE: &[u8] = b"warrant: does the new KMS key hold the public key KMS answered?";

/// The second half of a generation: the new key's public key, checked to be of `key_type`
/// and proven by a challenge it signs, and its kid tag.
async fn finish(kms: &Kms, arn: &str, key_type: KeyType) -> Result<VerifyingKey, KmsError> {
    let public = kms.public_key(arn, None).await?;
    let expected = key_spec(key_type);
    if crate::ownership::key_spec_of(&public).as_ref() != Some(&expected) {
        return Err(KmsError::Unsuitable {
            key: arn.to_owned(),
            problem: format!(
                "KMS made a {} key for a {} request",
                public.algorithm().name(),
                expected.as_str()
            ),
        });
    }
    // The public key is what the store records and relying parties verify with: the key
    // must prove it holds it before anything is recorded.
    KmsKey::new(kms.clone(), arn, public.clone())
        .sign(CHALLENGE.to_vec())
        .await
        .map_err(|err| match err {
            KmsError::BadSignature { .. } => KmsError::Unsuitable {
                key: arn.to_owned(),
                problem: "a challenge it signed does not verify with the public key GetPublicKey answered (an answer was altered on the way, or KMS's answers do not agree)".into(),
            },
            err => err,
        })?;
    let kid = tag(KID_TAG, public.kid())?;
    let client = kms.client().clone();
    kms.call("tag_resource", Some(arn), Some(public.kid()), || {
        client.tag_resource().key_id(arn).tags(kid.clone()).send()
    })
    .await?;
    Ok(public)
}

fn remote(key: KmsKey) -> SigningKey {
    let public = key.verifying_key().clone();
    SigningKey::remote(public, Arc::new(key))
}

fn key_error(err: KmsError) -> KeyError {
    KeyError::Remote(remote_sign_error(err))
}

impl KeyHolder for KmsHolder {
    fn describe(&self) -> String {
        format!(
            "{} (keys tagged {STORE_TAG}={})",
            self.kms.name(),
            self.kms.uri().name()
        )
    }

    fn advice(&self) -> &'static HolderAdvice {
        &ADVICE
    }

    fn generate(
        &self,
        key_type: KeyType,
        purpose: KeyPurpose,
    ) -> HolderFuture<'_, Result<SigningKey, KeyError>> {
        Box::pin(async move {
            self.generate_key(key_type, purpose)
                .await
                .map(remote)
                .map_err(key_error)
        })
    }

    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError> {
        self.open_key(locator, public)
            .map(remote)
            .map_err(key_error)
    }

    fn vouch<'a>(
        &'a self,
        locator: &'a str,
        public: &'a VerifyingKey,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<(), KeyError>> {
        Box::pin(async move {
            let arn = key_arn(locator, self.kms.uri().region()).map_err(key_error)?;
            let vouched = self.kms.vouch(arn, public, purpose).await;
            vouched.map_err(|err| match err {
                // The key's state is an answer about the key, not KMS being out of reach.
                err @ KmsError::KeyState { .. } => KeyError::Remote(RemoteSignError {
                    unavailable: false,
                    source: Arc::new(err),
                }),
                err => key_error(err),
            })
        })
    }

    fn dispose<'a>(
        &'a self,
        locator: &'a str,
        kid: &'a str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<Disposed, KeyError>> {
        Box::pin(async move {
            let arn = match key_arn(locator, self.kms.uri().region()) {
                Ok(arn) => arn,
                // A locator that names no key of this region names nothing of warrant's here.
                Err(error) => return Ok(Disposed::NotTheKey(error.to_string())),
            };
            self.kms
                .dispose(arn, kid, disposal, purpose)
                .await
                .map_err(key_error)
        })
    }

    fn check<'a>(&'a self, key: &'a SigningKey) -> HolderFuture<'a, Result<(), KeyError>> {
        Box::pin(async move { self.check_key(key).await.map_err(key_error) })
    }

    fn reachable(&self) -> HolderFuture<'_, Result<(), KeyError>> {
        Box::pin(async move { self.kms.reachable().await.map_err(key_error) })
    }

    fn health(&self) -> watch::Receiver<Health> {
        self.kms.subscribe_health()
    }

    fn probe(&self) -> HolderFuture<'_, ()> {
        Box::pin(self.kms.probe_keys())
    }

    fn recover(&self) -> HolderFuture<'_, Recovery> {
        Box::pin(self.kms.recover())
    }

    fn recovery_policy(&self) -> RecoveryPolicy {
        RECOVERY
    }
}
