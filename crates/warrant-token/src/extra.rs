//! Claims beyond kube's: what an authorization policy adds to the tokens of the audiences it
//! names (docs/tokens.md, "Extra claims"), and the checks of AWS's session tags.
//!
//! This module knows no policy and no template: it holds the claims once made, the rule that
//! none of them may be a registered claim (nor a spelling that a Go reader folds into one), and
//! the format and limits of the one recipe warrant knows by name, AWS's session tags.
//!
//! Costs: a token without extra claims pays nothing (its payload is written as before, byte for
//! byte kube-apiserver's). A token with them is written through a `serde_json::Value`, whose
//! object keys are sorted as Go's encoder sorts a map's: a few microseconds more.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::strict::{REGISTERED_CLAIMS, folds_to};

/// Claims added to a token, by name. Sorted, as they are written.
pub type ExtraClaims = BTreeMap<String, Value>;

/// True if `name` may never be an extra claim: a registered claim (`iss`, `sub`, `aud`, `exp`,
/// `iat`, `nbf`, `jti`, `kubernetes.io`, `cnf`), or a spelling that Go's JSON decoder folds into
/// one (`Sub`, `EXP`), which warrant's own strict reader and its signer refuse.
pub fn is_reserved_claim(name: &str) -> bool {
    REGISTERED_CLAIMS
        .iter()
        .any(|registered| folds_to(name, registered))
}

/// The claims beyond kube's that `token` (a compact JWS, its signature already checked) carries,
/// as an audit record of its review names them: every top-level claim that is not a registered
/// one; `None` for a token with none, or whose payload does not decode. Decodes the payload
/// again, so a reviewer asks only when it records them.
pub fn extra_claims_in(token: &str) -> Option<Box<ExtraClaims>> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    let extra: ExtraClaims = claims
        .into_iter()
        .filter(|(name, _)| !is_reserved_claim(name))
        .collect();
    (!extra.is_empty()).then(|| Box::new(extra))
}

/// The claim AWS STS reads session tags from (`AssumeRoleWithWebIdentity`).
pub const AWS_TAGS_CLAIM: &str = "https://aws.amazon.com/tags";

/// AWS's limits on session tags, from the STS API reference
/// (<https://docs.aws.amazon.com/STS/latest/APIReference/API_Tag.html>: key 1 to 128
/// characters, value 0 to 256, both of the pattern `[\p{L}\p{Z}\p{N}_.:/=+\-@]`) and the IAM
/// user guide's "Pass session tags in AWS STS"
/// (<https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html>: at most 50 session
/// tags; keys are compared without case, so `Team` and `team` are one tag). Lengths are in
/// characters, not bytes.
pub mod aws_limits {
    /// The most session tags one token may pass.
    pub const MAX_TAGS: usize = 50;
    /// The longest tag key, in characters.
    pub const MAX_KEY_CHARS: usize = 128;
    /// The longest tag value, in characters.
    pub const MAX_VALUE_CHARS: usize = 256;
}

/// True for a character AWS allows in a tag key or value: `[\p{L}\p{Z}\p{N}_.:/=+\-@]`.
/// `\p{L}` and `\p{N}` are Rust's `is_alphabetic`/`is_numeric` as far as they agree with the
/// Unicode categories (letters include a few marks Rust counts as alphabetic: AWS would refuse
/// those, and a tag then fails at STS rather than here). `\p{Z}` is the separators: space,
/// no-break space and the other Zs, Zl and Zp characters.
pub fn aws_tag_char(c: char) -> bool {
    c.is_alphabetic()
        || c.is_numeric()
        || matches!(c, '_' | '.' | ':' | '/' | '=' | '+' | '-' | '@')
        || is_separator(c)
}

/// Unicode general category Z (Zs, Zl, Zp).
fn is_separator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Why a session tag's key or value is not one AWS accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AwsTagError {
    /// An empty key.
    #[error("a session tag key may not be empty")]
    EmptyKey,
    /// A key over 128 characters.
    #[error("the session tag key is {0} characters long; AWS allows at most 128")]
    KeyTooLong(usize),
    /// A value over 256 characters.
    #[error("the value of session tag {key:?} is {chars} characters long; AWS allows at most 256")]
    ValueTooLong {
        /// The tag.
        key: String,
        /// The value's length in characters.
        chars: usize,
    },
    /// A character outside AWS's pattern.
    #[error(
        "{what} holds {found:?}, which AWS does not allow (letters, digits, spaces and _ . : / = + - @ only)"
    )]
    Character {
        /// `the session tag key "x"` or `the value of session tag "x"`.
        what: String,
        /// The first character refused.
        found: char,
    },
    /// Over 50 tags.
    #[error("{0} session tags; AWS allows at most 50")]
    TooMany(usize),
    /// Two keys that differ only in case.
    #[error("session tags {0:?} and {1:?} differ only in case, and AWS reads them as one")]
    SameKey(String, String),
    /// A transitive key that is not a tag.
    #[error("transitive tag key {0:?} is not one of the principal tags")]
    TransitiveNotTag(String),
}

