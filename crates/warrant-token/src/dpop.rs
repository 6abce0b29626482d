//! Key binding by proof of possession: DPoP proofs (RFC 9449) and JWK thumbprints (RFC 7638).
//!
//! A key-bound token names a key in its `cnf` claim (RFC 7800) by the key's thumbprint
//! ([`jwk_thumbprint`]); whoever presents the token must also present a fresh proof, a small JWT
//! signed with that key for this one request ([`verify_proof`]). A stolen token without the key
//! is then useless to the thief.
//!
//! What a proof is trusted for: its signature shows that its sender holds the private half of
//! the `jwk` in its header, and nothing else. The `htm`/`htu` claims tie it to one request, `iat`
//! to a short window, `jti` (with the caller's replay cache) to one use, and `ath` to one token.
//! The checks here are pure: the caller passes the request, the time, and the window, and keeps
//! the replay cache (keyed by [`VerifiedProof::replay_key`] until [`VerifiedProof::replay_until`],
//! the end of the one definition of a proof's window, [`proof_window`]).
//!
//! Cost: one base64 decode and JSON parse of the header and of the claims, one public-key parse
//! (an RSA or EC JWK), one signature verification, and two SHA-256s (thumbprint, `ath`). Proofs
//! are bounded by [`MAX_PROOF_BYTES`] before any of that.
//!
//! Errors never quote the proof or the token: a proof is a credential for its request's window,
//! and a token is one for its lifetime.

use aws_lc_rs::digest;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use serde::Deserialize;
use thiserror::Error;

use crate::error::KeyError;
use crate::jws;
use crate::keys::{Algorithm, SigningKey, VerifyingKey};
use crate::numeric_date::numeric_date;

/// The `typ` of a DPoP proof's header (RFC 9449 §4.2).
pub const DPOP_PROOF_TYP: &str = "dpop+jwt";

/// The algorithms a DPoP proof may be signed with: the asymmetric ones warrant verifies and
/// clients commonly make. Never `none`, never a symmetric (HS*) one: a proof must show
/// possession of a private key.
pub const DPOP_ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::ES384];

/// Proofs longer than this are refused unread. A proof with an RSA 4096 `jwk` is under 2 KiB.
pub const MAX_PROOF_BYTES: usize = 8 * 1024;

/// The longest `jti` accepted, in bytes: it is kept in the replay cache, so its size is bounded.
/// RFC 9449 asks for at least 96 bits of randomness; a UUID is 36 characters.
pub const MAX_JTI_BYTES: usize = 128;

/// The default freshness window, in seconds: a proof's `iat` may be this far from `now` either
/// way (RFC 9449 §11.1 leaves the window to the server; clocks of workloads drift a little).
pub const DEFAULT_PROOF_WINDOW_SECONDS: i64 = 60;

