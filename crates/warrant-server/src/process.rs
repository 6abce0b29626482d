//! The `process_*` metrics every Prometheus client library exports, read from `/proc` at each
//! scrape: CPU seconds, resident and virtual memory, open and allowed descriptors, start time.
//! On a system without `/proc` they are left out rather than reported as zero.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads the process's figures when scraped.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

/// One scrape's figures.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    start_time_seconds: Option<f64>,
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces and parens).
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default()
}

fn read() -> Figures {
    let ticks = rustix::param::clock_ticks_per_second() as f64;
    let page = rustix::param::page_size() as f64;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields = stat_fields(&stat);
    // utime, stime, starttime, vsize, rss: fields 14, 15, 22, 23, 24 of stat(5), counted from
    // 1 with the pid and the name; here from 0 after the name.
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|t| t.trim().parse::<f64>().ok())
    });
    Figures {
        cpu_seconds: field(11)
            .zip(field(12))
            .map(|(user, system)| (user + system) / ticks),
        start_time_seconds: field(19)
            .zip(boot_time)
            .map(|(start, boot)| boot + start / ticks),
        virtual_bytes: field(20),
        resident_bytes: field(21).map(|pages| pages * page),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|entries| entries.count() as f64),
        max_fds: rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .map(|limit| limit as f64),
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let figures = read();
        if let Some(seconds) = figures.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        for (name, help, value) in [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                figures.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                figures.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                figures.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                figures.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                figures.start_time_seconds,
            ),
        ] {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_past_a_name_with_spaces_and_parens() {
        let stat = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 8 0 1234 1000 300";
        let fields = stat_fields(stat);
        assert_eq!(fields.first(), Some(&"S"));
        assert_eq!(fields.get(11), Some(&"250"));
        assert_eq!(fields.get(19), Some(&"1234"));
        assert_eq!(fields.get(21), Some(&"300"));
    }

    /// This process's own figures are there and plausible.
    #[test]
    fn this_process_is_measured() {
        let figures = read();
        assert!(figures.resident_bytes.unwrap() > 1024.0 * 1024.0);
        assert!(figures.open_fds.unwrap() >= 3.0);
        assert!(figures.max_fds.unwrap() >= figures.open_fds.unwrap());
        assert!(figures.cpu_seconds.unwrap() >= 0.0);
        assert!(figures.start_time_seconds.unwrap() > 1_600_000_000.0);
    }
}
