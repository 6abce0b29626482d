//! Running h2load (nghttp2's load generator, Debian's `nghttp2-client`) over HTTP/2, and reading
//! its report and its per-request log.
//!
//! h2load sends one request over and over (one path, one body from `-d`): it cannot send a
//! distinct TokenReview per request. Distinct reviews over HTTP/2 are therefore measured as one
//! token reviewed with the server's signature cache off, so every review verifies its signature.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, Target};

/// One h2load measurement: `connections` connections, each with up to `streams` requests in
/// flight, for `seconds`.
pub(crate) struct Run<'a> {
    /// The request path.
    pub(crate) path: &'a str,
    /// The request body for a POST (`-d`); `None` for a GET.
    pub(crate) body: Option<PathBuf>,
    pub(crate) connections: u32,
    pub(crate) streams: u32,
    pub(crate) seconds: u64,
}

/// What h2load reported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    /// Requests answered (h2load's `done`).
    pub(crate) requests: u64,
    pub(crate) requests_per_second: f64,
    /// Answers that were not 2xx, and requests that failed, errored or timed out.
    pub(crate) errors: u64,
    /// The protocol ALPN chose (`h2`).
    pub(crate) protocol: String,
    /// Median and 99th-percentile time from a request's start to its answer's end, in µs,
    /// from the per-request log.
    pub(crate) p50_micros: Option<f64>,
    pub(crate) p99_micros: Option<f64>,
}

pub(crate) fn check_installed() -> Result<(), Error> {
    match Command::new("h2load").arg("--version").output() {
        Ok(_) => Ok(()),
        Err(_) => Err(
            "h2load is not installed (Debian: apt-get install nghttp2-client); `make bench-load` installs it"
                .into(),
        ),
    }
}

pub(crate) fn run(target: &Target, run: &Run<'_>) -> Result<Outcome, Error> {
    let log = target.dir.join("logs").join("h2load.log");
    std::fs::create_dir_all(target.dir.join("logs"))?;
    // h2load appends to its log: each run starts a new one.
    match std::fs::remove_file(&log) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let mut command = Command::new("h2load");
    command
        .args(["-c", &run.connections.to_string()])
        .args(["-t", &run.connections.min(2).to_string()])
        .args(["-m", &run.streams.to_string()])
        .args(["-D", &run.seconds.to_string()])
        .args(["-H", &format!("authorization: Bearer {}", target.admin)])
        .arg("--log-file")
        .arg(&log);
    if let Some(body) = &run.body {
        command
            .args(["-H", "content-type: application/json", "-d"])
            .arg(body);
    }
    let out = command
        .arg(format!("{}{}", target.base, run.path))
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "h2load failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let mut outcome =
        parse(&text).ok_or_else(|| format!("cannot read h2load's report:\n{text}"))?;
    if outcome.protocol != "h2" {
        return Err(format!("h2load spoke {}, not h2:\n{text}", outcome.protocol).into());
    }
    let latencies = read_log(&log)?;
    outcome.p50_micros = percentile(&latencies, 0.50);
    outcome.p99_micros = percentile(&latencies, 0.99);
    Ok(outcome)
}

/// Reads h2load's text report.
fn parse(text: &str) -> Option<Outcome> {
    let mut requests = None;
    let mut rate = None;
    let mut failed = None;
    let mut non_2xx = None;
    let mut protocol = None;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            // `finished in 5.00s, 26789.20 req/s, 10.04MB/s`
            rate = rest
                .split(", ")
                .find_map(|part| part.strip_suffix(" req/s"))
                .and_then(|r| r.parse::<f64>().ok());
        } else if let Some(rest) = line.strip_prefix("requests: ") {
            // `requests: 133946 total, 134010 started, 133946 done, 133946 succeeded,
            //  0 failed, 0 errored, 0 timeout`
            let count = |name: &str| {
                rest.split(", ")
                    .find_map(|part| part.strip_suffix(&format!(" {name}")))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            };
            requests = count("done");
            // `failed` counts the errored and timed-out ones, and answers with a status of
            // 400 and up.
            failed = count("failed");
        } else if let Some(rest) = line.strip_prefix("status codes: ") {
            // `status codes: 133946 2xx, 0 3xx, 0 4xx, 0 5xx`: a 3xx is no success here.
            let count = |class: &str| {
                rest.split(", ")
                    .find_map(|part| part.strip_suffix(&format!(" {class}")))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            };
            non_2xx = Some(count("3xx")?);
        } else if let Some(rest) = line.strip_prefix("Application protocol: ") {
            protocol = Some(rest.trim().to_owned());
        }
    }
    Some(Outcome {
        requests: requests?,
        requests_per_second: rate?,
        errors: failed? + non_2xx?,
        protocol: protocol?,
        p50_micros: None,
        p99_micros: None,
    })
}

