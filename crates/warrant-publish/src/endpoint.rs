//! How an `s3://` target reaches an S3-compatible server (MinIO, Ceph, a cloud's own S3 API):
//! `--publish-endpoint`, `--publish-allow-http` and `--publish-ca-file`.
//!
//! Who controls each input: all three are the operator's flags. What crosses the connection is
//! the bucket's credentials (every request is signed with them, and some schemes send a
//! session token outright) and the documents relying parties will trust, so the connection is
//! TLS unless it never leaves the machine: plain HTTP is accepted to a loopback address
//! (`127.0.0.0/8`, also IPv4-mapped, `::1`, `localhost`: [`warrant_http::Destination`], the
//! rule KMS's endpoint follows too) and otherwise only with `--publish-allow-http`, an
//! explicit word that the network between warrant and the server is trusted (logged as a
//! warning at startup). A name is not resolved to decide: DNS is not the operator's.
//!
//! A server with a private CA is trusted through `--publish-ca-file` (a PEM bundle) alone, in
//! place of the system's roots, as kubectl's `--certificate-authority` is: no public CA can then
//! vouch for it. The file is read as every CA file of warrant's is ([`warrant_http::ca_file`]),
//! once, at startup; its certificates are handed to object_store's client (reqwest on rustls
//! with aws-lc-rs, the one TLS stack), which takes no connector of warrant's own
//! (docs/decisions.md, "The binary's HTTP clients").

use std::path::PathBuf;

use object_store::{Certificate, ClientOptions};
use url::Url;
use warrant_http::Destination;

/// The flags that say how `s3://` targets reach their server. The default is none of them:
/// Amazon S3 itself, over https, trusted through the system's roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// `--publish-endpoint`: the server's URL, addressed path-style.
    pub url: Option<String>,
    /// `--publish-allow-http`: plain HTTP to a host that is not loopback.
    pub allow_http: bool,
    /// `--publish-ca-file`: the CA certificates the server's certificate must chain to.
    pub ca_file: Option<PathBuf>,
}

/// An endpoint that cannot be used. Messages name the flag and say what would do.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Not a URL.
    #[error("--publish-endpoint {url}: not a URL: {source}")]
    Url {
        /// The URL as given.
        url: String,
        /// Why.
        #[source]
        source: url::ParseError,
    },
    /// A URL carrying credentials, a path, a query or a fragment.
    #[error(
        "--publish-endpoint {scheme}://…: give only the server's scheme, host and port (credentials come from the environment; the bucket from the target)"
    )]
    Extras {
        /// The scheme.
        scheme: String,
    },
    /// Neither http nor https.
    #[error("--publish-endpoint {url}: the scheme must be https (or http to loopback)")]
    Scheme {
        /// The URL.
        url: String,
    },
    /// Plain HTTP to a host that is not loopback, without `--publish-allow-http`.
    #[error(
        "--publish-endpoint {url} is plain HTTP to a host that is not loopback: the bucket's credentials and the documents would cross the network in clear. Use https:// (with --publish-ca-file for a private CA), or pass --publish-allow-http if every network between warrant and the server is trusted"
    )]
    PlainHttp {
        /// The URL.
        url: String,
    },
    /// `--publish-allow-http` or `--publish-ca-file` without `--publish-endpoint`.
    #[error("{flag} needs --publish-endpoint (it applies to an S3-compatible server only)")]
    NoEndpoint {
        /// The flag given alone.
        flag: &'static str,
    },
    /// `--publish-ca-file` for an http endpoint.
    #[error(
        "--publish-ca-file: --publish-endpoint {url} is not https, so no certificate is checked"
    )]
    CaOverHttp {
        /// The URL.
        url: String,
    },
    /// The CA file cannot be read, is not PEM or holds no certificate.
    #[error("--publish-ca-file {0}")]
    CaFile(warrant_http::CaFileError),
    /// A certificate of the CA file is not one object_store's client accepts.
    #[error("--publish-ca-file {path}: {why}")]
    CaPem {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// An endpoint checked and ready to configure a client.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The URL, as given.
    pub(crate) url: String,
    /// Plain HTTP (to loopback, or allowed).
    pub(crate) http: bool,
    /// `--publish-ca-file`'s certificates, if given.
    roots: Option<Vec<Certificate>>,
}

impl Endpoint {
    /// An endpoint at `url`, with no other flag.
    pub fn at(url: &str) -> Endpoint {
        Endpoint {
            url: Some(url.to_owned()),
            ..Endpoint::default()
        }
    }

    /// True if any flag is set.
    pub fn is_set(&self) -> bool {
        *self != Endpoint::default()
    }

