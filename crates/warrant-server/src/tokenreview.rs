//! TokenReview: `POST /apis/authentication.k8s.io/{v1,v1beta1}/tokenreviews` (and in warrant's
//! own group). Always 201 with the spec echoed and the verdict in `status`, replying in the
//! request's version, as kube-apiserver does and as its webhook client expects.
//!
//! Key-bound tokens (`cnf`, issue 27): kube's TokenReview carries no proof of a key, so through
//! the `authentication.k8s.io` routes such a token is refused, saying where to review it. The
//! `warrant.dev` TokenReview takes the proof the relying party received: `spec.dpop` (the
//! `DPoP` proof and the method and URI of the request it came with) or
//! `spec.certificateThumbprint` (of the client certificate its TLS connection presented).
//!
//! Both decide a token's binding with the one check of it (`warrant_token::check_binding`, as
//! warrant's API and `warrant verify` do): every binding the token's `cnf` names must be proven,
//! and a `cnf` warrant does not understand is refused on every route, kube's included.
//!
//! What this trusts: the relying party for the method, URI and thumbprint of its own request
//! (it is the party that relies on the answer; a caller that lies about them fools only
//! itself). The proof itself is checked like any proof warrant's API receives, through the one
//! replay cache, so a proof reviewed once is refused everywhere after, and the other way round.
//! Cost, when a proof is given: one proof verification (one signature, two SHA-256s) and one
//! replay-cache insert.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderValue};

use crate::audit::AuditFacts;
use crate::body;
use crate::error::ApiError;
use crate::metrics::ReviewResult;
use crate::review::{Refused, review_token};
use crate::state::AppState;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_audit::{Decision, ServiceAccount, TokenFacts};
use warrant_auth::Caller;
use warrant_proto::wire::{
    KeyBinding, ObjectMeta, TokenReview, TokenReviewSpec, TokenReviewStatus,
};
use warrant_token::{
    BindingError, CertificateEvidence, Claims, Cnf, DpopError, Evidence, MAX_PROOF_BYTES,
    ProofRequest, VerifiedToken, header_key_id,
};

/// The handler for `caller` on the route of one served version (`authentication.k8s.io/v1`,
/// …).
pub(crate) async fn create(
    state: &AppState,
    caller: &Caller,
    version: &'static str,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let result = async {
        caller.require()?;
        let request: TokenReview = body::decode(&parts.headers, body).await?;
        review(state, version, request).await
    }
    .await;
    match result {
        Ok((review, audit)) => {
            // A bug here is a caught panic and a 500, never a 201 with an empty body.
            #[allow(clippy::expect_used)]
            let body = serde_json::to_vec(&review).expect("a TokenReview always serializes");
            let mut response = (StatusCode::CREATED, body).into_response();
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Some(audit) = audit {
                response.extensions_mut().insert(audit);
            }
            response
        }
        Err(e) => e.into_response(),
    }
}

/// Reviews the token in `request`; with an audit log, says what for its event. The steps run
/// in order and the first refusal of the request (not of its token) is the answer.
pub(crate) async fn review(
    state: &AppState,
    served: &'static str,
    mut request: TokenReview,
) -> Result<(TokenReview, Option<AuditFacts>), ApiError> {
    // 1. The body is a cluster-scoped TokenReview of a version this route takes, with a token
    //    and audiences within bounds.
    let version = check_request(&request, served)?;

    // 2. The proof of a key: a field of warrant.dev's review only, checked for form.
    let own_group = served == warrant_proto::wire::WARRANT_V1ALPHA1;
    keep_proof_fields(&mut request.spec, own_group);
    let proof = KeyProof::of(&request.spec)?;

    // 3. The token: verified, its objects checked, its binding proven by the proof.
    let now = state.issuer().clock().now();
    let checked = check_token(state, &request.spec, proof, own_group, now).await?;

    // 4. The verdict, counted, and what the audit event says.
    let verdict = Verdict::of(
        checked,
        &request.spec.token,
        state.issuer().audit().enabled(),
        now,
    );
    state
        .metrics()
        .token_reviewed(verdict.result, verdict.stale);
    if verdict.stale {
        tracing::info!(user = %verdict.status.user.username, "stale token: used after its warnafter time");
    }

    // 5. The answer: the request echoed in the version it was sent in, with the verdict.
    let review = TokenReview {
        kind: Some("TokenReview".to_owned()),
        api_version: Some(version),
        metadata: ObjectMeta {
            creation_timestamp: None,
            ..request.metadata
        },
        spec: request.spec,
        status: verdict.status,
    };
    Ok((review, verdict.audit))
}

