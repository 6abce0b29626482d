//! TokenRequest: `POST …/namespaces/{ns}/serviceaccounts/{name}/token`, step for step as
//! kube-apiserver's token REST storage does it (spec §4), with its status codes and messages.
//! Which key a token is bound to, when it is, is the `key_binding` module's.

mod key_binding;

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderValue};
use jiff::{SignedDuration, Timestamp};
use warrant_audit::{Decision, ServiceAccount, TokenFacts};
use warrant_auth::authz::admit_token_request;
use warrant_auth::{Attributes, Authorized, Caller, PeerCertificate, TokenAsk, User};
use warrant_issuer::{Settings, SignedToken};
use warrant_objects::{Kind, LookupError, Record};
use warrant_proto::groups::AUTHENTICATION_V1 as GROUP_VERSION;
use warrant_proto::wire::{
    AUTHENTICATION_V1, BoundObjectReference, ObjectMeta, TokenRequest, TokenRequestStatus,
};
use warrant_token::{
    Binding, Claims, Cnf, Confirmation, DEFAULT_EXPIRATION_SECONDS, Lifetime, NewToken, ObjectRef,
    new_jti, validate_expiration_seconds,
};

use self::key_binding::key_binding;
use crate::audit::AuditFacts;
use crate::body;
use crate::claims::{ClaimSources, token_claims};
use crate::error::ApiError;
use crate::state::AppState;

const GROUP: &str = GROUP_VERSION.group;
const KIND: &str = TokenRequest::KIND;

/// The handler, for `caller`, as authorized by the grant authorization left in the request's
/// extensions (`steps::authorize`).
pub(crate) async fn create(
    state: &AppState,
    caller: &Caller,
    request: axum::extract::Request,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let Some(authorized) = parts.extensions.remove::<Authorized>() else {
        return ApiError::internal("a token request reached its handler without a grant")
            .into_response();
    };
    // The namespace and name as authorization decoded them from the path: one decoding, so
    // the object authorized is the object served.
    let (namespace, name) = match &authorized.attributes {
        Attributes::Resource(r) => (r.namespace.clone(), r.name.clone()),
        Attributes::NonResource { .. } => {
            return ApiError::internal("a token request authorized as a non-resource request")
                .into_response();
        }
    };
    let result = async {
        let user = caller.require().map_err(ApiError::from)?.clone();
        let peer = parts.extensions.get::<PeerCertificate>();
        let key = key_binding(state, &user, peer, &parts)?;
        let request: TokenRequest = body::decode(&parts.headers, body).await?;
        let issued = issue(state, &user, &authorized, &namespace, &name, request, key).await?;
        tracing::info!(
            user = %user.name,
            namespace = %namespace,
            serviceaccount = %name,
            audiences = %warrant_audit::JsonList(&issued.claims.aud),
            binding = issued.binding,
            // Only for a key-bound token: an unbound one has no key to name.
            bound_key = issued
                .claims
                .cnf
                .as_ref()
                .and_then(|cnf| cnf.binding().ok())
                .and_then(Confirmation::thumbprint),
            credential_id = %format!("JTI={}", issued.claims.jti),
            "issued a token"
        );
        Ok::<_, Failure>(issued)
    }
    .await;
    // The request's one authorization decision (warrant_authorizations_total): admission's
    // refusal, or else the authorizer's allow, also when the request failed for another reason.
    match &result {
        Err(Failure::Admission(refusal)) => state.authorizer().count_refused(refusal),
        _ => state.authorizer().count_allowed(&authorized),
    }
    match result.map_err(Failure::into_error) {
        Ok(issued) => {
            state.metrics().token_issued(issued.binding);
            let audit = state.issuer().audit().enabled().then(|| AuditFacts {
                decision: Decision::Issued,
                reason: String::new(),
                service_account: ServiceAccount::from_claims(&issued.claims),
                token: Some(TokenFacts::from_claims(&issued.claims, &issued.kid)),
            });
            // A bug here is a caught panic and a 500, never a 201 with an empty body.
            #[allow(clippy::expect_used)]
            let body =
                serde_json::to_vec(&issued.response).expect("a TokenRequest always serializes");
            let mut response = (StatusCode::CREATED, body).into_response();
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Some(warning) = issued.warning.and_then(|w| HeaderValue::from_str(&w).ok()) {
                headers.insert(http::header::WARNING, warning);
            }
            if let Some(audit) = audit {
                response.extensions_mut().insert(audit);
            }
            response
        }
        Err(e) => e.into_response(),
    }
}

