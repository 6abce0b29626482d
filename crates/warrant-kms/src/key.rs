//! A key in KMS as warrant-token's [`RemoteKey`]: what the issuer core signs with.
//!
//! **Signing.** A JWS signing input (`header.payload`) goes to KMS's `Sign` as the message
//! itself (`MessageType RAW`, KMS hashes it) when it is at most KMS's limit of 4096 bytes, and
//! as its SHA-256/384/512 digest (`MessageType DIGEST`, hashed here with aws-lc) beyond it, as
//! KMS documents; either way the signature is the same. KMS returns ECDSA signatures in DER;
//! the JWS takes the fixed-width `r || s` (RFC 7518), converted here. Every signature is then
//! verified with the recorded public key before it is used: one altered on the way (a proxy,
//! a compromised endpoint) or made by another key fails the signature (`bad_signature`),
//! never reaches a token. The SDK is async: no thread is held while KMS answers.
//!
//! **State.** KMS says when a key cannot sign (`DisabledException`, `KMSInvalidStateException`
//! for a key pending deletion, `NotFoundException` for one deleted): the key remembers it, fails
//! later signatures at once naming the key and its state, and reports it to readiness; the
//! recovery task ([`crate::Kms::run_recovery`]) asks KMS about every key that signs every
//! 10 s, so a key disabled behind warrant's back is found without a request, and one enabled
//! again signs again.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use aws_lc_rs::digest;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{KeyState, MessageType, SigningAlgorithmSpec};
use warrant_token::der::{INTEGER, SEQUENCE, expect};
use warrant_token::{Algorithm, RemoteKey, RemoteSignError, RemoteSignature, VerifyingKey};

use warrant_keys::Health;

use crate::client::{Kms, Signer};
use crate::error::{DISABLED_ADVICE, KmsError};

/// The largest message KMS's `Sign` takes as `RAW`; longer inputs are sent as their digest.
pub const RAW_MESSAGE_LIMIT: usize = 4096;

/// What goes to KMS's `Sign` for one signing input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// `RAW` (KMS hashes) or `DIGEST` (hashed here).
    pub kind: MessageType,
    /// The input itself, or its digest.
    pub bytes: Vec<u8>,
}

impl Message {
    /// What to send for `input` signed with `algorithm`: the input as `RAW` up to
    /// [`RAW_MESSAGE_LIMIT`] bytes, its digest under the algorithm's hash as `DIGEST` beyond.
    pub fn for_input(algorithm: Algorithm, input: Vec<u8>) -> Message {
        if input.len() <= RAW_MESSAGE_LIMIT {
            return Message {
                kind: MessageType::Raw,
                bytes: input,
            };
        }
        let hash = match algorithm {
            Algorithm::RS256 | Algorithm::ES256 => &digest::SHA256,
            Algorithm::ES384 => &digest::SHA384,
            Algorithm::ES512 => &digest::SHA512,
        };
        Message {
            kind: MessageType::Digest,
            bytes: digest::digest(hash, &input).as_ref().to_vec(),
        }
    }
}

/// KMS's name for a JWS algorithm: PKCS#1 v1.5 with SHA-256 for RS256, ECDSA with the curve's
/// hash for the others.
pub fn signing_algorithm(algorithm: Algorithm) -> SigningAlgorithmSpec {
    match algorithm {
        Algorithm::RS256 => SigningAlgorithmSpec::RsassaPkcs1V15Sha256,
        Algorithm::ES256 => SigningAlgorithmSpec::EcdsaSha256,
        Algorithm::ES384 => SigningAlgorithmSpec::EcdsaSha384,
        Algorithm::ES512 => SigningAlgorithmSpec::EcdsaSha512,
    }
}

/// The byte length of one coordinate (and of `r` and `s`) on the algorithm's curve.
fn coordinate_len(algorithm: Algorithm) -> Option<usize> {
    match algorithm {
        Algorithm::ES256 => Some(32),
        Algorithm::ES384 => Some(48),
        Algorithm::ES512 => Some(66),
        Algorithm::RS256 => None,
    }
}

