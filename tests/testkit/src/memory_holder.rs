//! A [`KeyHolder`] in memory: the holder the rotation scenario runs against without a device or
//! a cloud. It generates keys whose private halves it keeps and signs with (never handing them
//! out), vouches for the keys it generated until they are forgotten, and disposes of them as a
//! token does: a retired key's private half goes, its proof stays.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use warrant_keys::{Disposal, Disposed, HolderAdvice, HolderFuture, KeyHolder, KeyPurpose};
use warrant_token::{
    Algorithm, KeyError, KeyType, RemoteKey, RemoteSignError, RemoteSignature, SigningKey,
    VerifyingKey,
};

use crate::rotation::{HolderUnderTest, InHolder};

#[derive(Default)]
struct Keys {
    /// The private halves held (PKCS#8 DER, with their algorithm), by kid.
    private: BTreeMap<String, (Algorithm, Vec<u8>)>,
    /// The kids vouched for, with what each was made for: generated and not forgotten.
    vouched: BTreeMap<String, KeyPurpose>,
}

/// A key holder in memory (see the module's documentation).
#[derive(Clone, Default)]
pub struct MemoryHolder {
    keys: Arc<Mutex<Keys>>,
}

impl MemoryHolder {
    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn sign_error(message: String) -> RemoteSignError {
    RemoteSignError {
        unavailable: false,
        source: Arc::new(std::io::Error::other(message)),
    }
}

fn refused(message: String) -> KeyError {
    KeyError::Remote(sign_error(message))
}

/// Signs `input` as a JWS of `algorithm` with the PKCS#8 key `der`, with aws-lc.
fn sign(algorithm: Algorithm, der: &[u8], input: &[u8]) -> Result<Vec<u8>, RemoteSignError> {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature as sig;
    fn failed<E>(_: E) -> RemoteSignError {
        sign_error("memory holder: aws-lc did not sign".into())
    }
    let ecdsa = |alg: &'static sig::EcdsaSigningAlgorithm| {
        let pair = sig::EcdsaKeyPair::from_pkcs8(alg, der).map_err(failed)?;
        let signature = pair.sign(&SystemRandom::new(), input).map_err(failed)?;
        Ok(signature.as_ref().to_vec())
    };
    match algorithm {
        Algorithm::ES256 => ecdsa(&sig::ECDSA_P256_SHA256_FIXED_SIGNING),
        Algorithm::ES384 => ecdsa(&sig::ECDSA_P384_SHA384_FIXED_SIGNING),
        Algorithm::ES512 => ecdsa(&sig::ECDSA_P521_SHA512_FIXED_SIGNING),
        Algorithm::RS256 => {
            let pair = sig::RsaKeyPair::from_pkcs8(der).map_err(failed)?;
            let mut signature = vec![0; pair.public_modulus_len()];
            pair.sign(
                &sig::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                input,
                &mut signature,
            )
            .map_err(failed)?;
            Ok(signature)
        }
    }
}

/// The DER inside a PEM block.
fn pem_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("warrant-token writes valid PEM")
}

/// The holder's handle on one key.
struct MemoryKey {
    kid: String,
    keys: Arc<Mutex<Keys>>,
}

impl RemoteKey for MemoryKey {
    fn sign(&self, input: Vec<u8>) -> RemoteSignature<'_> {
        let key = self
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .private
            .get(&self.kid)
            .cloned();
        Box::pin(async move {
            let (algorithm, der) = key.ok_or_else(|| {
                sign_error(format!(
                    "memory holder: key {} has no private half",
                    self.kid
                ))
            })?;
            sign(algorithm, &der, &input)
        })
    }
    fn describe(&self) -> String {
        format!("memory holder, key {}", self.kid)
    }
    fn locator(&self) -> String {
        format!("memory:{}", self.kid)
    }
    fn unavailable(&self) -> Option<String> {
        None
    }
}

impl MemoryHolder {
    fn handle(&self, kid: &str, public: VerifyingKey) -> SigningKey {
        SigningKey::remote(
            public,
            Arc::new(MemoryKey {
                kid: kid.to_owned(),
                keys: self.keys.clone(),
            }),
        )
    }
}