/// Why a token was not issued: admission refused it (which decides the request's
/// authorization), or anything else.
pub(crate) enum Failure {
    /// Admission refused the token asked for.
    Admission(warrant_auth::Refusal),
    /// Any other error.
    Other(ApiError),
}

impl Failure {
    fn into_error(self) -> ApiError {
        match self {
            Failure::Admission(refusal) => refusal.into(),
            Failure::Other(error) => error,
        }
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Failure::Other(error)
    }
}

/// A token issued, with what the handler reports about it.
pub(crate) struct Issued {
    pub(crate) response: TokenRequest,
    pub(crate) warning: Option<String>,
    pub(crate) binding: &'static str,
    /// The token's claims, for the log and the audit event.
    pub(crate) claims: Claims,
    /// The key that signed it.
    pub(crate) kid: String,
}

/// Issues a token for `namespace/name` as asked by `request`, for `user` as `authorized`, step
/// for step as kube-apiserver's token REST storage does it (spec §4). The steps run in order and
/// the first refusal is the answer, so a request wrong in two ways gets the earlier step's
/// status.
pub(crate) async fn issue(
    state: &AppState,
    user: &User,
    authorized: &Authorized,
    namespace: &str,
    name: &str,
    mut request: TokenRequest,
    key: Option<Confirmation>,
) -> Result<Issued, Failure> {
    // 1. to 6. The request's type, names, service account, audiences and expiration.
    let accepted = accept(state, namespace, name, &mut request).await?;
    let Accepted { now, requested, .. } = accepted;
    let settings = state.issuer().settings();
    let group = api_group(authorized);

    // 7. Admission (kube's validating admission step): node restriction and the grant's limits,
    //    which may cap the lifetime.
    let bound = request.spec.bound_object_ref.as_ref();
    let grant_cap = admission(state, user, authorized, &accepted, bound, key.is_some()).await?;

    // 8. The bound object, if one is named, exists and may carry this service account's token.
    let (binding, pod) = match bound {
        Some(reference) => bind(state, namespace, name, reference).await?,
        None => (Binding::None, None),
    };

    // 9. The lifetime: the server's cap, kube's extension, the grant's cap.
    let audiences = accepted.audiences;
    let (lifetime, warning) =
        decide_lifetime(settings, requested, binding.is_pod(), &audiences, grant_cap);

    // 10. The claims, signed with the key current now.
    let binding_label = binding.label();
    // 10b. Claims beyond kube's, for the audiences the policy's `claims` section names.
    let sources = ClaimSources {
        group,
        namespace,
        name,
        account: &accepted.account,
        binding: &binding,
        pod: pod.as_deref(),
    };
    let shaped = token_claims(state, &audiences, &sources).map_err(Failure::Admission)?;
    let mut claims = Claims::new(new_token(
        settings,
        namespace,
        ObjectRef::new(name, accepted.account.uid.clone()),
        audiences.clone(),
        binding,
        &lifetime,
        now,
    ));
    // 10a. Key binding: the proof's key or the client certificate, by thumbprint (RFC 7800
    //      `cnf`: RFC 9449 `jkt`, RFC 8705 `x5t#S256`).
    claims.cnf = key.map(Cnf::from);
    if let Some(shaped) = shaped {
        claims.extra = shaped.extra.map(Box::new);
        if let Some(subject) = shaped.subject {
            claims.sub = subject;
        }
    }
    let (token, kid) = sign(state, now, &claims, name, &audiences).await?;

    // 11. The response: the request as kube echoes it, with what was decided and the token.
    Ok(Issued {
        response: respond(request, audiences, &lifetime, token, now),
        warning,
        binding: binding_label,
        claims,
        kid,
    })
}

/// What steps 1 to 6 found: the request fits kube's rules for a TokenRequest.
struct Accepted<'a> {
    /// The service account's namespace.
    namespace: &'a str,
    /// Its name.
    name: &'a str,
    /// The service account's record.
    account: Arc<Record>,
    /// The audiences as the client sent them.
    requested_audiences: Vec<String>,
    /// The token's audiences, defaulted to the API audiences.
    audiences: Vec<String>,
    /// The expiration asked for (kube's default if none), within kube's bounds.
    requested: i64,
    /// When the request is answered: the response's creation time.
    now: Timestamp,
}

