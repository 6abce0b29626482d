//! `warrant-bench`: the load benchmark behind `make bench`.
//!
//! It starts the real `warrant serve` (standalone, with a generated objects file of thousands of
//! pods), drives it over loopback HTTPS with keep-alive, using wrk (from Debian) over HTTP/1.1
//! at several connection counts and h2load (Debian's nghttp2-client) over HTTP/2 at several
//! stream counts, and prints a Markdown table of requests/s, p50 and p99 latency, the server's
//! CPU and memory, and its CPU time per request against a limit made of micro-measurements
//! taken in this process (inprocess.rs). Scenarios: the transport floor (`GET /version`),
//! TokenRequest (plain and pod-bound) and TokenReview (distinct tokens, each used once, and one
//! repeated token), for an RS256 and an ES256 key; and the floor against a minimal hyper +
//! rustls server (reference.rs), which this binary runs as a child of its own
//! (`--reference-server`).
//!
//! The load generators run on the same two cores as the server, so requests/s and latency are
//! what one machine does with both; the server's CPU time per request does not depend on how
//! much of the machine they take. The document that records the figures says so.

// A command-line tool: it prints its results, and it drives a real server on the real clock.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

mod h2load;
mod inprocess;
mod objects;
mod reference;
mod signer;
mod soak;
mod wrk;

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use warrant_token::{KeyType, SigningKey};

use crate::inprocess::Costs;
use crate::objects::Cluster;
use crate::wrk::{Run, Scenario};

/// The bench's own allocator is warrant's, so the reference server it runs allocates as warrant
/// does (and the in-process measurements too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The `--scenarios` name of the floor measured against the reference server.
const FLOOR_REFERENCE: &str = "floor-reference";

/// Drive a real warrant server with wrk and h2load and report throughput, latency, CPU per
/// request against its limit, and memory.
#[derive(Debug, Parser)]
struct Args {
    /// The warrant binary to run (build it with --release first).
    #[arg(long, default_value = "target/release/warrant")]
    warrant: PathBuf,
    /// How long each measurement runs, in seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// HTTP/1.1 (wrk): connection counts to measure at.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    connections: Vec<u32>,
    /// HTTP/2 (h2load): concurrent streams per connection to measure at.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    streams: Vec<u32>,
    /// HTTP/2 (h2load): connections.
    #[arg(long, default_value_t = 4)]
    h2_connections: u32,
    /// Protocols to measure: http1 (wrk), h2 (h2load).
    #[arg(long, value_delimiter = ',', default_value = "http1,h2")]
    protocols: Vec<String>,
    /// Pods in the generated objects file (a tenth as many service accounts, 50 nodes).
    #[arg(long, default_value_t = 5000)]
    pods: usize,
    /// Algorithms to measure.
    #[arg(long, value_delimiter = ',', default_value = "RS256,ES256")]
    algorithms: Vec<String>,
    /// Scenarios to measure (default: all): floor, floor-reference, tokenrequest-plain,
    /// tokenrequest-pod, tokenreview-distinct, tokenreview-repeated. The limits need `floor`.
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<String>,
    /// warrant's --log-level. The default is the server's own: at info it logs a line per
    /// issued token, which is part of what issuing costs.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Run the soak instead (`make soak`): good clients for this many seconds while abusive
    /// ones (idle, slow, abandoning) press on the same server; see soak.rs.
    #[arg(long, value_name = "SECONDS")]
    soak: Option<u64>,
    /// How long after the abusers stop the soak waits before its last reading: longer than a
    /// delegated lookup may run (under 55 s by default), so what the abandoned ones held is
    /// released. (The abusers close their own connections when they stop.)
    #[arg(long, default_value_t = 75)]
    soak_settle: u64,
    /// Soak: idle TCP connections (no handshake) held open.
    #[arg(long, default_value_t = 300)]
    soak_idle_tcp: usize,
    /// Soak: idle TLS connections (handshake done, then silence) held open.
    #[arg(long, default_value_t = 300)]
    soak_idle_tls: usize,
    /// Soak: connections sending their headers a byte every half second.
    #[arg(long, default_value_t = 50)]
    soak_slow: usize,
    /// Extra flags for `warrant serve` (repeatable), e.g. `--serve-arg=--signature-cache-size=0`.
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
    /// Soak: delegated lookups (60 KB bearer tokens) started and abandoned per second.
    #[arg(long, default_value_t = 20)]
    soak_abandon_per_second: u32,
    /// Measure Sign over the external signer's socket instead (`make bench-signer`), against
    /// the same signatures in-process; see signer.rs.
    #[arg(long)]
    signer: bool,
    /// With --signer: keep each key in a SoftHSM2 token made for the run, with this module
    /// (`/usr/lib/softhsm/libsofthsm2.so`; needs softhsm2-util), and serve it with
    /// `--key-dir` and `--key-pkcs11-uri` (`make bench-signer-hsm`).
    #[arg(long, value_name = "MODULE", requires = "signer")]
    pkcs11_module: Option<PathBuf>,
    /// Serve as the minimal reference server (reference.rs) on the listening socket passed in
    /// `LISTEN_FDS`, with the serving certificate and key, answering `GET /version` with the
    /// bytes of BODY; the bench runs itself with this, as a child process.
    #[arg(long, num_args = 3, value_names = ["CERT", "KEY", "BODY"], hide = true)]
    reference_server: Option<Vec<String>>,
}

