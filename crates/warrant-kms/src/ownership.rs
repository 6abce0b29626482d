//! How KMS vouches for the keys it holds for warrant, and why only those are disabled and
//! deleted: the KMS side of `warrant_keys::KeyHolder::vouch` and `dispose` (the rule,
//! "whatever a store entry claims about a held key is checked against the holder", is
//! warrant-keys').
//!
//! **The proof.** Every key warrant makes in KMS carries two tags: `warrant.dev/store`, the
//! name in `--key-kms-uri` (set when the key is created), and `warrant.dev/kid`, its kid (set
//! once KMS has made the key and warrant has read its public key; the kid is a SHA-256 of that
//! public key). A key a store lists is vouched for only if KMS says, for the ARN the store
//! records:
//!
//! - the key is in this holder's region and KMS describes it (`DescribeKey`): a key of another
//!   account gets no tags (KMS's `ListResourceTags` does not work across accounts);
//! - `KeyUsage` is `SIGN_VERIFY` and `KeySpec` is the recorded key's (`RSA_2048` for a
//!   2048-bit RS256 key, `ECC_NIST_P256` for ES256, …); its state is `Enabled`, `Disabled` (a
//!   retired key) or `PendingDeletion`, never `PendingImport` or another;
//! - its tags name this store and the recorded kid (`ListResourceTags`), and what the key is
//!   for: no `warrant.dev/purpose` tag for a token key (as every key had before there were two
//!   purposes), `warrant.dev/purpose=pod-certificate-ca` for a pod certificate CA key, set when
//!   the key is created. So a CA key listed in the token keys' store (or the reverse) is not
//!   vouched for, nor disposed of, although both carry the one store name;
//! - when it is enabled, its public key (`GetPublicKey`) is the recorded one. A disabled key's
//!   public key cannot be read (KMS refuses `GetPublicKey` on it); its kid tag, a hash of the
//!   public key set by a principal allowed to, stands for it.
//!
//! So whoever writes the store can make warrant trust a key only if they can also create or
//! tag keys with warrant's store tag, which the IAM policy gives warrant alone
//! (docs/security.md): the IAM policy is to KMS what the PIN is to a PKCS#11 token.
//!
//! **Disposing.** A key is disabled (`DisableKey`) when it retires, and disabled and
//! scheduled for deletion (`ScheduleKeyDeletion`, KMS's shortest window, 7 days) when it is
//! revoked or removed, only once its tags prove it is the recorded key of this store; anything
//! else a store entry names (another application's key) is left alone and reported. Deletion
//! waits for removal, not retirement: a key pending deletion is gone within 7 to 30 days, and a
//! retired key must stay verifiable, and vouched for, until its last token expires, which may
//! be later.

use aws_sdk_kms::types::{
    KeyManagerType, KeyMetadata, KeySpec, KeyState, KeyUsageType, SigningAlgorithmSpec, Tag,
};
use warrant_keys::{Disposal, Disposed, KeyPurpose};
use warrant_token::{Algorithm, VerifyingKey};

use crate::client::Kms;
use crate::error::KmsError;
use crate::key::{rsa_modulus_len, signing_algorithm};

/// The tag naming the warrant key set a key belongs to (`--key-kms-uri`'s name).
pub const STORE_TAG: &str = "warrant.dev/store";
/// The tag naming a key's kid.
pub const KID_TAG: &str = "warrant.dev/kid";
/// The tag naming what a key is for ([`KeyPurpose::name`]), on every key but token keys.
pub const PURPOSE_TAG: &str = "warrant.dev/purpose";
/// KMS's shortest wait before a key scheduled for deletion is deleted, in days.
pub const PENDING_WINDOW_DAYS: i32 = 7;

