//! The HSM key store's metrics. The operations are counted in the families every key holder
//! shares (warrant-keys' [`HolderOperations`]), with `holder="pkcs11"`. `op` is `open`,
//! `login`, `generate`, `import`, `find`, `vouch`, `sign`, `destroy`, `restrict` or `reopen`.
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_hsm_operations_total{holder="pkcs11",op,result}` | counter | PKCS#11 operations, by `result`: `ok`, `unavailable` (the token's sessions are being reopened), `session_lost`, `pin`, `no_token`, `missing`, `not_held`, `exists`, `unsuitable`, `bad_key`, `bad_signature`, `module`, `config`, `thread`, `pkcs11_error` |
//! | `warrant_hsm_operation_duration_seconds{holder="pkcs11",op}` | histogram | time per operation, including the wait for a free session |
//! | `warrant_hsm_sessions_in_use` | gauge | sessions held by an operation now |
//! | `warrant_hsm_sessions_open` | gauge | sessions open (idle or in use) |

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use warrant_keys::HolderOperations;

use crate::error::HsmError;

/// Counters and histograms of the HSM key store. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct HsmMetrics {
    operations: HolderOperations,
    in_use: Gauge,
    open: Gauge,
}

impl Default for HsmMetrics {
    fn default() -> Self {
        HsmMetrics {
            operations: HolderOperations::new("pkcs11"),
            in_use: Gauge::default(),
            open: Gauge::default(),
        }
    }
}

impl HsmMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        self.operations.register(registry);
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
            .observe(op, outcome, started.elapsed().as_secs_f64());
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
