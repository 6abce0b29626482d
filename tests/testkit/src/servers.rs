//! Servers tests run beside warrant on loopback: an emulator process (moto, Azurite) on a free
//! port in a directory of its own, and a TCP proxy in front of it that a test can take down and
//! bring back (the server "unreachable", then answering again with its state intact).

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;

use crate::tools;

/// A free TCP port on loopback (free when asked: bind it soon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// A server for the tests (moto, Azurite): a process on a free loopback port, in a temporary
/// directory of its own; killed when dropped.
pub struct Emulator {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Emulator {
    /// Starts `program` (`what` names it) with the arguments `args` gives for its port and
    /// directory, and waits until it listens (moto takes a second or two to import).
    pub async fn start(
        program: &str,
        what: &str,
        args: impl FnOnce(u16, &Path) -> Vec<String>,
    ) -> Emulator {
        let mut command = tools::command(program, what);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let child = command
            .args(args(port, dir.path()))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let emulator = Emulator {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..300 {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return emulator;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{program} did not start on port {port}");
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

/// A TCP proxy on loopback to `upstream`, which a test takes [`down`](Proxy::down) (connections
/// refused, open ones cut) and brings back [`up`](Proxy::up) on the same port.
pub struct Proxy {
    port: u16,
    upstream: u16,
    task: Option<AbortOnDropHandle<()>>,
}

impl Proxy {
    /// A proxy to `upstream`, up.
    pub async fn start(upstream: u16) -> Proxy {
        let mut proxy = Proxy {
            port: free_port(),
            upstream,
            task: None,
        };
        proxy.up().await;
        proxy
    }

    /// Accepts connections again.
    pub async fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("the proxy's port is free again");
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
