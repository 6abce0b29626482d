//! A token's `cnf` claim (RFC 7800): what it binds the token to, read by one parser ([`Cnf`])
//! as part of reading the claims. Whether what came with a token proves that binding is the one
//! check in `key_binding.rs` ([`crate::check_binding`]).
//!
//! How a `cnf` reads:
//!
//! - no `cnf` claim: a bearer token, as kube-apiserver's are;
//! - a `cnf` whose members are all understood (`jkt`, RFC 9449; `x5t#S256`, RFC 8705), each a
//!   string: bound to each key named ([`Cnf::Binds`]);
//! - any other `cnf` (RFC 7800's `jwk`, `jwe`, `jku` or `kid`, a member of another type, a
//!   member named twice, no member at all, not an object): the token is unusable everywhere
//!   ([`Cnf::Unusable`]), never a bearer token. An issuer that wrote a binding meant it to be
//!   checked; a binding warrant cannot check is one it cannot honour.
//!
//! Cost: reading `cnf` is part of the claims' one JSON parse (one `serde_json::Value` per member
//! value).

use std::fmt;

use aws_lc_rs::digest;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

/// The `cnf` member naming a DPoP key by its RFC 7638 thumbprint (RFC 9449 §6.1).
pub const CNF_JKT: &str = "jkt";
/// The `cnf` member naming a client certificate by its SHA-256 thumbprint (RFC 8705 §3.1).
pub const CNF_X5T_S256: &str = "x5t#S256";

/// The longest member name quoted in an error: names are the token's text.
const QUOTED_MEMBER_CHARS: usize = 64;
/// How many members an error names at most.
const QUOTED_MEMBERS: usize = 4;

/// The keys a token is bound to, as warrant writes them in `cnf` and understands them there.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Confirmation {
    /// RFC 9449: the SHA-256 JWK thumbprint of a DPoP key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jkt: Option<String>,
    /// RFC 8705: the SHA-256 thumbprint of a client certificate (base64url of its DER's hash).
    #[serde(rename = "x5t#S256", default, skip_serializing_if = "Option::is_none")]
    pub x5t_s256: Option<String>,
}

impl Confirmation {
    /// Bound to the DPoP key with thumbprint `jkt`.
    pub fn dpop(jkt: impl Into<String>) -> Self {
        Confirmation {
            jkt: Some(jkt.into()),
            x5t_s256: None,
        }
    }

    /// Bound to the client certificate whose RFC 8705 thumbprint is `x5t_s256` (see
    /// [`certificate_thumbprint`]).
    pub fn certificate(x5t_s256: impl Into<String>) -> Self {
        Confirmation {
            jkt: None,
            x5t_s256: Some(x5t_s256.into()),
        }
    }

    /// The thumbprint this names, for logs and audit: `jkt`, else `x5t#S256` (never the key).
    pub fn thumbprint(&self) -> Option<&str> {
        self.jkt.as_deref().or(self.x5t_s256.as_deref())
    }

    /// True if this names any key.
    pub fn binds(&self) -> bool {
        self.jkt.is_some() || self.x5t_s256.is_some()
    }
}

/// A token's `cnf` claim as warrant reads it: the one parser of it, run as part of reading the
/// claims. Reading never fails: whatever the claim holds, the token is either bound to keys
/// warrant understands, or unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cnf {
    /// Bound to these keys; each one must be proven ([`crate::check_binding`]). As read from a token,
    /// at least one is named.
    Binds(Confirmation),
    /// A `cnf` warrant does not understand: the token is unusable. Written back (a token's claims
    /// printed, say) as JSON `null`, which reads as unusable again: a claim warrant cannot use
    /// never becomes one it can, nor disappears.
    Unusable(CnfError),
}

impl Cnf {
    /// What the claim binds the token to, or why warrant cannot tell.
    pub fn binding(&self) -> Result<&Confirmation, &CnfError> {
        match self {
            Cnf::Binds(confirmation) => Ok(confirmation),
            Cnf::Unusable(why) => Err(why),
        }
    }

