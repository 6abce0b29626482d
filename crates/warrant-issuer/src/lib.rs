//! warrant's issuer core: what the HTTPS API (warrant-server) and the signer socket
//! (warrant-signer) share, so the two front ends are siblings over one issuer.
//!
//! - [`Settings`]: the issuers, the API audiences, the JWKS URL and the expiration policy,
//!   validated once with kube-apiserver's rules.
//! - [`Published`]: the keys in force and what is derived from them (the verifier, the JWKS
//!   and the discovery document with their ETags and cache lifetimes, the signature cache).
//! - [`Issuer`]: those two, the clock and the auditor behind one cheap handle, and signing:
//!   both front ends sign through [`Issuer::sign_token`] or [`Issuer::sign_detached`], with the
//!   key in force at the issuer's clock, so where a key lives is decided here once.
//! - [`SpiffeRoots`]: the SPIFFE trust bundle, the JWKS's keys beside the pod certificate CA's
//!   roots, for the server's endpoint and the publish targets alike.

mod published;
mod settings;
pub mod signatures;
mod spiffe;
mod x5c;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use arc_swap::ArcSwap;
use jiff::Timestamp;
use warrant_audit::Auditor;
use warrant_clock::Clock;
use warrant_keys::{KeySet, SigningStopped};
use warrant_token::{Claims, DetachedSignature, KeyError, SigningKey};

pub use published::{DOCUMENT_MAX_AGE_SECONDS, DOCUMENT_MIN_MAX_AGE_SECONDS, Published};
pub use settings::{
    DEFAULT_SIGNATURE_CACHE_ENTRIES, Settings, SettingsError, first_issuer, max_expiration_cap,
    url_path, validate_issuers, validate_max_expiration,
};
pub use signatures::Lookup;
pub use spiffe::{SPIFFE_REFRESH_HINT_SECONDS, SpiffeRoots};

/// The issuer both front ends serve. Cheap to clone.
#[derive(Clone)]
pub struct Issuer {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    published: ArcSwap<Published>,
    clock: Clock,
    audit: Auditor,
    /// When the published keys last changed (in whole seconds since the epoch).
    keys_changed_at: AtomicI64,
    /// [`Settings::issuer_path`], worked out once.
    issuer_path: String,
}

/// A token signed by the issuer, and the kid of the key that signed it.
#[derive(Debug)]
pub struct SignedToken {
    /// The compact JWS.
    pub token: String,
    /// The signing key's kid.
    pub kid: String,
}

/// A signature over claims someone else encoded, and the kid of the key that made it.
#[derive(Debug)]
pub struct SignedClaims {
    /// The header and signature, both encoded.
    pub signature: DetachedSignature,
    /// The signing key's kid.
    pub kid: String,
}

/// Why the issuer could not sign.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The key in force is held elsewhere (an HSM) that cannot be reached now: a later attempt
    /// may succeed (TokenRequest answers 503, Sign `UNAVAILABLE`).
    #[error("the signing key {kid} is unavailable: {source}")]
    Unavailable {
        /// The key's kid.
        kid: String,
        /// What its holder said.
        #[source]
        source: KeyError,
    },
    /// The key in force refused (a key that cannot sign, a failing backend).
    #[error("the signing key {kid} failed to sign: {source}")]
    Key {
        /// The key's kid.
        kid: String,
        /// What the key said.
        #[source]
        source: KeyError,
    },
    /// The keys are past their signing deadline ([`KeySet::signing_deadline`]): the shared key
    /// store has not answered for so long that its writer may have retired the key in force.
    /// A later attempt may succeed, once the store answers (TokenRequest answers 503, Sign
    /// `UNAVAILABLE`).
    #[error(
        "the key store has not answered since before {deadline}, when its writer may have retired the signing key {kid}: no signature until the store answers again"
    )]
    Withheld {
        /// The key's kid.
        kid: String,
        /// The deadline that passed.
        deadline: Timestamp,
    },
    /// No key signs: the signing key was revoked while no key could be made to take over (its
    /// holder out of reach). A later attempt may succeed, once the key store's writer makes one
    /// (TokenRequest answers 503, Sign `UNAVAILABLE`).
    #[error(transparent)]
    Stopped(SigningStopped),
}

