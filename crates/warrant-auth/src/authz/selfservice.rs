//! Self-service: a service account that authenticated with its own warrant token may request
//! tokens for itself (same namespace and name), for the audiences and lifetime the policy
//! file's `selfService` allows. This is how a workload trades its API token for tokens to the
//! systems it talks to, without anyone granting it more.
//!
//! What this trusts: warrant's own tokens (see `authn::owntoken`), kube-apiserver's word about
//! a pod's token, and the policy file. Two callers qualify:
//! - a service account that authenticated with a warrant token;
//! - a service account whose token kube-apiserver vouched for (delegated authentication) *and*
//!   named a pod for (`authentication.kubernetes.io/pod-name` and `pod-uid`: a projected,
//!   pod-bound token): the pod's own kube token, as warrant's token agent presents it where
//!   warrant is not the cluster's signer (docs/injection.md). A token kube-apiserver names no
//!   pod for (a legacy Secret token, a `kubectl create token` without a binding) goes through
//!   the other authorizers: what it could mint would outlive any pod.
//!
//! A token bound to an object passes its binding on: the new token must be bound to the same
//! object, so it dies with it (a pod's token cannot mint tokens that outlive the pod).

use std::sync::Arc;

use warrant_token::go_quote;

use super::policy::{Policy, TokenGrant};
use super::{Attributes, Grant, TokenAsk, Verdict};
use crate::Refusal;
use crate::authn::{User, Via};

/// Allows a service account's request for itself, if the policy has a `selfService` section.
pub(crate) fn decide(policy: &Policy, user: &User, attributes: &Attributes) -> Verdict {
    let Some(self_service) = &policy.self_service else {
        return Verdict::NoOpinion(String::new());
    };
    let Attributes::Resource(r) = attributes else {
        return Verdict::NoOpinion(String::new());
    };
    let itself = user.is_service_account(&r.namespace, &r.name);
    let qualifies = match user.via {
        Via::OwnToken(_) => true,
        Via::Delegated => user.bound_object().is_some(),
        _ => false,
    };
    if r.is_token_request() && itself && qualifies {
        Verdict::Allow(Grant::SelfService(Arc::new(self_service.as_grant())))
    } else {
        Verdict::NoOpinion(String::new())
    }
}

/// Holds a self-service request to the policy's audiences and lifetime.
pub(crate) fn admit(user: &User, limits: &TokenGrant, ask: &TokenAsk<'_>) -> Result<(), Refusal> {
    let name = go_quote(&user.name);
    if let Some(audience) = ask
        .audiences
        .iter()
        .find(|a| !limits.allows_audiences(std::slice::from_ref(a)))
    {
        return Err(ask.forbidden(&format!(
            "User {name} cannot request a token for itself for the audience {}: not a self-service audience",
            go_quote(audience)
        )));
    }
    if !limits.allows_expiration(ask.expiration_seconds) {
        return Err(ask.forbidden(&format!(
            "User {name} cannot request a token for itself valid for {} seconds: self-service allows at most {}",
            ask.expiration_seconds,
            limits.max_expiration_seconds.unwrap_or_default()
        )));
    }
    // The caller's own binding is held by admission for every grant
    // (`authz::admit_token_request`).
    Ok(())
}
