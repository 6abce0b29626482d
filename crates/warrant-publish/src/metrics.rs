//! Prometheus metrics for publishing (prefix `warrant_publish_`). The `target` label is a
//! target's URL as the operator gave it (a handful per process, never credentials); `reason`
//! comes from a fixed set ([`Reason`](crate::Reason)).

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabels {
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    target: String,
    reason: &'static str,
}

/// Publishing's metrics. Cheap to clone; clones share the values.
#[derive(Debug, Clone, Default)]
pub struct PublishMetrics {
    last_success: Family<TargetLabels, Gauge>,
    failures: Family<FailureLabels, Counter>,
    bytes_written: Family<TargetLabels, Counter>,
    failing: Family<TargetLabels, Gauge>,
}

impl PublishMetrics {
    /// New metrics, not registered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the metrics. Call it once per registry.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "warrant_publish_last_success_timestamp_seconds",
            "When each publish target last held (as read back) the documents this process serves",
            self.last_success.clone(),
        );
        registry.register(
            "warrant_publish_failures",
            "Failed publish rounds by target and reason (read, write, read_back, missing, documents)",
            self.failures.clone(),
        );
        registry.register(
            "warrant_publish_written_bytes",
            "Bytes written to each publish target (only documents whose bytes changed are written)",
            self.bytes_written.clone(),
        );
        registry.register(
            "warrant_publish_failing",
            "1 while publishing to the target fails (readiness's publish line says why), else 0",
            self.failing.clone(),
        );
    }

    pub(crate) fn succeeded(&self, target: &str, now: Timestamp) {
        let labels = TargetLabels {
            target: target.to_owned(),
        };
        self.last_success
            .get_or_create(&labels)
            .set(now.as_second());
        self.failing.get_or_create(&labels).set(0);
    }

    pub(crate) fn failed(&self, target: &str, reason: &'static str) {
        self.failures
            .get_or_create(&FailureLabels {
                target: target.to_owned(),
                reason,
            })
            .inc();
        self.failing
            .get_or_create(&TargetLabels {
                target: target.to_owned(),
            })
            .set(1);
    }

    pub(crate) fn written(&self, target: &str, bytes: usize) {
        self.bytes_written
            .get_or_create(&TargetLabels {
                target: target.to_owned(),
            })
            .inc_by(u64::try_from(bytes).unwrap_or(u64::MAX));
    }
}
