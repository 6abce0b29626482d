//! The one place warrant reads the clock. Everything else takes `now` as a parameter; the server
//! asks its [`Clock`] once per request, and tests give it a clock they set.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use jiff::Timestamp;

/// The server's source of `now`.
#[derive(Debug, Clone)]
pub enum Clock {
    /// The system clock.
    System,
    /// A clock tests set, in nanoseconds since the epoch.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A manual clock starting at `start`.
    pub fn manual(start: Timestamp) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(nanos(start))))
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        match self {
            #[allow(clippy::disallowed_methods)] // the one sanctioned read of the system clock
            Clock::System => Timestamp::now(),
            Clock::Manual(t) => Timestamp::from_nanosecond(i128::from(t.load(Ordering::Relaxed)))
                .unwrap_or(Timestamp::UNIX_EPOCH),
        }
    }

    /// Sets a manual clock; no effect on the system clock.
    pub fn set(&self, to: Timestamp) {
        if let Clock::Manual(t) = self {
            t.store(nanos(to), Ordering::Relaxed);
        }
    }
}

fn nanos(t: Timestamp) -> i64 {
    i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX)
}
