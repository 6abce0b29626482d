//! The key material in force and everything derived from it: the verifier and the two
//! documents relying parties fetch, rendered once per key-set change, with their ETags.
//!
//! Caching: both documents carry `Cache-Control: public, max-age=N`. For static keys N is 3600,
//! kube-apiserver's value. For managed keys N is the time left until the next scheduled key
//! change, capped at 3600 and never below [`DOCUMENT_MIN_MAX_AGE_SECONDS`], so a relying party
//! that honours it has re-read the JWKS by the time a new key is published (and long before
//! that key signs: keys are published a day ahead by default). Never `no-cache`, which makes
//! some clients refetch on every verification. The ETag lets a client revalidate for the price
//! of a 304.

use aws_lc_rs::digest;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::HeaderValue;
use jiff::Timestamp;
use warrant_keys::KeySet;
use warrant_token::{
    DocumentError, TokenError, VerifiedToken, Verifier, render_discovery, render_jwks,
    render_jwks_with_certificates,
};

use crate::settings::Settings;
use crate::signatures::{Lookup, SignatureCache};
use crate::x5c::KeyCertificates;

/// How long relying parties may cache the documents, at most: kube-apiserver's value for
/// static keys.
pub const DOCUMENT_MAX_AGE_SECONDS: u32 = 3600;

/// The shortest max-age ever sent, even just before (or just after) a scheduled key change:
/// shorter would have clients refetch almost per request, for a change that matters to them
/// only a publish-ahead later.
pub const DOCUMENT_MIN_MAX_AGE_SECONDS: u32 = 60;

/// One key set, ready to serve.
#[derive(Debug)]
pub struct Published {
    keys: KeySet,
    verifier: Verifier,
    jwks: Bytes,
    jwks_etag: HeaderValue,
    discovery: Result<(Bytes, HeaderValue), DocumentError>,
    /// The header for static keys, or after a managed set's next change has passed.
    default_cache_control: HeaderValue,
    /// Signatures verified with these keys.
    signatures: SignatureCache,
    /// The keys' certificates in the JWKS (`--jwks-x5c`); `None` without.
    certificates: Option<KeyCertificates>,
}

/// A strong ETag for a body: the quoted base64url SHA-256 of its bytes.
fn etag(body: &[u8]) -> HeaderValue {
    let hash = URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, body));
    HeaderValue::from_str(&format!("\"{hash}\"")).unwrap_or(HeaderValue::from_static("\"\""))
}

fn cache_control(max_age: u32) -> HeaderValue {
    HeaderValue::from_str(&format!("public, max-age={max_age}"))
        .unwrap_or(HeaderValue::from_static("public, max-age=60"))
}

impl Published {
    /// Renders a key set for `settings`. The discovery document needs an https issuer; without
    /// one (or another problem kube-apiserver would refuse), discovery is not served and the
    /// reason is kept for the log and for `/readyz?verbose`.
    pub fn new(settings: &Settings, keys: KeySet) -> Self {
        Self::after(settings, keys, None)
    }

    /// [`new`](Self::new), keeping what `previous` (the key set it replaces) made once per key:
    /// the keys' certificates.
    pub fn after(settings: &Settings, keys: KeySet, previous: Option<&Published>) -> Self {
        Self::render(
            settings,
            keys,
            previous.and_then(|p| p.certificates.as_ref()),
        )
    }

    /// The keys' certificates this set does not have yet (keys held in an HSM or KMS), with
    /// `--jwks-x5c`.
    pub(crate) fn certificates_missing(&self) -> Vec<warrant_keys::PublishedKey> {
        match &self.certificates {
            Some(certificates) => certificates.missing(&self.keys),
            None => Vec::new(),
        }
    }

    /// This key set again, with `made` certificates added.
    pub(crate) fn with_certificates(
        &self,
        settings: &Settings,
        made: Vec<(String, Vec<u8>)>,
    ) -> Self {
        let known = self.certificates.clone().unwrap_or_default().with(made);
        Self::render(settings, self.keys.clone(), Some(&known))
    }

    fn render(
        settings: &Settings,
        keys: KeySet,
        known_certificates: Option<&KeyCertificates>,
    ) -> Self {
        let certificates = settings
            .jwks_x5c
            .then(|| KeyCertificates::make(&keys, known_certificates));
        let verifier = Verifier::new(
            settings.issuers.clone(),
            settings.api_audiences.clone(),
            keys.verifying().to_vec(),
        )
        .with_revoked(keys.revoked().to_vec());
        let jwks = Bytes::from(match &certificates {
            Some(certificates) => {
                render_jwks_with_certificates(keys.verifying(), |kid| certificates.get(kid))
            }
            None => render_jwks(keys.verifying()),
        });
        let jwks_etag = etag(&jwks);
        let issuer = settings.issuer();
        let discovery = render_discovery(issuer, &settings.jwks_uri, keys.verifying()).map(|doc| {
            let tag = etag(&doc);
            (Bytes::from(doc), tag)
        });
        let default_cache_control = cache_control(match keys.next_change() {
            None => DOCUMENT_MAX_AGE_SECONDS,
            Some(_) => DOCUMENT_MIN_MAX_AGE_SECONDS,
        });
        Published {
            keys,
            verifier,
            jwks,
            jwks_etag,
            discovery,
            default_cache_control,
            signatures: SignatureCache::new(settings.signature_cache_entries),
            certificates,
        }
    }

