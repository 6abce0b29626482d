//! What a caller may do: kube's authorization, in two steps.
//!
//! 1. **Authorization** (the [`authorize`] middleware), before a handler runs, on the request's
//!    attributes as kube names them (`create` `serviceaccounts/token` in a namespace,
//!    `create` `tokenreviews`, `get` `/metrics`). Authorizers are asked in turn, as kube's union
//!    asks them: the first that allows or denies decides; if none does, the request is refused.
//!    - the always-allowed groups (`--authorization-always-allow-groups`, `system:masters`);
//!    - [`selfservice`]: a service account asking for itself, with its own warrant token or its
//!      pod-bound kube token;
//!    - [`policy`]: the policy file (`--authorization-policy-file`);
//!    - [`delegated`]: kube-apiserver's SubjectAccessReview (`--authorization-kubeconfig`).
//!
//!    With none of the last three configured, only the always-allowed groups may do anything.
//!    The always-allowed paths (`--authorization-always-allow-paths`) need neither
//!    authentication nor authorization. OIDC discovery, the JWKS, API discovery, OpenAPI,
//!    `/version` and health are public: they hold nothing secret, and relying parties, kubectl
//!    and the aggregator read them.
//! 2. **Admission** ([`admit_token_request`]), inside TokenRequest once the request is read and
//!    validated (where kube runs its admission plugins): the [`Grant`] that step 1 gave is
//!    checked against the token asked for (audiences, lifetime, binding), and a node is held
//!    to [`node`] restriction, whoever authorized it.
//!
//! A refusal is a `403` `Status` in kube's words, naming the user and what was refused. An
//! authorizer that cannot answer (kube-apiserver unreachable) makes the request fail with
//! `503` unless another one allows it: it is never taken as an allow. One that has too many
//! questions in flight to ask another makes it `429` with `Retry-After: 1`, as delegated
//! authentication does ([`crate::delegation`]).

pub mod claims;
pub(crate) mod delegated;
mod glob;
pub(crate) mod node;
pub(crate) mod policy;
pub(crate) mod selfservice;

use std::sync::Arc;

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use warrant_token::{go_quote, go_quote_list};

pub use self::delegated::DelegatedAuthorization;
use self::policy::TokenGrant;
pub use self::policy::{AuthorizationPolicyError, Policy, PolicyFile, RequireKeyBinding};
use warrant_objects::Objects;
use warrant_token::BoundObjectReference;

use crate::Refusal;
use crate::authn::User;
use crate::delegation::DelegationError;

/// The verb of the authorization check a node's token request makes for an audience its pod
/// does not name (kube's NodeRestriction).
pub(crate) const VERB_AUDIENCE: &str = "request-serviceaccounts-token-audience";

/// kube's default `--authorization-always-allow-paths`.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: [&str; 3] = ["/healthz", "/readyz", "/livez"];
/// kube's default `--authorization-always-allow-groups`.
pub const DEFAULT_ALWAYS_ALLOW_GROUPS: [&str; 1] = ["system:masters"];

/// A resource request, as kube's `ResourceAttributes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceAttributes {
    /// `create`, or [`VERB_AUDIENCE`].
    pub verb: String,
    /// API group: `""`, `warrant.dev`, `authentication.k8s.io`.
    pub group: String,
    /// API version.
    pub version: String,
    /// `serviceaccounts`, `tokenreviews`, or an audience (for [`VERB_AUDIENCE`]).
    pub resource: String,
    /// `token`, or empty.
    pub subresource: String,
    /// The namespace; empty for cluster-scoped resources.
    pub namespace: String,
    /// The object's name; empty when none.
    pub name: String,
}

