//! Reading request bodies: a size limit, the content types kube-apiserver reads (JSON, YAML
//! and Kubernetes protobuf), and parse errors that say where without echoing what (a body may hold a token).
//!
//! A parse error names a category and a position, never text from the body: parser messages
//! quote values (serde: `invalid type: string "…"`, unknown field and variant names) and the YAML
//! parser renders the offending line. The one piece of parser text kept is a missing field's
//! name, which comes from our schema, not from the body.

use axum::body::Body;
use http::HeaderMap;
use http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::protobuf::FromProtobuf;

/// The largest body accepted, as kube-apiserver's limit: 3 MiB.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Reads and decodes a request body.
pub(crate) async fn decode<T: DeserializeOwned + FromProtobuf>(
    headers: &HeaderMap,
    body: Body,
) -> Result<T, ApiError> {
    let format = format(headers)?;
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::too_large(MAX_BODY_BYTES))?;
    decode_bytes(format, &bytes)
}

/// Decodes a body a route read itself (within its own limit), as JSON only: for a route whose
/// callers send JSON (kube-apiserver's AdmissionReviews), so what it costs is what JSON costs.
pub(crate) fn decode_json<T: DeserializeOwned + FromProtobuf>(
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<T, ApiError> {
    match format(headers)? {
        Format::Json => decode_bytes(Format::Json, bytes),
        Format::Yaml | Format::Protobuf => Err(ApiError::unsupported_media_type_saying(
            "this route reads JSON only (application/json)",
        )),
    }
}

/// Decodes a whole body in `format`.
fn decode_bytes<T: DeserializeOwned + FromProtobuf>(
    format: Format,
    bytes: &[u8],
) -> Result<T, ApiError> {
    match format {
        Format::Protobuf => T::from_protobuf(bytes),
        Format::Json => {
            // serde reads a struct from an array too; Kubernetes objects are JSON objects only.
            if bytes
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .is_some_and(|&b| b != b'{')
            {
                return Err(ApiError::bad_request(
                    "the request body must be a JSON object",
                ));
            }
            serde_json::from_slice(bytes).map_err(|e| json_error(&e))
        }
        Format::Yaml => {
            let text = std::str::from_utf8(bytes)
                .map_err(|_| ApiError::bad_request("the request body is not valid UTF-8"))?;
            serde_saphyr::from_str(text).map_err(|e| yaml_error(&e))
        }
    }
}

/// The longest message a body error may carry: a category, a position and a schema field name.
/// Anything longer would mean body text leaked into it.
const MAX_ERROR_MESSAGE: usize = 160;

/// Decodes `bytes` as a `T` in each format and checks what must hold for any input: no panic,
/// and an error message that is short (so it quotes nothing from the body). The fuzz target
/// `request_body` and the corpus replay in the `warrant` crate run it for every request body.
pub(crate) fn check_decoder<T: DeserializeOwned + FromProtobuf>(bytes: &[u8]) {
    for format in [Format::Json, Format::Yaml, Format::Protobuf] {
        if let Err(e) = decode_bytes::<T>(format, bytes) {
            let message = e.message();
            assert!(
                message.len() <= MAX_ERROR_MESSAGE,
                "a {} byte error message: {message}",
                message.len()
            );
        }
    }
}

#[derive(Clone, Copy)]
enum Format {
    Json,
    Yaml,
    Protobuf,
}

fn format(headers: &HeaderMap) -> Result<Format, ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Ok(Format::Json);
    };
    let text = value.to_str().unwrap_or_default();
    let media = text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "" | "application/json" | "*/*" => Ok(Format::Json),
        "application/yaml" | "application/x-yaml" | "text/yaml" => Ok(Format::Yaml),
        "application/vnd.kubernetes.protobuf" => Ok(Format::Protobuf),
        _ => Err(ApiError::unsupported_media_type(&media)),
    }
}

fn json_error(e: &serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Syntax => "is not valid JSON",
        Category::Eof => "ends before the JSON does",
        Category::Data => "does not match the expected object",
        Category::Io => "could not be read",
    };
    let mut message = format!(
        "the request body {what} (line {}, column {})",
        e.line(),
        e.column()
    );
    if let Some(field) = missing_field(&e.to_string()) {
        message.push_str(": missing field ");
        message.push_str(field);
    }
    ApiError::bad_request(message)
}

fn yaml_error(e: &serde_saphyr::Error) -> ApiError {
    let mut message =
        String::from("the request body is not valid YAML or does not match the expected object");
    if let Some(at) = e.location() {
        message.push_str(&format!(" (line {}, column {})", at.line(), at.column()));
    }
    if let Some(field) = missing_field(&e.without_snippet().to_string()) {
        message.push_str(": missing field ");
        message.push_str(field);
    }
    ApiError::bad_request(message)
}

/// The field name in serde's "missing field `name`" message: a name from the type being
/// decoded (our schema), so safe to repeat; any other parser text may quote the body.
fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    let (field, _) = rest.split_once('`')?;
    field
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        .then_some(field)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_schema_field_names_are_repeated() {
        assert_eq!(
            missing_field("missing field `spec` at line 1"),
            Some("spec")
        );
        assert_eq!(missing_field("unknown field `eyJsecret`"), None);
        assert_eq!(missing_field("missing field `a b`"), None);
        assert_eq!(missing_field("missing field `unterminated"), None);
    }

    #[test]
    fn yaml_errors_carry_no_body_text() {
        for body in [
            // A syntax error on a line holding a token.
            "spec:\n  token: eyJhbGci.secret.value: [\n",
            // A type mismatch on a token value.
            "spec:\n  audiences: eyJhbGci.secret.value\n",
            "spec: {token: \"eyJhbGci.secret.value\", audiences: {a: 1}}\n",
            "spec:\n  expirationSeconds: eyJhbGci.secret.value\n",
            "- eyJhbGci.secret.value\n",
        ] {
            let e = serde_saphyr::from_str::<serde_json::Value>(body)
                .and_then(|_| serde_saphyr::from_str::<Probe>(body))
                .unwrap_err();
            let e = yaml_error(&e);
            assert!(!e.message().contains("secret"), "{body:?}: {}", e.message());
            assert!(e.message().contains("line "), "{body:?}: {}", e.message());
        }
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Probe {
        spec: ProbeSpec,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct ProbeSpec {
        token: Option<String>,
        audiences: Option<Vec<String>>,
        #[serde(rename = "expirationSeconds")]
        expiration_seconds: Option<i64>,
    }

    #[test]
    fn data_errors_do_not_echo_values() {
        let err: serde_json::Error =
            serde_json::from_str::<Vec<String>>(r#""eyJ-secret-token""#).unwrap_err();
        let e = json_error(&err);
        assert!(!e.message().contains("secret"), "{}", e.message());
        assert!(
            e.message()
                .starts_with("the request body does not match the expected object")
        );
    }
}
