//! The standalone authorizer: a policy file (`--authorization-policy-file`) that says who may
//! request which tokens, who may review tokens and who may read metrics. docs/security.md
//! documents the format with examples; in short:
//!
//! ```yaml
//! apiVersion: warrant.dev/v1alpha1
//! kind: AuthorizationPolicy
//! rules:
//!   - name: ci
//!     subjects:
//!       - {kind: Group, name: ci}
//!       - {kind: ServiceAccount, namespace: ci, name: runner}
//!     tokens:                      # TokenRequest
//!       namespaces: ["build-*"]    # globs: `*` matches any run of characters
//!       serviceAccounts: ["*"]
//!       audiences: ["sts.amazonaws.com"]
//!       maxExpirationSeconds: 3600
//!   - name: kube-apiserver
//!     subjects: [{kind: User, name: kube-apiserver}]
//!     reviews: true                # TokenReview
//!     metrics: true                # GET /metrics
//! selfService:                     # service accounts, with their own warrant token
//!   audiences: ["vault"]
//!   maxExpirationSeconds: 3600
//! requireKeyBinding:               # tokens issued only bound to a key (DPoP or certificate)
//!   audiences: ["vault"]           # for these audiences, whoever asks
//!   selfService: true              # and every self-service token
//! claims:                          # claims beyond kube's, for these audiences' tokens
//!   - audiences: ["sts.amazonaws.com"]
//!     awsSessionTags:
//!       principalTags: {namespace: "${namespace}"}
//! podCertificates:                 # who gets pod certificates (X.509) from which signer
//!   trustDomain: cluster.local
//!   signers:
//!     - signerName: warrant.example.com/spiffe
//!       namespaces: ["shop"]
//! ```
//!
//! The `claims` section is [`super::claims`]'s; `podCertificates` is
//! [`warrant_podcert::PodCertificatePolicy`].
//!
//! What this trusts: the file, and the authenticators that name the subjects. A rule grants;
//! nothing denies: a request is allowed when one rule allows all of it (every audience and the
//! lifetime included), and refused when none does. Unknown fields are errors, so a misspelt
//! key cannot silently widen or narrow a grant.
//!
//! The file is reloaded when it changes; a file that does not parse keeps the last good policy
//! in force (logged, and counted in `warrant_authorization_policy_reloads_total`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Deserialize;
use tokio::sync::watch;

use serde_saphyr::Spanned;
use warrant_token::ExtraClaims;

use super::claims::{ClaimsEntry, ClaimsRefusal, Facts, TokenClaims};
use super::glob::{Glob, any};
use super::{Attributes, Grant, ResourceAttributes, VERB_AUDIENCE, Verdict};
use crate::authn::User;
use warrant_watch::{FileWatch, WatchError, watch_files};

/// The `apiVersion` of a policy file.
pub(crate) const POLICY_API_VERSION: &str = "warrant.dev/v1alpha1";
/// The `kind` of a policy file.
pub(crate) const POLICY_KIND: &str = "AuthorizationPolicy";

/// Why an authorization policy file is unusable. (Named apart from warrant-keys's
/// `PolicyError`, which is about a key rotation policy.)
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthorizationPolicyError {
    /// The file could not be read.
    #[error("cannot read authorization policy {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// The file is not YAML of a policy's shape.
    #[error("authorization policy {path}: {source}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's error.
        #[source]
        source: std::sync::Arc<serde_saphyr::Error>,
    },
    /// The file is a policy, and its content is not valid.
    #[error("authorization policy {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and where.
        message: String,
    },
}

/// Who a rule is for, as RBAC names subjects.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum Subject {
    /// A user, by exact name.
    User {
        /// The user name.
        name: String,
    },
    /// Every member of a group.
    Group {
        /// The group.
        name: String,
    },
    /// A service account: the user `system:serviceaccount:<namespace>:<name>`.
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

