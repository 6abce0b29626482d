//! The two documents relying parties fetch: the JWKS (`/openid/v1/jwks`) and the OIDC discovery
//! document (`/.well-known/openid-configuration`). Both are rendered once per key-set change and
//! then served as bytes; nothing here runs per request.

use serde::Serialize;

use crate::error::DocumentError;
use crate::gojson;
use crate::keys::{Algorithm, VerifyingKey};

/// The JWKS document: `{"keys":[…]}` with every key, in the order given, each JWK in go-jose's
/// field order (`use, kty, kid, crv, alg, x, y, n, e`).
pub fn render_jwks(keys: &[VerifyingKey]) -> Vec<u8> {
    let mut out = String::with_capacity(32 + keys.len() * 450);
    out.push_str("{\"keys\":[");
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(key.jwk_json());
    }
    out.push_str("]}");
    out.into_bytes()
}

/// The JWKS document as [`render_jwks`] writes it, each key for which `certificate` gives one
/// with its certificate after its own members: `x5c` (the certificate alone, standard base64,
/// RFC 7517 §4.7) and `x5t#S256` (its SHA-256, base64url, §4.9), go-jose's order.
pub fn render_jwks_with_certificates<'a>(
    keys: &[VerifyingKey],
    certificate: impl Fn(&str) -> Option<&'a [u8]>,
) -> Vec<u8> {
    use base64::Engine as _;
    let mut out = String::with_capacity(32 + keys.len() * 1500);
    out.push_str("{\"keys\":[");
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let jwk = key.jwk_json();
        match (certificate(key.kid()), jwk.strip_suffix('}')) {
            (Some(der), Some(members)) => {
                let thumbprint = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
                out.push_str(members);
                out.push_str(",\"x5c\":[\"");
                base64::engine::general_purpose::STANDARD.encode_string(der, &mut out);
                out.push_str("\"],\"x5t#S256\":\"");
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode_string(thumbprint.as_ref(), &mut out);
                out.push_str("\"}");
            }
            _ => out.push_str(jwk),
        }
    }
    out.push_str("]}");
    out.into_bytes()
}

