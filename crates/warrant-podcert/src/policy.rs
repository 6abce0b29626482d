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
//!       dnsNames:                       # default none: the SPIFFE ID alone
//!         - "${service}.${namespace}.svc"
//!         - "${service}.${namespace}.svc.cluster.local"
//! ```
//!
//! A signer name with no entry here is not warrant's: its PCRs are left alone.
//!
//! `dnsNames` are templates rendered once for each Service in the pod's namespace that
//! selects the pod (read live, never taken from the request): `${service}` is the Service's
//! name, `${namespace}` the namespace. Each placeholder fills a whole label, so any valid
//! Service and namespace name renders to a valid DNS name; that is checked at load.

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
    /// More DNS name templates than [`MAX_DNS_TEMPLATES`].
    #[error("podCertificates signer {0:?}: dnsNames has more than 8 templates")]
    TooManyDnsNames(String),
    /// A DNS name template that does not always render to a DNS name.
    #[error("podCertificates signer {signer:?}: dnsNames template {template:?} {why}")]
    DnsName {
        /// The signer entry's name.
        signer: String,
        /// The template as written.
        template: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The most DNS name templates one signer may have.
pub const MAX_DNS_TEMPLATES: usize = 8;
/// The placeholder for a Service's name in a DNS name template.
pub const SERVICE_PLACEHOLDER: &str = "${service}";
/// The placeholder for the pod's namespace in a DNS name template.
pub const NAMESPACE_PLACEHOLDER: &str = "${namespace}";
/// The longest a Service or namespace name can be (a DNS label).
const MAX_LABEL: usize = 63;
/// The longest DNS name (RFC 1035 §2.3.4, as text without the final dot).
const MAX_DNS_NAME: usize = 253;

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
    /// DNS name templates, rendered for each Service that selects the pod (see the module's
    /// docs); empty (the default): no DNS names, and Services are never read.
    #[serde(default)]
    pub dns_names: Vec<String>,
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
            if signer.dns_names.len() > MAX_DNS_TEMPLATES {
                return Err(PolicyError::TooManyDnsNames(name.clone()));
            }
            for template in &signer.dns_names {
                check_dns_template(template).map_err(|why| PolicyError::DnsName {
                    signer: name.clone(),
                    template: template.clone(),
                    why,
                })?;
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

    /// The DNS names of this signer's templates for Service `service` in `namespace`: every
    /// template rendered, those that are not DNS names (a name no API server would have
    /// accepted) left out. Nothing for a name that is not one DNS label (no API server
    /// accepts such a Service or namespace name).
    pub fn dns_names_for(&self, service: &str, namespace: &str) -> Vec<String> {
        if !is_dns_label(service) || !is_dns_label(namespace) {
            return Vec::new();
        }
        self.dns_names
            .iter()
            .map(|t| {
                t.split('.')
                    .map(|label| match label {
                        SERVICE_PLACEHOLDER => service,
                        NAMESPACE_PLACEHOLDER => namespace,
                        literal => literal,
                    })
                    .collect::<Vec<_>>()
                    .join(".")
            })
            .filter(|name| is_dns_name(name))
            .collect()
    }
}

/// Checks that `template` renders to a DNS name for every valid Service and namespace name:
/// labels separated by `.`, each either a whole placeholder or a literal label, `${service}`
/// present (the names come from the Services that select the pod, or there is no reason to
/// give them), and at most 253 characters with every placeholder at its longest (63).
fn check_dns_template(template: &str) -> Result<(), &'static str> {
    let mut longest = 0;
    let mut has_service = false;
    for label in template.split('.') {
        longest += 1; // the dot before it, or (for the first) one too many
        if label == SERVICE_PLACEHOLDER {
            has_service = true;
            longest += MAX_LABEL;
        } else if label == NAMESPACE_PLACEHOLDER {
            longest += MAX_LABEL;
        } else if label.contains('$') || label.contains('{') || label.contains('}') {
            return Err(
                "has a placeholder that is not ${service} or ${namespace} as a whole label",
            );
        } else if !is_dns_label(label) {
            return Err("has a label that is not 1 to 63 of a-z, 0-9 and '-' (not first or last)");
        } else {
            longest += label.len();
        }
    }
    if !has_service {
        return Err("has no ${service} label");
    }
    if longest - 1 > MAX_DNS_NAME {
        return Err("can render longer than 253 characters (each placeholder up to 63)");
    }
    Ok(())
}

/// 1 to 63 of lower-case letters, digits and `-`, neither first nor last (RFC 1123).
fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= MAX_LABEL
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Labels joined by `.`, at most 253 characters.
pub fn is_dns_name(name: &str) -> bool {
    name.len() <= MAX_DNS_NAME && name.split('.').all(is_dns_label)
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
                    dns_names: vec![],
                }],
            };
            assert_eq!(
                policy.validate(),
                Err(PolicyError::SignerName(name.into())),
                "{name}"
            );
        }
    }

    fn with_dns_names(templates: &[&str]) -> PodCertificatePolicy {
        serde_json::from_value(serde_json::json!({
            "trustDomain": "cluster.local",
            "signers": [{
                "signerName": "warrant.example.com/spiffe",
                "namespaces": ["*"],
                "dnsNames": templates,
            }]
        }))
        .unwrap()
    }

    #[test]
    fn dns_name_templates_render_whole_labels_and_bad_ones_are_refused_naming_the_signer() {
        let policy = with_dns_names(&[
            "${service}.${namespace}.svc",
            "${service}.${namespace}.svc.cluster.local",
            "${service}.internal-example.com",
        ]);
        policy.validate().unwrap();
        assert_eq!(
            policy.signers[0].dns_names_for("web", "shop"),
            [
                "web.shop.svc",
                "web.shop.svc.cluster.local",
                "web.internal-example.com"
            ]
        );
        assert!(with_dns_names(&[]).validate().is_ok());
        let long = format!(
            "${{service}}.${{namespace}}.{}",
            vec!["a".repeat(63); 2].join(".")
        );
        for (template, why) in [
            ("${namespace}.svc", "no ${service}"),
            ("${service}-x.svc", "not ${service} or ${namespace}"),
            ("${pod}.svc", "not ${service} or ${namespace}"),
            ("${service}.${NAMESPACE}", "not ${service} or ${namespace}"),
            ("*.${service}.svc", "a-z, 0-9"),
            ("${service}..svc", "a-z, 0-9"),
            ("${service}.Svc", "a-z, 0-9"),
            ("${service}.-svc", "a-z, 0-9"),
            ("${service}.svc.", "a-z, 0-9"),
            (long.as_str(), "253"),
        ] {
            let err = with_dns_names(&[template]).validate().unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("warrant.example.com/spiffe") && text.contains(why),
                "{template}: {text}"
            );
        }
        let many = ["${service}.a"; 9];
        assert_eq!(
            with_dns_names(&many).validate(),
            Err(PolicyError::TooManyDnsNames(
                "warrant.example.com/spiffe".into()
            ))
        );
    }
}
