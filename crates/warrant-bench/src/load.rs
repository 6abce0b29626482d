//! The load table: per algorithm, the in-process costs, then each scenario at each load over
//! HTTP/1.1 (wrk) and HTTP/2 (h2load) against one warrant server, each row's server CPU per
//! request against its limit; the reference server's floor once.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::Path;

use warrant_token::SigningKey;

use crate::inprocess::{self, Costs};
use crate::objects::Cluster;
use crate::server::{Measured, Server};
use crate::target::Target;
use crate::wrk::{self, Run, Scenario};
use crate::{Args, Error, Protocol, generate, h2load, loopback_listener, mib};

/// How a row loaded the server: the protocol, and `connections` (HTTP/1.1) or
/// `connections×streams` (HTTP/2).
type Load = (Protocol, String);

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

/// What every load measurement shares.
pub(crate) struct Bench<'a> {
    pub(crate) dir: &'a Path,
    /// The socket warrant serves on, and its port.
    pub(crate) listener: &'a TcpListener,
    pub(crate) port: u16,
    pub(crate) issuer: &'a str,
    pub(crate) admin: &'a str,
    pub(crate) cluster: &'a Cluster,
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
pub(crate) fn load(
    args: &Args,
    bench: &Bench<'_>,
    scenarios: &[Scenario],
    with_reference: bool,
    protocols: &[Protocol],
) -> Result<(), Error> {
    let dir = bench.dir;
    let keys = in_process_costs(args, bench)?;
    let loads = Loads {
        h1: args
            .connections
            .iter()
            .map(|&c| ((Protocol::Http1, c.to_string()), c))
            .collect(),
        h2: args
            .streams
            .iter()
            .map(|&m| ((Protocol::H2, format!("{}×{m}", args.h2_connections)), m))
            .collect(),
        with_h1: protocols.contains(&Protocol::Http1),
        with_h2: protocols.contains(&Protocol::H2),
    };

    println!(
        "| scenario | protocol | alg | connections (×streams) | requests/s | p50 | p99 | errors | server CPU (cores) | server CPU µs/request | limit µs | ratio | server RSS |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut reference_floor: Option<HashMap<Load, f64>> = None;
    let mut peak = Vec::new();
    for (alg, key, costs) in &keys {
        let key_file = dir.join(format!("{alg}.key"));
        std::fs::write(&key_file, key.to_pkcs8_pem()?.as_str())?;
        let server = Server::start(
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
                args,
                bench,
                &target,
                &loads.h1,
                &loads.h2,
                loads.with_h1,
                loads.with_h2,
            )?);
        }
        let mut run = KeyRun {
            alg,
            key,
            costs,
            key_file: &key_file,
            target: &target,
            reference: reference_floor.as_ref(),
            floor: HashMap::new(),
            rates: HashMap::new(),
        };
        for scenario in scenarios.iter().filter(|_| loads.with_h1) {
            for load in &loads.h1 {
                run.h1_row(args, bench, &server, *scenario, load)?;
            }
        }
        peak.push((
            alg.clone(),
            run.h2_rows(args, bench, server, scenarios, &loads)?,
        ));
    }
    for (alg, hwm) in peak {
        println!("\nwarrant peak resident memory ({alg} run): {}", mib(hwm));
    }
    Ok(())
}

/// Each algorithm's key and its in-process costs, measured before the load and printed.
fn in_process_costs(
    args: &Args,
    bench: &Bench<'_>,
) -> Result<Vec<(String, SigningKey, Costs)>, Error> {
    let mut keys = Vec::new();
    for alg in &args.algorithms {
        let key = generate(alg)?;
        let objects = bench.dir.join("objects.yaml");
        let costs = inprocess::measure(&key, bench.issuer, bench.cluster, &objects)?;
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
    Ok(keys)
}

/// The loads each scenario runs at: HTTP/1.1 connections, HTTP/2 streams (each with its
/// load's name), and which protocols are measured.
struct Loads {
    h1: Vec<(Load, u32)>,
    h2: Vec<(Load, u32)>,
    with_h1: bool,
    with_h2: bool,
}

/// One algorithm's runs against its server: its key and costs, and the rates measured so far.
struct KeyRun<'a> {
    alg: &'a str,
    key: &'a SigningKey,
    costs: &'a Costs,
    key_file: &'a Path,
    target: &'a Target,
    /// The reference server's floor, when measured.
    reference: Option<&'a HashMap<Load, f64>>,
    /// This server's floor, by load.
    floor: HashMap<Load, f64>,
    /// The rates measured so far, which size the token supply of distinct-token runs.
    rates: HashMap<(Scenario, Load), f64>,
}