impl Subject {
    fn matches(&self, user: &User) -> bool {
        match self {
            Subject::User { name } => &user.name == name,
            Subject::Group { name } => user.in_group(name),
            Subject::ServiceAccount { namespace, name } => user.is_service_account(namespace, name),
        }
    }
}

/// What tokens a rule's subjects may request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenGrant {
    /// Namespaces of the service accounts (globs). Required.
    pub namespaces: Vec<Glob>,
    /// Names of the service accounts (globs); default: all.
    #[serde(default = "all")]
    pub service_accounts: Vec<Glob>,
    /// Audiences the tokens may carry (globs); every audience of a request must match one. A
    /// request without audiences asks for the API audiences, which must then be listed. For a
    /// node, these are the audiences it may request beyond those its pods' volumes name.
    #[serde(default)]
    pub audiences: Vec<Glob>,
    /// The longest lifetime (the request's `expirationSeconds`, after the server's cap); none
    /// for no limit.
    #[serde(default)]
    pub max_expiration_seconds: Option<i64>,
}

fn all() -> Vec<Glob> {
    vec![Glob::any_name()]
}

impl TokenGrant {
    fn covers(&self, namespace: &str, service_account: &str) -> bool {
        any(&self.namespaces, namespace) && any(&self.service_accounts, service_account)
    }

    /// True if every one of `audiences` is allowed.
    pub fn allows_audiences(&self, audiences: &[String]) -> bool {
        audiences.iter().all(|a| any(&self.audiences, a))
    }

    /// True if a lifetime of `seconds` is allowed.
    pub fn allows_expiration(&self, seconds: i64) -> bool {
        self.max_expiration_seconds.is_none_or(|max| seconds <= max)
    }
}

/// One rule: subjects and what they may do.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// A name for logs and messages.
    #[serde(default)]
    pub name: String,
    /// Who the rule is for. Required, not empty.
    pub subjects: Vec<Subject>,
    /// TokenRequest.
    #[serde(default)]
    pub tokens: Option<TokenGrant>,
    /// TokenReview.
    #[serde(default)]
    pub reviews: bool,
    /// `GET /metrics`.
    #[serde(default)]
    pub metrics: bool,
}

/// What service accounts may request for themselves with their own warrant token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelfService {
    /// Audiences (globs), as in a rule.
    pub audiences: Vec<Glob>,
    /// The longest lifetime; none for no limit.
    #[serde(default)]
    pub max_expiration_seconds: Option<i64>,
}

impl SelfService {
    /// The same checks as a token grant's.
    pub fn as_grant(&self) -> TokenGrant {
        TokenGrant {
            namespaces: all(),
            service_accounts: all(),
            audiences: self.audiences.clone(),
            max_expiration_seconds: self.max_expiration_seconds,
        }
    }
}

/// Which tokens are issued only bound to a key (a DPoP key or a client certificate): for a
/// relying party that checks proofs, an unbound token is one a thief can use.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequireKeyBinding {
    /// Audiences (globs): a token carrying any of them must be key-bound, whoever asks for it
    /// (the always-allowed groups and every authorizer's grants included).
    #[serde(default)]
    pub audiences: Vec<Glob>,
    /// Every token a service account asks for itself (self-service) must be key-bound.
    #[serde(default)]
    pub self_service: bool,
}

impl RequireKeyBinding {
    /// The first of `audiences` that must be key-bound, if any.
    pub fn audience<'a>(&self, audiences: &'a [String]) -> Option<&'a String> {
        audiences.iter().find(|a| any(&self.audiences, a))
    }
}