/// Checks a session tag key against AWS's limits.
pub fn check_aws_tag_key(key: &str) -> Result<(), AwsTagError> {
    let chars = key.chars().count();
    if chars == 0 {
        return Err(AwsTagError::EmptyKey);
    }
    if chars > aws_limits::MAX_KEY_CHARS {
        return Err(AwsTagError::KeyTooLong(chars));
    }
    if let Some(found) = key.chars().find(|c| !aws_tag_char(*c)) {
        return Err(AwsTagError::Character {
            what: format!("the session tag key {key:?}"),
            found,
        });
    }
    Ok(())
}

/// Checks a session tag value (of the tag `key`) against AWS's limits.
pub fn check_aws_tag_value(key: &str, value: &str) -> Result<(), AwsTagError> {
    let chars = value.chars().count();
    if chars > aws_limits::MAX_VALUE_CHARS {
        return Err(AwsTagError::ValueTooLong {
            key: key.to_owned(),
            chars,
        });
    }
    if let Some(found) = value.chars().find(|c| !aws_tag_char(*c)) {
        return Err(AwsTagError::Character {
            what: format!("the value of session tag {key:?}"),
            found,
        });
    }
    Ok(())
}

/// Checks a set of tag keys, and the transitive keys among them: at most 50, none twice in
/// another case, every transitive key a tag.
pub fn check_aws_tag_keys<'a>(
    keys: impl IntoIterator<Item = &'a str>,
    transitive: &[String],
) -> Result<(), AwsTagError> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for key in keys {
        check_aws_tag_key(key)?;
        if let Some(first) = seen.insert(key.to_lowercase(), key) {
            return Err(AwsTagError::SameKey(first.to_owned(), key.to_owned()));
        }
    }
    if seen.len() > aws_limits::MAX_TAGS {
        return Err(AwsTagError::TooMany(seen.len()));
    }
    if let Some(missing) = transitive
        .iter()
        .find(|t| !seen.values().any(|key| key == t))
    {
        return Err(AwsTagError::TransitiveNotTag(missing.clone()));
    }
    Ok(())
}