/// Steps 1 to 6: the request's type and names, the service account, the audiences and the
/// expiration asked for checked; the response's metadata filled in.
async fn accept<'a>(
    state: &AppState,
    namespace: &'a str,
    name: &'a str,
    request: &mut TokenRequest,
) -> Result<Accepted<'a>, ApiError> {
    // 1. The body is a TokenRequest of authentication.k8s.io/v1, where it says what it is.
    check_type(request)?;

    // 2. The body may name the service account only as the URL does.
    check_names(&request.metadata, namespace, name)?;

    // 3. The service account exists, with the UID the body names, if it names one.
    let account = service_account(state, &request.metadata, namespace, name).await?;

    // 4. The audiences asked for are within bounds; none means the API audiences.
    let settings = state.issuer().settings();
    let requested_audiences = request.spec.audiences.take().unwrap_or_default();
    let audiences = audiences(settings, &requested_audiences, name)?;

    // 5. The response names the service account, created now.
    let meta = &mut request.metadata;
    meta.name = Some(name.to_owned());
    meta.namespace = Some(namespace.to_owned());
    meta.uid = Some(account.uid.clone());
    let now = state.issuer().clock().now();
    meta.creation_timestamp = Some(rfc3339(now));

    // 6. The expiration asked for (kube's default if none) is within kube's bounds.
    let requested = requested_expiration(request)?;
    Ok(Accepted {
        namespace,
        name,
        account,
        requested_audiences,
        audiences,
        requested,
        now,
    })
}

/// The request's API group (`""` or `warrant.dev`), for messages.
fn api_group(authorized: &Authorized) -> &str {
    match &authorized.attributes {
        Attributes::Resource(r) => r.group.as_str(),
        Attributes::NonResource { .. } => "",
    }
}

/// Step 7: admission asked about the token (`bound` as the client wrote it, `key_bound` if
/// it is to be bound to a key); the grant's cap on the lifetime, if it has one.
async fn admission(
    state: &AppState,
    user: &User,
    authorized: &Authorized,
    accepted: &Accepted<'_>,
    bound: Option<&BoundObjectReference>,
    key_bound: bool,
) -> Result<Option<i64>, Failure> {
    let ask = TokenAsk {
        group: api_group(authorized),
        namespace: accepted.namespace,
        service_account: accepted.name,
        requested: &accepted.requested_audiences,
        audiences: &accepted.audiences,
        expiration_seconds: capped_expiration(state.issuer().settings(), accepted.requested),
        bound,
        key_bound,
    };
    admit_token_request(
        state.authorizer(),
        state.objects(),
        user,
        &authorized.grant,
        &ask,
        accepted.now,
    )
    .await
    .map_err(Failure::Admission)
}

/// Step 7's ask: the expiration asked for under the server's cap, if it has one.
fn capped_expiration(settings: &Settings, requested: i64) -> i64 {
    settings
        .expiration
        .max_seconds
        .filter(|max| *max > 0)
        .map_or(requested, |max| requested.min(max))
}

/// Step 10: kube's claims for the token, issued `now` for `lifetime`.
fn new_token<'a>(
    settings: &'a Settings,
    namespace: &'a str,
    service_account: ObjectRef,
    audiences: Vec<String>,
    binding: Binding,
    lifetime: &Lifetime,
    now: Timestamp,
) -> NewToken<'a> {
    let issued_at = now.as_second();
    NewToken {
        issuer: settings.issuer(),
        namespace,
        service_account,
        audiences,
        binding,
        issued_at,
        expires_at: issued_at + lifetime.token_seconds,
        warn_after: lifetime.warn_after_seconds.map(|w| issued_at + w),
        jti: new_jti(),
    }
}

/// Step 11: the request as kube echoes it, with the audiences and expiration decided and the
/// token.
fn respond(
    mut request: TokenRequest,
    audiences: Vec<String>,
    lifetime: &Lifetime,
    token: String,
    now: Timestamp,
) -> TokenRequest {
    request.kind = Some(KIND.to_owned());
    request.api_version = Some(AUTHENTICATION_V1.to_owned());
    request.spec.audiences = Some(audiences);
    request.spec.expiration_seconds = Some(lifetime.expiration_seconds);
    request.status = Some(TokenRequestStatus {
        token,
        expiration_timestamp: rfc3339(now + SignedDuration::from_secs(lifetime.expiration_seconds)),
    });
    request
}

