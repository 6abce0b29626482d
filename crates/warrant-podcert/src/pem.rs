//! PEM, as far as a status's `certificateChain` needs it: writing `CERTIFICATE` blocks, and
//! reading blocks one at a time the way Go's `encoding/pem.Decode` finds them (text before a
//! block is skipped; a block whose body does not decode is skipped and the search goes on).
//! Headers (`Proc-Type: …`) are read past, not interpreted; warrant never writes any.

use base64::Engine as _;

const BEGIN: &str = "-----BEGIN ";
const DASHES: &str = "-----";

/// One decoded block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    /// The type between `BEGIN ` and the dashes (`CERTIFICATE`).
    pub(crate) label: String,
    /// The decoded body.
    pub(crate) der: Vec<u8>,
}

/// The next block in `text` and the text after it; `None` when there is none.
pub(crate) fn next_block(mut text: &str) -> Option<(Block, &str)> {
    loop {
        let start = find_begin(text)?;
        let after_begin = text.get(start + BEGIN.len()..)?;
        let Some(found) = block_at(after_begin) else {
            text = after_begin; // Go goes on after a block it cannot read
            continue;
        };
        return Some(found);
    }
}

/// Where the next `-----BEGIN ` starts at the beginning of a line.
fn find_begin(text: &str) -> Option<usize> {
    let mut from = 0;
    loop {
        let at = from + text.get(from..)?.find(BEGIN)?;
        if at == 0 || text.as_bytes().get(at - 1) == Some(&b'\n') {
            return Some(at);
        }
        from = at + BEGIN.len();
    }
}

/// Reads the block whose `-----BEGIN ` has just been consumed.
fn block_at(text: &str) -> Option<(Block, &str)> {
    let (first_line, body_and_rest) = text.split_once('\n')?;
    let label = first_line.trim_end_matches('\r').strip_suffix(DASHES)?;
    let end_marker = format!("-----END {label}-----");
    let end = body_and_rest.find(&end_marker)?;
    let body = body_and_rest.get(..end)?;
    let after = body_and_rest.get(end + end_marker.len()..)?;
    let after = after
        .strip_prefix("\r\n")
        .or_else(|| after.strip_prefix('\n'))
        .unwrap_or(after);
    // Headers, if any, end at the first empty line; only a body with a `:` on its first line
    // has them.
    let body = match body.split_once('\n') {
        Some((first, _)) if first.contains(':') => body.split_once("\n\n").map(|(_, b)| b)?,
        _ => body,
    };
    let compact: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .ok()?;
    Some((
        Block {
            label: label.to_owned(),
            der,
        },
        after,
    ))
}

/// `CERTIFICATE` blocks for `certificates`, in order, 64 characters a line.
pub(crate) fn certificates(certificates: &[&[u8]]) -> String {
    let mut out = String::new();
    for der in certificates {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_read_back_in_order_past_text_and_bad_blocks() {
        let two = certificates(&[b"first", b"second"]);
        let text = format!("junk\n-----BEGIN X-----\n!!!\n-----END X-----\n{two}");
        let (a, rest) = next_block(&text).unwrap();
        let (b, rest) = next_block(rest).unwrap();
        assert_eq!(
            (a.der.as_slice(), b.der.as_slice()),
            (&b"first"[..], &b"second"[..])
        );
        assert_eq!(a.label, "CERTIFICATE");
        assert!(next_block(rest).is_none());
    }

    #[test]
    fn no_block_in_text_without_one() {
        assert!(next_block("").is_none());
        assert!(next_block("not -----BEGIN CERTIFICATE-----\nAAAA\n").is_none());
    }
}
