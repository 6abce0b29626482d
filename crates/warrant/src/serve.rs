//! `warrant serve`: validate the flags as kube-apiserver does, load keys, TLS, callers and
//! objects, and serve until SIGTERM or SIGINT.

use std::error::Error;
use std::net::SocketAddr;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use warrant_objects::Objects;
use warrant_server::{
    AppState, Authenticator, Clock, Settings, StateParts, TlsFiles, TokenFile, router, serve,
    server_config, validate_issuers, validate_max_expiration,
};
use warrant_token::{ExpirationPolicy, validate_jwks_uri};

use crate::cli::ServeArgs;
use crate::objects;

/// Runs the server.
pub(crate) async fn run(args: ServeArgs) -> Result<(), Box<dyn Error>> {
    let settings = settings(&args)?;
    let keys = warrant_keys::load_static(&args.signing_key_file, &args.key_files)?;
    let tls = server_config(&TlsFiles {
        cert: args.tls_cert_file.clone(),
        key: args.tls_private_key_file.clone(),
        client_ca: args.client_ca_file.clone(),
    })?;
    let token_file = match &args.token_auth_file {
        Some(path) => Some(TokenFile::load(path)?),
        None => None,
    };
    if token_file.is_none() && args.client_ca_file.is_none() {
        tracing::warn!(
            "neither --token-auth-file nor --client-ca-file is set: no caller can authenticate, so TokenRequest and TokenReview will answer 401"
        );
    }

    let clock = Clock::System;
    let mut registry = Registry::default();
    let (source, _objects) =
        objects::open(&args, &mut registry, clock.clone(), clock.now()).await?;

    let state = AppState::new(StateParts {
        settings,
        keys,
        objects: Objects::new(source),
        authenticator: Authenticator { token_file },
        registry,
        clock,
    });
    let published = state.published();
    if let Err(why) = published.discovery() {
        tracing::warn!(
            reason = %why,
            "OIDC discovery and JWKS endpoints are disabled (kube-apiserver does the same): relying parties cannot fetch the keys"
        );
    }

    let address = SocketAddr::new(args.bind_address, args.secure_port);
    let listener = TcpListener::bind(address)
        .await
        .map_err(|e| format!("cannot listen on {address}: {e}"))?;
    let local = listener.local_addr()?;
    tracing::info!(
        address = %local,
        issuer = %state.settings().issuers.first().map(String::as_str).unwrap_or_default(),
        signing_kid = %published.keys().signing_at(state.clock().now()).kid(),
        alg = %published.keys().signing_at(state.clock().now()).algorithm(),
        "serving"
    );
    serve(listener, tls, router(state), shutdown_signal()).await;
    tracing::info!("stopped");
    Ok(())
}

/// The issuer settings, checked with kube-apiserver's rules.
fn settings(args: &ServeArgs) -> Result<Settings, Box<dyn Error>> {
    validate_issuers(&args.issuers)?;
    let api_audiences: Vec<String> = if args.api_audiences.is_empty() {
        args.issuers.clone()
    } else {
        args.api_audiences
            .iter()
            .filter(|a| !a.is_empty())
            .cloned()
            .collect()
    };
    let max_seconds = match args.max_token_expiration {
        None | Some(0) => None,
        Some(seconds) => {
            validate_max_expiration(seconds)?;
            Some(seconds)
        }
    };
    let jwks_uri = match (&args.jwks_uri, &args.external_hostname) {
        (Some(uri), _) => {
            validate_jwks_uri(uri)?;
            uri.clone()
        }
        (None, Some(host)) if host.contains(':') => format!("https://{host}/openid/v1/jwks"),
        (None, Some(host)) => format!("https://{host}:{}/openid/v1/jwks", args.secure_port),
        (None, None) => {
            let issuer = args.issuers.first().map(String::as_str).unwrap_or_default();
            format!("{}/openid/v1/jwks", issuer.trim_end_matches('/'))
        }
    };
    Ok(Settings {
        issuers: args.issuers.clone(),
        api_audiences,
        jwks_uri,
        expiration: ExpirationPolicy {
            max_seconds,
            extend: args.extend_token_expiration,
            ..ExpirationPolicy::default()
        },
    })
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = interrupt => {},
                    _ = term.recv() => {},
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
    tracing::info!("shutting down: finishing requests in flight");
}