/// The value of the [`AWS_TAGS_CLAIM`] claim for `tags` (key, value) and the `transitive`
/// keys among them, after checking each against AWS's limits: `principal_tags` maps each key to
/// a list of its one value, as AWS's example token writes it; `transitive_tag_keys` is left out
/// when empty. `None` when there is no tag.
pub fn aws_session_tags(
    tags: &[(String, String)],
    transitive: &[String],
) -> Result<Option<Value>, AwsTagError> {
    if tags.is_empty() {
        return Ok(None);
    }
    check_aws_tag_keys(tags.iter().map(|(k, _)| k.as_str()), transitive)?;
    let mut principal = Map::new();
    for (key, value) in tags {
        check_aws_tag_value(key, value)?;
        principal.insert(
            key.clone(),
            Value::Array(vec![Value::String(value.clone())]),
        );
    }
    let mut claim = Map::new();
    claim.insert("principal_tags".to_owned(), Value::Object(principal));
    if !transitive.is_empty() {
        claim.insert(
            "transitive_tag_keys".to_owned(),
            Value::Array(transitive.iter().cloned().map(Value::String).collect()),
        );
    }
    Ok(Some(Value::Object(claim)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_extra_claims_are_read_back_and_kubes_are_not_among_them() {
        use base64::Engine as _;
        let encode =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let payload = serde_json::json!({
            "aud": ["sts"], "sub": "system:serviceaccount:a:b", "kubernetes.io": {},
            "https://aws.amazon.com/tags": {"principal_tags": {"team": ["blue"]}},
            "team": "blue",
        });
        let token = format!("e30.{}.c2ln", encode(&payload));
        let extra = extra_claims_in(&token).unwrap();
        assert_eq!(
            extra.keys().collect::<Vec<_>>(),
            ["https://aws.amazon.com/tags", "team"]
        );
        let plain = serde_json::json!({"aud": ["x"], "sub": "s", "kubernetes.io": {}});
        assert_eq!(
            extra_claims_in(&format!("e30.{}.c2ln", encode(&plain))),
            None
        );
        assert_eq!(extra_claims_in("not a token"), None);
    }

    #[test]
    fn reserved_claims_include_their_go_spellings() {
        for name in [
            "iss",
            "sub",
            "aud",
            "exp",
            "iat",
            "nbf",
            "jti",
            "kubernetes.io",
            "cnf",
            "Sub",
            "EXP",
            "Kubernetes.IO",
            "\u{17f}ub",
        ] {
            assert!(is_reserved_claim(name), "{name}");
        }
        for name in [
            "team",
            "subject",
            "https://aws.amazon.com/tags",
            "kubernetes",
            "",
        ] {
            assert!(!is_reserved_claim(name), "{name}");
        }
    }

    /// The example token of AWS's IAM user guide ("Passing session tags using
    /// AssumeRoleWithWebIdentity", id_session-tags.html): three tags, two of them transitive.
    #[test]
    fn session_tags_as_aws_documents_them() {
        let tags = [
            ("Project", "Automation"),
            ("CostCenter", "987654"),
            ("Department", "Engineering"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let transitive = ["Project", "CostCenter"].map(str::to_owned);
        let claim = aws_session_tags(&tags, &transitive).unwrap().unwrap();
        let documented: Value = serde_json::from_str(
            r#"{"principal_tags": {"Project": ["Automation"], "CostCenter": ["987654"],
                "Department": ["Engineering"]},
                "transitive_tag_keys": ["Project", "CostCenter"]}"#,
        )
        .unwrap();
        assert_eq!(claim, documented);
        // Field by field: each tag is a list of exactly its one value.
        let principal = claim["principal_tags"].as_object().unwrap();
        assert_eq!(principal.len(), 3);
        for (key, value) in &tags {
            assert_eq!(
                principal[key],
                Value::Array(vec![Value::String(value.clone())])
            );
        }
        assert_eq!(
            claim["transitive_tag_keys"],
            serde_json::json!(["Project", "CostCenter"])
        );
        let only = aws_session_tags(&tags[..1], &[]).unwrap().unwrap();
        assert!(only.get("transitive_tag_keys").is_none());
        assert_eq!(aws_session_tags(&[], &[]).unwrap(), None);
    }

    #[test]
    fn session_tags_within_aws_limits() {
        let tag = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let at_limits = [tag(&"k".repeat(128), &"v".repeat(256))];
        assert!(aws_session_tags(&at_limits, &[]).is_ok());
        // Characters, not bytes: 256 letters of two bytes each.
        assert!(aws_session_tags(&[tag("k", &"é".repeat(256))], &[]).is_ok());
        assert_eq!(
            aws_session_tags(&[tag(&"k".repeat(129), "v")], &[]),
            Err(AwsTagError::KeyTooLong(129))
        );
        assert_eq!(
            aws_session_tags(&[tag("team", &"v".repeat(257))], &[]),
            Err(AwsTagError::ValueTooLong {
                key: "team".into(),
                chars: 257
            })
        );
        assert!(matches!(
            aws_session_tags(&[tag("team", "a,b")], &[]),
            Err(AwsTagError::Character { found: ',', .. })
        ));
        assert!(matches!(
            aws_session_tags(&[tag("te*m", "a")], &[]),
            Err(AwsTagError::Character { found: '*', .. })
        ));
        assert_eq!(
            aws_session_tags(&[tag("", "a")], &[]),
            Err(AwsTagError::EmptyKey)
        );
        // Every allowed punctuation mark, a space, digits and letters of other scripts.
        assert!(aws_session_tags(&[tag("a_.:/=+-@ 9", "Ünïcödé 東京 ٣")], &[]).is_ok());
        assert!(
            aws_session_tags(&[tag("k", "")], &[]).is_ok(),
            "an empty value is allowed"
        );
        let fifty: Vec<_> = (0..50).map(|i| tag(&format!("k{i}"), "v")).collect();
        assert!(aws_session_tags(&fifty, &[]).is_ok());
        let fifty_one: Vec<_> = (0..51).map(|i| tag(&format!("k{i}"), "v")).collect();
        assert_eq!(
            aws_session_tags(&fifty_one, &[]),
            Err(AwsTagError::TooMany(51))
        );
        assert_eq!(
            aws_session_tags(&[tag("Team", "a"), tag("team", "b")], &[]),
            Err(AwsTagError::SameKey("Team".into(), "team".into()))
        );
        assert_eq!(
            aws_session_tags(&[tag("Team", "a")], &["Owner".to_owned()]),
            Err(AwsTagError::TransitiveNotTag("Owner".into()))
        );
    }
}
