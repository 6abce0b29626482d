//! The server under test, a child process: warrant, or the reference server; its CPU time
//! and memory read from /proc around each measurement.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;

use crate::target::https_client;
use crate::{Error, wrk};

/// The server under test: warrant, or the reference server.
pub(crate) struct Server {
    child: Child,
}

impl Server {
    pub(crate) fn start(
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
    pub(crate) fn start_with_keys(
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
    pub(crate) fn reference(
        dir: &Path,
        listener: &TcpListener,
        body: &Path,
    ) -> Result<Server, Error> {
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
    pub(crate) fn measure(
        &self,
        load: impl FnOnce() -> Result<Measured, Error>,
    ) -> Result<(Measured, f64), Error> {
        let before = self.cpu_seconds()?;
        let measured = load()?;
        Ok((measured, self.cpu_seconds()? - before))
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// User plus system CPU time the server has used, in seconds.
    pub(crate) fn cpu_seconds(&self) -> Result<f64, Error> {
        process_cpu_seconds(&self.pid().to_string())
    }

    /// A memory figure from /proc/PID/status, in KiB.
    pub(crate) fn memory(&self, field: &str) -> Result<u64, Error> {
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

    pub(crate) fn stop(&mut self) {
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

/// What one measurement saw, whichever generator made it.
pub(crate) struct Measured {
    pub(crate) requests: u64,
    pub(crate) seconds: f64,
    pub(crate) requests_per_second: f64,
    pub(crate) p50: String,
    pub(crate) p99: String,
    pub(crate) errors: String,
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
