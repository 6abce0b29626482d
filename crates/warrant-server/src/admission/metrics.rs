//! The webhook's metrics (docs/injection.md, "Metrics"; the alerts in docs/alerts.md):
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_admission_reviews_total{result}` | counter | reviews answered: `mutated`, `unchanged`, `refused` (the pod, `allowed: false`), `error` (a `Status`: kube-apiserver applies the `failurePolicy`) |
//! | `warrant_admission_limited_total{limit}` | counter | reviews answered with an error because they passed a bound: `in_flight`, `review_bytes`, `review_values`, `containers`, `patch_bytes`, `caller` (not an allowed name) |
//! | `warrant_admission_lookups_total{result}` | counter | ServiceAccount lookups: `cached`, `not_in_cache` (a caller that may not cost a GET), `remembered_absent`, `found`, `not_found`, `error`, `overloaded` (refused: admission's live lookups were all in flight) |
//! | `warrant_admission_lookups_in_flight` | gauge | admission's live ServiceAccount lookups running |
//! | `warrant_admission_anonymous_allowed` | gauge | 1 while `/mutate/pods` answers callers without a client certificate (`--injection-allow-anonymous`), else 0 |

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

/// The webhook's metrics.
#[derive(Debug, Default)]
pub(crate) struct AdmissionMetrics {
    reviews: Family<OutcomeLabels, Counter>,
    limited: Family<LimitLabels, Counter>,
    lookups: Family<OutcomeLabels, Counter>,
    anonymous_allowed: Gauge,
}

impl AdmissionMetrics {
    pub(crate) fn register(
        registry: &mut Registry,
        lookups_in_flight: prometheus_client::metrics::gauge::Gauge,
    ) -> Self {
        let metrics = AdmissionMetrics::default();
        registry.register(
            "warrant_admission_reviews",
            "Pod admission reviews answered by token injection, by result (mutated, unchanged, refused, error)",
            metrics.reviews.clone(),
        );
        registry.register(
            "warrant_admission_limited",
            "Admission reviews answered with an error for passing one of the webhook's bounds, by bound",
            metrics.limited.clone(),
        );
        registry.register(
            "warrant_admission_lookups",
            "ServiceAccount lookups of admission reviews, by result",
            metrics.lookups.clone(),
        );
        registry.register(
            "warrant_admission_lookups_in_flight",
            "Live ServiceAccount lookups of admission reviews running now",
            lookups_in_flight,
        );
        registry.register(
            "warrant_admission_anonymous_allowed",
            "1 while the token injection webhook answers callers without a client certificate (--injection-allow-anonymous)",
            metrics.anonymous_allowed.clone(),
        );
        metrics
    }

    /// One review answered, with `result` (an outcome's label).
    pub(super) fn count(&self, result: &'static str) {
        self.reviews.get_or_create(&OutcomeLabels { result }).inc();
    }

    /// One review stopped by the bound `limit`.
    pub(super) fn limited(&self, limit: &'static str) {
        self.limited.get_or_create(&LimitLabels { limit }).inc();
    }

    /// Whether callers without a client certificate are answered now.
    pub(crate) fn anonymous_allowed(&self, allowed: bool) {
        self.anonymous_allowed.set(i64::from(allowed));
    }

    /// One ServiceAccount lookup, with its `result`.
    pub(super) fn lookup(&self, result: &'static str) {
        self.lookups.get_or_create(&OutcomeLabels { result }).inc();
    }
}