impl ResourceAttributes {
    /// `create serviceaccounts/token` for `namespace/name`.
    pub fn token_request(group: &str, version: &str, namespace: &str, name: &str) -> Self {
        ResourceAttributes {
            verb: "create".to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            resource: "serviceaccounts".to_owned(),
            subresource: "token".to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// `create tokenreviews`.
    pub fn token_review(group: &str, version: &str) -> Self {
        ResourceAttributes {
            verb: "create".to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            resource: "tokenreviews".to_owned(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
        }
    }

    /// kube's NodeRestriction check for a node requesting `audience` for `namespace/name`.
    pub fn audience(namespace: &str, service_account: &str, audience: &str) -> Self {
        ResourceAttributes {
            verb: VERB_AUDIENCE.to_owned(),
            group: String::new(),
            version: String::new(),
            resource: audience.to_owned(),
            subresource: String::new(),
            namespace: namespace.to_owned(),
            name: service_account.to_owned(),
        }
    }

    pub(crate) fn is_token_request(&self) -> bool {
        self.verb == "create" && self.resource == "serviceaccounts" && self.subresource == "token"
    }

    pub(crate) fn is_token_review(&self) -> bool {
        self.verb == "create" && self.resource == "tokenreviews" && self.subresource.is_empty()
    }
}

/// What a request does, as kube's authorizers see it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// An API resource.
    Resource(ResourceAttributes),
    /// A path that is not an API resource (`/metrics`).
    NonResource {
        /// The lower-case HTTP verb (`get`).
        verb: String,
        /// The path.
        path: String,
    },
}

impl Attributes {
    /// kube's words for a refusal: `User "alice" cannot create resource
    /// "serviceaccounts/token" in API group "" in the namespace "demo"`.
    fn refusal(&self, user: &str) -> String {
        match self {
            Attributes::NonResource { verb, path } => {
                format!(
                    "User {} cannot {verb} path {}",
                    go_quote(user),
                    go_quote(path)
                )
            }
            Attributes::Resource(r) => {
                let resource = if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                };
                let scope = if r.namespace.is_empty() {
                    "at the cluster scope".to_owned()
                } else {
                    format!("in the namespace {}", go_quote(&r.namespace))
                };
                format!(
                    "User {} cannot {} resource {} in API group {} {scope}",
                    go_quote(user),
                    r.verb,
                    go_quote(&resource),
                    go_quote(&r.group)
                )
            }
        }
    }

    /// The `403` for a refusal with an optional reason from the authorizer.
    pub fn forbidden(&self, user: &str, reason: &str) -> Refusal {
        let mut message = self.refusal(user);
        if !reason.is_empty() {
            message.push_str(": ");
            message.push_str(reason);
        }
        let (group, resource, name) = match self {
            Attributes::NonResource { .. } => ("", "", ""),
            Attributes::Resource(r) => (r.group.as_str(), r.resource.as_str(), r.name.as_str()),
        };
        Refusal::Forbidden {
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: name.to_owned(),
            reason: message,
        }
    }
}

/// What an authorization allowed, which admission then holds the token request to.
#[derive(Debug, Clone)]
pub enum Grant {
    /// Whatever the request asks (an always-allowed group, kube-apiserver's SubjectAccessReview).
    Unconstrained,
    /// A service account asking for itself: [`selfservice`]'s rules.
    SelfService(Arc<TokenGrant>),
    /// The policy rules that cover the service account; one of them must allow the token.
    Policy(Vec<Arc<TokenGrant>>),
}

/// An authorized request: what it was authorized as, the grant, and who gave it. Handlers read
/// it.
#[derive(Debug, Clone)]
pub struct Authorized {
    /// The request's attributes.
    pub attributes: Attributes,
    /// What was allowed.
    pub grant: Grant,
    /// The authorizer that allowed it (`warrant_authorizations_total`'s `authorizer` label).
    pub authorizer: &'static str,
}

/// The union's answer: the verdict, and the authorizer that gave it (`none` when none had an
/// opinion).
#[derive(Debug, Clone)]
pub struct Decided {
    /// What was decided.
    pub verdict: Verdict,
    /// Who decided: `always_allow_group`, `self_service`, `policy`, `delegated` or `none`.
    pub authorizer: &'static str,
}

/// An authorizer's verdict (kube's authorizer `Decision`), and the union's. Named apart from
/// the audit log's `Decision`, which is what became of a whole request.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Allowed, with what was granted.
    Allow(Grant),
    /// An explicit refusal, with the authorizer's reason (kube-apiserver's words, which the
    /// `403` quotes).
    Deny(String),
    /// No opinion, with the authorizer's reason (if it gave one).
    NoOpinion(String),
    /// The authorizer could not decide: kube-apiserver's SubjectAccessReview could not be had
    /// (the only authorizer that can fail). [`Refusal::undecided`] turns it into the answer.
    Error(DelegationError),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuthzLabels {
    authorizer: &'static str,
    decision: &'static str,
}

/// The authorizers configured.
#[derive(Debug)]
pub struct Authorizer {
    /// Paths served to anyone, authenticated or not (kube: `/healthz`, `/readyz`, `/livez`).
    /// A trailing `*` matches any path with that prefix.
    pub always_allow_paths: Vec<String>,
    /// Groups whose members may do anything (kube: `system:masters`).
    pub always_allow_groups: Vec<String>,
    /// `--authorization-policy-file`.
    pub policy: Option<PolicyFile>,
    /// `--authorization-kubeconfig`.
    pub delegated: Option<DelegatedAuthorization>,
    /// `--cluster-name`: the fact `${cluster}` of the policy's claims.
    pub cluster_name: Option<String>,
    /// `--pod-certificate-trust-domain`: the trust domain of the policy's JWT-SVIDs when its
    /// `podCertificates` section names none.
    pub trust_domain: Option<String>,
    decisions: Family<AuthzLabels, Counter>,
}

impl Default for Authorizer {
    /// kube's always-allowed paths and groups, nothing else.
    fn default() -> Self {
        Authorizer {
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS.map(str::to_owned).to_vec(),
            always_allow_groups: DEFAULT_ALWAYS_ALLOW_GROUPS.map(str::to_owned).to_vec(),
            policy: None,
            delegated: None,
            cluster_name: None,
            trust_domain: None,
            decisions: Family::default(),
        }
    }
}

impl Authorizer {
    /// True if neither a policy nor kube-apiserver is configured: only the always-allowed
    /// groups may do anything.
    pub fn only_groups(&self) -> bool {
        self.policy.is_none() && self.delegated.is_none()
    }

