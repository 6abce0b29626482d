//! The soak: good clients and abusive ones at the same time, for minutes, on one server.
//!
//! Good clients: wrk, a mix of pod-bound TokenRequests and TokenReviews (admin bearer token from
//! the token file). Abusive clients, each a thread keeping its kind of pressure up for the whole
//! run:
//! - idle TCP: connections that never start the TLS handshake;
//! - idle TLS: connections that finish the handshake (HTTP/1.1 or h2 by ALPN) and send nothing;
//! - slow: connections that send a request's headers a byte at a time;
//! - abandoning: requests carrying a distinct 60 KB bearer token that warrant cannot verify
//!   itself, so it asks kube-apiserver (delegated authentication) — here a listener that accepts
//!   and never answers, as an unreachable or stalled kube-apiserver does — and the client hangs
//!   up after 50 ms.
//!
//! What a sound server shows: the good clients' throughput and p99 hold up, and warrant's
//! resident memory and open descriptors end where they started once the abusers stop (and the
//! configured timeouts have passed). What a leaking one shows: both grow with the run.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::wrk::{self, Run, Scenario};
use crate::{Error, Server, Target, mib};

/// How many of each abusive client run at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Abusers {
    pub(crate) idle_tcp: usize,
    pub(crate) idle_tls: usize,
    pub(crate) slow: usize,
    /// Abandoned delegated lookups started per second.
    pub(crate) abandon_per_second: u32,
}

/// What the abusive clients saw.
#[derive(Default)]
struct Counts {
    /// Connections opened.
    opened: AtomicU64,
    /// Connections the server closed (or refused) while the client held them.
    closed_by_server: AtomicU64,
    /// Requests sent and abandoned.
    abandoned: AtomicU64,
}

/// A point-in-time reading of the server process.
struct Sample {
    label: &'static str,
    rss_kib: u64,
    fds: usize,
}

fn sample(server: &Server, label: &'static str) -> Result<Sample, Error> {
    Ok(Sample {
        label,
        rss_kib: server.memory("VmRSS")?,
        fds: std::fs::read_dir(format!("/proc/{}/fd", server.pid()))?.count(),
    })
}

/// A kube-apiserver that accepts connections and never answers: delegated lookups sent to it
/// stall until warrant's own timeout ends them.
pub(crate) struct Blackhole {
    pub(crate) addr: SocketAddr,
}

impl Blackhole {
    pub(crate) fn start(stop: Arc<AtomicBool>) -> Result<Blackhole, Error> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => held.push(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
                // Let go of connections warrant has given up on.
                if held.len() > 4096 {
                    held.clear();
                }
            }
        });
        Ok(Blackhole { addr })
    }

    /// A kubeconfig pointing at it.
    pub(crate) fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stalled\n  cluster:\n    server: https://{}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: stalled\n  context: {{cluster: stalled, user: nobody}}\ncurrent-context: stalled\nusers:\n- name: nobody\n  user: {{token: unused}}\n",
            self.addr
        )
    }
}

struct Tls {
    config: Arc<rustls::ClientConfig>,
}

impl Tls {
    fn new(ca: &Path, alpn: &[&[u8]]) -> Result<Tls, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca)? {
            roots.add(cert?)?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Tls {
            config: Arc::new(config),
        })
    }

    /// A connection with the handshake done.
    fn connect(
        &self,
        addr: SocketAddr,
    ) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, Error> {
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
        let name = ServerName::try_from("127.0.0.1")?;
        let conn = rustls::ClientConnection::new(self.config.clone(), name)?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(stream)
    }
}

/// True once the server has closed the connection (EOF or reset); false while it is open.
/// Reads what is waiting (a TLS server sends session tickets, and an alert before it closes)
/// without blocking: the abusive clients never use the connection again.
fn closed(sock: &TcpStream) -> bool {
    use std::io::Read as _;
    let _ = sock.set_nonblocking(true);
    let mut buf = [0u8; 4096];
    let mut reader = sock;
    let gone = loop {
        match reader.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
        }
    };
    let _ = sock.set_nonblocking(false);
    gone
}

/// Holds `count` connections opened by `open`, replacing each one the server closes.
fn hold<C: Send + 'static>(
    count: usize,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    open: impl Fn() -> Result<C, Error> + Send + 'static,
    socket: fn(&C) -> &TcpStream,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut held: Vec<C> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let before = held.len();
            held.retain(|c| !closed(socket(c)));
            counts
                .closed_by_server
                .fetch_add((before - held.len()) as u64, Ordering::Relaxed);
            while held.len() < count && !stop.load(Ordering::Relaxed) {
                match open() {
                    Ok(c) => {
                        counts.opened.fetch_add(1, Ordering::Relaxed);
                        held.push(c);
                    }
                    Err(_) => {
                        counts.closed_by_server.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

/// Connections that dribble a request's headers, one byte every half second.
fn slow(
    count: usize,
    addr: SocketAddr,
    tls: Arc<Tls>,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        const HEADERS: &[u8] = b"POST /apis/authentication.k8s.io/v1/tokenreviews HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut held: Vec<(
            rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
            usize,
        )> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            while held.len() < count {
                match tls.connect(addr) {
                    Ok(s) => {
                        counts.opened.fetch_add(1, Ordering::Relaxed);
                        held.push((s, 0));
                    }
                    Err(_) => {
                        counts.closed_by_server.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            let before = held.len();
            held.retain_mut(|(s, sent)| {
                let byte = HEADERS.get(*sent % HEADERS.len()..=*sent % HEADERS.len());
                *sent += 1;
                let ok = s.write_all(byte.unwrap_or(b"a")).and_then(|()| s.flush());
                ok.is_ok() && !closed(&s.sock)
            });
            counts
                .closed_by_server
                .fetch_add((before - held.len()) as u64, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(500));
        }
    })
}

/// Requests with a distinct large bearer token, abandoned 50 ms after they are sent.
fn abandon(
    per_second: u32,
    addr: SocketAddr,
    tls: Arc<Tls>,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut n: u64 = 0;
        let interval = Duration::from_secs(1) / per_second.max(1);
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            // 60 KB that is not a JWT warrant could verify: it goes to delegation (tokens over
            // 64 KiB are refused without asking).
            let token = format!("{n:016x}{}", "x".repeat(60 * 1024));
            let request = format!(
                "GET /api/v1/namespaces/bench/serviceaccounts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
            );
            if let Ok(mut s) = tls.connect(addr) {
                if s.write_all(request.as_bytes())
                    .and_then(|()| s.flush())
                    .is_ok()
                {
                    counts.abandoned.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
                let _ = s.sock.shutdown(std::net::Shutdown::Both);
            }
            // Each request takes its 50 ms; the rate is approximate, which is all a soak needs.
            std::thread::sleep(interval.saturating_sub(Duration::from_millis(50)));
        }
    })
}

