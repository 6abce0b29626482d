//! DPoP proofs (RFC 9449) as warrant's API receives them: the `DPoP` header of a request, checked
//! against the request's method and URI, the time, and a replay cache shared by every endpoint.
//!
//! What this trusts: the proof's own signature (see `warrant_token::verify_proof`), and the
//! request's `Host` (or HTTP/2 `:authority`) for the URI the proof must name. The host is the
//! caller's choice, not the operator's, so `htu` ties a proof to a path and a method on
//! whatever host the caller addressed; it does not stop a proof made for another server at the
//! same path from being presented here. That proof still only works for its key, within its
//! window, once, and (for a token) with the token whose hash it carries. warrant serves only
//! TLS, so the scheme is always `https`.
//!
//! Cost: the proof's verification (one signature, two SHA-256s) and one cache insert. The replay
//! cache holds at most [`DEFAULT_REPLAY_CAPACITY`] entries of about 150 bytes each (a thumbprint
//! and a `jti` of at most `MAX_JTI_BYTES`), each for the proof window.

use http::{HeaderMap, Uri};
use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use warrant_cache::ExpiringCache;
use warrant_token::{
    DEFAULT_PROOF_WINDOW_SECONDS, DpopError, ProofRequest, VerifiedProof, verify_proof,
};

/// The header a proof travels in.
pub const DPOP_HEADER: &str = "dpop";

/// How many proofs are remembered at most. At 60 s windows this is over 1,600 proofs a second;
/// when full, the cache evicts some entries, and a replay of an evicted proof within its window
/// would pass (the token it uses is still bound to the key, so the replayer gains nothing the
/// original request did not have).
pub const DEFAULT_REPLAY_CAPACITY: u64 = 100_000;

/// Checks proofs and remembers them until they are stale, so each is used once.
pub struct ProofChecker {
    window_seconds: i64,
    seen: ExpiringCache<String, ()>,
    results: Family<ProofLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProofLabels {
    result: &'static str,
}

impl std::fmt::Debug for ProofChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProofChecker")
            .field("window_seconds", &self.window_seconds)
            .field("seen", &self.seen)
            .finish()
    }
}

impl Default for ProofChecker {
    fn default() -> Self {
        Self::new(DEFAULT_PROOF_WINDOW_SECONDS, DEFAULT_REPLAY_CAPACITY)
    }
}

impl ProofChecker {
    /// A checker accepting proofs whose `iat` is within `window_seconds` of now, remembering at
    /// most `capacity` of them.
    pub fn new(window_seconds: i64, capacity: u64) -> Self {
        ProofChecker {
            window_seconds,
            seen: ExpiringCache::new(capacity),
            results: Family::default(),
        }
    }

    /// Registers `warrant_dpop_proofs_total{result}`: `accepted`, `replayed` (a proof seen
    /// before within its window) or `invalid` (every other refusal).
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_dpop_proofs",
            "DPoP proofs checked (TokenRequest, a key-bound token presented, a review with a proof), by result",
            self.results.clone(),
        );
    }

    fn count(&self, result: &'static str) {
        self.results.get_or_create(&ProofLabels { result }).inc();
    }

    /// The proof in `headers`, if there is one, checked for `request` at `now` and recorded:
    /// `Ok(None)` without a `DPoP` header; an error for two of them, a bad proof, or one seen
    /// before within its window.
    pub fn check(
        &self,
        headers: &HeaderMap,
        request: &ProofRequest<'_>,
        now: Timestamp,
    ) -> Result<Option<VerifiedProof>, DpopError> {
        let checked = self.check_uncounted(headers, request, now);
        match &checked {
            Ok(None) => {}
            Ok(Some(_)) => self.count("accepted"),
            Err(DpopError::Replayed) => self.count("replayed"),
            Err(_) => self.count("invalid"),
        }
        checked
    }

    fn check_uncounted(
        &self,
        headers: &HeaderMap,
        request: &ProofRequest<'_>,
        now: Timestamp,
    ) -> Result<Option<VerifiedProof>, DpopError> {
        let mut proofs = headers.get_all(DPOP_HEADER).iter();
        let Some(proof) = proofs.next() else {
            return Ok(None);
        };
        if proofs.next().is_some() {
            return Err(DpopError::NotOne);
        }
        let proof = proof.to_str().map_err(|_| DpopError::Malformed)?;
        if proof.contains(',') {
            // Two proofs folded into one header line.
            return Err(DpopError::NotOne);
        }
        let verified = verify_proof(proof.trim(), request, now, self.window_seconds)?;
        let fresh = self.seen.insert_if_absent_until(
            verified.replay_key(),
            (),
            now,
            verified.replay_until(self.window_seconds),
        );
        if !fresh {
            return Err(DpopError::Replayed);
        }
        Ok(Some(verified))
    }
}

