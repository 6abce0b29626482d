//! Key binding decided once: what a token's `cnf` claim (RFC 7800) binds it to, read by one
//! parser ([`Cnf`]), and one check of the evidence a caller gathered ([`check_binding`]).
//!
//! Every place that accepts a token (warrant's own API, the `warrant.dev` TokenReview, kube's
//! TokenReview routes, `warrant verify`) asks the same two questions through these: what does the
//! token's `cnf` bind it to, and did what came with the token prove every one of those
//! bindings? The rules:
//!
//! - no `cnf` claim: a bearer token, as kube-apiserver's are; evidence offered for a binding it
//!   does not have is refused (a relying party that checks proofs expects bound tokens);
//! - a `cnf` whose members are all understood (`jkt`, RFC 9449; `x5t#S256`, RFC 8705), each a
//!   string: every member present must be proven: a token bound to a DPoP key and a certificate
//!   needs the proof and the certificate;
//! - any other `cnf` (RFC 7800's `jwk`, `jwe`, `jku` or `kid`, a member of another type, a
//!   member named twice, no member at all, not an object): the token is unusable everywhere,
//!   never a bearer token. An issuer that wrote a binding meant it to be checked; a binding
//!   warrant cannot check is one it cannot honour.
//!
//! What this trusts: the token's signature, checked before (a `cnf` is only as good as the key
//! that signed it), and the caller for the evidence it gathered: the certificate of its own
//! connection, and the DPoP proof, which the caller checks against its request and its replay
//! cache through the `prove` function it passes (see `crate::verify_proof`).
//!
//! Cost: reading `cnf` is part of the claims' one JSON parse (one `serde_json::Value` per member
//! value); the check is a few comparisons, plus the caller's proof check.

use std::fmt;

use aws_lc_rs::digest;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

use crate::dpop::{DpopError, VerifiedProof};

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
    /// Bound to these keys; each one must be proven ([`check_binding`]). As read from a token,
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

/// The client certificate that came with a token, as the caller knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CertificateEvidence<'a> {
    /// None.
    #[default]
    None,
    /// The certificate of the connection the token came over, by its RFC 8705 thumbprint. It
    /// may be there for another reason (at warrant's API a certificate also names a user), so
    /// it proves a certificate binding, and beside a token not bound to it means nothing.
    Connection(&'a str),
    /// A certificate's thumbprint given as the proof of the token's binding (a review's
    /// `spec.certificateThumbprint`, `warrant verify --client-certificate`): refused beside a
    /// token not bound to a certificate.
    Given(&'a str),
}

/// What came with a token to prove its binding, as the caller gathered it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evidence<'a> {
    /// True if a DPoP proof came with the token (under the `DPoP` scheme, in a review's
    /// `spec.dpop`, as `warrant verify --dpop-proof`). It is checked, if the token is bound to a
    /// DPoP key, by the `prove` function given to [`check_binding`]; otherwise it is refused.
    pub dpop_proof: bool,
    /// The client certificate.
    pub certificate: CertificateEvidence<'a>,
}

/// Why a token's binding does not hold. Messages name bindings by their thumbprints (hashes of
/// public keys and certificates), never the token or the proof.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BindingError {
    /// The token's `cnf` is one warrant does not understand: never a bearer token.
    #[error("{0}: the token is not valid anywhere")]
    Unusable(#[source] CnfError),
    /// Bound to a DPoP key, and no proof came with it.
    #[error(
        "the token is bound to a DPoP key (cnf.jkt {jkt}) and is not valid without a proof of that key"
    )]
    ProofMissing {
        /// The key's thumbprint.
        jkt: String,
    },
    /// Bound to a certificate, and none came with it.
    #[error(
        "the token is bound to a client certificate (cnf x5t#S256 {x5t}) and is not valid without it"
    )]
    CertificateMissing {
        /// The certificate's thumbprint.
        x5t: String,
    },
    /// A DPoP proof came with a token not bound to a DPoP key.
    #[error(
        "a DPoP proof came with the token, but the token is not bound to a DPoP key (it has no cnf.jkt)"
    )]
    NotDpopBound,
    /// A certificate was given as proof for a token not bound to one.
    #[error(
        "a client certificate was given as proof, but the token is not bound to a certificate (it has no cnf x5t#S256)"
    )]
    NotCertificateBound,
    /// The proof does not hold for this token and request (or could not be recorded: see
    /// [`DpopError::is_overload`]).
    #[error("invalid DPoP proof: {0}")]
    Proof(#[source] DpopError),
    /// The certificate is another one.
    #[error(
        "the client certificate (x5t#S256 {presented}) is not the one the token is bound to (cnf x5t#S256 {bound})"
    )]
    Certificate {
        /// The token's `x5t#S256`.
        bound: String,
        /// The presented certificate's.
        presented: String,
    },
}

