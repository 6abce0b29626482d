//! The watch cache's metrics. Names are fixed (register them in the root registry); the label
//! `resource` is the API resource (`pods`, `secrets`, `serviceaccounts`, `nodes`). A kind the
//! cache does not watch (`secrets`, with secret binding off) has no series.
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_kube_watch_synced{resource}` | gauge | 1 once the first full list has arrived |
//! | `warrant_kube_watch_staleness_seconds{resource}` | gauge | time since the last watch event or bookmark (or list page) |
//! | `warrant_kube_cache_stale{resource}` | gauge | 1 while the staleness is past `max_staleness`: the cached records are not trusted, lookups go live |
//! | `warrant_kube_cache_objects{resource}` | gauge | records held |
//! | `warrant_kube_watch_errors_total{resource,error}` | counter | watch failures, by `error`: `list`, `watch_start`, `watch_event` (an ERROR event such as `410 Gone`), `decode` (a line that is not an event), `stream`, `no_resource_version` |
//! | `warrant_kube_watch_relists_total{resource}` | counter | full lists after the first (410 Gone, or a failed list restarted) |
//! | `warrant_kube_watch_skipped_objects_total{resource,reason}` | counter | objects left out of the cache: `no_uid`, `no_name`, `no_namespace` |
//! | `warrant_kube_live_gets_total{resource,result}` | counter | live GETs after a cache miss, by `result`: `found`, `not_found`, `error`, `overloaded` (refused at once: 8 × the limit were already waiting or running) |
//! | `warrant_kube_live_gets_shared_total{resource}` | counter | cache misses that joined a GET already in flight for the same object |
//! | `warrant_kube_live_gets_in_flight` | gauge | live GETs being sent now (at most the configured limit) |
//! | `warrant_kube_live_gets_waiting` | gauge | live GETs waiting for the limit |

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::kinds::Kinds;
use crate::record::Kind;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::{Registry, Unit};

type Labels1 = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, &'static str); 2];

/// The counters and gauges the watch and lookup paths update.
#[derive(Debug, Default)]
pub(super) struct Metrics {
    watch_errors: Family<Labels2, Counter>,
    relists: Family<Labels1, Counter>,
    skipped: Family<Labels2, Counter>,
    live_gets: Family<Labels2, Counter>,
    live_shared: Family<Labels1, Counter>,
    pub(super) live_in_flight: Gauge,
    pub(super) live_waiting: Gauge,
}

impl Metrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "warrant_kube_watch_errors",
            "Watch failures of the cluster cache, by resource and kind of error",
            self.watch_errors.clone(),
        );
        registry.register(
            "warrant_kube_watch_relists",
            "Full lists after the first (410 Gone, or a failed list started over)",
            self.relists.clone(),
        );
        registry.register(
            "warrant_kube_watch_skipped_objects",
            "Objects from the API server left out of the cache because they were malformed",
            self.skipped.clone(),
        );
        registry.register(
            "warrant_kube_live_gets",
            "Live GETs after a cache miss, by result",
            self.live_gets.clone(),
        );
        registry.register(
            "warrant_kube_live_gets_shared",
            "Cache misses that joined a live GET already in flight for the same object",
            self.live_shared.clone(),
        );
        registry.register(
            "warrant_kube_live_gets_in_flight",
            "Live GETs being sent now",
            self.live_in_flight.clone(),
        );
        registry.register(
            "warrant_kube_live_gets_waiting",
            "Live GETs waiting because the limit of GETs in flight is reached",
            self.live_waiting.clone(),
        );
    }

    pub(super) fn watch_error(&self, kind: Kind, error: &'static str) {
        self.watch_errors
            .get_or_create(&[("resource", kind.resource()), ("error", error)])
            .inc();
    }

    pub(super) fn relist(&self, kind: Kind) {
        self.relists
            .get_or_create(&[("resource", kind.resource())])
            .inc();
    }

    pub(super) fn skipped(&self, kind: Kind, reason: &'static str) {
        self.skipped
            .get_or_create(&[("resource", kind.resource()), ("reason", reason)])
            .inc();
    }

    pub(super) fn live_get(&self, kind: Kind, result: &'static str) {
        self.live_gets
            .get_or_create(&[("resource", kind.resource()), ("result", result)])
            .inc();
    }

    pub(super) fn live_shared(&self, kind: Kind) {
        self.live_shared
            .get_or_create(&[("resource", kind.resource())])
            .inc();
    }
}

/// Encodes the gauges that are read at scrape time: sync state, staleness, object counts.
#[derive(Debug)]
pub(super) struct ScrapeCollector(pub(super) Arc<Kinds>);

impl Collector for ScrapeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let kinds = &self.0;
        {
            let mut family = encoder.encode_descriptor(
                "warrant_kube_watch_synced",
                "1 once the first full list of the resource has arrived",
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for state in kinds.watched() {
                let value = i64::from(state.synced.load(Ordering::Relaxed));
                ConstGauge::new(value)
                    .encode(family.encode_family(&[("resource", state.kind.resource())])?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "warrant_kube_watch_staleness",
                "Time since the last watch event, bookmark or list page of the resource",
                Some(&Unit::Seconds),
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for state in kinds.watched() {
                ConstGauge::new(kinds.staleness(state.kind).as_secs_f64())
                    .encode(family.encode_family(&[("resource", state.kind.resource())])?)?;
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "warrant_kube_cache_stale",
                "1 while the resource's cache is staler than its bound, so lookups go to the API server",
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for state in kinds.watched() {
                let value = i64::from(kinds.past_bound(state.kind).is_some());
                ConstGauge::new(value)
                    .encode(family.encode_family(&[("resource", state.kind.resource())])?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "warrant_kube_cache_objects",
            "Records held by the cluster cache",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for state in kinds.watched() {
            let len = i64::try_from(state.store.len()).unwrap_or(i64::MAX);
            ConstGauge::new(len)
                .encode(family.encode_family(&[("resource", state.kind.resource())])?)?;
        }
        Ok(())
    }
}