/// Step 1: the version the answer is written in (the body's, else the route's), or a 400 for
/// a body that is not a TokenReview this route takes: another kind or version, a namespace, no
/// token, or audiences beyond their bounds.
fn check_request(request: &TokenReview, served: &'static str) -> Result<String, ApiError> {
    if let Some(kind) = request
        .kind
        .as_deref()
        .filter(|k| !k.is_empty() && *k != "TokenReview")
    {
        return Err(ApiError::bad_request(format!(
            "expected a TokenReview, got a {kind}"
        )));
    }
    let version = match request.api_version.as_deref() {
        None | Some("") => served.to_owned(),
        Some(v) if accepted_version(served, v) => v.to_owned(),
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({served})"
            )));
        }
    };
    if let Some(ns) = request
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        return Err(ApiError::bad_request(format!(
            "namespace is not allowed on this type: {ns}"
        )));
    }
    if request.spec.token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    if let Some(why) = warrant_token::audiences_over_limits(&request.spec.audiences) {
        return Err(ApiError::bad_request(format!("spec.audiences: {why}")));
    }
    Ok(version)
}

/// Step 2: the proof fields are warrant.dev's. An empty thumbprint there is none; on kube's
/// routes they are not fields of its TokenReview, so they are dropped unread and not echoed,
/// as kube-apiserver drops the unknown fields of a body (and the binding check then refuses
/// every key-bound token).
fn keep_proof_fields(spec: &mut TokenReviewSpec, own_group: bool) {
    if own_group {
        if spec.certificate_thumbprint.as_deref() == Some("") {
            spec.certificate_thumbprint = None;
        }
    } else {
        spec.dpop = None;
        spec.certificate_thumbprint = None;
    }
}

/// A token reviewed: verified, with the binding its proof proved, or refused (a verdict, not
/// an error of the request).
type Checked = Result<(VerifiedToken, Option<KeyBinding>), Refused>;

/// Step 3: the one review of a token (`review_token`: signature, claims, objects), then its
/// binding against `proof`. Only a proof that could not be remembered now fails the request
/// (429); every other refusal is the verdict.
async fn check_token(
    state: &AppState,
    spec: &TokenReviewSpec,
    proof: KeyProof<'_>,
    own_group: bool,
    now: jiff::Timestamp,
) -> Result<Checked, ApiError> {
    let published = state.issuer().published();
    let verified = match review_token(
        &published,
        state.objects(),
        state.metrics(),
        &spec.token,
        &spec.audiences,
        now,
    )
    .await
    {
        Ok(verified) => verified,
        Err(refused) => return Ok(Err(refused)),
    };
    match check_binding(state, &spec.token, &verified, proof, now) {
        Ok(binding) => Ok(Ok((verified, binding))),
        Err(BindingRefusal::Overloaded(why)) => Err(ApiError::too_many_requests_saying(
            warrant_auth::OVERLOAD_RETRY_AFTER_SECONDS,
            why.to_string(),
        )),
        Err(BindingRefusal::Reason(reason)) => {
            let reason = match own_group {
                true => reason,
                false => kube_route_reason(&verified, reason),
            };
            Ok(Err(Refused {
                result: ReviewResult::Invalid,
                reason,
                claims: Some(verified.claims),
            }))
        }
    }
}

/// Step 4: what a review decided: the status answered, the metric's labels, and (with an audit
/// log) the facts of its event.
struct Verdict {
    status: TokenReviewStatus,
    result: ReviewResult,
    /// An extended token used after its `warnafter`.
    stale: bool,
    audit: Option<AuditFacts>,
}