/// The absolute URI a request was sent to, as a DPoP proof's `htu` must name it:
/// `https://` + the authority the caller addressed (HTTP/2's `:authority`, else the `Host`
/// header) + the path. `None` if the request names no host.
pub fn request_uri(uri: &Uri, headers: &HeaderMap) -> Option<String> {
    let authority = match uri.authority() {
        Some(authority) => authority.as_str().to_owned(),
        None => headers
            .get(http::header::HOST)?
            .to_str()
            .ok()
            .filter(|host| !host.is_empty())?
            .to_owned(),
    };
    Some(format!("https://{authority}{}", uri.path()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000;
    const URI: &str = "https://warrant.example/api/v1/namespaces/ns/serviceaccounts/app/token";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// A proof made with aws-lc-rs directly, not warrant's key code.
    fn proof(key: &EcdsaKeyPair, jti: &str, iat: i64) -> String {
        let point = key.public_key().as_ref();
        let (x, y) = point[1..].split_at(32);
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": {"kty": "EC", "crv": "P-256", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)}});
        let claims = json!({"jti": jti, "htm": "POST", "htu": URI, "iat": iat});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
    }

    fn headers(proofs: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for proof in proofs {
            headers.append(DPOP_HEADER, proof.parse().unwrap());
        }
        headers
    }

    const REQUEST: ProofRequest<'static> = ProofRequest {
        method: "POST",
        uri: URI,
        access_token: None,
        bound_to: None,
    };

    #[test]
    fn a_proof_is_accepted_once_within_its_window() {
        let checker = ProofChecker::default();
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let first = proof(&key, "one", NOW);
        assert!(
            checker
                .check(&headers(&[&first]), &REQUEST, at(NOW))
                .unwrap()
                .is_some()
        );
        assert_eq!(
            checker.check(&headers(&[&first]), &REQUEST, at(NOW + 59)),
            Err(DpopError::Replayed)
        );
        // Another jti from the same key, and the same jti from another key, are new proofs.
        let second = proof(&key, "two", NOW);
        assert!(
            checker
                .check(&headers(&[&second]), &REQUEST, at(NOW))
                .is_ok()
        );
        let other = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        assert!(
            checker
                .check(&headers(&[&proof(&other, "one", NOW)]), &REQUEST, at(NOW))
                .is_ok()
        );
        // Once the window has passed, the proof is stale, not replayed.
        assert_eq!(
            checker.check(&headers(&[&first]), &REQUEST, at(NOW + 61)),
            Err(DpopError::Stale(60))
        );
        // A request without a proof is not a proof checked.
        assert_eq!(checker.check(&headers(&[]), &REQUEST, at(NOW)), Ok(None));
        let counted = |result| checker.results.get_or_create(&ProofLabels { result }).get();
        assert_eq!(
            (counted("accepted"), counted("replayed"), counted("invalid")),
            (3, 1, 1)
        );
    }

    /// A proof that fails a check is not remembered: the honest retry is not called a replay.
    #[test]
    fn a_refused_proof_is_not_recorded() {
        let checker = ProofChecker::default();
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let good = proof(&key, "one", NOW);
        let wrong_method = ProofRequest {
            method: "GET",
            ..REQUEST
        };
        assert_eq!(
            checker.check(&headers(&[&good]), &wrong_method, at(NOW)),
            Err(DpopError::Method)
        );
        assert!(checker.check(&headers(&[&good]), &REQUEST, at(NOW)).is_ok());
    }

    #[test]
    fn none_or_exactly_one_header() {
        let checker = ProofChecker::default();
        assert_eq!(checker.check(&headers(&[]), &REQUEST, at(NOW)), Ok(None));
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let (a, b) = (proof(&key, "a", NOW), proof(&key, "b", NOW));
        assert_eq!(
            checker.check(&headers(&[&a, &b]), &REQUEST, at(NOW)),
            Err(DpopError::NotOne)
        );
        assert_eq!(
            checker.check(&headers(&[&format!("{a}, {b}")]), &REQUEST, at(NOW)),
            Err(DpopError::NotOne)
        );
    }

    #[test]
    fn the_request_uri_is_https_host_and_path() {
        let mut with_host = HeaderMap::new();
        with_host.insert(http::header::HOST, "warrant.example:8443".parse().unwrap());
        let path: Uri = "/api/v1/x?watch=1".parse().unwrap();
        assert_eq!(
            request_uri(&path, &with_host).as_deref(),
            Some("https://warrant.example:8443/api/v1/x")
        );
        let absolute: Uri = "https://h2.example/api/v1/x".parse().unwrap();
        assert_eq!(
            request_uri(&absolute, &with_host).as_deref(),
            Some("https://h2.example/api/v1/x")
        );
        assert_eq!(request_uri(&path, &HeaderMap::new()), None);
    }
}
