//! `GET /.well-known/spiffe-bundle`: the SPIFFE trust bundle of warrant's trust domain, for
//! relying parties outside the cluster that verify pods' X.509 certificates (the pod
//! certificate signer's roots) and warrant's JWTs with one document, in the SPIFFE Trust
//! Domain and Bundle format: a JWK Set whose keys carry `use: x509-svid` (a CA root, its
//! certificate in `x5c`) or `use: jwt-svid` (a key of the JWKS, by `kid`).
//!
//! Served only while the pod certificate signer runs ([`AppState::set_spiffe_roots`]); `404`
//! otherwise, as the OIDC documents are without an issuer kube-apiserver would publish. The
//! body is built once per change of either half (a key rotation, a CA rotation) and served as
//! prepared bytes with an ETag, and with the JWKS's `Cache-Control`; `spiffe_refresh_hint` is
//! that max-age. `spiffe_sequence` is left out (it is optional): replicas could not agree on
//! it without shared state, and a relying party that sees a smaller one from another replica
//! would keep a stale bundle.

use std::sync::{Mutex, PoisonError};

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH};
use http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

use crate::error::ApiError;
use crate::state::AppState;

/// Where the bundle is served.
pub const SPIFFE_BUNDLE_PATH: &str = "/.well-known/spiffe-bundle";

/// The X.509 roots of the bundle, as the pod certificate signer sets them.
#[derive(Debug, Default)]
pub(crate) struct SpiffeRoots {
    /// The roots' X.509-SVID keys (each with its certificate), built when set.
    keys: Vec<Value>,
    /// The last body built, with what it was built from (the JWKS's ETag).
    built: Mutex<Option<Built>>,
}

#[derive(Debug, Clone)]
struct Built {
    jwks_etag: HeaderValue,
    body: Bytes,
    etag: HeaderValue,
}

