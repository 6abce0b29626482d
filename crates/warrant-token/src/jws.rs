//! Compact JWS: `base64url(header).base64url(payload).base64url(signature)`, no padding.

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};

use crate::claims::Claims;
use crate::error::KeyError;
use crate::keys::SigningKey;

impl SigningKey {
    /// Signs `claims` into a compact JWS with header `{"alg":…,"kid":…}` (no `typ`, as
    /// kube-apiserver writes it). The key is already parsed, so this costs one JSON encoding and
    /// one signature.
    pub fn sign(&self, claims: &Claims) -> Result<String, KeyError> {
        self.sign_payload(&claims.to_json())
    }

    /// [`sign`](Self::sign) for any key, including one held elsewhere
    /// ([`SigningKey::remote`]), whose signature is awaited.
    pub async fn sign_async(&self, claims: &Claims) -> Result<String, KeyError> {
        if self.remote_key().is_none() {
            // In memory: signed in place, without the copy of the input a remote key needs.
            return self.sign(claims);
        }
        let header = self.encoded_header();
        let payload = claims.to_json();
        let mut token = String::with_capacity(header.len() + payload.len() * 4 / 3 + 700);
        token.push_str(header);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(payload, &mut token);
        let signature = self.sign_bytes_async(token.as_bytes().to_vec()).await?;
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        Ok(token)
    }

    /// Signs an already-encoded payload. Used by tests that need tokens kube would never write.
    pub fn sign_payload(&self, payload: &[u8]) -> Result<String, KeyError> {
        let header = self.encoded_header();
        let mut token = String::with_capacity(header.len() + payload.len() * 4 / 3 + 700);
        token.push_str(header);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(payload, &mut token);
        let signature = self.sign_bytes(token.as_bytes())?;
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        Ok(token)
    }
}

impl SigningKey {
    /// Signs `message` as it is, with the key's algorithm (RS256: PKCS#1 v1.5 over SHA-256;
    /// ES256, ES384, ES512: ECDSA over SHA-256, -384, -512, as fixed-width `r || s`), wherever
    /// the key is held. For signatures that are not JWS: an X.509 CA's over a
    /// TBSCertificate (which wants ECDSA's as DER, converted by the caller).
    pub async fn sign_message(&self, message: Vec<u8>) -> Result<Vec<u8>, KeyError> {
        self.sign_bytes_async(message).await
    }

    /// [`sign_message`](Self::sign_message) at once, for a key in memory; a key held elsewhere
    /// answers [`KeyError::HeldElsewhere`].
    pub fn sign_message_now(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.sign_bytes(message)
    }
}

/// A signature for claims someone else encoded and will assemble into a token: what an external
/// signer (kube-apiserver's KEP-740 signer interface) returns. Both parts are unpadded
/// base64url; the token is `header + "." + claims + "." + signature`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachedSignature {
    /// The JOSE header `{"alg":…,"kid":…,"typ":"JWT"}`, encoded.
    pub header: String,
    /// The signature over `header + "." + claims`, encoded.
    pub signature: String,
}

impl SigningKey {
    /// Signs `encoded_claims` (a JWT's second segment, exactly as the caller will send it: the
    /// bytes are signed as given, never re-encoded). The header carries `typ: JWT`, which
    /// kube-apiserver requires of an external signer's header.
    pub fn sign_detached(&self, encoded_claims: &str) -> Result<DetachedSignature, KeyError> {
        let (header, input) = self.detached_input(encoded_claims);
        let signature = URL_SAFE_NO_PAD.encode(self.sign_bytes(input.as_bytes())?);
        Ok(DetachedSignature { header, signature })
    }

    /// [`sign_detached`](Self::sign_detached) for any key, including one held elsewhere.
    pub async fn sign_detached_async(
        &self,
        encoded_claims: &str,
    ) -> Result<DetachedSignature, KeyError> {
        let (header, input) = self.detached_input(encoded_claims);
        let signature = self.sign_bytes_async(input.into_bytes()).await?;
        let signature = URL_SAFE_NO_PAD.encode(signature);
        Ok(DetachedSignature { header, signature })
    }

