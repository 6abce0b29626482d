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
mod load;
mod objects;
mod reference;
mod server;
mod signer;
mod soak;
mod target;
mod wrk;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use warrant_token::{KeyType, SigningKey};

use crate::load::Bench;
use crate::objects::Cluster;
use crate::server::Server;
use crate::target::Target;
use crate::wrk::Scenario;

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
    check_tools(args, &protocols)?;
    let dir = tempfile_dir()?;
    // The server's socket, bound here and passed to each server the run starts (as systemd
    // passes one): the port, which the issuer URL holds, stays the bench's for the whole run.
    let listener = loopback_listener()?;
    let port = listener.local_addr()?.port();
    let admin = local_setup(&args.warrant, &dir, port)?;
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
    let result = load::load(
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

/// The load generators this run drives are installed: wrk for the soak and for HTTP/1.1 load,
/// h2load for h2 load; none for the signer's run.
fn check_tools(args: &Args, protocols: &[Protocol]) -> Result<(), Error> {
    let load_run = !args.signer && args.soak.is_none();
    if !args.signer && (!load_run || protocols.contains(&Protocol::Http1)) {
        wrk::check_installed()?;
    }
    if load_run && protocols.contains(&Protocol::H2) {
        h2load::check_installed()?;
    }
    Ok(())
}

/// `warrant local-setup` in `dir` for an issuer on `port`; returns the admin token it wrote.
fn local_setup(warrant: &Path, dir: &Path, port: u16) -> Result<String, Error> {
    let setup = Command::new(warrant)
        .args(["local-setup", "--dir"])
        .arg(dir)
        .args(["--port", &port.to_string()])
        .output()?;
    if !setup.status.success() {
        return Err(format!(
            "local-setup failed: {}",
            String::from_utf8_lossy(&setup.stderr)
        )
        .into());
    }
    Ok(std::fs::read_to_string(dir.join("tokens.csv"))?
        .split(',')
        .next()
        .unwrap_or_default()
        .to_owned())
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
