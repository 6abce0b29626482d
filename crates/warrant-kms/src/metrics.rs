//! The KMS holder's metrics: its calls, counted in the families every key holder shares
//! (warrant-keys' [`HolderOperations`]) with `holder="aws-kms"`, so one dashboard panel and one
//! alert cover a PKCS#11 token and KMS alike.
//!
//! | name | labels | what |
//! |---|---|---|
//! | `warrant_hsm_operations_total` | `holder="aws-kms"`, `op`, `result` | KMS calls. `op` is the KMS operation (`create_key`, `get_public_key`, `tag_resource`, `describe_key`, `list_resource_tags`, `sign`, `disable_key`, `schedule_key_deletion`, `get_parameters_for_import`, `import_key_material`) or `probe` (the recovery task's); `result` is `ok`, `unreachable`, `throttled` (still throttled at the deadline), `credentials`, `unavailable` (refused at once while KMS is being probed), `disabled` (the key is disabled or pending deletion), `not_found`, `access_denied`, `unsuitable`, `not_held`, `locator`, `bad_answer`, `bad_signature` (a signature that does not verify with the recorded public key: refused), `kms_error`, `bad_key`, `thread` or `config` |
//! | `warrant_hsm_operation_duration_seconds` | `holder="aws-kms"`, `op` | time per call, including the wait for one of `--kms-concurrency` places, retries and backoff |
//! | `warrant_kms_revoked_keys_enabled` | | keys this process disposed of as revoked or removed that KMS says are enabled, at the last look (`revoked.rs`) |

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use warrant_keys::HolderOperations;

/// The KMS holder's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct KmsMetrics {
    operations: HolderOperations,
    revoked_enabled: Gauge,
}

impl Default for KmsMetrics {
    fn default() -> Self {
        KmsMetrics {
            operations: HolderOperations::new("aws-kms"),
            revoked_enabled: Gauge::default(),
        }
    }
}

impl KmsMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        self.operations.register(registry);
        registry.register(
            "warrant_kms_revoked_keys_enabled",
            "Keys disposed of as revoked or removed from the key set that AWS KMS says are enabled",
            self.revoked_enabled.clone(),
        );
    }

    /// Counts one call.
    pub(crate) fn observe(&self, op: &'static str, result: &'static str, seconds: f64) {
        self.operations.observe(op, result, seconds);
    }

    /// Sets how many revoked or removed keys KMS says are enabled.
    pub(crate) fn revoked_keys_enabled(&self, count: usize) {
        self.revoked_enabled
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// How many revoked or removed keys KMS said were enabled at the last look.
    pub fn revoked_keys_enabled_now(&self) -> i64 {
        self.revoked_enabled.get()
    }

    /// How many `op` calls ended with `result` (for tests and diagnostics).
    pub fn count(&self, op: &'static str, result: &'static str) -> u64 {
        self.operations.count(op, result)
    }
}