impl MemoryHolder {
    fn generate_now(&self, key_type: KeyType, purpose: KeyPurpose) -> Result<SigningKey, KeyError> {
        let key = SigningKey::generate(key_type)?;
        let kid = key.kid().to_owned();
        let public = key.verifying_key().clone();
        let der = pem_der(key.to_pkcs8_pem()?.as_str());
        let mut keys = self.keys();
        keys.private.insert(kid.clone(), (key.algorithm(), der));
        keys.vouched.insert(kid.clone(), purpose);
        drop(keys);
        Ok(self.handle(&kid, public))
    }

    fn vouch_now(
        &self,
        locator: &str,
        public: &VerifyingKey,
        purpose: KeyPurpose,
    ) -> Result<(), KeyError> {
        let kid = locator.strip_prefix("memory:").unwrap_or_default();
        match self.keys().vouched.get(kid) {
            Some(made_for) if kid == public.kid() && *made_for == purpose => Ok(()),
            Some(made_for) if kid == public.kid() => Err(refused(format!(
                "the memory holder keeps the key at {locator} for {made_for}, not {purpose}"
            ))),
            _ => Err(refused(format!(
                "the memory holder holds no key at {locator}"
            ))),
        }
    }

    fn dispose_now(
        &self,
        locator: &str,
        kid: &str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> Result<Disposed, KeyError> {
        if locator.strip_prefix("memory:") != Some(kid) {
            return Ok(Disposed::NotTheKey(format!("{locator} is not key {kid}")));
        }
        let mut keys = self.keys();
        if let Some(made_for) = keys.vouched.get(kid)
            && *made_for != purpose
        {
            return Ok(Disposed::NotTheKey(format!(
                "key {kid} is kept for {made_for}, not {purpose}"
            )));
        }
        let private = keys.private.remove(kid).is_some();
        let proof = disposal == Disposal::Forget && keys.vouched.remove(kid).is_some();
        Ok(if private || proof {
            Disposed::Destroyed
        } else {
            Disposed::Gone
        })
    }
}

/// What the memory holder advises: nothing a test reads.
static ADVICE: HolderAdvice = HolderAdvice {
    flag: "--memory-holder",
    name: "the memory holder",
    short: "the memory holder",
    restore: "Restore it",
    docs: "nowhere",
    import: None,
    retries: "nothing retries",
};

impl KeyHolder for MemoryHolder {
    fn describe(&self) -> String {
        "memory holder".into()
    }

    fn advice(&self) -> &'static HolderAdvice {
        &ADVICE
    }

    fn generate(
        &self,
        key_type: KeyType,
        purpose: KeyPurpose,
    ) -> HolderFuture<'_, Result<SigningKey, KeyError>> {
        Box::pin(std::future::ready(self.generate_now(key_type, purpose)))
    }

    fn open(&self, locator: &str, public: VerifyingKey) -> Result<SigningKey, KeyError> {
        let kid = locator
            .strip_prefix("memory:")
            .ok_or_else(|| refused(format!("{locator} is not a memory holder's locator")))?;
        Ok(self.handle(kid, public))
    }

    fn vouch<'a>(
        &'a self,
        locator: &'a str,
        public: &'a VerifyingKey,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<(), KeyError>> {
        Box::pin(std::future::ready(self.vouch_now(locator, public, purpose)))
    }

    fn dispose<'a>(
        &'a self,
        locator: &'a str,
        kid: &'a str,
        disposal: Disposal,
        purpose: KeyPurpose,
    ) -> HolderFuture<'a, Result<Disposed, KeyError>> {
        Box::pin(std::future::ready(
            self.dispose_now(locator, kid, disposal, purpose),
        ))
    }
}

impl HolderUnderTest for MemoryHolder {
    fn holder(&self) -> Arc<dyn KeyHolder> {
        Arc::new(self.clone())
    }

    fn state(&self, key: &SigningKey) -> InHolder {
        let keys = self.keys();
        if keys.private.contains_key(key.kid()) {
            InHolder::Signs
        } else if keys.vouched.contains_key(key.kid()) {
            InHolder::Retired
        } else {
            InHolder::Forgotten
        }
    }
}
