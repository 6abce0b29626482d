//! The signer's metrics. The label `signer` is one of the configured signer names (never a
//! name read from a PCR, so the series are bounded by the configuration).
//!
//! | name | type | what |
//! |---|---|---|
//! | `warrant_podcert_decisions_written_total{signer,result}` | counter | statuses stored, by `result`: `issued`, `denied`, `failed` |
//! | `warrant_podcert_lost_races_total{signer}` | counter | status writes refused with `409` because another writer (a replica) made the PCR terminal first |
//! | `warrant_podcert_requeues_total{signer}` | counter | decisions that wrote nothing and will be retried (CA, HSM or audit unavailable) |
//! | `warrant_podcert_status_write_errors_total{signer,error}` | counter | status writes that failed: `invalid` (`422`: a bug, not retried), `api` (any other failure, retried) |
//! | `warrant_podcert_watch_errors_total{signer}` | counter | list or watch failures (the watch relists or resumes by itself) |
//! | `warrant_podcert_queue_depth` | gauge | PCRs waiting or being handled |
//! | `warrant_podcert_queue_oldest_seconds` | gauge | how long the oldest of them has been queued (retries included): a stuck signer shows here first |

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use crate::queue::Queue;

type Signer = Vec<(&'static str, String)>;

/// The counters the controller updates.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    written: Family<Signer, Counter>,
    lost: Family<Signer, Counter>,
    requeues: Family<Signer, Counter>,
    write_errors: Family<Signer, Counter>,
    watch_errors: Family<Signer, Counter>,
}

impl Metrics {
    pub(crate) fn register(&self, registry: &mut Registry, queue: Arc<Mutex<Queue>>) {
        registry.register(
            "warrant_podcert_decisions_written",
            "PodCertificateRequest statuses stored, by signer and result",
            self.written.clone(),
        );
        registry.register(
            "warrant_podcert_lost_races",
            "Status writes that lost to another writer (the PCR was terminal when read again)",
            self.lost.clone(),
        );
        registry.register(
            "warrant_podcert_requeues",
            "Decisions that wrote nothing and will be retried",
            self.requeues.clone(),
        );
        registry.register(
            "warrant_podcert_status_write_errors",
            "PodCertificateRequest status writes that failed, by signer and error",
            self.write_errors.clone(),
        );
        registry.register(
            "warrant_podcert_watch_errors",
            "List or watch failures of PodCertificateRequests, by signer",
            self.watch_errors.clone(),
        );
        registry.register_collector(Box::new(QueueCollector(queue)));
    }

    pub(crate) fn written(&self, signer: &str, result: &'static str) {
        self.written
            .get_or_create(&vec![
                ("signer", signer.to_owned()),
                ("result", result.to_owned()),
            ])
            .inc();
    }

    pub(crate) fn lost_race(&self, signer: &str) {
        self.lost
            .get_or_create(&vec![("signer", signer.to_owned())])
            .inc();
    }

    pub(crate) fn requeue(&self, signer: &str) {
        self.requeues
            .get_or_create(&vec![("signer", signer.to_owned())])
            .inc();
    }

    pub(crate) fn write_error(&self, signer: &str, error: &'static str) {
        self.write_errors
            .get_or_create(&vec![
                ("signer", signer.to_owned()),
                ("error", error.to_owned()),
            ])
            .inc();
    }

    pub(crate) fn watch_error(&self, signer: &str) {
        self.watch_errors
            .get_or_create(&vec![("signer", signer.to_owned())])
            .inc();
    }
}

/// The queue's gauges, read at scrape time (an age must move while nothing happens).
#[derive(Debug)]
struct QueueCollector(Arc<Mutex<Queue>>);

impl Collector for QueueCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (depth, oldest) = {
            let queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            (queue.depth(), queue.oldest_age(tokio::time::Instant::now()))
        };
        let depth = i64::try_from(depth).unwrap_or(i64::MAX);
        ConstGauge::new(depth).encode(encoder.encode_descriptor(
            "warrant_podcert_queue_depth",
            "PodCertificateRequests waiting or being handled",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(oldest.as_secs_f64()).encode(encoder.encode_descriptor(
            "warrant_podcert_queue_oldest",
            "How long the oldest queued PodCertificateRequest has waited, retries included",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?)?;
        Ok(())
    }
}
