//! DPoP proofs (RFC 9449) as warrant's API receives them: the `DPoP` header of a request, checked
//! against the request's method and URI, the time, and a replay cache shared by every endpoint.
//!
//! What this trusts: the proof's own signature (see `warrant_token::verify_proof`), and for the
//! URI the proof must name, the operator's `--dpop-htu-origin` if set, else the request's
//! `Host` (or HTTP/2 `:authority`). The host is the caller's choice, not the operator's, so
//! without an origin `htu` ties a proof to a path and a method on whatever host the caller
//! addressed; it does not stop a proof made for another server at the same path from being
//! presented here. That proof still only works for its key, within its window, once, and (for a
//! token) with the token whose hash it carries. With an origin, only proofs made for it pass,
//! and a proxy in front (kube-apiserver's aggregator rewrites `Host`) does not matter. warrant
//! serves only TLS, so the scheme is always `https`.
//!
//! Each proof that passes is charged to a caller, the owner of its replay entry: the service
//! account a key-bound token names (the token's holder makes the proofs, whoever forwards them
//! for review), or the user asking for a new token bound to the proof's key. See
//! [`super::replay`] for who can fill the cache and what happens then: never a replay.
//!
//! Cost: the proof's verification (one signature, two SHA-256s) and one replay-cache insert
//! (a SHA-256 and a mutex). The replay cache holds at most [`DEFAULT_REPLAY_CAPACITY`] entries of
//! about 150 bytes each, each until its proof's window ends.

use http::{HeaderMap, Uri};
use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use warrant_token::{
    DEFAULT_PROOF_WINDOW_SECONDS, DpopError, ProofRequest, VerifiedProof, verify_proof,
};

use super::replay::{Recorded, ReplayCache};

/// The header a proof travels in.
pub const DPOP_HEADER: &str = "dpop";

/// How many proofs are remembered at most. At 60 s windows this is over 1,600 proofs a second.
/// When full, new proofs are refused (429) until older ones expire; none is forgotten early.
pub const DEFAULT_REPLAY_CAPACITY: u64 = 100_000;

/// Checks proofs and remembers them until they are stale, so each is used once.
pub struct ProofChecker {
    window_seconds: i64,
    /// `https://host[:port]` every proof's `htu` must start with; `None`: the request's host.
    origin: Option<String>,
    seen: ReplayCache,
    results: Family<ProofLabels, Counter>,
    /// How many proofs the replay cache holds.
    remembered: Gauge,
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
    /// most `capacity` of them (at least one), a tenth of them per caller.
    pub fn new(window_seconds: i64, capacity: u64) -> Self {
        ProofChecker {
            window_seconds,
            origin: None,
            seen: ReplayCache::new(usize::try_from(capacity).unwrap_or(usize::MAX)),
            results: Family::default(),
            remembered: Gauge::default(),
        }
    }

    /// Makes every proof name `origin` (`https://host[:port]`, as clients address warrant from
    /// outside) in its `htu`, whatever `Host` a request carries. Refuses anything but an
    /// `https` origin without path, query or user information.
    pub fn with_origin(mut self, origin: &str) -> Result<Self, OriginError> {
        self.origin = Some(parse_origin(origin)?);
        Ok(self)
    }

    /// The absolute URI a request's proof must name in `htu`: the configured origin and the
    /// request's path, or without one, [`request_uri`]. `None` if neither names a host.
    pub fn target_uri(&self, uri: &Uri, headers: &HeaderMap) -> Option<String> {
        match &self.origin {
            Some(origin) => Some(format!("{origin}{}", uri.path())),
            None => request_uri(uri, headers),
        }
    }