/// The JWK members that only a private or symmetric key has. A proof's `jwk` with any of them
/// is refused: it would be sending its secret along with the proof.
const PRIVATE_JWK_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// Why a DPoP proof was refused. Every message is RFC 9449's reason in plain words; none quotes
/// the proof, the token or the key.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DpopError {
    /// More than [`MAX_PROOF_BYTES`].
    #[error("DPoP proof is larger than {MAX_PROOF_BYTES} bytes")]
    TooLarge,
    /// More than one `DPoP` header, or one that is not a single proof (RFC 9449 §4.3 item 1).
    #[error("request must carry exactly one DPoP proof")]
    NotOne,
    /// Not three base64url parts, or a header or claims that are not JSON objects.
    #[error("DPoP proof is not a well-formed JWT")]
    Malformed,
    /// The header's `typ` is not `dpop+jwt`.
    #[error("DPoP proof header typ must be \"dpop+jwt\"")]
    Type,
    /// `alg` is `none`, symmetric, or not one of [`DPOP_ALGORITHMS`].
    #[error("DPoP proof alg must be an asymmetric algorithm: one of RS256, ES256, ES384")]
    Algorithm,
    /// The header names critical extensions, none of which warrant understands.
    #[error("DPoP proof header has critical extensions (crit), which are not supported")]
    Critical,
    /// The header has no `jwk`, or it is not an object.
    #[error("DPoP proof header must carry the public key as jwk")]
    MissingKey,
    /// The header's `jwk` holds private (or symmetric) key material.
    #[error("DPoP proof jwk must be a public key: it contains private key material")]
    PrivateKey,
    /// The `jwk` is not a key warrant can use.
    #[error("DPoP proof jwk is not a usable public key: {0}")]
    Key(#[source] KeyError),
    /// The `jwk` is a key for another algorithm than `alg` (an RSA key with ES256, a P-384
    /// key with ES256, …).
    #[error("DPoP proof jwk is not a key for its alg")]
    KeyAlgorithm,
    /// The signature does not verify with the header's `jwk`.
    #[error("DPoP proof signature does not verify with its jwk")]
    Signature,
    /// The claims are not of the expected types.
    #[error("DPoP proof claims are not those of a DPoP proof")]
    Claims,
    /// A required claim is absent.
    #[error("DPoP proof has no {0} claim")]
    MissingClaim(&'static str),
    /// `htm` is not the request's method.
    #[error("DPoP proof htm does not match the request method")]
    Method,
    /// `htu` is not the request's URI (scheme, host, port and path).
    #[error("DPoP proof htu does not match the request URI")]
    Uri,
    /// `now` is at or past the end of the proof's window ([`proof_window`]).
    #[error("DPoP proof is too old (it is accepted for {0} seconds after its iat)")]
    Stale(i64),
    /// `now` is before the start of the proof's window: `iat` is too far ahead.
    #[error("DPoP proof is issued in the future (iat is more than {0} seconds ahead)")]
    Future(i64),
    /// `jti` is longer than [`MAX_JTI_BYTES`], or empty.
    #[error("DPoP proof jti must be 1 to {MAX_JTI_BYTES} bytes")]
    JtiLength,
    /// The proof accompanies a token but has no `ath`.
    #[error("DPoP proof has no ath claim, required when a token is presented")]
    MissingTokenHash,
    /// `ath` is not the hash of the token presented with it.
    #[error("DPoP proof ath does not match the access token")]
    TokenHash,
    /// The proof's key is not the key the token is bound to.
    #[error("DPoP proof key does not match the key the token is bound to (cnf.jkt)")]
    Thumbprint,
    /// The same proof (same key, same `jti`) was already used within its window.
    #[error("DPoP proof has already been used (its jti was seen before)")]
    Replayed,
    /// The replay cache holds as many unexpired proofs as it may: a new one cannot be
    /// remembered, so it is not accepted (forgetting one still in its window would let it be
    /// replayed). Not the proof's fault: retry once older proofs expire.
    #[error(
        "DPoP proof not accepted for now: the server remembers as many proofs as it may until older ones expire; retry shortly"
    )]
    ReplayCacheFull,
    /// The replay cache holds as many unexpired proofs charged to this caller (the service
    /// account a bound token names, or who asked for a new binding) as one caller may hold.
    #[error(
        "DPoP proof not accepted for now: too many proofs for this caller within their window; retry shortly"
    )]
    ReplayShareFull,
}

impl DpopError {
    /// True if the proof was not refused for what it is, but could not be remembered now
    /// ([`DpopError::ReplayCacheFull`], [`DpopError::ReplayShareFull`]): the caller is told to
    /// retry (429), not that the proof is bad.
    pub fn is_overload(&self) -> bool {
        matches!(
            self,
            DpopError::ReplayCacheFull | DpopError::ReplayShareFull
        )
    }
}

/// The request a proof must be for.
#[derive(Debug, Clone, Copy)]
pub struct ProofRequest<'a> {
    /// The HTTP method, e.g. `POST`; compared exactly (methods are case-sensitive).
    pub method: &'a str,
    /// The request's absolute URI as the server sees itself addressed; its query and fragment
    /// are ignored (RFC 9449 §4.3 item 9).
    pub uri: &'a str,
    /// The token presented with the proof, if any: the proof's `ath` must be its hash.
    pub access_token: Option<&'a str>,
    /// The thumbprint the presented token is bound to (its `cnf.jkt`), if any: the proof's key
    /// must have it.
    pub bound_to: Option<&'a str>,
}

/// A proof that passed every check except replay, which is the caller's (it holds the cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedProof {
    /// The RFC 7638 SHA-256 thumbprint of the proof's key: what a bound token's `cnf.jkt` is.
    pub jkt: String,
    /// The proof's `jti`.
    pub jti: String,
    /// The proof's `iat`, seconds since the Unix epoch.
    pub iat: i64,
}

impl VerifiedProof {
    /// The key a replay cache remembers this proof by: the key's thumbprint and the `jti`
    /// (two clients may choose the same `jti`; the same client must not reuse one).
    pub fn replay_key(&self) -> String {
        format!("{}.{}", self.jkt, self.jti)
    }

