//! Where the clients find warrant, and what they trust it by: its URL (https only, since each
//! sends a credential there) and its CA bundle (PEM certificates, used instead of the system's
//! roots). The token injection webhook checks the URL and bundle it gives the agent with the
//! same functions, so what it writes into a pod is what the agent accepts.

use std::path::Path;

/// Why warrant's URL or CA bundle is refused.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// warrant's URL does not parse as an absolute URL.
    #[error("warrant's URL {url:?} ({from}) is not an absolute URL")]
    Unparsable {
        /// The text given.
        url: String,
        /// Where it came from (a flag, a kubeconfig).
        from: String,
        /// The parser's reason.
        #[source]
        cause: http::uri::InvalidUri,
    },
    /// warrant's URL is not https.
    #[error(
        "warrant's URL {url} ({from}) is not https: the plugin sends its own token there, so it \
         only calls warrant over https, checked against warrant's CA"
    )]
    NotHttps {
        /// The URL given.
        url: String,
        /// Where it came from.
        from: String,
    },
    /// The CA file cannot be read.
    #[error("cannot read warrant's CA bundle {path}")]
    ReadCa {
        /// The file.
        path: String,
        /// Why.
        #[source]
        cause: std::io::Error,
    },
    /// The CA bundle holds no certificate.
    #[error("{path}: no PEM certificate in warrant's CA bundle")]
    NoCertificate {
        /// The file, or where the bundle came from.
        path: String,
    },
}

/// warrant's URL, checked: absolute, https. Kept as given (less a trailing `/`), since request
/// paths are appended to it. `from` says where it came from, for the error.
pub fn warrant_url(text: &str, from: &str) -> Result<String, EndpointError> {
    let text = text.trim().trim_end_matches('/');
    let uri: http::Uri = text.parse().map_err(|cause| EndpointError::Unparsable {
        url: text.to_owned(),
        from: from.to_owned(),
        cause,
    })?;
    if uri.scheme_str() != Some("https") || uri.authority().is_none() {
        return Err(EndpointError::NotHttps {
            url: text.to_owned(),
            from: from.to_owned(),
        });
    }
    Ok(text.to_owned())
}

/// The DER certificates of a PEM bundle, sorted (a bundle is a set); `None` if a block does not
/// parse.
pub(crate) fn certificates(pem: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut certs = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.ok()?;
        if block.label == "CERTIFICATE" {
            certs.push(block.contents);
        }
    }
    certs.sort();
    Some(certs)
}

/// The CA bundle in the file at `path`: its DER certificates, sorted, at least one.
pub fn ca_file(path: &Path) -> Result<Vec<Vec<u8>>, EndpointError> {
    let pem = std::fs::read(path).map_err(|cause| EndpointError::ReadCa {
        path: path.display().to_string(),
        cause,
    })?;
    ca_bundle(&pem, &path.display().to_string())
}

/// The sorted DER certificates of a PEM bundle (`from` names it in the error): at least one.
pub fn ca_bundle(pem: &[u8], from: &str) -> Result<Vec<Vec<u8>>, EndpointError> {
    match certificates(pem) {
        Some(certs) if !certs.is_empty() => Ok(certs),
        _ => Err(EndpointError::NoCertificate {
            path: from.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_urls_are_warrants() {
        assert_eq!(
            warrant_url("https://w.example:8443/", "--warrant-url").unwrap(),
            "https://w.example:8443"
        );
        for bad in [
            "http://127.0.0.1:18999",
            "HTTP://w",
            "w.example",
            "/relative",
            "ftp://w",
        ] {
            let err = warrant_url(bad, "--warrant-url").unwrap_err();
            assert!(
                matches!(
                    err,
                    EndpointError::NotHttps { .. } | EndpointError::Unparsable { .. }
                ),
                "{bad}: {err}"
            );
        }
    }
}