    /// Reads `members` (in the order the token has them, repeats kept) as a `cnf` object.
    /// Linear in the members.
    fn read(members: Vec<(String, serde_json::Value)>) -> Cnf {
        let (mut jkt, mut x5t) = (None, None);
        let mut unknown: Vec<String> = Vec::new();
        let mut unknown_count = 0usize;
        let mut repeated = None;
        for (name, value) in members {
            let slot = match name.as_str() {
                CNF_JKT => &mut jkt,
                CNF_X5T_S256 => &mut x5t,
                _ => {
                    unknown_count += 1;
                    if unknown.len() < QUOTED_MEMBERS {
                        unknown.push(quoted(&name));
                    }
                    continue;
                }
            };
            if slot.is_some() {
                repeated.get_or_insert_with(|| quoted(&name));
            }
            *slot = Some((name, value));
        }
        if unknown_count > 0 {
            let mut names = unknown.join(", ");
            if unknown_count > unknown.len() {
                names.push_str(&format!(" and {} more", unknown_count - unknown.len()));
            }
            return Cnf::Unusable(CnfError::NotUnderstood(names));
        }
        if let Some(name) = repeated {
            return Cnf::Unusable(CnfError::Repeated(name));
        }
        if jkt.is_none() && x5t.is_none() {
            return Cnf::Unusable(CnfError::Empty);
        }
        let string = |member: Option<(String, serde_json::Value)>| match member {
            None => Ok(None),
            Some((_, serde_json::Value::String(value))) => Ok(Some(value)),
            Some((name, _)) => Err(Cnf::Unusable(CnfError::NotAString(quoted(&name)))),
        };
        match (string(jkt), string(x5t)) {
            (Ok(jkt), Ok(x5t_s256)) => Cnf::Binds(Confirmation { jkt, x5t_s256 }),
            (Err(unusable), _) | (_, Err(unusable)) => unusable,
        }
    }
}

impl From<Confirmation> for Cnf {
    fn from(confirmation: Confirmation) -> Self {
        Cnf::Binds(confirmation)
    }
}

/// A member name as an error quotes it: bounded, in Rust's debug quoting (control characters
/// escaped).
fn quoted(name: &str) -> String {
    let bounded: String = name.chars().take(QUOTED_MEMBER_CHARS).collect();
    let ellipsis = if bounded.len() < name.len() {
        "…"
    } else {
        ""
    };
    format!("{bounded:?}{ellipsis}")
}

/// Why a token's `cnf` makes it unusable. Messages name members, never values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CnfError {
    /// `cnf` is not a JSON object (`null`, a string, an array, …).
    #[error("the token's cnf claim is not a JSON object")]
    NotAnObject,
    /// `cnf` is an object with no members: it binds to nothing a proof could show.
    #[error("the token's cnf claim names no key")]
    Empty,
    /// A member warrant does not check (RFC 7800's `jwk`, `jwe`, `jku`, `kid`, another
    /// method, a case variant of `jkt`): the names, quoted and comma-separated.
    #[error(
        "the token's cnf claim has {0}, which warrant does not check (it checks jkt and x5t#S256)"
    )]
    NotUnderstood(String),
    /// `jkt` or `x5t#S256` is not a string.
    #[error("the token's cnf member {0} is not a string")]
    NotAString(String),
    /// A member named twice: JSON readers disagree about which one counts.
    #[error("the token's cnf claim names {0} twice")]
    Repeated(String),
}

impl Serialize for Cnf {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cnf::Binds(confirmation) => confirmation.serialize(serializer),
            Cnf::Unusable(_) => serializer.serialize_unit(),
        }
    }
}

impl<'de> Deserialize<'de> for Cnf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CnfVisitor)
    }
}

/// Reads any JSON value as a [`Cnf`]: an object member by member (keeping repeats, which a
/// map would merge), anything else as [`CnfError::NotAnObject`].
struct CnfVisitor;

impl<'de> Visitor<'de> for CnfVisitor {
    type Value = Cnf;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a cnf claim")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Cnf, A::Error> {
        let mut members = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let value: serde_json::Value = map.next_value()?;
            members.push((name, value));
        }
        Ok(Cnf::read(members))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Cnf, A::Error> {
        // Read as values, not skipped: the same JSON is refused as a claims reader refuses it.
        while seq.next_element::<serde_json::Value>()?.is_some() {}
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_str<E>(self, _: &str) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_unit<E>(self) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }

    fn visit_none<E>(self) -> Result<Cnf, E> {
        Ok(Cnf::Unusable(CnfError::NotAnObject))
    }
}

/// `Claims::cnf`'s reader: a `cnf` that is present, `null` included, is read by [`Cnf`]; only an
/// absent one is `None`.
pub(crate) fn present_cnf<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cnf>, D::Error> {
    Cnf::deserialize(d).map(Some)
}