impl BindingError {
    /// True if the proof was not refused but could not be taken now (the replay cache is full):
    /// the caller is to retry, neither refused nor let in.
    pub fn is_overload(&self) -> bool {
        matches!(self, BindingError::Proof(e) if e.is_overload())
    }
}

/// The one check of a token's key binding: whether `evidence` proves every binding `cnf` (the
/// token's claim, signature already verified) names. `prove` checks the DPoP proof that came
/// with the token against the thumbprint the token is bound to (and against the caller's
/// request, token and replay cache); it is called only for a token bound to a DPoP key, and
/// last, once everything else holds, so a proof is spent only when it decides.
///
/// Returns the binding proven, `None` for a bearer token (no `cnf`, no evidence offered).
pub fn check_binding<'c>(
    cnf: Option<&'c Cnf>,
    evidence: &Evidence<'_>,
    prove: impl FnOnce(&str) -> Result<VerifiedProof, DpopError>,
) -> Result<Option<&'c Confirmation>, BindingError> {
    let given_certificate = matches!(evidence.certificate, CertificateEvidence::Given(_));
    let confirmation = match cnf {
        None if evidence.dpop_proof => return Err(BindingError::NotDpopBound),
        None if given_certificate => return Err(BindingError::NotCertificateBound),
        None => return Ok(None),
        Some(Cnf::Unusable(why)) => return Err(BindingError::Unusable(why.clone())),
        Some(Cnf::Binds(confirmation)) if !confirmation.binds() => {
            return Err(BindingError::Unusable(CnfError::Empty));
        }
        Some(Cnf::Binds(confirmation)) => confirmation,
    };
    if evidence.dpop_proof && confirmation.jkt.is_none() {
        return Err(BindingError::NotDpopBound);
    }
    if given_certificate && confirmation.x5t_s256.is_none() {
        return Err(BindingError::NotCertificateBound);
    }
    if let Some(jkt) = &confirmation.jkt
        && !evidence.dpop_proof
    {
        return Err(BindingError::ProofMissing { jkt: jkt.clone() });
    }
    if let Some(x5t) = &confirmation.x5t_s256 {
        let presented = match evidence.certificate {
            CertificateEvidence::None => {
                return Err(BindingError::CertificateMissing { x5t: x5t.clone() });
            }
            CertificateEvidence::Connection(presented) | CertificateEvidence::Given(presented) => {
                presented
            }
        };
        if !same_thumbprint(x5t, presented) {
            return Err(BindingError::Certificate {
                bound: x5t.clone(),
                presented: presented.to_owned(),
            });
        }
    }
    if let Some(jkt) = &confirmation.jkt {
        let proof = prove(jkt).map_err(BindingError::Proof)?;
        // `prove` was asked for this key; a proof of another key never passes, whatever it did.
        if !same_thumbprint(jkt, &proof.jkt) {
            return Err(BindingError::Proof(DpopError::Thumbprint));
        }
    }
    Ok(Some(confirmation))
}