    /// Registers `warrant_dpop_proofs_total{result}`: `accepted`, `replayed` (a proof seen
    /// before within its window), `cache_full` and `over_share` (a good proof not accepted
    /// because the replay cache, or the caller's share of it, is full) or `invalid` (every other
    /// refusal); and `warrant_dpop_replay_cache_entries`, the proofs remembered.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_dpop_proofs",
            "DPoP proofs checked (TokenRequest, a key-bound token presented, a review with a proof), by result",
            self.results.clone(),
        );
        registry.register(
            "warrant_dpop_replay_cache_entries",
            "DPoP proofs remembered until their window ends, so each is accepted once (at most --dpop-replay-cache-size)",
            self.remembered.clone(),
        );
    }

    /// The proof in `headers`, if there is one, checked for `request` at `now` and recorded,
    /// charged to `owner`: `Ok(None)` without a `DPoP` header; an error for two of them, a bad
    /// proof, one seen before within its window, or one that cannot be remembered now.
    pub fn check(
        &self,
        headers: &HeaderMap,
        request: &ProofRequest<'_>,
        owner: &str,
        now: Timestamp,
    ) -> Result<Option<VerifiedProof>, DpopError> {
        let mut proofs = headers.get_all(DPOP_HEADER).iter();
        let Some(proof) = proofs.next() else {
            return Ok(None);
        };
        let checked = if proofs.next().is_some() {
            Err(DpopError::NotOne)
        } else {
            match proof.to_str() {
                // Two proofs folded into one header line.
                Ok(proof) if proof.contains(',') => Err(DpopError::NotOne),
                Ok(proof) => self.verify_once(proof.trim(), request, owner, now),
                Err(_) => Err(DpopError::Malformed),
            }
        };
        self.count(&checked);
        checked.map(Some)
    }

    /// `proof` (a proof a relying party received and passes on in a review) checked for
    /// `request` at `now` and recorded, charged to `owner`, as [`check`](Self::check) does a
    /// header's.
    pub fn check_proof(
        &self,
        proof: &str,
        request: &ProofRequest<'_>,
        owner: &str,
        now: Timestamp,
    ) -> Result<VerifiedProof, DpopError> {
        let checked = self.verify_once(proof, request, owner, now);
        self.count(&checked);
        checked
    }

    fn count(&self, checked: &Result<VerifiedProof, DpopError>) {
        let result = match checked {
            Ok(_) => "accepted",
            Err(DpopError::Replayed) => "replayed",
            Err(DpopError::ReplayCacheFull) => "cache_full",
            Err(DpopError::ReplayShareFull) => "over_share",
            Err(_) => "invalid",
        };
        self.results.get_or_create(&ProofLabels { result }).inc();
        self.remembered
            .set(i64::try_from(self.seen.len()).unwrap_or(i64::MAX));
    }

    /// Verifies `proof` and records it, charged to `owner`, until its window ends; a proof seen
    /// before is a replay, and one that cannot be remembered is not accepted.
    fn verify_once(
        &self,
        proof: &str,
        request: &ProofRequest<'_>,
        owner: &str,
        now: Timestamp,
    ) -> Result<VerifiedProof, DpopError> {
        let verified = verify_proof(proof, request, now, self.window_seconds)?;
        let until = verified.replay_until(self.window_seconds);
        match self.seen.record(&verified.replay_key(), owner, now, until) {
            Recorded::Fresh => Ok(verified),
            Recorded::Seen => Err(DpopError::Replayed),
            // verify_proof accepts only before the window's end: not reached, and never "fresh".
            Recorded::Expired => Err(DpopError::Stale(self.window_seconds)),
            Recorded::OverShare => Err(DpopError::ReplayShareFull),
            Recorded::Full => Err(DpopError::ReplayCacheFull),
        }
    }
}

/// `origin` as `https://host[:port]` (host in lower case), if it is an `https` origin without
/// path, query or user information.
pub fn parse_origin(origin: &str) -> Result<String, OriginError> {
    let uri: Uri = origin.parse().map_err(|_| OriginError::NotAUri)?;
    let authority = match (uri.scheme_str(), uri.authority()) {
        (Some("https"), Some(authority)) => authority,
        _ => return Err(OriginError::NotHttps),
    };
    if authority.as_str().contains('@') || uri.query().is_some() || !matches!(uri.path(), "" | "/")
    {
        return Err(OriginError::NotAnOrigin);
    }
    Ok(format!(
        "https://{}",
        authority.as_str().to_ascii_lowercase()
    ))
}

