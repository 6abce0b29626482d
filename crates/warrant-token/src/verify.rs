//! Token verification, step for step as kube-apiserver's service-account authenticator does it
//! (spec §3.1): the "not mine" pre-filter, key choice by `kid`, signature, issuer, audience, and
//! the time claims with 60 s of leeway. Whether the service account and bound object still exist
//! is the caller's to check next (it needs the object store); the claims it needs are in
//! [`VerifiedToken`].
//!
//! Cost: one base64 decode and one JSON parse of the payload, one of the header, and one
//! signature verification per candidate key (normally exactly one, chosen by `kid`).

use std::sync::Arc;

use jiff::Timestamp;
use serde::Deserialize;

use crate::claims::Claims;
use crate::error::TokenError;
use crate::jws;
use crate::keys::{Algorithm, VerifyingKey};
use crate::userinfo::UserInfo;

/// Tokens longer than this are refused unread, as "not mine". Real tokens are about 1 KiB.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The most audiences a TokenRequest may ask for and a TokenReview may name. kube-apiserver sets
/// none; a bound keeps a request's cost and an issued token's size in check (real requests name
/// one to a handful).
pub const MAX_AUDIENCES: usize = 100;

/// The longest audience, in bytes (a URL or a name; real ones are well under this).
pub const MAX_AUDIENCE_BYTES: usize = 1024;

/// Why a list of audiences is over the bounds, for the caller's error message; `None` if it is
/// within them.
pub fn audiences_over_limits(audiences: &[String]) -> Option<String> {
    if audiences.len() > MAX_AUDIENCES {
        return Some(format!(
            "{} audiences, more than the {MAX_AUDIENCES} allowed",
            audiences.len()
        ));
    }
    audiences
        .iter()
        .find(|a| a.len() > MAX_AUDIENCE_BYTES)
        .map(|a| {
            format!(
                "an audience of {} bytes, longer than the {MAX_AUDIENCE_BYTES} allowed",
                a.len()
            )
        })
}

/// Clock skew tolerated on `exp`, `nbf` and `iat` (go-jose's `DefaultLeeway`), and the grace
/// after an object's deletion timestamp before its tokens stop working.
pub const LEEWAY_SECONDS: i64 = 60;

/// Verifies tokens for one set of issuers and API audiences against a set of public keys.
/// Cheap to clone; build a new one when the keys change.
#[derive(Debug, Clone)]
pub struct Verifier {
    issuers: Arc<[String]>,
    api_audiences: Arc<[String]>,
    keys: Arc<[VerifyingKey]>,
    /// The kids of revoked keys, named in the error for their tokens.
    revoked: Arc<[String]>,
}

/// A token whose signature, issuer, audience and times are valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// Its claims, shared with whatever cached them (see [`Verifier::verify_signature`]).
    pub claims: Arc<Claims>,
    /// The audiences it was accepted for: the requested audiences that the token carries, in
    /// the requested order, duplicates kept (kube's `Audiences.Intersect`).
    pub audiences: Vec<String>,
}

impl VerifiedToken {
    /// The user the token stands for.
    pub fn user_info(&self) -> UserInfo {
        UserInfo::from_claims(&self.claims)
    }

    /// True if the token was extended and is being used after its `warnafter`: the client
    /// should have refreshed it. Counted, never rejected.
    pub fn is_stale(&self, now: Timestamp) -> bool {
        self.claims
            .kubernetes
            .warnafter
            .is_some_and(|w| w != 0 && now.as_second() > w)
    }
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct IssuerOnly {
    #[serde(default)]
    iss: Option<String>,
}

impl Verifier {
    /// A verifier accepting tokens from any of `issuers`, checking audiences against
    /// `api_audiences` when the caller requests none, and trying `keys` in order.
    pub fn new(issuers: Vec<String>, api_audiences: Vec<String>, keys: Vec<VerifyingKey>) -> Self {
        Verifier {
            issuers: issuers.into(),
            api_audiences: api_audiences.into(),
            keys: keys.into(),
            revoked: Arc::new([]),
        }
    }

    /// The same verifier, naming `revoked` kids in the error for tokens that carry one
    /// ([`TokenError::Revoked`] instead of [`TokenError::NoKeysFound`]). A revoked key is not
    /// among the keys, so its tokens fail either way; this says why.
    pub fn with_revoked(mut self, revoked: Vec<String>) -> Self {
        self.revoked = revoked.into();
        self
    }

    /// The accepted issuers; the first is the one new tokens carry.
    pub fn issuers(&self) -> &[String] {
        &self.issuers
    }

    /// The API audiences (`--api-audiences`).
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// The verification keys.
    pub fn keys(&self) -> &[VerifyingKey] {
        &self.keys
    }

    /// Verifies `token` for the `requested` audiences (empty means the API audiences) at `now`.
    ///
    /// Returns [`TokenError::NotMine`] for anything that is not recognisably one of our tokens;
    /// every other error means "ours, and invalid", with kube-apiserver's message.
    pub fn verify(
        &self,
        token: &str,
        requested: &[String],
        now: Timestamp,
    ) -> Result<VerifiedToken, TokenError> {
        let claims = self.verify_signature(token)?;
        self.validate(Arc::new(claims), requested, now)
    }