fn main() {
    let args = Args::parse();
    let result = match &args.reference_server {
        Some(serve) => reference_server(serve),
        None => run(&args),
    };
    if let Err(e) = result {
        eprintln!("warrant-bench: {e}");
        std::process::exit(1);
    }
}

type Error = Box<dyn std::error::Error>;

fn reference_server(args: &[String]) -> Result<(), Error> {
    let [cert, key, body] = args else {
        return Err("--reference-server takes CERT KEY BODY".into());
    };
    reference::serve(Path::new(cert), Path::new(key), Path::new(body))
}

/// A protocol and its load generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Protocol {
    /// HTTP/1.1 with keep-alive, driven by wrk: one request in flight per connection.
    Http1,
    /// HTTP/2, driven by h2load: several streams in flight per connection.
    H2,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::H2 => "h2",
        }
    }
}

/// How a row loaded the server: the protocol, and `connections` (HTTP/1.1) or
/// `connections×streams` (HTTP/2).
type Load = (Protocol, String);

/// What one measurement saw, whichever generator made it.
struct Measured {
    requests: u64,
    seconds: f64,
    requests_per_second: f64,
    p50: String,
    p99: String,
    errors: String,
}

impl From<wrk::Outcome> for Measured {
    fn from(o: wrk::Outcome) -> Self {
        Measured {
            requests: o.requests,
            seconds: o.seconds,
            requests_per_second: o.requests_per_second,
            p50: o.p50,
            p99: o.p99,
            errors: o.errors.to_string(),
        }
    }
}

/// One row of the table.
struct Row<'a> {
    scenario: &'a str,
    alg: &'a str,
    load: &'a Load,
    measured: Measured,
    /// The server's CPU seconds over the run.
    cpu: f64,
    /// The limit of its CPU time per request, in µs, where one is known.
    limit: Option<f64>,
    rss_kib: u64,
}

impl Row<'_> {
    fn cpu_micros_per_request(&self) -> f64 {
        self.cpu * 1e6 / self.measured.requests.max(1) as f64
    }

    fn print(&self) {
        let m = &self.measured;
        let per_request = self.cpu_micros_per_request();
        let (limit, ratio) = match self.limit {
            Some(limit) if limit > 0.0 => {
                (format!("{limit:.1}"), format!("{:.2}", per_request / limit))
            }
            _ => ("–".to_owned(), "–".to_owned()),
        };
        println!(
            "| {} | {} | {} | {} | {:.0} | {} | {} | {} | {:.2} | {per_request:.1} | {limit} | {ratio} | {} |",
            self.scenario,
            self.load.0.name(),
            self.alg,
            self.load.1,
            m.requests_per_second,
            m.p50,
            m.p99,
            m.errors,
            self.cpu / m.seconds,
            mib(self.rss_kib),
        );
    }
}

/// The scenarios selected, and whether the reference's floor is.
fn selected(args: &Args) -> Result<(Vec<Scenario>, bool), Error> {
    let known =
        |name: &str| name == FLOOR_REFERENCE || Scenario::ALL.iter().any(|s| s.name() == name);
    if let Some(unknown) = args.scenarios.iter().find(|n| !known(n)) {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        return Err(format!(
            "unknown scenario {unknown}: use {}, {FLOOR_REFERENCE}",
            names.join(", ")
        )
        .into());
    }
    let wanted = |name: &str| args.scenarios.is_empty() || args.scenarios.iter().any(|n| n == name);
    let scenarios = Scenario::ALL
        .into_iter()
        .filter(|s| wanted(s.name()))
        .collect();
    Ok((scenarios, wanted(FLOOR_REFERENCE)))
}

