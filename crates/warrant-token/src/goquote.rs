//! Go's `%q` formatting, for error messages that must match kube-apiserver's byte for byte
//! (the audience error prints both lists with `%q`, e.g. `["a" "b"]`).

use std::fmt::Write;

/// Quotes `s` as Go's `strconv.Quote` does.
///
/// Printable characters are kept; `"` and `\` are escaped; the usual short escapes are used for
/// `\a \b \f \n \r \t \v`; other non-printable characters become `\xHH`, `\uHHHH` or
/// `\UHHHHHHHH`. "Printable" here is Rust's complement of control and a few invisible
/// formatting characters, which agrees with Go's `unicode.IsPrint` on everything an audience or
/// issuer is realistically made of.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_print(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Formats a list as Go's `fmt.Sprintf("%q", []string{...})`: `["a" "b"]`, as kube's messages
/// quote audiences (token errors here, authorization refusals in warrant-auth).
pub(crate) fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", quoted.join(" "))
}

/// The most characters of a caller-supplied value a message or log line quotes.
pub(crate) const QUOTED_VALUE_CHARS: usize = 256;

/// `s` cut to [`QUOTED_VALUE_CHARS`] characters, with `…` after a cut: borrowed when short.
pub(crate) fn cut(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(QUOTED_VALUE_CHARS) {
        None => std::borrow::Cow::Borrowed(s),
        Some((end, _)) => std::borrow::Cow::Owned(format!("{}…", s.get(..end).unwrap_or(s))),
    }
}

/// `s` Go-quoted after cutting it to [`QUOTED_VALUE_CHARS`] characters, `…` after the closing
/// quote when it was cut: a value a caller chose, as an error quotes it.
pub(crate) fn quote_cut(s: &str) -> String {
    match s.char_indices().nth(QUOTED_VALUE_CHARS) {
        None => quote(s),
        Some((end, _)) => format!("{}…", quote(s.get(..end).unwrap_or(s))),
    }
}

fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}'))
}

#[cfg(test)]
mod tests {
    /// A value is quoted whole up to the bound, and cut past it (by characters, not bytes),
    /// the cut said after the quote; a multi-megabyte value costs a short message.
    #[test]
    fn long_values_are_cut() {
        assert_eq!(super::quote_cut("a\"b"), "\"a\\\"b\"");
        let exact = "é".repeat(super::QUOTED_VALUE_CHARS);
        assert_eq!(super::quote_cut(&exact), format!("\"{exact}\""));
        assert_eq!(super::cut(&exact), exact);
        let long = "é".repeat(3 * 1024 * 1024);
        let quoted = super::quote_cut(&long);
        assert_eq!(quoted, format!("\"{exact}\"…"));
        assert_eq!(super::cut(&long), format!("{exact}…"));
    }

    use super::*;

    #[test]
    fn matches_go_strconv_quote() {
        assert_eq!(quote("foo"), r#""foo""#);
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("tab\there\n"), r#""tab\there\n""#);
        assert_eq!(quote("\u{1}\u{7f}"), r#""\x01\x7f""#);
        assert_eq!(quote("é☃"), "\"é☃\"");
        assert_eq!(quote("\u{2028}\u{feff}"), r#""\u2028\ufeff""#);
        assert_eq!(quote("\u{e0001}"), r#""\U000e0001""#);
    }

    #[test]
    fn lists_are_space_separated() {
        assert_eq!(quote_list::<&str>(&[]), "[]");
        assert_eq!(quote_list(&["foo"]), r#"["foo"]"#);
        assert_eq!(quote_list(&["a", "b c"]), r#"["a" "b c"]"#);
    }
}