impl SignError {
    /// True if a later attempt may succeed: the key's holder or the key store cannot be reached
    /// now (a 503, `UNAVAILABLE`), rather than the key failing (a 500, `INTERNAL`).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            SignError::Unavailable { .. } | SignError::Withheld { .. } | SignError::Stopped(_)
        )
    }

    fn of(key: &SigningKey, source: KeyError) -> SignError {
        let kid = key.kid().to_owned();
        match &source {
            KeyError::Remote(remote) if remote.unavailable => {
                SignError::Unavailable { kid, source }
            }
            _ => SignError::Key { kid, source },
        }
    }
}

impl Issuer {
    /// An issuer for `settings`, publishing `keys` from now (by `clock`), auditing to `audit`
    /// ([`Auditor::disabled`] without an audit log).
    pub fn new(settings: Settings, keys: KeySet, clock: Clock, audit: Auditor) -> Issuer {
        let published = ArcSwap::from_pointee(Published::new(&settings, keys));
        let keys_changed_at = AtomicI64::new(clock.now().as_second());
        let issuer_path = settings.issuer_path();
        Issuer {
            inner: Arc::new(Inner {
                settings,
                published,
                clock,
                audit,
                keys_changed_at,
                issuer_path,
            }),
        }
    }

    /// Issuer settings.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The keys and documents in force. A caller loads this once and uses that snapshot
    /// throughout, so a key change never splits a request between two key sets.
    pub fn published(&self) -> Arc<Published> {
        self.inner.published.load_full()
    }

    /// Replaces the keys; documents are re-rendered once, here.
    pub fn set_keys(&self, keys: KeySet) {
        if !self.published().keys().same_keys(&keys) {
            self.inner
                .keys_changed_at
                .store(self.inner.clock.now().as_second(), Ordering::Relaxed);
        }
        let previous = self.published();
        self.inner.published.store(Arc::new(Published::after(
            &self.inner.settings,
            keys,
            Some(&previous),
        )));
    }

    /// With `--jwks-x5c`, makes the certificates of the published keys held in an HSM or KMS
    /// (which sign only asynchronously, so [`set_keys`](Self::set_keys) publishes them without
    /// one) and publishes the documents again with them. True if it published anything: the
    /// caller then hands the documents to the publish targets. A key whose holder cannot sign
    /// now stays without its certificate until the next key change asks again.
    pub async fn certify_held_keys(&self) -> bool {
        let missing = self.published().certificates_missing();
        if missing.is_empty() {
            return false;
        }
        let mut made = Vec::with_capacity(missing.len());
        for key in &missing {
            if let Some(der) = x5c::certificate_held(key).await {
                made.push((key.key.kid().to_owned(), der));
            }
        }
        if made.is_empty() {
            return false;
        }
        // The keys in force now, which a key change meanwhile may have replaced.
        let current = self.published();
        self.inner.published.store(Arc::new(
            current.with_certificates(&self.inner.settings, made),
        ));
        true
    }

