//! `--key-kms-uri`: `aws-kms://REGION/NAME`, the AWS region whose KMS holds the keys and the
//! name of warrant's key set there.
//!
//! The name is what warrant tags its keys with (`warrant.dev/store=NAME`): it is how an
//! operator finds them, how an IAM policy scopes who may use, tag and delete them, and what
//! every key a store lists must carry (`ownership.rs`). Give each warrant deployment its own
//! name. It may hold letters, digits and `_ . / -` (a tag value and part of an IAM condition),
//! at most 128 characters, with no empty segment.
//!
//! Credentials never go in the URI: they come from AWS's chain (environment, web identity,
//! EKS Pod Identity, instance metadata). A URI with a user, a password, a query or a fragment is
//! refused, and so is anything that is not a region and a name.

use std::fmt;
use std::str::FromStr;

/// The scheme of `--key-kms-uri`.
pub const SCHEME: &str = "aws-kms";

/// The longest name (tag values may be 256 characters; IAM conditions and messages quote it).
const MAX_NAME: usize = 128;

/// A parsed `aws-kms://REGION/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsUri {
    region: String,
    name: String,
}

/// Why a `--key-kms-uri` is refused. None of them repeats what came after the `@` of a URI
/// that carried credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KmsUriError {
    /// Not `aws-kms://`.
    #[error(
        "{0:?} is not an AWS KMS URI: write aws-kms://REGION/NAME (e.g. aws-kms://us-east-1/warrant-prod)"
    )]
    Scheme(String),
    /// The URI carries a user or password.
    #[error(
        "the KMS URI must not carry credentials: they come from AWS's credential chain (environment, web identity, EKS Pod Identity, instance metadata). Write aws-kms://REGION/NAME"
    )]
    Credentials,
    /// A query or fragment.
    #[error(
        "{0:?}: the KMS URI takes no query or fragment: write aws-kms://REGION/NAME (the endpoint is --kms-endpoint)"
    )]
    Query(String),
    /// The region is missing or not a region name.
    #[error(
        "{0:?}: {1:?} is not an AWS region name (lower-case letters, digits and '-', such as us-east-1)"
    )]
    Region(String, String),
    /// The name is missing or malformed.
    #[error(
        "{0:?}: the name of warrant's keys must be 1 to {MAX_NAME} letters, digits and '_', '.', '/', '-', with no empty segment (e.g. aws-kms://us-east-1/warrant-prod)"
    )]
    Name(String),
}

impl KmsUri {
    /// Parses `aws-kms://REGION/NAME`.
    pub fn parse(text: &str) -> Result<KmsUri, KmsUriError> {
        let rest = text
            .strip_prefix(SCHEME)
            .and_then(|r| r.strip_prefix("://"))
            .ok_or_else(|| KmsUriError::Scheme(redacted(text)))?;
        let (authority, name) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.contains('@') {
            return Err(KmsUriError::Credentials);
        }
        if name.contains(['?', '#']) || authority.contains(['?', '#']) {
            return Err(KmsUriError::Query(text.to_owned()));
        }
        let region_ok = !authority.is_empty()
            && authority.len() <= 32
            && authority
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !authority.starts_with('-')
            && !authority.ends_with('-');
        if !region_ok {
            return Err(KmsUriError::Region(text.to_owned(), authority.to_owned()));
        }
        let name_ok = !name.is_empty()
            && name.len() <= MAX_NAME
            && name.split('/').all(|segment| !segment.is_empty())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'));
        if !name_ok {
            return Err(KmsUriError::Name(text.to_owned()));
        }
        Ok(KmsUri {
            region: authority.to_owned(),
            name: name.to_owned(),
        })
    }

    /// The region (`us-east-1`).
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The name of warrant's key set, the value of each key's `warrant.dev/store` tag.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `text` without anything between `://` and an `@`, for a message about a URI that is not
/// ours but may carry a secret.
fn redacted(text: &str) -> String {
    match (text.split_once("://"), text.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, after))) => format!("{scheme}://…@{after}"),
        _ => text.to_owned(),
    }
}

impl fmt::Display for KmsUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}://{}/{}", self.region, self.name)
    }
}

impl FromStr for KmsUri {
    type Err = KmsUriError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KmsUri::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_and_a_name() {
        let uri = KmsUri::parse("aws-kms://eu-west-1/warrant/prod-a").unwrap();
        assert_eq!(uri.region(), "eu-west-1");
        assert_eq!(uri.name(), "warrant/prod-a");
        assert_eq!(uri.to_string(), "aws-kms://eu-west-1/warrant/prod-a");
        assert_eq!(
            "aws-kms://us-gov-west-1/w.1_x"
                .parse::<KmsUri>()
                .unwrap()
                .name(),
            "w.1_x"
        );
    }

    #[test]
    fn credentials_are_refused_without_being_repeated() {
        for text in [
            "aws-kms://AKIAEXAMPLE:secret@us-east-1/warrant",
            "aws-kms://AKIAEXAMPLE@us-east-1/warrant",
        ] {
            let err = KmsUri::parse(text).unwrap_err();
            assert_eq!(err, KmsUriError::Credentials);
            let message = err.to_string();
            assert!(
                !message.contains("secret") && !message.contains("AKIA"),
                "{message}"
            );
        }
        let err = KmsUri::parse("awskms://AKIA:secret@us-east-1/x").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }

    #[test]
    fn anything_else_is_refused_with_the_form_to_write() {
        for (text, what) in [
            ("pkcs11:token=x", "is not an AWS KMS URI"),
            ("aws-kms:///warrant", "is not an AWS region"),
            ("aws-kms://US-EAST-1/warrant", "is not an AWS region"),
            ("aws-kms://us-east-1", "the name of warrant's keys"),
            ("aws-kms://us-east-1/", "the name of warrant's keys"),
            ("aws-kms://us-east-1/a//b", "the name of warrant's keys"),
            ("aws-kms://us-east-1/a/", "the name of warrant's keys"),
            ("aws-kms://us-east-1/a b", "the name of warrant's keys"),
            ("aws-kms://us-east-1/warrant?endpoint=x", "no query"),
        ] {
            let err = KmsUri::parse(text).unwrap_err().to_string();
            assert!(err.contains(what), "{text}: {err}");
        }
        let long = format!("aws-kms://us-east-1/{}", "a".repeat(129));
        assert!(KmsUri::parse(&long).is_err());
    }
}