/// Runs the soak and prints its report.
pub(crate) fn run(
    server: &Server,
    target: &Target,
    addr: SocketAddr,
    seconds: u64,
    settle: Duration,
    abusers: Abusers,
) -> Result<(), Error> {
    let mut samples = vec![sample(server, "start")?];
    let stop = Arc::new(AtomicBool::new(false));
    let abuse = Abuse::start(abusers, addr, &target.dir.join("ca.crt"), &stop)?;
    // Let the abusers reach their numbers before the good clients start.
    std::thread::sleep(Duration::from_secs(5));
    samples.push(sample(server, "abusers connected")?);
    let result = wrk::run(
        target,
        &Run {
            scenario: Scenario::Mixed,
            connections: 8,
            seconds,
        },
    )?;
    samples.push(sample(server, "end of load")?);
    stop.store(true, Ordering::Relaxed);
    for t in abuse.threads {
        let _ = t.join();
    }
    std::thread::sleep(settle);
    samples.push(sample(server, "settled")?);
    report(seconds, &result, &abuse.kinds, &samples);
    // Still answering, correctly, after all that.
    target.preflight(Scenario::RequestPod)?;
    target.preflight(Scenario::ReviewDistinct)?;
    Ok(())
}

/// The abusive clients at work, one thread per kind and share, until `stop` is set.
struct Abuse {
    /// What each kind saw, by its name in the report.
    kinds: [(&'static str, Arc<Counts>); 4],
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Abuse {
    /// Starts `abusers` against `addr`, whose certificate `ca` issued.
    fn start(
        abusers: Abusers,
        addr: SocketAddr,
        ca: &Path,
        stop: &Arc<AtomicBool>,
    ) -> Result<Abuse, Error> {
        let h1 = Arc::new(Tls::new(ca, &[b"http/1.1"])?);
        let h2 = Arc::new(Tls::new(ca, &[b"h2"])?);
        let kinds = [
            ("idle TCP", Arc::new(Counts::default())),
            ("idle TLS", Arc::new(Counts::default())),
            ("slow headers", Arc::new(Counts::default())),
            ("abandoned lookups", Arc::new(Counts::default())),
        ];
        let [tcp_counts, tls_counts, slow_counts, abandon_counts] = kinds.clone().map(|(_, c)| c);
        let mut threads = vec![
            hold(
                abusers.idle_tcp,
                stop.clone(),
                tcp_counts,
                move || Ok(TcpStream::connect_timeout(&addr, Duration::from_secs(5))?),
                |s| s,
            ),
            slow(abusers.slow, addr, h1.clone(), stop.clone(), slow_counts),
            abandon(
                abusers.abandon_per_second,
                addr,
                h1.clone(),
                stop.clone(),
                abandon_counts,
            ),
        ];
        // Half the idle TLS connections speak HTTP/1.1, half h2.
        for (tls, share) in [
            (h1, abusers.idle_tls / 2),
            (h2, abusers.idle_tls - abusers.idle_tls / 2),
        ] {
            threads.push(hold(
                share,
                stop.clone(),
                tls_counts.clone(),
                move || tls.connect(addr),
                |s| &s.sock,
            ));
        }
        Ok(Abuse { kinds, threads })
    }
}

/// Prints the soak's tables: the good clients' numbers, what each kind of abusive client saw,
/// and warrant's memory and descriptors at each sample.
fn report(
    seconds: u64,
    result: &wrk::Outcome,
    kinds: &[(&'static str, Arc<Counts>)],
    samples: &[Sample],
) {
    println!(
        "good clients (wrk, 8 connections, {seconds} s, TokenRequest pod-bound + TokenReview): {:.0} requests/s, p50 {}, p99 {}, {} errors\n",
        result.requests_per_second, result.p50, result.p99, result.errors
    );
    println!("| abusive client | connections opened | closed by warrant | requests abandoned |");
    println!("|---|---:|---:|---:|");
    for (name, c) in kinds {
        println!(
            "| {name} | {} | {} | {} |",
            c.opened.load(Ordering::Relaxed),
            c.closed_by_server.load(Ordering::Relaxed),
            c.abandoned.load(Ordering::Relaxed)
        );
    }
    println!("\n| warrant | resident memory | open descriptors |");
    println!("|---|---:|---:|");
    for s in samples {
        println!("| {} | {} | {} |", s.label, mib(s.rss_kib), s.fds);
    }
}