/// Why `--dpop-htu-origin` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// Not a URI at all.
    #[error("not a URI")]
    NotAUri,
    /// Not `https://` with a host.
    #[error("must be https:// with a host (warrant serves only TLS)")]
    NotHttps,
    /// A path, query or user information.
    #[error("must be an origin, https://host[:port], without path, query or user information")]
    NotAnOrigin,
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

    use serde_json::json;
    use warrant_testkit::DpopHolder;

    use super::*;

    const NOW: i64 = 1_800_000_000;
    const URI: &str = "https://warrant.example/api/v1/namespaces/ns/serviceaccounts/app/token";

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// A proof by warrant-testkit's holder (aws-lc-rs directly, not warrant's key code).
    fn proof(key: &DpopHolder, jti: &str, iat: i64) -> String {
        key.proof(&json!({"jti": jti, "htm": "POST", "htu": URI, "iat": iat}))
    }

    fn headers(proofs: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for proof in proofs {
            headers.append(DPOP_HEADER, proof.parse().unwrap());
        }
        headers
    }

    const OWNER: &str = "system:serviceaccount:ns:app";

    const REQUEST: ProofRequest<'static> = ProofRequest {
        method: "POST",
        uri: URI,
        access_token: None,
        bound_to: None,
    };

    #[test]
    fn a_proof_is_accepted_once_within_its_window() {
        let checker = ProofChecker::default();
        let key = DpopHolder::new();
        let first = proof(&key, "one", NOW);
        assert!(
            checker
                .check(&headers(&[&first]), &REQUEST, OWNER, at(NOW))
                .unwrap()
                .is_some()
        );
        assert_eq!(
            checker.check(&headers(&[&first]), &REQUEST, OWNER, at(NOW + 59)),
            Err(DpopError::Replayed)
        );
        // Another jti from the same key, and the same jti from another key, are new proofs.
        let second = proof(&key, "two", NOW);
        assert!(
            checker
                .check(&headers(&[&second]), &REQUEST, OWNER, at(NOW))
                .is_ok()
        );
        let other = DpopHolder::new();
        assert!(
            checker
                .check(
                    &headers(&[&proof(&other, "one", NOW)]),
                    &REQUEST,
                    OWNER,
                    at(NOW)
                )
                .is_ok()
        );
        // Once the window has passed, the proof is stale, not replayed.
        assert_eq!(
            checker.check(&headers(&[&first]), &REQUEST, OWNER, at(NOW + 61)),
            Err(DpopError::Stale(60))
        );
        // A request without a proof is not a proof checked.
        assert_eq!(
            checker.check(&headers(&[]), &REQUEST, OWNER, at(NOW)),
            Ok(None)
        );
        let counted = |result| checker.results.get_or_create(&ProofLabels { result }).get();
        assert_eq!(
            (counted("accepted"), counted("replayed"), counted("invalid")),
            (3, 1, 1)
        );
    }

    /// Stepping the clock across the end of a proof's window (iat + 60 s, to the quarter
    /// second): at every instant the proof is accepted at most once. Comparing whole seconds once
    /// accepted it until iat + 61 while its entry expired at iat + 60, so in that last second
    /// every replay passed.
    #[test]
    fn a_proof_is_accepted_at_most_once_across_the_end_of_its_window() {
        let key = DpopHolder::new();
        let proof = proof(&key, "edge", NOW);
        for quarter in 236..=244 {
            let checker = ProofChecker::default();
            let now = at(NOW) + jiff::SignedDuration::from_millis(quarter * 250);
            let first = checker.check(&headers(&[&proof]), &REQUEST, OWNER, now);
            let again = checker.check(&headers(&[&proof]), &REQUEST, OWNER, now);
            match first {
                Ok(Some(_)) => assert_eq!(again, Err(DpopError::Replayed), "at {now}"),
                _ => assert_eq!(first, Err(DpopError::Stale(60)), "at {now}"),
            }
            assert_eq!(first.is_ok(), quarter < 240, "at {now}");
        }
    }

    /// The attack of issue 31: a caller floods the cache with fresh proofs of its own, then
    /// replays a proof it captured. Nothing is forgotten to make room: the flood is refused
    /// (past the caller's share, then past the whole cache, each counted), and the captured
    /// proof stays a replay.
    #[test]
    fn a_flood_of_fresh_proofs_never_lets_a_captured_one_replay() {
        let checker = ProofChecker::new(60, 100);
        let victim = DpopHolder::new();
        let captured = proof(&victim, "victim", NOW);
        assert!(
            checker
                .check(&headers(&[&captured]), &REQUEST, "victim", at(NOW))
                .is_ok()
        );
        let flooder = DpopHolder::new();
        let mut refused = (0, 0);
        for i in 0..300 {
            // Thirty callers, ten proofs each: more than the cache holds.
            let owner = format!("flooder-{}", i % 30);
            match checker.check(
                &headers(&[&proof(&flooder, &format!("f{i}"), NOW)]),
                &REQUEST,
                &owner,
                at(NOW + 1),
            ) {
                Ok(_) => {}
                Err(DpopError::ReplayShareFull) => refused.0 += 1,
                Err(DpopError::ReplayCacheFull) => refused.1 += 1,
                Err(other) => panic!("{other}"),
            }
        }
        assert_eq!(
            refused,
            (0, 201),
            "99 accepted besides the victim's, then full"
        );
        assert_eq!(
            checker.check(&headers(&[&captured]), &REQUEST, "victim", at(NOW + 59)),
            Err(DpopError::Replayed)
        );
        // One caller alone is held to its share (a tenth), and others still get in.
        let checker = ProofChecker::new(60, 100);
        let over = (0..20)
            .filter(|i| {
                checker.check(
                    &headers(&[&proof(&flooder, &format!("g{i}"), NOW)]),
                    &REQUEST,
                    "greedy",
                    at(NOW),
                ) == Err(DpopError::ReplayShareFull)
            })
            .count();
        assert_eq!(over, 10);
        assert!(
            checker
                .check(&headers(&[&captured]), &REQUEST, "victim", at(NOW))
                .is_ok()
        );
        let counted = |result| checker.results.get_or_create(&ProofLabels { result }).get();
        assert_eq!((counted("accepted"), counted("over_share")), (11, 10));
        assert_eq!(checker.remembered.get(), 11);
        // Once their window is over, the entries make room again.
        assert!(
            checker
                .check(
                    &headers(&[&proof(&flooder, "later", NOW + 60)]),
                    &REQUEST,
                    "greedy",
                    at(NOW + 60)
                )
                .is_ok()
        );
        assert_eq!(checker.remembered.get(), 1);
    }

    /// A proof that fails a check is not remembered: the honest retry is not called a replay.
    #[test]
    fn a_refused_proof_is_not_recorded() {
        let checker = ProofChecker::default();
        let key = DpopHolder::new();
        let good = proof(&key, "one", NOW);
        let wrong_method = ProofRequest {
            method: "GET",
            ..REQUEST
        };
        assert_eq!(
            checker.check(&headers(&[&good]), &wrong_method, OWNER, at(NOW)),
            Err(DpopError::Method)
        );
        assert!(
            checker
                .check(&headers(&[&good]), &REQUEST, OWNER, at(NOW))
                .is_ok()
        );
    }

    #[test]
    fn none_or_exactly_one_header() {
        let checker = ProofChecker::default();
        assert_eq!(
            checker.check(&headers(&[]), &REQUEST, OWNER, at(NOW)),
            Ok(None)
        );
        let key = DpopHolder::new();
        let (a, b) = (proof(&key, "a", NOW), proof(&key, "b", NOW));
        assert_eq!(
            checker.check(&headers(&[&a, &b]), &REQUEST, OWNER, at(NOW)),
            Err(DpopError::NotOne)
        );
        assert_eq!(
            checker.check(&headers(&[&format!("{a}, {b}")]), &REQUEST, OWNER, at(NOW)),
            Err(DpopError::NotOne)
        );
    }

    #[test]
    fn an_origin_replaces_the_callers_host() {
        let checker = ProofChecker::default()
            .with_origin("https://Warrant.Example:8443/")
            .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(http::header::HOST, "10.0.0.7:443".parse().unwrap());
        let path: Uri = "/api/v1/x?y=1".parse().unwrap();
        assert_eq!(
            checker.target_uri(&path, &headers).as_deref(),
            Some("https://warrant.example:8443/api/v1/x")
        );
        assert_eq!(
            checker.target_uri(&path, &HeaderMap::new()).as_deref(),
            Some("https://warrant.example:8443/api/v1/x"),
            "no Host needed"
        );
        assert_eq!(
            ProofChecker::default()
                .target_uri(&path, &headers)
                .as_deref(),
            Some("https://10.0.0.7:443/api/v1/x")
        );
        for (origin, why) in [
            ("http://warrant.example", OriginError::NotHttps),
            ("warrant.example", OriginError::NotHttps),
            ("https://warrant.example/api", OriginError::NotAnOrigin),
            ("https://warrant.example/?a=b", OriginError::NotAnOrigin),
            ("https://user@warrant.example", OriginError::NotAnOrigin),
            ("https://", OriginError::NotAUri),
        ] {
            assert_eq!(
                ProofChecker::default().with_origin(origin).err(),
                Some(why),
                "{origin}"
            );
        }
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
