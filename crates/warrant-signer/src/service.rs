//! The three RPCs of kube-apiserver's `ExternalJWTSigner`, answered from warrant's key set.
//!
//! - **Sign** gets the claims kube-apiserver encoded (base64url JSON, no padding) and returns a
//!   header `{"alg","kid","typ":"JWT"}` and the signature over `header.claims`, the claims bytes
//!   exactly as received: kube-apiserver assembles the token itself. Before signing it checks
//!   the claims are warrant's to sign: at most [`MAX_CLAIMS_BYTES`], a JSON object that every
//!   JWT reader reads alike (no repeated key, no case variant of a registered claim:
//!   [`parse_claims_strictly`]), an `iss` of warrant's, and an `exp` no later than the
//!   operator's maximum lifetime (plus the leeway) from now; an extended token (one with
//!   `kubernetes.io.warnafter`, itself within that maximum) may run to the extended maximum,
//!   the longest lifetime the keys are published for. Anything else is `InvalidArgument`,
//!   saying why. It signs with the key active now, which is always published.
//! - **FetchKeys** lists every published key (next, active, retired, and extra verification
//!   keys, all in warrant's JWKS too, so both JWKS agree), `data_timestamp` = when the key set
//!   last changed, and a refresh hint equal to the documents' max-age: the time to the next
//!   scheduled key change, between 60 s and an hour. So kube-apiserver learns of a key within a
//!   minute of its publication, long before it signs (publish-ahead), and keeps a retired key
//!   while warrant does.
//! - **Metadata** gives the longest `exp - iat` warrant issues
//!   ([`ExpirationPolicy::longest_token_seconds`](warrant_token::ExpirationPolicy::longest_token_seconds)),
//!   which is also how long keys stay published after they stop signing: kube-apiserver then
//!   never mints a token that outlives its key's publication. kube-apiserver caps extended
//!   tokens at it, and ordinary ones too unless its own `--service-account-max-token-expiration`
//!   is set: where extended tokens outlive the operator's maximum (key files, the default
//!   extension), that flag must be warrant's maximum, or Sign refuses the longer requests. The
//!   answer's gRPC metadata carries warrant's maximum for ordinary tokens as
//!   [`ORDINARY_MAX_METADATA`], for `warrant probe-signer` to compare.

use tokio::time::Instant;

use tonic::{Code, Request, Response, Status};
use warrant_audit::{Decision, Event, EventKind, Requester, ServiceAccount, TokenFacts};
use warrant_audit::{JsonList, LOGGED_ITEM_CHARS, bounded};
use warrant_issuer::{Issuer, SignError, SignedClaims};
use warrant_token::{
    Claims, ClaimsJsonError, EncodedClaimsError, ExpirationPolicy, LEEWAY_SECONDS, MAX_TOKEN_BYTES,
    decode_claims_strictly,
};

use crate::peer::Peer;

use crate::metrics::SignerMetrics;
use crate::proto::external_jwt_signer_server::{ExternalJwtSigner, ExternalJwtSignerServer};
use crate::proto::{
    FetchKeysRequest, FetchKeysResponse, Key, MetadataRequest, MetadataResponse, SignJwtRequest,
    SignJwtResponse,
};

/// The longest encoded claims signed: a token's whole length must stay within what warrant's
/// TokenReview reads ([`MAX_TOKEN_BYTES`]), leaving room for the header and an RSA-4096
/// signature.
pub const MAX_CLAIMS_BYTES: usize = MAX_TOKEN_BYTES - 1024;

/// The gRPC metadata key of a Metadata answer that carries warrant's maximum lifetime of an
/// ordinary (not extended) token, in seconds: what kube-apiserver's own
/// `--service-account-max-token-expiration` must not exceed.
pub const ORDINARY_MAX_METADATA: &str = "warrant-max-token-expiration-seconds";

/// The signer service, over the issuer the HTTPS API serves too (keys, issuers, lifetimes,
/// clock, auditor).
#[derive(Clone)]
pub struct Signer {
    issuer: Issuer,
    metrics: SignerMetrics,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").finish_non_exhaustive()
    }
}

