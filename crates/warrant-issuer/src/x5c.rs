//! The token keys as certificates, for the JWKS's `x5c` and `x5t#S256` (`--jwks-x5c`): strict
//! OIDC relying parties that read a key from its certificate (spiffe/spire#6140) find one.
//!
//! Each managed key in force gets a self-signed certificate made from its record
//! (`warrant_podcert::RootTemplate::signing_key`: subject `CN=warrant token key <kid>`, valid
//! from the key's publication for [`CERTIFICATE_VALIDITY_SECONDS`], CA=false, digitalSignature),
//! signed by the key itself, so it is published, rotated and removed with the key. Made once per
//! key and kept while the key is: an RSA key's certificate is the same bytes in every replica
//! (PKCS#1 v1.5 signatures are deterministic), an ECDSA key's differs between replicas in its
//! signature only. Keys held in an HSM or KMS sign only asynchronously: their certificates are
//! made after their key set is published ([`crate::Issuer::certify_held_keys`]), and the JWKS is
//! published again with them. Static key files have no publication time and get none.
//!
//! Costs: one signature per new key (an RSA-2048 signature is about a millisecond), at key
//! changes only; the JWKS grows by about 1 KB per RSA key.

use std::sync::Arc;

use jiff::SignedDuration;
use warrant_keys::{KeySet, PublishedKey};
use warrant_podcert::{CaAlgorithm, RootTemplate, ecdsa_signature_to_der};
use warrant_token::Algorithm;

/// How long a token key's certificate is valid from the key's publication: ten years. What
/// ends trust in a key is its leaving the JWKS; the certificate only carries it.
pub(crate) const CERTIFICATE_VALIDITY_SECONDS: i64 = 10 * 365 * 24 * 3600;

/// The certificates of the keys in force, by kid.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyCertificates {
    by_kid: Vec<(String, Arc<Vec<u8>>)>,
}

impl KeyCertificates {
    /// The certificates of `keys`' managed keys: those of `previous` kept, the others made.
    pub(crate) fn make(keys: &KeySet, previous: Option<&KeyCertificates>) -> KeyCertificates {
        let by_kid = keys
            .published_keys()
            .iter()
            .filter_map(|key| {
                let kid = key.key.kid();
                let kept = previous.and_then(|p| p.get_shared(kid));
                let der = match kept {
                    Some(der) => der,
                    None => Arc::new(certificate(key)?),
                };
                Some((kid.to_owned(), der))
            })
            .collect();
        KeyCertificates { by_kid }
    }

    /// The certificate of key `kid`, DER.
    pub(crate) fn get(&self, kid: &str) -> Option<&[u8]> {
        self.by_kid
            .iter()
            .find(|(k, _)| k == kid)
            .map(|(_, der)| der.as_slice())
    }

    /// The managed keys of `keys` that have no certificate here: keys held in an HSM or KMS,
    /// whose certificates [`certificate_held`] makes.
    pub(crate) fn missing(&self, keys: &KeySet) -> Vec<PublishedKey> {
        keys.published_keys()
            .iter()
            .filter(|key| self.get(key.key.kid()).is_none())
            .cloned()
            .collect()
    }

    /// These certificates and `made`.
    pub(crate) fn with(&self, made: Vec<(String, Vec<u8>)>) -> KeyCertificates {
        let mut by_kid = self.by_kid.clone();
        by_kid.extend(made.into_iter().map(|(kid, der)| (kid, Arc::new(der))));
        KeyCertificates { by_kid }
    }

    fn get_shared(&self, kid: &str) -> Option<Arc<Vec<u8>>> {
        self.by_kid
            .iter()
            .find(|(k, _)| k == kid)
            .map(|(_, der)| der.clone())
    }
}

/// `key`'s self-signed certificate, or `None` for a key that cannot sign at once (held
/// elsewhere: see [`certificate_held`]) or an algorithm X.509 signing does not take here (ES512).
fn certificate(published: &PublishedKey) -> Option<Vec<u8>> {
    let (algorithm, template) = template(published)?;
    let raw = published.key.sign_message_now(template.tbs()).ok()?;
    finish(algorithm, &template, &raw)
}

/// [`certificate`] for a key held in an HSM or KMS, whose signature is awaited.
pub(crate) async fn certificate_held(published: &PublishedKey) -> Option<Vec<u8>> {
    let (algorithm, template) = template(published)?;
    let raw = published
        .key
        .sign_message(template.tbs().to_vec())
        .await
        .ok()?;
    finish(algorithm, &template, &raw)
}

/// The certificate's unsigned part, and the algorithm it is signed with.
fn template(published: &PublishedKey) -> Option<(CaAlgorithm, RootTemplate)> {
    let key = &published.key;
    let algorithm = match key.algorithm() {
        Algorithm::RS256 => CaAlgorithm::RsaPkcs1Sha256,
        Algorithm::ES256 => CaAlgorithm::EcdsaP256Sha256,
        Algorithm::ES384 => CaAlgorithm::EcdsaP384Sha384,
        Algorithm::ES512 => return None,
    };
    let not_before = published.published_at;
    let not_after = not_before
        .saturating_add(SignedDuration::from_secs(CERTIFICATE_VALIDITY_SECONDS))
        .ok()?;
    let template = RootTemplate::signing_key(
        algorithm,
        key.verifying_key().spki_der(),
        &format!("warrant token key {}", key.kid()),
        not_before,
        not_after,
    )
    .ok()?;
    Some((algorithm, template))
}