    /// Until when the proof must be remembered: the end of its window ([`proof_window`]), from
    /// which on it is refused as stale.
    pub fn replay_until(&self, window_seconds: i64) -> Timestamp {
        proof_window(self.iat, window_seconds).end
    }
}

/// The one definition of a proof's freshness window: a proof issued at `iat` (whole seconds)
/// passes from `iat - window_seconds` up to, not including, `iat + window_seconds`, compared
/// with warrant's clock to the nanosecond. [`verify_proof`] accepts a proof exactly within it and
/// a replay cache remembers the proof until its end ([`VerifiedProof::replay_until`]), so there
/// is no instant at which a proof passes and is not remembered. (Comparing whole seconds of
/// `now` instead, as warrant once did, accepted a proof until `iat + window + 1`, a second
/// after its replay entry had expired.)
pub fn proof_window(iat: i64, window_seconds: i64) -> std::ops::Range<Timestamp> {
    let at = |second: i64| {
        Timestamp::from_second(second).unwrap_or(if second < 0 {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        })
    };
    at(iat.saturating_sub(window_seconds))..at(iat.saturating_add(window_seconds))
}

/// The RFC 7638 thumbprint of a public key: base64url (no padding) of the SHA-256 of the JSON
/// object of its required members in lexicographic order, without whitespace (RSA: `e`, `kty`,
/// `n`; EC: `crv`, `kty`, `x`, `y`). It is computed from the canonical form of the key (RSA
/// modulus without leading zero bytes, EC coordinates at full width, as RFC 7518 requires), so
/// one key has one thumbprint.
pub fn jwk_thumbprint(key: &VerifyingKey) -> String {
    key.thumbprint().to_owned()
}

/// The RFC 7638 thumbprint of a public JWK (see [`jwk_thumbprint`]); refuses private keys.
pub fn jwk_thumbprint_of(jwk: &serde_json::Value) -> Result<String, DpopError> {
    public_key(jwk).map(|key| jwk_thumbprint(&key))
}

/// `ath`: base64url (no padding) of the SHA-256 of the token's ASCII bytes (RFC 9449 §4.2).
pub fn access_token_hash(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, token.as_bytes()))
}

/// A DPoP proof made with `key`, as a client makes one (the fleet plugin): header `typ`
/// `dpop+jwt`, `alg` the key's, and `jwk` its public key's required members only (RFC 7638's:
/// no `kid`, `use` or `alg`); claims `jti`, `htm` (`method`), `htu` and `iat`.
pub fn make_proof(
    key: &SigningKey,
    method: &str,
    htu: &str,
    iat: i64,
    jti: &str,
) -> Result<String, KeyError> {
    let public: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(key.verifying_key().jwk_json())
            .map_err(|_| KeyError::Crypto("read the key's JWK"))?;
    let jwk: serde_json::Map<String, serde_json::Value> = public
        .into_iter()
        .filter(|(name, _)| matches!(name.as_str(), "kty" | "crv" | "x" | "y" | "n" | "e"))
        .collect();
    let header =
        serde_json::json!({"typ": DPOP_PROOF_TYP, "alg": key.algorithm().name(), "jwk": jwk});
    let claims = serde_json::json!({"jti": jti, "htm": method, "htu": htu, "iat": iat});
    let mut proof = URL_SAFE_NO_PAD.encode(header.to_string());
    proof.push('.');
    URL_SAFE_NO_PAD.encode_string(claims.to_string(), &mut proof);
    let signature = key.sign_bytes(proof.as_bytes())?;
    proof.push('.');
    URL_SAFE_NO_PAD.encode_string(signature, &mut proof);
    Ok(proof)
}