    /// The encoded `typ: JWT` header of a detached signature, and the input it signs.
    fn detached_input(&self, encoded_claims: &str) -> (String, String) {
        let header = serde_json::json!({
            "alg": self.algorithm().name(),
            "kid": self.kid(),
            "typ": "JWT",
        });
        let header = URL_SAFE_NO_PAD.encode(header.to_string());
        let mut input = String::with_capacity(header.len() + 1 + encoded_claims.len());
        input.push_str(&header);
        input.push('.');
        input.push_str(encoded_claims);
        (header, input)
    }
}

/// The three parts of a compact JWS, still encoded.
pub(crate) struct Parts<'a> {
    pub(crate) header: &'a str,
    pub(crate) payload: &'a str,
    pub(crate) signature: &'a str,
    /// `header.payload`: the bytes the signature covers.
    pub(crate) signing_input: &'a str,
}

/// Splits a token into exactly three dot-separated parts.
pub(crate) fn split(token: &str) -> Option<Parts<'_>> {
    let (signing_input, signature) = token.rsplit_once('.')?;
    let (header, payload) = signing_input.split_once('.')?;
    if payload.contains('.') || signature.contains('.') {
        return None;
    }
    Some(Parts {
        header,
        payload,
        signature,
        signing_input,
    })
}

/// Go's `base64.RawURLEncoding`, which kube-apiserver decodes tokens with: padding is an error,
/// but non-zero bits after the last full byte are ignored (Go's non-strict mode). Without the
/// latter, a token with a damaged signature would count as "not mine" here and as a signature
/// failure in kube-apiserver.
const GO_RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Decodes one part of a token.
pub(crate) fn decode(part: &str) -> Option<Vec<u8>> {
    GO_RAW_URL.decode(part).ok()
}

/// The `kid` a token's header names, if any. Nothing is checked: ask it of a token whose
/// signature was verified (its header is then the signer's), e.g. to say which key signed it.
pub fn header_key_id(token: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Header {
        kid: Option<String>,
    }
    let (header, _) = token.split_once('.')?;
    serde_json::from_slice::<Header>(&decode(header)?).ok()?.kid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_the_key() {
        // {"alg":"RS256","kid":"k1"} and {"alg":"RS256"}
        assert_eq!(
            header_key_id("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.sig").as_deref(),
            Some("k1")
        );
        assert_eq!(header_key_id("eyJhbGciOiJSUzI1NiJ9.e30.sig"), None);
        assert_eq!(header_key_id("not a token"), None);
    }

    #[test]
    fn split_requires_exactly_three_parts() {
        assert!(split("a.b.c").is_some());
        assert!(split("a.b").is_none());
        assert!(split("a.b.c.d").is_none());
        assert!(split("abc").is_none());
        let p = split("h.p.s").unwrap();
        assert_eq!(
            (p.header, p.payload, p.signature, p.signing_input),
            ("h", "p", "s", "h.p")
        );
    }

    #[test]
    fn decode_rejects_padding() {
        assert_eq!(decode("YQ"), Some(b"a".to_vec()));
        assert_eq!(decode("YQ=="), None);
        assert_eq!(decode("Y+Q"), None);
        // "YR" has non-zero trailing bits; Go's non-strict decoder reads it as "a".
        assert_eq!(decode("YR"), Some(b"a".to_vec()));
    }

    #[test]
    fn a_detached_signature_assembles_into_a_token_that_verifies() {
        use crate::keys::KeyType;
        // Claims as kube-apiserver encodes them (sorted keys), signed as given.
        let claims = URL_SAFE_NO_PAD.encode(
            br#"{"aud":["x"],"exp":1900000000,"iat":1800000000,"iss":"https://i","kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"app","uid":"u"}},"nbf":1800000000,"sub":"system:serviceaccount:ns:app"}"#,
        );
        for key_type in [KeyType::Rsa2048, KeyType::P256, KeyType::P384] {
            let key = SigningKey::generate(key_type).unwrap();
            let signed = key.sign_detached(&claims).unwrap();
            let header: serde_json::Value =
                serde_json::from_slice(&decode(&signed.header).unwrap()).unwrap();
            assert_eq!(
                header,
                serde_json::json!({"alg": key.algorithm().name(), "kid": key.kid(), "typ": "JWT"})
            );
            let token = format!("{}.{claims}.{}", signed.header, signed.signature);
            let verifier = crate::Verifier::new(
                vec!["https://i".into()],
                vec!["x".into()],
                vec![key.verifying_key().clone()],
            );
            assert!(verifier.verify_signature(&token).is_ok(), "{key_type:?}");
        }
    }
}