/// A refused Sign. Its kind decides the gRPC code: `UNAVAILABLE` tells kube-apiserver that a later
/// attempt may succeed.
enum Refusal {
    /// The claims are not warrant's to sign: `INVALID_ARGUMENT`, with the metric label and the
    /// message saying why.
    Claims(&'static str, String),
    /// The key in force did not sign: `UNAVAILABLE` when a later attempt may succeed (its
    /// holder cannot be reached, or the keys are past their signing deadline), else `INTERNAL`.
    Sign(SignError),
}

impl Refusal {
    /// The gRPC code kube-apiserver gets.
    fn code(&self) -> Code {
        match self {
            Refusal::Claims(..) => Code::InvalidArgument,
            Refusal::Sign(error) if error.is_unavailable() => Code::Unavailable,
            Refusal::Sign(_) => Code::Internal,
        }
    }

    /// The `result` label of `warrant_signer_requests_total`.
    fn label(&self) -> &'static str {
        match self {
            Refusal::Claims(label, _) => label,
            Refusal::Sign(SignError::Unavailable { .. }) => "key_unavailable",
            Refusal::Sign(SignError::Withheld { .. }) => "key_withheld",
            Refusal::Sign(SignError::Stopped(_)) => "signing_stopped",
            Refusal::Sign(SignError::Key { .. }) => "sign_failed",
        }
    }

    /// What the caller is told, and the audit event and the log say.
    fn message(&self) -> String {
        match self {
            Refusal::Claims(_, message) => message.clone(),
            Refusal::Sign(error) => format!("signing failed: {error}"),
        }
    }
}

impl Signer {
    /// A signer answering for `issuer`, counting in `metrics`.
    pub fn new(issuer: Issuer, metrics: SignerMetrics) -> Self {
        Signer { issuer, metrics }
    }

    /// Its metrics.
    pub fn metrics(&self) -> &SignerMetrics {
        &self.metrics
    }

    /// The gRPC service, for a tonic server.
    pub fn into_service(self) -> ExternalJwtSignerServer<Signer> {
        // kube-apiserver's requests are small; a bound keeps a client from sending megabytes.
        ExternalJwtSignerServer::new(self).max_decoding_message_size(64 * 1024)
    }

    /// Signs `claims` (base64url JSON, as kube-apiserver encoded them) once they pass every
    /// check, in order; the first refusal is the answer. Also the parsed claims and the key's
    /// ID, for the log and the audit event.
    async fn sign_claims(
        &self,
        claims: &str,
    ) -> Result<(SignJwtResponse, Claims, String), Refusal> {
        // 1. No longer than a token of warrant's may be.
        check_size(claims)?;
        // 2. A JSON object every JWT reader reads alike, of the types TokenReview reads.
        let parsed = parse_claims(claims)?;
        // 3. An issuer of warrant's.
        let settings = self.issuer.settings();
        check_issuer(&parsed, &settings.issuers)?;
        // 4. An expiry within the lifetime the keys are published for.
        let at = self.issuer.clock().now();
        check_lifetime(&parsed, &settings.expiration, at.as_second())?;
        // 5. Signed by the key active now, over the claims exactly as received.
        let SignedClaims { signature, kid } = self
            .issuer
            .sign_detached(&self.issuer.published(), at, claims)
            .await
            .map_err(Refusal::Sign)?;
        Ok((
            SignJwtResponse {
                header: signature.header,
                signature: signature.signature,
            },
            parsed,
            kid,
        ))
    }
}

/// Sign's step 1: at most [`MAX_CLAIMS_BYTES`].
fn check_size(claims: &str) -> Result<(), Refusal> {
    if claims.len() > MAX_CLAIMS_BYTES {
        return Err(Refusal::Claims(
            "oversized",
            format!(
                "claims of {} bytes: more than the {MAX_CLAIMS_BYTES} a token of warrant's may carry",
                claims.len()
            ),
        ));
    }
    Ok(())
}