impl SpiffeRoots {
    /// Roots from DER certificates; an error names the first that cannot be a bundle key.
    pub(crate) fn new(roots: &[Vec<u8>]) -> Result<SpiffeRoots, String> {
        let keys = roots
            .iter()
            .enumerate()
            .map(|(i, der)| {
                x509_svid_key(der).ok_or_else(|| {
                    format!(
                        "root {i} is not an X.509 certificate with an EC (P-256, P-384) or RSA key"
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SpiffeRoots {
            keys,
            built: Mutex::new(None),
        })
    }
}

/// A JWK for a root: its public key's parameters, `use: x509-svid`, and the certificate.
fn x509_svid_key(der: &[u8]) -> Option<Value> {
    let (rest, certificate) = X509Certificate::from_der(der).ok()?;
    if !rest.is_empty() {
        return None;
    }
    let spki = certificate.public_key();
    let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    let mut key = match spki.parsed().ok()? {
        PublicKey::EC(point) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()?
                .as_oid()
                .ok()?
                .to_id_string();
            let (crv, size) = match curve.as_str() {
                "1.2.840.10045.3.1.7" => ("P-256", 32),
                "1.3.132.0.34" => ("P-384", 48),
                _ => return None,
            };
            // An uncompressed point: 0x04, then x and y of `size` bytes each.
            let (tag, xy) = point.data().split_first()?;
            if *tag != 0x04 || xy.len() != 2 * size {
                return None;
            }
            let (x, y) = xy.split_at(size);
            json!({"kty": "EC", "crv": crv, "x": b64(x), "y": b64(y)})
        }
        PublicKey::RSA(rsa) => {
            // DER integers carry a leading zero for the sign; a JWK's do not.
            let trim = |bytes: &'_ [u8]| {
                let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
                bytes.get(start..).unwrap_or_default().to_vec()
            };
            json!({"kty": "RSA", "n": b64(&trim(rsa.modulus)), "e": b64(&trim(rsa.exponent))})
        }
        _ => return None,
    };
    let map = key.as_object_mut()?;
    map.insert("use".into(), json!("x509-svid"));
    map.insert("x5c".into(), json!([STANDARD.encode(der)]));
    Some(key)
}

/// The bundle from the JWKS's bytes and the roots' keys; `refresh_hint` in seconds.
fn document(jwks: &[u8], roots: &[Value], refresh_hint: Option<u64>) -> Option<Bytes> {
    let jwks: Value = serde_json::from_slice(jwks).ok()?;
    let mut keys: Vec<Value> = roots.to_vec();
    for key in jwks.get("keys")?.as_array()? {
        let mut key = key.as_object()?.clone();
        key.insert("use".into(), json!("jwt-svid"));
        keys.push(Value::Object(key));
    }
    let mut bundle = Map::new();
    bundle.insert("keys".into(), Value::Array(keys));
    if let Some(hint) = refresh_hint {
        bundle.insert("spiffe_refresh_hint".into(), json!(hint));
    }
    serde_json::to_vec(&Value::Object(bundle))
        .ok()
        .map(Bytes::from)
}

/// `max-age=N` of a `Cache-Control` value.
fn max_age(cache_control: &HeaderValue) -> Option<u64> {
    cache_control
        .to_str()
        .ok()?
        .split(',')
        .find_map(|part| part.trim().strip_prefix("max-age=")?.parse().ok())
}

/// `GET /.well-known/spiffe-bundle`.
pub(crate) fn bundle(state: &AppState, headers: &HeaderMap) -> Response {
    let Some(roots) = state.spiffe_roots() else {
        return ApiError::no_such_path().into_response();
    };
    let published = state.issuer().published();
    let cache_control = published.cache_control(state.issuer().clock().now());
    let built = {
        let mut built = roots.built.lock().unwrap_or_else(PoisonError::into_inner);
        match built.as_ref() {
            Some(done) if done.jwks_etag == *published.jwks_etag() => done.clone(),
            _ => {
                let Some(body) = document(published.jwks(), &roots.keys, max_age(&cache_control))
                else {
                    return ApiError::internal("the SPIFFE bundle could not be built")
                        .into_response();
                };
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &body);
                let short = digest.as_ref().get(..16).unwrap_or_default();
                let tag = format!("\"{}\"", URL_SAFE_NO_PAD.encode(short));
                let done = Built {
                    jwks_etag: published.jwks_etag().clone(),
                    body,
                    etag: HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"\"")),
                };
                *built = Some(done.clone());
                done
            }
        }
    };
    let unchanged = headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == built.etag
        });
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = built.body.into_response();
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    };
    response.headers_mut().insert(CACHE_CONTROL, cache_control);
    response.headers_mut().insert(ETAG, built.etag);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(alg: &'static rcgen::SignatureAlgorithm) -> Vec<u8> {
        let key = rcgen::KeyPair::generate_for(alg).unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    /// Each root becomes an x509-svid key with its certificate and its key's parameters; the
    /// JWKS's keys follow as jwt-svid, their kid kept.
    #[test]
    fn roots_and_jwt_keys_in_one_set() {
        let p256 = certificate(&rcgen::PKCS_ECDSA_P256_SHA256);
        let p384 = certificate(&rcgen::PKCS_ECDSA_P384_SHA384);
        let roots = SpiffeRoots::new(&[p256.clone(), p384]).unwrap();
        let jwks = br#"{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":"AQAB","e":"AQAB"}]}"#;
        let body = document(jwks, &roots.keys, Some(300)).unwrap();
        let bundle: Value = serde_json::from_slice(&body).unwrap();
        let keys = bundle["keys"].as_array().unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0]["use"], "x509-svid");
        assert_eq!(keys[0]["crv"], "P-256");
        assert_eq!(keys[0]["x5c"][0], STANDARD.encode(&p256));
        assert_eq!(
            URL_SAFE_NO_PAD
                .decode(keys[0]["x"].as_str().unwrap())
                .unwrap()
                .len(),
            32
        );
        assert_eq!(keys[1]["crv"], "P-384");
        assert_eq!(keys[2]["use"], "jwt-svid");
        assert_eq!(keys[2]["kid"], "k1");
        assert_eq!(bundle["spiffe_refresh_hint"], 300);
        assert!(bundle.get("spiffe_sequence").is_none());
    }

    #[test]
    fn what_is_not_a_certificate_is_refused() {
        let err = SpiffeRoots::new(&[b"not der".to_vec()]).unwrap_err();
        assert!(err.contains("root 0"), "{err}");
        assert_eq!(
            max_age(&HeaderValue::from_static("public, max-age=3600")),
            Some(3600)
        );
    }
}
