//! The signer's metrics. `rpc` is `Sign`, `FetchKeys` or `Metadata`.
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_signer_requests_total{rpc,result}` | counter | calls, by `result`: `ok`, or the reason a call was refused (`not_base64url`, `not_json_object`, `oversized`, `wrong_issuer`, `no_exp`, `exp_beyond_max`, `duplicate_claim`, `case_variant_claim`, `bad_warnafter`, `malformed_claims`, `key_unavailable`, `key_withheld`, `signing_stopped`, `sign_failed`) |
//! | `warrant_signer_request_duration_seconds{rpc}` | histogram | time to answer |
//! | `warrant_signer_connections_open` | gauge | connections being served |
//! | `warrant_signer_connections_closed_total{reason}` | counter | connections warrant refused or closed: `peer_not_allowed`, `peer_unknown`, `limit`, `idle` |

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

type Labels1 = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, &'static str); 2];

/// The counters and histograms of the signer service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SignerMetrics {
    requests: Family<Labels2, Counter>,
    duration: Family<Labels1, Histogram>,
    open: Gauge,
    closed: Family<Labels1, Counter>,
}

/// One open connection, counted in the gauge until dropped.
pub(crate) struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
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
            open: Gauge::default(),
            closed: Family::default(),
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
        registry.register(
            "warrant_signer_connections_open",
            "Connections to the signing socket being served",
            self.open.clone(),
        );
        registry.register(
            "warrant_signer_connections_closed",
            "Connections to the signing socket warrant refused or closed, by reason (peer_not_allowed, peer_unknown, limit, idle)",
            self.closed.clone(),
        );
    }

    pub(crate) fn connection_opened(&self) -> OpenConnection {
        self.open.inc();
        OpenConnection(self.open.clone())
    }

    pub(crate) fn connection_closed(&self, reason: &'static str) {
        self.closed.get_or_create(&[("reason", reason)]).inc();
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