/// Sign's step 2: the claims decoded strictly ([`decode_claims_strictly`]), or why not.
fn parse_claims(claims: &str) -> Result<Claims, Refusal> {
    decode_claims_strictly(claims).map_err(|error| match &error {
        EncodedClaimsError::NotBase64(_) => Refusal::Claims("not_base64url", error.to_string()),
        EncodedClaimsError::Json(ClaimsJsonError::NotJson(_) | ClaimsJsonError::NotObject) => {
            Refusal::Claims(
                "not_json_object",
                "claims do not decode to a JSON object".into(),
            )
        }
        EncodedClaimsError::Json(ClaimsJsonError::DuplicateKey { .. }) => {
            Refusal::Claims("duplicate_claim", error.to_string())
        }
        EncodedClaimsError::Json(ClaimsJsonError::CaseVariant { .. }) => {
            Refusal::Claims("case_variant_claim", error.to_string())
        }
        // Typed as TokenReview reads them: claims of another shape would make a token
        // warrant itself refuses, so they are not signed either. serde quotes the
        // offending value: bounded, it is the caller's.
        EncodedClaimsError::Types(_) => Refusal::Claims(
            "malformed_claims",
            bounded(&error.to_string(), LOGGED_ITEM_CHARS + 48),
        ),
    })
}

