//! Claims read the way every JWT library reads them, or refused.
//!
//! A signer vouches for the claims it signs, but the parties that later read the token do not
//! all parse JSON alike. serde_json keeps the last of two equal keys; Go's `encoding/json`
//! (behind go-oidc, and go-jose's fork of it behind kube-apiserver) also keeps the last, but it
//! matches a member to a struct field case-insensitively, with Unicode simple case folding:
//! `"EXP"`, `"Exp"` and `"ex\u{17f}"`-style spellings all fill `exp`. Claims such as
//! `{"exp":<in an hour>,"EXP":<in 3000 years>}` therefore read as one hour to a check done with
//! serde_json and as the year 5138 to a Go relying party.
//!
//! [`parse_claims_strictly`] reads a claims object so that no reader can see anything else:
//! a key that appears twice in any object is refused, and so is a key that is not one of the
//! registered claim names (`iss`, `sub`, `aud`, `exp`, `nbf`, `iat`, `jti`, `cnf`, `kubernetes.io`;
//! inside `kubernetes.io` its own members, and `name`/`uid` inside its object references) but
//! folds to one. Costs: one pass building a `serde_json::Value`, plus a fold of each key of the
//! three levels checked.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The registered claims at the top level of a service-account token.
pub const REGISTERED_CLAIMS: [&str; 9] = [
    "aud",
    "cnf",
    "exp",
    "iat",
    "iss",
    "jti",
    "kubernetes.io",
    "nbf",
    "sub",
];
/// The members of the `kubernetes.io` claim.
const KUBERNETES_MEMBERS: [&str; 6] = [
    "namespace",
    "node",
    "pod",
    "secret",
    "serviceaccount",
    "warnafter",
];
/// The `kubernetes.io` members that are object references, and the references' members.
const REFERENCES: [&str; 4] = ["node", "pod", "secret", "serviceaccount"];
const REFERENCE_MEMBERS: [&str; 2] = ["name", "uid"];

/// The longest key quoted in an error (keys are the caller's text, not the operator's).
const QUOTED_KEY_CHARS: usize = 64;

/// Why claims were not read.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsJsonError {
    /// Not JSON at all.
    #[error("claims are not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// JSON, but not an object.
    #[error("claims are not a JSON object")]
    NotObject,
    /// A key appears twice in one object (`within` names the enclosing member, if any).
    #[error("claims repeat the key {key:?}{}: readers disagree on which one counts", within.as_ref().map(|w| format!(" inside {w:?}")).unwrap_or_default())]
    DuplicateKey {
        /// The repeated key (at most 64 characters of it).
        key: String,
        /// The member whose object holds it; `None` at the top level.
        within: Option<String>,
    },
    /// A key that is not the registered name `registered` but that Go's case-insensitive
    /// matching reads as it.
    #[error(
        "claims have the key {key:?}, which Go's JSON readers take for {registered:?}: refused"
    )]
    CaseVariant {
        /// The key as sent (at most 64 characters of it).
        key: String,
        /// The registered name it folds to.
        registered: &'static str,
    },
}

