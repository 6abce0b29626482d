//! `warrant verify`: what a relying party (a cloud's token exchange, Vault) does with a token,
//! from the outside: discovery document, JWKS, then an offline check.

use std::error::Error;
use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::Uri;
use http_body_util::{BodyExt as _, Empty};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;

use serde_json::Value;
use warrant_clock::Clock;
use warrant_token::{TokenError, Verifier, VerifyingKey};

use crate::cli::VerifyArgs;

/// Verifies the token and prints its claims; fails with the reason if it is not valid.
pub(crate) async fn run(args: VerifyArgs) -> Result<(), Box<dyn Error>> {
    let token = if args.token == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text.trim().to_owned()
    } else {
        args.token.trim().to_owned()
    };
    let client = client(args.ca_file.as_deref())?;

    let issuer = args.issuer.trim_end_matches('/');
    let discovery_url = format!("{issuer}{}", warrant_server::DISCOVERY_PATH);
    let trust = if args.ca_file.is_some() {
        Trust::CaFile
    } else {
        Trust::System
    };
    let discovery: Discovery = fetch(&client, &discovery_url, trust).await?;
    // OpenID Connect Discovery §4.3: the document must name the issuer it was fetched for.
    if discovery.issuer != args.issuer {
        return Err(format!(
            "{discovery_url} names issuer {:?} instead of {:?}",
            discovery.issuer, args.issuer
        )
        .into());
    }
    let jwks: Jwks = fetch(&client, &discovery.jwks_uri, trust).await?;
    let mut keys = Vec::new();
    for jwk in &jwks.keys {
        match VerifyingKey::from_jwk(jwk) {
            Ok(key) => keys.push(key),
            Err(e) => {
                let kid = jwk.get("kid").and_then(Value::as_str).unwrap_or_default();
                tracing::warn!(kid, error = %e, "skipping a JWKS key");
            }
        }
    }
    let audiences = if args.audiences.is_empty() {
        vec![args.issuer.clone()]
    } else {
        args.audiences
    };
    let verifier = Verifier::new(vec![args.issuer.clone()], audiences.clone(), keys);
    let verified = verifier
        .verify(&token, &audiences, Clock::System.now())
        .map_err(|e| match e {
            TokenError::NotMine => format!(
                "not a token issued by {:?} (or not a JWT at all)",
                args.issuer
            ),
            e => e.to_string(),
        })?;
    let claims: Value = serde_json::from_slice(&verified.claims.to_json())?;
    #[allow(clippy::print_stdout)] // the command's output
    {
        println!("{}", serde_json::to_string_pretty(&claims)?);
    }
    tracing::info!(audiences = ?verified.audiences, "valid: signature, issuer, audience and time");
    Ok(())
}

#[derive(Debug, serde::Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

#[derive(serde::Deserialize)]
struct Jwks {
    keys: Vec<Value>,
}

/// Which CAs the client trusts, for the hint on a failed connection.
#[derive(Debug, Clone, Copy)]
enum Trust {
    /// `--ca-file`'s, beside the system's.
    CaFile,
    /// The system's only.
    System,
}

/// How many redirects a fetch follows (a bucket or CDN in front of discovery may send one or
/// two), as HTTP clients commonly do.
const MAX_REDIRECTS: usize = 10;