/// The ARN in `locator` if it names a KMS key in `region`.
pub(crate) fn key_arn<'a>(locator: &'a str, region: &str) -> Result<&'a str, KmsError> {
    let refused = |reason: String| KmsError::Locator {
        locator: locator.to_owned(),
        reason,
    };
    let parts: Vec<&str> = locator.splitn(6, ':').collect();
    let [arn, partition, service, key_region, account, resource] = parts.as_slice() else {
        return Err(refused(
            "is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)".into(),
        ));
    };
    let key_id = resource.strip_prefix("key/").unwrap_or_default();
    let well_formed = *arn == "arn"
        && partition.starts_with("aws")
        && *service == "kms"
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && !key_id.is_empty()
        && key_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !well_formed {
        return Err(refused(
            "is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)".into(),
        ));
    }
    if *key_region != region {
        return Err(refused(format!(
            "names a key in {key_region}, and the keys are held in {region}"
        )));
    }
    Ok(locator)
}

/// The key ID at the end of a key ARN [`key_arn`] accepted, for the calls that take a key of the
/// caller's own account only (`DisableKey`, `EnableKey`, `ScheduleKeyDeletion`): AWS takes
/// the ARN or the ID there, moto only the ID.
pub(crate) fn key_id(arn: &str) -> &str {
    arn.rsplit_once(":key/").map_or(arn, |(_, id)| id)
}

/// The `KeySpec` a key must have to be `public`.
pub(crate) fn key_spec_of(public: &VerifyingKey) -> Option<KeySpec> {
    Some(match public.algorithm() {
        Algorithm::RS256 => match rsa_modulus_len(public)? * 8 {
            2048 => KeySpec::Rsa2048,
            3072 => KeySpec::Rsa3072,
            4096 => KeySpec::Rsa4096,
            _ => return None,
        },
        Algorithm::ES256 => KeySpec::EccNistP256,
        Algorithm::ES384 => KeySpec::EccNistP384,
        Algorithm::ES512 => KeySpec::EccNistP521,
    })
}

/// The tags warrant puts on a key of store `name`: the store, and the kid once known.
pub(crate) fn tag(key: &str, value: &str) -> Result<Tag, KmsError> {
    Tag::builder()
        .tag_key(key)
        .tag_value(value)
        .build()
        .map_err(|e| KmsError::Import(e.to_string()))
}

/// The tag a new key for `purpose` carries beside the store's, if any (token keys carry none).
pub(crate) fn purpose_tag(purpose: KeyPurpose) -> Result<Option<Tag>, KmsError> {
    match purpose {
        KeyPurpose::Tokens => Ok(None),
        other => tag(PURPOSE_TAG, other.name()).map(Some),
    }
}

/// Why `tags` do not mark a key as key `kid` of store `name`, kept for `purpose`, or `None` when
/// they do.
pub(crate) fn tags_mismatch(
    tags: &[Tag],
    name: &str,
    kid: &str,
    purpose: KeyPurpose,
) -> Option<String> {
    fn tag_value<'t>(tags: &'t [Tag], key: &str) -> Option<&'t str> {
        tags.iter().find(|t| t.tag_key() == key).map(Tag::tag_value)
    }
    let wanted = match purpose {
        KeyPurpose::Tokens => None,
        other => Some(other.name()),
    };
    let tagged = tag_value(tags, PURPOSE_TAG);
    if tag_value(tags, STORE_TAG) == Some(name)
        && tag_value(tags, KID_TAG) == Some(kid)
        && tagged != wanted
    {
        let made_for: &str = match tagged {
            None => KeyPurpose::Tokens.keys(),
            Some(name) => KeyPurpose::from_name(name).map_or(name, |p| p.keys()),
        };
        let tag = tagged.map_or_else(
            || format!("it has no {PURPOSE_TAG} tag"),
            |t| format!("its {PURPOSE_TAG} tag is {t:?}"),
        );
        return Some(format!(
            "it is one of the {made_for}, not of the {}: {tag}",
            purpose.keys()
        ));
    }
    match (tag_value(tags, STORE_TAG), tag_value(tags, KID_TAG)) {
        (Some(store), Some(tagged)) if store == name && tagged == kid => None,
        (None, _) => Some(format!(
            "it has no {STORE_TAG} tag: warrant did not make it for a key store"
        )),
        (Some(store), _) if store != name => Some(format!(
            "its {STORE_TAG} tag is {store:?}, not {name:?}: it belongs to another warrant key set"
        )),
        (Some(_), None) => Some(format!(
            "it has no {KID_TAG} tag: its creation was never finished"
        )),
        (Some(_), Some(tagged)) => Some(format!(
            "its {KID_TAG} tag is {tagged:?}: it is another key"
        )),
    }
}

