//! `warrant verify`: what a relying party (a cloud's token exchange, Vault) does with a token,
//! from the outside: discovery document, JWKS, then an offline check.
//!
//! A key-bound token (its `cnf` names a key, RFC 7800) is checked as a relying party that
//! understands the binding checks it: with the DPoP proof (RFC 9449) that came with it, or the
//! client certificate of the connection it came over (RFC 8705). Without that, it is refused:
//! it is not a bearer token. verify is one offline check and keeps no replay cache, so a proof
//! used before passes here; a relying party must remember the `jti`s it has seen.

use std::error::Error;
use std::io::Read as _;
use std::path::Path;

use bytes::Bytes;
use http::Uri;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use warrant_http::HttpsConnector;

use serde_json::Value;
use warrant_clock::Clock;
use warrant_token::{TokenError, Verifier, VerifyingKey};

use crate::cli::VerifyArgs;

/// Verifies the token and prints its claims; fails with the reason if it is not valid.
pub(crate) async fn run(args: VerifyArgs) -> Result<(), Box<dyn Error>> {
    let (token, proof) = token_and_proof(&args)?;
    let certificate = args
        .client_certificate
        .as_deref()
        .map(read_certificate)
        .transpose()?;
    let client = client(args.ca_file.as_deref())?;

    let keys = issuer_keys(&client, &args).await?;
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
    let presented = Presented {
        proof: proof.as_deref().map(|proof| PresentedProof {
            proof,
            // clap requires both with --dpop-proof.
            method: args.dpop_method.as_deref().unwrap_or_default(),
            uri: args.dpop_uri.as_deref().unwrap_or_default(),
        }),
        certificate: certificate.as_ref().map(|der| der.as_ref()),
    };
    let binding = check_binding(
        &token,
        verified.claims.cnf.as_ref(),
        &presented,
        Clock::System.now(),
    )
    .map_err(|why| BindingFailure(why).to_string())?;
    let claims: Value = serde_json::from_slice(&verified.claims.to_json())?;
    #[allow(clippy::print_stdout)] // the command's output
    {
        println!("{}", serde_json::to_string_pretty(&claims)?);
    }
    match binding {
        Binding::Bearer => tracing::info!(
            audiences = ?verified.audiences,
            "valid: signature, issuer, audience and time"
        ),
        Binding::Bound { dpop, certificate } => tracing::info!(
            audiences = ?verified.audiences,
            dpop_key = dpop.as_deref().unwrap_or(""),
            certificate = certificate.as_deref().unwrap_or(""),
            "valid: signature, issuer, audience, time and key binding (no replay check: verify keeps no cache)"
        ),
    }
    Ok(())
}

/// The token and the DPoP proof as given, each from standard input when `-` (not both).
fn token_and_proof(args: &VerifyArgs) -> Result<(String, Option<String>), Box<dyn Error>> {
    if args.token == "-" && args.dpop_proof.as_deref() == Some("-") {
        return Err("the token and --dpop-proof cannot both be read from standard input".into());
    }
    let read_stdin = || -> Result<String, std::io::Error> {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        Ok(text.trim().to_owned())
    };
    let token = if args.token == "-" {
        read_stdin()?
    } else {
        args.token.trim().to_owned()
    };
    let proof = match args.dpop_proof.as_deref() {
        Some("-") => Some(read_stdin()?),
        Some(proof) => Some(proof.trim().to_owned()),
        None => None,
    };
    Ok((token, proof))
}

/// The issuer's keys, as a relying party finds them: its discovery document (which must name
/// the issuer it was fetched for), then the JWKS it points at; a key that does not parse is
/// skipped, said in the log.
async fn issuer_keys(
    client: &HttpClient,
    args: &VerifyArgs,
) -> Result<Vec<VerifyingKey>, Box<dyn Error>> {
    let issuer = args.issuer.trim_end_matches('/');
    let discovery_url = format!("{issuer}{}", warrant_proto::DISCOVERY_PATH);
    let trust = if args.ca_file.is_some() {
        Trust::CaFile
    } else {
        Trust::System
    };
    let discovery: Discovery = fetch(client, &discovery_url, trust).await?;
    // OpenID Connect Discovery §4.3: the document must name the issuer it was fetched for.
    if discovery.issuer != args.issuer {
        return Err(format!(
            "{discovery_url} names issuer {:?} instead of {:?}",
            discovery.issuer, args.issuer
        )
        .into());
    }
    let jwks: Jwks = fetch(client, &discovery.jwks_uri, trust).await?;
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
    Ok(keys)
}