/// Step 1: a body that says what it is must say TokenRequest, authentication.k8s.io/v1.
fn check_type(request: &TokenRequest) -> Result<(), ApiError> {
    if let Some(kind) = request
        .kind
        .as_deref()
        .filter(|k| !k.is_empty() && *k != KIND)
    {
        return Err(ApiError::bad_request(format!(
            "expected a TokenRequest, got a {kind}"
        )));
    }
    if let Some(version) = request
        .api_version
        .as_deref()
        .filter(|v| !v.is_empty() && *v != AUTHENTICATION_V1)
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({version}) does not match the expected API version ({AUTHENTICATION_V1})"
        )));
    }
    Ok(())
}

/// Step 2: `metadata.name` and `metadata.namespace`, where given, are the URL's.
fn check_names(meta: &ObjectMeta, namespace: &str, name: &str) -> Result<(), ApiError> {
    if let Some(given) = meta.name.as_deref().filter(|n| !n.is_empty() && *n != name) {
        return Err(ApiError::invalid(
            GROUP,
            KIND,
            name,
            "metadata.name",
            &warrant_token::go_quote(given),
            "must match the service account name if specified",
        ));
    }
    if let Some(given) = meta
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty() && *n != namespace)
    {
        return Err(ApiError::invalid(
            GROUP,
            KIND,
            name,
            "metadata.namespace",
            &warrant_token::go_quote(given),
            "must match the service account namespace if specified",
        ));
    }
    Ok(())
}

/// Step 3: the service account's record; a 404 if there is none, a 409 if `metadata.uid`
/// names another.
async fn service_account(
    state: &AppState,
    meta: &ObjectMeta,
    namespace: &str,
    name: &str,
) -> Result<Arc<Record>, ApiError> {
    let account = lookup(state, Kind::ServiceAccount, namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found(Kind::ServiceAccount.resource(), name))?;
    if let Some(uid) = meta
        .uid
        .as_deref()
        .filter(|u| !u.is_empty() && *u != account.uid)
    {
        return Err(ApiError::conflict(
            GROUP,
            KIND,
            name,
            format!(
                "the UID in the token request ({uid}) does not match the UID of the service account ({})",
                account.uid
            ),
        ));
    }
    Ok(account)
}

/// Step 4: the token's audiences, from the `requested` ones (within bounds) or, if none, the
/// API audiences.
fn audiences(
    settings: &Settings,
    requested: &[String],
    name: &str,
) -> Result<Vec<String>, ApiError> {
    if let Some(why) = warrant_token::audiences_over_limits(requested) {
        return Err(ApiError::invalid(
            GROUP,
            KIND,
            name,
            "spec.audiences",
            &requested.len().to_string(),
            &why,
        ));
    }
    Ok(if requested.is_empty() {
        settings.api_audiences.clone()
    } else {
        requested.to_vec()
    })
}

/// Step 6: `spec.expirationSeconds`, or kube's default, validated as kube does.
fn requested_expiration(request: &TokenRequest) -> Result<i64, ApiError> {
    let requested = request
        .spec
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if let Err(detail) = validate_expiration_seconds(requested) {
        return Err(ApiError::invalid(
            GROUP,
            KIND,
            "",
            "spec.expirationSeconds",
            &requested.to_string(),
            detail,
        ));
    }
    Ok(requested)
}

/// Step 9: the token's lifetime for `requested` seconds, and the warning when the server's cap
/// shortened it. The one-year extension (for a pod-bound token for API audiences only) never
/// outlives a cap the grant sets: no extension then.
fn decide_lifetime(
    settings: &Settings,
    requested: i64,
    pod_bound: bool,
    audiences: &[String],
    grant_cap: Option<i64>,
) -> (Lifetime, Option<String>) {
    let api_only = audiences.iter().all(|a| settings.api_audiences.contains(a));
    let mut lifetime = settings.expiration.lifetime(requested, pod_bound, api_only);
    if grant_cap.is_some_and(|cap| lifetime.token_seconds > cap) {
        lifetime = settings.expiration.lifetime(requested, false, api_only);
    }
    let warning = lifetime.shortened_from.map(|from| {
        format!(
            "299 - \"requested expiration of {from} seconds shortened to {} seconds\"",
            lifetime.expiration_seconds
        )
    });
    (lifetime, warning)
}

