//! Which token already in a file the agent keeps when it starts (a restarted agent need not
//! ask again): only one that verifies against warrant's keys. The file is in a volume the pod's
//! containers share, so what it holds at start may have been written by anything that could
//! write there, not by an earlier run of the agent: a token that is unsigned, signed by another
//! key, issued by another issuer, for another audience or another pod, or expired, is not
//! kept, and the file is emptied so that nothing reads it while a fresh token is asked for.
//!
//! What this trusts: warrant's discovery document (its issuer) and JWKS, fetched from warrant
//! itself at the URL and with the CA the agent trusts for its token requests (two GETs, once
//! per start, and only when a file holds something). If they cannot be fetched, a token found
//! cannot be checked: it is not kept either (the agent asks for a new one at once), but the
//! file is left as it is, since it may well be warrant's, and is replaced as soon as warrant
//! answers.

use jiff::Timestamp;
use serde_json::Value;
use warrant_token::{BoundObjectReference, Verifier, VerifyingKey};

use super::{AgentError, Held};
use crate::request;

/// warrant's issuer and keys, as warrant publishes them: what a token found in a file must
/// verify against.
pub(super) struct Published {
    verifier: Verifier,
}

impl Published {
    /// Fetches the discovery document and the JWKS from warrant with `client`, whose requests
    /// go to warrant's URL (`warrant`, for messages). The JWKS is read from warrant's own path,
    /// not the document's `jwks_uri` (which may name a bucket): warrant is what the agent trusts.
    pub(super) async fn fetch(client: &::kube::Client, warrant: &str) -> Result<Self, AgentError> {
        let discovery = get(client, warrant, warrant_proto::DISCOVERY_PATH).await?;
        let issuer = discovery
            .get("issuer")
            .and_then(Value::as_str)
            .filter(|issuer| !issuer.is_empty())
            .ok_or_else(|| format!("warrant's discovery document at {warrant} names no issuer"))?
            .to_owned();
        let jwks = get(client, warrant, warrant_proto::JWKS_PATH).await?;
        // A key warrant publishes that this build cannot read cannot have signed a token it
        // verifies: skipped.
        let keys: Vec<VerifyingKey> = jwks
            .get("keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|jwk| VerifyingKey::from_jwk(jwk).ok())
            .collect();
        if keys.is_empty() {
            return Err(
                format!("warrant's JWKS at {warrant} holds no key this agent can read").into(),
            );
        }
        Ok(Published {
            verifier: Verifier::new(vec![issuer], Vec::new(), keys),
        })
    }

    /// What the agent knows of `token` if it may keep it: signed by one of warrant's keys,
    /// warrant's issuer, for `audience`, within its time at `now`, and bound to `pod`. Else why
    /// not (no token text in it).
    pub(super) fn adoptable(
        &self,
        token: &str,
        audience: &str,
        pod: &BoundObjectReference,
        now: Timestamp,
    ) -> Result<Held, String> {
        let verified = self
            .verifier
            .verify(token, &[audience.to_owned()], now)
            .map_err(|e| match e {
                warrant_token::TokenError::NotMine => {
                    "not a token warrant issued (another issuer, or not a JWT)".to_owned()
                }
                e => e.to_string(),
            })?;
        let claims = &verified.claims;
        match claims.kubernetes.pod.as_ref() {
            Some(bound) if bound.name == pod.name && bound.uid == pod.uid => {}
            _ => return Err(format!("not bound to this pod ({})", pod.name)),
        }
        let second = |s: Option<i64>| s.and_then(|s| Timestamp::from_second(s).ok());
        match (second(claims.iat), second(claims.exp)) {
            (Some(issued_at), Some(expires)) => Ok(Held { issued_at, expires }),
            _ => Err("no issue or expiry time".to_owned()),
        }
    }
}

/// A JSON document from warrant at `path`, within the agent's request timeout.
async fn get(client: &::kube::Client, warrant: &str, path: &str) -> Result<Value, AgentError> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
        .map_err(|e| format!("cannot build the request for {path}: {e}"))?;
    let text = tokio::time::timeout(request::REQUEST_TIMEOUT, client.request_text(request))
        .await
        .map_err(|_| {
            format!(
                "warrant at {warrant} did not answer {path} within {}s",
                request::REQUEST_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("warrant at {warrant} did not serve {path}: {e}"))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("warrant's {path} at {warrant} is not JSON: {e}").into())
}