/// The certificate with the key's raw signature (ECDSA's DER-encoded first), checked.
fn finish(algorithm: CaAlgorithm, template: &RootTemplate, raw: &[u8]) -> Option<Vec<u8>> {
    let signature = match algorithm {
        CaAlgorithm::EcdsaP256Sha256 | CaAlgorithm::EcdsaP384Sha384 => ecdsa_signature_to_der(raw)?,
        CaAlgorithm::RsaPkcs1Sha256 | CaAlgorithm::Ed25519 => raw.to_vec(),
    };
    template.finish_der(&signature).ok()
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use warrant_keys::{ManagedKey, ManagedKeySet, RotationPolicy};
    use warrant_token::{ExpirationPolicy, KeyType, SigningKey};
    use x509_parser::prelude::{FromDer, X509Certificate};

    use crate::{Published, Settings};

    fn settings(jwks_x5c: bool) -> Settings {
        Settings {
            issuers: vec!["https://i".into()],
            api_audiences: vec!["https://i".into()],
            jwks_uri: "https://i/openid/v1/jwks".into(),
            expiration: ExpirationPolicy::default(),
            signature_cache_entries: 0,
            jwks_x5c,
        }
    }

    fn key_set(keys: &[(SigningKey, i64)]) -> warrant_keys::KeySet {
        let at = |s| Timestamp::from_second(s).unwrap();
        let managed = keys
            .iter()
            .map(|(key, from)| ManagedKey::new(key.clone(), at(*from), at(*from), 86_400))
            .collect();
        let policy = RotationPolicy {
            key_type: KeyType::Rsa2048,
            rotation_period_seconds: 7 * 86_400,
            publish_ahead_seconds: 86_400,
            max_token_seconds: 86_400,
        };
        ManagedKeySet::new(managed)
            .unwrap()
            .key_set_at(at(1_800_000_000), &policy)
            .unwrap()
    }

    fn jwks(published: &Published) -> serde_json::Value {
        serde_json::from_slice(published.jwks()).unwrap()
    }

    #[test]
    fn each_managed_key_is_published_with_its_own_certificate() {
        use base64::Engine as _;
        let rsa = SigningKey::generate(KeyType::Rsa2048).unwrap();
        let ec = SigningKey::generate(KeyType::P256).unwrap();
        let keys = key_set(&[(rsa.clone(), 1_799_990_000), (ec.clone(), 1_799_999_000)]);
        let with = Published::new(&settings(true), keys.clone());
        let document = jwks(&with);
        for (key, from) in [(&rsa, 1_799_990_000), (&ec, 1_799_999_000)] {
            let jwk = document["keys"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["kid"] == key.kid())
                .unwrap();
            let x5c = jwk["x5c"].as_array().unwrap();
            assert_eq!(x5c.len(), 1);
            let der = base64::engine::general_purpose::STANDARD
                .decode(x5c[0].as_str().unwrap())
                .unwrap();
            let thumbprint = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &der);
            assert_eq!(
                jwk["x5t#S256"],
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(thumbprint)
            );
            let (_, cert) = X509Certificate::from_der(&der).unwrap();
            // The certificate carries the JWK's key, is no CA, and starts with the key.
            assert_eq!(cert.public_key().raw, key.verifying_key().spki_der());
            assert!(!cert.is_ca());
            assert_eq!(cert.validity().not_before.timestamp(), from);
            assert_eq!(
                cert.subject().to_string(),
                format!("CN=warrant token key {}", key.kid())
            );
            // The JWK's own members are as without the certificate.
            let mut bare = jwk.clone();
            let bare = bare.as_object_mut().unwrap();
            bare.remove("x5c");
            bare.remove("x5t#S256");
            let plain: serde_json::Value =
                serde_json::from_str(key.verifying_key().jwk_json()).unwrap();
            assert_eq!(serde_json::Value::Object(bare.clone()), plain);
        }
        // Made once per key: the next key set keeps the same certificates (an ECDSA one would
        // otherwise change with each signature), and an RSA key's is the same bytes made anew.
        let next = Published::after(&settings(true), keys.clone(), Some(&with));
        assert_eq!(next.jwks(), with.jwks());
        let anew = Published::new(&settings(true), keys.clone());
        let rsa_of = |p: &Published| {
            jwks(p)["keys"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["kid"] == rsa.kid())
                .unwrap()["x5c"]
                .clone()
        };
        assert_eq!(rsa_of(&anew), rsa_of(&with));
        // Off by default: kube-apiserver's JWKS.
        let without = Published::new(&settings(false), keys);
        assert!(!String::from_utf8_lossy(without.jwks()).contains("x5c"));
    }
}