/// A parsed policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// `warrant.dev/v1alpha1`.
    pub api_version: String,
    /// `AuthorizationPolicy`.
    pub kind: String,
    /// The rules.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Self-service; absent: service accounts get no tokens for themselves from this policy.
    #[serde(default)]
    pub self_service: Option<SelfService>,
    /// Tokens issued only bound to a key; absent: binding is the caller's choice.
    #[serde(default)]
    pub require_key_binding: Option<RequireKeyBinding>,
    /// Claims beyond kube's for the audiences named ([`super::claims`]); empty: none.
    #[serde(default)]
    pub claims: Vec<Spanned<ClaimsEntry>>,
    /// Who gets pod certificates from which signer name (`warrant serve
    /// --pod-certificate-signer`); absent: the flags' default (docs/pod-certificates.md).
    #[serde(default)]
    pub pod_certificates: Option<warrant_podcert::PodCertificatePolicy>,
}

impl Policy {
    /// Parses and checks a policy; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Policy, AuthorizationPolicyError> {
        let invalid = |message: String| AuthorizationPolicyError::Invalid {
            path: path.to_owned(),
            message,
        };
        let policy: Policy =
            serde_saphyr::from_str(text).map_err(|e| AuthorizationPolicyError::Syntax {
                path: path.to_owned(),
                source: std::sync::Arc::new(e),
            })?;
        if policy.api_version != POLICY_API_VERSION || policy.kind != POLICY_KIND {
            return Err(invalid(format!(
                "expected apiVersion {POLICY_API_VERSION} and kind {POLICY_KIND}, found {} {}",
                policy.api_version, policy.kind
            )));
        }
        for (index, rule) in policy.rules.iter().enumerate() {
            let label = if rule.name.is_empty() {
                format!("rules[{index}]")
            } else {
                format!("rules[{index}] ({})", rule.name)
            };
            if rule.subjects.is_empty() {
                return Err(invalid(format!("{label}: subjects may not be empty")));
            }
            if rule.tokens.is_none() && !rule.reviews && !rule.metrics {
                return Err(invalid(format!(
                    "{label}: grants nothing (give tokens, reviews or metrics)"
                )));
            }
            if let Some(tokens) = &rule.tokens {
                if tokens.namespaces.is_empty() {
                    return Err(invalid(format!(
                        "{label}: tokens.namespaces may not be empty (\"*\" for all)"
                    )));
                }
                if tokens.max_expiration_seconds.is_some_and(|s| s < 600) {
                    return Err(invalid(format!(
                        "{label}: tokens.maxExpirationSeconds must be at least 600 (no token is shorter)"
                    )));
                }
            }
        }
        if let Some(s) = &policy.self_service
            && s.max_expiration_seconds.is_some_and(|s| s < 600)
        {
            return Err(invalid(
                "selfService.maxExpirationSeconds must be at least 600 (no token is shorter)"
                    .to_owned(),
            ));
        }
        if let Some(required) = &policy.require_key_binding
            && required.audiences.is_empty()
            && !required.self_service
        {
            return Err(invalid(
                "requireKeyBinding requires nothing (give audiences, or selfService: true)"
                    .to_owned(),
            ));
        }
        super::claims::check(&policy.claims).map_err(invalid)?;
        if let Some(pod_certificates) = &policy.pod_certificates {
            pod_certificates
                .validate()
                .map_err(|e| invalid(e.to_string()))?;
        }
        Ok(policy)
    }

    /// The claims beyond kube's that a token for `audiences` carries: `Ok(None)` for a token
    /// whose audiences no `claims` entry names (the cost then: one look at the section).
    pub fn extra_claims(
        &self,
        audiences: &[String],
        facts: &Facts<'_>,
    ) -> Result<Option<ExtraClaims>, ClaimsRefusal> {
        if self.claims.is_empty() {
            return Ok(None);
        }
        super::claims::extra_claims(&self.claims, audiences, facts)
    }

    /// What the `claims` section gives a token for `audiences` (claims beyond kube's, a
    /// JWT-SVID's subject): `Ok(None)` for a token whose audiences no entry names. A JWT-SVID's
    /// trust domain is the `podCertificates` section's, else `trust_domain` (the server's,
    /// `--pod-certificate-trust-domain`), else `cluster.local`: the pod certificates' own.
    pub fn token_claims(
        &self,
        audiences: &[String],
        facts: &Facts<'_>,
        trust_domain: Option<&str>,
    ) -> Result<Option<TokenClaims>, ClaimsRefusal> {
        if self.claims.is_empty() {
            return Ok(None);
        }
        let trust_domain = self
            .pod_certificates
            .as_ref()
            .map(|p| p.trust_domain.as_str())
            .or(trust_domain)
            .unwrap_or(super::claims::DEFAULT_TRUST_DOMAIN);
        super::claims::token_claims(&self.claims, audiences, facts, trust_domain)
    }

    /// The rules that let `user` request tokens for `namespace/service_account`.
    fn token_rules(
        &self,
        user: &User,
        namespace: &str,
        service_account: &str,
    ) -> Vec<Arc<TokenGrant>> {
        self.rules
            .iter()
            .filter(|rule| rule.subjects.iter().any(|s| s.matches(user)))
            .filter_map(|rule| rule.tokens.as_ref())
            .filter(|tokens| tokens.covers(namespace, service_account))
            .map(|tokens| Arc::new(tokens.clone()))
            .collect()
    }

    fn grants(&self, user: &User, check: impl Fn(&Rule) -> bool) -> bool {
        self.rules
            .iter()
            .any(|rule| check(rule) && rule.subjects.iter().any(|s| s.matches(user)))
    }

    /// This policy's decision on a request.
    pub(crate) fn decide(&self, user: &User, attributes: &Attributes) -> Verdict {
        let allowed = match attributes {
            Attributes::Resource(r) if r.is_token_request() => {
                let rules = self.token_rules(user, &r.namespace, &r.name);
                if !rules.is_empty() {
                    return Verdict::Allow(Grant::Policy(rules));
                }
                false
            }
            Attributes::Resource(r) if r.is_token_review() => {
                self.grants(user, |rule| rule.reviews)
            }
            Attributes::Resource(ResourceAttributes {
                verb,
                namespace,
                name,
                resource,
                ..
            }) if verb == VERB_AUDIENCE => self
                .token_rules(user, namespace, name)
                .iter()
                .any(|grant| any(&grant.audiences, resource)),
            Attributes::NonResource { verb, path } if verb == "get" && path == "/metrics" => {
                self.grants(user, |rule| rule.metrics)
            }
            _ => false,
        };
        if allowed {
            Verdict::Allow(Grant::Unconstrained)
        } else {
            Verdict::NoOpinion(String::new())
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    label: String,
    current: ArcSwap<Policy>,
    reloads: Family<ReloadLabels, Counter>,
    generation: watch::Sender<u64>,
}

/// The policy file in force, reloaded when it changes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PolicyFile {
    shared: Arc<Shared>,
}

