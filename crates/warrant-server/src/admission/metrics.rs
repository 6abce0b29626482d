//! The webhook's metric: reviews answered, by result.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    result: &'static str,
}

/// The webhook's metric.
#[derive(Debug, Default)]
pub(crate) struct AdmissionMetrics {
    reviews: Family<OutcomeLabels, Counter>,
}

impl AdmissionMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = AdmissionMetrics::default();
        registry.register(
            "warrant_admission_reviews",
            "Pod admission reviews answered by token injection, by result (mutated, unchanged, refused, error)",
            metrics.reviews.clone(),
        );
        metrics
    }

    /// One review answered, with `result` (an outcome's label).
    pub(super) fn count(&self, result: &'static str) {
        self.reviews.get_or_create(&OutcomeLabels { result }).inc();
    }
}
