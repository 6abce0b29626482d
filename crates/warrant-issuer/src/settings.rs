//! The issuer settings the API works with, validated once at startup with kube-apiserver's rules
//! and messages.

use warrant_token::ExpirationPolicy;

/// What the server issues and accepts.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `--service-account-issuer`: the first signs, all are accepted.
    pub issuers: Vec<String>,
    /// `--api-audiences`: the audiences of tokens for warrant's own API, the default audiences of
    /// a TokenRequest, and those a TokenReview without audiences checks against.
    pub api_audiences: Vec<String>,
    /// Where the discovery document says the JWKS is.
    pub jwks_uri: String,
    /// `--service-account-max-token-expiration` and `--service-account-extend-token-expiration`.
    pub expiration: ExpirationPolicy,
    /// `--signature-cache-size`: how many verified signatures are remembered (0: none).
    pub signature_cache_entries: u64,
    /// `--jwks-x5c`: the JWKS carries each managed key's certificate (`x5c`, `x5t#S256`).
    pub jwks_x5c: bool,
}

/// The default of [`Settings::signature_cache_entries`]: about 70 MiB when full.
pub const DEFAULT_SIGNATURE_CACHE_ENTRIES: u64 = 65_536;

/// Why the issuer settings are unusable (kube-apiserver's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// No issuer.
    #[error("service-account-issuer is a required flag")]
    NoIssuer,
    /// An empty issuer.
    #[error("service-account-issuer should not be an empty string")]
    EmptyIssuer,
    /// The same issuer twice.
    #[error("service-account-issuer {0:?} is already specified")]
    DuplicateIssuer(String),
    /// An issuer with a colon that does not parse as a URL.
    #[error("service-account-issuer {0:?} contained a ':' but was not a valid URL: {1}")]
    IssuerNotUrl(String, String),
    /// A max expiration outside 1 h to 2^32 s.
    #[error("the service-account-max-token-expiration must be between 1 hour and 2^32 seconds")]
    MaxExpiration,
}

impl Settings {
    /// The issuer new tokens carry (`iss`) and discovery names: the first of `issuers`.
    pub fn issuer(&self) -> &str {
        first_issuer(&self.issuers)
    }

    /// The path of the first issuer's URL without a trailing `/` (`/tenant-a` for
    /// `https://host/tenant-a/`), where the discovery document and the JWKS are served too;
    /// empty for an issuer at the root, or one that is not a URL.
    pub fn issuer_path(&self) -> String {
        url_path(self.issuer())
    }
}

/// The issuer new tokens carry and discovery names: the first given (kube-apiserver's rule for
/// a repeated `--service-account-issuer`; the others are only accepted); empty when none is.
pub fn first_issuer(issuers: &[String]) -> &str {
    issuers.first().map(String::as_str).unwrap_or_default()
}

/// The path of a URL without a trailing `/` (`/tenant-a` for `https://host/tenant-a/`); empty
/// for one at the root, or text that is not a URL.
pub fn url_path(url: &str) -> String {
    url::Url::parse(url)
        .map(|url| url.path().trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

/// Checks `--service-account-issuer` values as kube-apiserver does.
pub fn validate_issuers(issuers: &[String]) -> Result<(), SettingsError> {
    if issuers.is_empty() {
        return Err(SettingsError::NoIssuer);
    }
    for (i, issuer) in issuers.iter().enumerate() {
        if issuer.is_empty() {
            return Err(SettingsError::EmptyIssuer);
        }
        if issuers.get(..i).is_some_and(|seen| seen.contains(issuer)) {
            return Err(SettingsError::DuplicateIssuer(issuer.clone()));
        }
        if issuer.contains(':')
            && let Err(e) = url::Url::parse(issuer)
        {
            return Err(SettingsError::IssuerNotUrl(issuer.clone(), e.to_string()));
        }
    }
    Ok(())
}

/// Checks `--service-account-max-token-expiration` (seconds) as kube-apiserver does.
pub fn validate_max_expiration(seconds: i64) -> Result<(), SettingsError> {
    if (3600..=warrant_token::MAX_EXPIRATION_SECONDS).contains(&seconds) {
        Ok(())
    } else {
        Err(SettingsError::MaxExpiration)
    }
}

/// The cap `--service-account-max-token-expiration` (seconds) sets, as kube-apiserver reads
/// it: absent or 0 is none; anything else is checked ([`validate_max_expiration`]).
pub fn max_expiration_cap(flag: Option<i64>) -> Result<Option<i64>, SettingsError> {
    match flag {
        None | Some(0) => Ok(None),
        Some(seconds) => validate_max_expiration(seconds).map(|()| Some(seconds)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(issuers: &[&str]) -> Result<(), String> {
        validate_issuers(&issuers.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn issuer_rules() {
        assert_eq!(
            v(&[]).unwrap_err(),
            "service-account-issuer is a required flag"
        );
        assert_eq!(
            v(&[""]).unwrap_err(),
            "service-account-issuer should not be an empty string"
        );
        assert_eq!(
            v(&["https://a", "https://a"]).unwrap_err(),
            r#"service-account-issuer "https://a" is already specified"#
        );
        assert!(v(&["https://a:x"]).unwrap_err().starts_with(
            r#"service-account-issuer "https://a:x" contained a ':' but was not a valid URL"#
        ));
        assert_eq!(v(&["https://a", "kubernetes/serviceaccount-ish"]), Ok(()));
    }

    #[test]
    fn max_expiration_bounds() {
        assert!(validate_max_expiration(3599).is_err());
        assert!(validate_max_expiration(3600).is_ok());
        assert!(validate_max_expiration(1 << 32).is_ok());
        assert!(validate_max_expiration((1 << 32) + 1).is_err());
    }
}