/// Sign's step 3: an `iss` among `issuers`, warrant's.
fn check_issuer(parsed: &Claims, issuers: &[String]) -> Result<(), Refusal> {
    if parsed.iss.is_empty() {
        return Err(Refusal::Claims(
            "wrong_issuer",
            "claims have no iss (string)".into(),
        ));
    }
    if !issuers.contains(&parsed.iss) {
        return Err(Refusal::Claims(
            "wrong_issuer",
            format!(
                "iss {:?} is not an issuer of this signer ({}); --service-account-issuer must be the same for kube-apiserver and warrant",
                parsed.iss,
                issuers.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Sign's step 4: an `exp`, no later than `expiration`'s maximum (plus the leeway) from `now`
/// (seconds); an extended token (with `kubernetes.io.warnafter`, itself within the ordinary
/// maximum) may run to the extended maximum.
fn check_lifetime(parsed: &Claims, expiration: &ExpirationPolicy, now: i64) -> Result<(), Refusal> {
    let Some(exp) = parsed.exp else {
        return Err(Refusal::Claims(
            "no_exp",
            "claims have no exp (integer seconds): warrant signs no token that never expires"
                .into(),
        ));
    };
    let ordinary = expiration.longest_ordinary_token_seconds();
    let extended = expiration.longest_token_seconds();
    let by = |seconds: i64| now.saturating_add(seconds).saturating_add(LEEWAY_SECONDS);
    match parsed.kubernetes.warnafter {
        // Extended: warned about within the ordinary maximum, valid up to the extended one.
        Some(warn_after) if warn_after > by(ordinary) => Err(Refusal::Claims(
            "bad_warnafter",
            format!(
                "kubernetes.io.warnafter is {} s from now, beyond the {ordinary} s a token may live before it is extended",
                warn_after.saturating_sub(now)
            ),
        )),
        Some(_) if exp > by(extended) => Err(Refusal::Claims(
            "exp_beyond_max",
            format!(
                "exp is {} s from now, beyond the {extended} s this signer's keys stay published for (its Metadata maximum)",
                exp.saturating_sub(now)
            ),
        )),
        None if exp > by(ordinary) => Err(Refusal::Claims(
            "exp_beyond_max",
            format!(
                "exp is {} s from now, beyond the {ordinary} s maximum of a token that is not extended (warrant's --service-account-max-token-expiration); kube-apiserver's --service-account-max-token-expiration must not be longer",
                exp.saturating_sub(now)
            ),
        )),
        Some(_) | None => Ok(()),
    }
}

#[tonic::async_trait]
impl ExternalJwtSigner for Signer {
    async fn sign(
        &self,
        request: Request<SignJwtRequest>,
    ) -> Result<Response<SignJwtResponse>, Status> {
        let started = Instant::now();
        let audit = self.issuer.audit();
        let audited = audit
            .enabled()
            .then(|| (self.issuer.clock().now(), peer(&request)));
        let claims = request.into_inner().claims;
        let result = self.sign_claims(&claims).await;
        let elapsed = started.elapsed().as_secs_f64();
        if let Some((time, requester)) = audited
            && let Err(stalled) = audit.record(sign_event(time, requester, &result)).await
        {
            // Blocking mode and the disk not keeping up: no unaudited signature goes out.
            self.metrics.answered("Sign", "unavailable", elapsed);
            return Err(Status::unavailable(stalled.to_string()));
        }
        match result {
            Ok((response, claims, _)) => {
                self.metrics.answered("Sign", "ok", elapsed);
                tracing::info!(
                    subject = %bounded(&claims.sub, LOGGED_ITEM_CHARS),
                    audiences = %JsonList(&claims.aud),
                    credential_id = %format!("JTI={}", bounded(&claims.jti, LOGGED_ITEM_CHARS)),
                    "signed a token for kube-apiserver"
                );
                Ok(Response::new(response))
            }
            Err(refusal) => {
                let (reason, message) = (refusal.label(), refusal.message());
                self.metrics.answered("Sign", reason, elapsed);
                tracing::warn!(reason, %message, "refused to sign for kube-apiserver");
                Err(Status::new(refusal.code(), message))
            }
        }
    }

    async fn fetch_keys(
        &self,
        _request: Request<FetchKeysRequest>,
    ) -> Result<Response<FetchKeysResponse>, Status> {
        let started = Instant::now();
        let published = self.issuer.published();
        let now = self.issuer.clock().now();
        let keys = published
            .keys()
            .verifying()
            .iter()
            .map(|key| Key {
                key_id: key.kid().to_owned(),
                key: key.spki_der().to_vec(),
                exclude_from_oidc_discovery: false,
            })
            .collect();
        let changed = self.issuer.keys_changed_at();
        let response = FetchKeysResponse {
            keys,
            data_timestamp: Some(prost_types::Timestamp {
                seconds: changed.as_second(),
                nanos: 0,
            }),
            refresh_hint_seconds: i64::from(published.max_age(now)),
        };
        self.metrics
            .answered("FetchKeys", "ok", started.elapsed().as_secs_f64());
        Ok(Response::new(response))
    }

    async fn metadata(
        &self,
        _request: Request<MetadataRequest>,
    ) -> Result<Response<MetadataResponse>, Status> {
        let started = Instant::now();
        let expiration = self.issuer.settings().expiration;
        let mut response = Response::new(MetadataResponse {
            max_token_expiration_seconds: expiration.longest_token_seconds(),
        });
        response.metadata_mut().insert(
            ORDINARY_MAX_METADATA,
            tonic::metadata::MetadataValue::from(expiration.longest_ordinary_token_seconds()),
        );
        self.metrics
            .answered("Metadata", "ok", started.elapsed().as_secs_f64());
        Ok(response)
    }
}

/// The caller of a Sign: the process at the other end of the socket, as the kernel says.
fn peer<T>(request: &Request<T>) -> Requester {
    let address = request
        .extensions()
        .get::<Peer>()
        .map(|peer| match peer.pid {
            Some(pid) => format!("unix:pid={pid},uid={}", peer.uid),
            None => format!("unix:uid={}", peer.uid),
        })
        .unwrap_or_default();
    Requester {
        authenticated_by: "unix-socket",
        client_address: address,
        ..Requester::default()
    }
}

/// The audit event of a Sign: for a signed token, whose it is (from the claims kube-apiserver
/// sent, which warrant checked and signed); for a refusal, why.
fn sign_event(
    time: jiff::Timestamp,
    requester: Requester,
    result: &Result<(SignJwtResponse, Claims, String), Refusal>,
) -> Event {
    let mut event = Event {
        kind: EventKind::Sign,
        time,
        request_id: String::new(),
        requester,
        decision: Decision::Refused,
        code: None,
        reason: String::new(),
        service_account: None,
        token: None,
        pod_certificate: None,
        answered: None,
    };
    match result {
        Ok((_, claims, kid)) => {
            event.decision = Decision::Signed;
            event.service_account = ServiceAccount::from_claims(claims);
            event.token = Some(TokenFacts::from_claims(claims, kid));
        }
        Err(refusal) => event.reason = refusal.message(),
    }
    event
}