    /// Registers `warrant_authorizations_total` and the delegated authorizer's metrics.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_authorizations",
            "Authorization decisions, one per request, by the authorizer that decided (admission for a token request its grant's limits refused) and the decision",
            self.decisions.clone(),
        );
        if let Some(delegated) = &self.delegated {
            delegated.register_metrics(registry);
        }
    }

    fn count(&self, authorizer: &'static str, decision: &'static str) {
        self.decisions
            .get_or_create(&AuthzLabels {
                authorizer,
                decision,
            })
            .inc();
    }

    /// True if `path` is served without authentication or authorization.
    pub fn always_allowed_path(&self, path: &str) -> bool {
        self.always_allow_paths
            .iter()
            .any(|allowed| match allowed.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == allowed,
            })
    }

    /// Asks each authorizer in turn (see the module docs), and counts the request's one
    /// decision in `warrant_authorizations_total`, except a token request's allow: its grant's
    /// limits are still to be checked ([`admit_token_request`]), and its handler counts what
    /// becomes of it ([`Authorizer::count_allowed`], [`Authorizer::count_refused`]).
    pub async fn decide(&self, user: &User, attributes: &Attributes, now: Timestamp) -> Decided {
        let decided = self.union(user, attributes, now).await;
        let decision = match &decided.verdict {
            Verdict::Allow(_) => {
                let admission_follows =
                    matches!(attributes, Attributes::Resource(r) if r.is_token_request());
                (!admission_follows).then_some("allow")
            }
            Verdict::Deny(_) | Verdict::NoOpinion(_) => Some("deny"),
            Verdict::Error(_) => Some("error"),
        };
        if let Some(decision) = decision {
            self.count(decided.authorizer, decision);
        }
        decided
    }

    /// Counts the allow of a token request that was authorized and that admission did not
    /// refuse: it got past its grant's limits, or failed for another reason (a bad body, a
    /// missing service account) before they were checked.
    pub fn count_allowed(&self, authorized: &Authorized) {
        self.count(authorized.authorizer, "allow");
    }

    /// Counts a token request that admission refused (its grant's limits, the policy's key
    /// binding, node restriction): a `deny` by `admission`, or an `error` when node
    /// restriction could not ask kube-apiserver.
    pub fn count_refused(&self, refusal: &Refusal) {
        let decision = match refusal {
            Refusal::TooManyRequests { .. } | Refusal::Undecided(_) => "error",
            _ => "deny",
        };
        self.count("admission", decision);
    }

    /// What the authorizers would answer a request that is not being made, counting nothing:
    /// token injection asks it whether a pod's agent will be allowed its tokens before the pod
    /// exists. A request's own decision goes through [`Authorizer::decide`], which counts it.
    pub async fn consult(&self, user: &User, attributes: &Attributes, now: Timestamp) -> Verdict {
        self.union(user, attributes, now).await.verdict
    }

    /// The union of the authorizers, counting nothing: [`Authorizer::decide`] counts for a
    /// request, and node restriction's audience check (part of admission) asks it too.
    async fn union(&self, user: &User, attributes: &Attributes, now: Timestamp) -> Decided {
        let decided = |authorizer, verdict| Decided {
            verdict,
            authorizer,
        };
        if self.always_allow_groups.iter().any(|g| user.in_group(g)) {
            return decided("always_allow_group", Verdict::Allow(Grant::Unconstrained));
        }
        let policy = self.policy.as_ref().map(PolicyFile::current);
        let mut error = None;
        let mut reason = String::new();
        let mut ask = |name: &'static str, verdict: Verdict| -> Option<Decided> {
            match verdict {
                Verdict::Allow(_) | Verdict::Deny(_) => Some(decided(name, verdict)),
                Verdict::NoOpinion(why) => {
                    if reason.is_empty() {
                        reason = why;
                    }
                    None
                }
                Verdict::Error(why) => {
                    error = Some((name, why));
                    None
                }
            }
        };
        if let Some(policy) = &policy {
            if let Some(decided) = ask(
                "self_service",
                selfservice::decide(policy, user, attributes),
            ) {
                return decided;
            }
            if let Some(decided) = ask("policy", policy.decide(user, attributes)) {
                return decided;
            }
        }
        if let Some(delegated) = &self.delegated
            && let Some(decided) = ask("delegated", delegated.decide(user, attributes, now).await)
        {
            return decided;
        }
        if let Some((name, error)) = error {
            return decided(name, Verdict::Error(error));
        }
        decided("none", Verdict::NoOpinion(reason))
    }
}