/// The JWS signature for what KMS returned: RSA's as it is (as long as the modulus), ECDSA's
/// DER `SEQUENCE { r, s }` as fixed-width `r || s`.
pub(crate) fn jws_signature(public: &VerifyingKey, signature: &[u8]) -> Result<Vec<u8>, String> {
    let Some(width) = coordinate_len(public.algorithm()) else {
        let modulus = rsa_modulus_len(public).ok_or("the RSA public key does not parse")?;
        if signature.len() != modulus {
            return Err(format!(
                "a {}-byte RSA signature for a {modulus}-byte modulus",
                signature.len()
            ));
        }
        return Ok(signature.to_vec());
    };
    let not_der = || "the ECDSA signature is not a DER SEQUENCE of two INTEGERs".to_owned();
    let outer = expect(signature, SEQUENCE).ok_or_else(not_der)?;
    if !outer.rest.is_empty() {
        return Err(not_der());
    }
    let r = expect(outer.contents, INTEGER).ok_or_else(not_der)?;
    let s = expect(r.rest, INTEGER).ok_or_else(not_der)?;
    if !s.rest.is_empty() {
        return Err(not_der());
    }
    let mut fixed = Vec::with_capacity(2 * width);
    for part in [r.contents, s.contents] {
        let skip = part.iter().take_while(|&&b| b == 0).count();
        let value = part.get(skip..).unwrap_or_default();
        if value.len() > width {
            return Err(format!(
                "an ECDSA signature component longer than {width} bytes"
            ));
        }
        fixed.resize(fixed.len() + width - value.len(), 0);
        fixed.extend_from_slice(value);
    }
    Ok(fixed)
}

/// The byte length of an RSA public key's modulus.
pub(crate) fn rsa_modulus_len(public: &VerifyingKey) -> Option<usize> {
    aws_lc_rs::rsa::PublicEncryptingKey::from_der(public.spki_der())
        .ok()
        .map(|key| key.key_size_bytes())
}

/// A key in KMS that the issuer signs with ([`warrant_token::SigningKey::remote`]): its ARN
/// and the public key the key store recorded (checked against KMS before the store is
/// believed: `ownership.rs`). Cheap to clone.
#[derive(Clone)]
pub struct KmsKey {
    shared: Arc<Shared>,
}

/// What clones of a key share, and what the recovery task checks.
pub(crate) struct Shared {
    kms: Kms,
    arn: String,
    public: VerifyingKey,
    /// Why KMS will not sign with the key now (it said so), or `None`.
    refused: Mutex<Option<KmsError>>,
    /// Whether the recovery task knows the key (it signed once).
    watched: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for KmsKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KmsKey")
            .field("kid", &self.shared.public.kid())
            .field("arn", &self.shared.arn)
            .finish()
    }
}