/// The per-request log (`--log-file`): tab-separated start time (µs since the epoch), status
/// (-1 for a failed stream) and µs until the answer's end. Returns the latencies of the
/// answered requests, sorted.
fn read_log(path: &Path) -> Result<Vec<f64>, Error> {
    Ok(parse_log(&std::fs::read_to_string(path)?))
}

fn parse_log(text: &str) -> Vec<f64> {
    let mut latencies: Vec<f64> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let _start = fields.next()?;
            let status: i32 = fields.next()?.trim().parse().ok()?;
            let micros: f64 = fields.next()?.trim().parse().ok()?;
            (status > 0).then_some(micros)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    latencies
}

fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let index = ((last as f64) * q).round() as usize;
    sorted.get(index.min(last)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h2load 1.52.0 (Debian 12): `h2load -c 4 -t 2 -m 8 -D 2 -H "authorization: Bearer …"
    /// --log-file … https://127.0.0.1:18443/version` against `warrant serve` on loopback, as
    /// captured.
    const REPORT: &str = include_str!("testdata/h2load-report.txt");
    /// The same h2load, `-n 200 -c 2 -m 4` without credentials on a path that needs them: every
    /// answer a 401.
    const REPORT_401: &str = include_str!("testdata/h2load-report-401.txt");
    /// The first lines of the per-request log of the `REPORT` run.
    const LOG: &str = include_str!("testdata/h2load-log.tsv");

    #[test]
    fn reads_an_h2load_report() {
        let o = parse(REPORT).unwrap();
        assert_eq!(o.protocol, "h2");
        assert_eq!(o.requests, 75940);
        assert_eq!(o.requests_per_second, 37970.0);
        assert_eq!(o.errors, 0);
    }

    #[test]
    fn answers_that_are_not_2xx_are_errors() {
        let o = parse(REPORT_401).unwrap();
        assert_eq!(o.requests, 200);
        assert_eq!(o.requests_per_second, 3547.42);
        assert_eq!(o.errors, 200);
    }

    #[test]
    fn reads_a_captured_request_log() {
        let latencies = parse_log(LOG);
        assert_eq!(latencies.len(), 8);
        assert_eq!(latencies.first(), Some(&42346.0));
        assert_eq!(latencies.last(), Some(&48377.0));
        assert_eq!(percentile(&latencies, 0.5), Some(42486.0));
    }

    #[test]
    fn counts_failures_and_redirects_as_errors() {
        let report = "Application protocol: h2\n\
            finished in 1.00s, 100.00 req/s, 10.00KB/s\n\
            requests: 100 total, 100 started, 100 done, 93 succeeded, 7 failed, 2 errored, 1 timeout\n\
            status codes: 90 2xx, 3 3xx, 4 4xx, 1 5xx\n";
        let o = parse(report).unwrap();
        assert_eq!(o.requests, 100);
        assert_eq!(o.requests_per_second, 100.0);
        assert_eq!(o.errors, 10);
    }

    #[test]
    fn a_report_without_its_counts_is_unreadable() {
        assert_eq!(parse("Application protocol: h2\n"), None);
        let no_status = "Application protocol: h2\nfinished in 1.00s, 100.00 req/s, 10.00KB/s\n\
            requests: 100 total, 100 started, 100 done, 100 succeeded, 0 failed, 0 errored, 0 timeout\n";
        assert_eq!(parse(no_status), None);
    }

    #[test]
    fn reads_the_request_log() {
        let log = "1700000000000000\t201\t350\n1700000000000100\t201\t120\n\
            1700000000000200\t-1\t9000\n1700000000000300\t201\t200\n";
        let latencies = parse_log(log);
        assert_eq!(latencies, vec![120.0, 200.0, 350.0]);
        assert_eq!(percentile(&latencies, 0.5), Some(200.0));
        assert_eq!(percentile(&latencies, 0.99), Some(350.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
