//! `warrant-bench`: the load benchmark behind `make bench`.
//!
//! It starts the real `warrant serve` (standalone, with a generated objects file of thousands of
//! pods), drives it over loopback HTTPS with keep-alive using wrk (from Debian) at several
//! connection counts, and prints a Markdown table of requests/s, p50 and p99 latency, and
//! warrant's CPU and memory. Scenarios: TokenRequest (plain and pod-bound) and TokenReview
//! (distinct tokens, each used once, and one repeated token), for an RS256 and an ES256 key.
//!
//! wrk runs on the same two cores as warrant, so the figures are what one machine does with both;
//! the document that records them says so.

// A command-line tool: it prints its results, and it drives a real server on the real clock.
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]

mod objects;
mod signer;
mod soak;
mod wrk;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clap::Parser;
use warrant_token::{KeyType, SigningKey};

use crate::objects::Cluster;
use crate::wrk::{Run, Scenario};

/// Drive a real warrant server with wrk and report throughput, latency, CPU and memory.
#[derive(Debug, Parser)]
struct Args {
    /// The warrant binary to run (build it with --release first).
    #[arg(long, default_value = "target/release/warrant")]
    warrant: PathBuf,
    /// How long each measurement runs, in seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Connection counts to measure at.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    connections: Vec<u32>,
    /// Pods in the generated objects file (a tenth as many service accounts, 50 nodes).
    #[arg(long, default_value_t = 5000)]
    pods: usize,
    /// Algorithms to measure.
    #[arg(long, value_delimiter = ',', default_value = "RS256,ES256")]
    algorithms: Vec<String>,
    /// Scenarios to measure (default: all).
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
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("warrant-bench: {e}");
        std::process::exit(1);
    }
}

type Error = Box<dyn std::error::Error>;

fn run(args: &Args) -> Result<(), Error> {
    if !args.signer {
        wrk::check_installed()?;
    }
    if !args.warrant.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release` first",
            args.warrant.display()
        )
        .into());
    }
    let dir = tempfile_dir()?;
    let port = free_port()?;
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
        let result = signer::run(&args.warrant, &dir, &issuer, port, args.seconds, &keys);
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    if let Some(seconds) = args.soak {
        let result = soak(args, &dir, &issuer, port, &admin, &cluster, seconds);
        let _ = std::fs::remove_dir_all(&dir);
        return result;
    }
    let scenarios: Vec<Scenario> = Scenario::ALL
        .into_iter()
        .filter(|s| args.scenarios.is_empty() || args.scenarios.iter().any(|n| n == s.name()))
        .collect();

    println!(
        "| scenario | alg | connections | requests/s | p50 | p99 | errors | warrant CPU (cores) | warrant RSS |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut peak = Vec::new();
    for alg in &args.algorithms {
        let key = generate(alg)?;
        let key_file = dir.join(format!("{alg}.key"));
        std::fs::write(&key_file, key.to_pkcs8_pem()?.as_str())?;
        let mut server = Server::start(
            &args.warrant,
            &dir,
            &key_file,
            &issuer,
            port,
            &args.log_level,
            &args.serve_args,
        )?;
        let target = Target {
            base: issuer.clone(),
            admin: admin.clone(),
            dir: dir.clone(),
        };
        // The fastest rate seen so far sizes the token supply of distinct-token runs.
        let mut fastest = 0.0_f64;
        for scenario in &scenarios {
            for &connections in &args.connections {
                let run = Run {
                    scenario: *scenario,
                    connections,
                    seconds: args.seconds,
                };
                // Distinct-token reviews need a fresh token for every request: enough for the
                // fastest rate measured so far, with room to spare.
                let tokens = match scenario {
                    Scenario::ReviewDistinct => {
                        let expected = (fastest * args.seconds as f64 * 1.5) as usize;
                        expected.clamp(20_000, 600_000)
                    }
                    _ => 1,
                };
                cluster.write_review_tokens(&key, &issuer, tokens, &dir.join("review-tokens"))?;
                target.preflight(*scenario)?;
                let before = server.cpu_seconds()?;
                let result = wrk::run(&target, &run)?;
                let cpu = (server.cpu_seconds()? - before) / result.seconds;
                let rss = server.memory("VmRSS")?;
                fastest = fastest.max(result.requests_per_second);
                let mut errors = result.errors.to_string();
                if *scenario == Scenario::ReviewDistinct && result.requests > tokens as u64 {
                    errors.push_str(" (tokens reused)");
                }
                println!(
                    "| {} | {alg} | {connections} | {:.0} | {} | {} | {errors} | {cpu:.2} | {} |",
                    scenario.name(),
                    result.requests_per_second,
                    result.p50,
                    result.p99,
                    mib(rss),
                );
            }
        }
        peak.push((alg.clone(), server.memory("VmHWM")?));
        server.stop();
    }
    for (alg, hwm) in peak {
        println!("\nwarrant peak resident memory ({alg} run): {}", mib(hwm));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The soak: one ES256 server with delegated authentication to a kube-apiserver that never
/// answers, good and abusive clients at once (soak.rs).
fn soak(
    args: &Args,
    dir: &Path,
    issuer: &str,
    port: u16,
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
        port,
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
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
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

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
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
    /// benchmark must not measure fast failures.
    fn preflight(&self, scenario: Scenario) -> Result<(), Error> {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(self.dir.join("ca.crt"))?)?;
        let client = reqwest::blocking::Client::builder()
            .tls_certs_only([ca])
            .build()?;
        let (path, body) = scenario.sample(&self.dir)?;
        let response = client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.admin)
            .header("content-type", "application/json")
            .body(body)
            .send()?;
        let status = response.status();
        let text = response.text()?;
        let ok = status.as_u16() == 201
            && match scenario {
                Scenario::ReviewDistinct | Scenario::ReviewRepeated | Scenario::Mixed => {
                    text.contains("\"authenticated\":true")
                }
                _ => text.contains("\"token\":\"ey"),
            };
        if !ok {
            return Err(format!("{} preflight failed: {status} {text}", scenario.name()).into());
        }
        Ok(())
    }
}

/// The server under test.
struct Server {
    child: Child,
}

impl Server {
    fn start(
        warrant: &Path,
        dir: &Path,
        key: &Path,
        issuer: &str,
        port: u16,
        log_level: &str,
        extra: &[String],
    ) -> Result<Server, Error> {
        // The log goes to a file, as a container runtime takes it: written by warrant as it
        // would be in production, and out of the table's way. Not beside the key and other
        // files warrant watches: each write there would wake its file watcher.
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let log_path = logs.join("warrant.log");
        let log = std::fs::File::create(&log_path)?;
        let child = Command::new(warrant)
            .arg("serve")
            .args(["--service-account-issuer", issuer])
            .arg("--service-account-signing-key-file")
            .arg(key)
            .arg("--tls-cert-file")
            .arg(dir.join("serving.crt"))
            .arg("--tls-private-key-file")
            .arg(dir.join("serving.key"))
            .arg("--token-auth-file")
            .arg(dir.join("tokens.csv"))
            .arg("--objects-file")
            .arg(dir.join("objects.yaml"))
            .args([
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                &port.to_string(),
                "--log-level",
                log_level,
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let mut server = Server { child };
        for _ in 0..600 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("warrant exited with {status}:\n{log}").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        server.stop();
        Err("warrant did not start listening within 30 s".into())
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