impl PolicyFile {
    /// Reads and checks the file; an invalid policy is an error (warrant does not start).
    pub fn load(path: &Path) -> Result<PolicyFile, AuthorizationPolicyError> {
        let label = path.display().to_string();
        let policy = read(path, &label)?;
        Ok(PolicyFile::from_policy(policy, path))
    }

    /// A policy that did not come from a file (tests, embedding); reloads reread `path`.
    pub fn from_policy(policy: Policy, path: &Path) -> PolicyFile {
        PolicyFile {
            shared: Arc::new(Shared {
                path: path.to_owned(),
                label: path.display().to_string(),
                current: ArcSwap::from_pointee(policy),
                reloads: Family::default(),
                generation: watch::Sender::new(0),
            }),
        }
    }

    /// The policy in force.
    pub fn current(&self) -> Arc<Policy> {
        self.shared.current.load_full()
    }

    /// Registers `warrant_authorization_policy_reloads_total{result}`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_authorization_policy_reloads",
            "Reloads of the authorization policy file, by result (success, failure)",
            self.shared.reloads.clone(),
        );
    }

    /// Rereads the file now. On failure the last good policy stays.
    pub fn reload(&self) -> Result<(), AuthorizationPolicyError> {
        let shared = &self.shared;
        let result = read(&shared.path, &shared.label);
        let outcome = match result {
            Ok(policy) => {
                tracing::info!(path = %shared.label, rules = policy.rules.len(), "reloaded the authorization policy");
                shared.current.store(Arc::new(policy));
                shared
                    .reloads
                    .get_or_create(&ReloadLabels { result: "success" })
                    .inc();
                Ok(())
            }
            Err(error) => {
                tracing::error!(%error, "reloading the authorization policy failed; the last good policy stays in force");
                shared
                    .reloads
                    .get_or_create(&ReloadLabels { result: "failure" })
                    .inc();
                Err(error)
            }
        };
        shared.generation.send_modify(|g| *g = g.wrapping_add(1));
        outcome
    }

    /// A receiver that changes after every reload attempt.
    pub fn reloads(&self) -> watch::Receiver<u64> {
        self.shared.generation.subscribe()
    }

    /// Reloads the file whenever it changes, until the returned guard is dropped. Must be
    /// called within a Tokio runtime.
    pub fn watch(&self) -> Result<FileWatch, WatchError> {
        let this = self.clone();
        watch_files(std::slice::from_ref(&self.shared.path), move || {
            let _ = this.reload();
        })
    }
}