    /// Checks the flags (see the module documentation) and reads the CA file; `None` without an
    /// endpoint.
    pub(crate) fn check(&self) -> Result<Option<Checked>, EndpointError> {
        let Some(url) = &self.url else {
            if self.allow_http {
                return Err(EndpointError::NoEndpoint {
                    flag: "--publish-allow-http",
                });
            }
            if self.ca_file.is_some() {
                return Err(EndpointError::NoEndpoint {
                    flag: "--publish-ca-file",
                });
            }
            return Ok(None);
        };
        let parsed = Url::parse(url).map_err(|source| EndpointError::Url {
            url: url.clone(),
            source,
        })?;
        let destination = Destination::of(Some(parsed.scheme()), parsed.host_str());
        if destination == Destination::NotHttp {
            return Err(EndpointError::Scheme { url: url.clone() });
        }
        if !parsed.username().is_empty()
            || parsed.password().is_some()
            || parsed.query().is_some()
            || parsed.fragment().is_some()
            || !parsed.path().trim_matches('/').is_empty()
        {
            return Err(EndpointError::Extras {
                scheme: parsed.scheme().to_owned(),
            });
        }
        let http = match destination {
            Destination::Https => false,
            Destination::LoopbackHttp => true,
            Destination::RemoteHttp if self.allow_http => {
                tracing::warn!(
                    endpoint = %url,
                    "--publish-allow-http: the bucket's credentials and the documents cross the network to this endpoint in clear"
                );
                true
            }
            Destination::RemoteHttp => return Err(EndpointError::PlainHttp { url: url.clone() }),
            Destination::NotHttp => return Err(EndpointError::Scheme { url: url.clone() }),
        };
        let roots = match &self.ca_file {
            None => None,
            Some(_) if http => return Err(EndpointError::CaOverHttp { url: url.clone() }),
            Some(path) => Some(read_roots(path)?),
        };
        Ok(Some(Checked {
            url: url.clone(),
            http,
            roots,
        }))
    }
}

impl Checked {
    /// `base` with this endpoint's trust: the CA file's certificates alone, if given.
    pub(crate) fn client_options(&self, base: ClientOptions) -> ClientOptions {
        let Some(roots) = &self.roots else {
            return base;
        };
        roots
            .iter()
            .cloned()
            .fold(base.with_no_system_certificates(true), |options, root| {
                options.with_root_certificate(root)
            })
    }
}

/// The certificates of the PEM bundle at `path`, for object_store's client; at least one.
fn read_roots(path: &std::path::Path) -> Result<Vec<Certificate>, EndpointError> {
    let certificates = warrant_http::ca_file(path).map_err(EndpointError::CaFile)?;
    certificates
        .iter()
        .map(|der| {
            Certificate::from_der(der).map_err(|e| EndpointError::CaPem {
                path: path.display().to_string(),
                why: format!("a certificate object_store's client does not accept: {e}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(endpoint: Endpoint) -> Result<Option<Checked>, String> {
        endpoint.check().map_err(|e| e.to_string())
    }

    /// Plain HTTP only to loopback or with the flag; https always; nothing else.
    #[test]
    fn plain_http_is_refused_except_to_loopback_or_when_allowed() {
        for url in [
            "http://127.0.0.1:9000",
            "http://127.8.9.10",
            "http://[::1]:9000",
            "http://[::ffff:127.0.0.1]:9000",
            "http://localhost:9000",
            "http://LOCALHOST",
        ] {
            let checked = check(Endpoint::at(url)).unwrap().unwrap();
            assert!(checked.http, "{url}");
        }
        for url in [
            "https://minio.internal:9000",
            "https://10.0.0.5",
            "https://minio.internal/",
        ] {
            let checked = check(Endpoint::at(url)).unwrap().unwrap();
            assert!(!checked.http, "{url}");
        }
        for url in [
            "http://minio.internal:9000",
            "http://10.0.0.5:9000",
            "http://0.0.0.0:9000",
            "http://[::]:9000",
            "http://localhost.example.com",
            "http://127.0.0.1.nip.io",
        ] {
            let error = check(Endpoint::at(url)).unwrap_err();
            assert!(
                error.contains("plain HTTP") && error.contains("--publish-allow-http"),
                "{url}: {error}"
            );
            let allowed = Endpoint {
                allow_http: true,
                ..Endpoint::at(url)
            };
            assert!(check(allowed).unwrap().unwrap().http, "{url}");
        }
        for (url, says) in [
            ("ftp://minio.internal", "scheme must be https"),
            ("https://key:secret@minio.internal", "only the server's"),
            ("https://minio.internal/bucket", "only the server's"),
            ("https://minio.internal?x=1", "only the server's"),
            ("minio.internal:9000", "scheme must be https"),
        ] {
            let error = check(Endpoint::at(url)).unwrap_err();
            assert!(error.contains(says), "{url}: {error}");
            assert!(!error.contains("secret"), "{error}");
        }
        assert!(check(Endpoint::default()).unwrap().is_none());
        let alone = Endpoint {
            allow_http: true,
            ..Endpoint::default()
        };
        assert!(
            check(alone)
                .unwrap_err()
                .contains("needs --publish-endpoint")
        );
    }

    #[test]
    fn a_ca_file_must_hold_certificates_for_an_https_endpoint() {
        let dir = tempfile::tempdir().unwrap();
        let ca = warrant_testkit::TestCa::new("private-s3");
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, ca.pem()).unwrap();
        let with = |url: &str, path: &std::path::Path| Endpoint {
            ca_file: Some(path.to_owned()),
            ..Endpoint::at(url)
        };
        assert!(check(with("https://minio.internal", &good)).is_ok());
        let error = check(with("http://127.0.0.1:9000", &good)).unwrap_err();
        assert!(error.contains("not https"), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = check(with("https://minio.internal", &empty)).unwrap_err();
        assert!(error.contains("no CERTIFICATE block"), "{error}");
        let error = check(with("https://minio.internal", &dir.path().join("absent"))).unwrap_err();
        assert!(error.contains("absent"), "{error}");
        let alone = Endpoint {
            ca_file: Some(good),
            ..Endpoint::default()
        };
        assert!(
            check(alone)
                .unwrap_err()
                .contains("needs --publish-endpoint")
        );
    }
}
