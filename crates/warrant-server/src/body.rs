//! Reading request bodies: a size limit, the content types kube-apiserver reads (JSON, YAML
//! and Kubernetes protobuf), and parse errors that say where without echoing what (a body may hold a token).

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
    match format {
        Format::Protobuf => T::from_protobuf(&bytes),
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
            serde_json::from_slice(&bytes).map_err(|e| json_error(&e))
        }
        Format::Yaml => {
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| ApiError::bad_request("the request body is not valid UTF-8"))?;
            serde_saphyr::from_str(text).map_err(|e| {
                ApiError::bad_request(format!(
                    "the request body is not valid YAML: {}",
                    redact(&e.to_string())
                ))
            })
        }
    }
}

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
    ApiError::bad_request(format!(
        "the request body {what} (line {}, column {}): {}",
        e.line(),
        e.column(),
        redact(&e.to_string())
    ))
}

/// Removes quoted string values from a parser message: serde reports a mistyped string value
/// verbatim, and that value may be a token.
fn redact(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    for c in message.chars() {
        if c == '"' {
            if quoted {
                out.push_str("…\"");
            } else {
                out.push('"');
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_quoted_values() {
        assert_eq!(
            redact(
                r#"invalid type: string "eyJhbGci.secret", expected a sequence at line 1 column 9"#
            ),
            r#"invalid type: string "…", expected a sequence at line 1 column 9"#
        );
        assert_eq!(redact("missing field `spec`"), "missing field `spec`");
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
