//! How the key store has answered lately ([`StoreHealth`]), and how the manager records each
//! failure and recovery: in logs, in metrics, and for readiness reports.

use jiff::Timestamp;

use super::KeyManager;
use crate::store::KeyStore;

/// How the key store has answered lately: what `/readyz?verbose` and the metric
/// `warrant_keys_store_stale_since_timestamp_seconds` report. The keys in force never depend on
/// it (they stay when the store fails, and their schedule goes on by time alone); it says how
/// fresh they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreHealth {
    /// When reads or writes began to fail; `None` while the last one succeeded.
    pub failing_since: Option<Timestamp>,
    /// The last failure, as logged (it names the store, never key material).
    pub last_error: Option<String>,
    /// When the store last answered a read or a write.
    pub last_success: Option<Timestamp>,
}

impl StoreHealth {
    /// One line for a readiness report at `now`: `ok` and when the store last answered (how old
    /// this replica's view of it is), or since when the store fails, why, and which keys are
    /// served meanwhile.
    pub fn summary(&self, now: Timestamp) -> String {
        match (&self.failing_since, self.last_success) {
            (None, Some(read)) => format!("ok, last read at {}", at_ago(read, now)),
            (None, None) => "ok".to_owned(),
            (Some(since), read) => {
                let serving = read.map_or_else(
                    || "serving the keys it started with (a local copy): the store has not answered since".to_owned(),
                    |t| format!("serving the keys last read at {}", at_ago(t, now)),
                );
                format!(
                    "stale since {since}: {}; {serving}",
                    self.last_error.as_deref().unwrap_or("unknown error")
                )
            }
        }
    }

    /// Records a failure at `now`; true if the store was answering until now.
    fn failed(&mut self, now: Timestamp, error: &dyn std::fmt::Display) -> bool {
        self.last_error = Some(error.to_string());
        let started = self.failing_since.is_none();
        self.failing_since.get_or_insert(now);
        started
    }

    /// Records a success at `now`; true if the store was failing until now.
    fn succeeded(&mut self, now: Timestamp) -> bool {
        self.last_success = Some(now);
        self.last_error = None;
        self.failing_since.take().is_some()
    }
}

/// `t`, and how long before `now` it was, for a readiness report: `2026-01-01T00:00:00Z (42 s
/// ago)`.
pub(crate) fn at_ago(t: Timestamp, now: Timestamp) -> String {
    format!(
        "{t} ({} s ago)",
        now.as_second().saturating_sub(t.as_second())
    )
}

impl<S: KeyStore> KeyManager<S> {
    /// Records a failure of the store: logged as an error when it starts, quietly while it
    /// lasts (it is retried every few seconds), and reported in health and metrics.
    pub(super) fn store_failed(&self, now: Timestamp, error: &dyn std::fmt::Display, what: &str) {
        let mut started = false;
        self.health.send_modify(|h| started = h.failed(now, error));
        if started {
            tracing::error!(%error, "{what}");
        } else {
            tracing::debug!(%error, "{what}");
        }
        self.metrics.store_health(&self.health.borrow());
    }

    /// Records that the store answered.
    pub(super) fn store_answered(&self, now: Timestamp) {
        let mut recovered = false;
        let mut since = None;
        self.health.send_modify(|h| {
            since = h.failing_since;
            recovered = h.succeeded(now);
        });
        if recovered {
            tracing::info!(store = %self.store.describe(), failing_since = %since.map(|t| t.to_string()).unwrap_or_default(), "the key store answers again");
            self.metrics.store_health(&self.health.borrow());
        }
    }
}
