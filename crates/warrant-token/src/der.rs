//! Just enough DER to find our way around keys and certificates: the algorithm of a
//! SubjectPublicKeyInfo, and the SubjectPublicKeyInfo inside an X.509 certificate. The
//! cryptographic parsing itself is aws-lc's; this only routes bytes to the right parser.
//!
//! The element reader ([`read`], [`expect`], [`Tlv`]) is public but hidden: warrant-hsm takes
//! apart the same PKCS#8 keys with it to hand their components to a token, instead of keeping
//! a second copy. It is not part of this crate's API.

/// The DER tag of a SEQUENCE.
pub const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
/// The DER tag of an INTEGER.
pub const INTEGER: u8 = 0x02;
/// The DER tag of an OCTET STRING.
pub const OCTET_STRING: u8 = 0x04;
const CONTEXT_0: u8 = 0xa0;

/// `rsaEncryption` (1.2.840.113549.1.1.1).
pub(crate) const OID_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// `id-ecPublicKey` (1.2.840.10045.2.1).
pub(crate) const OID_EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// `prime256v1` / P-256 (1.2.840.10045.3.1.7).
pub(crate) const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// `secp384r1` / P-384 (1.3.132.0.34).
pub(crate) const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
/// `secp521r1` / P-521 (1.3.132.0.35).
pub(crate) const OID_P521: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x23];

/// One tag-length-value element: its tag, its contents, the whole element, and what follows it.
pub struct Tlv<'a> {
    /// The tag (single-byte tags only).
    pub tag: u8,
    /// The contents.
    pub contents: &'a [u8],
    /// The whole element, tag and length included.
    pub whole: &'a [u8],
    /// What follows the element.
    pub rest: &'a [u8],
}

/// The first element of `input`: definite lengths of up to four bytes; `None` if truncated.
pub fn read(input: &[u8]) -> Option<Tlv<'_>> {
    let (&tag, after_tag) = input.split_first()?;
    let (&first, mut after_len) = after_tag.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let (bytes, rest) = after_len.split_at_checked(count)?;
        after_len = rest;
        bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    let (contents, rest) = after_len.split_at_checked(len)?;
    let header = input.len() - after_len.len();
    let whole = input.get(..header + len)?;
    Some(Tlv {
        tag,
        contents,
        whole,
        rest,
    })
}

/// The first element of `input` if its tag is `tag`.
pub fn expect(input: &[u8], tag: u8) -> Option<Tlv<'_>> {
    read(input).filter(|t| t.tag == tag)
}

/// The algorithm OID and, for EC keys, the named-curve OID of a SubjectPublicKeyInfo.
pub(crate) fn spki_algorithm(spki: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let outer = expect(spki, SEQUENCE)?;
    let alg = expect(outer.contents, SEQUENCE)?;
    let oid = expect(alg.contents, OID)?;
    let params = expect(oid.rest, OID).map(|p| p.contents);
    Some((oid.contents, params))
}

/// The algorithm OID of a PKCS#8 PrivateKeyInfo (version, algorithm, key).
pub(crate) fn pkcs8_algorithm(pkcs8: &[u8]) -> Option<&[u8]> {
    let outer = expect(pkcs8, SEQUENCE)?;
    let version = expect(outer.contents, INTEGER)?;
    let alg = expect(version.rest, SEQUENCE)?;
    Some(expect(alg.contents, OID)?.contents)
}

/// The size in bits of the modulus of an RSA private key, PKCS#1 (`RSAPrivateKey`) or PKCS#8
/// (wrapping one), so that a key of the wrong size gets an error that says so.
pub(crate) fn rsa_private_modulus_bits(der: &[u8]) -> Option<usize> {
    let outer = expect(der, SEQUENCE)?;
    let version = expect(outer.contents, INTEGER)?;
    let pkcs1 = match expect(version.rest, SEQUENCE) {
        // PKCS#8: the algorithm identifier, then the PKCS#1 key in an OCTET STRING.
        Some(alg) => expect(alg.rest, OCTET_STRING)?.contents,
        None => der,
    };
    let key = expect(pkcs1, SEQUENCE)?;
    let n = expect(expect(key.contents, INTEGER)?.rest, INTEGER)?.contents;
    let n = n.get(n.iter().take_while(|&&b| b == 0).count()..)?;
    let first = n.first()?;
    Some(n.len() * 8 - first.leading_zeros() as usize)
}

/// The SubjectPublicKeyInfo (a whole DER element) inside an X.509 certificate.
pub(crate) fn certificate_spki(cert: &[u8]) -> Option<&[u8]> {
    let cert = expect(cert, SEQUENCE)?;
    let tbs = expect(cert.contents, SEQUENCE)?;
    let mut field = read(tbs.contents)?;
    if field.tag == CONTEXT_0 {
        field = read(field.rest)?; // explicit version
    }
    // serial, signature algorithm, issuer, validity, subject, then the key.
    for _ in 0..5 {
        field = read(field.rest)?;
    }
    (field.tag == SEQUENCE).then_some(field.whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_form_lengths() {
        let mut v = vec![0x04, 0x82, 0x01, 0x00];
        v.extend(std::iter::repeat_n(7u8, 256));
        v.push(0xff);
        let t = read(&v).unwrap();
        assert_eq!(t.contents.len(), 256);
        assert_eq!(t.rest, &[0xff]);
        assert_eq!(t.whole.len(), 260);
    }

    #[test]
    fn truncated_and_indefinite_inputs_are_rejected() {
        assert!(read(&[]).is_none());
        assert!(read(&[0x30]).is_none());
        assert!(read(&[0x30, 0x05, 0x00]).is_none());
        assert!(read(&[0x30, 0x80, 0x00, 0x00]).is_none());
        assert!(read(&[0x30, 0x85, 1, 1, 1, 1, 1]).is_none());
        assert!(spki_algorithm(&[0x30, 0x00]).is_none());
        assert!(certificate_spki(&[0x30, 0x03, 0x30, 0x01, 0x00]).is_none());
    }
}
