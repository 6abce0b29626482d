//! Just enough DER for a certificate: warrant-token's element reader held to DER, to walk to
//! the SubjectPublicKeyInfo of a PKCS#10 request (and take apart an SPKI), and a writer for the few types a TBSCertificate
//! is made of. Full X.509 parsing (the status rules' checks of a produced leaf) is
//! x509-parser's; this exists so that nothing of a request beyond its key is ever parsed, and
//! so that a leaf's key is the request's SPKI byte for byte.

/// SEQUENCE.
pub(crate) const SEQUENCE: u8 = 0x30;
/// SET.
pub(crate) const SET: u8 = 0x31;
/// INTEGER.
pub(crate) const INTEGER: u8 = 0x02;
/// BIT STRING.
pub(crate) const BIT_STRING: u8 = 0x03;
/// OCTET STRING.
pub(crate) const OCTET_STRING: u8 = 0x04;
/// NULL.
pub(crate) const NULL: u8 = 0x05;
/// OBJECT IDENTIFIER.
pub(crate) const OID: u8 = 0x06;
/// BOOLEAN.
pub(crate) const BOOLEAN: u8 = 0x01;
/// UTF8String.
pub(crate) const UTF8_STRING: u8 = 0x0c;
/// UTCTime.
const UTC_TIME: u8 = 0x17;
/// GeneralizedTime.
const GENERALIZED_TIME: u8 = 0x18;

pub(crate) use warrant_token::der::Tlv;

/// The first element of `input`, read by warrant-token's element reader and held to DER: a
/// single-byte tag and a length in its shortest form; `None` for anything else or truncated
/// input.
pub(crate) fn read(input: &[u8]) -> Option<Tlv<'_>> {
    let tlv = warrant_token::der::read(input)?;
    if tlv.tag & 0x1f == 0x1f {
        return None; // multi-byte tag: nothing we read has one
    }
    let len = tlv.contents.len();
    let length_bytes = if len < 0x80 {
        1
    } else {
        1 + (usize::BITS - len.leading_zeros()).div_ceil(8) as usize
    };
    (tlv.whole.len() - len == 1 + length_bytes).then_some(tlv)
}

/// The first element of `input` if it has tag `tag`.
pub(crate) fn expect(input: &[u8], tag: u8) -> Option<Tlv<'_>> {
    read(input).filter(|tlv| tlv.tag == tag)
}

/// Appends one element with tag `tag` and contents `contents` to `out`.
pub(crate) fn write(out: &mut Vec<u8>, tag: u8, contents: &[u8]) {
    out.push(tag);
    let len = contents.len();
    if len < 0x80 {
        out.push(len as u8); // < 0x80: fits
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        let significant = bytes.get(skip..).unwrap_or_default();
        out.push(0x80 | significant.len() as u8); // at most 8
        out.extend_from_slice(significant);
    }
    out.extend_from_slice(contents);
}

/// One element as a new vector.
pub(crate) fn element(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(contents.len() + 6);
    write(&mut out, tag, contents);
    out
}

/// A SEQUENCE of already encoded elements.
pub(crate) fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    element(SEQUENCE, &parts.concat())
}

/// A non-negative INTEGER from big-endian magnitude bytes: leading zeros removed, and one
/// zero byte put back where the top bit is set so it reads as positive.
pub(crate) fn unsigned_integer(magnitude: &[u8]) -> Vec<u8> {
    let skip = magnitude.iter().take_while(|&&b| b == 0).count();
    let trimmed = magnitude.get(skip..).unwrap_or_default();
    let mut contents = Vec::with_capacity(trimmed.len() + 1);
    if trimmed.first().is_none_or(|&b| b & 0x80 != 0) {
        contents.push(0);
    }
    contents.extend_from_slice(trimmed);
    element(INTEGER, &contents)
}

/// A BIT STRING with no unused bits.
pub(crate) fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut contents = Vec::with_capacity(bytes.len() + 1);
    contents.push(0);
    contents.extend_from_slice(bytes);
    element(BIT_STRING, &contents)
}

/// An X.509 Time: UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 §4.1.2.5), in
/// whole seconds.
pub(crate) fn time(t: jiff::Timestamp) -> Vec<u8> {
    let dt = t.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    let year = dt.year();
    let rest = format!(
        "{:02}{:02}{:02}{:02}{:02}Z",
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    );
    if (1950..2050).contains(&year) {
        element(UTC_TIME, format!("{:02}{rest}", year % 100).as_bytes())
    } else {
        element(GENERALIZED_TIME, format!("{year:04}{rest}").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lengths_are_written_in_their_shortest_form_and_read_back() {
        let contents = vec![7u8; 300];
        let encoded = element(OCTET_STRING, &contents);
        assert_eq!(encoded.get(..4), Some(&[0x04, 0x82, 0x01, 0x2c][..]));
        let tlv = read(&encoded).unwrap();
        assert_eq!(
            (tlv.tag, tlv.contents.len(), tlv.rest.len()),
            (0x04, 300, 0)
        );
    }

    #[test]
    fn non_minimal_lengths_and_truncation_are_refused() {
        assert!(read(&[0x04, 0x81, 0x05, 1, 2, 3, 4, 5]).is_none());
        assert!(read(&[0x04, 0x03, 1, 2]).is_none());
        assert!(read(&[0x1f, 0x01, 0x00]).is_none());
    }

    #[test]
    fn integers_stay_positive() {
        assert_eq!(unsigned_integer(&[0x00, 0x00, 0x7f]), [0x02, 0x01, 0x7f]);
        assert_eq!(unsigned_integer(&[0x80]), [0x02, 0x02, 0x00, 0x80]);
        assert_eq!(unsigned_integer(&[]), [0x02, 0x01, 0x00]);
    }

    #[test]
    fn times_switch_to_generalized_time_in_2050() {
        let t: jiff::Timestamp = "2049-12-31T23:59:59Z".parse().unwrap();
        assert_eq!(time(t), element(UTC_TIME, b"491231235959Z"));
        let t: jiff::Timestamp = "2050-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(time(t), element(GENERALIZED_TIME, b"20500101000000Z"));
    }
}