fn read(path: &Path, label: &str) -> Result<Policy, AuthorizationPolicyError> {
    let text = std::fs::read_to_string(path).map_err(|e| AuthorizationPolicyError::Read {
        path: label.to_owned(),
        source: std::sync::Arc::new(e),
    })?;
    Policy::parse(&text, label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::Via;

    #[test]
    fn parse_errors_name_the_rule() {
        let err = |text: &str| Policy::parse(text, "p.yaml").unwrap_err().to_string();
        let head = "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\n";
        assert!(err("apiVersion: v1\nkind: AuthorizationPolicy\n").contains("expected apiVersion"));
        assert!(
            err(&format!(
                "{head}rules:\n- name: r\n  subjects: []\n  reviews: true\n"
            ))
            .contains("rules[0] (r): subjects may not be empty")
        );
        assert!(
            err(&format!(
                "{head}rules:\n- subjects: [{{kind: User, name: a}}]\n"
            ))
            .contains("grants nothing")
        );
        assert!(
            err(&format!(
                "{head}rules:\n- subjects: [{{kind: User, name: a}}]\n  tokens: {{namespaces: [a], audience: [x]}}\n"
            ))
            .contains("audience"),
            "unknown fields are errors"
        );
        assert!(
            err(&format!(
                "{head}rules:\n- subjects: [{{kind: Robot, name: a}}]\n  reviews: true\n"
            ))
            .contains("Robot")
        );
    }

    #[test]
    fn key_binding_requirements() {
        let head = "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\n";
        let parse = |text: &str| Policy::parse(&format!("{head}{text}"), "p.yaml");
        let required = parse("requireKeyBinding: {audiences: ['vault', 'rp-*']}\n")
            .unwrap()
            .require_key_binding
            .unwrap();
        let audiences = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            required.audience(&audiences(&["api", "rp-1"])),
            Some(&"rp-1".to_owned())
        );
        assert_eq!(required.audience(&audiences(&["api", "vaultx"])), None);
        assert!(!required.self_service);
        assert!(
            parse("requireKeyBinding: {selfService: true}\n")
                .unwrap()
                .require_key_binding
                .unwrap()
                .self_service
        );
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert!(err("requireKeyBinding: {}\n").contains("requireKeyBinding requires nothing"));
        assert!(
            err("requireKeyBinding: {audience: [vault]}\n").contains("audience"),
            "a misspelt key is an error, not a requirement silently dropped"
        );
        assert_eq!(parse("rules: []\n").unwrap().require_key_binding, None);
    }

    /// The pod certificate section is checked with the file: a signer name kube reserves, a
    /// leaf under kube's minimum or a misspelt key refuse the whole file (the last good policy
    /// stays in force on reload).
    #[test]
    fn pod_certificate_section() {
        let head = "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\n";
        let parse = |text: &str| Policy::parse(&format!("{head}{text}"), "p.yaml");
        let section = parse(
            "podCertificates:\n  trustDomain: prod.example\n  signers:\n  - signerName: warrant.example.com/spiffe\n    namespaces: [shop]\n    keyTypes: [ECDSAP256]\n",
        )
        .unwrap()
        .pod_certificates
        .unwrap();
        assert_eq!(section.trust_domain, "prod.example");
        let signer = section.signer("warrant.example.com/spiffe").unwrap();
        assert!(signer.allows("shop", "cart"));
        assert!(!signer.allows("billing", "cart"));
        let err = |text: &str| parse(text).unwrap_err().to_string();
        assert!(
            err("podCertificates:\n  trustDomain: t\n  signers:\n  - {signerName: kubernetes.io/x, namespaces: ['*']}\n")
                .contains("kubernetes.io")
        );
        assert!(
            err("podCertificates:\n  trustDomain: t\n  signers:\n  - {signerName: a.example/x, namespaces: ['*'], maxExpirationSeconds: 600}\n")
                .contains("at least 3600")
        );
        assert!(
            err("podCertificates:\n  trustDomain: t\n  signer: []\n").contains("signer"),
            "a misspelt key is an error"
        );
        assert_eq!(parse("rules: []\n").unwrap().pod_certificates, None);
    }

    #[test]
    fn decisions() {
        let policy = Policy::parse(
            "apiVersion: warrant.dev/v1alpha1
kind: AuthorizationPolicy
rules:
- subjects: [{kind: Group, name: ci}]
  tokens: {namespaces: ['build-*'], serviceAccounts: [deployer], audiences: [vault]}
- subjects: [{kind: ServiceAccount, namespace: mon, name: prom}]
  metrics: true
",
            "p",
        )
        .unwrap();
        let user = |name: &str, groups: &[&str]| {
            User::new(
                name.into(),
                String::new(),
                groups.iter().map(|g| (*g).into()).collect(),
                Via::TokenFile,
            )
        };
        let token = |ns: &str, name: &str| {
            Attributes::Resource(ResourceAttributes::token_request("", "v1", ns, name))
        };
        let ci = user("bob", &["ci"]);
        assert!(matches!(
            policy.decide(&ci, &token("build-1", "deployer")),
            Verdict::Allow(Grant::Policy(rules)) if rules.len() == 1
        ));
        assert!(matches!(
            policy.decide(&ci, &token("prod", "deployer")),
            Verdict::NoOpinion(_)
        ));
        assert!(matches!(
            policy.decide(&user("eve", &[]), &token("build-1", "deployer")),
            Verdict::NoOpinion(_)
        ));
        let metrics = Attributes::NonResource {
            verb: "get".into(),
            path: "/metrics".into(),
        };
        assert!(matches!(
            policy.decide(&user("system:serviceaccount:mon:prom", &[]), &metrics),
            Verdict::Allow(Grant::Unconstrained)
        ));
        assert!(matches!(
            policy.decide(&ci, &metrics),
            Verdict::NoOpinion(_)
        ));
        let audience =
            Attributes::Resource(ResourceAttributes::audience("build-2", "deployer", "vault"));
        assert!(matches!(policy.decide(&ci, &audience), Verdict::Allow(_)));
        let audience =
            Attributes::Resource(ResourceAttributes::audience("build-2", "deployer", "s3"));
        assert!(matches!(
            policy.decide(&ci, &audience),
            Verdict::NoOpinion(_)
        ));
    }
}