/// The RFC 8705 `x5t#S256` thumbprint of a certificate: base64url (no padding) of the SHA-256
/// of its DER encoding.
pub fn certificate_thumbprint(der: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, der))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(value: serde_json::Value) -> Cnf {
        serde_json::from_value(value).unwrap()
    }

    fn read_text(text: &str) -> Cnf {
        serde_json::from_str(text).unwrap()
    }

    const JKT: &str = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs";
    const X5T: &str = "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0";

    #[test]
    fn understood_members_bind() {
        assert_eq!(
            read(json!({"jkt": JKT})),
            Cnf::Binds(Confirmation::dpop(JKT))
        );
        assert_eq!(
            read(json!({"x5t#S256": X5T})),
            Cnf::Binds(Confirmation::certificate(X5T))
        );
        assert_eq!(
            read(json!({"x5t#S256": X5T, "jkt": JKT})),
            Cnf::Binds(Confirmation {
                jkt: Some(JKT.into()),
                x5t_s256: Some(X5T.into())
            })
        );
    }

    /// Whatever else a `cnf` holds, reading it never fails and never yields a bearer token.
    #[test]
    fn anything_else_is_unusable() {
        let cases = [
            (
                json!({"jwk": {"kty": "EC"}}),
                CnfError::NotUnderstood("\"jwk\"".into()),
            ),
            (
                json!({"jkt": JKT, "kid": "k", "jku": "https://x"}),
                CnfError::NotUnderstood("\"jku\", \"kid\"".into()),
            ),
            (
                json!({"JKT": JKT}),
                CnfError::NotUnderstood("\"JKT\"".into()),
            ),
            (json!({"jkt": 5}), CnfError::NotAString("\"jkt\"".into())),
            (
                json!({"x5t#S256": null}),
                CnfError::NotAString("\"x5t#S256\"".into()),
            ),
            (json!({}), CnfError::Empty),
            (json!(null), CnfError::NotAnObject),
            (json!("jkt"), CnfError::NotAnObject),
            (json!([JKT]), CnfError::NotAnObject),
            (json!(true), CnfError::NotAnObject),
            (json!(1.5), CnfError::NotAnObject),
        ];
        for (value, why) in cases {
            assert_eq!(read(value.clone()), Cnf::Unusable(why), "{value}");
        }
        // A member named twice: serde_json's map would keep the last one silently.
        assert_eq!(
            read_text(r#"{"jkt":"a","jkt":"b"}"#),
            Cnf::Unusable(CnfError::Repeated("\"jkt\"".into()))
        );
        // A long member name is quoted bounded.
        let long = "m".repeat(1000);
        let Cnf::Unusable(why) = read(json!({ long.clone(): "x" })) else {
            panic!("a long member bound the token");
        };
        assert!(why.to_string().len() < 200, "{why}");
    }

    /// As a claim: absent is no `cnf`, present (even `null`) is read; written back, a bound one
    /// is itself and an unusable one is `null`, which reads unusable again.
    #[test]
    fn as_a_claim() {
        let claims: crate::Claims = serde_json::from_str(r#"{"iss":"i"}"#).unwrap();
        assert_eq!(claims.cnf, None);
        let claims: crate::Claims = serde_json::from_str(r#"{"cnf":null}"#).unwrap();
        assert_eq!(claims.cnf, Some(Cnf::Unusable(CnfError::NotAnObject)));
        let claims: crate::Claims =
            serde_json::from_str(r#"{"cnf":{"jwk":{"kty":"EC"}}}"#).unwrap();
        let written = String::from_utf8(claims.to_json()).unwrap();
        assert!(written.contains(r#""cnf":null"#), "{written}");
        let again: crate::Claims = serde_json::from_str(&written).unwrap();
        assert!(matches!(again.cnf, Some(Cnf::Unusable(_))));
        let bound = crate::Claims {
            cnf: Some(Confirmation::dpop(JKT).into()),
            ..crate::Claims::default()
        };
        let again: crate::Claims = serde_json::from_slice(&bound.to_json()).unwrap();
        assert_eq!(again.cnf, bound.cnf);
    }

    /// x5t#S256 is base64url SHA-256 without padding: FIPS 180-2's "abc" example digest
    /// (ba7816bf…15ad), so a wrong hash or alphabet shows.
    #[test]
    fn certificate_thumbprint_is_base64url_sha256() {
        assert_eq!(certificate_thumbprint(b"abc"), X5T);
    }

    #[test]
    fn confirmation_serializes_only_what_it_has() {
        assert_eq!(
            serde_json::to_string(&Confirmation::dpop("abc")).unwrap(),
            r#"{"jkt":"abc"}"#
        );
        let cert = Confirmation::certificate("t");
        assert_eq!(serde_json::to_string(&cert).unwrap(), r#"{"x5t#S256":"t"}"#);
        assert!(cert.binds() && !Confirmation::default().binds());
    }
}
