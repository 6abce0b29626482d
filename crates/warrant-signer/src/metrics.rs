//! The signer's metrics. `rpc` is `Sign`, `FetchKeys` or `Metadata`.
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_signer_requests_total{rpc,result}` | counter | calls, by `result`: `ok`, or the reason a call was refused (`not_base64url`, `not_json_object`, `oversized`, `wrong_issuer`, `no_exp`, `exp_beyond_max`, `sign_failed`) |
//! | `warrant_signer_request_duration_seconds{rpc}` | histogram | time to answer |

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

type Labels1 = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, &'static str); 2];

/// The counters and histograms of the signer service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SignerMetrics {
    requests: Family<Labels2, Counter>,
    duration: Family<Labels1, Histogram>,
}

impl Default for SignerMetrics {
    fn default() -> Self {
        SignerMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| {
                // 50 µs to ~1.6 s: an ES256 signature takes tens of µs, RS256 about a ms.
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.000_05, 2.0, 16,
                ))
            }),
        }
    }
}

impl SignerMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "warrant_signer_requests",
            "External signer calls from kube-apiserver, by RPC and result",
            self.requests.clone(),
        );
        registry.register_with_unit(
            "warrant_signer_request_duration",
            "Time to answer an external signer call, by RPC",
            Unit::Seconds,
            self.duration.clone(),
        );
    }

    pub(crate) fn answered(&self, rpc: &'static str, result: &'static str, seconds: f64) {
        self.requests
            .get_or_create(&[("rpc", rpc), ("result", result)])
            .inc();
        self.duration
            .get_or_create(&[("rpc", rpc)])
            .observe(seconds);
    }
}
