//! `warrant serve`: validate the flags as kube-apiserver does, load keys, TLS, callers and
//! objects, and serve until SIGTERM or SIGINT.

use std::error::Error;
use std::net::SocketAddr;

use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use warrant_objects::Objects;
use warrant_server::{
    AppState, Clock, ServingCertificate, Settings, StateParts, TlsFiles, router, serve,
    server_config, validate_issuers, validate_max_expiration,
};
use warrant_token::{ExpirationPolicy, validate_jwks_uri};

use crate::cli::ServeArgs;
use crate::{auth, objects};

/// Runs the server.
pub(crate) async fn run(args: ServeArgs) -> Result<(), Box<dyn Error>> {
    let settings = settings(&args)?;
    let keys = warrant_keys::load_static(&args.signing_key_file, &args.key_files)?;
    let certificate = ServingCertificate::load(&TlsFiles {
        cert: args.tls_cert_file.clone(),
        key: args.tls_private_key_file.clone(),
    })?;
    let _certificate_watch = certificate.watch()?;

    let clock = Clock::System;
    let mut registry = Registry::default();
    certificate.register_metrics(&mut registry);
    let auth = auth::setup(
        &args.auth,
        args.client_ca_file.as_ref(),
        args.token_auth_file.as_ref(),
        args.kubeconfig.as_ref(),
        &mut registry,
    )
    .await?;
    let tls = server_config(&certificate, &auth.trust)?;
    let (source, _objects) =
        objects::open(&args, &mut registry, clock.clone(), clock.now()).await?;

    let state = AppState::new(StateParts {
        settings,
        keys,
        objects: Objects::new(source),
        authenticator: auth.authenticator,
        authorizer: auth.authorizer,
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
        signing_kid = %published.keys().signing().kid(),
        alg = %published.keys().signing().algorithm(),
        "serving"
    );
    let _auth = auth.running;
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
