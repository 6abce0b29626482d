//! Delegated authentication: a bearer token that is neither a static token nor one of
//! warrant's own is sent to kube-apiserver's TokenReview (`--authentication-kubeconfig`), as an
//! aggregated API server does (spec §5.4). No audiences are sent, so kube-apiserver checks the
//! token against its own API audiences: a token for the cluster's API, of any kind the cluster
//! accepts (service-account tokens, OIDC, its webhook, …).
//!
//! What this trusts: kube-apiserver's word on who a token belongs to, and the connection to it
//! (the kubeconfig's CA and credentials). Whoever kube-apiserver authenticates, warrant
//! authenticates, with the same user, groups and extras.
//!
//! Answers, authenticated or not, are reused for 10 s (kube's delegating default), keyed by the
//! SHA-256 of the token: a token kube-apiserver stops accepting may keep working here that
//! long. Failures to get an answer are retried with kube's backoff, never cached, and refuse
//! the request (401): fail closed. When the most lookups are already in flight (a stalled
//! kube-apiserver, a flood of unknown tokens), a caller is answered 429 at once: neither
//! authenticated nor turned away as if its token were bad. A token longer than
//! [`MAX_DELEGATED_TOKEN_BYTES`] is refused unasked.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::Api;
use prometheus_client::registry::Registry;

use super::tokenfile::digest;
use warrant_cache::ExpiringCache;
use warrant_flight::{FlightError, SingleFlight};

use super::{Outcome, User, Via};
use crate::delegation::{self, DelegationMetrics, DelegationOptions, MAX_DELEGATED_TOKEN_BYTES};

const RESOURCE: &str = "tokenreviews";

#[derive(Debug, Clone)]
enum Answer {
    User(Arc<User>),
    Rejected(String),
}

/// kube-apiserver's TokenReview, with kube's cache and retries.
pub struct DelegatedAuthentication {
    api: Api<TokenReview>,
    options: DelegationOptions,
    cache: ExpiringCache<[u8; 32], Answer>,
    in_flight: SingleFlight<[u8; 32], Result<Answer, delegation::DelegationError>>,
    metrics: DelegationMetrics,
}

impl std::fmt::Debug for DelegatedAuthentication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthentication")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl DelegatedAuthentication {
    /// Asks the kube-apiserver that `client` reaches.
    pub fn new(client: kube::Client, options: DelegationOptions) -> Self {
        DelegatedAuthentication {
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
            "warrant_delegated_authentication",
            "delegated authentication (TokenReview)",
            self.in_flight.gauge(),
        );
    }

    pub(crate) async fn authenticate(&self, token: &str, now: Timestamp) -> Outcome {
        if token.len() > MAX_DELEGATED_TOKEN_BYTES {
            return Outcome::Failed(format!(
                "a bearer token of {} bytes is longer than any kube-apiserver is asked about ({MAX_DELEGATED_TOKEN_BYTES})",
                token.len()
            ));
        }
        let key = digest(token);
        let answer = match self.cache.get(&key, now) {
            Some(answer) => {
                self.metrics.cache(RESOURCE, true);
                answer
            }
            None => {
                self.metrics.cache(RESOURCE, false);
                let review = TokenReview {
                    spec: TokenReviewSpec {
                        token: token.to_owned(),
                        audiences: None,
                    },
                    ..TokenReview::default()
                };
                let (api, options, metrics) =
                    (self.api.clone(), self.options.clone(), self.metrics.clone());
                let flight = self.in_flight.join(key, move || async move {
                    delegation::create(&api, &review, &options, &metrics, RESOURCE)
                        .await
                        .map(interpret)
                });
                let asked = match flight {
                    Ok(flight) => flight.answer().await,
                    Err(e) => Err(e),
                };
                let answer = match asked {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "delegated authentication failed; refusing the request");
                        return Outcome::Failed(format!("delegated authentication: {e}"));
                    }
                    Err(FlightError::Overloaded { limit }) => {
                        self.metrics.overloaded();
                        return Outcome::Overloaded(format!(
                            "delegated authentication: {limit} TokenReviews already in flight"
                        ));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "delegated authentication failed; refusing the request");
                        return Outcome::Failed(format!("delegated authentication: {e}"));
                    }
                };
                let ttl = match answer {
                    Answer::User(_) => self.options.allow_ttl,
                    Answer::Rejected(_) => self.options.deny_ttl,
                };
                self.cache.insert_for(key, answer.clone(), now, ttl);
                answer
            }
        };
        match answer {
            Answer::User(user) => Outcome::User(user),
            Answer::Rejected(why) => Outcome::Failed(why),
        }
    }
}

/// kube's webhook authenticator's reading of a review.
fn interpret(review: TokenReview) -> Answer {
    let status = review.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        let error = status.error.unwrap_or_default();
        return Answer::Rejected(if error.is_empty() {
            "invalid bearer token".to_owned()
        } else {
            error
        });
    }
    let info = status.user.unwrap_or_default();
    let mut user = User::new(
        info.username.unwrap_or_default(),
        info.uid.unwrap_or_default(),
        info.groups.unwrap_or_default(),
        Via::Delegated,
    );
    user.extra = info.extra.unwrap_or_default();
    Answer::User(Arc::new(user))
}
