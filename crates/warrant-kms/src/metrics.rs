//! The KMS holder's metrics: its calls, counted in the families every key holder shares
//! (warrant-keys' [`HolderOperations`]) with `holder="aws-kms"`, so one dashboard panel and one
//! alert cover a PKCS#11 token and KMS alike.
//!
//! | name | labels | what |
//! |---|---|---|
//! | `warrant_hsm_operations_total` | `holder="aws-kms"`, `op`, `result` | KMS calls. `op` is the KMS operation (`create_key`, `get_public_key`, `tag_resource`, `describe_key`, `list_resource_tags`, `sign`, `disable_key`, `schedule_key_deletion`, `get_parameters_for_import`, `import_key_material`) or `probe` (the recovery task's); `result` is `ok`, `unreachable`, `throttled` (still throttled at the deadline), `credentials`, `unavailable` (refused at once while KMS is being probed), `disabled` (the key is disabled or pending deletion), `not_found`, `access_denied`, `unsuitable`, `not_held`, `locator`, `bad_answer`, `kms_error`, `bad_key`, `thread` or `config` |
//! | `warrant_hsm_operation_duration_seconds` | `holder="aws-kms"`, `op` | time per call, including the wait for one of `--kms-concurrency` places, retries and backoff |

use prometheus_client::registry::Registry;
use warrant_keys::HolderOperations;

/// The KMS holder's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct KmsMetrics {
    operations: HolderOperations,
}

impl Default for KmsMetrics {
    fn default() -> Self {
        KmsMetrics {
            operations: HolderOperations::new("aws-kms"),
        }
    }
}

impl KmsMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        self.operations.register(registry);
    }

    /// Counts one call.
    pub(crate) fn observe(&self, op: &'static str, result: &'static str, seconds: f64) {
        self.operations.observe(op, result, seconds);
    }

    /// How many `op` calls ended with `result` (for tests and diagnostics).
    pub fn count(&self, op: &'static str, result: &'static str) -> u64 {
        self.operations.count(op, result)
    }
}
