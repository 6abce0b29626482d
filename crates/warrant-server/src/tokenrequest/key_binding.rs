//! Which key a TokenRequest's token is bound to (RFC 7800 `cnf`): what the request's headers
//! ask for (a DPoP proof, or [`BINDING_HEADER`] for the client certificate), checked against
//! how the caller authenticated, and the binding a caller with a key-bound token of its own
//! always passes on.

use warrant_auth::{PeerCertificate, User, Via};
use warrant_token::{Confirmation, ProofRequest};

use crate::error::ApiError;
use crate::state::AppState;

/// The header a caller that authenticated with a client certificate sends to have its token
/// bound to that certificate (RFC 8705), with the value [`BIND_CLIENT_CERTIFICATE`].
///
/// A header rather than a field of the body: the body is kube's TokenRequest, which kubectl and
/// client-go write and kube-apiserver would drop an unknown field of (so a client could not
/// tell whether it was honoured); a DPoP proof already travels in a header; and `curl` or the
/// fleet plugin add one as easily. A request the server cannot bind as asked is refused, never
/// answered with an unbound token.
pub(crate) const BINDING_HEADER: &str = "warrant-token-binding";
/// The value of [`BINDING_HEADER`] that asks for a certificate-bound token.
pub(crate) const BIND_CLIENT_CERTIFICATE: &str = "client-certificate";

/// The binding a TokenRequest asks for, by its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// None.
    Nothing,
    /// A `DPoP` header: bound to the proof's key.
    Dpop,
    /// [`BINDING_HEADER`]`: client-certificate`: bound to the caller's certificate.
    Certificate,
}

/// The binding `headers` ask for, or a 400 for a header that asks for something else, twice,
/// or for two bindings.
fn asked_binding(headers: &http::HeaderMap) -> Result<Asked, ApiError> {
    let dpop = headers.contains_key(warrant_auth::authn::DPOP_HEADER);
    let mut asked = headers.get_all(BINDING_HEADER).iter();
    let certificate = match (asked.next(), asked.next()) {
        (None, _) => false,
        (Some(value), None)
            if value
                .as_bytes()
                .eq_ignore_ascii_case(BIND_CLIENT_CERTIFICATE.as_bytes()) =>
        {
            true
        }
        (Some(_), None) => {
            return Err(ApiError::bad_request(format!(
                "{BINDING_HEADER}: the one binding asked for this way is {BIND_CLIENT_CERTIFICATE:?} (a DPoP-bound token is asked for with a DPoP proof)"
            )));
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(format!(
                "{BINDING_HEADER} may be given once"
            )));
        }
    };
    match (dpop, certificate) {
        (false, false) => Ok(Asked::Nothing),
        (true, true) => Err(ApiError::bad_request(format!(
            "a token is bound to one key: send a DPoP proof or {BINDING_HEADER}: {BIND_CLIENT_CERTIFICATE}, not both"
        ))),
        (true, false) => Ok(Asked::Dpop),
        (false, true) => Ok(Asked::Certificate),
    }
}

/// The key a token is to be bound to (RFC 7800 `cnf`), or a 400 saying why it cannot be.
///
/// A caller that authenticated with a key-bound token of its own (`User::bound_to`, every
/// binding of it proven on this request) gets tokens with the same binding, whether it asks or
/// not: a token it minted unbound (or bound to another key) would work without the key that its
/// own token needs, and the binding would be for nothing. Asking for another binding is refused.
/// Otherwise:
/// - with a `DPoP` header, the thumbprint of the proof's key (RFC 9449), once the proof is
///   checked for this request: its method and its URI, `https://`, the host the caller
///   addressed (or `--dpop-htu-origin`) and the path (see `ProofChecker::target_uri`). The
///   proof is charged, in the replay cache, to the caller;
/// - with [`BINDING_HEADER`]`: client-certificate`, the thumbprint of the client certificate
///   the caller authenticated with on this connection (RFC 8705);
/// - with neither, none, as kube-apiserver's tokens.
pub(super) fn key_binding(
    state: &AppState,
    user: &User,
    peer: Option<&PeerCertificate>,
    request: &http::request::Parts,
) -> Result<Option<Confirmation>, ApiError> {
    let headers = &request.headers;
    let asked = asked_binding(headers)?;
    if let Some(own) = &user.bound_to {
        // Under the DPoP scheme the `DPoP` header is the proof of the caller's own key, checked
        // and spent by authentication; the connection's certificate is the one the caller's
        // token is bound to. Either asks for the binding the caller has.
        let same = match asked {
            Asked::Nothing => true,
            Asked::Dpop => own.jkt.is_some(),
            Asked::Certificate => own.x5t_s256.is_some(),
        };
        if !same {
            let (has, other) = match asked {
                Asked::Dpop => ("a client certificate (cnf.x5t#S256)", "a DPoP proof's key"),
                _ => ("a DPoP key (cnf.jkt)", "the client certificate"),
            };
            return Err(ApiError::bad_request(format!(
                "the token you authenticated with is bound to {has}: a token you ask for carries the same binding, and cannot be bound to {other} instead"
            )));
        }
        return Ok(Some(own.clone()));
    }
    match asked {
        Asked::Nothing => Ok(None),
        Asked::Certificate => {
            let thumbprint = match (&user.via, peer.and_then(PeerCertificate::thumbprint)) {
                (Via::ClientCertificate, Some(thumbprint)) => thumbprint,
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "{BINDING_HEADER}: {BIND_CLIENT_CERTIFICATE} needs a caller that authenticated with a client certificate on this connection"
                    )));
                }
            };
            Ok(Some(Confirmation::certificate(thumbprint)))
        }
        Asked::Dpop => {
            let proofs = &state.authenticator().proofs;
            let Some(target) = proofs.target_uri(&request.uri, headers) else {
                return Err(ApiError::bad_request(
                    "invalid DPoP proof: the request names no host (Host header), so the proof's htu cannot be checked",
                ));
            };
            let proof = ProofRequest {
                method: request.method.as_str(),
                uri: &target,
                access_token: None,
                bound_to: None,
            };
            let now = state.issuer().clock().now();
            match proofs.check(headers, &proof, &user.name, now) {
                Ok(proof) => Ok(proof.map(|proof| Confirmation::dpop(proof.jkt))),
                Err(why) if why.is_overload() => Err(ApiError::too_many_requests_saying(
                    warrant_auth::OVERLOAD_RETRY_AFTER_SECONDS,
                    why.to_string(),
                )),
                Err(why) => Err(ApiError::bad_request(format!("invalid DPoP proof: {why}"))),
            }
        }
    }
}
