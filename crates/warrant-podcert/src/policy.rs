//! Who gets certificates from which signer name, of which key types, for how long; and the
//! SPIFFE trust domain their IDs are in. Meant to become the `podCertificates` section of the
//! policy file (docs/security.md's format: globs where `*` matches any run of characters,
//! unknown fields refused so a misspelt key cannot widen a grant):
//!
//! ```yaml
//! podCertificates:
//!   trustDomain: cluster.example
//!   signers:
//!     - signerName: warrant.example.com/spiffe
//!       namespaces: ["*"]
//!       serviceAccounts: ["*"]          # in those namespaces
//!       keyTypes: [ECDSAP256, ED25519]  # default: every type kube accepts
//!       maxExpirationSeconds: 86400     # default 86400; at least 3600
//! ```
//!
//! A signer name with no entry here is not warrant's: its PCRs are left alone.

use serde::Deserialize;

use crate::key::KeyType;

/// The shortest leaf kube-apiserver accepts (1 h).
pub const MIN_LIFETIME_SECONDS: i64 = 3600;

/// Why a policy is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The trust domain is not a SPIFFE trust domain name.
    #[error(
        "podCertificates.trustDomain {0:?} is not a trust domain: lowercase letters, digits, \
         '.', '-' and '_' only, not empty"
    )]
    TrustDomain(String),
    /// A signer name is not `<domain>/<path>`, or is in `kubernetes.io`'s reserved space.
    #[error("podCertificates signer name {0:?} must be <domain>/<path>, outside kubernetes.io")]
    SignerName(String),
    /// The same signer name twice.
    #[error("podCertificates lists signer name {0:?} twice")]
    Duplicate(String),
    /// A lifetime below kube's minimum.
    #[error(
        "podCertificates signer {0:?}: maxExpirationSeconds must be at least 3600 (kube-apiserver \
         refuses shorter leaves)"
    )]
    Lifetime(String),
    /// No key type allowed.
    #[error("podCertificates signer {0:?}: keyTypes is empty")]
    NoKeyTypes(String),
}

/// The `podCertificates` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodCertificatePolicy {
    /// The SPIFFE trust domain of every certificate (`spiffe://<trustDomain>/ns/…/sa/…`).
    pub trust_domain: String,
    /// One entry per signer name warrant answers for.
    #[serde(default)]
    pub signers: Vec<SignerPolicy>,
}

/// What one signer name issues.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignerPolicy {
    /// The signer name (`warrant.example.com/spiffe`).
    pub signer_name: String,
    /// Namespaces whose pods may get certificates (globs).
    pub namespaces: Vec<String>,
    /// Service accounts, in those namespaces, that may (globs; default every one).
    #[serde(default = "everything")]
    pub service_accounts: Vec<String>,
    /// Key types issued to; others are denied `UnsupportedKeyType`.
    #[serde(default = "all_key_types")]
    pub key_types: Vec<KeyType>,
    /// The longest leaf, in seconds (a PCR may ask for less).
    #[serde(default = "default_lifetime")]
    pub max_expiration_seconds: i64,
}

fn everything() -> Vec<String> {
    vec!["*".to_owned()]
}

fn all_key_types() -> Vec<KeyType> {
    KeyType::ALL.to_vec()
}

fn default_lifetime() -> i64 {
    86_400
}

/// True for a SPIFFE trust domain name: 1 to 255 of lower-case letters, digits, `.`, `-`, `_`
/// (the SPIFFE ID spec, §2.1).
pub fn is_trust_domain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
}

impl PodCertificatePolicy {
    /// Checks what serde cannot: names, duplicates, bounds.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let td = &self.trust_domain;
        if !is_trust_domain(td) {
            return Err(PolicyError::TrustDomain(td.clone()));
        }
        for (i, signer) in self.signers.iter().enumerate() {
            let name = &signer.signer_name;
            if !is_signer_name(name) {
                return Err(PolicyError::SignerName(name.clone()));
            }
            if self.signers.iter().take(i).any(|s| s.signer_name == *name) {
                return Err(PolicyError::Duplicate(name.clone()));
            }
            if signer.max_expiration_seconds < MIN_LIFETIME_SECONDS {
                return Err(PolicyError::Lifetime(name.clone()));
            }
            if signer.key_types.is_empty() {
                return Err(PolicyError::NoKeyTypes(name.clone()));
            }
        }
        Ok(())
    }

    /// The entry for `signer_name`, if warrant answers for it.
    pub fn signer(&self, signer_name: &str) -> Option<&SignerPolicy> {
        self.signers.iter().find(|s| s.signer_name == signer_name)
    }
}

impl SignerPolicy {
    /// Whether service account `namespace/name` may get certificates from this signer.
    pub fn allows(&self, namespace: &str, service_account: &str) -> bool {
        self.namespaces.iter().any(|g| glob(g, namespace))
            && self
                .service_accounts
                .iter()
                .any(|g| glob(g, service_account))
    }
}

/// `<domain>/<path>` with a domain outside `kubernetes.io` (whose names kube reserves).
fn is_signer_name(name: &str) -> bool {
    let Some((domain, path)) = name.split_once('/') else {
        return false;
    };
    let reserved = domain == "kubernetes.io" || domain.ends_with(".kubernetes.io");
    !reserved
        && domain.contains('.')
        && !path.is_empty()
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// `*` matches any run of characters (none included); everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: the whole text matched `first`
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = rest.get(at + part.len()..).unwrap_or_default(),
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs() {
        assert!(glob("*", ""));
        assert!(glob("build-*", "build-1"));
        assert!(!glob("build-*", "xbuild-1"));
        assert!(glob("a*b*c", "aXbYc"));
        assert!(!glob("a*b*c", "aXcYb"));
        assert!(glob("app", "app"));
        assert!(!glob("app", "apps"));
        assert!(!glob("*-ab", "x-a"));
    }

    #[test]
    fn policy_reads_from_yaml_shaped_json_with_defaults() {
        let policy: PodCertificatePolicy = serde_json::from_value(serde_json::json!({
            "trustDomain": "cluster.local",
            "signers": [{"signerName": "warrant.example.com/spiffe", "namespaces": ["demo"]}]
        }))
        .unwrap();
        policy.validate().unwrap();
        let signer = policy.signer("warrant.example.com/spiffe").unwrap();
        assert_eq!(signer.key_types, KeyType::ALL.to_vec());
        assert!(signer.allows("demo", "anyone"));
        assert!(!signer.allows("kube-system", "anyone"));
        let typo = serde_json::from_value::<PodCertificatePolicy>(serde_json::json!({
            "trustDomain": "cluster.local", "signer": []
        }));
        assert!(typo.is_err());
    }

    #[test]
    fn reserved_and_malformed_signer_names_are_refused() {
        for name in [
            "kubernetes.io/kube-apiserver-client-pod",
            "x.kubernetes.io/a",
            "noslash",
            "example.com/",
            "Example.com/a",
        ] {
            let policy = PodCertificatePolicy {
                trust_domain: "td".into(),
                signers: vec![SignerPolicy {
                    signer_name: name.into(),
                    namespaces: everything(),
                    service_accounts: everything(),
                    key_types: all_key_types(),
                    max_expiration_seconds: 3600,
                }],
            };
            assert_eq!(
                policy.validate(),
                Err(PolicyError::SignerName(name.into())),
                "{name}"
            );
        }
    }
}
