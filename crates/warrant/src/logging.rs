//! Structured logs with tracing. Nothing logged anywhere in warrant contains a token or key:
//! handlers log users, names and credential IDs (`JTI=…`), never bearer values.

use std::io::IsTerminal;

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// The filter the flags ask for, in tracing's syntax: `--log-level` if given, else what the
/// klog verbosity `-v` means, else `info`. (`RUST_LOG`, if set and valid, replaces it.)
///
/// `-v` follows kube's conventions (0 to 2 are what a component logs normally, 3 and 4 its
/// debugging, 5 and more its tracing) and raises warrant's own crates only: at `-v 5`
/// hyper's and h2's trace lines would drown warrant's. The `warrant` target is a prefix
/// (tracing matches targets by prefix), so it takes in every `warrant_*` crate.
pub(crate) fn filter_directives(level: Option<&str>, verbosity: Option<u32>) -> String {
    // rustls warns once per handshake about client quirks it tolerates (an IP address sent as
    // SNI, which wrk and some HTTP libraries do): noise, not news, unless asked for.
    let wanted = match (level, verbosity) {
        (Some(level), _) => level.to_owned(),
        (None, Some(3..=4)) => "info,warrant=debug".to_owned(),
        (None, Some(5..)) => "info,warrant=trace".to_owned(),
        (None, _) => "info".to_owned(),
    };
    format!("rustls=error,{wanted}")
}

/// Installs the global subscriber. Lines are handed to a writer thread: a request that logs
/// (every issued token does, at info) never waits for stderr, which under load cost a third of
/// ES256 issuing's throughput when written in place (docs/benchmarks.md). The queue is not
/// lossy: if the writer falls behind by 128,000 lines, loggers wait rather than drop lines.
/// Keep the returned guard until the process ends; dropping it flushes what is queued.
pub(crate) fn init(format: LogFormat, level: Option<&str>, verbosity: Option<u32>) -> WorkerGuard {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter_directives(level, verbosity)))
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
        LogFormat::Json => builder.event_format(crate::jsonlog::JsonLines).init(),
    }
    if level.is_some() && verbosity.is_some() {
        tracing::warn!("-v is ignored: --log-level is given, and wins");
    }
    guard
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    /// What a subscriber with `directives` logs at info, debug and trace: for a warrant
    /// crate, for a dependency, and whether rustls's warnings get through.
    fn logged(directives: &str) -> ([bool; 3], [bool; 3], bool) {
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new(directives))
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            (
                [
                    tracing::enabled!(target: "warrant_server::tls", Level::INFO),
                    tracing::enabled!(target: "warrant_server::tls", Level::DEBUG),
                    tracing::enabled!(target: "warrant_server::tls", Level::TRACE),
                ],
                [
                    tracing::enabled!(target: "hyper::proto", Level::INFO),
                    tracing::enabled!(target: "hyper::proto", Level::DEBUG),
                    tracing::enabled!(target: "hyper::proto", Level::TRACE),
                ],
                tracing::enabled!(target: "rustls::server", Level::WARN),
            )
        })
    }

    const INFO: [bool; 3] = [true, false, false];
    const DEBUG: [bool; 3] = [true, true, false];
    const TRACE: [bool; 3] = [true, true, true];

    #[test]
    fn verbosity_maps_as_klog_levels_do_for_warrant_only() {
        for v in [None, Some(0), Some(1), Some(2)] {
            assert_eq!(filter_directives(None, v), "rustls=error,info");
            assert_eq!(logged(&filter_directives(None, v)), (INFO, INFO, false));
        }
        for v in [3, 4] {
            let directives = filter_directives(None, Some(v));
            assert_eq!(logged(&directives), (DEBUG, INFO, false), "-v {v}");
        }
        for v in [5, 9, u32::MAX] {
            let directives = filter_directives(None, Some(v));
            assert_eq!(logged(&directives), (TRACE, INFO, false), "-v {v}");
        }
    }

    #[test]
    fn log_level_wins_over_verbosity() {
        assert_eq!(
            filter_directives(Some("warn"), Some(5)),
            "rustls=error,warn"
        );
        assert_eq!(
            logged(&filter_directives(Some("warn"), Some(5))),
            ([false; 3], [false; 3], false)
        );
        assert_eq!(
            logged(&filter_directives(Some("debug"), Some(0))),
            (DEBUG, DEBUG, false)
        );
        assert_eq!(
            logged(&filter_directives(
                Some("info,warrant_server=trace"),
                Some(3)
            )),
            (TRACE, INFO, false)
        );
    }
}
