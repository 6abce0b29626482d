//! The SPIFFE trust bundle (the SPIFFE Trust Domain and Bundle format): a JWK Set whose keys
//! carry `use: x509-svid` (an X.509 root, its certificate in `x5c`) or `use: jwt-svid` (a key of
//! the JWKS, by `kid`). Built here from the JWKS's bytes and the pod certificate CA's roots, for
//! both places it goes: the server's `/.well-known/spiffe-bundle` and the publish targets.
//!
//! `spiffe_sequence` is left out (it is optional): replicas could not agree on it without
//! shared state, and a relying party that sees a smaller one from another replica would keep
//! a stale bundle.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use serde_json::{Map, Value, json};
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

/// The bundle's `spiffe_refresh_hint`: how often a relying party should read it again. Fixed
/// rather than the JWKS's `max-age`, which runs down towards each key change and would make
/// every publish round write a new bundle; new keys and roots are published ahead of use by
/// more than this.
pub const SPIFFE_REFRESH_HINT_SECONDS: u64 = 300;

/// The X.509 roots of a bundle: each root's `x509-svid` key, built once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpiffeRoots {
    keys: Vec<Value>,
}

impl SpiffeRoots {
    /// Roots from DER certificates; an error names the first that cannot be a bundle key.
    pub fn new(roots: &[Vec<u8>]) -> Result<SpiffeRoots, String> {
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
        Ok(SpiffeRoots { keys })
    }

    /// No X.509 roots: a bundle of the JWKS's keys alone (`jwt-svid`), for the JWT-SVIDs of a
    /// warrant that signs no pod certificates.
    pub fn none() -> SpiffeRoots {
        SpiffeRoots { keys: Vec::new() }
    }

    /// The bundle of these roots and the keys of `jwks` (a JWKS's bytes); `None` if `jwks` is
    /// not a JWKS. The same inputs give the same bytes, so a target is rewritten only when the
    /// roots or the keys change.
    pub fn bundle(&self, jwks: &[u8]) -> Option<Bytes> {
        let jwks: Value = serde_json::from_slice(jwks).ok()?;
        let mut keys: Vec<Value> = self.keys.clone();
        for key in jwks.get("keys")?.as_array()? {
            let mut key = key.as_object()?.clone();
            key.insert("use".into(), json!("jwt-svid"));
            keys.push(Value::Object(key));
        }
        let mut bundle = Map::new();
        bundle.insert("keys".into(), Value::Array(keys));
        bundle.insert(
            "spiffe_refresh_hint".into(),
            json!(SPIFFE_REFRESH_HINT_SECONDS),
        );
        serde_json::to_vec(&Value::Object(bundle))
            .ok()
            .map(Bytes::from)
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
        let body = roots.bundle(jwks).unwrap();
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
        assert_eq!(bundle["spiffe_refresh_hint"], SPIFFE_REFRESH_HINT_SECONDS);
        assert!(bundle.get("spiffe_sequence").is_none());
    }

    #[test]
    fn what_is_not_a_certificate_is_refused() {
        let err = SpiffeRoots::new(&[b"not der".to_vec()]).unwrap_err();
        assert!(err.contains("root 0"), "{err}");
    }
}
