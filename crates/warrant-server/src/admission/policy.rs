//! Whether warrant's authorization would let the pod's agent have its tokens, asked before the
//! pod is admitted: a pod whose agent would be refused is refused now, with the reason and the
//! annotation, rather than started to wait for a token that never comes.
//!
//! The agent is asked about as it will call: the service account itself, its token vouched
//! for by kube-apiserver with the pod named (self-service's second kind of caller), asking for
//! a token bound to its pod, for each audience, for the plan's lifetime. The authorizers and
//! admission are warrant's own (`Authorizer::decide`, `admit_token_request`), so the answer is
//! theirs. When they cannot answer (kube-apiserver's SubjectAccessReview unreachable), the pod
//! is not refused for it: the agent asks again when it runs.

use std::collections::BTreeMap;

use warrant_auth::authz::admit_token_request;
use warrant_auth::{Attributes, ResourceAttributes, TokenAsk, User, Verdict, Via};
use warrant_token::BoundObjectReference;

use super::plan::{Plan, Refusal};
use crate::error::ApiError;
use crate::state::AppState;

/// The pod's service account, as the agent will present it.
pub(crate) struct Account<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    pub(crate) uid: &'a str,
    /// The pod's name (its `generateName` before it has one).
    pub(crate) pod: &'a str,
}

/// A stand-in for the UID the pod will have (it has none while it is admitted); the token
/// asked about is bound to the pod by name alone, which matches it.
const POD_UID_TO_COME: &str = "00000000-0000-0000-0000-000000000000";

/// Refuses the plan if warrant's authorization would refuse one of the agent's tokens.
pub(crate) async fn check(
    state: &AppState,
    account: &Account<'_>,
    plan: &Plan,
) -> Result<(), Refusal> {
    let mut agent =
        User::service_account(account.namespace, account.name, account.uid, Via::Delegated);
    agent.extra = BTreeMap::from([
        (
            warrant_token::EXTRA_POD_NAME.to_owned(),
            vec![account.pod.to_owned()],
        ),
        (
            warrant_token::EXTRA_POD_UID.to_owned(),
            vec![POD_UID_TO_COME.to_owned()],
        ),
    ]);
    let attributes = Attributes::Resource(ResourceAttributes::token_request(
        "",
        "v1",
        account.namespace,
        account.name,
    ));
    let now = state.issuer().clock().now();
    let authorizer = state.authorizer();
    let grant = match authorizer.consult(&agent, &attributes, now).await {
        Verdict::Allow(grant) => grant,
        Verdict::Deny(why) | Verdict::NoOpinion(why) => {
            let refusal = ApiError::from(attributes.forbidden(&agent.name, &why));
            return Err(Refusal::forbidden(format!(
                "warrant would refuse the token agent of this pod: {}; allow the service account to request tokens for itself (the policy file's selfService, docs/injection.md)",
                refusal.message()
            )));
        }
        Verdict::Error(why) => {
            tracing::info!(error = %warrant_token::cut_value(&why.to_string()), namespace = account.namespace, serviceaccount = account.name, "could not ask whether the token agent would be allowed; admitting, the agent asks when it runs");
            return Ok(());
        }
    };
    let expiration = state.issuer().settings().expiration.max_seconds;
    let expiration_seconds = expiration
        .filter(|max| *max > 0)
        .map_or(plan.expiration_seconds, |max| {
            plan.expiration_seconds.min(max)
        });
    let bound = BoundObjectReference {
        kind: "Pod".to_owned(),
        api_version: "v1".to_owned(),
        name: account.pod.to_owned(),
        uid: String::new(),
    };
    for token in &plan.tokens {
        let audiences = std::slice::from_ref(&token.audience);
        let ask = TokenAsk {
            group: "",
            namespace: account.namespace,
            service_account: account.name,
            requested: audiences,
            audiences,
            expiration_seconds,
            bound: Some(&bound),
            key_bound: false,
        };
        if let Err(refusal) =
            admit_token_request(authorizer, state.objects(), &agent, &grant, &ask, now).await
        {
            return Err(Refusal::forbidden(format!(
                "{}: warrant would refuse the token agent the token for {}: {}",
                token.from,
                warrant_token::quote_value(&token.audience),
                ApiError::from(refusal).message()
            )));
        }
    }
    Ok(())
}
