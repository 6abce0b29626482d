//! Whether a key holder can be called now: every holder (a PKCS#11 token, AWS KMS) reports
//! one [`Health`], and says how it is to be brought back ([`RecoveryPolicy`]) and what an
//! attempt came to ([`Recovery`]). The loop that uses them is
//! [`keep_healthy`](crate::keep_healthy), beside the holder's trait.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Whether a holder can be called now.
#[derive(Debug, Clone)]
pub enum Health {
    /// It answered (sessions open and logged in; KMS answered the last call).
    Healthy,
    /// Not now; `cause` says why ([`keep_healthy`] is working on it unless the holder gave up,
    /// as a token does on a refused PIN).
    Unavailable {
        /// The holder, as messages name it: `token pkcs11:token=warrant`.
        holder: String,
        /// What broke it.
        cause: Arc<dyn Error + Send + Sync>,
    },
}

impl Health {
    /// True when the holder can be called.
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy)
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Health::Healthy => f.write_str("healthy"),
            Health::Unavailable { holder, cause } => write!(f, "{holder}: {cause}"),
        }
    }
}

/// How [`keep_healthy`] waits. Each holder has its own default
/// ([`KeyHolder::recovery_policy`]); [`Default`] is the PKCS#11 token's.
#[derive(Debug, Clone, Copy)]
pub struct RecoveryPolicy {
    /// The first wait after a failed attempt at recovery; doubled after each failure.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// How often a healthy holder is probed, so that what broke while idle shows in readiness
    /// before a request needs it.
    pub probe_interval: Duration,
}

impl Default for RecoveryPolicy {
    fn default() -> Self {
        RecoveryPolicy {
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(30),
            probe_interval: Duration::from_secs(10),
        }
    }
}

/// What one [`KeyHolder::recover`] attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The holder can be called again.
    Recovered,
    /// Not yet: try again after the backoff.
    NotYet,
    /// Never: trying again cannot help (a refused PIN), or the runtime is shutting down.
    GiveUp,
}
