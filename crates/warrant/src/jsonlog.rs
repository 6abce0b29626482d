//! The JSON log format: one object per line, `timestamp`, `level`, `message`, the event's
//! fields, `target`, in that order (tracing-subscriber's own JSON layout, flattened). What it
//! adds: fields that hold a list ([`warrant_audit::JSON_FIELDS`], written with
//! [`warrant_audit::JsonList`]) are JSON arrays in the line, not strings of JSON, so that
//! `jq '.audiences[]'` works on a log line as on an audit event.

use std::fmt::Write as _;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event formatter of `--logging-format json`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct JsonLines;

/// The fields of one event, in the order they were recorded.
struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    fn push(&mut self, field: &Field, value: Value) {
        self.0.push((field.name(), value));
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if warrant_audit::JSON_FIELDS.contains(&field.name())
            && let Ok(list @ Value::Array(_)) = serde_json::from_str::<Value>(&text)
        {
            self.push(field, list);
            return;
        }
        self.push(field, Value::String(text));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, Value::String(value.to_owned()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, value.into());
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, Value::String(value.to_string()));
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        let metadata = event.metadata();
        let mut fields = Fields(Vec::with_capacity(8));
        event.record(&mut fields);
        // The message first, as tracing-subscriber's layout has it.
        fields.0.sort_by_key(|(name, _)| *name != "message");
        let mut line = String::with_capacity(256);
        let mut put = |name: &str, value: &Value| {
            line.push(if line.is_empty() { '{' } else { ',' });
            // Names and values are JSON-encoded; a string cannot fail to encode.
            let _ = write!(line, "{}:{}", Value::String(name.to_owned()), value);
        };
        put("timestamp", &Value::String(timestamp));
        put(
            "level",
            &Value::String(metadata.level().as_str().to_owned()),
        );
        for (name, value) in &fields.0 {
            put(name, value);
        }
        put("target", &Value::String(metadata.target().to_owned()));
        line.push('}');
        writeln!(writer, "{line}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The per-token line: audiences an array (however odd its items), everything else as
    /// tracing records it, one object per line.
    #[test]
    fn lists_are_arrays_and_each_line_is_one_object() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(move || writer.clone())
            .finish();
        let audiences = vec!["vault".to_owned(), "a \"quoted\"\nline".to_owned()];
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(
                user = %"admin",
                audiences = %warrant_audit::JsonList(&audiences),
                binding = "pod",
                count = 3_u64,
                "issued a token"
            );
            tracing::warn!(other = %"[not, a list]", "plain");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["message"], "issued a token");
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["user"], "admin");
        assert_eq!(lines[0]["count"], 3);
        assert_eq!(
            lines[0]["audiences"],
            serde_json::json!(["vault", "a \"quoted\"\nline"])
        );
        assert!(lines[0]["timestamp"].as_str().unwrap().ends_with('Z'));
        assert_eq!(lines[0]["target"], module_path!());
        assert_eq!(lines[1]["other"], "[not, a list]");
        // The layout keeps tracing-subscriber's order: timestamp, level, message first.
        assert!(text.starts_with("{\"timestamp\":"), "{text}");
        assert!(text.contains("\"level\":\"INFO\",\"message\":\"issued a token\""));
    }

    /// The JSON encoder escapes control characters itself: a client's newline or escape
    /// sequence stays inside its string, one event per line, and reads back unchanged.
    #[test]
    fn control_characters_stay_inside_their_strings() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(move || writer.clone())
            .finish();
        let sub = "system:serviceaccount:demo:app\n{\"level\":\"ERROR\"}\r\u{1b}[2J";
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(subject = %sub, quoted = sub, "signed\n{sub}");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(!text.contains('\u{1b}') && !text.contains('\r'), "{text}");
        let line: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["subject"], sub);
        assert_eq!(line["quoted"], sub);
        assert_eq!(line["message"], format!("signed\n{sub}"));
    }
}
