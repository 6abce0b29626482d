//! Which pod certificate policy is in force: the `podCertificates` section of
//! `--authorization-policy-file` when it has one (re-read with the file), else the flags'
//! default: every namespace and service account may get certificates from each
//! `--pod-certificate-signer`, of any key type kube accepts, for at most a day.

use std::sync::Arc;

use warrant_auth::PolicyFile;
use warrant_podcert::{KeyType, PodCertificatePolicy, SignerPolicy};

use warrant_auth::authz::claims::DEFAULT_TRUST_DOMAIN;

/// Where the policy comes from.
#[derive(Debug, Clone)]
pub(crate) enum PolicySource {
    /// The flags' policy, fixed.
    Flags(Arc<PodCertificatePolicy>),
    /// The policy file's section, or the flags' while it has none.
    File {
        file: PolicyFile,
        fallback: Arc<PodCertificatePolicy>,
    },
}

impl PolicySource {
    /// The source for `signers`, checked: a policy file whose section leaves out one of the
    /// flags' signer names, or names another trust domain than the flag, is a configuration
    /// error (its PCRs would be watched and never answered, or its IDs not what the flag says).
    pub(crate) fn new(
        signers: &[String],
        trust_domain: Option<&str>,
        file: Option<PolicyFile>,
    ) -> Result<PolicySource, String> {
        let fallback = Arc::new(default_policy(
            signers,
            trust_domain.unwrap_or(DEFAULT_TRUST_DOMAIN),
        ));
        fallback.validate().map_err(|e| {
            format!("--pod-certificate-signer or --pod-certificate-trust-domain: {e}")
        })?;
        let Some(file) = file else {
            return Ok(PolicySource::Flags(fallback));
        };
        if let Some(section) = &file.current().pod_certificates {
            if let Some(missing) = signers.iter().find(|s| section.signer(s).is_none()) {
                return Err(format!(
                    "--pod-certificate-signer {missing:?} has no entry in the policy file's podCertificates.signers: its requests would never be answered; add one, or leave the flag out"
                ));
            }
            if let Some(flag) = trust_domain.filter(|t| *t != section.trust_domain) {
                return Err(format!(
                    "--pod-certificate-trust-domain {flag:?} differs from the policy file's podCertificates.trustDomain {:?}; give it in one place",
                    section.trust_domain
                ));
            }
        }
        Ok(PolicySource::File { file, fallback })
    }

    /// The policy in force now.
    pub(crate) fn current(&self) -> Arc<PodCertificatePolicy> {
        match self {
            PolicySource::Flags(policy) => policy.clone(),
            PolicySource::File { file, fallback } => file
                .current()
                .pod_certificates
                .clone()
                .map_or_else(|| fallback.clone(), Arc::new),
        }
    }
}

/// Every namespace and service account, every key type kube accepts, a day at most.
impl PolicySource {
    /// The longest leaf lifetime the policy allows any signer now: how long a retired managed
    /// CA key stays published.
    pub(crate) fn longest_lifetime(&self) -> i64 {
        self.current()
            .signers
            .iter()
            .map(|s| s.max_expiration_seconds)
            .max()
            .unwrap_or(DEFAULT_LIFETIME_SECONDS)
    }
}

/// `policy` with no signer's lifetime above `cap` (if any): a managed CA publishes a retired
/// key for `cap` after it stops signing, so no leaf it signed may outlive that, whatever a
/// reloaded policy file says.
pub(crate) fn capped(
    policy: Arc<PodCertificatePolicy>,
    cap: Option<i64>,
) -> Arc<PodCertificatePolicy> {
    let Some(cap) = cap else {
        return policy;
    };
    if policy
        .signers
        .iter()
        .all(|s| s.max_expiration_seconds <= cap)
    {
        return policy;
    }
    let mut lowered = (*policy).clone();
    for signer in &mut lowered.signers {
        signer.max_expiration_seconds = signer.max_expiration_seconds.min(cap);
    }
    Arc::new(lowered)
}

/// A signer's leaf lifetime when nothing sets it: a day.
const DEFAULT_LIFETIME_SECONDS: i64 = 86_400;

fn default_policy(signers: &[String], trust_domain: &str) -> PodCertificatePolicy {
    PodCertificatePolicy {
        trust_domain: trust_domain.to_owned(),
        signers: signers
            .iter()
            .map(|name| SignerPolicy {
                signer_name: name.clone(),
                namespaces: vec!["*".to_owned()],
                service_accounts: vec!["*".to_owned()],
                key_types: KeyType::ALL.to_vec(),
                max_expiration_seconds: DEFAULT_LIFETIME_SECONDS,
                // No DNS names unless a policy file asks for them (and Services are not read).
                dns_names: Vec::new(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, PolicyFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(
            &path,
            format!("apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\n{text}"),
        )
        .unwrap();
        let file = PolicyFile::load(&path).unwrap();
        (dir, file)
    }

    const SIGNER: &str = "warrant.example.com/spiffe";

    #[test]
    fn without_a_section_every_account_may_for_a_day() {
        let signers = [SIGNER.to_owned()];
        for source in [
            PolicySource::new(&signers, None, None).unwrap(),
            PolicySource::new(&signers, None, Some(file("rules: []\n").1)).unwrap(),
        ] {
            let policy = source.current();
            assert_eq!(policy.trust_domain, "cluster.local");
            let signer = policy.signer(SIGNER).unwrap();
            assert!(signer.allows("any", "one"));
            assert_eq!(signer.max_expiration_seconds, 86_400);
        }
        let err = PolicySource::new(&["kubernetes.io/x".to_owned()], None, None).unwrap_err();
        assert!(err.contains("kubernetes.io"), "{err}");
    }

    #[test]
    fn the_section_rules_and_must_cover_the_flags() {
        let signers = [SIGNER.to_owned()];
        let section = "podCertificates:\n  trustDomain: prod.example\n  signers:\n  - {signerName: warrant.example.com/spiffe, namespaces: [shop]}\n";
        let (_dir, policy_file) = file(section);
        let source = PolicySource::new(&signers, None, Some(policy_file.clone())).unwrap();
        let policy = source.current();
        assert_eq!(policy.trust_domain, "prod.example");
        assert!(!policy.signer(SIGNER).unwrap().allows("billing", "x"));
        let err = PolicySource::new(&signers, Some("other.example"), Some(policy_file.clone()))
            .unwrap_err();
        assert!(err.contains("differs"), "{err}");
        let err = PolicySource::new(
            &[SIGNER.to_owned(), "warrant.example.com/other".to_owned()],
            None,
            Some(policy_file),
        )
        .unwrap_err();
        assert!(err.contains("warrant.example.com/other"), "{err}");
    }
}
