//! What the key crate's tests share: a fixed start time and a rotation policy that is quick to
//! run (P-256 keys, a week's rotation, a day's publish-ahead and token lifetime).

use jiff::Timestamp;
use warrant_token::KeyType;

use crate::lifecycle::RotationPolicy;

/// The tests' "now" at the start: 2027-01-15.
pub(crate) const T0: i64 = 1_800_000_000;
pub(crate) const HOUR: i64 = 3600;
pub(crate) const DAY: i64 = 24 * HOUR;

/// The instant `second` seconds after the epoch.
pub(crate) fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// P-256 keys rotated weekly, published a day ahead, for tokens of at most a day.
pub(crate) fn policy() -> RotationPolicy {
    RotationPolicy {
        key_type: KeyType::P256,
        rotation_period_seconds: 7 * DAY,
        publish_ahead_seconds: DAY,
        max_token_seconds: DAY,
    }
}
