//! JSON written the way kube-apiserver's JWT library writes it.
//!
//! kube-apiserver serialises claims with go-jose v2's fork of Go's `encoding/json`, which
//! escapes more than serde_json does: `<`, `>` and `&` become `\u003c`, `\u003e`, `\u0026`,
//! U+2028 and U+2029 become `\u2028` and `\u2029`, and control characters other than `\n`,
//! `\r` and `\t` are written as `\u00XX` (never `\b` or `\f`). serde_json writes all of those
//! literally or with short escapes, so a claim such as the audience `https://a?b&c` would differ
//! byte for byte. This formatter closes that gap; object key order is the struct field order,
//! which our claim types declare alphabetically, as Go's map encoding sorts them.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter, Serializer};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A serde_json formatter that escapes strings as go-jose v2 does.
struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escape: Option<&[u8]> = match c {
                '<' => Some(b"\\u003c"),
                '>' => Some(b"\\u003e"),
                '&' => Some(b"\\u0026"),
                '\u{2028}' => Some(b"\\u2028"),
                '\u{2029}' => Some(b"\\u2029"),
                _ => None,
            };
            if let Some(escape) = escape {
                // Both ends come from char_indices: always in range.
                #[allow(clippy::expect_used)]
                let before = fragment.get(start..i).expect("char boundaries");
                writer.write_all(before.as_bytes())?;
                writer.write_all(escape)?;
                start = i + c.len_utf8();
            }
        }
        #[allow(clippy::expect_used)]
        let rest = fragment.get(start..).expect("a char boundary");
        writer.write_all(rest.as_bytes())
    }

    fn write_char_escape<W>(&mut self, writer: &mut W, char_escape: CharEscape) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let hex = |nibble: u8| HEX.get(usize::from(nibble & 0xf)).copied().unwrap_or(b'0');
        let control = |b: u8| [b'\\', b'u', b'0', b'0', hex(b >> 4), hex(b)];
        match char_escape {
            CharEscape::Quote => writer.write_all(b"\\\""),
            CharEscape::ReverseSolidus => writer.write_all(b"\\\\"),
            CharEscape::Solidus => writer.write_all(b"/"),
            CharEscape::LineFeed => writer.write_all(b"\\n"),
            CharEscape::CarriageReturn => writer.write_all(b"\\r"),
            CharEscape::Tab => writer.write_all(b"\\t"),
            CharEscape::Backspace => writer.write_all(&control(0x08)),
            CharEscape::FormFeed => writer.write_all(&control(0x0c)),
            CharEscape::AsciiControl(b) => writer.write_all(&control(b)),
        }
    }
}

/// Serialises `value` as compact JSON with Go's escaping.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(512);
    value.serialize(&mut Serializer::with_formatter(&mut out, GoFormatter))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(s: &str) -> String {
        String::from_utf8(to_vec(s).unwrap()).unwrap()
    }

    #[test]
    fn escapes_like_go_jose() {
        assert_eq!(go("plain"), r#""plain""#);
        assert_eq!(go("a<b>c&d"), r#""a\u003cb\u003ec\u0026d""#);
        assert_eq!(go("q\"b\\s/"), r#""q\"b\\s/""#);
        assert_eq!(go("\n\r\t"), r#""\n\r\t""#);
        assert_eq!(go("\u{8}\u{c}\u{1}\u{1f}"), r#""\u0008\u000c\u0001\u001f""#);
        assert_eq!(go("x\u{2028}y\u{2029}"), r#""x\u2028y\u2029""#);
        assert_eq!(go("héllo ☃"), "\"héllo ☃\"");
    }

    #[test]
    fn decodes_back_to_the_same_string() {
        let s = "a<b>&\u{2028}\u{1}\"\\é";
        let encoded = to_vec(s).unwrap();
        let back: String = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(back, s);
    }
}
