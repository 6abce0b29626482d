//! A DPoP client (RFC 9449) for tests: its P-256 key, its proofs and its RFC 7638 thumbprint,
//! made here with aws-lc-rs by the RFCs' recipes and never with warrant-token's code, so a test
//! holds warrant against an implementation of its own.

use aws_lc_rs::digest::{SHA256, digest};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

/// A workload's DPoP key.
pub struct DpopHolder {
    key: EcdsaKeyPair,
}

impl Default for DpopHolder {
    fn default() -> Self {
        Self::new()
    }
}

impl DpopHolder {
    /// A new random key.
    pub fn new() -> Self {
        #[allow(clippy::expect_used)]
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .expect("aws-lc-rs makes a P-256 key");
        DpopHolder { key }
    }

    /// The public key's `x` and `y`, base64url.
    fn coordinates(&self) -> (String, String) {
        // An uncompressed point: 0x04, then x and y of 32 bytes each.
        let point = self.key.public_key().as_ref();
        let coordinates = point.get(1..).unwrap_or_default();
        let (x, y) = coordinates.split_at(coordinates.len() / 2);
        (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y))
    }

    /// The public key as a JWK (`kty`, `crv`, `x`, `y`).
    pub fn jwk(&self) -> Value {
        let (x, y) = self.coordinates();
        json!({"kty": "EC", "crv": "P-256", "x": x, "y": y})
    }

    /// RFC 7638: base64url SHA-256 of the required members in lexicographic order, without
    /// whitespace.
    pub fn thumbprint(&self) -> String {
        let (x, y) = self.coordinates();
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        sha256_b64url(canonical.as_bytes())
    }

    /// A proof with `claims`: header `typ: dpop+jwt`, `alg: ES256` and this key's `jwk`.
    pub fn proof(&self, claims: &Value) -> String {
        self.proof_with_header(
            &json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk()}),
            claims,
        )
    }

    /// A JWS over `header` and `claims` signed with this key, whatever the header says (to make
    /// proofs that are wrong in their header).
    pub fn proof_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        #[allow(clippy::expect_used)]
        let signature = self
            .key
            .sign(&SystemRandom::new(), input.as_bytes())
            .expect("aws-lc-rs signs");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }
}

/// base64url (no padding) of the SHA-256 of `bytes`: a proof's `ath` of a token's bytes, an
/// RFC 8705 `x5t#S256` of a certificate's DER.
pub fn sha256_b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(digest(&SHA256, bytes))
}
