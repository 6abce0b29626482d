//! RFC 7519's NumericDate, read one way wherever a JWT carries one: a token's `exp`, `iat`,
//! `nbf` and `warnafter` ([`crate::Claims`]) and a DPoP proof's `iat`.

use serde::{Deserialize, Deserializer};

/// The one reader of an RFC 7519 NumericDate, for a JWT's claims and a DPoP proof's `iat`:
/// absent or `null` is `None`; any JSON number is a date, truncated toward zero to whole
/// seconds, as go-jose reads it (a number past `i64` saturates, and is then expired or not yet
/// valid); anything else (a string, a boolean) is an error.
pub(crate) fn numeric_date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(i) = n.as_i64() {
        return Ok(Some(i));
    }
    match n.as_f64() {
        // Saturating float-to-int conversion; a date out of i64 range fails later as expired or
        // not yet valid.
        #[allow(clippy::cast_possible_truncation)]
        Some(f) if f.is_finite() => Ok(Some(f.trunc() as i64)),
        _ => Err(serde::de::Error::custom("numeric date out of range")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one NumericDate reader, as both JWT claims and DPoP proofs use it.
    #[test]
    fn numeric_dates_are_whole_seconds_of_any_json_number() {
        #[derive(serde::Deserialize)]
        struct Dated {
            #[serde(default, deserialize_with = "numeric_date")]
            at: Option<i64>,
        }
        let at = |json: &str| serde_json::from_str::<Dated>(json).map(|d| d.at);
        assert_eq!(at(r#"{}"#).unwrap(), None);
        assert_eq!(at(r#"{"at":null}"#).unwrap(), None);
        assert_eq!(at(r#"{"at":1800000000}"#).unwrap(), Some(1_800_000_000));
        assert_eq!(at(r#"{"at":-5}"#).unwrap(), Some(-5));
        assert_eq!(at(r#"{"at":12.9}"#).unwrap(), Some(12));
        assert_eq!(at(r#"{"at":-1.5}"#).unwrap(), Some(-1));
        assert_eq!(at(r#"{"at":1e3}"#).unwrap(), Some(1000));
        assert_eq!(
            at(r#"{"at":18446744073709551615}"#).unwrap(),
            Some(i64::MAX)
        );
        assert_eq!(at(r#"{"at":-1e300}"#).unwrap(), Some(i64::MIN));
        for wrong in [
            r#"{"at":"1800000000"}"#,
            r#"{"at":true}"#,
            r#"{"at":[1]}"#,
            r#"{"at":{}}"#,
        ] {
            assert!(at(wrong).is_err(), "{wrong}");
        }
    }
}
