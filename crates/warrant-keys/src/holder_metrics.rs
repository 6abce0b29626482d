//! The operations of a key holder (a PKCS#11 token, AWS KMS), counted by holder, operation and
//! result, with their latency: one pair of metric families for every holder, so a dashboard
//! panel and an alert cover whichever holder a deployment uses.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `warrant_hsm_operations_total` | counter | `holder` (`pkcs11`, `aws-kms`), `op`, `result` (`ok`, or the holder's short name for what failed) |
//! | `warrant_hsm_operation_duration_seconds` | histogram | `holder`, `op` |
//!
//! The names are the PKCS#11 key store's, which came first; `holder` tells the two apart.
//! Each holder documents its `op` and `result` values (warrant-hsm's and warrant-kms's
//! `metrics.rs`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

type Labels2 = [(&'static str, &'static str); 2];
type Labels3 = [(&'static str, &'static str); 3];

/// One holder's operations and their latency. Cheap to clone; clones share the values.
#[derive(Debug, Clone)]
pub struct HolderOperations {
    holder: &'static str,
    operations: Family<Labels3, Counter>,
    duration: Family<Labels2, Histogram>,
}

impl HolderOperations {
    /// The operations of the holder labelled `holder` (`pkcs11`, `aws-kms`).
    pub fn new(holder: &'static str) -> Self {
        HolderOperations {
            holder,
            operations: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 50 µs to ~1.6 s: SoftHSM2 signs ES256 in tens of µs, RSA in about a ms; a
                // network HSM or a cloud KMS takes milliseconds; key generation up to seconds.
                Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
            }),
        }
    }

    /// The holder's label.
    pub fn holder(&self) -> &'static str {
        self.holder
    }

    /// Registers the two families in `registry` (once per registry: a process has one holder).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "warrant_hsm_operations",
            "Operations on the key holder (a PKCS#11 token or AWS KMS), by holder, operation and result",
            self.operations.clone(),
        );
        registry.register_with_unit(
            "warrant_hsm_operation_duration",
            "Time per operation on the key holder, including any wait for a session or a retry, by holder and operation",
            Unit::Seconds,
            self.duration.clone(),
        );
    }

    /// Counts one `op` that ended with `result` (`ok`, or a short name for the failure) after
    /// `seconds`.
    pub fn observe(&self, op: &'static str, result: &'static str, seconds: f64) {
        self.operations
            .get_or_create(&[("holder", self.holder), ("op", op), ("result", result)])
            .inc();
        self.duration
            .get_or_create(&[("holder", self.holder), ("op", op)])
            .observe(seconds);
    }

    /// How many `op` ended with `result` (for tests and diagnostics).
    pub fn count(&self, op: &'static str, result: &'static str) -> u64 {
        self.operations
            .get_or_create(&[("holder", self.holder), ("op", op), ("result", result)])
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_labelled_by_holder_first() {
        let ops = HolderOperations::new("aws-kms");
        ops.observe("sign", "ok", 0.01);
        ops.observe("sign", "ok", 0.02);
        ops.observe("sign", "throttled", 1.0);
        let mut registry = Registry::default();
        ops.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"warrant_hsm_operations_total{holder="aws-kms",op="sign",result="ok"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"warrant_hsm_operation_duration_seconds_count{holder="aws-kms",op="sign"} 3"#
            ),
            "{text}"
        );
        assert_eq!(ops.count("sign", "throttled"), 1);
    }
}
