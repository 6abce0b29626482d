//! When a token is due for a new one, written once for the credential plugin's cache and the
//! token agent: at 80 % of its lifetime (the kubelet's rule for projected tokens), the agent's
//! a little earlier by a random share, so that pods started together do not all ask again in
//! the same second; and how long to wait after a failure before asking again.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The share of a token's lifetime after which it is replaced.
pub(crate) const REFRESH_SHARE: f64 = 0.8;
/// How much earlier than [`REFRESH_SHARE`] the agent may refresh, at random: up to 5 % of the
/// lifetime (three minutes of an hour's token).
pub(crate) const JITTER_SHARE: f64 = 0.05;
/// The first wait after a failure; each further failure doubles it, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The moment `share` of the lifetime from `issued_at` to `expires` has passed.
pub(crate) fn point_in_lifetime(issued_at: Timestamp, expires: Timestamp, share: f64) -> Timestamp {
    let lifetime = expires.duration_since(issued_at).as_secs_f64().max(0.0);
    SignedDuration::try_from_secs_f64(lifetime * share)
        .ok()
        .and_then(|elapsed| issued_at.checked_add(elapsed).ok())
        .unwrap_or(issued_at)
}

/// When the agent refreshes a token: between 75 % and 80 % of its lifetime, `jitter` (in
/// `[0, 1)`) choosing where.
pub(crate) fn refresh_at(issued_at: Timestamp, expires: Timestamp, jitter: f64) -> Timestamp {
    point_in_lifetime(
        issued_at,
        expires,
        REFRESH_SHARE - JITTER_SHARE * jitter.clamp(0.0, 1.0),
    )
}

/// The wait after the `failures`-th failure in a row (1 for the first): 1 s doubling to
/// [`MAX_BACKOFF`], of which `jitter` (in `[0, 1)`) takes between half and all, so agents that
/// failed together do not retry together.
pub(crate) fn backoff(failures: u32, jitter: f64) -> Duration {
    let doubled = FIRST_BACKOFF.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    let ceiling = doubled.min(MAX_BACKOFF);
    ceiling.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// A random share in `[0, 1)`, from the system's generator.
pub(crate) fn jitter() -> f64 {
    let mut bytes = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn a_token_is_refreshed_between_three_quarters_and_four_fifths_of_its_life() {
        assert_eq!(refresh_at(at(1000), at(4600), 0.0), at(1000 + 2880));
        assert_eq!(
            refresh_at(at(1000), at(4600), 0.999_999).as_second(),
            1000 + 2700
        );
        let middle = refresh_at(at(1000), at(4600), 0.5);
        assert!(middle > at(3700) && middle < at(3880), "{middle}");
        // A token that expires before it was issued (a broken clock) is due at once.
        assert_eq!(refresh_at(at(1000), at(900), 0.3), at(1000));
    }

    #[test]
    fn failures_back_off_doubling_to_a_minute() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n, 0.999).as_secs()).collect();
        assert_eq!(waits, [0, 1, 3, 7, 15, 31, 59, 59, 59]);
        assert_eq!(backoff(1, 0.0), Duration::from_millis(500));
        assert_eq!(backoff(40, 0.0), Duration::from_secs(30));
        assert_eq!(backoff(u32::MAX, 1.0), MAX_BACKOFF);
    }

    #[test]
    fn jitter_is_a_share() {
        for _ in 0..1000 {
            let j = jitter();
            assert!((0.0..1.0).contains(&j), "{j}");
        }
    }
}