impl Authorizer {
    /// Decides whether `user` may request a token with `audience` for
    /// `namespace/service_account` without a pod naming that audience (kube's NodeRestriction
    /// fallback): the always-allowed groups, the policy, then kube-apiserver.
    pub(crate) async fn audience_allowed(
        &self,
        user: &User,
        namespace: &str,
        service_account: &str,
        audience: &str,
        now: Timestamp,
    ) -> Result<bool, DelegationError> {
        let attributes = Attributes::Resource(ResourceAttributes::audience(
            namespace,
            service_account,
            audience,
        ));
        match self.union(user, &attributes, now).await.verdict {
            Verdict::Allow(_) => Ok(true),
            Verdict::Deny(_) | Verdict::NoOpinion(_) => Ok(false),
            Verdict::Error(why) => Err(why),
        }
    }
}

/// Refuses an unbound token the policy requires to be bound to a key: for one of its audiences
/// whatever the grant, or asked for by self-service.
fn require_key_binding(
    required: &RequireKeyBinding,
    user: &User,
    grant: &Grant,
    ask: &TokenAsk<'_>,
) -> Result<(), Refusal> {
    const HOW: &str = "send a DPoP proof of the key, or ask for the client certificate's binding";
    let name = go_quote(&user.name);
    if let Some(audience) = required.audience(ask.audiences) {
        return Err(ask.forbidden(&format!(
            "User {name} cannot request an unbound token for the audience {}: the authorization policy requires tokens for it to be bound to a key ({HOW})",
            go_quote(audience)
        )));
    }
    if required.self_service && matches!(grant, Grant::SelfService(_)) {
        return Err(ask.forbidden(&format!(
            "User {name} cannot request an unbound token for itself: the authorization policy requires self-service tokens to be bound to a key ({HOW})"
        )));
    }
    Ok(())
}

/// The token a TokenRequest asks for, as admission sees it.
#[derive(Debug)]
pub struct TokenAsk<'a> {
    /// The request's API group (`""` or `warrant.dev`), for messages.
    pub group: &'a str,
    /// The service account's namespace.
    pub namespace: &'a str,
    /// The service account's name.
    pub service_account: &'a str,
    /// As the client sent them (node restriction reads these: none is the audience `""`).
    pub requested: &'a [String],
    /// After defaulting to the API audiences.
    pub audiences: &'a [String],
    /// After the server's cap.
    pub expiration_seconds: i64,
    /// The object the token is to be bound to, as the client wrote it.
    pub bound: Option<&'a BoundObjectReference>,
    /// True if the token is to be bound to a key (a DPoP proof's, or the caller's client
    /// certificate).
    pub key_bound: bool,
}

impl TokenAsk<'_> {
    /// `serviceaccounts "<name>" is forbidden: <why>`.
    pub(crate) fn forbidden(&self, why: &str) -> Refusal {
        Refusal::Forbidden {
            group: self.group.to_owned(),
            resource: "serviceaccounts".to_owned(),
            name: self.service_account.to_owned(),
            reason: why.to_owned(),
        }
    }
}

