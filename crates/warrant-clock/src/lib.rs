//! The one place warrant reads the wall clock. Everything else takes `now` as a parameter or
//! holds a [`Clock`]: the server asks it once per request, the key manager and the objects
//! file once per decision, and tests give every one of them a clock they set.
//!
//! A crate of its own, below all the others, so that any crate can take a clock without
//! depending on the one that serves HTTP. (The watch cache's staleness is measured on tokio's
//! monotonic clock instead, `warrant_objects::CacheClock`: a wall clock that jumps must not
//! make a cache stale or fresh.)

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::Timestamp;

/// warrant's source of `now`. Cheap to clone; clones of a manual clock share its time.
#[derive(Debug, Clone)]
pub enum Clock {
    /// The system clock.
    System,
    /// A clock tests set, in nanoseconds since the epoch.
    Manual(Arc<AtomicI64>),
    /// Wall time that follows tokio's clock from a starting point: in a test whose runtime's
    /// time is paused, it moves exactly as far as the runtime's timers have advanced it, so
    /// code that sleeps until a wall-clock deadline wakes at that deadline, to the millisecond.
    FollowsTokio {
        /// The wall time at `since`.
        start: Timestamp,
        /// tokio's instant when the clock was made.
        since: tokio::time::Instant,
    },
}

impl Clock {
    /// A manual clock starting at `start`.
    pub fn manual(start: Timestamp) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(nanos(start))))
    }

    /// A clock at `start` now, that tokio's clock moves (see [`Clock::FollowsTokio`]).
    pub fn follows_tokio(start: Timestamp) -> Self {
        Clock::FollowsTokio {
            start,
            since: tokio::time::Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        match self {
            Clock::FollowsTokio { start, since } => jiff::SignedDuration::try_from(since.elapsed())
                .ok()
                .and_then(|elapsed| start.checked_add(elapsed).ok())
                .unwrap_or(*start),
            #[allow(clippy::disallowed_methods)] // the one sanctioned read of the system clock
            Clock::System => Timestamp::now(),
            Clock::Manual(t) => Timestamp::from_nanosecond(i128::from(t.load(Ordering::Relaxed)))
                .unwrap_or(Timestamp::UNIX_EPOCH),
        }
    }

    /// Sets a manual clock (and its clones); no effect on the others.
    pub fn set(&self, to: Timestamp) {
        if let Clock::Manual(t) = self {
            t.store(nanos(to), Ordering::Relaxed);
        }
    }

    /// Moves a manual clock (and its clones) forward by `seconds`; no effect on the others.
    pub fn advance(&self, seconds: i64) {
        if let Clock::Manual(t) = self {
            t.fetch_add(seconds.saturating_mul(1_000_000_000), Ordering::Relaxed);
        }
    }
}

fn nanos(t: Timestamp) -> i64 {
    i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_manual_clock_and_its_clones_move_together() {
        let clock = Clock::manual(Timestamp::from_second(1_000).unwrap());
        let clone = clock.clone();
        clock.advance(30);
        assert_eq!(clone.now().as_second(), 1_030);
        clone.set(Timestamp::from_second(5).unwrap());
        assert_eq!(clock.now().as_second(), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_that_follows_tokio_moves_with_its_paused_time() {
        let clock = Clock::follows_tokio(Timestamp::from_second(1_000).unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
        assert_eq!(clock.now().as_millisecond(), 1_001_500);
    }

    #[test]
    fn the_system_clock_is_not_set_by_tests() {
        let clock = Clock::System;
        clock.set(Timestamp::UNIX_EPOCH);
        assert!(clock.now() > Timestamp::UNIX_EPOCH);
    }
}
