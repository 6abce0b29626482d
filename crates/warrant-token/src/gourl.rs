//! Go's `url.PathUnescape`, for what kube-apiserver decodes that way: request paths (Go's HTTP
//! server hands handlers the decoded path) and the keys of `X-Remote-Extra-*` headers.

/// `%XX` escapes decoded; `None` for a `%` without two hex digits after it, or a result that is
/// not UTF-8.
pub fn path_unescape(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let decoded = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())?;
            out.push(decoded);
            i += 3;
        } else {
            out.push(byte);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_decode_and_bad_ones_are_none() {
        assert_eq!(path_unescape("plain").as_deref(), Some("plain"));
        assert_eq!(path_unescape("d%65mo").as_deref(), Some("demo"));
        assert_eq!(path_unescape("a%2Fb").as_deref(), Some("a/b"));
        assert_eq!(path_unescape("a%zz"), None);
        assert_eq!(path_unescape("a%"), None);
        assert_eq!(path_unescape("%FF%FE"), None, "not UTF-8");
    }
}