impl Verdict {
    /// The verdict on `token`, checked as `checked`; the audit facts only if `auditing`.
    fn of(checked: Checked, token: &str, auditing: bool, now: jiff::Timestamp) -> Verdict {
        let mut status = TokenReviewStatus::default();
        match checked {
            Ok((verified, binding)) => {
                let stale = verified.is_stale(now);
                status.authenticated = true;
                status.user = verified.user_info();
                status.audiences = verified.audiences;
                status.key_binding = binding;
                Verdict {
                    status,
                    result: ReviewResult::Authenticated,
                    stale,
                    audit: auditing.then(|| {
                        audit_facts(
                            Decision::Authenticated,
                            String::new(),
                            Some(&verified.claims),
                            token,
                        )
                    }),
                }
            }
            Err(Refused {
                result,
                reason,
                claims,
            }) => {
                // Whose token it was is known only when its signature was good.
                let audit = auditing.then(|| {
                    audit_facts(
                        Decision::Unauthenticated,
                        reason.clone(),
                        claims.as_deref(),
                        token,
                    )
                });
                status.error = reason;
                Verdict {
                    status,
                    result,
                    stale: false,
                    audit,
                }
            }
        }
    }
}

/// The audit event's facts of a review: whose token it was and which, when its claims are
/// known.
fn audit_facts(
    decision: Decision,
    reason: String,
    claims: Option<&Claims>,
    token: &str,
) -> AuditFacts {
    AuditFacts {
        decision,
        reason,
        service_account: claims.and_then(ServiceAccount::from_claims),
        token: claims.map(|claims| {
            let mut facts =
                TokenFacts::from_claims(claims, &header_key_id(token).unwrap_or_default());
            // The policy's claims, which the verified claims do not keep: read back from the
            // token, only for the audit record.
            facts.extra_claims = warrant_token::extra_claims_in(token);
            facts
        }),
    }
}

/// What kube's TokenReview answers for a key-bound token (`cnf`): it carries no proof of the
/// key, so accepting the token there would let whoever holds it (without the key) pass as its
/// service account, which is what binding it to a key was to prevent. Refused, saying where a
/// relying party that has the proof can review it.
pub(crate) const KEY_BOUND_REVIEW: &str = "service account token is bound to a key (cnf): this TokenReview cannot carry the proof of that key; review it with the proof (spec.dpop or spec.certificateThumbprint) at /apis/warrant.dev/v1alpha1/tokenreviews";

/// The reason kube's TokenReview routes give for a token the binding check refused: a token
/// bound to keys is pointed to warrant.dev's review ([`KEY_BOUND_REVIEW`]); one whose `cnf`
/// warrant does not understand gets the check's reason, for no review can pass it.
fn kube_route_reason(verified: &VerifiedToken, reason: String) -> String {
    match verified.claims.cnf.as_ref().map(Cnf::binding) {
        Some(Err(_)) => reason,
        _ => KEY_BOUND_REVIEW.to_owned(),
    }
}

/// The proof of a key a `warrant.dev` review carries, checked for form (not yet for truth).
#[derive(Debug, Clone, Copy)]
enum KeyProof<'a> {
    /// None: the token must not be key-bound.
    None,
    /// A DPoP proof and the request it came with.
    Dpop {
        proof: &'a str,
        method: &'a str,
        uri: &'a str,
    },
    /// The thumbprint of the client certificate the token came with.
    Certificate(&'a str),
}

/// The `DPoP` method of [`KeyBinding`].
pub(crate) const BINDING_DPOP: &str = "DPoP";
/// The client-certificate method of [`KeyBinding`].
pub(crate) const BINDING_CERTIFICATE: &str = "ClientCertificate";

/// RFC 8705's `x5t#S256` is the unpadded base64url of a SHA-256: 43 characters, 32 bytes.
const THUMBPRINT_BYTES: usize = 32;

