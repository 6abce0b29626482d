//! The verified-signature cache: a token reviewed again skips the signature check.
//!
//! Only what depends on the token and the keys alone is cached (the pre-filter, key choice,
//! signature and issuer: [`Verifier::verify_signature`]). Audience and time are checked on every
//! review, and so are the object checks (service account and bound object still there with the
//! same UID), which are never cached: revocation by deleting a pod takes effect at the next
//! review, cached signature or not.
//!
//! - Keyed by the SHA-256 of the token, so the cache never holds a token.
//! - One cache per key set (it lives in [`crate::Published`]): when the keys change, the cache
//!   starts empty, so a token signed by a removed key cannot pass on an old entry.
//! - An entry expires at the token's `exp` plus the leeway: it never outlives the token.
//! - Admitted on the second sighting: a token's first review only notes an 8-byte fingerprint
//!   of its digest in a fixed table (the doorkeeper); a review that finds it there caches the
//!   verified claims, and the reviews after that hit. A stream of tokens each reviewed once
//!   (every pod's first request to a relying party) then costs the cache nothing but that note:
//!   inserting each of them, to be evicted unread, cost 6-14 µs of CPU per review under load
//!   (docs/benchmarks.md). The doorkeeper only ever decides whether to remember a signature
//!   that was just verified; it never answers a review.
//! - Bounded: at most `--signature-cache-size` entries (default
//!   [`DEFAULT_SIGNATURE_CACHE_ENTRIES`](crate::DEFAULT_SIGNATURE_CACHE_ENTRIES)); the least
//!   valuable entries are evicted first. A full default cache adds about 70 MiB to the
//!   process (docs/benchmarks.md measured it: the claims of a pod-bound token, the digest,
//!   moka's bookkeeping and what the allocator keeps, about 1.1 KiB an entry).
//!
//! Cost on a hit: one SHA-256 of the token (about a microsecond for a 1 KiB token) and a lookup,
//! instead of a JSON parse and a signature verification (18 µs for RS256, 51 µs for ES256).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_lc_rs::digest;
use jiff::Timestamp;
use warrant_cache::ExpiringCache;
use warrant_token::{Claims, LEEWAY_SECONDS, MAX_TOKEN_BYTES, TokenError, Verifier};

/// Verified signatures by token digest.
#[derive(Debug)]
pub(crate) struct SignatureCache {
    entries: ExpiringCache<[u8; 32], Arc<Claims>>,
    /// The tokens verified once, not (yet) cached.
    seen: Doorkeeper,
}

/// Whether a verification was answered from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The signature was verified earlier.
    Hit,
    /// The signature was verified now (or the token failed).
    Miss,
}

impl SignatureCache {
    /// A cache of at most `capacity` entries; 0 remembers nothing.
    pub(crate) fn new(capacity: u64) -> Self {
        SignatureCache {
            entries: ExpiringCache::new(capacity),
            seen: Doorkeeper::for_capacity(capacity),
        }
    }

