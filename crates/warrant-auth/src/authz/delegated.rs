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
//! request is answered 503 at once (authorization could not be decided), never allowed.

use jiff::Timestamp;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes as KubeResourceAttributes, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::api::Api;
use prometheus_client::registry::Registry;

use super::{Attributes, Decision, Grant};
use crate::authn::User;
use warrant_cache::ExpiringCache;
use warrant_flight::{FlightError, SingleFlight};

use crate::delegation::{self, DelegationMetrics, DelegationOptions};

const RESOURCE: &str = "subjectaccessreviews";

#[derive(Debug, Clone)]
enum Answer {
    Allow,
    Deny(String),
    NoOpinion(String),
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
    options: DelegationOptions,
    cache: ExpiringCache<Question, Answer>,
    in_flight: SingleFlight<Question, Result<Answer, String>>,
    metrics: DelegationMetrics,
}

impl std::fmt::Debug for DelegatedAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthorization")
            .field("options", &self.options)
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
            cache: ExpiringCache::new(8192),
            in_flight: SingleFlight::new(options.max_in_flight),
            options,
            metrics: DelegationMetrics::default(),
        }
    }

    pub(crate) fn register_metrics(&self, registry: &mut Registry) {
        self.metrics.register(
            registry,
            "warrant_delegated_authorization",
            "delegated authorization (SubjectAccessReview)",
            self.in_flight.gauge(),
        );
    }

    pub(crate) async fn decide(
        &self,
        user: &User,
        attributes: &Attributes,
        now: Timestamp,
    ) -> Decision {
        let spec = spec(user, attributes);
        // The same question (who asks, what for) gets the same answer.
        let key = Question {
            user: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            attributes: attributes.clone(),
        };
        let answer = match self.cache.get(&key, now) {
            Some(answer) => {
                self.metrics.cache(RESOURCE, true);
                answer
            }
            None => {
                self.metrics.cache(RESOURCE, false);
                let review = SubjectAccessReview {
                    spec,
                    ..SubjectAccessReview::default()
                };
                let (api, options, metrics) =
                    (self.api.clone(), self.options.clone(), self.metrics.clone());
                let ask = move || async move {
                    let reviewed = delegation::create(&api, &review, &options, &metrics, RESOURCE)
                        .await
                        .map_err(|e| e.to_string())?;
                    interpret(reviewed)
                };
                let asked = match self.in_flight.join(key.clone(), ask) {
                    Ok(flight) => flight.answer().await.unwrap_or_else(|e| Err(e.to_string())),
                    Err(FlightError::Overloaded { limit }) => {
                        self.metrics.overloaded();
                        Err(format!("{limit} SubjectAccessReviews already in flight"))
                    }
                    Err(e) => Err(e.to_string()),
                };
                let answer = match asked {
                    Ok(answer) => answer,
                    Err(e) => return Decision::Error(e),
                };
                let ttl = match answer {
                    Answer::Allow => self.options.allow_ttl,
                    _ => self.options.deny_ttl,
                };
                self.cache.insert_for(key, answer.clone(), now, ttl);
                answer
            }
        };
        match answer {
            Answer::Allow => Decision::Allow(Grant::Unconstrained),
            Answer::Deny(reason) => Decision::Deny(reason),
            Answer::NoOpinion(reason) => Decision::NoOpinion(reason),
        }
    }
}

/// kube's webhook authorizer's reading of a review.
fn interpret(reviewed: SubjectAccessReview) -> Result<Answer, String> {
    let status = reviewed.status.unwrap_or_default();
    let reason = status.reason.unwrap_or_default();
    if status.allowed && status.denied == Some(true) {
        Err("kube-apiserver's SubjectAccessReview both allowed and denied".to_owned())
    } else if status.denied == Some(true) {
        Ok(Answer::Deny(reason))
    } else if status.allowed {
        Ok(Answer::Allow)
    } else {
        Ok(Answer::NoOpinion(reason))
    }
}