fn protocols(args: &Args) -> Result<Vec<Protocol>, Error> {
    let mut out = Vec::new();
    for name in &args.protocols {
        let protocol = match name.as_str() {
            "http1" | "h1" | "http/1.1" => Protocol::Http1,
            "h2" | "http2" => Protocol::H2,
            other => return Err(format!("unknown protocol {other}: use http1, h2").into()),
        };
        if !out.contains(&protocol) {
            out.push(protocol);
        }
    }
    Ok(out)
}

/// The scenarios measured over HTTP/2 (h2load sends one request over and over; distinct
/// reviews are one token with the signature cache off, see h2load.rs).
const H2_SCENARIOS: [Scenario; 3] = [
    Scenario::Floor,
    Scenario::ReviewRepeated,
    Scenario::ReviewDistinct,
];

/// The table's name for a scenario's rows.
fn row_name(scenario: Scenario, protocol: Protocol) -> &'static str {
    match (scenario, protocol) {
        (Scenario::Floor, _) => "floor (warrant)",
        (Scenario::ReviewDistinct, Protocol::H2) => "tokenreview-distinct (one token, cache off)",
        _ => scenario.name(),
    }
}

/// The limit of a scenario's CPU time per request: the floor of the same load plus the work
/// the scenario cannot skip.
fn limit(
    scenario: Scenario,
    floor: Option<f64>,
    reference: Option<f64>,
    costs: &Costs,
) -> Option<f64> {
    Some(match scenario {
        // The floor's limit is the reference server's floor.
        Scenario::Floor => return reference,
        Scenario::RequestPlain => floor? + costs.sign,
        Scenario::RequestPod => floor? + costs.sign + costs.lookups,
        Scenario::ReviewDistinct => floor? + costs.verify + costs.lookups,
        Scenario::ReviewRepeated => floor? + costs.lookups + costs.sha256,
        Scenario::Mixed => return None,
    })
}