/// Admission for a TokenRequest: the policy's key-binding requirement, the caller's own binding,
/// node restriction for nodes, then the grant's limits. Returns the longest lifetime the grant
/// allows (`None`: no limit of its own), which also caps the one-year extension of pod-bound
/// tokens.
///
/// A caller that authenticated with a token bound to an object (a warrant token's binding, or
/// the pod kube-apiserver names for a service account's token: [`User::bound_object`]) may only
/// request tokens bound to that same object, whichever authorizer allowed the request: a
/// credential minted on behalf of a bound token dies with what bound it.
///
/// Admission completes a token request's authorization decision; the handler counts it once
/// it knows the outcome ([`Authorizer::count_allowed`], [`Authorizer::count_refused`]).
pub async fn admit_token_request(
    authorizer: &Authorizer,
    objects: &Objects,
    user: &User,
    grant: &Grant,
    ask: &TokenAsk<'_>,
    now: Timestamp,
) -> Result<Option<i64>, Refusal> {
    if !ask.key_bound
        && let Some(policy) = authorizer.policy.as_ref().map(PolicyFile::current)
        && let Some(required) = &policy.require_key_binding
    {
        require_key_binding(required, user, grant, ask)?;
    }
    if let Some((kind, bound)) = user.bound_object() {
        let same = ask.bound.is_some_and(|r| {
            r.kind == kind.as_str()
                && r.name == bound.name
                && (r.uid.is_empty() || r.uid == bound.uid)
        });
        if !same {
            return Err(ask.forbidden(&format!(
                "User {} authenticated with a token bound to {} {} and may only request tokens bound to the same object",
                go_quote(&user.name),
                kind.as_str(),
                go_quote(&bound.name)
            )));
        }
    }
    let node = node::node_name(user);
    if let Some(node) = node {
        node::admit(authorizer, objects, user, node, ask, now).await?;
    }
    match grant {
        Grant::Unconstrained => Ok(None),
        Grant::SelfService(limits) => {
            selfservice::admit(user, limits, ask).map(|()| limits.max_expiration_seconds)
        }
        Grant::Policy(rules) => admit_by_rules(rules, user, ask, node.is_some()),
    }
}

/// Admission by the authorization policy's `rules` that allowed the request: the most generous
/// rule that allows the token sets the lifetime's cap, or the refusal names the lifetime or the
/// audiences no rule allows (a `node_restricted` caller's audiences were checked already).
fn admit_by_rules(
    rules: &[Arc<TokenGrant>],
    user: &User,
    ask: &TokenAsk<'_>,
    node_restricted: bool,
) -> Result<Option<i64>, Refusal> {
    // A node's audiences were checked by node restriction (its pods' volumes, or an
    // audience grant); the rules still bound the lifetime.
    let audiences_ok = |rule: &TokenGrant| node_restricted || rule.allows_audiences(ask.audiences);
    let allowing: Vec<&Arc<TokenGrant>> = rules
        .iter()
        .filter(|rule| audiences_ok(rule) && rule.allows_expiration(ask.expiration_seconds))
        .collect();
    if !allowing.is_empty() {
        // The most generous rule that allows the request sets the cap.
        let unlimited = allowing.iter().any(|r| r.max_expiration_seconds.is_none());
        let cap = allowing
            .iter()
            .filter_map(|r| r.max_expiration_seconds)
            .max();
        return Ok(if unlimited { None } else { cap });
    }
    let user_name = go_quote(&user.name);
    if let Some(max) = rules
        .iter()
        .filter(|rule| audiences_ok(rule))
        .filter_map(|rule| rule.max_expiration_seconds)
        .max()
    {
        return Err(ask.forbidden(&format!(
            "User {user_name} cannot request a token valid for {} seconds: the authorization policy allows at most {max}",
            ask.expiration_seconds
        )));
    }
    let refused: Vec<&String> = ask
        .audiences
        .iter()
        .filter(|a| {
            !rules
                .iter()
                .any(|rule| rule.allows_audiences(std::slice::from_ref(a)))
        })
        .collect();
    let what = match refused.as_slice() {
        [] => format!("the audiences {} together", go_quote_list(ask.audiences)),
        [one] => format!("the audience {}", go_quote(one)),
        many => format!("the audiences {}", go_quote_list(many)),
    };
    Err(ask.forbidden(&format!(
        "User {user_name} cannot request a token for {what}: no rule of the authorization policy allows it"
    )))
}