    /// When the published keys last changed (or the issuer started): what an external signer
    /// reports as the time its key data was taken.
    pub fn keys_changed_at(&self) -> Timestamp {
        Timestamp::from_second(self.inner.keys_changed_at.load(Ordering::Relaxed))
            .unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// The path of the issuer's URL (`/tenant-a`, or empty): discovery is served below it too.
    pub fn issuer_path(&self) -> &str {
        &self.inner.issuer_path
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// Where audit events go.
    pub fn audit(&self) -> &Auditor {
        &self.inner.audit
    }

    /// `claims` signed into a compact JWS (header `{"alg","kid"}`, as kube-apiserver writes
    /// its own tokens) by `published`'s key in force at `now`: TokenRequest's signature. The
    /// caller passes the snapshot and time it checked the request against, so the token is
    /// signed by the key set it was checked with.
    ///
    /// Async because a key may sign elsewhere (an HSM, [`SigningKey::remote`]): the front
    /// ends await it and never block on it. An in-memory key signs at once.
    pub async fn sign_token(
        &self,
        published: &Published,
        now: Timestamp,
        claims: &Claims,
    ) -> Result<SignedToken, SignError> {
        let key = signing_key(published, now)?;
        let token = key
            .sign_async(claims)
            .await
            .map_err(|source| SignError::of(key, source))?;
        Ok(SignedToken {
            token,
            kid: key.kid().to_owned(),
        })
    }

    /// A signature over `encoded_claims` (the JWT's second segment, unpadded base64url) by
    /// `published`'s key in force at `now`, with the header `{"alg","kid","typ":"JWT"}`: what
    /// kube-apiserver's external-signer interface asks for. See [`Issuer::sign_token`].
    pub async fn sign_detached(
        &self,
        published: &Published,
        now: Timestamp,
        encoded_claims: &str,
    ) -> Result<SignedClaims, SignError> {
        let key = signing_key(published, now)?;
        let signature = key
            .sign_detached_async(encoded_claims)
            .await
            .map_err(|source| SignError::of(key, source))?;
        Ok(SignedClaims {
            signature,
            kid: key.kid().to_owned(),
        })
    }
}

/// The key that signs at `now`, unless none does or the keys are past their signing deadline.
fn signing_key(published: &Published, now: Timestamp) -> Result<&SigningKey, SignError> {
    let keys = published.keys();
    let key = keys.signing_at(now).map_err(SignError::Stopped)?;
    match keys.signing_deadline() {
        Some(deadline) if now >= deadline => Err(SignError::Withheld {
            kid: key.kid().to_owned(),
            deadline,
        }),
        _ => Ok(key),
    }
}

#[cfg(test)]
mod tests {
    use warrant_token::{
        Binding, ExpirationPolicy, KeyType, NewToken, ObjectRef, SigningKey, Verifier,
    };

    use super::*;

    fn issuer(keys: KeySet, clock: Clock) -> Issuer {
        let settings = Settings {
            issuers: vec!["https://issuer.test".into()],
            api_audiences: vec!["https://issuer.test".into()],
            jwks_uri: "https://issuer.test/openid/v1/jwks".into(),
            expiration: ExpirationPolicy::default(),
            signature_cache_entries: 0,
            jwks_x5c: false,
        };
        Issuer::new(settings, keys, clock, Auditor::disabled())
    }

    fn claims(now: Timestamp) -> Claims {
        Claims::new(NewToken {
            issuer: "https://issuer.test",
            namespace: "default",
            service_account: ObjectRef::new("builder", "uid-1"),
            audiences: vec!["https://issuer.test".to_owned()],
            binding: Binding::None,
            issued_at: now.as_second(),
            expires_at: now.as_second() + 600,
            warn_after: None,
            jti: "jti-1".into(),
        })
    }

    #[tokio::test]
    async fn both_front_ends_sign_with_the_key_in_force_at_the_time_given() {
        let old = SigningKey::generate(KeyType::P256).unwrap();
        let new = SigningKey::generate(KeyType::Rsa2048).unwrap();
        let change = Timestamp::from_second(1_000_000).unwrap();
        // `old` signs until `change`, then `new`; both verify throughout.
        let keys = KeySet::scheduled(
            old.clone(),
            vec![(change, new.clone())],
            vec![],
            Some(change),
        );
        let issuer = issuer(keys, Clock::manual(Timestamp::from_second(0).unwrap()));
        let published = issuer.published();
        let verifier = Verifier::new(
            vec!["https://issuer.test".into()],
            vec![],
            vec![old.verifying_key().clone(), new.verifying_key().clone()],
        );
        for (now, key) in [
            (change - jiff::SignedDuration::from_secs(1), &old),
            (change, &new),
        ] {
            let signed = issuer
                .sign_token(&published, now, &claims(now))
                .await
                .unwrap();
            assert_eq!(signed.kid, key.kid());
            assert_eq!(
                warrant_token::header_key_id(&signed.token).as_deref(),
                Some(key.kid())
            );
            verifier.verify_signature(&signed.token).unwrap();

            let payload = signed.token.split('.').nth(1).unwrap();
            let detached = issuer
                .sign_detached(&published, now, payload)
                .await
                .unwrap();
            assert_eq!(detached.kid, key.kid());
            let assembled = format!(
                "{}.{payload}.{}",
                detached.signature.header, detached.signature.signature
            );
            verifier.verify_signature(&assembled).unwrap();
        }
    }

    /// Past their signing deadline (a shared store cut off too long), keys sign nothing
    /// through either front end, saying why, as a failure a retry may overcome; they verify.
    #[tokio::test]
    async fn keys_past_their_signing_deadline_sign_nothing() {
        let key = SigningKey::generate(KeyType::P256).unwrap();
        let deadline = Timestamp::from_second(1_000_000).unwrap();
        let keys = KeySet::new(key.clone(), vec![]).with_signing_deadline(Some(deadline));
        let issuer = issuer(keys, Clock::manual(deadline));
        let published = issuer.published();
        let before = deadline - jiff::SignedDuration::from_secs(1);
        let signed = issuer
            .sign_token(&published, before, &claims(before))
            .await
            .unwrap();
        let payload = signed.token.split('.').nth(1).unwrap().to_owned();
        issuer
            .sign_detached(&published, before, &payload)
            .await
            .unwrap();

        let refused = issuer
            .sign_token(&published, deadline, &claims(deadline))
            .await
            .unwrap_err();
        assert!(refused.is_unavailable());
        assert_eq!(
            refused.to_string(),
            format!(
                "the key store has not answered since before {deadline}, when its writer may have retired the signing key {}: no signature until the store answers again",
                key.kid()
            )
        );
        let refused = issuer
            .sign_detached(&published, deadline, &payload)
            .await
            .unwrap_err();
        assert!(matches!(refused, SignError::Withheld { .. }), "{refused}");
        // Verification goes on.
        assert!(published.verify(&signed.token, &[], deadline).0.is_ok());
    }

    #[test]
    fn a_key_change_moves_the_time_the_key_data_was_taken() {
        let clock = Clock::manual(Timestamp::from_second(100).unwrap());
        let first = SigningKey::generate(KeyType::P256).unwrap();
        let issuer = issuer(KeySet::new(first.clone(), vec![]), clock.clone());
        assert_eq!(issuer.keys_changed_at().as_second(), 100);
        clock.set(Timestamp::from_second(200).unwrap());
        // The same keys again: not a change.
        issuer.set_keys(KeySet::new(first, vec![]));
        assert_eq!(issuer.keys_changed_at().as_second(), 100);
        let second = SigningKey::generate(KeyType::P256).unwrap();
        issuer.set_keys(KeySet::new(second.clone(), vec![]));
        assert_eq!(issuer.keys_changed_at().as_second(), 200);
        assert_eq!(
            issuer
                .published()
                .keys()
                .signing_at(clock.now())
                .unwrap()
                .kid(),
            second.kid()
        );
    }
}

/// Signing with a key held elsewhere, through a stand-in [`warrant_token::RemoteKey`] that signs
/// with an in-memory key and can be switched off like an HSM that went away.
#[cfg(test)]
mod remote_tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use warrant_token::{
        Binding, ExpirationPolicy, KeyType, NewToken, ObjectRef, RemoteKey, RemoteSignError,
        RemoteSignature, Verifier,
    };

    use super::*;

    /// Signs by re-signing a compact JWS it assembles itself with a key in memory, so the
    /// signature is a real one of `key`.
    struct StandIn {
        key: SigningKey,
        present: AtomicBool,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("token \"test\" is not present")]
    struct Gone;

    impl RemoteKey for StandIn {
        fn sign(&self, signing_input: Vec<u8>) -> RemoteSignature<'_> {
            Box::pin(async move {
                if !self.present.load(Ordering::Relaxed) {
                    return Err(RemoteSignError {
                        unavailable: true,
                        source: Arc::new(Gone),
                    });
                }
                // The stand-in's "device": sign the same input with the in-memory key.
                let (encoded_header, encoded_claims) = std::str::from_utf8(&signing_input)
                    .unwrap()
                    .split_once('.')
                    .unwrap();
                let detached = self.key.sign_detached(encoded_claims).unwrap();
                // The in-memory key signs its own `typ: JWT` header; the stand-in signs only
                // inputs with that header, which is what sign_detached_async hands it.
                assert_eq!(detached.header, encoded_header);
                Ok(base64::Engine::decode(
                    &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                    detached.signature,
                )
                .unwrap())
            })
        }

        fn describe(&self) -> String {
            "a stand-in HSM".into()
        }

        fn locator(&self) -> String {
            "stand-in:key".into()
        }

        fn unavailable(&self) -> Option<String> {
            (!self.present.load(Ordering::Relaxed)).then(|| "token \"test\" is not present".into())
        }
    }

