//! `warrant-bench --signer`: Sign over the external signer's Unix socket (kube-apiserver's
//! path to warrant, KEP-740), against the same signatures made in-process: the socket's cost is
//! the difference. For each algorithm it starts `warrant serve --service-account-signing-endpoint`
//! and calls Sign from 1 and 32 concurrent streams (a tonic client, as kube-apiserver's grpc-go
//! client multiplexes streams on one connection), then signs the same claims in this process on
//! one thread and on every core: the machine's crypto limit.
//!
//! Client and server share the machine's cores, as kube-apiserver and a warrant sidecar do on a
//! control-plane node.

// A benchmark measures on the real clock, in threads and in a runtime of its own.
#![allow(clippy::disallowed_types)]

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_signer::proto::{MetadataRequest, SignJwtRequest};
use warrant_testkit::softhsm::{PIN, SoftHsm2};
use warrant_token::{Binding, Claims, NewToken, ObjectRef, SigningKey};

use crate::server::{Server, process_cpu_seconds};
use crate::{Error, mib};

/// One measurement: signatures per second and latency percentiles.
struct Measured {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted
        .get(index.min(sorted.len() - 1))
        .copied()
        .unwrap_or_default()
}

fn format(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1000.0)
    }
}

/// Claims as kube-apiserver sends them for a pod-bound token, encoded.
fn claims(issuer: &str) -> String {
    let now = jiff::Timestamp::now().as_second();
    let claims = Claims::new(NewToken {
        issuer,
        namespace: "bench",
        service_account: ObjectRef::new("app", "5a9f3c0e-0000-4000-8000-000000000001"),
        audiences: vec!["https://kubernetes.default.svc".into()],
        binding: Binding::Pod {
            pod: ObjectRef::new("app-0", "5a9f3c0e-0000-4000-8000-000000000002"),
            node: Some(ObjectRef::new(
                "node-1",
                "5a9f3c0e-0000-4000-8000-000000000003",
            )),
        },
        issued_at: now,
        expires_at: now + 3600,
        warn_after: None,
        jti: "5a9f3c0e-0000-4000-8000-000000000004".into(),
    });
    URL_SAFE_NO_PAD.encode(claims.to_json())
}

/// What each caller asks over the socket.
#[derive(Clone, Copy)]
enum Call {
    /// A signature of the claims.
    Sign,
    /// Metadata: a call with no work behind it, the floor of what one gRPC call costs here.
    Empty,
}