/// Checks a DPoP proof for `request` at `now`: its form, its key and signature, and its claims
/// (`htm`, `htu`, `iat` within `window_seconds` of `now` either way, `jti`, and `ath` and the
/// key's thumbprint when the request presents a bound token). Replay is the caller's check, with
/// [`VerifiedProof::replay_key`].
pub fn verify_proof(
    proof: &str,
    request: &ProofRequest<'_>,
    now: Timestamp,
    window_seconds: i64,
) -> Result<VerifiedProof, DpopError> {
    if proof.len() > MAX_PROOF_BYTES {
        return Err(DpopError::TooLarge);
    }
    let parts = jws::split(proof).ok_or(DpopError::Malformed)?;
    let header: Header =
        serde_json::from_slice(&jws::decode(parts.header).ok_or(DpopError::Malformed)?)
            .map_err(|_| DpopError::Malformed)?;
    if header.typ.as_deref() != Some(DPOP_PROOF_TYP) {
        return Err(DpopError::Type);
    }
    let alg = header
        .alg
        .as_deref()
        .and_then(Algorithm::from_name)
        .filter(|alg| DPOP_ALGORITHMS.contains(alg))
        .ok_or(DpopError::Algorithm)?;
    if header.crit.is_some() {
        return Err(DpopError::Critical);
    }
    let jwk = header.jwk.ok_or(DpopError::MissingKey)?;
    let key = public_key(&jwk)?;
    if key.algorithm() != alg {
        return Err(DpopError::KeyAlgorithm);
    }
    let signature = jws::decode(parts.signature).ok_or(DpopError::Malformed)?;
    if !key.verify(parts.signing_input.as_bytes(), &signature) {
        return Err(DpopError::Signature);
    }

    let claims: ProofClaims =
        serde_json::from_slice(&jws::decode(parts.payload).ok_or(DpopError::Malformed)?)
            .map_err(|_| DpopError::Claims)?;
    let jti = claims.jti.ok_or(DpopError::MissingClaim("jti"))?;
    if jti.is_empty() || jti.len() > MAX_JTI_BYTES {
        return Err(DpopError::JtiLength);
    }
    let htm = claims.htm.ok_or(DpopError::MissingClaim("htm"))?;
    if htm != request.method {
        return Err(DpopError::Method);
    }
    let htu = claims.htu.ok_or(DpopError::MissingClaim("htu"))?;
    if !same_target(&htu, request.uri) {
        return Err(DpopError::Uri);
    }
    let iat = claims.iat.ok_or(DpopError::MissingClaim("iat"))?;
    let window = proof_window(iat, window_seconds);
    if now >= window.end {
        return Err(DpopError::Stale(window_seconds));
    }
    if now < window.start {
        return Err(DpopError::Future(window_seconds));
    }
    if let Some(token) = request.access_token {
        let ath = claims.ath.ok_or(DpopError::MissingTokenHash)?;
        let expected = access_token_hash(token);
        // Both are public hashes of the token; a constant-time comparison is still cheap.
        if aws_lc_rs::constant_time::verify_slices_are_equal(ath.as_bytes(), expected.as_bytes())
            .is_err()
        {
            return Err(DpopError::TokenHash);
        }
    }
    let jkt = jwk_thumbprint(&key);
    if let Some(bound) = request.bound_to
        && bound != jkt
    {
        return Err(DpopError::Thumbprint);
    }
    Ok(VerifiedProof { jkt, jti, iat })
}

/// The proof's header: only what is checked.
#[derive(Deserialize)]
struct Header {
    typ: Option<String>,
    alg: Option<String>,
    jwk: Option<serde_json::Value>,
    crit: Option<serde_json::Value>,
}

/// The proof's claims. `iat` is a whole number of seconds (RFC 7519 NumericDate; fractions are
/// truncated).
#[derive(Deserialize)]
struct ProofClaims {
    jti: Option<String>,
    htm: Option<String>,
    htu: Option<String>,
    #[serde(default, deserialize_with = "numeric_date")]
    iat: Option<i64>,
    ath: Option<String>,
}

/// The public key a JWK describes, refusing one that carries private or symmetric material.
fn public_key(jwk: &serde_json::Value) -> Result<VerifyingKey, DpopError> {
    let object = jwk.as_object().ok_or(DpopError::MissingKey)?;
    if PRIVATE_JWK_MEMBERS
        .iter()
        .any(|member| object.contains_key(*member))
    {
        return Err(DpopError::PrivateKey);
    }
    VerifyingKey::from_jwk(jwk).map_err(DpopError::Key)
}

