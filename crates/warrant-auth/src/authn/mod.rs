//! Who is calling: a chain of authenticators in kube-apiserver's order (spec §3.6), each
//! optional, in its own module with what it trusts written at its top:
//!
//! 0. one of warrant's own key-bound tokens presented with the proof of its key: under
//!    `Authorization: DPoP <token>` with a [`dpop`] proof for this request (RFC 9449), or as a
//!    bearer token bound to the client certificate this connection presented (RFC 8705). It
//!    comes first because the caller asked to act as the token's service account; kube has no
//!    key-bound tokens, so nothing kube clients send changes order;
//! 1. [`frontproxy`]: kube-apiserver's aggregator, identified by a client certificate from the
//!    request-header CA, relaying its caller's identity in `X-Remote-*` headers;
//! 2. [`x509`]: a client certificate from `--client-ca-file`;
//! 3. a bearer token, tried against [`tokenfile`] (`--token-auth-file`), then [`owntoken`]
//!    (warrant's own tokens for its API audiences), then [`delegated`] (kube-apiserver's
//!    TokenReview); a token that names the token agent's audience is reviewed, by both, for
//!    that audience alone. A token bound to a DPoP key sent as a bearer token, or without a valid
//!    proof, is a `401` with `WWW-Authenticate: DPoP error="invalid_dpop_proof"`; one bound to
//!    a certificate the connection did not present is a plain `401`;
//! 4. otherwise anonymous.
//!
//! The first success wins. A failure is not the end: the chain goes on, as kube's union does,
//! and only if nothing succeeds does any failure turn into `401` (never into anonymous). Two
//! deliberate exceptions, both stricter than kube: a bearer header that is not `Bearer <token>`
//! is a `401`, and a token that warrant recognises as its own but finds invalid (expired,
//! revoked, for another audience) is a `401` at once, never forwarded to kube-apiserver, which
//! may trust warrant's issuer without knowing about bound objects and so cannot revoke.
//!
//! Identity headers (`X-Remote-User` and the rest, under their configured names) are removed
//! from every request once authentication is done, so no handler can be misled by one a client
//! sent itself; a request the front proxy authenticated is marked by its [`Via`] instead.

pub(crate) mod configmap;
pub(crate) mod delegated;
pub(crate) mod dpop;
pub(crate) mod frontproxy;
pub(crate) mod owntoken;
pub(crate) mod peer;
pub(crate) mod replay;
pub(crate) mod tokenfile;
pub(crate) mod trust;
pub(crate) mod x509;

use std::collections::BTreeMap;
use std::sync::Arc;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use warrant_token::{
    Binding, BoundKind, GROUP_AUTHENTICATED, ObjectRef, SERVICE_ACCOUNT_USERNAME_PREFIX,
};

pub use self::configmap::{Follow, follow_extension_authentication};
pub use self::delegated::DelegatedAuthentication;
pub use self::dpop::{
    DEFAULT_REPLAY_CAPACITY, DPOP_HEADER, OriginError, ProofChecker, parse_origin, request_uri,
};
pub use self::frontproxy::{FrontProxy, RequestHeaders};
pub use self::owntoken::{OwnTokenReview, OwnTokens};
pub use self::peer::PeerCertificate;
pub use self::tokenfile::{TokenFile, TokenFileError};
pub use self::trust::ClientTrust;
pub use self::x509::{CaBundle, CaError, ClientCertificateError};
use crate::Refusal;
use crate::delegation::{DelegationError, MAX_DELEGATED_TOKEN_BYTES};
use warrant_audit::loglimit::{SharedThrottle, bounded};

/// How a caller proved who they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Relayed by kube-apiserver's aggregator (a front-proxy certificate and `X-Remote-*`).
    FrontProxy,
    /// A client certificate from `--client-ca-file`.
    ClientCertificate,
    /// A static token from `--token-auth-file`.
    TokenFile,
    /// A token warrant issued for one of its API audiences; what it was bound to.
    OwnToken(Binding),
    /// A token kube-apiserver vouched for (TokenReview).
    Delegated,
}

