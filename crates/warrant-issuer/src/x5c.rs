//! The token keys as certificates, for the JWKS's `x5c` and `x5t#S256` (`--jwks-x5c`): strict
//! OIDC relying parties that read a key from its certificate (spiffe/spire#6140) find one.
//!
//! Each managed key in force gets a self-signed certificate made from its record
//! (`warrant_podcert::RootTemplate::signing_key`: subject `CN=warrant token key <kid>`, valid
//! from the key's publication for [`CERTIFICATE_VALIDITY_SECONDS`], CA=false, digitalSignature),
//! signed by the key itself, so it is published, rotated and removed with the key. Made once per
//! key and kept while the key is: an RSA key's certificate is the same bytes in every replica
//! (PKCS#1 v1.5 signatures are deterministic), an ECDSA key's differs between replicas in its
//! signature only. Keys held in an HSM or KMS sign only asynchronously and get none (`serve`
//! refuses the flag with them); static key files have no publication time and get none either.
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

    fn get_shared(&self, kid: &str) -> Option<Arc<Vec<u8>>> {
        self.by_kid
            .iter()
            .find(|(k, _)| k == kid)
            .map(|(_, der)| der.clone())
    }
}

/// `key`'s self-signed certificate, or `None` for a key that cannot sign at once (held
/// elsewhere) or an algorithm X.509 signing does not take here (ES512).
fn certificate(published: &PublishedKey) -> Option<Vec<u8>> {
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
    let raw = key.sign_message_now(template.tbs()).ok()?;
    let signature = match algorithm {
        CaAlgorithm::EcdsaP256Sha256 | CaAlgorithm::EcdsaP384Sha384 => {
            ecdsa_signature_to_der(&raw)?
        }
        CaAlgorithm::RsaPkcs1Sha256 | CaAlgorithm::Ed25519 => raw,
    };
    template.finish_der(&signature).ok()
}