/// True if `htu` and the request URI name the same target: equal scheme, host, port and path
/// after URL normalization (case of scheme and host, default ports, dot segments,
/// percent-encoding); query and fragment ignored. Only absolute http(s) URIs qualify.
fn same_target(htu: &str, request: &str) -> bool {
    let (Ok(htu), Ok(request)) = (url::Url::parse(htu), url::Url::parse(request)) else {
        return false;
    };
    let web = |u: &url::Url| matches!(u.scheme(), "https" | "http") && u.host().is_some();
    web(&htu)
        && web(&request)
        && htu.scheme() == request.scheme()
        && htu.host() == request.host()
        && htu.port_or_known_default() == request.port_or_known_default()
        && htu.path() == request.path()
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair,
        EcdsaSigningAlgorithm, KeyPair as _,
    };
    use serde_json::{Value, json};

    use super::*;

    const NOW: i64 = 1_800_000_000;
    const URI: &str = "https://warrant.example/api/v1/namespaces/ns/serviceaccounts/app/token";

    fn now() -> Timestamp {
        Timestamp::from_second(NOW).unwrap()
    }

    /// A client's key, made with aws-lc-rs directly (not warrant's key code), and its JWK.
    struct Client {
        key: EcdsaKeyPair,
        alg: &'static str,
        crv: &'static str,
    }

    impl Client {
        fn new(
            signing: &'static EcdsaSigningAlgorithm,
            alg: &'static str,
            crv: &'static str,
        ) -> Self {
            Client {
                key: EcdsaKeyPair::generate(signing).unwrap(),
                alg,
                crv,
            }
        }

        fn p256() -> Self {
            Self::new(&ECDSA_P256_SHA256_FIXED_SIGNING, "ES256", "P-256")
        }

        fn jwk(&self) -> Value {
            let point = self.key.public_key().as_ref();
            let (x, y) = point[1..].split_at((point.len() - 1) / 2);
            json!({"kty": "EC", "crv": self.crv, "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)})
        }

        fn header(&self) -> Value {
            json!({"typ": "dpop+jwt", "alg": self.alg, "jwk": self.jwk()})
        }

        fn claims(&self) -> Value {
            json!({"jti": "e1j3V_bKic8-LAEB", "htm": "POST", "htu": URI, "iat": NOW})
        }

        fn sign(&self, header: &Value, claims: &Value) -> String {
            let input = format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(header.to_string()),
                URL_SAFE_NO_PAD.encode(claims.to_string())
            );
            let signature = self
                .key
                .sign(&SystemRandom::new(), input.as_bytes())
                .unwrap();
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()))
        }

        fn proof(&self) -> String {
            self.sign(&self.header(), &self.claims())
        }

        fn with_claims(&self, change: impl FnOnce(&mut Value)) -> String {
            let mut claims = self.claims();
            change(&mut claims);
            self.sign(&self.header(), &claims)
        }

        fn with_header(&self, change: impl FnOnce(&mut Value)) -> String {
            let mut header = self.header();
            change(&mut header);
            self.sign(&header, &self.claims())
        }
    }

    fn request() -> ProofRequest<'static> {
        ProofRequest {
            method: "POST",
            uri: URI,
            access_token: None,
            bound_to: None,
        }
    }

    fn check(proof: &str) -> Result<VerifiedProof, DpopError> {
        verify_proof(proof, &request(), now(), DEFAULT_PROOF_WINDOW_SECONDS)
    }

    /// RFC 7638 §3.1's example key and the thumbprint the RFC gives for it.
    #[test]
    fn thumbprint_of_the_rfc_example() {
        let jwk = json!({
            "kty": "RSA",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
            "e": "AQAB",
            "alg": "RS256",
            "kid": "2011-04-29"
        });
        assert_eq!(
            jwk_thumbprint_of(&jwk).unwrap(),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    /// A client's proof made with warrant's own keys passes the check, names the key by its
    /// thumbprint, and carries only the public key's required members.
    #[test]
    fn a_made_proof_passes_for_its_request() {
        for key_type in [crate::KeyType::P256, crate::KeyType::Rsa2048] {
            let key = SigningKey::generate(key_type).unwrap();
            let proof = make_proof(&key, "POST", URI, NOW, "made-1").unwrap();
            let verified = check(&proof).unwrap();
            assert_eq!(verified.jkt, jwk_thumbprint(key.verifying_key()));
            assert_eq!(verified.jti, "made-1");
            let header: serde_json::Value = serde_json::from_slice(
                &URL_SAFE_NO_PAD
                    .decode(proof.split('.').next().unwrap())
                    .unwrap(),
            )
            .unwrap();
            let mut members: Vec<&String> = header["jwk"].as_object().unwrap().keys().collect();
            members.sort();
            let expected: &[&str] = match key_type {
                crate::KeyType::P256 => &["crv", "kty", "x", "y"],
                _ => &["e", "kty", "n"],
            };
            assert_eq!(members, expected);
        }
    }

    /// An EC thumbprint agrees with jsonwebtoken's RFC 7638 implementation (another library).
    #[test]
    fn ec_thumbprint_agrees_with_jsonwebtoken() {
        for client in [
            Client::p256(),
            Client::new(&ECDSA_P384_SHA384_FIXED_SIGNING, "ES384", "P-384"),
        ] {
            let jwk = client.jwk();
            let theirs: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).unwrap();
            let theirs = theirs
                .thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256)
                .unwrap();
            assert_eq!(jwk_thumbprint_of(&jwk).unwrap(), theirs);
        }
    }

    #[test]
    fn a_good_proof_gives_its_thumbprint_and_jti() {
        let client = Client::p256();
        let proof = check(&client.proof()).unwrap();
        assert_eq!(proof.jkt, jwk_thumbprint_of(&client.jwk()).unwrap());
        assert_eq!(proof.jti, "e1j3V_bKic8-LAEB");
        assert_eq!(proof.iat, NOW);
        assert_eq!(
            proof.replay_until(60),
            Timestamp::from_second(NOW + 60).unwrap()
        );
        // The query and fragment of either URI do not count; scheme and host case, default
        // ports and dot segments are normalized.
        let proof = client.with_claims(|c| {
            c["htu"] = json!(
                "HTTPS://Warrant.Example:443/api/v1/namespaces/ns/./serviceaccounts/app/token#f"
            )
        });
        let on = ProofRequest {
            uri: "https://warrant.example/api/v1/namespaces/ns/serviceaccounts/app/token?x=1",
            ..request()
        };
        assert!(verify_proof(&proof, &on, now(), 60).is_ok());
    }

    #[test]
    fn an_rs256_proof_verifies() {
        let key = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let public = key.public_key();
        let components: aws_lc_rs::rsa::PublicKeyComponents<Vec<u8>> = public.into();
        let jwk = json!({"kty": "RSA", "n": URL_SAFE_NO_PAD.encode(&components.n), "e": URL_SAFE_NO_PAD.encode(&components.e)});
        let header = json!({"typ": "dpop+jwt", "alg": "RS256", "jwk": jwk});
        let claims = json!({"jti": "r", "htm": "POST", "htu": URI, "iat": NOW});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut signature = vec![0; key.public_modulus_len()];
        key.sign(
            &aws_lc_rs::signature::RSA_PKCS1_SHA256,
            &SystemRandom::new(),
            input.as_bytes(),
            &mut signature,
        )
        .unwrap();
        let proof = format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature));
        assert_eq!(check(&proof).unwrap().jkt, jwk_thumbprint_of(&jwk).unwrap());
    }

    #[test]
    fn the_header_typ_must_be_dpop_jwt() {
        let client = Client::p256();
        for typ in [json!("JWT"), json!("DPOP+JWT"), json!(null)] {
            let proof = client.with_header(|h| h["typ"] = typ.clone());
            assert_eq!(check(&proof), Err(DpopError::Type), "{typ}");
        }
        let proof = client.with_header(|h| {
            h.as_object_mut().unwrap().remove("typ");
        });
        assert_eq!(check(&proof), Err(DpopError::Type));
    }

    /// `alg: none` with no signature, and HS256 "signed" with the public key as the HMAC secret
    /// (the classic confusion), are both refused before any key is used.
    #[test]
    fn alg_none_and_symmetric_algorithms_are_refused() {
        let client = Client::p256();
        let header = json!({"typ": "dpop+jwt", "alg": "none", "jwk": client.jwk()});
        let unsigned = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(client.claims().to_string())
        );
        assert_eq!(check(&unsigned), Err(DpopError::Algorithm));

        let header = json!({"typ": "dpop+jwt", "alg": "HS256", "jwk": client.jwk()});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(client.claims().to_string())
        );
        let mac_key = aws_lc_rs::hmac::Key::new(
            aws_lc_rs::hmac::HMAC_SHA256,
            client.jwk().to_string().as_bytes(),
        );
        let tag = aws_lc_rs::hmac::sign(&mac_key, input.as_bytes());
        let hs256 = format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()));
        assert_eq!(check(&hs256), Err(DpopError::Algorithm));

        // ES512 is a warrant algorithm, but not one of the proof algorithms.
        let proof = client.with_header(|h| h["alg"] = json!("ES512"));
        assert_eq!(check(&proof), Err(DpopError::Algorithm));
    }

    #[test]
    fn private_key_material_in_the_jwk_is_refused() {
        let client = Client::p256();
        for member in ["d", "p", "q", "dp", "dq", "qi", "k"] {
            let proof = client.with_header(|h| h["jwk"][member] = json!("AAAA"));
            assert_eq!(check(&proof), Err(DpopError::PrivateKey), "{member}");
        }
        let symmetric = client.with_header(|h| h["jwk"] = json!({"kty": "oct", "k": "c2VjcmV0"}));
        assert_eq!(check(&symmetric), Err(DpopError::PrivateKey));
    }

    #[test]
    fn the_key_must_be_present_usable_and_for_the_alg() {
        let client = Client::p256();
        let proof = client.with_header(|h| {
            h.as_object_mut().unwrap().remove("jwk");
        });
        assert_eq!(check(&proof), Err(DpopError::MissingKey));
        let proof = client.with_header(|h| h["jwk"]["x"] = json!("AAAA"));
        assert!(matches!(check(&proof), Err(DpopError::Key(_))));
        let proof = client.with_header(|h| h["alg"] = json!("ES384"));
        assert_eq!(check(&proof), Err(DpopError::KeyAlgorithm));
        let proof = client.with_header(|h| h["crit"] = json!(["exp"]));
        assert_eq!(check(&proof), Err(DpopError::Critical));
    }

    /// A proof signed by one key with another key's jwk in its header does not verify.
    #[test]
    fn the_signature_must_verify_with_the_jwk() {
        let (client, other) = (Client::p256(), Client::p256());
        let proof = client.with_header(|h| h["jwk"] = other.jwk());
        assert_eq!(check(&proof), Err(DpopError::Signature));
        let mut tampered = client.proof();
        tampered.push_str("AA");
        assert!(check(&tampered).is_err());
    }

    #[test]
    fn htm_and_htu_must_match_the_request() {
        let client = Client::p256();
        let proof = client.with_claims(|c| c["htm"] = json!("GET"));
        assert_eq!(check(&proof), Err(DpopError::Method));
        let proof = client.with_claims(|c| c["htm"] = json!("post"));
        assert_eq!(check(&proof), Err(DpopError::Method));
        for htu in [
            "https://warrant.example/api/v1/namespaces/ns/serviceaccounts/other/token",
            "http://warrant.example/api/v1/namespaces/ns/serviceaccounts/app/token",
            "https://attacker.example/api/v1/namespaces/ns/serviceaccounts/app/token",
            "https://warrant.example:8443/api/v1/namespaces/ns/serviceaccounts/app/token",
            "/api/v1/namespaces/ns/serviceaccounts/app/token",
            "not a uri",
        ] {
            let proof = client.with_claims(|c| c["htu"] = json!(htu));
            assert_eq!(check(&proof), Err(DpopError::Uri), "{htu}");
        }
    }

    #[test]
    fn iat_must_be_within_the_window() {
        let client = Client::p256();
        for (iat, ok) in [
            (NOW - 59, true),
            (NOW + 60, true),
            (NOW - 60, false),
            (NOW + 61, false),
        ] {
            let proof = client.with_claims(|c| c["iat"] = json!(iat));
            assert_eq!(check(&proof).is_ok(), ok, "iat {iat}");
        }
        let stale = client.with_claims(|c| c["iat"] = json!(NOW - 61));
        assert_eq!(check(&stale), Err(DpopError::Stale(60)));
        let future = client.with_claims(|c| c["iat"] = json!(NOW + 61));
        assert_eq!(check(&future), Err(DpopError::Future(60)));
        // The window is the caller's.
        assert!(verify_proof(&stale, &request(), now(), 120).is_ok());
        let proof = client.with_claims(|c| c["iat"] = json!("now"));
        assert_eq!(check(&proof), Err(DpopError::Claims));
        // A NumericDate of any JSON number, in whole seconds (the claims' reader).
        let fractional = client.with_claims(|c| c["iat"] = json!(1_800_000_060.9));
        assert_eq!(check(&fractional).unwrap().iat, NOW + 60);
    }

    /// One window: stepping the clock across its end to the nanosecond, a proof passes exactly
    /// while its replay entry is to be kept (`now < replay_until`), and from `iat + 60` on it is
    /// stale. Whole seconds of `now` once kept it valid until `iat + 61`, a second past its
    /// entry, and every replay in that second passed.
    #[test]
    fn the_proof_window_and_the_replay_entry_end_together() {
        let client = Client::p256();
        let proof = client.proof();
        let at = |nanos_after: i64| now() + jiff::SignedDuration::from_nanos(nanos_after);
        let second = 1_000_000_000;
        for step in [
            0,
            59 * second,
            60 * second - 1,
            60 * second,
            60 * second + 1,
            60 * second + second / 2,
            61 * second - 1,
            61 * second,
            -60 * second - 1,
            -60 * second,
        ] {
            let t = at(step);
            let checked = verify_proof(&proof, &request(), t, DEFAULT_PROOF_WINDOW_SECONDS);
            let window = proof_window(NOW, DEFAULT_PROOF_WINDOW_SECONDS);
            assert_eq!(checked.is_ok(), window.contains(&t), "at iat + {step} ns");
            if let Ok(verified) = &checked {
                assert!(t < verified.replay_until(DEFAULT_PROOF_WINDOW_SECONDS));
            }
            let expected_ok = (-60 * second..60 * second).contains(&step);
            assert_eq!(checked.is_ok(), expected_ok, "at iat + {step} ns");
        }
        assert_eq!(
            verify_proof(&proof, &request(), at(60 * second), 60),
            Err(DpopError::Stale(60))
        );
        assert_eq!(
            verify_proof(&proof, &request(), at(-60 * second - 1), 60),
            Err(DpopError::Future(60))
        );
        // Dates at the ends of i64 are stale or in the future, never a panic.
        let window = proof_window(i64::MAX, 60);
        assert!(!window.contains(&now()) && now() < window.start);
        let window = proof_window(i64::MIN, 60);
        assert!(!window.contains(&now()) && now() >= window.end);
    }

    #[test]
    fn each_claim_is_required_and_jti_is_bounded() {
        let client = Client::p256();
        for claim in ["jti", "htm", "htu", "iat"] {
            let proof = client.with_claims(|c| {
                c.as_object_mut().unwrap().remove(claim);
            });
            assert_eq!(check(&proof), Err(DpopError::MissingClaim(claim)));
        }
        let proof = client.with_claims(|c| c["jti"] = json!("x".repeat(MAX_JTI_BYTES + 1)));
        assert_eq!(check(&proof), Err(DpopError::JtiLength));
        let proof = client.with_claims(|c| c["jti"] = json!(""));
        assert_eq!(check(&proof), Err(DpopError::JtiLength));
    }

    #[test]
    fn ath_must_be_the_presented_tokens_hash() {
        let client = Client::p256();
        let token = "header.claims.signature";
        let with_token = ProofRequest {
            access_token: Some(token),
            ..request()
        };
        let good = client.with_claims(|c| c["ath"] = json!(access_token_hash(token)));
        assert!(verify_proof(&good, &with_token, now(), 60).is_ok());
        let wrong = client.with_claims(|c| c["ath"] = json!(access_token_hash("another.token.x")));
        assert_eq!(
            verify_proof(&wrong, &with_token, now(), 60),
            Err(DpopError::TokenHash)
        );
        assert_eq!(
            verify_proof(&client.proof(), &with_token, now(), 60),
            Err(DpopError::MissingTokenHash)
        );
    }

    #[test]
    fn the_key_must_be_the_one_the_token_is_bound_to() {
        let (client, other) = (Client::p256(), Client::p256());
        let bound_to = jwk_thumbprint_of(&other.jwk()).unwrap();
        let bound = ProofRequest {
            bound_to: Some(&bound_to),
            ..request()
        };
        assert_eq!(
            verify_proof(&client.proof(), &bound, now(), 60),
            Err(DpopError::Thumbprint)
        );
        assert!(verify_proof(&other.proof(), &bound, now(), 60).is_ok());
    }

    #[test]
    fn malformed_and_oversized_proofs_are_refused_without_quoting_them() {
        for proof in ["", "a.b", "a.b.c.d", "!!.!!.!!", "e30.e30.e30"] {
            let error = check(proof).unwrap_err();
            assert!(
                matches!(error, DpopError::Malformed | DpopError::Type),
                "{proof:?}: {error:?}"
            );
        }
        let big = "a".repeat(MAX_PROOF_BYTES + 1);
        assert_eq!(check(&big), Err(DpopError::TooLarge));
        // No message quotes the proof.
        let client = Client::p256();
        let proof = client.with_claims(|c| c["htm"] = json!("GET"));
        let message = check(&proof).unwrap_err().to_string();
        assert!(!message.contains(&proof[..20]), "{message}");
    }
}