impl Via {
    /// How audit events and logs name the method: `front-proxy`, `client-certificate`,
    /// `token-file`, `service-account-token` (one of warrant's own) or `delegated`.
    pub fn name(&self) -> &'static str {
        match self {
            Via::FrontProxy => "front-proxy",
            Via::ClientCertificate => "client-certificate",
            Via::TokenFile => "token-file",
            Via::OwnToken(_) => "service-account-token",
            Via::Delegated => "delegated",
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user name (`admin`, `system:node:n1`, …).
    pub name: String,
    /// The user's UID, if the authenticator knows one.
    pub uid: String,
    /// Groups, including `system:authenticated`.
    pub groups: Vec<String>,
    /// Extra attributes (`authentication.kubernetes.io/pod-name`, …), as kube's `UserInfo`.
    pub extra: BTreeMap<String, Vec<String>>,
    /// How the caller authenticated.
    pub via: Via,
    /// The key binding of the key-bound token this caller authenticated with, every member of
    /// it proven on this request: a `DPoP` header was then that proof, already checked and
    /// spent (see `authn::dpop`), and the connection's certificate the bound one. A token this
    /// caller asks for carries the same binding.
    pub bound_to: Option<warrant_token::Confirmation>,
}

impl User {
    /// The audit trail's record of this user calling from `client_address`.
    pub fn requester(&self, client_address: String) -> warrant_audit::Requester {
        warrant_audit::Requester {
            user: self.name.clone(),
            uid: self.uid.clone(),
            groups: self.groups.clone(),
            authenticated_by: self.via.name(),
            client_address,
            credential_id: self
                .extra
                .get(warrant_token::EXTRA_CREDENTIAL_ID)
                .and_then(|values| values.first())
                .cloned()
                .unwrap_or_default(),
            extra: self.extra.clone(),
        }
    }

    /// A user with `system:authenticated` added to `groups`, as kube's group adder does.
    pub fn new(name: String, uid: String, groups: Vec<String>, via: Via) -> Self {
        let mut user = User {
            name,
            uid,
            groups,
            extra: BTreeMap::new(),
            via,
            bound_to: None,
        };
        user.add_authenticated();
        user
    }

    /// The service account `namespace`/`name` (UID `uid`) as kube-apiserver's authenticator
    /// names it: `system:serviceaccount:<namespace>:<name>`, in `system:serviceaccounts`,
    /// `system:serviceaccounts:<namespace>` and `system:authenticated`.
    pub fn service_account(namespace: &str, name: &str, uid: &str, via: Via) -> Self {
        User::new(
            warrant_token::service_account_username(namespace, name),
            uid.to_owned(),
            warrant_token::service_account_groups(namespace),
            via,
        )
    }

    /// True if this user is the service account `namespace`/`name`.
    pub fn is_service_account(&self, namespace: &str, name: &str) -> bool {
        warrant_token::is_service_account_username(&self.name, namespace, name)
    }

    fn add_authenticated(&mut self) {
        let unauthenticated = self.name == "system:anonymous"
            || self.groups.iter().any(|g| g == "system:unauthenticated");
        if !unauthenticated && !self.groups.iter().any(|g| g == GROUP_AUTHENTICATED) {
            self.groups.push(GROUP_AUTHENTICATED.to_owned());
        }
    }