fn run(args: &Args) -> Result<(), Error> {
    if !args.warrant.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release` first",
            args.warrant.display()
        )
        .into());
    }
    let (scenarios, with_reference) = selected(args)?;
    let protocols = protocols(args)?;
    let load_run = !args.signer && args.soak.is_none();
    if !args.signer && (!load_run || protocols.contains(&Protocol::Http1)) {
        wrk::check_installed()?;
    }
    if load_run && protocols.contains(&Protocol::H2) {
        h2load::check_installed()?;
    }
    let dir = tempfile_dir()?;
    // The server's socket, bound here and passed to each server the run starts (as systemd
    // passes one): the port, which the issuer URL holds, stays the bench's for the whole run.
    let listener = loopback_listener()?;
    let port = listener.local_addr()?.port();
    let setup = Command::new(&args.warrant)
        .args(["local-setup", "--dir"])
        .arg(&dir)
        .args(["--port", &port.to_string()])
        .output()?;
    if !setup.status.success() {
        return Err(format!(
            "local-setup failed: {}",
            String::from_utf8_lossy(&setup.stderr)
        )
        .into());
    }
    let admin = std::fs::read_to_string(dir.join("tokens.csv"))?
        .split(',')
        .next()
        .unwrap_or_default()
        .to_owned();
    let issuer = format!("https://127.0.0.1:{port}");
    let cluster = Cluster::new(args.pods);
    std::fs::write(dir.join("objects.yaml"), cluster.manifest())?;
    if args.signer {
        let mut keys = Vec::new();
        for alg in &args.algorithms {
            keys.push((alg.clone(), generate(alg)?));
        }
        let result = signer::run(
            &args.warrant,
            &dir,
            &issuer,
            &listener,
            args.seconds,
            &keys,
            args.pkcs11_module.as_deref(),
        );
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    if let Some(seconds) = args.soak {
        let result = soak(args, &dir, &issuer, &listener, &admin, &cluster, seconds);
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    let result = load(
        args,
        &Bench {
            dir: &dir,
            listener: &listener,
            port,
            issuer: &issuer,
            admin: &admin,
            cluster: &cluster,
        },
        &scenarios,
        with_reference,
        &protocols,
    );
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What every load measurement shares.
struct Bench<'a> {
    dir: &'a Path,
    /// The socket warrant serves on, and its port.
    listener: &'a TcpListener,
    port: u16,
    issuer: &'a str,
    admin: &'a str,
    cluster: &'a Cluster,
}

impl Bench<'_> {
    fn target(&self, port: u16) -> Target {
        Target {
            base: format!("https://127.0.0.1:{port}"),
            admin: self.admin.to_owned(),
            dir: self.dir.to_path_buf(),
        }
    }
}

/// The load table: for each algorithm, its micro-measurements, then every scenario and load
/// against one warrant server (and the reference server's floor, once).
fn load(
    args: &Args,
    bench: &Bench<'_>,
    scenarios: &[Scenario],
    with_reference: bool,
    protocols: &[Protocol],
) -> Result<(), Error> {
    let dir = bench.dir;
    let mut keys = Vec::new();
    for alg in &args.algorithms {
        let key = generate(alg)?;
        let costs =
            inprocess::measure(&key, bench.issuer, bench.cluster, &dir.join("objects.yaml"))?;
        keys.push((alg.clone(), key, costs));
    }
    println!("In-process costs (µs, median of 201 samples, one thread, taken before the load):\n");
    println!("| alg | sign | verify | review lookups (objects, user) | SHA-256 of the token |");
    println!("|---|---:|---:|---:|---:|");
    for (alg, _, c) in &keys {
        println!(
            "| {alg} | {:.1} | {:.1} | {:.2} | {:.2} |",
            c.sign, c.verify, c.lookups, c.sha256
        );
    }
    println!();

    let h1_loads: Vec<(Load, u32)> = args
        .connections
        .iter()
        .map(|&c| ((Protocol::Http1, c.to_string()), c))
        .collect();
    let h2_loads: Vec<(Load, u32)> = args
        .streams
        .iter()
        .map(|&m| ((Protocol::H2, format!("{}×{m}", args.h2_connections)), m))
        .collect();
    let h1 = protocols.contains(&Protocol::Http1);
    let h2 = protocols.contains(&Protocol::H2);

    println!(
        "| scenario | protocol | alg | connections (×streams) | requests/s | p50 | p99 | errors | server CPU (cores) | server CPU µs/request | limit µs | ratio | server RSS |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut reference_floor: Option<HashMap<Load, f64>> = None;
    let mut peak = Vec::new();
    for (alg, key, costs) in &keys {
        let key_file = dir.join(format!("{alg}.key"));
        std::fs::write(&key_file, key.to_pkcs8_pem()?.as_str())?;
        let mut server = Server::start(
            &args.warrant,
            dir,
            &key_file,
            bench.issuer,
            bench.listener,
            &args.log_level,
            &args.serve_args,
        )?;
        let target = bench.target(bench.port);
        if with_reference && reference_floor.is_none() {
            reference_floor = Some(measure_reference(
                args, bench, &target, &h1_loads, &h2_loads, h1, h2,
            )?);
        }
        let reference = reference_floor.as_ref();
        let mut floor: HashMap<Load, f64> = HashMap::new();
        // The rates measured so far size the token supply of distinct-token runs.
        let mut rates: HashMap<(Scenario, Load), f64> = HashMap::new();
        for scenario in scenarios.iter().filter(|_| h1) {
            for (load, connections) in &h1_loads {
                let connections = *connections;
                // wrk's threads (one per connection, up to two) each read a file of their own.
                let threads = connections.min(2) as usize;
                let tokens = match scenario {
                    Scenario::ReviewDistinct => {
                        let estimate = distinct_rate(load, &rates, &floor, costs);
                        let wanted = (estimate * args.seconds as f64 * 1.2) as usize * 2 / threads;
                        wanted.clamp(20_000, 600_000)
                    }
                    _ => 1,
                };
                bench.cluster.write_review_tokens(
                    key,
                    bench.issuer,
                    tokens,
                    &dir.join("review-tokens"),
                )?;
                target.preflight(*scenario)?;
                let run = Run {
                    scenario: *scenario,
                    connections,
                    seconds: args.seconds,
                };
                let (mut measured, cpu) =
                    server.measure(|| Ok(Measured::from(wrk::run(&target, &run)?)))?;
                rates.insert((*scenario, load.clone()), measured.requests_per_second);
                if *scenario == Scenario::ReviewDistinct
                    && measured.requests > (tokens / 2 * threads) as u64
                {
                    measured.errors.push_str(" (tokens reused)");
                }
                let row = Row {
                    scenario: row_name(*scenario, Protocol::Http1),
                    alg,
                    load,
                    measured,
                    cpu,
                    limit: None,
                    rss_kib: server.memory("VmRSS")?,
                };
                let row = with_limit(row, *scenario, &mut floor, reference, costs);
                row.print();
            }
        }
        // HTTP/2: one request over and over, so one token (written by the first call).
        let h2_scenarios: Vec<Scenario> = H2_SCENARIOS
            .into_iter()
            .filter(|s| h2 && scenarios.contains(s))
            .collect();
        if !h2_scenarios.is_empty() {
            bench
                .cluster
                .write_review_tokens(key, bench.issuer, 1, &dir.join("review-tokens"))?;
            let (_, body) = Scenario::ReviewRepeated.sample(dir)?;
            std::fs::write(dir.join("review-body.json"), body.unwrap_or_default())?;
        }
        for scenario in h2_scenarios
            .iter()
            .filter(|s| **s != Scenario::ReviewDistinct)
        {
            measure_h2(
                args, &server, &target, *scenario, alg, &h2_loads, &mut floor, reference, costs,
            )?;
        }
        peak.push((alg.clone(), server.memory("VmHWM")?));
        server.stop();
        if h2_scenarios.contains(&Scenario::ReviewDistinct) {
            // Every review verifies: the signature cache is off.
            let mut extra = args.serve_args.clone();
            if !extra
                .iter()
                .any(|a| a.starts_with("--signature-cache-size"))
            {
                extra.push("--signature-cache-size=0".to_owned());
            }
            let mut server = Server::start(
                &args.warrant,
                dir,
                &key_file,
                bench.issuer,
                bench.listener,
                &args.log_level,
                &extra,
            )?;
            measure_h2(
                args,
                &server,
                &target,
                Scenario::ReviewDistinct,
                alg,
                &h2_loads,
                &mut floor,
                reference,
                costs,
            )?;
            server.stop();
        }
    }
    for (alg, hwm) in peak {
        println!("\nwarrant peak resident memory ({alg} run): {}", mib(hwm));
    }
    Ok(())
}

/// How fast distinct-token reviews may go at `load`, to have a fresh token for each: as fast as
/// repeated reviews at the same load (which do less), or, where those were not measured, as fast
/// as 1.5 cores (what the load generator leaves the server, and more) take the floor plus a
/// verification; failing both, the fastest rate seen.
fn distinct_rate(
    load: &Load,
    rates: &HashMap<(Scenario, Load), f64>,
    floor: &HashMap<Load, f64>,
    costs: &Costs,
) -> f64 {
    if let Some(rate) = rates.get(&(Scenario::ReviewRepeated, load.clone())) {
        return *rate;
    }
    if let Some(floor) = floor.get(load) {
        return 1.5e6 / (floor + costs.verify + costs.lookups);
    }
    rates
        .iter()
        .filter(|((s, _), _)| *s != Scenario::Floor)
        .map(|(_, r)| *r)
        .fold(0.0, f64::max)
}

/// Sets a row's limit from the floor of its load (and records the floor when it is one).
fn with_limit<'a>(
    mut row: Row<'a>,
    scenario: Scenario,
    floor: &mut HashMap<Load, f64>,
    reference: Option<&HashMap<Load, f64>>,
    costs: &Costs,
) -> Row<'a> {
    if scenario == Scenario::Floor {
        floor.insert(row.load.clone(), row.cpu_micros_per_request());
    }
    row.limit = limit(
        scenario,
        floor.get(row.load).copied(),
        reference.and_then(|r| r.get(row.load).copied()),
        costs,
    );
    row
}

/// A scenario over HTTP/2 at each stream count.
#[allow(clippy::too_many_arguments)]
fn measure_h2(
    args: &Args,
    server: &Server,
    target: &Target,
    scenario: Scenario,
    alg: &str,
    loads: &[(Load, u32)],
    floor: &mut HashMap<Load, f64>,
    reference: Option<&HashMap<Load, f64>>,
    costs: &Costs,
) -> Result<(), Error> {
    target.preflight(scenario)?;
    for (load, streams) in loads {
        let measured = h2_once(args, server, target, scenario, *streams)?;
        let row = Row {
            scenario: row_name(scenario, Protocol::H2),
            alg,
            load,
            rss_kib: server.memory("VmRSS")?,
            measured: measured.0,
            cpu: measured.1,
            limit: None,
        };
        with_limit(row, scenario, floor, reference, costs).print();
    }
    Ok(())
}

/// One h2load run of `scenario` (the floor, or the review in review-body.json) against
/// `server`: what it measured and the server's CPU seconds over it.
fn h2_once(
    args: &Args,
    server: &Server,
    target: &Target,
    scenario: Scenario,
    streams: u32,
) -> Result<(Measured, f64), Error> {
    let (path, body) = match scenario {
        Scenario::Floor => ("/version", None),
        _ => (wrk::REVIEW_PATH, Some(target.dir.join("review-body.json"))),
    };
    let run = h2load::Run {
        path,
        body,
        connections: args.h2_connections,
        streams,
        seconds: args.seconds,
    };
    server.measure(|| {
        let o = h2load::run(target, &run)?;
        Ok(Measured {
            requests: o.requests,
            seconds: args.seconds as f64,
            requests_per_second: o.requests_per_second,
            p50: o.p50_micros.map(micros).unwrap_or_default(),
            p99: o.p99_micros.map(micros).unwrap_or_default(),
            errors: o.errors.to_string(),
        })
    })
}

/// The floor against the reference server, at every load: its CPU µs per request by load.
fn measure_reference(
    args: &Args,
    bench: &Bench<'_>,
    warrant: &Target,
    h1_loads: &[(Load, u32)],
    h2_loads: &[(Load, u32)],
    h1: bool,
    h2: bool,
) -> Result<HashMap<Load, f64>, Error> {
    // The same bytes warrant answers /version with.
    let version = warrant.preflight(Scenario::Floor)?;
    let body_file = bench.dir.join("version.json");
    std::fs::write(&body_file, &version)?;
    let listener = loopback_listener()?;
    let mut server = Server::reference(bench.dir, &listener, &body_file)?;
    let target = bench.target(listener.local_addr()?.port());
    if target.preflight(Scenario::Floor)? != version {
        return Err("the reference server's /version differs from warrant's".into());
    }
    let mut floors = HashMap::new();
    let mut record = |load: &Load, measured: Measured, cpu: f64, rss_kib: u64| {
        let row = Row {
            scenario: "floor (reference hyper+rustls)",
            alg: "–",
            load,
            measured,
            cpu,
            limit: None,
            rss_kib,
        };
        floors.insert(load.clone(), row.cpu_micros_per_request());
        row.print();
    };
    for (load, connections) in h1_loads.iter().filter(|_| h1) {
        let run = Run {
            scenario: Scenario::Floor,
            connections: *connections,
            seconds: args.seconds,
        };
        let (measured, cpu) = server.measure(|| Ok(Measured::from(wrk::run(&target, &run)?)))?;
        record(load, measured, cpu, server.memory("VmRSS")?);
    }
    for (load, streams) in h2_loads.iter().filter(|_| h2) {
        let (measured, cpu) = h2_once(args, &server, &target, Scenario::Floor, *streams)?;
        record(load, measured, cpu, server.memory("VmRSS")?);
    }
    server.stop();
    Ok(floors)
}

/// A latency in µs, written as wrk writes its own.
fn micros(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.2}us")
    } else {
        format!("{:.2}ms", us / 1000.0)
    }
}

/// The soak: one ES256 server with delegated authentication to a kube-apiserver that never
/// answers, good and abusive clients at once (soak.rs).
fn soak(
    args: &Args,
    dir: &Path,
    issuer: &str,
    listener: &TcpListener,
    admin: &str,
    cluster: &Cluster,
    seconds: u64,
) -> Result<(), Error> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let blackhole = soak::Blackhole::start(stop.clone())?;
    let kubeconfig = dir.join("stalled-apiserver.kubeconfig");
    std::fs::write(&kubeconfig, blackhole.kubeconfig())?;
    let key = SigningKey::generate(KeyType::P256)?;
    let key_file = dir.join("ES256.key");
    std::fs::write(&key_file, key.to_pkcs8_pem()?.as_str())?;
    // Enough distinct tokens that reviews seldom repeat one.
    cluster.write_review_tokens(&key, issuer, 200_000, &dir.join("review-tokens"))?;
    let mut extra = vec![
        "--authentication-kubeconfig".to_owned(),
        kubeconfig.display().to_string(),
        "--authentication-skip-lookup".to_owned(),
    ];
    extra.extend(args.serve_args.iter().cloned());
    let server = Server::start(
        &args.warrant,
        dir,
        &key_file,
        issuer,
        listener,
        &args.log_level,
        &extra,
    )?;
    let target = Target {
        base: issuer.to_owned(),
        admin: admin.to_owned(),
        dir: dir.to_path_buf(),
    };
    target.preflight(Scenario::Mixed)?;
    let result = soak::run(
        &server,
        &target,
        listener.local_addr()?,
        seconds,
        Duration::from_secs(args.soak_settle),
        soak::Abusers {
            idle_tcp: args.soak_idle_tcp,
            idle_tls: args.soak_idle_tls,
            slow: args.soak_slow,
            abandon_per_second: args.soak_abandon_per_second,
        },
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    result
}

/// A key of the algorithm named.
fn generate(alg: &str) -> Result<SigningKey, Error> {
    Ok(match alg {
        "RS256" => SigningKey::generate(KeyType::Rsa2048)?,
        "ES256" => SigningKey::generate(KeyType::P256)?,
        other => return Err(format!("unknown algorithm {other}: use RS256 or ES256").into()),
    })
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn tempfile_dir() -> Result<PathBuf, Error> {
    let dir = std::env::temp_dir().join(format!("warrant-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A listening socket on a loopback port of the system's choice, for a server to be passed.
fn loopback_listener() -> Result<TcpListener, Error> {
    Ok(TcpListener::bind("127.0.0.1:0")?)
}

/// Where the load goes.
pub(crate) struct Target {
    /// `https://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The admin bearer token.
    pub(crate) admin: String,
    /// The benchmark's directory (CA, token files, scripts).
    pub(crate) dir: PathBuf,
}