impl<'a> KeyProof<'a> {
    /// The proof in `spec`, or a 400 naming the field that is malformed. Values are never
    /// quoted: a proof is a credential for its window.
    fn of(spec: &'a TokenReviewSpec) -> Result<KeyProof<'a>, ApiError> {
        match (&spec.dpop, spec.certificate_thumbprint.as_deref()) {
            (None, None) => Ok(KeyProof::None),
            (Some(_), Some(_)) => Err(ApiError::bad_field(
                "spec.certificateThumbprint",
                "FieldValueForbidden",
                "Forbidden: may not be given together with spec.dpop (a token is bound to one key)",
            )),
            (Some(dpop), None) => {
                let required = |field: &str| {
                    ApiError::bad_field(field, "FieldValueRequired", "Required value")
                };
                if dpop.proof.is_empty() {
                    return Err(required("spec.dpop.proof"));
                }
                if dpop.proof.len() > MAX_PROOF_BYTES {
                    return Err(ApiError::bad_field(
                        "spec.dpop.proof",
                        "FieldValueTooLong",
                        &format!("Too long: may not be more than {MAX_PROOF_BYTES} bytes"),
                    ));
                }
                if dpop.method.is_empty() {
                    return Err(required("spec.dpop.method"));
                }
                if http::Method::from_bytes(dpop.method.as_bytes()).is_err() {
                    return Err(ApiError::bad_field(
                        "spec.dpop.method",
                        "FieldValueInvalid",
                        "Invalid value: must be the HTTP method of the request the proof came with, such as GET",
                    ));
                }
                if dpop.uri.is_empty() {
                    return Err(required("spec.dpop.uri"));
                }
                if !absolute_https(&dpop.uri) {
                    return Err(ApiError::bad_field(
                        "spec.dpop.uri",
                        "FieldValueInvalid",
                        "Invalid value: must be the absolute https URI of the request the proof came with",
                    ));
                }
                Ok(KeyProof::Dpop {
                    proof: &dpop.proof,
                    method: &dpop.method,
                    uri: &dpop.uri,
                })
            }
            (None, Some(thumbprint)) => {
                let decoded = URL_SAFE_NO_PAD.decode(thumbprint);
                if !decoded.is_ok_and(|hash| hash.len() == THUMBPRINT_BYTES) {
                    return Err(ApiError::bad_field(
                        "spec.certificateThumbprint",
                        "FieldValueInvalid",
                        "Invalid value: must be the unpadded base64url SHA-256 of the client certificate's DER (43 characters)",
                    ));
                }
                Ok(KeyProof::Certificate(thumbprint))
            }
        }
    }
}

/// True if `uri` is an absolute `https` URI with a host.
fn absolute_https(uri: &str) -> bool {
    url::Url::parse(uri).is_ok_and(|u| u.scheme() == "https" && u.host().is_some())
}

/// Why a review's binding check did not pass.
enum BindingRefusal {
    /// The token is not authenticated: why, as `status.error` says it.
    Reason(String),
    /// The proof could not be remembered now: the review is answered 429, not with a verdict.
    Overloaded(DpopError),
}

/// Checks the proof a review carries against the keys `verified` is bound to, through the one
/// check of a binding (`warrant_token::check_binding`): the binding that was proven, `None` for
/// an unbound token without a proof, or why not, worded for a review (the spec's fields).
///
/// A proof given for an unbound token is refused too: a relying party that checks proofs
/// expects bound tokens, and a bearer token would pass it whatever the proof. A DPoP proof is
/// charged, in the replay cache, to the service account the token names: its holder made it.
fn check_binding(
    state: &AppState,
    token: &str,
    verified: &VerifiedToken,
    proof: KeyProof<'_>,
    now: jiff::Timestamp,
) -> Result<Option<KeyBinding>, BindingRefusal> {
    let evidence = Evidence {
        dpop_proof: matches!(proof, KeyProof::Dpop { .. }),
        certificate: match proof {
            KeyProof::Certificate(thumbprint) => CertificateEvidence::Given(thumbprint),
            KeyProof::None | KeyProof::Dpop { .. } => CertificateEvidence::None,
        },
    };
    let prove = |jkt: &str| {
        let KeyProof::Dpop { proof, method, uri } = proof else {
            return Err(DpopError::NotOne);
        };
        let request = ProofRequest {
            method,
            uri,
            access_token: Some(token),
            bound_to: Some(jkt),
        };
        state
            .authenticator()
            .proofs
            .check_proof(proof, &request, &verified.claims.sub, now)
    };
    let cnf = verified.claims.cnf.as_ref();
    match warrant_token::check_binding(cnf, &evidence, prove) {
        Ok(None) => Ok(None),
        Ok(Some(bound)) => Ok(Some(match (&bound.jkt, &bound.x5t_s256) {
            (Some(jkt), _) => KeyBinding {
                method: BINDING_DPOP,
                thumbprint: jkt.clone(),
            },
            (None, x5t) => KeyBinding {
                method: BINDING_CERTIFICATE,
                thumbprint: x5t.clone().unwrap_or_default(),
            },
        })),
        Err(BindingError::Proof(why)) if why.is_overload() => Err(BindingRefusal::Overloaded(why)),
        Err(why) => Err(BindingRefusal::Reason(review_reason(cnf, &why))),
    }
}

/// How a review words a binding that did not hold, naming the spec's fields.
fn review_reason(cnf: Option<&Cnf>, why: &BindingError) -> String {
    let bound_to_both = cnf
        .and_then(|cnf| cnf.binding().ok())
        .is_some_and(|bound| bound.jkt.is_some() && bound.x5t_s256.is_some());
    let reason = match why {
        _ if cnf.is_none() => NOT_KEY_BOUND,
        BindingError::ProofMissing { .. } | BindingError::CertificateMissing { .. }
            if bound_to_both =>
        {
            BOUND_TO_BOTH
        }
        BindingError::ProofMissing { .. } => NO_DPOP_PROOF,
        BindingError::CertificateMissing { .. } => NO_CERTIFICATE,
        BindingError::NotCertificateBound => NOT_CERTIFICATE_BOUND,
        BindingError::NotDpopBound => NOT_DPOP_BOUND,
        BindingError::Certificate { .. } => CERTIFICATE_MISMATCH,
        BindingError::Unusable(_) | BindingError::Proof(_) => return why.to_string(),
    };
    reason.to_owned()
}

/// An unbound token reviewed with a proof.
const NOT_KEY_BOUND: &str = "service account token is not bound to a key (it has no cnf claim), so the proof given proves nothing: a relying party that checks proofs must not accept it as a bearer token";
/// A DPoP-bound token reviewed without its proof.
const NO_DPOP_PROOF: &str = "service account token is bound to a DPoP key (cnf.jkt): it authenticates only with the DPoP proof that came with it, in spec.dpop";
/// A certificate-bound token reviewed without a thumbprint.
const NO_CERTIFICATE: &str = "service account token is bound to a client certificate (cnf.x5t#S256): it authenticates only with the thumbprint of the certificate it came with, in spec.certificateThumbprint";
/// A DPoP-bound token reviewed with a certificate thumbprint.
const NOT_CERTIFICATE_BOUND: &str = "service account token is bound to a DPoP key (cnf.jkt), not to a client certificate: it authenticates only with the DPoP proof that came with it, in spec.dpop";
/// A certificate-bound token reviewed with a DPoP proof.
const NOT_DPOP_BOUND: &str = "service account token is bound to a client certificate (cnf.x5t#S256), not to a DPoP key: it authenticates only with the thumbprint of the certificate it came with, in spec.certificateThumbprint";
/// A certificate-bound token reviewed with another certificate's thumbprint.
const CERTIFICATE_MISMATCH: &str =
    "client certificate is not the one the service account token is bound to (cnf.x5t#S256)";
/// A token bound to a DPoP key and a certificate at once: each binding must be proven, and a
/// review carries the proof of one.
const BOUND_TO_BOTH: &str = "service account token is bound to both a DPoP key and a client certificate; both must be proven, and a review can carry only one of spec.dpop and spec.certificateThumbprint";

/// The versions a route accepts in a body: the authentication group's routes take v1 and
/// v1beta1 (field-identical), warrant's own only its own.
fn accepted_version(served: &str, given: &str) -> bool {
    use warrant_proto::wire::{AUTHENTICATION_V1, AUTHENTICATION_V1BETA1};
    given == served
        || (served.starts_with("authentication.k8s.io/")
            && (given == AUTHENTICATION_V1 || given == AUTHENTICATION_V1BETA1))
}