/// Why `meta` is not a key that can be `public`, or `None`.
pub(crate) fn unsuitable(meta: &KeyMetadata, public: &VerifyingKey) -> Option<String> {
    if meta.key_usage() != Some(&KeyUsageType::SignVerify) {
        return Some(format!(
            "its KeyUsage is {}, not SIGN_VERIFY",
            meta.key_usage().map_or("unknown", KeyUsageType::as_str)
        ));
    }
    let expected = key_spec_of(public);
    if expected.is_none() || meta.key_spec() != expected.as_ref() {
        return Some(format!(
            "its KeySpec is {}, and the recorded key is {} ({})",
            meta.key_spec().map_or("unknown", KeySpec::as_str),
            expected
                .as_ref()
                .map_or("of no KMS key spec", KeySpec::as_str),
            public.algorithm().name()
        ));
    }
    let wanted = signing_algorithm(public.algorithm());
    if !meta.signing_algorithms().is_empty() && !meta.signing_algorithms().contains(&wanted) {
        return Some(format!(
            "it does not sign with {}",
            SigningAlgorithmSpec::as_str(&wanted)
        ));
    }
    if meta.key_manager() == Some(&KeyManagerType::Aws) {
        return Some("it is an AWS managed key".into());
    }
    None
}

impl Kms {
    /// `DescribeKey`.
    pub(crate) async fn describe(
        &self,
        arn: &str,
        kid: Option<&str>,
    ) -> Result<KeyMetadata, KmsError> {
        let client = self.client().clone();
        let answer = self
            .call("describe_key", Some(arn), kid, || {
                client.describe_key().key_id(arn).send()
            })
            .await?;
        answer.key_metadata.ok_or_else(|| KmsError::Answer {
            kms: self.name().to_owned(),
            op: "describe_key",
            what: format!("no metadata for {arn}"),
        })
    }