    #[tokio::test]
    async fn a_key_held_elsewhere_signs_through_the_issuer_and_its_absence_is_unavailable() {
        let memory = SigningKey::generate(KeyType::P256).unwrap();
        let stand_in = Arc::new(StandIn {
            key: memory.clone(),
            present: AtomicBool::new(true),
        });
        let remote = SigningKey::remote(memory.verifying_key().clone(), stand_in.clone());
        assert_eq!(remote.kid(), memory.kid());
        // Nothing of it can be written out, or signed without awaiting.
        assert!(matches!(
            remote.to_pkcs8_pem(),
            Err(KeyError::HeldElsewhere(..))
        ));
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let issuer = Issuer::new(
            Settings {
                issuers: vec!["https://issuer.test".into()],
                api_audiences: vec!["https://issuer.test".into()],
                jwks_uri: "https://issuer.test/openid/v1/jwks".into(),
                expiration: ExpirationPolicy::default(),
                signature_cache_entries: 0,
                jwks_x5c: false,
            },
            KeySet::new(remote.clone(), vec![]),
            Clock::manual(now),
            Auditor::disabled(),
        );
        let published = issuer.published();
        let encoded = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            Claims::new(NewToken {
                issuer: "https://issuer.test",
                namespace: "default",
                service_account: ObjectRef::new("builder", "uid-1"),
                audiences: vec!["https://issuer.test".to_owned()],
                binding: Binding::None,
                issued_at: now.as_second(),
                expires_at: now.as_second() + 600,
                warn_after: None,
                jti: "jti-1".into(),
            })
            .to_json(),
        );
        let signed = issuer
            .sign_detached(&published, now, &encoded)
            .await
            .unwrap();
        assert_eq!(signed.kid, memory.kid());
        let token = format!(
            "{}.{encoded}.{}",
            signed.signature.header, signed.signature.signature
        );
        Verifier::new(
            vec!["https://issuer.test".into()],
            vec![],
            vec![memory.verifying_key().clone()],
        )
        .verify_signature(&token)
        .unwrap();

        stand_in.present.store(false, Ordering::Relaxed);
        let refused = issuer
            .sign_detached(&published, now, &encoded)
            .await
            .unwrap_err();
        assert!(
            matches!(refused, SignError::Unavailable { .. }),
            "{refused}"
        );
        assert!(refused.to_string().contains("is not present"), "{refused}");
        assert_eq!(
            published
                .keys()
                .signing_at(now)
                .unwrap()
                .remote_key()
                .unwrap()
                .unavailable()
                .as_deref(),
            Some("token \"test\" is not present")
        );
    }
}
