//! The HSM key store's metrics. `op` is `open`, `login`, `generate`, `import`, `find`, `sign`,
//! `destroy` or `reopen`.
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_hsm_operations_total{op,result}` | counter | PKCS#11 operations, by `result`: `ok`, `unavailable` (the token's sessions are being reopened), `session_lost`, `pin`, `no_token`, `missing`, `exists`, `unsuitable`, `bad_key`, `bad_signature`, `module`, `config`, `thread`, `pkcs11_error` |
//! | `warrant_hsm_operation_duration_seconds{op}` | histogram | time per operation, including the wait for a free session |
//! | `warrant_hsm_sessions_in_use` | gauge | sessions held by an operation now |
//! | `warrant_hsm_sessions_open` | gauge | sessions open (idle or in use) |

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tokio::time::Instant;

use crate::error::HsmError;

type Labels1 = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, &'static str); 2];

/// Counters and histograms of the HSM key store. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct HsmMetrics {
    operations: Family<Labels2, Counter>,
    duration: Family<Labels1, Histogram>,
    in_use: Gauge,
    open: Gauge,
}

impl Default for HsmMetrics {
    fn default() -> Self {
        HsmMetrics {
            operations: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 50 µs to ~1.6 s: SoftHSM2 signs ES256 in tens of µs, RSA in about a ms; a
                // network HSM takes milliseconds; RSA key generation up to seconds.
                Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
            }),
            in_use: Gauge::default(),
            open: Gauge::default(),
        }
    }
}

impl HsmMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "warrant_hsm_operations",
            "PKCS#11 operations on the HSM key store, by operation and result",
            self.operations.clone(),
        );
        registry.register_with_unit(
            "warrant_hsm_operation_duration",
            "Time per PKCS#11 operation, including the wait for a session, by operation",
            Unit::Seconds,
            self.duration.clone(),
        );
        registry.register(
            "warrant_hsm_sessions_in_use",
            "PKCS#11 sessions held by an operation",
            self.in_use.clone(),
        );
        registry.register(
            "warrant_hsm_sessions_open",
            "PKCS#11 sessions open, idle or in use",
            self.open.clone(),
        );
    }

    pub(crate) fn observe<T>(
        &self,
        op: &'static str,
        result: &Result<T, HsmError>,
        started: Instant,
    ) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(err) => err.kind(),
        };
        self.operations
            .get_or_create(&[("op", op), ("result", outcome)])
            .inc();
        self.duration
            .get_or_create(&[("op", op)])
            .observe(started.elapsed().as_secs_f64());
    }

    pub(crate) fn session_taken(&self) {
        self.in_use.inc();
    }

    pub(crate) fn session_returned(&self) {
        self.in_use.dec();
    }

    pub(crate) fn session_opened(&self) {
        self.open.inc();
    }

    pub(crate) fn session_closed(&self) {
        self.open.dec();
    }

    /// Sessions held by an operation now (for tests and diagnostics).
    pub fn sessions_in_use(&self) -> i64 {
        self.in_use.get()
    }

    /// Sessions open now.
    pub fn sessions_open(&self) -> i64 {
        self.open.get()
    }
}
