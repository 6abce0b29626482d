//! TokenRequest's step 10b: the claims beyond kube's that the authorization policy's `claims`
//! section gives the token's audiences ([`warrant_auth::authz::claims`]), made of the facts the
//! earlier steps looked up: the service account's record and the bound pod's; and for the
//! audiences it makes SPIFFE JWT-SVIDs for, the subject (the service account's SPIFFE ID).
//!
//! Kept out of `tokenrequest.rs` so that the plain path's only cost is the check at the top: no
//! policy, or a policy without a `claims` section, returns before any fact is gathered.

use warrant_auth::Refusal;
use warrant_auth::authz::claims::{Facts, PodFacts, TokenClaims};
use warrant_objects::Record;
use warrant_token::Binding;

use crate::state::AppState;

/// What step 10b reads: the request's names and the records looked up for it.
pub(crate) struct ClaimSources<'a> {
    /// The request's API group, for a refusal.
    pub(crate) group: &'a str,
    /// The service account's namespace.
    pub(crate) namespace: &'a str,
    /// Its name.
    pub(crate) name: &'a str,
    /// Its record (UID, annotations in warrant's domains).
    pub(crate) account: &'a Record,
    /// The token's binding.
    pub(crate) binding: &'a Binding,
    /// The bound pod's record, for a pod-bound token.
    pub(crate) pod: Option<&'a Record>,
}

/// What the policy gives a token for `audiences` (extra claims, a JWT-SVID's subject), `None`
/// for a token it gives nothing (every token, without a `claims` section), or a 403 saying why
/// the policy refuses it.
pub(crate) fn token_claims(
    state: &AppState,
    audiences: &[String],
    sources: &ClaimSources<'_>,
) -> Result<Option<TokenClaims>, Refusal> {
    let Some(policy) = state.authorizer().policy.as_ref() else {
        return Ok(None);
    };
    let policy = policy.current();
    if policy.claims.is_empty() {
        return Ok(None);
    }
    let pod = match (sources.binding, sources.pod) {
        (Binding::Pod { pod, node }, Some(record)) => Some(PodFacts {
            name: &pod.name,
            uid: &pod.uid,
            node: node.as_ref().map_or("", |n| n.name.as_str()),
            labels: record.pod.as_ref().map_or(&[][..], |p| &p.labels),
        }),
        _ => None,
    };
    let facts = Facts {
        cluster: state.authorizer().cluster_name.as_deref(),
        namespace: sources.namespace,
        service_account: sources.name,
        service_account_uid: &sources.account.uid,
        annotations: &sources.account.annotations,
        pod,
    };
    policy
        .token_claims(
            audiences,
            &facts,
            state.authorizer().trust_domain.as_deref(),
        )
        .map_err(|why| Refusal::Forbidden {
            group: sources.group.to_owned(),
            resource: "serviceaccounts".to_owned(),
            name: sources.name.to_owned(),
            reason: why.to_string(),
        })
}