/// What came with the token for its key binding.
#[derive(Debug, Default, Clone, Copy)]
struct Presented<'a> {
    /// A DPoP proof and the request it came with.
    proof: Option<PresentedProof<'a>>,
    /// The DER of the client certificate of the connection the token came over.
    certificate: Option<&'a [u8]>,
}

/// A DPoP proof and the request it came with.
#[derive(Debug, Clone, Copy)]
struct PresentedProof<'a> {
    proof: &'a str,
    method: &'a str,
    uri: &'a str,
}

/// What the binding check found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Binding {
    /// The token names no key: a bearer token.
    Bearer,
    /// The token is bound, and what came with it matches: the DPoP key's thumbprint, the
    /// certificate's.
    Bound {
        dpop: Option<String>,
        certificate: Option<String>,
    },
}

/// A binding that does not hold, worded for the command line: the check's reason, and which
/// flags give the evidence. Names bindings by their thumbprints, never the token or the proof.
struct BindingFailure(warrant_token::BindingError);

impl std::fmt::Display for BindingFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use warrant_token::BindingError as E;
        match &self.0 {
            E::ProofMissing { jkt } => write!(
                f,
                "the token is bound to a DPoP key (cnf.jkt {jkt}) and is not valid as a bearer \
                 token: give the proof that came with it (--dpop-proof, --dpop-method, --dpop-uri)"
            ),
            E::CertificateMissing { x5t } => write!(
                f,
                "the token is bound to a client certificate (cnf x5t#S256 {x5t}) and is not \
                 valid as a bearer token: give the certificate of the connection it came over \
                 (--client-certificate)"
            ),
            E::NotDpopBound => f.write_str(
                "--dpop-proof was given, but the token is not bound to a DPoP key (it has no cnf.jkt)",
            ),
            E::NotCertificateBound => f.write_str(
                "--client-certificate was given, but the token is not bound to a certificate (it \
                 has no cnf x5t#S256)",
            ),
            E::Proof(why) => write!(f, "the DPoP proof is not valid for this token: {why}"),
            E::Certificate { .. } | E::Unusable(_) => self.0.fmt(f),
        }
    }
}

/// Whether `token`, with its `cnf` (read with its claims, signature verified), holds with what
/// was `presented` at `now`, by the one check of a binding (`warrant_token::check_binding`): a
/// bound token needs the evidence for each binding it has, evidence for a binding it does not
/// have is refused (a caller who thinks the token is bound should learn that it is not), and a
/// `cnf` warrant does not understand is refused whatever came with it.
fn check_binding(
    token: &str,
    cnf: Option<&warrant_token::Cnf>,
    presented: &Presented<'_>,
    now: jiff::Timestamp,
) -> Result<Binding, warrant_token::BindingError> {
    let certificate = presented
        .certificate
        .map(warrant_token::certificate_thumbprint);
    let evidence = warrant_token::Evidence {
        dpop_proof: presented.proof.is_some(),
        certificate: certificate
            .as_deref()
            .map_or(warrant_token::CertificateEvidence::None, |thumbprint| {
                warrant_token::CertificateEvidence::Given(thumbprint)
            }),
    };
    let prove = |jkt: &str| {
        let given = presented.proof.ok_or(warrant_token::DpopError::NotOne)?;
        let request = warrant_token::ProofRequest {
            method: given.method,
            uri: given.uri,
            access_token: Some(token),
            bound_to: Some(jkt),
        };
        warrant_token::verify_proof(
            given.proof,
            &request,
            now,
            warrant_token::DEFAULT_PROOF_WINDOW_SECONDS,
        )
    };
    Ok(match warrant_token::check_binding(cnf, &evidence, prove)? {
        None => Binding::Bearer,
        Some(bound) => Binding::Bound {
            dpop: bound.jkt.clone(),
            certificate: bound.x5t_s256.clone(),
        },
    })
}

/// Why `--client-certificate` cannot be used.
#[derive(Debug, thiserror::Error)]
enum CertificateFileError {
    /// The file cannot be read.
    #[error("--client-certificate {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM certificate, or a broken one.
    #[error("--client-certificate {path} holds no PEM certificate")]
    NotPem {
        /// The file.
        path: String,
    },
}

