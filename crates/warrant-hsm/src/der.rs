//! The little DER an import and a public-key read need: the components of a PKCS#8 private key
//! (PKCS#11 creates private key objects from components, not from DER), the named-curve
//! parameters, and the OCTET STRING around an EC point. Parsing of keys themselves is
//! warrant-token's (aws-lc's); this only takes apart what that already validated, with
//! warrant-token's DER element reader.

use warrant_token::Algorithm;
use warrant_token::der::{INTEGER, OCTET_STRING, SEQUENCE, expect};

/// The unsigned big-endian value of a DER INTEGER's contents (leading zero bytes dropped).
fn unsigned(contents: &[u8]) -> Vec<u8> {
    let skip = contents.iter().take_while(|&&b| b == 0).count();
    contents.get(skip..).unwrap_or_default().to_vec()
}

/// The private key inside a PKCS#8 PrivateKeyInfo (the OCTET STRING's contents).
fn pkcs8_inner(pkcs8: &[u8]) -> Option<&[u8]> {
    let outer = expect(pkcs8, SEQUENCE)?;
    let version = expect(outer.contents, INTEGER)?;
    let alg = expect(version.rest, SEQUENCE)?;
    Some(expect(alg.rest, OCTET_STRING)?.contents)
}

/// The eight numbers of an RSA private key (`RSAPrivateKey`, RFC 8017), as PKCS#11 wants them.
pub(crate) struct RsaComponents {
    pub(crate) n: Vec<u8>,
    pub(crate) e: Vec<u8>,
    pub(crate) d: Vec<u8>,
    pub(crate) p: Vec<u8>,
    pub(crate) q: Vec<u8>,
    pub(crate) dp: Vec<u8>,
    pub(crate) dq: Vec<u8>,
    pub(crate) qinv: Vec<u8>,
}

/// The components of an RSA key in PKCS#8.
pub(crate) fn rsa_components(pkcs8: &[u8]) -> Option<RsaComponents> {
    let key = expect(pkcs8_inner(pkcs8)?, SEQUENCE)?;
    let mut next = expect(key.contents, INTEGER)?.rest; // version
    let mut int = || {
        let t = expect(next, INTEGER)?;
        next = t.rest;
        Some(unsigned(t.contents))
    };
    Some(RsaComponents {
        n: int()?,
        e: int()?,
        d: int()?,
        p: int()?,
        q: int()?,
        dp: int()?,
        dq: int()?,
        qinv: int()?,
    })
}

/// The private scalar of an EC key in PKCS#8 (`ECPrivateKey`'s privateKey, RFC 5915).
pub(crate) fn ec_private_scalar(pkcs8: &[u8]) -> Option<Vec<u8>> {
    let key = expect(pkcs8_inner(pkcs8)?, SEQUENCE)?;
    let version = expect(key.contents, INTEGER)?;
    Some(expect(version.rest, OCTET_STRING)?.contents.to_vec())
}

/// `CKA_EC_PARAMS` for a curve: the DER OID of the named curve.
pub(crate) fn ec_params(alg: Algorithm) -> Option<&'static [u8]> {
    match alg {
        Algorithm::ES256 => Some(&[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]),
        Algorithm::ES384 => Some(&[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22]),
        Algorithm::ES512 => Some(&[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23]),
        Algorithm::RS256 => None,
    }
}

/// The algorithm of `CKA_EC_PARAMS`, if it names a curve warrant signs with.
pub(crate) fn ec_algorithm(params: &[u8]) -> Option<Algorithm> {
    [Algorithm::ES256, Algorithm::ES384, Algorithm::ES512]
        .into_iter()
        .find(|&alg| ec_params(alg) == Some(params))
}

/// The byte length of one coordinate (and of `r` and `s`) on the algorithm's curve.
pub(crate) fn coordinate_len(alg: Algorithm) -> Option<usize> {
    match alg {
        Algorithm::ES256 => Some(32),
        Algorithm::ES384 => Some(48),
        Algorithm::ES512 => Some(66),
        Algorithm::RS256 => None,
    }
}

/// The uncompressed point in `CKA_EC_POINT`. PKCS#11 says the attribute is the DER encoding of
/// an OCTET STRING holding the point; some older modules return the bare point. Both start with
/// 0x04, so the expected length decides.
pub(crate) fn ec_point(value: &[u8], coordinate_len: usize) -> Option<&[u8]> {
    let point_len = 1 + 2 * coordinate_len;
    let point = if value.len() == point_len {
        value
    } else {
        let t = expect(value, OCTET_STRING)?;
        if !t.rest.is_empty() {
            return None;
        }
        t.contents
    };
    (point.len() == point_len && point.first() == Some(&0x04)).then_some(point)
}

/// `point` as a DER OCTET STRING (for `CKA_EC_POINT` on import).
pub(crate) fn octet_string(point: &[u8]) -> Vec<u8> {
    let mut out = vec![OCTET_STRING];
    let len = point.len();
    if len < 0x80 {
        out.push(len as u8);
    } else if len < 0x100 {
        out.extend([0x81, len as u8]);
    } else {
        out.extend([0x82, (len >> 8) as u8, len as u8]);
    }
    out.extend_from_slice(point);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec_point_with_and_without_octet_string() {
        let mut point = vec![0x04];
        point.extend([7u8; 64]);
        let wrapped = octet_string(&point);
        assert_eq!(&wrapped[..2], &[0x04, 65]);
        assert_eq!(ec_point(&wrapped, 32), Some(&point[..]));
        assert_eq!(ec_point(&point, 32), Some(&point[..]));
        assert_eq!(ec_point(&wrapped, 48), None);
        // P-521: 133 bytes, long-form length.
        let mut point = vec![0x04];
        point.extend([9u8; 132]);
        let wrapped = octet_string(&point);
        assert_eq!(&wrapped[..3], &[0x04, 0x81, 133]);
        assert_eq!(ec_point(&wrapped, 66), Some(&point[..]));
        // Compressed points and trailing bytes are refused.
        let mut compressed = vec![0x02];
        compressed.extend([1u8; 32]);
        assert_eq!(ec_point(&octet_string(&compressed), 32), None);
        let mut trailing = octet_string(&[0x04; 65]);
        trailing.push(0);
        assert_eq!(ec_point(&trailing, 32), None);
    }

    #[test]
    fn curve_parameters_round_trip() {
        for alg in [Algorithm::ES256, Algorithm::ES384, Algorithm::ES512] {
            assert_eq!(ec_algorithm(ec_params(alg).unwrap()), Some(alg));
        }
        assert_eq!(ec_algorithm(&[0x06, 0x01, 0x00]), None);
    }
}
