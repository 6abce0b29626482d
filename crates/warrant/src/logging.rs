//! Structured logs with tracing. Nothing logged anywhere in warrant contains a token or key:
//! handlers log users, names and credential IDs (`JTI=…`), never bearer values.
//!
//! A logged value may come from a client (a claim's `sub` handed to the signer, a user name, a
//! reason quoting input), so no value can break a line: the text format escapes every control
//! character in messages and field values ([`EscapedFields`]: a newline is written `\n`, ESC
//! `\u{1b}`), so a line in the log is always one event, and no value can drive a terminal. The
//! JSON format's encoder escapes them already (`jsonlog`).

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

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
    // SNI, which wrk and some HTTP libraries do): noise, not news, unless asked for. The
    // platform verifier logs each certificate it refuses, and returns the same cause to its
    // caller, whose error says it (`warrant verify` without `--ca-file`): said twice, otherwise.
    let wanted = match (level, verbosity) {
        (Some(level), _) => level.to_owned(),
        (None, Some(3..=4)) => "info,warrant=debug".to_owned(),
        (None, Some(5..)) => "info,warrant=trace".to_owned(),
        (None, _) => "info".to_owned(),
    };
    format!("rustls=error,rustls_platform_verifier=off,{wanted}")
}

/// Installs the global subscriber. Lines are handed to a writer thread ([`crate::logwriter`]):
/// a request that logs (every issued token does, at info) never waits for stderr, and what
/// waits for a slow reader is bounded in bytes ([`crate::logwriter::QUEUE_BYTES`]); past it
/// lines are dropped and counted. Keep the returned guard until the process ends; dropping it
/// writes what is queued.
pub(crate) fn init(
    format: LogFormat,
    level: Option<&str>,
    verbosity: Option<u32>,
) -> std::io::Result<crate::logwriter::LogGuard> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(filter_directives(level, verbosity)))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let (sink, guard) = crate::logwriter::spawn(std::io::stderr(), crate::logwriter::QUEUE_BYTES)?;
    let writer = move || sink.clone();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colours for a terminal only: in a container's log file they are noise.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.fmt_fields(EscapedFields).init(),
        LogFormat::Json => builder.event_format(crate::jsonlog::JsonLines).init(),
    }
    if level.is_some() && verbosity.is_some() {
        tracing::warn!("-v is ignored: --log-level is given, and wins");
    }
    Ok(guard)
}

/// The text format's fields: tracing-subscriber's layout (the message, then `name=value`
/// separated by spaces), with control characters in the message and in every value escaped.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EscapedFields;

impl<'a> MakeVisitor<Writer<'a>> for EscapedFields {
    type Visitor = EscapingVisitor<'a>;

    fn make_visitor(&self, target: Writer<'a>) -> Self::Visitor {
        EscapingVisitor {
            writer: target,
            first: true,
            result: Ok(()),
        }
    }
}

/// Writes one event's (or span's) fields; see [`EscapedFields`].
pub(crate) struct EscapingVisitor<'a> {
    writer: Writer<'a>,
    first: bool,
    result: fmt::Result,
}

impl EscapingVisitor<'_> {
    /// Writes `name=` (nothing for the message) and then `value` through [`Escaping`].
    fn field(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() {
            return;
        }
        let name = field.name();
        // The `log` crate's metadata, which the formatter shows in its own place.
        if name.starts_with("log.") {
            return;
        }
        self.result = (|| {
            if !std::mem::take(&mut self.first) {
                self.writer.write_char(' ')?;
            }
            if name != "message" {
                let name = name.strip_prefix("r#").unwrap_or(name);
                if self.writer.has_ansi_escapes() {
                    write!(self.writer, "\x1b[3m{name}\x1b[0m\x1b[2m=\x1b[0m")?;
                } else {
                    write!(self.writer, "{name}=")?;
                }
            }
            Escaping(&mut self.writer).write_fmt(value)
        })();
    }
}

