//! The key material in force and everything derived from it: the verifier and the two
//! documents relying parties fetch, rendered once per key-set change.

use bytes::Bytes;
use http::HeaderValue;
use warrant_keys::KeySet;
use warrant_token::{DocumentError, Verifier, render_discovery, render_jwks};

use crate::settings::Settings;

/// How long relying parties may cache the documents, as kube-apiserver sets it for static keys.
pub const DOCUMENT_MAX_AGE_SECONDS: u32 = 3600;

/// One key set, ready to serve.
#[derive(Debug)]
pub struct Published {
    keys: KeySet,
    verifier: Verifier,
    jwks: Bytes,
    discovery: Result<Bytes, DocumentError>,
    cache_control: HeaderValue,
}

impl Published {
    /// Renders a key set for `settings`. The discovery document needs an https issuer; without
    /// one (or another problem kube-apiserver would refuse), discovery is not served and the
    /// reason is kept for the log and for `/readyz?verbose`.
    pub fn new(settings: &Settings, keys: KeySet) -> Self {
        let verifier = Verifier::new(
            settings.issuers.clone(),
            settings.api_audiences.clone(),
            keys.verifying().to_vec(),
        );
        let jwks = Bytes::from(render_jwks(keys.verifying()));
        let issuer = settings
            .issuers
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let discovery =
            render_discovery(issuer, &settings.jwks_uri, keys.verifying()).map(Bytes::from);
        let cache_control =
            HeaderValue::from_str(&format!("public, max-age={DOCUMENT_MAX_AGE_SECONDS}"))
                .unwrap_or(HeaderValue::from_static("public, max-age=3600"));
        Published {
            keys,
            verifier,
            jwks,
            discovery,
            cache_control,
        }
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

    /// `/.well-known/openid-configuration`, or why it is not served.
    pub fn discovery(&self) -> Result<&Bytes, &DocumentError> {
        self.discovery.as_ref()
    }

    /// The `Cache-Control` of both documents.
    pub fn cache_control(&self) -> &HeaderValue {
        &self.cache_control
    }
}
