//! Node restriction: what kube's NodeRestriction admission plugin allows a kubelet
//! (`system:node:<name>` in `system:nodes`) when it requests a token (spec §4.6), with kube's
//! checks in kube's order and its messages. It applies to every node, whichever authorizer let
//! the request through: a kubelet gets tokens only for the pods on its own node, bound to
//! them, and for at most one audience, which a pod's projected token volume names or an
//! authorizer grants (`request-serviceaccounts-token-audience` on the audience, as kube asks
//! RBAC; here also the policy's `tokens.audiences` for the node). Image credential providers
//! (KEP-4412) rely on that last grant.
//!
//! What this trusts: the objects (the pod's node, UID and volumes come from the same source as
//! every other check) and the node's authenticated name. Unlike kube, CSI drivers' token
//! audiences are not read (warrant does not watch CSIDriver or volume objects): an audience
//! that only a CSI driver asks for needs a grant.

use jiff::Timestamp;
use warrant_objects::{Kind, Objects};
use warrant_token::go_quote;

use super::{Authorizer, TokenAsk};
use crate::Refusal;
use crate::authn::User;

/// The user name prefix of nodes.
const NODE_PREFIX: &str = "system:node:";
/// The group of nodes.
const NODES_GROUP: &str = "system:nodes";

/// The node a user is, as kube's node identifier decides: a name `system:node:<name>` with a
/// non-empty name, in group `system:nodes`.
pub(crate) fn node_name(user: &User) -> Option<&str> {
    user.name
        .strip_prefix(NODE_PREFIX)
        .filter(|name| !name.is_empty() && user.in_group(NODES_GROUP))
}

/// kube's NodeRestriction checks for a node's TokenRequest.
pub(crate) async fn admit(
    authorizer: &Authorizer,
    objects: &Objects,
    user: &User,
    node: &str,
    ask: &TokenAsk<'_>,
    now: Timestamp,
) -> Result<(), Refusal> {
    let reference = match ask.bound {
        Some(r) if r.api_version == "v1" && r.kind == "Pod" && !r.name.is_empty() => r,
        _ => return Err(ask.forbidden("node requested token not bound to a pod")),
    };
    if reference.uid.is_empty() {
        return Err(ask.forbidden("node requested token with a pod binding without a uid"));
    }
    let pod = match objects.get(Kind::Pod, ask.namespace, &reference.name).await {
        Ok(Some(pod)) => pod,
        Ok(None) => {
            return Err(Refusal::NotFound {
                resource: Kind::Pod.resource().to_owned(),
                name: reference.name.clone(),
            });
        }
        Err(why) => return Err(ask.forbidden(&why.to_string())),
    };
    if pod.uid != reference.uid {
        return Err(ask.forbidden(&format!(
            "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
            reference.uid
        )));
    }
    let info = pod.pod.clone().unwrap_or_default();
    if info.node_name != node {
        return Err(
            ask.forbidden("node requested token bound to a pod scheduled on a different node")
        );
    }
    let audience = match ask.requested {
        [] => "",
        [one] => one.as_str(),
        _ => return Err(ask.forbidden("node may only request 0 or 1 audiences")),
    };
    if info.token_audiences.iter().any(|a| a == audience) {
        return Ok(());
    }
    match authorizer
        .audience_allowed(user, ask.namespace, ask.service_account, audience, now)
        .await
    {
        Ok(true) => Ok(()),
        Ok(false) => Err(ask.forbidden(&format!(
            "audience {} not found in pod spec volume, {} is not authorized to request tokens for this audience",
            go_quote(audience),
            user.name
        ))),
        // Overloaded: the one answer for overload (retry), as at authorization.
        Err(e) if e.is_overload() => Err(Refusal::overloaded()),
        Err(why) => Err(ask.forbidden(&format!(
            "error validating audience {}: {why}",
            go_quote(audience)
        ))),
    }
}