impl KmsKey {
    /// The key `arn` in `kms`, whose public key is `public`. Touches nothing in KMS.
    pub fn new(kms: Kms, arn: impl Into<String>, public: VerifyingKey) -> Self {
        KmsKey {
            shared: Arc::new(Shared {
                kms,
                arn: arn.into(),
                public,
                refused: Mutex::new(None),
                watched: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// The key's ARN (its locator in a key store).
    pub fn arn(&self) -> &str {
        &self.shared.arn
    }

    /// The public key.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.shared.public
    }

    /// Signs `signing_input` in KMS, returning the JWS signature.
    pub async fn sign(&self, signing_input: Vec<u8>) -> Result<Vec<u8>, KmsError> {
        let shared = &self.shared;
        if let Some(refused) = shared.refused() {
            shared.kms.metrics().observe("sign", refused.kind(), 0.0);
            return Err(refused);
        }
        let algorithm = shared.public.algorithm();
        let message = Message::for_input(algorithm, signing_input.clone());
        let blob = Blob::new(message.bytes);
        let client = shared.kms.client().clone();
        let signed = shared
            .kms
            .call_checked(
                "sign",
                Some(&shared.arn),
                Some(shared.public.kid()),
                || {
                    client
                        .sign()
                        .key_id(&shared.arn)
                        .message(blob.clone())
                        .message_type(message.kind.clone())
                        .signing_algorithm(signing_algorithm(algorithm))
                        .send()
                },
                |answer| self.checked(answer.signature, &signing_input),
            )
            .await;
        let signature = match signed {
            Ok(signature) => signature,
            Err(err) => {
                if matches!(err, KmsError::KeyState { .. } | KmsError::NotFound { .. }) {
                    shared.refuse(err.clone());
                }
                return Err(err);
            }
        };
        if !shared
            .watched
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            let signer: std::sync::Weak<Shared> = Arc::downgrade(&self.shared);
            shared.kms.watch_signer(signer);
        }
        Ok(signature)
    }

    /// The JWS signature for what KMS answered to `Sign` of `signing_input`, once it verifies
    /// with the recorded public key: a signature altered on the way (or made by another key)
    /// is refused, never used.
    fn checked(&self, signature: Option<Blob>, signing_input: &[u8]) -> Result<Vec<u8>, KmsError> {
        let shared = &self.shared;
        let signature = signature.ok_or_else(|| self.bad_answer("no signature".into()))?;
        let jws = jws_signature(&shared.public, signature.as_ref())
            .map_err(|what| self.bad_answer(what))?;
        if shared.public.verify(signing_input, &jws) {
            return Ok(jws);
        }
        let err = KmsError::BadSignature {
            kms: shared.kms.name().to_owned(),
            op: "sign",
            key: shared.arn.clone(),
            kid: shared.public.kid().to_owned(),
        };
        tracing::error!(kid = %shared.public.kid(), arn = %shared.arn, error = %err, "KMS's signature refused");
        Err(err)
    }

    fn bad_answer(&self, what: String) -> KmsError {
        KmsError::Answer {
            kms: self.shared.kms.name().to_owned(),
            op: "sign",
            what: format!("key {}: {what}", self.shared.arn),
        }
    }
}

impl Signer for Shared {
    fn check_state(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(self.state())
    }
}

impl Shared {
    fn refused(&self) -> Option<KmsError> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn refuse(&self, why: KmsError) {
        let mut refused = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if refused.is_none() {
            tracing::error!(kid = %self.public.kid(), arn = %self.arn, error = %why, "KMS refuses to sign with the key");
        }
        *refused = Some(why);
    }

    /// Asks KMS for the key's state and remembers whether it can sign.
    async fn state(&self) {
        let client = self.kms.client().clone();
        let described = self
            .kms
            .call(
                "describe_key",
                Some(&self.arn),
                Some(self.public.kid()),
                || client.describe_key().key_id(&self.arn).send(),
            )
            .await;
        let state = match described {
            Ok(answer) => answer.key_metadata.and_then(|m| m.key_state),
            Err(err @ KmsError::NotFound { .. }) => return self.refuse(err),
            Err(_) => return, // KMS's health says why, if it is KMS.
        };
        match state {
            Some(KeyState::Enabled) => {
                let was = self
                    .refused
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if was.is_some() {
                    tracing::info!(kid = %self.public.kid(), arn = %self.arn, "the key is enabled in KMS again: it signs again");
                }
            }
            Some(state) => self.refuse(KmsError::KeyState {
                key: self.arn.clone(),
                kid: Some(self.public.kid().to_owned()),
                state: state.as_str().to_owned(),
                advice: DISABLED_ADVICE,
            }),
            None => {}
        }
    }
}

impl RemoteKey for KmsKey {
    fn sign(&self, signing_input: Vec<u8>) -> RemoteSignature<'_> {
        Box::pin(async move {
            KmsKey::sign(self, signing_input)
                .await
                .map_err(remote_sign_error)
        })
    }

    fn describe(&self) -> String {
        format!("AWS KMS key {}", self.shared.arn)
    }

    fn locator(&self) -> String {
        self.shared.arn.clone()
    }

    fn unavailable(&self) -> Option<String> {
        if let Health::Unavailable { cause, .. } = self.shared.kms.health() {
            return Some(format!(
                "key {} ({}) cannot sign: {cause}",
                self.shared.public.kid(),
                self.shared.arn
            ));
        }
        self.shared.refused().map(|why| why.to_string())
    }
}

/// The error a [`RemoteKey`] reports for `err`: unavailable when KMS or the key may come back.
pub fn remote_sign_error(err: KmsError) -> RemoteSignError {
    RemoteSignError {
        unavailable: err.is_unavailable(),
        source: Arc::new(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warrant_token::{KeyType, SigningKey};

    #[test]
    fn raw_up_to_the_limit_and_the_digest_beyond_it() {
        let at_limit = vec![b'a'; RAW_MESSAGE_LIMIT];
        let message = Message::for_input(Algorithm::ES256, at_limit.clone());
        assert_eq!(message.kind, MessageType::Raw);
        assert_eq!(message.bytes, at_limit);

        let over = vec![b'a'; RAW_MESSAGE_LIMIT + 1];
        for (algorithm, hash, len) in [
            (Algorithm::RS256, &digest::SHA256, 32),
            (Algorithm::ES256, &digest::SHA256, 32),
            (Algorithm::ES384, &digest::SHA384, 48),
            (Algorithm::ES512, &digest::SHA512, 64),
        ] {
            let message = Message::for_input(algorithm, over.clone());
            assert_eq!(message.kind, MessageType::Digest, "{algorithm:?}");
            assert_eq!(message.bytes.len(), len);
            assert_eq!(message.bytes, digest::digest(hash, &over).as_ref());
        }
    }

    /// aws-lc's ASN.1 ECDSA signatures (what KMS returns) become JWS signatures that verify
    /// as such, for every curve, including components with leading zeros.
    #[test]
    fn der_ecdsa_signatures_become_fixed_width_ones() {
        use aws_lc_rs::rand::SystemRandom;
        use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair as _};
        for (asn1, fixed, width) in [
            (
                &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                &signature::ECDSA_P256_SHA256_FIXED,
                32,
            ),
            (
                &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
                &signature::ECDSA_P384_SHA384_FIXED,
                48,
            ),
            (
                &signature::ECDSA_P521_SHA512_ASN1_SIGNING,
                &signature::ECDSA_P521_SHA512_FIXED,
                66,
            ),
        ] {
            let pair = EcdsaKeyPair::generate(asn1).unwrap();
            let spki = aws_lc_rs::encoding::AsDer::as_der(pair.public_key()).unwrap();
            let public = VerifyingKey::from_spki_der(spki.as_ref()).unwrap();
            // Enough signatures that some r or s has a leading zero byte.
            for i in 0..64u32 {
                let message = format!("header.payload{i}");
                let der = pair.sign(&SystemRandom::new(), message.as_bytes()).unwrap();
                let jws = jws_signature(&public, der.as_ref()).unwrap();
                assert_eq!(jws.len(), 2 * width);
                signature::UnparsedPublicKey::new(fixed, pair.public_key().as_ref())
                    .verify(message.as_bytes(), &jws)
                    .unwrap();
            }
        }
    }

    #[test]
    fn malformed_signatures_are_refused() {
        let ec = SigningKey::generate(KeyType::P256).unwrap();
        let public = ec.verifying_key();
        for bad in [
            &[][..],
            &[0x30, 0x02, 0x02, 0x00][..],
            &[0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x00][..],
        ] {
            assert!(jws_signature(public, bad).is_err(), "{bad:?}");
        }
        let mut long = vec![0x30, 0x46, 0x02, 0x21, 0x01];
        long.extend([7u8; 32]);
        long.extend([0x02, 0x21, 0x01]);
        long.extend([7u8; 32]);
        assert!(jws_signature(public, &long).unwrap_err().contains("longer"));
        let rsa = SigningKey::generate(KeyType::Rsa2048).unwrap();
        assert_eq!(rsa_modulus_len(rsa.verifying_key()), Some(256));
        assert!(jws_signature(rsa.verifying_key(), &[1u8; 255]).is_err());
        assert_eq!(
            jws_signature(rsa.verifying_key(), &[1u8; 256])
                .unwrap()
                .len(),
            256
        );
    }
}