impl KeyRun<'_> {
    /// One HTTP/1.1 row: `scenario` at `load` with wrk.
    fn h1_row(
        &mut self,
        args: &Args,
        bench: &Bench<'_>,
        server: &Server,
        scenario: Scenario,
        (load, connections): &(Load, u32),
    ) -> Result<(), Error> {
        let connections = *connections;
        // wrk's threads (one per connection, up to two) each read a file of their own.
        let threads = connections.min(2) as usize;
        let tokens = match scenario {
            Scenario::ReviewDistinct => {
                let estimate = distinct_rate(load, &self.rates, &self.floor, self.costs);
                let wanted = (estimate * args.seconds as f64 * 1.2) as usize * 2 / threads;
                wanted.clamp(20_000, 600_000)
            }
            _ => 1,
        };
        let tokens_file = bench.dir.join("review-tokens");
        bench
            .cluster
            .write_review_tokens(self.key, bench.issuer, tokens, &tokens_file)?;
        self.target.preflight(scenario)?;
        let run = Run {
            scenario,
            connections,
            seconds: args.seconds,
        };
        let (mut measured, cpu) =
            server.measure(|| Ok(Measured::from(wrk::run(self.target, &run)?)))?;
        self.rates
            .insert((scenario, load.clone()), measured.requests_per_second);
        if scenario == Scenario::ReviewDistinct && measured.requests > (tokens / 2 * threads) as u64
        {
            measured.errors.push_str(" (tokens reused)");
        }
        let row = Row {
            scenario: row_name(scenario, Protocol::Http1),
            alg: self.alg,
            load,
            measured,
            cpu,
            limit: None,
            rss_kib: server.memory("VmRSS")?,
        };
        with_limit(row, scenario, &mut self.floor, self.reference, self.costs).print();
        Ok(())
    }

    /// The HTTP/2 rows of `scenarios`, one request over and over (so one token); distinct-token
    /// reviews last, against a server of their own with the signature cache off (every review
    /// verifies). Stops `server`; returns its peak resident memory.
    fn h2_rows(
        &mut self,
        args: &Args,
        bench: &Bench<'_>,
        mut server: Server,
        scenarios: &[Scenario],
        loads: &Loads,
    ) -> Result<u64, Error> {
        let dir = bench.dir;
        let h2_scenarios: Vec<Scenario> = H2_SCENARIOS
            .into_iter()
            .filter(|s| loads.with_h2 && scenarios.contains(s))
            .collect();
        if !h2_scenarios.is_empty() {
            bench.cluster.write_review_tokens(
                self.key,
                bench.issuer,
                1,
                &dir.join("review-tokens"),
            )?;
            let (_, body) = Scenario::ReviewRepeated.sample(dir)?;
            std::fs::write(dir.join("review-body.json"), body.unwrap_or_default())?;
        }
        for scenario in h2_scenarios
            .iter()
            .filter(|s| **s != Scenario::ReviewDistinct)
        {
            self.h2(args, &server, *scenario, &loads.h2)?;
        }
        let hwm = server.memory("VmHWM")?;
        server.stop();
        if h2_scenarios.contains(&Scenario::ReviewDistinct) {
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
                self.key_file,
                bench.issuer,
                bench.listener,
                &args.log_level,
                &extra,
            )?;
            self.h2(args, &server, Scenario::ReviewDistinct, &loads.h2)?;
            server.stop();
        }
        Ok(hwm)
    }

    /// `scenario`'s HTTP/2 rows against `server` (see [`measure_h2`]).
    fn h2(
        &mut self,
        args: &Args,
        server: &Server,
        scenario: Scenario,
        loads: &[(Load, u32)],
    ) -> Result<(), Error> {
        measure_h2(
            args,
            server,
            self.target,
            scenario,
            self.alg,
            loads,
            &mut self.floor,
            self.reference,
            self.costs,
        )
    }
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
