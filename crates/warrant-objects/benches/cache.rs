//! Time to ready and resident memory of the cluster cache over a synthetic cluster of 150,000
//! pods, 150,000 secrets, 50,000 service accounts and 5,000 nodes, served by the loopback
//! fixture. `make bench-cache` runs it; `docs/benchmarks.md` records the figures.
//!
//! The fixture (which holds every object in full, serialized) and the cache run in separate
//! processes, so the memory reported for the cache is the cache's alone: this process starts
//! the fixture, then runs itself again as a child that starts a `KubeSource` against it, waits
//! for ready, and reports its own `VmRSS` and `VmHWM` from `/proc/self/status`.
//!
//! `WARRANT_BENCH_SCALE=0.1` runs a tenth of the cluster (for a quick look).

// A benchmark's report is its output; a failure is an abort with a message.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::time::Instant;
use warrant_kube_fixture::Fixture;
use warrant_kube_fixture::objects::Synthetic;
use warrant_objects::Kind;
use warrant_objects::ObjectSource;
use warrant_objects::kube::{KubeSource, cluster_client};

const CHILD: &str = "WARRANT_BENCH_CHILD_KUBECONFIG";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match std::env::var_os(CHILD) {
        Some(kubeconfig) => runtime.block_on(cache(kubeconfig.into())),
        None => runtime.block_on(fixture()),
    }
}

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn fixture() {
    let scale: f64 = std::env::var("WARRANT_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let n = |full: f64| (full * scale).round() as usize;
    let cluster = Synthetic {
        namespaces: n(1000.0).max(1),
        service_accounts: n(50_000.0),
        pods: n(150_000.0),
        secrets: n(150_000.0),
        nodes: n(5_000.0),
    };
    let fixture = Fixture::start().await.expect("fixture");
    let loading = Instant::now();
    cluster.load(&fixture).expect("synthetic cluster");
    // No client has watched yet, so no history is needed: drop it (fixture memory only).
    fixture.compact();
    let (fixture_rss, _) = memory();
    println!(
        "fixture: {} pods, {} secrets, {} service accounts, {} nodes in {} namespaces, loaded in {:.1?}, fixture RSS {fixture_rss:.0} MiB",
        cluster.pods,
        cluster.secrets,
        cluster.service_accounts,
        cluster.nodes,
        cluster.namespaces,
        loading.elapsed()
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    fixture.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .env(CHILD, &kubeconfig)
        .stdout(Stdio::piped())
        .spawn()
        .expect("cache process");
    let stdout = child.stdout.take().expect("child stdout");
    // The child's report, line by line, while the fixture keeps serving it.
    let lines = tokio::task::spawn_blocking(move || {
        for line in BufReader::new(stdout).lines() {
            println!("{}", line.expect("child output"));
        }
    });
    lines.await.expect("child report");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("child status");
    assert!(status.success(), "cache process failed: {status}");
}

async fn cache(kubeconfig: std::path::PathBuf) {
    let (rss_before, _) = memory();
    let client = cluster_client(Some(&kubeconfig)).await.expect("client");
    let mut registry = Registry::default();
    let started = Instant::now();
    let source = KubeSource::start(client, &mut registry).expect("cache");
    tokio::time::timeout(Duration::from_secs(600), source.wait_ready())
        .await
        .expect("ready within 10 minutes");
    let ready = started.elapsed();
    let (rss, hwm) = memory();
    println!(
        "cache: ready in {:.2} s; {} pods, {} secrets, {} service accounts, {} nodes",
        ready.as_secs_f64(),
        source.count(Kind::Pod),
        source.count(Kind::Secret),
        source.count(Kind::ServiceAccount),
        source.count(Kind::Node),
    );
    println!(
        "cache: resident {rss:.1} MiB after sync (peak {hwm:.1} MiB; {rss_before:.1} MiB before starting)"
    );
}
