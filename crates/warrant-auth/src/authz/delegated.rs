//! Delegated authorization: kube-apiserver's SubjectAccessReview (`--authorization-kubeconfig`),
//! as an aggregated API server asks it (spec §7.4). The attributes are the request's, so RBAC
//! rules in the cluster decide: `create` on `serviceaccounts/token` (group `warrant.dev` on the
//! aggregated path, `""` on the core path), `create` on `tokenreviews`, `get` on the
//! non-resource path `/metrics`, and for nodes `request-serviceaccounts-token-audience` on an
//! audience. kube-apiserver's own authorizers answer, the Node authorizer included.
//!
//! What this trusts: kube-apiserver's decisions (and the connection to it). An allow is
//! unconstrained: RBAC has no notion of audiences or lifetimes. Node restriction still applies.
//!
//! Answers are reused for 10 s (allowed and denied alike, kube's delegating defaults), keyed by
//! the whole review (user, groups, extras and attributes). A failure is retried with kube's
//! backoff, never cached, and never an allow. When the most reviews are already in flight, a
//! request is answered as delegated authentication answers it then: 429 with `Retry-After: 1`
//! at once (see [`crate::delegation`]), never allowed.

use jiff::Timestamp;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes as KubeResourceAttributes, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::api::Api;
use prometheus_client::registry::Registry;

use super::{Attributes, Grant, Verdict};
use crate::authn::User;
use crate::delegation::{self, Create, DelegationError, DelegationOptions, Lookup};

/// kube-apiserver's decision, as kept.
#[derive(Debug, Clone)]
enum Answer {
    Allow,
    Deny(String),
    NoOpinion(String),
}

impl delegation::Answer for Answer {
    fn allows(&self) -> bool {
        matches!(self, Answer::Allow)
    }
}

/// What a SubjectAccessReview asks, as the cache's and the single flight's key: everything
/// that goes into the review.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Question {
    user: String,
    uid: String,
    groups: Vec<String>,
    extra: std::collections::BTreeMap<String, Vec<String>>,
    attributes: Attributes,
}

/// kube-apiserver's SubjectAccessReview, with kube's cache and retries.
pub struct DelegatedAuthorization {
    api: Api<SubjectAccessReview>,
    lookup: Lookup<Question, Answer>,
}

impl std::fmt::Debug for DelegatedAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthorization")
            .field("options", self.lookup.options())
            .finish_non_exhaustive()
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

/// The review kube-apiserver is asked.
fn spec(user: &User, attributes: &Attributes) -> SubjectAccessReviewSpec {
    let (resource_attributes, non_resource_attributes) = match attributes {
        Attributes::Resource(r) => (
            Some(KubeResourceAttributes {
                namespace: non_empty(&r.namespace),
                verb: non_empty(&r.verb),
                group: Some(r.group.clone()),
                version: non_empty(&r.version),
                resource: non_empty(&r.resource),
                subresource: non_empty(&r.subresource),
                name: non_empty(&r.name),
                ..KubeResourceAttributes::default()
            }),
            None,
        ),
        Attributes::NonResource { verb, path } => (
            None,
            Some(NonResourceAttributes {
                verb: Some(verb.clone()),
                path: Some(path.clone()),
            }),
        ),
    };
    SubjectAccessReviewSpec {
        user: non_empty(&user.name),
        uid: non_empty(&user.uid),
        groups: Some(user.groups.clone()),
        extra: (!user.extra.is_empty()).then(|| user.extra.clone()),
        resource_attributes,
        non_resource_attributes,
    }
}

impl DelegatedAuthorization {
    /// Asks the kube-apiserver that `client` reaches.
    pub fn new(client: kube::Client, options: DelegationOptions) -> Self {
        DelegatedAuthorization {
            api: Api::all(client),
            lookup: Lookup::new("subjectaccessreviews", "SubjectAccessReview", options),
        }
    }

    pub(crate) fn register_metrics(&self, registry: &mut Registry) {
        self.lookup.register_metrics(
            registry,
            "warrant_delegated_authorization",
            "delegated authorization (SubjectAccessReview)",
        );
    }

    pub(crate) async fn decide(
        &self,
        user: &User,
        attributes: &Attributes,
        now: Timestamp,
    ) -> Verdict {
        // The same question (who asks, what for) gets the same answer.
        let key = Question {
            user: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            attributes: attributes.clone(),
        };
        let question = || Create {
            api: self.api.clone(),
            review: SubjectAccessReview {
                spec: spec(user, attributes),
                ..SubjectAccessReview::default()
            },
        };
        match self.lookup.answer(key, now, question, interpret).await {
            Ok(Answer::Allow) => Verdict::Allow(Grant::Unconstrained),
            Ok(Answer::Deny(reason)) => Verdict::Deny(reason),
            Ok(Answer::NoOpinion(reason)) => Verdict::NoOpinion(reason),
            Err(e) => Verdict::Error(e),
        }
    }
}

/// kube's webhook authorizer's reading of a review.
fn interpret(reviewed: SubjectAccessReview) -> Result<Answer, DelegationError> {
    let status = reviewed.status.unwrap_or_default();
    let reason = status.reason.unwrap_or_default();
    if status.allowed && status.denied == Some(true) {
        Err(DelegationError::Contradictory {
            review: "SubjectAccessReview",
        })
    } else if status.denied == Some(true) {
        Ok(Answer::Deny(reason))
    } else if status.allowed {
        Ok(Answer::Allow)
    } else {
        Ok(Answer::NoOpinion(reason))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

    use super::*;

    fn reviewed(allowed: bool, denied: Option<bool>) -> SubjectAccessReview {
        SubjectAccessReview {
            status: Some(SubjectAccessReviewStatus {
                allowed,
                denied,
                reason: Some("RBAC".into()),
                ..SubjectAccessReviewStatus::default()
            }),
            ..SubjectAccessReview::default()
        }
    }

    /// kube's webhook reading: allowed, denied with a reason, no opinion with a reason; both
    /// allowed and denied is an error, typed, never an allow.
    #[test]
    fn a_review_reads_as_kubes_webhook_reads_it() {
        assert!(matches!(interpret(reviewed(true, None)), Ok(Answer::Allow)));
        assert!(
            matches!(interpret(reviewed(false, Some(true))), Ok(Answer::Deny(r)) if r == "RBAC")
        );
        assert!(
            matches!(interpret(reviewed(false, None)), Ok(Answer::NoOpinion(r)) if r == "RBAC")
        );
        let both = interpret(reviewed(true, Some(true))).unwrap_err();
        assert!(
            matches!(both, DelegationError::Contradictory { .. }),
            "{both:?}"
        );
        assert_eq!(
            both.to_string(),
            "kube-apiserver's SubjectAccessReview both allowed and denied"
        );
    }
}