/// Compares two thumbprints. Both are public hashes; the comparison is constant-time all the
/// same.
fn same_thumbprint(a: &str, b: &str) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a.as_bytes(), b.as_bytes()).is_ok()
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

    fn proof_of(jkt: &str) -> VerifiedProof {
        VerifiedProof {
            jkt: jkt.to_owned(),
            jti: "j".to_owned(),
            iat: 0,
        }
    }

    /// A `prove` that must not be called.
    fn unreachable_proof(_: &str) -> Result<VerifiedProof, DpopError> {
        panic!("the proof was checked")
    }

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

    #[test]
    fn a_bearer_token_takes_no_evidence() {
        let none = Evidence::default();
        assert_eq!(check_binding(None, &none, unreachable_proof), Ok(None));
        // The connection's certificate says nothing about an unbound token.
        let connection = Evidence {
            certificate: CertificateEvidence::Connection(X5T),
            ..none
        };
        assert_eq!(
            check_binding(None, &connection, unreachable_proof),
            Ok(None)
        );
        let proof = Evidence {
            dpop_proof: true,
            ..none
        };
        assert_eq!(
            check_binding(None, &proof, unreachable_proof),
            Err(BindingError::NotDpopBound)
        );
        let given = Evidence {
            certificate: CertificateEvidence::Given(X5T),
            ..none
        };
        assert_eq!(
            check_binding(None, &given, unreachable_proof),
            Err(BindingError::NotCertificateBound)
        );
    }

    /// Every binding present must be proven: a token bound to a DPoP key and a certificate
    /// passes with both, and with either alone it does not.
    #[test]
    fn every_binding_present_must_be_proven() {
        let both = Cnf::Binds(Confirmation {
            jkt: Some(JKT.into()),
            x5t_s256: Some(X5T.into()),
        });
        let proof_only = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::None,
        };
        assert_eq!(
            check_binding(Some(&both), &proof_only, |_| Ok(proof_of(JKT))),
            Err(BindingError::CertificateMissing { x5t: X5T.into() })
        );
        let certificate_only = Evidence {
            dpop_proof: false,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert_eq!(
            check_binding(Some(&both), &certificate_only, unreachable_proof),
            Err(BindingError::ProofMissing { jkt: JKT.into() })
        );
        let all = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert_eq!(
            check_binding(Some(&both), &all, |jkt| {
                assert_eq!(jkt, JKT);
                Ok(proof_of(JKT))
            }),
            Ok(both.binding().ok())
        );
        // Another certificate: refused before the proof is spent.
        let other = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection("another"),
        };
        assert!(matches!(
            check_binding(Some(&both), &other, unreachable_proof),
            Err(BindingError::Certificate { .. })
        ));
    }

    #[test]
    fn a_proof_must_be_of_the_bound_key() {
        let dpop = Cnf::Binds(Confirmation::dpop(JKT));
        let proof = Evidence {
            dpop_proof: true,
            ..Evidence::default()
        };
        assert_eq!(
            check_binding(Some(&dpop), &proof, |_| Ok(proof_of("another"))),
            Err(BindingError::Proof(DpopError::Thumbprint))
        );
        assert_eq!(
            check_binding(Some(&dpop), &proof, |_| Err(DpopError::Replayed)),
            Err(BindingError::Proof(DpopError::Replayed))
        );
        assert_eq!(
            check_binding(Some(&dpop), &Evidence::default(), unreachable_proof),
            Err(BindingError::ProofMissing { jkt: JKT.into() })
        );
        // A certificate given for a DPoP-bound token proves nothing and is refused.
        let given = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Given(X5T),
        };
        assert_eq!(
            check_binding(Some(&dpop), &given, unreachable_proof),
            Err(BindingError::NotCertificateBound)
        );
        // A connection's certificate beside a DPoP-bound token is no matter.
        let beside = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert!(check_binding(Some(&dpop), &beside, |_| Ok(proof_of(JKT))).is_ok());
    }

    #[test]
    fn a_certificate_binding_takes_its_certificate_only() {
        let certificate = Cnf::Binds(Confirmation::certificate(X5T));
        for evidence in [
            CertificateEvidence::Connection(X5T),
            CertificateEvidence::Given(X5T),
        ] {
            let evidence = Evidence {
                dpop_proof: false,
                certificate: evidence,
            };
            assert!(check_binding(Some(&certificate), &evidence, unreachable_proof).is_ok());
        }
        assert_eq!(
            check_binding(Some(&certificate), &Evidence::default(), unreachable_proof),
            Err(BindingError::CertificateMissing { x5t: X5T.into() })
        );
        let with_proof = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert_eq!(
            check_binding(Some(&certificate), &with_proof, unreachable_proof),
            Err(BindingError::NotDpopBound)
        );
    }

    /// An unusable `cnf` is refused whatever came with it, before any proof is spent.
    #[test]
    fn an_unusable_cnf_is_never_a_bearer_token() {
        let unusable = read(json!({"jwk": {"kty": "EC", "crv": "P-256"}}));
        for evidence in [
            Evidence::default(),
            Evidence {
                dpop_proof: true,
                certificate: CertificateEvidence::Connection(X5T),
            },
            Evidence {
                dpop_proof: false,
                certificate: CertificateEvidence::Given(X5T),
            },
        ] {
            assert!(matches!(
                check_binding(Some(&unusable), &evidence, unreachable_proof),
                Err(BindingError::Unusable(CnfError::NotUnderstood(_)))
            ));
        }
        // A Confirmation naming nothing, made in code, is as unusable as one read.
        let empty = Cnf::Binds(Confirmation::default());
        assert_eq!(
            check_binding(Some(&empty), &Evidence::default(), unreachable_proof),
            Err(BindingError::Unusable(CnfError::Empty))
        );
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