/// The first certificate (the leaf) of a PEM file, as DER.
fn read_certificate(path: &Path) -> Result<CertificateDer<'static>, CertificateFileError> {
    let pem = std::fs::read(path).map_err(|source| CertificateFileError::Read {
        path: path.display().to_string(),
        source,
    })?;
    CertificateDer::pem_slice_iter(&pem)
        .next()
        .and_then(Result::ok)
        .ok_or_else(|| CertificateFileError::NotPem {
            path: path.display().to_string(),
        })
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

/// The HTTPS client: hyper-util's, over warrant's one connector (warrant-http).
type HttpClient = Client<HttpsConnector, Empty<Bytes>>;

/// Why `warrant verify` could not fetch what it checks the token against.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// `--ca-file` cannot be read, is not PEM or holds no certificate.
    #[error(transparent)]
    CaFile(#[from] warrant_http::CaFileError),
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

/// The client `verify` fetches with: the system's roots, and `--ca-file`'s beside them. It
/// fetches from `http://` URLs too, anywhere: it sends no credential, and what it fetches is
/// public.
fn client(ca_file: Option<&Path>) -> Result<HttpClient, FetchError> {
    let trust = match ca_file {
        Some(path) => warrant_http::Trust::system_and_file(path)?,
        None => warrant_http::Trust::System,
    };
    let options = warrant_http::Options {
        plain_http: true,
        ..warrant_http::Options::default()
    };
    let https = warrant_http::https_connector(&trust, options).map_err(FetchError::Tls)?;
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

    mod binding {
        use serde_json::json;
        use warrant_testkit::{DpopHolder, sha256_b64url};

        use super::super::*;
        use warrant_token::BindingError;

        const NOW: i64 = 1_700_000_000;
        const TOKEN: &str = "eyJhbGciOiJFUzI1NiJ9.e30.c2lnbmF0dXJl";
        const URI: &str = "https://vault.example/v1/auth/jwt/login";

        fn now() -> jiff::Timestamp {
            jiff::Timestamp::from_second(NOW).unwrap()
        }

        /// A good proof by `holder` (warrant-testkit's: aws-lc-rs by the RFC's recipe, not
        /// warrant-token's code) for GET [`URI`] with [`TOKEN`].
        fn good(holder: &DpopHolder) -> String {
            holder.proof(&json!({"jti": "j1", "htm": "GET", "htu": URI, "iat": NOW,
                                 "ath": sha256_b64url(TOKEN.as_bytes())}))
        }

        fn with_proof(proof: &str) -> Presented<'_> {
            Presented {
                proof: Some(PresentedProof {
                    proof,
                    method: "GET",
                    uri: URI,
                }),
                certificate: None,
            }
        }

        /// The binding check of a token whose claims have `cnf`, read as claims are read.
        fn check(cnf: Option<Value>, presented: &Presented<'_>) -> Result<Binding, BindingError> {
            let cnf: Option<warrant_token::Cnf> =
                cnf.map(|cnf| serde_json::from_value(cnf).unwrap());
            check_binding(TOKEN, cnf.as_ref(), presented, now())
        }

        #[test]
        fn an_unbound_token_is_a_bearer_token_and_takes_no_evidence() {
            let holder = DpopHolder::new();
            let proof = good(&holder);
            assert_eq!(check(None, &Presented::default()), Ok(Binding::Bearer));
            assert_eq!(
                check(None, &with_proof(&proof)),
                Err(BindingError::NotDpopBound)
            );
            let certificate = Presented {
                certificate: Some(b"der"),
                ..Presented::default()
            };
            assert_eq!(
                check(None, &certificate),
                Err(BindingError::NotCertificateBound)
            );
            // Bound to a certificate only: a proof is no evidence for it.
            let cnf = json!({"x5t#S256": sha256_b64url(b"der")});
            assert_eq!(
                check(Some(cnf), &with_proof(&proof)),
                Err(BindingError::NotDpopBound)
            );
        }

        /// A DPoP-bound token is not a bearer token: without a proof it is refused, and the
        /// message names the binding and the flags, never the token.
        #[test]
        fn a_dpop_bound_token_needs_a_proof_by_its_key() {
            let (holder, other) = (DpopHolder::new(), DpopHolder::new());
            let cnf = || Some(json!({"jkt": holder.thumbprint()}));
            let refused = check(cnf(), &Presented::default()).unwrap_err();
            assert_eq!(
                refused,
                BindingError::ProofMissing {
                    jkt: holder.thumbprint()
                }
            );
            let message = BindingFailure(refused.clone()).to_string();
            assert!(message.contains(&holder.thumbprint()), "{message}");
            assert!(message.contains("--dpop-proof"), "{message}");
            assert!(!message.contains(TOKEN), "{message}");

            assert_eq!(
                check(cnf(), &with_proof(&good(&holder))),
                Ok(Binding::Bound {
                    dpop: Some(holder.thumbprint()),
                    certificate: None
                })
            );
            // Another key's proof, otherwise perfect.
            assert_eq!(
                check(cnf(), &with_proof(&good(&other))),
                Err(BindingError::Proof(warrant_token::DpopError::Thumbprint))
            );
            // The proof must be for this token (ath), this request, and now.
            let cases = [
                (
                    json!({"ath": sha256_b64url("another.token.x".as_bytes())}),
                    warrant_token::DpopError::TokenHash,
                ),
                (json!({"htm": "POST"}), warrant_token::DpopError::Method),
                (
                    json!({"htu": "https://elsewhere.example/v1/auth/jwt/login"}),
                    warrant_token::DpopError::Uri,
                ),
                (
                    json!({"iat": NOW - 61}),
                    warrant_token::DpopError::Stale(60),
                ),
            ];
            for (change, error) in cases {
                let mut claims = json!({"jti": "j1", "htm": "GET", "htu": URI, "iat": NOW,
                                        "ath": sha256_b64url(TOKEN.as_bytes())});
                for (k, v) in change.as_object().unwrap() {
                    claims[k] = v.clone();
                }
                let proof = holder.proof(&claims);
                assert_eq!(
                    check(cnf(), &with_proof(&proof)),
                    Err(BindingError::Proof(error.clone())),
                    "{change}"
                );
            }
            // No ath at all.
            let proof = holder.proof(&json!({"jti": "j1", "htm": "GET", "htu": URI, "iat": NOW}));
            assert_eq!(
                check(cnf(), &with_proof(&proof)),
                Err(BindingError::Proof(
                    warrant_token::DpopError::MissingTokenHash
                ))
            );
            // The same proof twice passes twice: verify keeps no replay cache (documented).
            let proof = good(&holder);
            assert!(check(cnf(), &with_proof(&proof)).is_ok());
            assert!(check(cnf(), &with_proof(&proof)).is_ok());
        }

        /// RFC 8705: the certificate's SHA-256 (of its DER, base64url) must be x5t#S256.
        #[test]
        fn a_certificate_bound_token_needs_its_certificate() {
            let cert = rcgen::generate_simple_self_signed(vec!["client".to_owned()]).unwrap();
            let other = rcgen::generate_simple_self_signed(vec!["client".to_owned()]).unwrap();
            let der = cert.cert.der().to_vec();
            // The thumbprint by the RFC's recipe, computed here.
            let x5t = sha256_b64url(&der);
            let cnf = || Some(json!({"x5t#S256": x5t}));
            assert_eq!(
                check(cnf(), &Presented::default()),
                Err(BindingError::CertificateMissing { x5t: x5t.clone() })
            );
            let presented = Presented {
                certificate: Some(&der),
                ..Presented::default()
            };
            assert_eq!(
                check(cnf(), &presented),
                Ok(Binding::Bound {
                    dpop: None,
                    certificate: Some(x5t.clone())
                })
            );
            let wrong = Presented {
                certificate: Some(other.cert.der()),
                ..Presented::default()
            };
            assert!(matches!(
                check(cnf(), &wrong),
                Err(BindingError::Certificate { bound, .. }) if bound == x5t
            ));
        }

        /// A cnf verify cannot check (another method, a member that is no string, not an
        /// object) is never taken for a bearer token, whatever evidence comes with it.
        #[test]
        fn an_unknown_confirmation_is_refused() {
            let holder = DpopHolder::new();
            let proof = good(&holder);
            for cnf in [
                json!({"jwk": {"kty": "EC"}}),
                json!({"jkt": 5}),
                json!({"jkt": holder.thumbprint(), "kid": "k"}),
                json!("jkt"),
                json!(null),
                json!({}),
            ] {
                for presented in [Presented::default(), with_proof(&proof)] {
                    let refused = check(Some(cnf.clone()), &presented).unwrap_err();
                    assert!(
                        matches!(refused, BindingError::Unusable(_)),
                        "{cnf}: {refused:?}"
                    );
                    let message = BindingFailure(refused).to_string();
                    assert!(
                        message.ends_with("the token is not valid anywhere"),
                        "{message}"
                    );
                }
            }
        }
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
