//! How a failure reads on one line: an error with its causes, and text from elsewhere (warrant's
//! answer, a member's profile) made safe for a terminal.

/// `error` and its causes, `: `-separated, each said once: how every command's one line of
/// failure reads (startup errors, the plugin's stderr, `verify`, the agent's log).
pub fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

/// `text` with control characters (and the bidirectional overrides, which reorder what a
/// terminal shows) written as escapes: text from warrant or a profile cannot move the cursor,
/// colour the terminal or start a line that looks like the plugin's own.
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