/// The HTTPS client: hyper-util's, over kube's rustls (aws-lc-rs).
type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Why `warrant verify` could not fetch what it checks the token against.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// `--ca-file` cannot be read.
    #[error("{path}")]
    ReadCa {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--ca-file` holds something that is not PEM certificates.
    #[error("{path}")]
    CaNotPem {
        /// The file.
        path: String,
        /// The PEM parser's reason.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The TLS configuration cannot be built (the platform's roots cannot be loaded, or a
    /// certificate in `--ca-file` is not one rustls accepts).
    #[error("cannot set up TLS")]
    Tls(#[source] rustls::Error),
    /// A URL (the issuer's, the discovery document's `jwks_uri`, a redirect) does not parse.
    #[error("{url:?} is not a URL")]
    Url {
        /// The text.
        url: String,
        /// The parser's reason.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The request failed: no connection, the TLS handshake. The message carries the whole
    /// chain of causes (the TLS library's "invalid peer certificate: UnknownIssuer", say): the
    /// one line the command prints says why.
    #[error("GET {url}: {}{hint}", crate::causes(.source))]
    Request {
        /// The URL.
        url: String,
        /// What to try, if the cause suggests it.
        hint: &'static str,
        /// hyper-util's error, and its causes.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// The answer's body could not be read.
    #[error("GET {url}: reading the answer: {}", crate::causes(.source))]
    Body {
        /// The URL.
        url: String,
        /// hyper's error.
        #[source]
        source: hyper::Error,
    },
    /// The answer is not the JSON document expected.
    #[error("GET {url}: error decoding response body: {source}")]
    Json {
        /// The URL.
        url: String,
        /// serde's reason.
        #[source]
        source: serde_json::Error,
    },
    /// The server answered with an error status (or a redirect without a usable `Location`).
    #[error("GET {url}: {status}")]
    Status {
        /// The URL.
        url: String,
        /// Its status.
        status: http::StatusCode,
    },
    /// Redirects went on too long.
    #[error("GET {url}: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects {
        /// The URL first asked for.
        url: String,
    },
}

/// The client `verify` fetches with: the system's roots, and `--ca-file`'s beside them.
fn client(ca_file: Option<&Path>) -> Result<HttpClient, FetchError> {
    let mut extra = Vec::new();
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|source| FetchError::ReadCa {
            path: path.display().to_string(),
            source,
        })?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            extra.push(cert.map_err(|source| FetchError::CaNotPem {
                path: path.display().to_string(),
                source,
            })?);
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier =
        rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider.clone())
            .map_err(FetchError::Tls)?;
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(FetchError::Tls)?
        .dangerous() // the platform's verifier: the ordinary checks, not fewer
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

/// Where a redirect from `from` to `location` goes: an absolute URL, or a path on the same
/// origin.
fn redirected(from: &Uri, location: &str) -> Option<String> {
    let to: Uri = location.parse().ok()?;
    if to.scheme().is_some() {
        return Some(to.to_string());
    }
    if location.starts_with('/') && !location.starts_with("//") {
        return Some(format!(
            "{}://{}{location}",
            from.scheme_str()?,
            from.authority()?
        ));
    }
    None
}

/// GETs `url` and reads its JSON answer, following redirects.
async fn fetch<T: serde::de::DeserializeOwned>(
    client: &HttpClient,
    url: &str,
    trust: Trust,
) -> Result<T, FetchError> {
    let mut at = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let uri: Uri = at.parse().map_err(|source| FetchError::Url {
            url: at.clone(),
            source,
        })?;
        let response = client.get(uri.clone()).await.map_err(|source| {
            let hint = match trust {
                Trust::System if source.is_connect() => {
                    " (without --ca-file only the system's CAs are trusted: pass the CA that signed the server's certificate)"
                }
                _ => "",
            };
            FetchError::Request {
                url: at.clone(),
                hint,
                source,
            }
        })?;
        let status = response.status();
        if status.is_redirection() {
            let next = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|location| redirected(&uri, location));
            match next {
                Some(next) => {
                    at = next;
                    continue;
                }
                None => return Err(FetchError::Status { url: at, status }),
            }
        }
        if !status.is_success() {
            return Err(FetchError::Status { url: at, status });
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|source| FetchError::Body {
                url: at.clone(),
                source,
            })?
            .to_bytes();
        return serde_json::from_slice(&body)
            .map_err(|source| FetchError::Json { url: at, source });
    }
    Err(FetchError::TooManyRedirects {
        url: url.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A plain-HTTP server on loopback that answers each request by its path, from `answers`
    /// (path → whole HTTP/1.1 response); its origin.
    async fn server(answers: Vec<(&'static str, String)>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).await.unwrap_or(0) == 1
                {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                let answer = answers.iter().find(|(p, _)| *p == path).map_or_else(
                    || {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .to_owned()
                    },
                    |(_, answer)| answer.clone(),
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            }
        });
        origin
    }

    fn redirect(to: &str) -> String {
        format!(
            "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
    }

    fn ca_file(dir: &Path) -> std::path::PathBuf {
        let cert = rcgen::generate_simple_self_signed(vec!["ca.example".to_owned()]).unwrap();
        let path = dir.join("ca.crt");
        std::fs::write(&path, cert.cert.pem()).unwrap();
        path
    }

    /// `verify` follows redirects (a bucket or CDN in front of discovery), by absolute URL or
    /// by path, up to a bound; reqwest, which it used before, did the same.
    #[tokio::test]
    async fn fetches_follow_redirects_up_to_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let client = client(Some(&ca_file(dir.path()))).unwrap();
        let body = r#"{"issuer":"https://i.example","jwks_uri":"https://i.example/jwks"}"#;
        let origin = server(vec![
            ("/by-path", redirect("/doc")),
            ("/loop", redirect("/loop")),
            (
                "/doc",
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                ),
            ),
        ])
        .await;
        let far = server(vec![("/absolute", redirect(&format!("{origin}/by-path")))]).await;

        let discovery: Discovery = fetch(&client, &format!("{far}/absolute"), Trust::CaFile)
            .await
            .unwrap();
        assert_eq!(discovery.jwks_uri, "https://i.example/jwks");

        let err = fetch::<Discovery>(&client, &format!("{origin}/loop"), Trust::CaFile)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("GET {origin}/loop: more than 10 redirects")
        );
        let err = fetch::<Discovery>(&client, &format!("{origin}/missing"), Trust::CaFile)
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("GET {origin}/missing: 404 Not Found")
        );
    }
}