    /// [`Verifier::verify_signature`], remembered for tokens that pass.
    pub(crate) fn verify_signature(
        &self,
        verifier: &Verifier,
        token: &str,
        now: Timestamp,
    ) -> (Result<Arc<Claims>, TokenError>, Lookup) {
        if token.len() > MAX_TOKEN_BYTES {
            // Refused unread: not worth hashing.
            return (verifier.verify_signature(token).map(Arc::new), Lookup::Miss);
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(digest::digest(&digest::SHA256, token.as_bytes()).as_ref());
        if let Some(claims) = self.entries.get(&key, now) {
            return (Ok(claims), Lookup::Hit);
        }
        let result = verifier.verify_signature(token).map(Arc::new);
        if let Ok(claims) = &result
            && let Some(exp) = claims.exp
            && self.seen.seen_before(&key)
        {
            // Saturating: `exp` is whatever a validly signed token says, up to i64::MAX; the
            // cache caps how long it keeps anything.
            let until = Timestamp::from_second(exp.saturating_add(LEEWAY_SECONDS))
                .unwrap_or(Timestamp::MAX);
            self.entries.insert_until(key, claims.clone(), now, until);
        }
        (result, Lookup::Miss)
    }
}

/// Which tokens were verified recently, by a fingerprint of their digest: one `u64` slot per
/// digest, chosen by the digest's first 8 bytes and holding its next 8. A slot holds the last
/// token that fell into it, so a token's first sighting is forgotten once another one lands
/// there (it is then admitted on a later sighting). Lock-free: a race between two reviews of
/// one slot at most forgets or repeats a sighting, and the worst a fingerprint collision
/// (2^-64) does is cache a signature that was verified anyway.
#[derive(Debug)]
struct Doorkeeper {
    /// A power of two in length; empty when the cache is off. 0 marks an empty slot.
    slots: Box<[AtomicU64]>,
}

impl Doorkeeper {
    /// Room for as many sightings as the cache has entries (rounded up to a power of two, at
    /// most 2^20: 8 MiB), so the tokens that fill the cache are not forgotten before their
    /// second review.
    fn for_capacity(capacity: u64) -> Self {
        let slots = match capacity {
            0 => 0,
            n => n.clamp(1024, 1 << 20).next_power_of_two(),
        };
        Doorkeeper {
            slots: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Whether `digest` was noted before (and still is); notes it if not.
    fn seen_before(&self, digest: &[u8; 32]) -> bool {
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(digest.get(at..at + 8).unwrap_or(&[0; 8]));
            u64::from_le_bytes(bytes)
        };
        // The length is a power of two: the mask picks a slot uniformly from a uniform hash.
        let mask = self.slots.len().wrapping_sub(1) as u64;
        let Some(slot) = self.slots.get((word(0) & mask) as usize) else {
            return false;
        };
        // Never 0, the empty slot's mark.
        let fingerprint = word(8) | 1;
        if slot.load(Ordering::Relaxed) == fingerprint {
            return true;
        }
        slot.store(fingerprint, Ordering::Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use warrant_token::{Binding, KeyType, NewToken, ObjectRef, SigningKey};

    use super::*;

    fn token(key: &SigningKey, exp: i64) -> String {
        key.sign(&Claims::new(NewToken {
            issuer: "https://i",
            namespace: "ns",
            service_account: ObjectRef::new("sa", "u"),
            audiences: vec!["https://i".into()],
            binding: Binding::None,
            issued_at: 1_000,
            expires_at: exp,
            warn_after: None,
            jti: "j".into(),
        }))
        .unwrap()
    }

    #[test]
    fn repeats_hit_and_failures_are_not_remembered() {
        let key = SigningKey::generate(KeyType::P256).unwrap();
        let verifier = Verifier::new(
            vec!["https://i".into()],
            vec!["https://i".into()],
            vec![key.verifying_key().clone()],
        );
        let cache = SignatureCache::new(16);
        let now = Timestamp::from_second(1_000).unwrap();
        let good = token(&key, 4_600);
        // Verified on the first two reviews (the second admits it), remembered after.
        for _ in 0..2 {
            let (claims, lookup) = cache.verify_signature(&verifier, &good, now);
            assert_eq!((claims.unwrap().exp, lookup), (Some(4_600), Lookup::Miss));
        }
        let (claims, lookup) = cache.verify_signature(&verifier, &good, now);
        assert_eq!((claims.unwrap().exp, lookup), (Some(4_600), Lookup::Hit));

        // Change the signature's first character: every bit of it is signature (the last
        // character's low bits are padding a lenient decoder ignores).
        let at = good.rfind('.').unwrap() + 1;
        let other = if good[at..].starts_with('A') {
            "B"
        } else {
            "A"
        };
        let tampered = format!("{}{other}{}", &good[..at], &good[at + 1..]);
        for _ in 0..3 {
            let (result, lookup) = cache.verify_signature(&verifier, &tampered, now);
            assert_eq!(
                (result.unwrap_err(), lookup),
                (TokenError::Signature, Lookup::Miss)
            );
        }
        // A token already past exp + leeway is verified but not kept.
        let old = token(&key, 900);
        for _ in 0..3 {
            assert_eq!(cache.verify_signature(&verifier, &old, now).1, Lookup::Miss);
        }

        // Size 0 turns the cache off: every review verifies the signature.
        let off = SignatureCache::new(0);
        for _ in 0..3 {
            let (claims, lookup) = off.verify_signature(&verifier, &good, now);
            assert_eq!((claims.unwrap().exp, lookup), (Some(4_600), Lookup::Miss));
        }
    }

    #[test]
    fn the_doorkeeper_admits_on_the_second_sighting_and_forgets_when_a_slot_is_reused() {
        let seen = Doorkeeper::for_capacity(16);
        assert_eq!(seen.slots.len(), 1024);
        let digest = |first: u64, second: u64| {
            let mut d = [0u8; 32];
            d[..8].copy_from_slice(&first.to_le_bytes());
            d[8..16].copy_from_slice(&second.to_le_bytes());
            d
        };
        let a = digest(7, 100);
        assert!(!seen.seen_before(&a));
        assert!(seen.seen_before(&a));
        assert!(seen.seen_before(&a));

        // Another token in the same slot (same low bits, another fingerprint) takes it over:
        // the first is a first sighting again.
        let b = digest(7 + 1024, 200);
        assert!(!seen.seen_before(&b));
        assert!(!seen.seen_before(&a));
        // A token in another slot leaves it alone.
        assert!(!seen.seen_before(&digest(8, 100)));
        assert!(seen.seen_before(&a));

        // Off: nothing is ever admitted.
        let off = Doorkeeper::for_capacity(0);
        assert!(!off.seen_before(&a));
        assert!(!off.seen_before(&a));
    }
}