    /// Every tag of the key (`ListResourceTags`, page by page).
    pub(crate) async fn tags(&self, arn: &str, kid: Option<&str>) -> Result<Vec<Tag>, KmsError> {
        let client = self.client().clone();
        let mut tags = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let page = self
                .call("list_resource_tags", Some(arn), kid, || {
                    client
                        .list_resource_tags()
                        .key_id(arn)
                        .set_marker(marker.clone())
                        .send()
                })
                .await?;
            tags.extend(page.tags().iter().cloned());
            match page.next_marker() {
                Some(next) if page.truncated() => marker = Some(next.to_owned()),
                _ => return Ok(tags),
            }
        }
    }

    /// The key's public key (`GetPublicKey`).
    pub(crate) async fn public_key(
        &self,
        arn: &str,
        kid: Option<&str>,
    ) -> Result<VerifyingKey, KmsError> {
        let client = self.client().clone();
        let answer = self
            .call("get_public_key", Some(arn), kid, || {
                client.get_public_key().key_id(arn).send()
            })
            .await?;
        let der = answer.public_key().ok_or_else(|| KmsError::Answer {
            kms: self.name().to_owned(),
            op: "get_public_key",
            what: format!("no public key for {arn}"),
        })?;
        VerifyingKey::from_spki_der(der.as_ref()).map_err(|e| KmsError::Unsuitable {
            key: arn.to_owned(),
            problem: format!("its public key is not one warrant can publish: {e}"),
        })
    }

    /// Vouches for `public` at `arn` (see the module's doc): [`KmsError::NotHeld`] says why
    /// not; an error for which [`KmsError::is_unavailable`] holds means KMS could not be
    /// asked.
    pub(crate) async fn vouch(
        &self,
        arn: &str,
        public: &VerifyingKey,
        purpose: KeyPurpose,
    ) -> Result<(), KmsError> {
        let kid = public.kid();
        let not_held = |reason: String| KmsError::NotHeld {
            key: arn.to_owned(),
            kid: kid.to_owned(),
            reason,
        };
        let meta = match self.describe(arn, Some(kid)).await {
            Ok(meta) => meta,
            Err(KmsError::NotFound { .. }) => {
                return Err(not_held(
                    "KMS has no such key (it was deleted, or never existed in this account and region)"
                        .into(),
                ));
            }
            Err(KmsError::AccessDenied { code, message, .. }) => {
                return Err(not_held(format!(
                    "warrant may not describe it ({code}: {message}): it is not a key of warrant's"
                )));
            }
            Err(err) => return Err(err),
        };
        if meta.arn() != Some(arn) {
            return Err(not_held(format!(
                "KMS describes it as {}",
                meta.arn().unwrap_or("no ARN")
            )));
        }
        if let Some(problem) = unsuitable(&meta, public) {
            return Err(not_held(problem));
        }
        let state = meta.key_state().cloned();
        if !matches!(
            state,
            Some(KeyState::Enabled | KeyState::Disabled | KeyState::PendingDeletion)
        ) {
            return Err(not_held(format!(
                "its key state is {}",
                state.as_ref().map_or("unknown", KeyState::as_str)
            )));
        }
        let tags = match self.tags(arn, Some(kid)).await {
            Ok(tags) => tags,
            Err(KmsError::AccessDenied { code, message, .. }) => {
                return Err(not_held(format!(
                    "warrant may not read its tags ({code}: {message})"
                )));
            }
            Err(err) => return Err(err),
        };
        if let Some(reason) = tags_mismatch(&tags, self.uri().name(), kid, purpose) {
            return Err(not_held(reason));
        }
        if state == Some(KeyState::Enabled) {
            match self.public_key(arn, Some(kid)).await {
                Ok(found) if &found == public => {}
                Ok(found) => {
                    return Err(not_held(format!(
                        "its public key is key {}, not the recorded one",
                        found.kid()
                    )));
                }
                // Disabled since it was described: its kid tag stands for its public key.
                Err(KmsError::KeyState { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        if state == Some(KeyState::PendingDeletion) {
            tracing::warn!(%kid, %arn, deletion = ?meta.deletion_date(), "a key the store lists is scheduled for deletion in KMS: once deleted, the store is refused; cancel the deletion (aws kms cancel-key-deletion) if the key must go on verifying");
        }
        Ok(())
    }

    /// Disposes of key `kid` at `arn` (see the module's doc), only if its tags prove it is
    /// this store's key `kid`, kept for `purpose`.
    pub(crate) async fn dispose(
        &self,
        arn: &str,
        kid: &str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> Result<Disposed, KmsError> {
        let meta = match self.describe(arn, Some(kid)).await {
            Ok(meta) => meta,
            Err(KmsError::NotFound { .. }) => return Ok(Disposed::Gone),
            Err(KmsError::AccessDenied { code, message, .. }) => {
                return Ok(Disposed::NotTheKey(format!(
                    "{arn}: warrant may not describe it ({code}: {message})"
                )));
            }
            Err(err) => return Err(err),
        };
        if meta.arn() != Some(arn) {
            return Ok(Disposed::NotTheKey(format!(
                "{arn}: KMS describes it as {}",
                meta.arn().unwrap_or("no ARN")
            )));
        }
        let tags = match self.tags(arn, Some(kid)).await {
            Ok(tags) => tags,
            Err(KmsError::AccessDenied { code, message, .. }) => {
                return Ok(Disposed::NotTheKey(format!(
                    "{arn}: warrant may not read its tags ({code}: {message})"
                )));
            }
            Err(err) => return Err(err),
        };
        if let Some(reason) = tags_mismatch(&tags, self.uri().name(), kid, purpose) {
            return Ok(Disposed::NotTheKey(format!("{arn}: {reason}")));
        }
        if disposal == Disposal::Forget {
            // Watched until KMS deletes it, in case it is (or becomes) enabled (`revoked.rs`).
            self.revoked_keys().insert(arn, kid);
        }
        let client = self.client().clone();
        match meta.key_state() {
            Some(KeyState::PendingDeletion | KeyState::PendingReplicaDeletion) => {
                return Ok(Disposed::Gone);
            }
            Some(KeyState::Enabled) => {
                self.call("disable_key", Some(arn), Some(kid), || {
                    client.disable_key().key_id(key_id(arn)).send()
                })
                .await?;
                if disposal == Disposal::Retire {
                    return Ok(Disposed::Destroyed);
                }
            }
            _ if disposal == Disposal::Retire => return Ok(Disposed::Gone),
            _ => {}
        }
        let scheduled = self
            .call("schedule_key_deletion", Some(arn), Some(kid), || {
                client
                    .schedule_key_deletion()
                    .key_id(key_id(arn))
                    .pending_window_in_days(PENDING_WINDOW_DAYS)
                    .send()
            })
            .await?;
        tracing::info!(%kid, %arn, deletion = ?scheduled.deletion_date(), "key disabled and scheduled for deletion in KMS: until that date an operator can still cancel the deletion (aws kms cancel-key-deletion)");
        Ok(Disposed::Destroyed)
    }

    /// Checks that the key at `arn` can sign as the recorded `public`: enabled, suitable, and
    /// holding that public key.
    pub(crate) async fn check_signing(
        &self,
        arn: &str,
        public: &VerifyingKey,
    ) -> Result<(), KmsError> {
        let kid = public.kid();
        let meta = self.describe(arn, Some(kid)).await?;
        if let Some(problem) = unsuitable(&meta, public) {
            return Err(KmsError::Unsuitable {
                key: arn.to_owned(),
                problem,
            });
        }
        match meta.key_state() {
            Some(KeyState::Enabled) => {}
            state => {
                return Err(KmsError::KeyState {
                    key: arn.to_owned(),
                    kid: Some(kid.to_owned()),
                    state: state.map_or("unknown", KeyState::as_str).to_owned(),
                    advice: crate::error::DISABLED_ADVICE,
                });
            }
        }
        let found = self.public_key(arn, Some(kid)).await?;
        if &found != public {
            return Err(KmsError::Unsuitable {
                key: arn.to_owned(),
                problem: format!(
                    "its public key is key {}, not the recorded {kid}",
                    found.kid()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warrant_token::{KeyType, SigningKey};

    const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";

    #[test]
    fn only_kms_key_arns_of_the_region_are_locators() {
        assert_eq!(key_arn(ARN, "us-east-1").unwrap(), ARN);
        let mrk = "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/mrk-1234abcd";
        assert!(key_arn(mrk, "us-gov-west-1").is_ok());
        for (locator, why) in [
            (
                "pkcs11:token=warrant;id=%01;type=private",
                "is not a KMS key ARN",
            ),
            (
                "arn:aws:kms:us-east-1:111122223333:alias/warrant",
                "is not a KMS key ARN",
            ),
            (
                "arn:aws:s3:us-east-1:111122223333:key/x",
                "is not a KMS key ARN",
            ),
            ("arn:aws:kms:us-east-1:1111:key/x", "is not a KMS key ARN"),
            (
                "arn:aws:kms:eu-west-1:111122223333:key/x",
                "names a key in eu-west-1",
            ),
        ] {
            let err = key_arn(locator, "us-east-1").unwrap_err().to_string();
            assert!(err.contains(why), "{locator}: {err}");
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> Vec<Tag> {
        pairs.iter().map(|(k, v)| tag(k, v).unwrap()).collect()
    }

    #[test]
    fn the_tags_must_name_the_store_and_the_kid() {
        let ok = tags(&[(STORE_TAG, "prod"), (KID_TAG, "KID"), ("team", "x")]);
        assert_eq!(tags_mismatch(&ok, "prod", "KID", KeyPurpose::Tokens), None);
        for (tags, why) in [
            (tags(&[(KID_TAG, "KID")]), "no warrant.dev/store tag"),
            (
                tags(&[(STORE_TAG, "staging"), (KID_TAG, "KID")]),
                "another warrant key set",
            ),
            (tags(&[(STORE_TAG, "prod")]), "never finished"),
            (
                tags(&[(STORE_TAG, "prod"), (KID_TAG, "OTHER")]),
                "it is another key",
            ),
        ] {
            let reason = tags_mismatch(&tags, "prod", "KID", KeyPurpose::Tokens).unwrap();
            assert!(reason.contains(why), "{reason}");
        }
    }

    #[test]
    fn the_purpose_tag_must_be_the_key_sets() {
        let ca = KeyPurpose::PodCertificateCa;
        let token_key = tags(&[(STORE_TAG, "prod"), (KID_TAG, "KID")]);
        let ca_key = tags(&[
            (STORE_TAG, "prod"),
            (KID_TAG, "KID"),
            (PURPOSE_TAG, "pod-certificate-ca"),
        ]);
        assert_eq!(tags_mismatch(&ca_key, "prod", "KID", ca), None);
        let reason = tags_mismatch(&ca_key, "prod", "KID", KeyPurpose::Tokens).unwrap();
        assert!(
            reason.contains(
                "one of the pod certificate CA keys, not of the service account token keys"
            ),
            "{reason}"
        );
        let reason = tags_mismatch(&token_key, "prod", "KID", ca).unwrap();
        assert!(
            reason.contains(
                "one of the service account token keys, not of the pod certificate CA keys"
            ),
            "{reason}"
        );
        let odd = tags(&[(STORE_TAG, "prod"), (KID_TAG, "KID"), (PURPOSE_TAG, "x")]);
        assert!(tags_mismatch(&odd, "prod", "KID", KeyPurpose::Tokens).is_some());
        assert!(tags_mismatch(&odd, "prod", "KID", ca).is_some());
    }

    #[test]
    fn usage_spec_and_algorithm_must_fit_the_recorded_key() {
        let p256 = SigningKey::generate(KeyType::P256).unwrap();
        let meta = |usage, spec| {
            KeyMetadata::builder()
                .key_id("k")
                .key_usage(usage)
                .key_spec(spec)
                .key_manager(KeyManagerType::Customer)
                .build()
                .unwrap()
        };
        assert_eq!(
            unsuitable(
                &meta(KeyUsageType::SignVerify, KeySpec::EccNistP256),
                p256.verifying_key()
            ),
            None
        );
        let wrong_usage = unsuitable(
            &meta(KeyUsageType::EncryptDecrypt, KeySpec::EccNistP256),
            p256.verifying_key(),
        )
        .unwrap();
        assert!(wrong_usage.contains("ENCRYPT_DECRYPT"), "{wrong_usage}");
        let wrong_spec = unsuitable(
            &meta(KeyUsageType::SignVerify, KeySpec::EccNistP384),
            p256.verifying_key(),
        )
        .unwrap();
        assert!(
            wrong_spec.contains("ECC_NIST_P384") && wrong_spec.contains("ECC_NIST_P256"),
            "{wrong_spec}"
        );
        let rsa = SigningKey::generate(KeyType::Rsa3072).unwrap();
        assert_eq!(key_spec_of(rsa.verifying_key()), Some(KeySpec::Rsa3072));
    }
}