    /// True if the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// The object this caller's credential is bound to, as far as warrant knows it: a warrant
    /// token's binding; for a service account's token that kube-apiserver vouched for, the pod
    /// kube-apiserver names (`authentication.kubernetes.io/pod-name` and `pod-uid`, exactly one
    /// value each, as kube-apiserver reports a pod-bound token). `None` for any other caller.
    ///
    /// Only kube-apiserver's own word counts: a front proxy could claim the same extras, but
    /// what it says about a binding is not checked against kube-apiserver's objects here, and
    /// a static token or certificate has no binding.
    pub fn bound_object(&self) -> Option<(BoundKind, ObjectRef)> {
        match &self.via {
            Via::OwnToken(binding) => binding
                .object()
                .map(|(kind, object)| (kind, object.clone())),
            Via::Delegated if self.name.starts_with(SERVICE_ACCOUNT_USERNAME_PREFIX) => {
                let one = |key: &str| match self.extra.get(key).map(Vec::as_slice) {
                    Some([value]) if !value.is_empty() => Some(value.clone()),
                    _ => None,
                };
                Some((
                    BoundKind::Pod,
                    ObjectRef {
                        name: one(warrant_token::EXTRA_POD_NAME)?,
                        uid: one(warrant_token::EXTRA_POD_UID)?,
                    },
                ))
            }
            _ => None,
        }
    }

    /// True if kube-apiserver's aggregator relayed this request.
    pub fn relayed_by_aggregator(&self) -> bool {
        self.via == Via::FrontProxy
    }
}

/// Who made a request, as seen by handlers.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No credentials were presented.
    Anonymous,
    /// A verified identity.
    User(Arc<User>),
}

impl Caller {
    /// The user, or 401 for an anonymous caller.
    pub fn require(&self) -> Result<&Arc<User>, Refusal> {
        match self {
            Caller::User(user) => Ok(user),
            Caller::Anonymous => Err(Refusal::Unauthorized),
        }
    }

    /// True if kube-apiserver's aggregator relayed this request (see [`Via::FrontProxy`]).
    pub fn relayed_by_aggregator(&self) -> bool {
        matches!(self, Caller::User(user) if user.relayed_by_aggregator())
    }
}

/// What one authenticator made of a request.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Not for this authenticator (no certificate, no header, not its token).
    NotMine,
    /// Authenticated.
    User(Arc<User>),
    /// For this authenticator, and not authenticated; the reason is logged, never sent to the
    /// client. One exception: delegation overloaded ([`DelegationError::is_overload`]) is
    /// neither a refusal nor a success, and the caller is told to retry.
    Failed(Failure),
}

