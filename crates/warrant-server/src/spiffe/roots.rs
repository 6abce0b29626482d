//! The SPIFFE bundle's roots as the server's state holds them ([`ServedRoots`]), with the last
//! body built from them; `crate::spiffe` serves it.

use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::header::HeaderValue;
use warrant_issuer::{Published, SpiffeRoots};

/// The roots, with the last body built from them.
#[derive(Debug)]
pub(crate) struct ServedRoots {
    roots: SpiffeRoots,
    built: Mutex<Option<Built>>,
}

/// A bundle body, with the JWKS it was built from and its own ETag.
#[derive(Debug, Clone)]
pub(super) struct Built {
    jwks_etag: HeaderValue,
    pub(super) body: Bytes,
    pub(super) etag: HeaderValue,
}

impl ServedRoots {
    pub(crate) fn new(roots: SpiffeRoots) -> ServedRoots {
        ServedRoots {
            roots,
            built: Mutex::new(None),
        }
    }

    /// The bundle of these roots and `published`'s keys: built once per key set (the JWKS's
    /// ETag), then the same bytes; `None` if it cannot be built.
    pub(super) fn bundle(&self, published: &Published) -> Option<Built> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        match built.as_ref() {
            Some(done) if done.jwks_etag == *published.jwks_etag() => Some(done.clone()),
            _ => {
                let body = self.roots.bundle(published.jwks())?;
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &body);
                let short = digest.as_ref().get(..16).unwrap_or_default();
                let tag = format!("\"{}\"", URL_SAFE_NO_PAD.encode(short));
                let done = Built {
                    jwks_etag: published.jwks_etag().clone(),
                    body,
                    etag: HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"\"")),
                };
                *built = Some(done.clone());
                Some(done)
            }
        }
    }
}