/// Why an encoded claims segment was not read as [`crate::Claims`].
#[derive(Debug, thiserror::Error)]
pub enum EncodedClaimsError {
    /// Not unpadded base64url.
    #[error("claims are not unpadded base64url (the JWT's second segment)")]
    NotBase64(#[source] base64::DecodeError),
    /// Not a claims object every reader reads alike.
    #[error(transparent)]
    Json(ClaimsJsonError),
    /// A claim of a type TokenReview does not read (a string `exp`, a numeric `sub`, …).
    #[error("claims are not those of a service-account token: {0}")]
    Types(#[source] serde_json::Error),
}

/// Why a JWT's claims could not be read (unverified): [`unverified_claims`].
#[derive(Debug, thiserror::Error)]
pub enum UnverifiedClaimsError {
    /// Not three dot-separated parts.
    #[error("not three dot-separated parts")]
    NotCompact,
    /// The payload is not base64url claims that warrant reads the one way, with the types of
    /// a service-account token's.
    #[error("its payload is not a service-account token's claims")]
    Claims(#[source] EncodedClaimsError),
}

/// A compact JWT's claims, read strictly ([`decode_claims_strictly`]) and not verified: for
/// choosing how to verify a token, or reading one whose issuer verifies it (the credential
/// plugin's own token, a token warrant just answered). Nothing read here may be trusted.
pub fn unverified_claims(token: &str) -> Result<crate::Claims, UnverifiedClaimsError> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(UnverifiedClaimsError::NotCompact);
    };
    decode_claims_strictly(payload.trim_end_matches('=')).map_err(UnverifiedClaimsError::Claims)
}

/// Reads a JWT's second segment (unpadded base64url JSON) as [`crate::Claims`], strictly (see
/// [`parse_claims_strictly`]), without verifying anything: for claims someone asks warrant to
/// sign, or a token whose issuer will verify it. The one decoder of unverified claims.
pub fn decode_claims_strictly(encoded: &str) -> Result<crate::Claims, EncodedClaimsError> {
    use base64::Engine as _;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .map_err(EncodedClaimsError::NotBase64)?;
    let claims = parse_claims_strictly(&json).map_err(EncodedClaimsError::Json)?;
    let claims: crate::Claims =
        serde_json::from_value(Value::Object(claims)).map_err(EncodedClaimsError::Types)?;
    // A `cnf` warrant does not understand makes a token no review of warrant's accepts: such
    // claims are refused here as claims of another shape are (the external signer signs
    // neither).
    if let Some(crate::Cnf::Unusable(why)) = &claims.cnf {
        return Err(EncodedClaimsError::Types(serde::de::Error::custom(why)));
    }
    Ok(claims)
}

/// Reads `json` as a claims object, refusing what parsers could read differently (see the
/// module documentation).
pub fn parse_claims_strictly(json: &[u8]) -> Result<Map<String, Value>, ClaimsJsonError> {
    let duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let parsed = StrictValue {
        duplicate: &duplicate,
        within: None,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    let value = match parsed {
        Ok(value) => value,
        Err(error) => {
            return Err(match duplicate.into_inner() {
                Some((key, within)) => ClaimsJsonError::DuplicateKey { key, within },
                None => ClaimsJsonError::NotJson(error),
            });
        }
    };
    let Value::Object(claims) = value else {
        return Err(ClaimsJsonError::NotObject);
    };
    check_names(&claims, &REGISTERED_CLAIMS)?;
    if let Some(Value::Object(kubernetes)) = claims.get("kubernetes.io") {
        check_names(kubernetes, &KUBERNETES_MEMBERS)?;
        for reference in REFERENCES {
            if let Some(Value::Object(members)) = kubernetes.get(reference) {
                check_names(members, &REFERENCE_MEMBERS)?;
            }
        }
    }
    Ok(claims)
}

/// Refuses a key of `object` that folds to one of `names` without being it.
fn check_names(object: &Map<String, Value>, names: &[&'static str]) -> Result<(), ClaimsJsonError> {
    for key in object.keys() {
        if names.contains(&key.as_str()) {
            continue;
        }
        if let Some(registered) = names.iter().find(|name| folds_to(key, name)) {
            return Err(ClaimsJsonError::CaseVariant {
                key: bounded(key),
                registered,
            });
        }
    }
    Ok(())
}

/// Whether Go's `encoding/json` matches the member `key` to a field named `name` (ASCII, as
/// every registered name is). Go folds with Unicode simple case folding; the only non-ASCII
/// characters whose fold class holds an ASCII letter are U+017F (long s, with `s`) and U+212A
/// (Kelvin sign, with `k`).
pub(crate) fn folds_to(key: &str, name: &str) -> bool {
    let mut folded = key.chars().map(|c| match c {
        '\u{17f}' => 's',
        '\u{212a}' => 'k',
        c => c.to_ascii_lowercase(),
    });
    let mut expected = name.chars();
    loop {
        match (folded.next(), expected.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

fn bounded(key: &str) -> String {
    key.chars().take(QUOTED_KEY_CHARS).collect()
}

/// A `serde_json::Value` that refuses a repeated key, noting it in `duplicate` (serde's errors
/// are text; the typed cause travels beside them).
#[derive(Clone, Copy)]
struct StrictValue<'a> {
    duplicate: &'a RefCell<Option<(String, Option<String>)>>,
    within: Option<&'a str>,
}

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue {
            within: self.within,
            ..self
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue {
                duplicate: self.duplicate,
                within: Some(&key),
            })?;
            if object.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some((bounded(&key), self.within.map(bounded)));
                return Err(A::Error::custom("duplicate key"));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<Map<String, Value>, ClaimsJsonError> {
        parse_claims_strictly(json.as_bytes())
    }

    #[test]
    fn what_kube_apiserver_sends_is_read_as_is() {
        let claims = r#"{"aud":["x"],"exp":1795582156,"iat":1795495756,"iss":"https://127.0.0.1:8443","jti":"a1deeeb6","kubernetes.io":{"namespace":"e2e","node":{"name":"n","uid":"u"},"pod":{"name":"p1","uid":"5b"},"serviceaccount":{"name":"app","uid":"23"},"warnafter":1795499373},"nbf":1795495756,"sub":"system:serviceaccount:e2e:app","extra":{"a":[1,2.5,null,true]}}"#;
        let strict = read(claims).unwrap();
        let loose: Value = serde_json::from_str(claims).unwrap();
        assert_eq!(Value::Object(strict), loose);
    }

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        // The first and last values differ: whichever a reader keeps, another keeps the other.
        let top = read(r#"{"exp":99999999999,"iss":"i","exp":1800003600}"#).unwrap_err();
        assert!(
            matches!(&top, ClaimsJsonError::DuplicateKey { key, within: None } if key == "exp"),
            "{top:?}"
        );
        assert_eq!(
            top.to_string(),
            "claims repeat the key \"exp\": readers disagree on which one counts"
        );
        let inner =
            read(r#"{"kubernetes.io":{"namespace":"a","namespace":"kube-system"}}"#).unwrap_err();
        assert_eq!(
            inner.to_string(),
            "claims repeat the key \"namespace\" inside \"kubernetes.io\": readers disagree on which one counts"
        );
        // Spelled differently in the JSON text, the same key once decoded.
        let escaped = read(r#"{"exp":1,"\u0065xp":2}"#).unwrap_err();
        assert!(
            matches!(escaped, ClaimsJsonError::DuplicateKey { .. }),
            "{escaped:?}"
        );
        // Deeper, inside an array.
        let deep = read(r#"{"x":[{"a":1,"a":1}]}"#).unwrap_err();
        assert!(
            matches!(deep, ClaimsJsonError::DuplicateKey { .. }),
            "{deep:?}"
        );
    }

    #[test]
    fn a_key_go_reads_as_a_registered_claim_is_refused() {
        for (json, registered) in [
            (r#"{"exp":1800003600,"EXP":99999999999}"#, "exp"),
            (r#"{"Exp":99999999999}"#, "exp"),
            (r#"{"iss":"a","ISS":"b"}"#, "iss"),
            // A key binding spelled so that serde skips it and Go reads it.
            (r#"{"CNF":{"jkt":"x"}}"#, "cnf"),
            // Long s and the Kelvin sign fold to ASCII letters in Go.
            (
                "{\"\u{17f}ub\":\"system:serviceaccount:kube-system:x\"}",
                "sub",
            ),
            ("{\"\u{212a}ubernetes.io\":{}}", "kubernetes.io"),
            (
                r#"{"kubernetes.io":{"NameSpace":"kube-system"}}"#,
                "namespace",
            ),
            (r#"{"kubernetes.io":{"WarnAfter":1}}"#, "warnafter"),
            (r#"{"kubernetes.io":{"pod":{"name":"a","UID":"b"}}}"#, "uid"),
        ] {
            let error = read(json).unwrap_err();
            assert!(
                matches!(&error, ClaimsJsonError::CaseVariant { registered: r, .. } if *r == registered),
                "{json}: {error:?}"
            );
        }
        // Names that are not registered are no one's concern; nor is a fold beyond ASCII
        // letters (the dotless i does not fold to i in Go).
        assert!(read(r#"{"Foo":1,"foo":2,"exps":3,"\u0131at":4}"#).is_ok());
    }

    /// Claims whose `cnf` warrant does not understand are refused like claims of another
    /// shape: no review of warrant's would accept the token, so nothing signs it.
    #[test]
    fn an_unusable_cnf_is_refused() {
        use base64::Engine as _;
        let encode = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        for cnf in [r#""x""#, r#"{"jwk":{}}"#, r#"{"jkt":5}"#, "{}", "null"] {
            let error = decode_claims_strictly(&encode(&format!(r#"{{"iss":"i","cnf":{cnf}}}"#)))
                .unwrap_err();
            assert!(
                matches!(error, EncodedClaimsError::Types(_))
                    && error.to_string().contains("the token's cnf"),
                "{cnf}: {error}"
            );
        }
        let bound = decode_claims_strictly(&encode(r#"{"iss":"i","cnf":{"jkt":"t"}}"#)).unwrap();
        assert_eq!(bound.cnf, Some(crate::Confirmation::dpop("t").into()));
    }

    #[test]
    fn what_is_not_a_json_object_is_refused() {
        assert!(matches!(read("[1]"), Err(ClaimsJsonError::NotObject)));
        assert!(matches!(read("{"), Err(ClaimsJsonError::NotJson(_))));
        assert!(matches!(read("{} x"), Err(ClaimsJsonError::NotJson(_))));
        // A lone surrogate, which Go would turn into U+FFFD.
        assert!(matches!(
            read(r#"{"a":"\ud800"}"#),
            Err(ClaimsJsonError::NotJson(_))
        ));
    }
}