/// The discovery document, in kube-apiserver's field order.
#[derive(Serialize)]
struct Discovery<'a> {
    issuer: &'a str,
    jwks_uri: &'a str,
    response_types_supported: [&'static str; 1],
    subject_types_supported: [&'static str; 1],
    id_token_signing_alg_values_supported: Vec<&'static str>,
    /// RFC 9449 §5.1: the algorithms a DPoP proof may use. warrant's addition, last.
    dpop_signing_alg_values_supported: [&'static str; 3],
}

/// Renders the OIDC discovery document for `issuer` (which must be an https URL without query
/// or fragment) whose keys are at `jwks_uri`. The algorithm list is the sorted, de-duplicated
/// set of the keys' algorithms. Errors carry kube-apiserver's messages.
///
/// The document is kube-apiserver's, byte for byte, with one field added last:
/// `dpop_signing_alg_values_supported` (RFC 9449 §5.1), the algorithms warrant takes DPoP proofs
/// in ([`crate::DPOP_ALGORITHMS`]), so that clients asking for key-bound tokens can choose one.
/// Relying parties that do not know the field ignore it. Every document warrant writes (served,
/// exported, published) comes from here, so they stay identical.
pub fn render_discovery(
    issuer: &str,
    jwks_uri: &str,
    keys: &[VerifyingKey],
) -> Result<Vec<u8>, DocumentError> {
    validate_issuer_url(issuer)?;
    validate_jwks_uri(jwks_uri)?;
    if keys.is_empty() {
        return Err(DocumentError::NoKeys);
    }
    let mut algs: Vec<&'static str> = keys.iter().map(|k| k.algorithm().name()).collect();
    algs.sort_unstable();
    algs.dedup();
    let doc = Discovery {
        issuer,
        jwks_uri,
        response_types_supported: ["id_token"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: algs,
        dpop_signing_alg_values_supported: crate::DPOP_ALGORITHMS.map(Algorithm::name),
    };
    gojson::to_vec(&doc).map_err(|_| DocumentError::NoKeys)
}

/// Checks that an issuer can be published through discovery: an https URL with neither query
/// nor fragment (OIDC requires it, and relying parties fetch `<issuer>/.well-known/…`).
pub fn validate_issuer_url(issuer: &str) -> Result<(), DocumentError> {
    if issuer.is_empty() {
        return Err(DocumentError::EmptyIssuer);
    }
    let url = match url::Url::parse(issuer) {
        Ok(url) => url,
        // Go parses scheme-less strings as relative URLs and then complains about the scheme.
        Err(_) if !issuer.starts_with("https://") => {
            return Err(DocumentError::IssuerScheme(issuer.to_owned()));
        }
        Err(_) => return Err(DocumentError::IssuerNotUrl(issuer.to_owned())),
    };
    if url.scheme() != "https" {
        return Err(DocumentError::IssuerScheme(issuer.to_owned()));
    }
    if url.query().is_some() {
        return Err(DocumentError::IssuerQuery(issuer.to_owned()));
    }
    if url.fragment().is_some() {
        return Err(DocumentError::IssuerFragment(issuer.to_owned()));
    }
    Ok(())
}

/// Checks `--service-account-jwks-uri`: present and https.
pub fn validate_jwks_uri(jwks_uri: &str) -> Result<(), DocumentError> {
    if jwks_uri.is_empty() {
        return Err(DocumentError::NoJwksUri);
    }
    match url::Url::parse(jwks_uri) {
        Ok(url) if url.scheme() == "https" => Ok(()),
        _ => Err(DocumentError::JwksUriScheme(jwks_uri.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{KeyType, SigningKey};

    #[test]
    fn issuer_rules() {
        assert_eq!(validate_issuer_url(""), Err(DocumentError::EmptyIssuer));
        assert_eq!(
            validate_issuer_url("http://a").unwrap_err().to_string(),
            "issuer URL must use https scheme, got: http://a"
        );
        assert_eq!(
            validate_issuer_url("kubernetes").unwrap_err().to_string(),
            "issuer URL must use https scheme, got: kubernetes"
        );
        assert_eq!(
            validate_issuer_url("https://a/?x=1")
                .unwrap_err()
                .to_string(),
            "issuer URL may not include a query, got: https://a/?x=1"
        );
        assert_eq!(
            validate_issuer_url("https://a/#f").unwrap_err().to_string(),
            "issuer URL may not include a fragment, got: https://a/#f"
        );
        assert!(validate_issuer_url("https://kubernetes.default.svc").is_ok());
    }

    #[test]
    fn discovery_lists_sorted_unique_algorithms() {
        let es = SigningKey::generate(KeyType::P256).unwrap();
        let rs = SigningKey::generate(KeyType::Rsa2048).unwrap();
        let es2 = SigningKey::generate(KeyType::P256).unwrap();
        let keys = [
            es.verifying_key().clone(),
            rs.verifying_key().clone(),
            es2.verifying_key().clone(),
        ];
        let doc = render_discovery("https://i", "https://i/openid/v1/jwks", &keys).unwrap();
        assert_eq!(
            String::from_utf8(doc).unwrap(),
            r#"{"issuer":"https://i","jwks_uri":"https://i/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256","RS256"],"dpop_signing_alg_values_supported":["RS256","ES256","ES384"]}"#
        );
        assert_eq!(
            render_discovery("https://i", "https://j", &[]),
            Err(DocumentError::NoKeys)
        );
        assert_eq!(
            render_discovery("https://i", "http://j", &keys)
                .unwrap_err()
                .to_string(),
            "service-account-jwks-uri requires https scheme, parsed as: http://j"
        );
    }

    #[test]
    fn jwks_of_no_keys_is_an_empty_list() {
        assert_eq!(render_jwks(&[]), br#"{"keys":[]}"#);
    }
}