impl Target {
    /// One request of the scenario, checked for the answer a correct server gives: the
    /// benchmark must not measure fast failures. Returns the answer's body.
    fn preflight(&self, scenario: Scenario) -> Result<String, Error> {
        let (path, body) = scenario.sample(&self.dir)?;
        let request = http::Request::builder()
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.admin));
        let request = match body {
            Some(body) => request
                .method("POST")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))?,
            None => request.body(Full::new(Bytes::new()))?,
        };
        let client = https_client(&self.dir.join("ca.crt"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (status, text) = runtime.block_on(async {
            let response = client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, Error>((status, String::from_utf8_lossy(&body).into_owned()))
        })?;
        let ok = match scenario {
            Scenario::Floor => status.as_u16() == 200 && text.contains("\"gitVersion\""),
            Scenario::ReviewDistinct | Scenario::ReviewRepeated | Scenario::Mixed => {
                status.as_u16() == 201 && text.contains("\"authenticated\":true")
            }
            Scenario::RequestPlain | Scenario::RequestPod => {
                status.as_u16() == 201 && text.contains("\"token\":\"ey")
            }
        };
        if !ok {
            return Err(format!("{} preflight failed: {status} {text}", scenario.name()).into());
        }
        Ok(text)
    }
}

/// A client for the benchmark's server: HTTPS trusting only the benchmark's CA (`ca`).
fn https_client(
    ca: &Path,
) -> Result<
    hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    Error,
> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
    )
}

/// The server under test: warrant, or the reference server.
struct Server {
    child: Child,
}

impl Server {
    fn start(
        warrant: &Path,
        dir: &Path,
        key: &Path,
        issuer: &str,
        listener: &TcpListener,
        log_level: &str,
        extra: &[String],
    ) -> Result<Server, Error> {
        let keys = [
            "--service-account-signing-key-file".into(),
            key.as_os_str().to_owned(),
        ];
        Server::start_with_keys(warrant, dir, &keys, &[], issuer, listener, log_level, extra)
    }

    /// As [`start`](Self::start), with the key flags `keys` and `env` in the server's
    /// environment (a PKCS#11 module's configuration, say).
    #[allow(clippy::too_many_arguments)]
    fn start_with_keys(
        warrant: &Path,
        dir: &Path,
        keys: &[std::ffi::OsString],
        env: &[(String, PathBuf)],
        issuer: &str,
        listener: &TcpListener,
        log_level: &str,
        extra: &[String],
    ) -> Result<Server, Error> {
        let mut command = Command::new(warrant);
        command
            .arg("serve")
            .args(["--service-account-issuer", issuer])
            .args(keys)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("--tls-cert-file")
            .arg(dir.join("serving.crt"))
            .arg("--tls-private-key-file")
            .arg(dir.join("serving.key"))
            .arg("--token-auth-file")
            .arg(dir.join("tokens.csv"))
            .arg("--objects-file")
            .arg(dir.join("objects.yaml"))
            .args(["--log-level", log_level])
            .args(extra);
        Server::spawn(command, dir, "warrant", listener)
    }

