//! Prometheus metrics for the API. Label values are static strings chosen from small fixed sets,
//! so recording a request allocates nothing and the series count stays bounded.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    method: &'static str,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IssueLabels {
    binding: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    git_commit: &'static str,
    platform: &'static str,
}

/// The outcome of a TokenReview, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewResult {
    /// Valid.
    Authenticated,
    /// Ours, and invalid (expired, revoked, wrong audience, bad signature, …).
    Invalid,
    /// Not a token of ours at all.
    NotMine,
    /// Could not be decided: an object source was unavailable.
    Unavailable,
}

impl ReviewResult {
    fn label(self) -> &'static str {
        match self {
            ReviewResult::Authenticated => "authenticated",
            ReviewResult::Invalid => "invalid",
            ReviewResult::NotMine => "not_mine",
            ReviewResult::Unavailable => "unavailable",
        }
    }
}

/// The API's metrics.
#[derive(Debug)]
pub struct Metrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram>,
    issued: Family<IssueLabels, Counter>,
    reviews: Family<ReviewLabels, Counter>,
    stale: Counter,
    signatures: Family<CacheLabels, Counter>,
}

impl Metrics {
    /// Creates the metrics and registers them (prefix `warrant_`).
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
            }),
            issued: Family::default(),
            reviews: Family::default(),
            stale: Counter::default(),
            signatures: Family::default(),
        };
        registry.register(
            "warrant_http_requests",
            "HTTP requests by route, method and status code",
            metrics.requests.clone(),
        );
        registry.register(
            "warrant_http_request_duration_seconds",
            "Time to answer an HTTP request, by route",
            metrics.durations.clone(),
        );
        registry.register(
            "warrant_tokens_issued",
            "Tokens issued, by the kind of object they are bound to",
            metrics.issued.clone(),
        );
        registry.register(
            "warrant_token_reviews",
            "Tokens reviewed, by result",
            metrics.reviews.clone(),
        );
        registry.register(
            "warrant_stale_tokens",
            "Extended tokens used after their warnafter time (the client should have refreshed them)",
            metrics.stale.clone(),
        );
        registry.register(
            "warrant_signature_cache_lookups",
            "Token signatures looked up in the verified-signature cache, by result (hit or miss)",
            metrics.signatures.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: crate::build::VERSION,
                git_commit: crate::build::GIT_COMMIT,
                platform: crate::build::PLATFORM,
            })
            .set(1);
        registry.register_collector(Box::new(crate::process::ProcessCollector));
        registry.register(
            "warrant_build_info",
            "warrant's version, git commit and platform",
            build,
        );
        metrics
    }

    /// Counts an issued token.
    pub fn token_issued(&self, binding: &'static str) {
        self.issued.get_or_create(&IssueLabels { binding }).inc();
    }

    /// Counts a review.
    pub fn token_reviewed(&self, result: ReviewResult, stale: bool) {
        self.reviews
            .get_or_create(&ReviewLabels {
                result: result.label(),
            })
            .inc();
        if stale {
            self.stale.inc();
        }
    }

    /// Counts a verified-signature cache lookup.
    pub(crate) fn signature_lookup(&self, lookup: warrant_issuer::Lookup) {
        let result = match lookup {
            warrant_issuer::Lookup::Hit => "hit",
            warrant_issuer::Lookup::Miss => "miss",
        };
        self.signatures.get_or_create(&CacheLabels { result }).inc();
    }

    pub(crate) fn request(
        &self,
        route: &'static str,
        method: &'static str,
        code: u16,
        elapsed: Duration,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                route,
                method,
                code,
            })
            .inc();
        self.durations
            .get_or_create(&RouteLabels { route })
            .observe(elapsed.as_secs_f64());
    }
}