/// `call` over the socket from `streams` concurrent callers for `seconds`.
async fn over_socket(
    socket: &Path,
    claims: &str,
    call: Call,
    streams: usize,
    seconds: u64,
) -> Result<Measured, Error> {
    let client = warrant_signer::client::connect(socket).await?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let claims: Arc<str> = claims.into();
    let mut tasks = Vec::with_capacity(streams);
    for _ in 0..streams {
        let mut client = client.clone();
        let claims = claims.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let started = Instant::now();
                match call {
                    Call::Sign => {
                        let request = SignJwtRequest {
                            claims: claims.to_string(),
                        };
                        client.sign(request).await.map_err(|s| s.to_string())?;
                    }
                    Call::Empty => {
                        client
                            .metadata(MetadataRequest {})
                            .await
                            .map_err(|s| s.to_string())?;
                    }
                }
                latencies.push(started.elapsed());
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    Ok(Measured {
        per_second: latencies.len() as f64 / elapsed,
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
    })
}

/// The same signatures in this process, on `threads` threads, for `seconds`.
fn in_process(key: &SigningKey, claims: &str, threads: usize, seconds: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let count: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut n = 0usize;
                    while Instant::now() < deadline {
                        if key.sign_detached(claims).is_ok() {
                            n += 1;
                        }
                    }
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    count as f64 / started.elapsed().as_secs_f64()
}

/// Environment variables set for the server alone.
type Env = Vec<(String, PathBuf)>;

/// A SoftHSM2 token for one key, in `dir`: the key imported into it as a non-extractable object
/// by `warrant keys import --from-pem` (the path an operator takes), and the flags and
/// environment that make `warrant serve` sign with it.
fn softhsm_keys(
    warrant: &Path,
    module: &Path,
    dir: &Path,
    key_file: &Path,
) -> Result<(Vec<OsString>, Env), Error> {
    let _ = std::fs::remove_dir_all(dir);
    let softhsm = SoftHsm2::create_for(dir, module);
    softhsm.init_token("bench");
    let uri = softhsm.uri("bench", &softhsm.pin_file("pin", PIN));
    let env: Env = softhsm
        .env()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    let key_dir = dir.join("keys");
    let keys: Vec<OsString> = vec![
        "--key-dir".into(),
        key_dir.into(),
        "--key-pkcs11-uri".into(),
        uri.into(),
    ];
    let import = Command::new(warrant)
        .args(["keys", "import"])
        .args(&keys)
        .arg("--from-pem")
        .arg(key_file)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()?;
    if !import.status.success() {
        return Err(format!(
            "warrant keys import: {}",
            String::from_utf8_lossy(&import.stderr)
        )
        .into());
    }
    Ok((keys, env))
}

/// Runs the signer benchmark and prints its table. With `pkcs11_module`, warrant signs with
/// each key held in a SoftHSM2 token; the in-process rows still sign with the key in memory.
pub(crate) fn run(
    warrant: &Path,
    dir: &Path,
    issuer: &str,
    listener: &TcpListener,
    seconds: u64,
    algorithms: &[(String, SigningKey)],
    pkcs11_module: Option<&Path>,
) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let claims = claims(issuer);
    println!(
        "| alg | path | streams/threads | signatures/s | p50 | p99 | of in-process ({cores} threads) | warrant CPU (cores) | client CPU (cores) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (alg, key) in algorithms {
        let single = in_process(key, &claims, 1, seconds);
        let all = in_process(key, &claims, cores, seconds);
        println!(
            "| {alg} | in-process | 1 | {single:.0} | | | {:.0} % | | |",
            100.0 * single / all
        );
        println!("| {alg} | in-process | {cores} | {all:.0} | | | 100 % | | |");

        let key_file = dir.join(format!("{alg}-signer.key"));
        std::fs::write(&key_file, key.to_pkcs8_pem()?.as_str())?;
        let socket = dir.join("signer.sock");
        let extra = vec![
            "--service-account-signing-endpoint".to_owned(),
            socket.display().to_string(),
        ];
        let mut server = match pkcs11_module {
            None => Server::start(warrant, dir, &key_file, issuer, listener, "info", &extra)?,
            Some(module) => {
                let hsm = dir.join(format!("{alg}-softhsm"));
                let (keys, env) = softhsm_keys(warrant, module, &hsm, &key_file)?;
                Server::start_with_keys(
                    warrant, dir, &keys, &env, issuer, listener, "info", &extra,
                )?
            }
        };
        let path_of = |path: &str| match pkcs11_module {
            None => path.to_owned(),
            Some(_) => format!("{path}, key in SoftHSM2"),
        };
        let calls = [
            (Call::Sign, "socket"),
            (Call::Empty, "socket, Metadata (no work)"),
        ];
        for ((call, path), streams) in calls
            .iter()
            .flat_map(|c| [1usize, 32].map(move |n| (*c, n)))
        {
            let before = server.cpu_seconds()?;
            let client_before = process_cpu_seconds("self")?;
            let measured =
                runtime.block_on(over_socket(&socket, &claims, call, streams, seconds))?;
            let cpu = (server.cpu_seconds()? - before) / seconds as f64;
            let client = (process_cpu_seconds("self")? - client_before) / seconds as f64;
            println!(
                "| {alg} | {} | {streams} | {:.0} | {} | {} | {:.0} % | {cpu:.2} | {client:.2} |",
                path_of(path),
                measured.per_second,
                format(measured.p50),
                format(measured.p99),
                100.0 * measured.per_second / all,
            );
        }
        println!(
            "\nwarrant resident memory after the {alg} run: {}\n",
            mib(server.memory("VmRSS")?)
        );
        server.stop();
    }
    Ok(())
}