    /// The reference server (reference.rs): this binary again, with the same serving
    /// certificate and key as warrant's.
    fn reference(dir: &Path, listener: &TcpListener, body: &Path) -> Result<Server, Error> {
        let mut command = Command::new(std::env::current_exe()?);
        command
            .arg("--reference-server")
            .arg(dir.join("serving.crt"))
            .arg(dir.join("serving.key"))
            .arg(body);
        Server::spawn(command, dir, "reference", listener)
    }

    /// Starts `command` on `listener`, passed as systemd passes a socket (descriptor 3,
    /// `LISTEN_FDS=1`), and waits until it answers there.
    fn spawn(
        mut command: Command,
        dir: &Path,
        name: &str,
        listener: &TcpListener,
    ) -> Result<Server, Error> {
        use command_fds::{CommandFdExt as _, FdMapping};
        use std::os::fd::AsFd as _;
        let port = listener.local_addr()?.port();
        command
            .env("LISTEN_FDS", "1")
            .env_remove("LISTEN_PID")
            .fd_mappings(vec![FdMapping {
                parent_fd: listener.as_fd().try_clone_to_owned()?,
                child_fd: 3,
            }])?;
        // The log goes to a file, as a container runtime takes it: written by warrant as it
        // would be in production, and out of the table's way. Not beside the key and other
        // files warrant watches: each write there would wake its file watcher.
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let log_path = logs.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)?;
        let child = command.stdout(Stdio::null()).stderr(log).spawn()?;
        let mut server = Server { child };
        // At most 60 tries of half a second each and a pause: about half a minute.
        for _ in 0..60 {
            // A connection alone proves nothing: the socket is the bench's, and listens before
            // the server accepts.
            if answers(dir, port) {
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("{name} exited with {status}:\n{log}").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server.stop();
        Err(format!("{name} did not answer within 30 s").into())
    }

    /// Runs `load` and returns what it measured with the server's CPU seconds over it.
    fn measure(
        &self,
        load: impl FnOnce() -> Result<Measured, Error>,
    ) -> Result<(Measured, f64), Error> {
        let before = self.cpu_seconds()?;
        let measured = load()?;
        Ok((measured, self.cpu_seconds()? - before))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// User plus system CPU time the server has used, in seconds.
    fn cpu_seconds(&self) -> Result<f64, Error> {
        process_cpu_seconds(&self.pid().to_string())
    }

    /// A memory figure from /proc/PID/status, in KiB.
    fn memory(&self, field: &str) -> Result<u64, Error> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        let line = status
            .lines()
            .find(|l| l.starts_with(&format!("{field}:")))
            .ok_or_else(|| format!("{field} not in /proc/PID/status"))?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether the server on `port` answers an HTTPS request (any status) within half a second.
fn answers(dir: &Path, port: u16) -> bool {
    let Ok(client) = https_client(&dir.join("ca.crt")) else {
        return false;
    };
    let Ok(request) =
        http::Request::get(format!("https://127.0.0.1:{port}/livez")).body(Full::new(Bytes::new()))
    else {
        return false;
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return false;
    };
    runtime.block_on(async {
        matches!(
            tokio::time::timeout(Duration::from_millis(500), client.request(request)).await,
            Ok(Ok(_))
        )
    })
}

/// CPU seconds (user + system) process `pid` (or `self`) has used so far.
pub(crate) fn process_cpu_seconds(pid: &str) -> Result<f64, Error> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of /proc/PID/stat: 12 and 13 after the name.
    Ok((ticks(11) + ticks(12)) / clock_ticks_per_second())
}

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}