/// Why an authenticator did not authenticate a request: logged (bounded, once a second at
/// most), never sent to the client, which gets `401` (or `429` for delegation overloaded).
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Failure {
    /// The client certificate does not verify against the users' CA.
    #[error("{0}")]
    Certificate(#[source] ClientCertificateError),
    /// Identity headers came with a certificate that does not verify against the front
    /// proxy's CA.
    #[error("front proxy: {0}")]
    FrontProxyCertificate(#[source] ClientCertificateError),
    /// The front proxy's certificate names a CN not in `--requestheader-allowed-names`.
    #[error("x509: subject with cn={common_name} is not in the allowed list")]
    NotAllowedName {
        /// The certificate's CN.
        common_name: String,
    },
    /// A client certificate without a CN names no user.
    #[error("x509: the certificate has no common name")]
    NoCommonName,
    /// The Authorization header is not `Bearer <token>`.
    #[error("the Authorization header is not a bearer token")]
    NotBearer,
    /// One of warrant's own tokens whose key binding does not hold on this request (a DPoP
    /// key without its proof under the `DPoP` scheme, a certificate this connection did not
    /// present, a `cnf` warrant does not understand, a proof for a token not bound to a key),
    /// or whose proof could not be remembered now (overload).
    #[error("{0}")]
    KeyBinding(#[source] warrant_token::BindingError),
    /// The DPoP scheme with a token that is not one of warrant's own (only warrant's own tokens
    /// are key-bound).
    #[error("the DPoP scheme is accepted only with warrant's own key-bound tokens")]
    DpopNotOwnToken,
    /// A bearer token no authenticator knows.
    #[error("invalid bearer token")]
    InvalidBearerToken,
    /// warrant's own token, and invalid: the review's reason, in kube's words.
    #[error("{0}")]
    OwnToken(String),
    /// kube-apiserver's TokenReview did not authenticate the token: its words (or kube's
    /// `invalid bearer token` when it gave none).
    #[error("{0}")]
    Rejected(String),
    /// kube-apiserver's TokenReview could not be had.
    #[error("delegated authentication: {0}")]
    Delegation(#[source] DelegationError),
    /// A token too long to send to kube-apiserver.
    #[error(
        "a bearer token of {bytes} bytes is longer than any kube-apiserver is asked about ({MAX_DELEGATED_TOKEN_BYTES})"
    )]
    TokenTooLong {
        /// The token's length.
        bytes: usize,
    },
}

impl Failure {
    /// True for delegation overloaded, or a DPoP proof that could not be remembered now: the
    /// caller is to retry, neither refused nor let in.
    fn is_overload(&self) -> bool {
        match self {
            Failure::Delegation(e) => e.is_overload(),
            Failure::KeyBinding(e) => e.is_overload(),
            _ => false,
        }
    }

    /// True for a token bound to a DPoP key without a valid proof of it: answered with RFC
    /// 9449's challenge.
    fn is_proof(&self) -> bool {
        use warrant_token::BindingError;
        matches!(
            self,
            Failure::KeyBinding(BindingError::ProofMissing { .. } | BindingError::Proof(_))
        )
    }
}

/// The request a credential is presented with, for the checks that bind to it (a DPoP proof
/// names the request's method and URI).
#[derive(Debug, Clone, Copy)]
pub struct RequestTarget<'a> {
    /// The method.
    pub method: &'a http::Method,
    /// The URI as received (a path, or an absolute URI over HTTP/2).
    pub uri: &'a http::Uri,
}

/// Several authenticators' failures, as kube's union reports them: `[a, b]`.
struct Failures<'a>(&'a [(&'static str, Failure)]);

impl std::fmt::Display for Failures<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, (_, failure)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{failure}")?;
        }
        f.write_str("]")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AuthnLabels {
    method: &'static str,
    result: &'static str,
}

/// The authenticators configured. Each is optional; see the module docs for the order.
#[derive(Debug, Default)]
pub struct Authenticator {
    /// The client CAs (`--client-ca-file`, `--requestheader-client-ca-file`, or the cluster's
    /// `extension-apiserver-authentication` ConfigMap) and the front-proxy rules, shared with
    /// the TLS handshake.
    pub trust: ClientTrust,
    /// `--token-auth-file`.
    pub token_file: Option<TokenFile>,
    /// Accept warrant's own tokens for its API audiences as their service accounts (reviewed
    /// by the [`OwnTokens`] the caller of [`Authenticator::authenticate`] passes).
    pub own_tokens: bool,
    /// Ask kube-apiserver about other bearer tokens (`--authentication-kubeconfig`).
    pub delegated: Option<DelegatedAuthentication>,
    /// The audience of the pod tokens token agents present (`--token-agent-audience`): a
    /// token that names it is reviewed for it alone, by warrant (its own tokens) or by
    /// kube-apiserver (delegated, `spec.audiences`), so the agent's pod token is one
    /// kube-apiserver itself never accepts. `None`: every token for the API audiences.
    pub agent_audience: Option<String>,
    /// DPoP proofs (RFC 9449) and the one cache of the proofs seen, shared by every endpoint
    /// that takes a proof (a TokenRequest for a key-bound token, a key-bound token presented).
    pub proofs: ProofChecker,
    results: Family<AuthnLabels, Counter>,
    /// Refusals are logged at most once a second (with a count of those left out): a flood of
    /// garbage tokens costs a line a second. The metric counts every one.
    refusals_logged: SharedThrottle,
}

impl Authenticator {
    /// Registers the authentication metrics (`warrant_authentications_total`, and the delegated
    /// authenticator's) in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_authentications",
            "Requests by how their caller authenticated (method) and whether it worked",
            self.results.clone(),
        );
        self.proofs.register_metrics(registry);
        if let Some(delegated) = &self.delegated {
            delegated.register_metrics(registry);
        }
    }

    /// True once every source of trust has loaded (the cluster's front-proxy configuration,
    /// when warrant follows it).
    pub fn ready(&self) -> bool {
        self.trust.ready()
    }

    /// The caller of a request, or why it is refused: 401, or 429 when delegated
    /// authentication has too many lookups in flight to take another. `own` reviews warrant's
    /// own tokens, if [`Authenticator::own_tokens`] is set. The steps are the module's, in its
    /// order.
    pub async fn authenticate(
        &self,
        own: &dyn OwnTokens,
        target: &RequestTarget<'_>,
        headers: &HeaderMap,
        peer: &PeerCertificate,
        now: Timestamp,
    ) -> Result<Caller, Refusal> {
        let authorization = headers.get(AUTHORIZATION);

        // 0: one of warrant's own tokens bound to a key, with the proof of that key. The
        // caller asked to act as the token's service account, so this comes before the
        // certificate (which would name the caller itself).
        if let Some(answer) = self
            .key_bound(own, authorization, target, headers, peer, now)
            .await
        {
            return answer;
        }

        // What failed so far: a 401 only if nothing after it succeeds, as kube's union does.
        let mut failures: Vec<(&'static str, Failure)> = Vec::new();

        // 1 and 2: the client certificate, as a front proxy, then as a user.
        if let Some(presented) = peer.presented()
            && let Some(caller) = self.client_certificate(headers, presented, now, &mut failures)
        {
            return Ok(caller);
        }

        // 3: a bearer token.
        if let Some(value) = authorization {
            let Some(token) = bearer(value) else {
                return Err(self.refuse("bearer", &Failure::NotBearer));
            };
            if let Some(answer) = self
                .bearer_token(own, token, peer, now, &mut failures)
                .await
            {
                return answer;
            }
        }

        // 4: anonymous when nothing was presented; else why what was presented failed.
        self.anonymous_or_refused(&failures)
    }

    /// Step 0: a key-bound token of warrant's with the proof of its key, under the DPoP scheme
    /// (RFC 9449 §7.1), or as a bearer token bound to the certificate this connection presented
    /// (RFC 8705 §3). `None` when the request presents neither: the chain goes on.
    async fn key_bound(
        &self,
        own: &dyn OwnTokens,
        authorization: Option<&http::HeaderValue>,
        target: &RequestTarget<'_>,
        headers: &HeaderMap,
        peer: &PeerCertificate,
        now: Timestamp,
    ) -> Option<Result<Caller, Refusal>> {
        if let Some(token) = authorization.and_then(|value| credential(value, "dpop")) {
            if !self.own_tokens {
                return Some(Err(self.refuse("dpop", &Failure::DpopNotOwnToken)));
            }
            let presented = owntoken::Presented::Dpop {
                proofs: &self.proofs,
                headers,
                target,
                peer,
            };
            let audience = self.agent_audience_of(token);
            return Some(
                match owntoken::authenticate(own, token, audience, presented, now).await {
                    Outcome::User(user) => Ok(self.success("dpop", user)),
                    Outcome::Failed(why) => Err(self.refuse_failure("dpop", &why)),
                    Outcome::NotMine => Err(self.refuse("dpop", &Failure::DpopNotOwnToken)),
                },
            );
        }
        if self.own_tokens
            && peer.presented().is_some()
            && let Some(token) = authorization
                .and_then(bearer)
                .filter(|token| names_a_certificate(token))
        {
            let presented = owntoken::Presented::Bearer { peer };
            let audience = self.agent_audience_of(token);
            return Some(
                match owntoken::authenticate(own, token, audience, presented, now).await {
                    Outcome::User(user) => Ok(self.success("certificate_bound", user)),
                    Outcome::Failed(why) => Err(self.refuse_failure("certificate_bound", &why)),
                    Outcome::NotMine => {
                        Err(self.refuse("certificate_bound", &Failure::InvalidBearerToken))
                    }
                },
            );
        }
        None
    }

    /// Steps 1 and 2: the certificate `presented`, from a front proxy (whose headers name the
    /// user), then a user's own. Failures are added to `failures`.
    fn client_certificate(
        &self,
        headers: &HeaderMap,
        presented: &peer::Presented,
        now: Timestamp,
        failures: &mut Vec<(&'static str, Failure)>,
    ) -> Option<Caller> {
        let trust = self.trust.load();
        if let Some(front_proxy) = &trust.front_proxy {
            match front_proxy.authenticate(headers, presented, now) {
                Outcome::User(user) => return Some(self.success("front_proxy", user)),
                Outcome::Failed(why) => failures.push(("front_proxy", why)),
                Outcome::NotMine => {}
            }
        }
        if let Some(ca) = &trust.client_ca {
            match peer::authenticate(ca, presented, now) {
                Outcome::User(user) => return Some(self.success("client_certificate", user)),
                Outcome::Failed(why) => failures.push(("client_certificate", why)),
                Outcome::NotMine => {}
            }
        }
        None
    }

    /// Step 3: `token`, tried against the token file, warrant's own tokens, then kube-apiserver.
    /// `None` when none of them answered for it (its failures added to `failures`; at least
    /// one, for a token that no authenticator knows is a failure too).
    async fn bearer_token(
        &self,
        own: &dyn OwnTokens,
        token: &str,
        peer: &PeerCertificate,
        now: Timestamp,
        failures: &mut Vec<(&'static str, Failure)>,
    ) -> Option<Result<Caller, Refusal>> {
        if let Some(user) = self.token_file.as_ref().and_then(|f| f.user(token)) {
            return Some(Ok(self.success("token_file", user)));
        }
        let audience = self.agent_audience_of(token);
        if self.own_tokens {
            let presented = owntoken::Presented::Bearer { peer };
            match owntoken::authenticate(own, token, audience, presented, now).await {
                Outcome::User(user) => return Some(Ok(self.success("own_token", user))),
                Outcome::Failed(why) => return Some(Err(self.refuse_failure("own_token", &why))),
                Outcome::NotMine => {}
            }
        }
        if let Some(delegated) = &self.delegated {
            match delegated.authenticate(token, audience, now).await {
                Outcome::User(user) => return Some(Ok(self.success("delegated", user))),
                Outcome::Failed(why) if why.is_overload() => {
                    self.count("delegated", "overloaded");
                    tracing::warn!(
                        reason = %why,
                        "authentication deferred: asking the caller to retry"
                    );
                    return Some(Err(Refusal::overloaded()));
                }
                Outcome::Failed(why) => failures.push(("delegated", why)),
                Outcome::NotMine => {}
            }
        }
        if failures.is_empty() {
            failures.push(("bearer", Failure::InvalidBearerToken));
        }
        None
    }

    /// The audience to review `token` for: the token agent's, when the token (read unverified)
    /// names it; else `None`, the API audiences (kube-apiserver's own, when asked). Reading the
    /// claims before the signature only chooses the question: the review that follows checks
    /// the audience it asked for, and a forged claim leads to a refusal, never to a user.
    fn agent_audience_of(&self, token: &str) -> Option<&str> {
        let audience = self.agent_audience.as_deref()?;
        warrant_token::unverified_claims(token)
            .ok()
            .is_some_and(|claims| claims.aud.iter().any(|a| a == audience))
            .then_some(audience)
    }

    /// Step 4: anonymous if no authenticator failed (nothing was presented), else the refusal
    /// of the one failure, or of all of them as kube's union words them.
    fn anonymous_or_refused(
        &self,
        failures: &[(&'static str, Failure)],
    ) -> Result<Caller, Refusal> {
        match failures {
            [] => {
                self.count("anonymous", "success");
                Ok(Caller::Anonymous)
            }
            [(method, why)] => Err(self.refuse(method, why)),
            many => {
                let method = many.first().map_or("bearer", |(m, _)| m);
                Err(self.refuse(method, &Failures(many)))
            }
        }
    }

    /// Removes every identity header (`X-Remote-User` and the rest, under the front proxy's
    /// names and the defaults) from a request once it is authenticated, so nothing downstream
    /// can be misled by one a client sent itself.
    pub fn strip_identity_headers(&self, headers: &mut HeaderMap) {
        frontproxy::strip_identity_headers(headers, self.trust.load().front_proxy.as_deref());
    }

    fn count(&self, method: &'static str, result: &'static str) {
        self.results
            .get_or_create(&AuthnLabels { method, result })
            .inc();
    }

    fn success(&self, method: &'static str, user: Arc<User>) -> Caller {
        self.count(method, "success");
        Caller::User(user)
    }

    /// The one place an authentication failure becomes words: the log line.
    fn refuse(&self, method: &'static str, why: &dyn std::fmt::Display) -> Refusal {
        self.count(method, "failure");
        if let Some(left_out) = self.refusals_logged.allow(tokio::time::Instant::now()) {
            tracing::info!(
                method,
                reason = %bounded(&why.to_string(), 512),
                refusals_not_logged = left_out,
                "authentication failed"
            );
        }
        Refusal::Unauthorized
    }

    /// [`refuse`](Self::refuse) for one failure: a key-bound token without a valid proof is
    /// answered with RFC 9449's challenge, a proof that could not be remembered now with 429,
    /// every other failure with a plain 401.
    fn refuse_failure(&self, method: &'static str, why: &Failure) -> Refusal {
        if why.is_overload() {
            self.count(method, "overloaded");
            tracing::warn!(
                method,
                reason = %why,
                "authentication deferred: asking the caller to retry"
            );
            return Refusal::overloaded();
        }
        let refusal = self.refuse(method, why);
        if why.is_proof() {
            Refusal::InvalidDpopProof
        } else {
            refusal
        }
    }
}

/// True if `token`'s claims (unverified) name a certificate it is bound to (`cnf.x5t#S256`):
/// then it is presented with the connection's certificate as its proof, and verified as such.
/// Reading the claims before the signature only chooses the check; a forged claim leads to a
/// refusal, never to a user.
fn names_a_certificate(token: &str) -> bool {
    warrant_token::unverified_claims(token)
        .ok()
        .and_then(|claims| claims.cnf)
        .is_some_and(|cnf| cnf.binding().is_ok_and(|bound| bound.x5t_s256.is_some()))
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(value: &http::HeaderValue) -> Option<&str> {
    credential(value, "bearer")
}

/// The credential of an `Authorization: <scheme> <credential>` header (scheme compared without
/// case, as HTTP's auth schemes are).
fn credential<'a>(value: &'a http::HeaderValue, scheme: &str) -> Option<&'a str> {
    let value = value.to_str().ok()?;
    let (given, token) = value.split_once(' ')?;
    let token = token.trim();
    (given.eq_ignore_ascii_case(scheme) && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header() {
        let v = |s: &'static str| http::HeaderValue::from_static(s);
        assert_eq!(bearer(&v("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&v("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&v("Basic abc")), None);
        assert_eq!(bearer(&v("Bearer ")), None);
        assert_eq!(bearer(&v("Bearer")), None);
    }

    #[test]
    fn authenticated_group_is_added_once() {
        let user = User::new(
            "a".into(),
            String::new(),
            vec!["system:authenticated".into()],
            Via::TokenFile,
        );
        assert_eq!(user.groups, ["system:authenticated"]);
        let anonymous = User::new(
            "system:anonymous".into(),
            String::new(),
            vec![],
            Via::FrontProxy,
        );
        assert!(anonymous.groups.is_empty());
    }

    /// A service account's user has the name and groups a token of its authenticates as.
    #[test]
    fn a_service_account_is_named_and_grouped_as_its_tokens_are() {
        let user = User::service_account("shop", "cart", "u-1", Via::Delegated);
        assert_eq!(user.name, "system:serviceaccount:shop:cart");
        assert_eq!(user.uid, "u-1");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:shop",
                "system:authenticated"
            ]
        );
        assert!(user.is_service_account("shop", "cart"));
        assert!(!user.is_service_account("shop", "car"));
        assert!(!user.is_service_account("sho", "p:cart"));
    }
}