impl Visit for EscapingVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        // Strings are quoted, as tracing-subscriber writes them, except the message.
        if field.name() == "message" {
            self.field(field, format_args!("{value}"));
        } else {
            self.field(field, format_args!("{value:?}"));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        self.field(field, format_args!("{text}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.field(field, format_args!("{value:?}"));
    }
}

impl VisitOutput<fmt::Result> for EscapingVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for EscapingVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// Passes text on with control characters escaped: `\n`, `\r` and `\t` as such, every other
/// one (ESC, DEL, the C1 range; the Unicode line and paragraph separators too) as `\u{…}`.
struct Escaping<'w, W: fmt::Write>(&'w mut W);

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

impl<W: fmt::Write> fmt::Write for Escaping<'_, W> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let mut rest = text;
        while let Some(at) = rest.find(needs_escape) {
            let (clean, tail) = rest.split_at(at);
            self.0.write_str(clean)?;
            let mut chars = tail.chars();
            match chars.next() {
                Some('\n') => self.0.write_str("\\n")?,
                Some('\r') => self.0.write_str("\\r")?,
                Some('\t') => self.0.write_str("\\t")?,
                Some(c) => write!(self.0, "\\u{{{:x}}}", u32::from(c))?,
                None => {}
            }
            rest = chars.as_str();
        }
        self.0.write_str(rest)
    }
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
            assert_eq!(
                filter_directives(None, v),
                "rustls=error,rustls_platform_verifier=off,info"
            );
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

    /// The platform verifier's line about a refused certificate is not logged: the caller's
    /// error carries the same cause, in its one line.
    #[test]
    fn the_certificate_verifiers_own_line_is_left_out() {
        for directives in [
            filter_directives(None, None),
            filter_directives(None, Some(9)),
            filter_directives(Some("debug"), None),
        ] {
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(EnvFilter::new(&directives))
                .with_writer(std::io::sink)
                .finish();
            tracing::subscriber::with_default(subscriber, || {
                assert!(!tracing::enabled!(
                    target: "rustls_platform_verifier::verification::others",
                    Level::ERROR
                ));
                assert!(tracing::enabled!(target: "rustls::server", Level::ERROR));
            });
        }
    }

    #[test]
    fn log_level_wins_over_verbosity() {
        assert_eq!(
            filter_directives(Some("warn"), Some(5)),
            "rustls=error,rustls_platform_verifier=off,warn"
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

    /// What the text format writes for the events `log` emits.
    fn text_lines(log: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(EscapedFields)
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    /// A value or message with a newline cannot forge a second line, nor an escape sequence
    /// reach a terminal: each is written escaped, however it was recorded.
    #[test]
    fn control_characters_in_values_and_messages_are_escaped() {
        let sub = "system:serviceaccount:demo:app\nINFO forged line";
        let jti = "id\x1b[31mred\r\t\u{7f}\u{85}\u{2028}";
        let text = text_lines(|| {
            tracing::info!(subject = %sub, credential_id = %format!("JTI={jti}"), quoted = sub, debugged = ?jti, "signed\n{sub}");
            tracing::warn!(
                error = &std::io::Error::other("bad\ninput") as &(dyn std::error::Error + 'static),
                "plain"
            );
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(
            lines[0],
            r#" INFO signed\nsystem:serviceaccount:demo:app\nINFO forged line subject=system:serviceaccount:demo:app\nINFO forged line credential_id=JTI=id\u{1b}[31mred\r\t\u{7f}\u{85}\u{2028} quoted="system:serviceaccount:demo:app\nINFO forged line" debugged="id\u{1b}[31mred\r\t\u{7f}\u{85}\u{2028}""#
        );
        assert_eq!(lines[1], r#" WARN plain error=bad\ninput"#);
        assert!(!text.contains('\x1b'), "{text}");
    }

    /// Plain values keep tracing-subscriber's layout.
    #[test]
    fn plain_values_read_as_before() {
        let text = text_lines(|| {
            tracing::info!(user = %"admin", count = 3_u64, ok = true, name = "x y", r#type = "pod", "issued a token");
        });
        assert_eq!(
            text,
            " INFO issued a token user=admin count=3 ok=true name=\"x y\" type=\"pod\"\n"
        );
    }
}
