//! Structured logs with tracing. Nothing logged anywhere in warrant contains a token or key:
//! handlers log users, names and credential IDs (`JTI=…`), never bearer values.

use std::io::IsTerminal;

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. Lines are handed to a writer thread: a request that logs
/// (every issued token does, at info) never waits for stderr, which under load cost a third of
/// ES256 issuing's throughput when written in place (docs/benchmarks.md). The queue is not
/// lossy: if the writer falls behind by 128,000 lines, loggers wait rather than drop lines.
/// Keep the returned guard until the process ends; dropping it flushes what is queued.
pub(crate) fn init(format: LogFormat, level: &str) -> WorkerGuard {
    // rustls warns once per handshake about client quirks it tolerates (an IP address sent as
    // SNI, which wrk and some HTTP libraries do): noise, not news, unless asked for.
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(format!("rustls=error,{level}")))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("warrant-log")
        // Buffered: the writer thread flushes after each batch it takes off the queue, so a
        // burst of lines is one write, not one per line.
        .finish(std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colours for a terminal only: in a container's log file they are noise.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    guard
}