    /// The part of [`verify`](Self::verify) that depends only on the token and these keys: the
    /// "not mine" pre-filter, key choice, signature and issuer. Its result for a token never
    /// changes while the keys do not, so a caller may cache it (keyed by the token, for no
    /// longer than the token's `exp` plus leeway) and run only [`validate`](Self::validate) on
    /// a repeat.
    pub fn verify_signature(&self, token: &str) -> Result<Claims, TokenError> {
        // 1. Pre-filter: is this plausibly ours? (kube's hasCorrectIssuer, before any crypto.)
        if token.len() > MAX_TOKEN_BYTES || token.trim_start().starts_with('{') {
            return Err(TokenError::NotMine);
        }
        let parts = jws::split(token).ok_or(TokenError::NotMine)?;
        let payload = jws::decode(parts.payload).ok_or(TokenError::NotMine)?;
        let claims = serde_json::from_slice::<Claims>(&payload);
        let issuer = match &claims {
            Ok(c) => Some(c.iss.clone()),
            Err(_) => serde_json::from_slice::<IssuerOnly>(&payload)
                .ok()
                .and_then(|i| i.iss),
        };
        if !issuer.is_some_and(|iss| self.issuers.contains(&iss)) {
            return Err(TokenError::NotMine);
        }

        // 2. Parse the JWS header and signature; failure still means "not a JWS we can read".
        let header: Header = jws::decode(parts.header)
            .and_then(|h| serde_json::from_slice(&h).ok())
            .ok_or(TokenError::NotMine)?;
        let signature = jws::decode(parts.signature).ok_or(TokenError::NotMine)?;

        // 3. Candidate keys: those with the token's kid, or all of them if it has none.
        let kid = header.kid.as_deref().unwrap_or_default();
        let mut candidates = self
            .keys
            .iter()
            .filter(|k| kid.is_empty() || k.kid() == kid)
            .peekable();
        if candidates.peek().is_none() {
            if !kid.is_empty() && self.revoked.iter().any(|r| r == kid) {
                return Err(TokenError::Revoked(kid.to_owned()));
            }
            return Err(TokenError::NoKeysFound);
        }

        // 4. Signature. `none`, HS*, PS*, an alg that does not match the key's type, and
        //    critical header extensions are refused before any crypto runs.
        let alg = header.alg.as_deref().and_then(Algorithm::from_name);
        let acceptable =
            |key: &&VerifyingKey| header.crit.is_none() && alg == Some(key.algorithm());
        let verified = candidates
            .filter(acceptable)
            .any(|key| key.verify(parts.signing_input.as_bytes(), &signature));
        if !verified {
            return Err(TokenError::Signature);
        }
        let claims = claims.map_err(|_| TokenError::MalformedClaims)?;

        // 5. Issuer, now that it is signed.
        if !self.issuers.contains(&claims.iss) {
            return Err(TokenError::Issuer(claims.iss));
        }
        Ok(claims)
    }

    /// The rest of [`verify`](Self::verify), for claims whose signature is verified: audience,
    /// then time.
    pub fn validate(
        &self,
        claims: Arc<Claims>,
        requested: &[String],
        now: Timestamp,
    ) -> Result<VerifiedToken, TokenError> {
        // 6. Audience.
        let audiences = self.audiences(&claims.aud, requested)?;

        // 7. Time, in go-jose's order, then warrant's own requirement of an expiry.
        check_times(&claims, now)?;

        Ok(VerifiedToken { claims, audiences })
    }

    /// kube's audience rule: the requested audiences (or the API audiences) that the token has
    /// (a token without `aud` counts as having the API audiences), in the requested order; none
    /// is an error. (kube skips the check when it has no API audiences at all; warrant never
    /// runs without them, and a verifier built without any accepts no token rather than every
    /// one.) Linear in the two lists: the token's audiences are looked up in a set.
    fn audiences(&self, token: &[String], requested: &[String]) -> Result<Vec<String>, TokenError> {
        let token = if token.is_empty() {
            &self.api_audiences[..]
        } else {
            token
        };
        let requested = if requested.is_empty() {
            &self.api_audiences[..]
        } else {
            requested
        };
        let has: std::collections::HashSet<&str> = token.iter().map(String::as_str).collect();
        let accepted: Vec<String> = requested
            .iter()
            .filter(|a| has.contains(a.as_str()))
            .cloned()
            .collect();
        if accepted.is_empty() {
            return Err(TokenError::Audience {
                token: token.to_vec(),
                target: requested.to_vec(),
            });
        }
        Ok(accepted)
    }
}

/// `nbf`, `exp` and `iat`, each checked only when present, with [`LEEWAY_SECONDS`], in the
/// order go-jose checks them; then the `exp` that warrant requires. Comparisons are exact to the
/// nanosecond, as go-jose compares `time.Time` values: an `exp` of exactly now−60 s is accepted.
fn check_times(claims: &Claims, now: Timestamp) -> Result<(), TokenError> {
    let now = now.as_nanosecond();
    let at = |seconds: i64| i128::from(seconds) * 1_000_000_000;
    let leeway = at(LEEWAY_SECONDS);
    if claims.nbf.is_some_and(|nbf| now + leeway < at(nbf)) {
        return Err(TokenError::NotValidYet);
    }
    if claims.exp.is_some_and(|exp| now - leeway > at(exp)) {
        return Err(TokenError::Expired);
    }
    if claims.iat.is_some_and(|iat| now + leeway < at(iat)) {
        return Err(TokenError::IssuedInTheFuture);
    }
    if claims.exp.is_none() {
        return Err(TokenError::MissingExpiry);
    }
    Ok(())
}
