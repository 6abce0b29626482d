//! `warrant verify`: what a relying party (a cloud's token exchange, Vault) does with a token,
//! from the outside: discovery document, JWKS, then an offline check.

use std::error::Error;
use std::io::Read as _;

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
    let mut client = reqwest::Client::builder();
    if let Some(path) = &args.ca_file {
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        client = client.tls_certs_merge(certs);
    }
    let client = client.build()?;

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

#[derive(serde::Deserialize)]
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

/// Why a document could not be fetched. The message carries the whole chain of causes (the
/// TLS library's "invalid peer certificate: UnknownIssuer", say): the one line the command
/// prints says why.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    /// The request failed: no connection, the TLS handshake, a body that is not the document.
    #[error("GET {url}: {}{hint}", crate::causes(.source))]
    Request {
        /// The URL.
        url: String,
        /// What to try, if the cause suggests it.
        hint: &'static str,
        /// reqwest's error, and its causes.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("GET {url}: {status}")]
    Status {
        /// The URL.
        url: String,
        /// Its status.
        status: reqwest::StatusCode,
    },
}

async fn fetch<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    trust: Trust,
) -> Result<T, FetchError> {
    let failed = |source: reqwest::Error| {
        let hint = match trust {
            Trust::System if source.is_connect() => {
                " (without --ca-file only the system's CAs are trusted: pass the CA that signed the server's certificate)"
            }
            _ => "",
        };
        FetchError::Request {
            url: url.to_owned(),
            hint,
            source,
        }
    };
    let response = client.get(url).send().await.map_err(failed)?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Status {
            url: url.to_owned(),
            status,
        });
    }
    response.json().await.map_err(failed)
}
