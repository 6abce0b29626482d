//! Structured logs with tracing. Nothing logged anywhere in warrant contains a token or key:
//! handlers log users, names and credential IDs (`JTI=…`), never bearer values.

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber.
pub(crate) fn init(format: LogFormat, level: &str) {
    // rustls warns once per handshake about client quirks it tolerates (an IP address sent as
    // SNI, which wrk and some HTTP libraries do): noise, not news, unless asked for.
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(format!("rustls=error,{level}")))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
