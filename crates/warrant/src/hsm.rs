//! `--key-pkcs11-uri`: the managed keys' private halves in a PKCS#11 token (an HSM). The token is
//! opened once at startup, off the async threads (loading the module, finding the token and
//! logging in block), with one error naming the URI for each bad configuration.

use prometheus_client::registry::Registry;
use warrant_hsm::{HsmError, HsmMetrics, Pkcs11Holder, Pkcs11Uri, Token, TokenConfig, UriError};

use crate::cli::Pkcs11Args;

/// Why the token could not be opened. Each names `--key-pkcs11-uri` or the token's URI (never a
/// PIN: a URI with one does not parse, and the PIN's errors name only its source).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Pkcs11SetupError {
    /// The URI does not parse, or is refused (`pin-value`).
    #[error("--key-pkcs11-uri: {0}")]
    Uri(#[source] UriError),
    /// The module, the token, the PIN or the login.
    #[error("--key-pkcs11-uri: {0}")]
    Open(#[source] HsmError),
    /// The blocking thread that called the token failed.
    #[error("--key-pkcs11-uri: the thread calling the token failed: {0}")]
    Thread(#[source] tokio::task::JoinError),
}

impl Pkcs11SetupError {
    /// True when the token could not be reached now (rather than being misconfigured).
    pub(crate) fn is_unavailable(&self) -> bool {
        matches!(self, Pkcs11SetupError::Open(error) if error.is_unavailable())
    }
}

/// Opens the token the flags name, or `None` without `--key-pkcs11-uri`. `registry` gets the
/// token's metrics (`serve`).
pub(crate) async fn open(
    args: &Pkcs11Args,
    registry: Option<&mut Registry>,
) -> Result<Option<Pkcs11Holder>, Pkcs11SetupError> {
    let Some(text) = &args.key_pkcs11_uri else {
        return Ok(None);
    };
    let uri = Pkcs11Uri::parse(text).map_err(Pkcs11SetupError::Uri)?;
    let mut config = TokenConfig::new(uri).sessions(usize::from(args.pkcs11_sessions));
    if let Some(module) = &args.pkcs11_module {
        config = config.module(module);
    }
    if let Some(env) = &args.pkcs11_pin_env {
        config = config.pin_env(env);
    }
    let metrics = HsmMetrics::default();
    if let Some(registry) = registry {
        metrics.register(registry);
    }
    let token = tokio::task::spawn_blocking(move || Token::open(config, metrics))
        .await
        .map_err(Pkcs11SetupError::Thread)?
        .map_err(Pkcs11SetupError::Open)?;
    tracing::info!(token = %token.uri(), sessions = args.pkcs11_sessions, "managed keys held in a PKCS#11 token");
    Ok(Some(Pkcs11Holder::new(token)))
}