    /// Verifies a token against these keys for the `requested` audiences at `now`, skipping the
    /// signature check for a token whose signature was verified before (see
    /// [`crate::signatures`]). Reports whether the signature came from the cache.
    pub fn verify(
        &self,
        token: &str,
        requested: &[String],
        now: Timestamp,
    ) -> (Result<VerifiedToken, TokenError>, Lookup) {
        let (claims, lookup) = self.signatures.verify_signature(&self.verifier, token, now);
        (
            claims.and_then(|claims| self.verifier.validate(claims, requested, now)),
            lookup,
        )
    }

    /// The keys.
    pub fn keys(&self) -> &KeySet {
        &self.keys
    }

    /// Verifies tokens against these keys.
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// `/openid/v1/jwks`.
    pub fn jwks(&self) -> &Bytes {
        &self.jwks
    }

    /// The JWKS's ETag.
    pub fn jwks_etag(&self) -> &HeaderValue {
        &self.jwks_etag
    }

    /// `/.well-known/openid-configuration`, or why it is not served.
    pub fn discovery(&self) -> Result<&Bytes, &DocumentError> {
        self.discovery.as_ref().map(|(doc, _)| doc)
    }

    /// The discovery document's ETag, when it is served.
    pub fn discovery_etag(&self) -> Option<&HeaderValue> {
        self.discovery.as_ref().ok().map(|(_, tag)| tag)
    }

    /// The documents' max-age at `now`: 3600 for static keys; for managed keys the seconds
    /// until the next scheduled change, between 60 and 3600.
    pub fn max_age(&self, now: Timestamp) -> u32 {
        match self.keys.next_change() {
            None => DOCUMENT_MAX_AGE_SECONDS,
            Some(next) => {
                let left = next.as_second().saturating_sub(now.as_second());
                let left = u32::try_from(left.max(0)).unwrap_or(u32::MAX);
                left.clamp(DOCUMENT_MIN_MAX_AGE_SECONDS, DOCUMENT_MAX_AGE_SECONDS)
            }
        }
    }

    /// The `Cache-Control` of both documents at `now`.
    pub fn cache_control(&self, now: Timestamp) -> HeaderValue {
        match self.keys.next_change() {
            None => self.default_cache_control.clone(),
            Some(_) => cache_control(self.max_age(now)),
        }
    }
}

#[cfg(test)]
mod tests {
    use warrant_token::{ExpirationPolicy, KeyType, SigningKey};

    use super::*;

    fn settings() -> Settings {
        Settings {
            issuers: vec!["https://i".into()],
            api_audiences: vec!["https://i".into()],
            jwks_uri: "https://i/openid/v1/jwks".into(),
            expiration: ExpirationPolicy::default(),
            signature_cache_entries: crate::DEFAULT_SIGNATURE_CACHE_ENTRIES,
            jwks_x5c: false,
        }
    }

    #[test]
    fn max_age_runs_down_to_the_next_change_within_bounds() {
        let key = SigningKey::generate(KeyType::P256).unwrap();
        let at = |s| Timestamp::from_second(s).unwrap();
        let fixed = Published::new(&settings(), KeySet::new(key.clone(), vec![]));
        assert_eq!(fixed.max_age(at(0)), 3600);
        assert_eq!(fixed.cache_control(at(0)), "public, max-age=3600");

        let managed = Published::new(
            &settings(),
            KeySet::scheduled(key.clone(), vec![], vec![], Some(at(10_000))),
        );
        assert_eq!(managed.max_age(at(0)), 3600);
        assert_eq!(managed.max_age(at(10_000 - 3600)), 3600);
        assert_eq!(managed.max_age(at(10_000 - 3599)), 3599);
        assert_eq!(managed.max_age(at(10_000 - 61)), 61);
        assert_eq!(managed.max_age(at(10_000 - 60)), 60);
        assert_eq!(managed.max_age(at(10_000 - 1)), 60);
        // Past the change (before the new set arrives): the floor, not zero or no-cache.
        assert_eq!(managed.max_age(at(20_000)), 60);
        assert_eq!(managed.cache_control(at(9_000)), "public, max-age=1000");
        // The body is the same either way; so is its ETag.
        assert_eq!(managed.jwks(), fixed.jwks());
        assert_eq!(managed.jwks_etag(), fixed.jwks_etag());
        let tag = fixed.jwks_etag().to_str().unwrap();
        assert!(
            tag.starts_with('"') && tag.ends_with('"') && tag.len() == 45,
            "{tag}"
        );
        assert_ne!(fixed.discovery_etag().unwrap(), fixed.jwks_etag());
    }
}
