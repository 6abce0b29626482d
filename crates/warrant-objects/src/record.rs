//! What warrant keeps of an object.

use jiff::Timestamp;

/// The kinds of object a token can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A ServiceAccount: every token is for one.
    ServiceAccount,
    /// A Pod: a token's bound object.
    Pod,
    /// A Secret: a token's bound object (its data is never read).
    Secret,
    /// A Node: a token's bound object, or a pod-bound token's node.
    Node,
}

impl Kind {
    /// Every kind, in a fixed order (for metrics and readiness).
    pub const ALL: [Kind; 4] = [Kind::ServiceAccount, Kind::Pod, Kind::Secret, Kind::Node];

    /// The Kubernetes kind name, e.g. `Pod`.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Pod => "Pod",
            Kind::Secret => "Secret",
            Kind::Node => "Node",
        }
    }

    /// The API resource name, e.g. `pods` (as in `pods "p1" not found`).
    pub const fn resource(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "serviceaccounts",
            Kind::Pod => "pods",
            Kind::Secret => "secrets",
            Kind::Node => "nodes",
        }
    }

    /// Nodes are cluster-scoped; the rest live in a namespace.
    pub const fn namespaced(self) -> bool {
        !matches!(self, Kind::Node)
    }
}

/// One object, as much of it as tokens need.
///
/// Memory: a record is its UID (36 bytes), an optional timestamp and, for pods, two names and
/// the audiences of its projected token volumes: about 150 bytes plus the key it is stored under.
/// A ServiceAccount that carries warrant's own annotations keeps those too (a few hundred
/// bytes; most carry none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp`: set once deletion has begun. For a pod it is the deletion
    /// time plus the grace period.
    pub deletion_timestamp: Option<Timestamp>,
    /// Pod details; `None` for other kinds.
    pub pod: Option<PodInfo>,
    /// For a ServiceAccount, its annotations in warrant's domains ([`is_warrant_annotation`]),
    /// sorted by key: what token injection reads (an audience, a cloud role). Empty for other
    /// kinds, and every other annotation is left out, so the cache never holds what other tools
    /// keep there.
    pub annotations: Vec<(String, String)>,
}

/// Whether an annotation key is warrant's: its prefix (before `/`) is `warrant.dev` or a
/// subdomain of it (`aws.warrant.dev/role-arn`). Only these are kept of a ServiceAccount.
pub fn is_warrant_annotation(key: &str) -> bool {
    const DOMAIN: &str = "warrant.dev";
    key.split_once('/').is_some_and(|(prefix, name)| {
        !name.is_empty()
            && (prefix == DOMAIN
                || prefix
                    .strip_suffix(DOMAIN)
                    .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')))
    })
}

/// The parts of a pod that token issuance and node authorization read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodInfo {
    /// `spec.serviceAccountName` (`default` when the manifest leaves it out, as admission sets).
    pub service_account_name: String,
    /// `spec.nodeName`; empty while unscheduled.
    pub node_name: String,
    /// The `audience` of each projected `serviceAccountToken` volume source, in pod order
    /// (`""` for a source without one, which means the API audiences).
    pub token_audiences: Vec<String>,
    /// Its labels in warrant's domains ([`is_warrant_annotation`]'s rule), sorted by key: what
    /// an authorization policy's claims may name (`${pod.labels.X}`). Every other label is
    /// left out, so the cache does not grow with what other tools label pods with.
    pub labels: Vec<(String, String)>,
}

impl Record {
    /// The value of warrant's annotation `key`, if the object carries it.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True if the object counts as deleted at `cutoff`: its deletion timestamp is before it.
    /// Token checks pass `now - 60 s`, so an object being gracefully deleted keeps its tokens
    /// valid until a minute after its deletion timestamp, as in kube-apiserver.
    pub fn deleted_before(&self, cutoff: Timestamp) -> bool {
        self.deletion_timestamp.is_some_and(|t| t < cutoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warrants_annotations_are_those_in_its_domains() {
        for key in [
            "warrant.dev/audience",
            "aws.warrant.dev/role-arn",
            "a.b.warrant.dev/x",
        ] {
            assert!(is_warrant_annotation(key), "{key}");
        }
        for key in [
            "eks.amazonaws.com/role-arn",
            "notwarrant.dev/audience",
            ".warrant.dev/x",
            "warrant.dev/",
            "warrant.dev",
            "kubectl.kubernetes.io/last-applied-configuration",
            "audience",
        ] {
            assert!(!is_warrant_annotation(key), "{key}");
        }
    }
}
