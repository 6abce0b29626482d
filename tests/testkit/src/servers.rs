//! Servers tests run beside warrant on loopback: an emulator process (moto, Azurite) on a port
//! it picks itself, in a directory of its own, and a TCP proxy in front of it that a test can
//! take down and bring back (the server "unreachable", then answering again with its state
//! intact).
//!
//! No port is chosen free and then handed to a process: between the two, any other test or
//! process could take it. An emulator binds port 0 and says which port it got; the proxy holds
//! its port for its whole life, down or up.

use std::io::{BufRead as _, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

use crate::tools;

/// A server for the tests (moto, Azurite): a process on a loopback port it picked, in a
/// temporary directory of its own; killed when dropped.
pub struct Emulator {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Emulator {
    /// Starts `program` (`what` names it) with the arguments `args` gives for a port and its
    /// directory, and waits until it says where it listens. The port `args` is given is always
    /// 0: the program binds a port of the system's choice and prints its URL
    /// (`http://127.0.0.1:PORT`, as moto's and Azurite's servers do at start), which is how
    /// [`port`](Self::port) learns it.
    pub async fn start(
        program: &str,
        what: &str,
        args: impl FnOnce(u16, &Path) -> Vec<String>,
    ) -> Emulator {
        let mut command = tools::command(program, what);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut child = command
            .args(args(0, dir.path()))
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let (found, port) = mpsc::channel();
        let said = Arc::new(Mutex::new(String::new()));
        for output in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|o| Box::new(o) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let (found, said) = (found.clone(), Arc::clone(&said));
            std::thread::spawn(move || watch_output(output, &found, &said));
        }
        drop(found);
        // moto takes a second or two to import.
        for _ in 0..600 {
            if let Ok(port) = port.try_recv() {
                return Emulator {
                    child,
                    port,
                    _dir: dir,
                };
            }
            if let Some(status) = child.try_wait().expect("the emulator's status") {
                panic!(
                    "{program} exited with {status} before it listened:\n{}",
                    said.lock().unwrap_or_else(|e| e.into_inner())
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{program} did not say where it listens within 30 s:\n{}",
            said.lock().unwrap_or_else(|e| e.into_inner())
        );
    }

    /// moto's server on plain HTTP (S3, KMS, … on one port).
    pub async fn moto() -> Emulator {
        Emulator::start("moto_server", "moto's server (moto_server)", |port, _| {
            vec![
                "-H".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
            ]
        })
        .await
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads an emulator's `output` (stdout or stderr) to its end, so that the process never
/// blocks on a full pipe (moto logs every request): sends `found` the port of the first
/// loopback URL it prints, and keeps what it says until then in `said`, for the failure
/// message of an emulator that does not start.
fn watch_output(output: impl Read, found: &mpsc::Sender<u16>, said: &Mutex<String>) {
    let mut listening = false;
    let mut output = BufReader::new(output);
    let mut line = Vec::new();
    while output.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        if !listening {
            let text = String::from_utf8_lossy(&line);
            if let Some(port) = loopback_url_port(&text) {
                listening = true;
                let _ = found.send(port);
            } else {
                said.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_str(&text);
            }
        }
        line.clear();
    }
}

/// The port of the first `://127.0.0.1:PORT` in `line` (not port 0: Azurite says it is
/// "starting on 127.0.0.1:0" first).
fn loopback_url_port(line: &str) -> Option<u16> {
    let (_, after) = line.split_once("://127.0.0.1:")?;
    let digits = after.split(|c: char| !c.is_ascii_digit()).next()?;
    digits.parse().ok().filter(|port| *port != 0)
}

/// A TCP proxy on loopback to `upstream`, which a test takes [`down`](Proxy::down) (connections
/// refused, open ones cut) and brings back [`up`](Proxy::up) on the same port.
///
/// The port stays the proxy's while it is down: a socket bound to it and never listening holds
/// it (a connection to a port nobody listens on is refused), and the listener of each `up` is
/// bound beside it with `SO_REUSEPORT`, which only this process's own sockets share.
pub struct Proxy {
    port: u16,
    upstream: u16,
    _hold: TcpSocket,
    task: Option<AbortOnDropHandle<()>>,
}

/// A loopback socket with `SO_REUSEPORT`, bound to `port` (0: any).
fn reusable_socket(port: u16) -> TcpSocket {
    let socket = TcpSocket::new_v4().expect("a TCP socket");
    socket
        .set_reuseport(true)
        .expect("SO_REUSEPORT on a TCP socket");
    socket
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .unwrap_or_else(|e| panic!("binding 127.0.0.1:{port}: {e}"));
    socket
}

impl Proxy {
    /// A proxy to `upstream`, up.
    pub async fn start(upstream: u16) -> Proxy {
        let hold = reusable_socket(0);
        let mut proxy = Proxy {
            port: hold.local_addr().expect("the proxy's address").port(),
            upstream,
            _hold: hold,
            task: None,
        };
        proxy.up().await;
        proxy
    }

    /// Accepts connections again.
    pub async fn up(&mut self) {
        let listener: TcpListener = reusable_socket(self.port)
            .listen(1024)
            .expect("the proxy listens on its port");
        let upstream = self.upstream;
        self.task = Some(AbortOnDropHandle::new(tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        })));
    }

    /// Refuses connections and cuts the open ones.
    pub fn down(&mut self) {
        self.task = None;
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_read_from_the_url_an_emulator_prints() {
        // moto (werkzeug, on stderr) and Azurite (on stdout), as they print at start.
        assert_eq!(
            loopback_url_port(" * Running on http://127.0.0.1:35991\n"),
            Some(35991)
        );
        assert_eq!(
            loopback_url_port(" * Running on https://127.0.0.1:4443\n"),
            Some(4443)
        );
        assert_eq!(
            loopback_url_port(
                "Azurite Blob service successfully listens on http://127.0.0.1:45427"
            ),
            Some(45427)
        );
        assert_eq!(
            loopback_url_port("Azurite Blob service is starting on 127.0.0.1:0"),
            None
        );
        assert_eq!(loopback_url_port("http://127.0.0.1:0/"), None);
    }

    #[tokio::test]
    async fn moto_listens_where_it_says() {
        let moto = Emulator::moto().await;
        let answer = TcpStream::connect(("127.0.0.1", moto.port())).await;
        assert!(answer.is_ok(), "moto on port {}: {answer:?}", moto.port());
    }

    #[tokio::test]
    async fn a_proxy_holds_its_port_while_it_is_down() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream_port = upstream.local_addr().unwrap().port();
        let mut proxy = Proxy::start(upstream_port).await;
        let port = proxy.port();
        proxy.down();
        let refused = TcpStream::connect(("127.0.0.1", port)).await;
        assert!(refused.is_err(), "a proxy that is down refuses connections");
        let taken = std::net::TcpListener::bind(("127.0.0.1", port));
        assert!(
            taken.is_err(),
            "another listener took the port of a proxy that is down"
        );
        proxy.up().await;
        let client = TcpStream::connect(("127.0.0.1", port)).await;
        assert!(client.is_ok(), "the proxy accepts again on its port");
        let (_accepted, _) = upstream.accept().await.unwrap();
    }
}