/// Step 10: `claims` signed with the key current at `now`, and that key's kid. Never hands out
/// a token that TokenReview would refuse unread: one too long is a 422 on its audiences.
async fn sign(
    state: &AppState,
    now: Timestamp,
    claims: &Claims,
    name: &str,
    audiences: &[String],
) -> Result<(String, String), ApiError> {
    let issuer = state.issuer();
    let SignedToken { token, kid } = issuer
        .sign_token(&issuer.published(), now, claims)
        .await
        .map_err(|e| {
            // The HSM holding the key, or the shared key store, is unreachable now: a retry
            // may succeed.
            if e.is_unavailable() {
                ApiError::unavailable(format!("failed to generate token: {e}"))
            } else {
                ApiError::internal(format!("failed to generate token: {e}"))
            }
        })?;
    if token.len() > warrant_token::MAX_TOKEN_BYTES {
        return Err(ApiError::invalid(
            GROUP,
            KIND,
            name,
            "spec.audiences",
            &audiences.len().to_string(),
            &format!(
                "the token would be {} bytes, more than the {} a TokenReview reads: ask for fewer or shorter audiences",
                token.len(),
                warrant_token::MAX_TOKEN_BYTES
            ),
        ));
    }
    Ok((token, kid))
}

/// Resolves `boundObjectRef` (spec §4.3): only the group of its apiVersion is compared. With
/// the binding, the bound pod's record (for the policy's claims, which may name its labels).
async fn bind(
    state: &AppState,
    namespace: &str,
    service_account: &str,
    reference: &BoundObjectReference,
) -> Result<(Binding, Option<Arc<Record>>), ApiError> {
    let (group, version) = match reference.api_version.split_once('/') {
        Some((group, version)) if !version.contains('/') => (group, version),
        Some(_) => ("", ""),
        None => ("", reference.api_version.as_str()),
    };
    let kind = match (group, reference.kind.as_str()) {
        ("", "Pod") => Kind::Pod,
        ("", "Secret") => Kind::Secret,
        ("", "Node") => Kind::Node,
        _ => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {group}/{version}, Kind={}",
                reference.kind
            )));
        }
    };
    // As kube refuses a Node binding while its feature gate is off: a 400 before any lookup.
    // Only Secrets can be turned off.
    if !state.objects().binds(kind) {
        return Err(ApiError::bad_request(
            "cannot bind token to a Secret object as secret binding is disabled on this server (--disable-secret-binding)",
        ));
    }
    if reference.name.is_empty() {
        return Err(ApiError::bad_request("Name parameter required."));
    }
    let scope = if kind.namespaced() { namespace } else { "" };
    let record = lookup(state, kind, scope, &reference.name)
        .await?
        .ok_or_else(|| ApiError::not_found(kind.resource(), &reference.name))?;

    let mut node = None;
    if kind == Kind::Pod {
        let pod = record.pod.clone().unwrap_or_default();
        if pod.service_account_name != service_account {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {} to pod running with different serviceaccount name.",
                warrant_token::go_quote(service_account)
            )));
        }
        if !pod.node_name.is_empty() {
            // A node that does not exist still has its name embedded, without a UID.
            let uid = lookup(state, Kind::Node, "", &pod.node_name)
                .await?
                .map(|n| n.uid.clone())
                .unwrap_or_default();
            node = Some(ObjectRef::new(pod.node_name, uid));
        }
    }
    if !reference.uid.is_empty() && reference.uid != record.uid {
        return Err(ApiError::conflict(
            "",
            kind.name(),
            &reference.name,
            format!(
                "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
                reference.uid
            ),
        ));
    }
    let object = ObjectRef::new(reference.name.clone(), record.uid.clone());
    Ok(match kind {
        Kind::Pod => (Binding::Pod { pod: object, node }, Some(record)),
        Kind::Secret => (Binding::Secret(object), None),
        _ => (Binding::Node(object), None),
    })
}

async fn lookup(
    state: &AppState,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<Record>>, ApiError> {
    state
        .objects()
        .get(kind, namespace, name)
        .await
        .map_err(|why: LookupError| {
            ApiError::unavailable(format!(
                "cannot look up {} {namespace}/{name}: {why}",
                kind.name()
            ))
        })
}

/// `metav1.Time` on the wire: RFC 3339 in UTC, whole seconds.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
