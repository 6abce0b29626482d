//! A running `warrant serve` in a temporary directory, and the clients that talk to it.

use std::ffi::{OsStr, OsString};
use std::io::BufRead as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;
use warrant_token::Claims;

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_warrant");

/// The objects `make run` uses, as a starting point.
pub(crate) fn demo_objects() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/local/objects.yaml"
    ))
    .unwrap()
}

pub(crate) struct Warrant {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) port: u16,
    child: Child,
    /// What the running `serve` writes to stderr.
    stderr: ServeLog,
    pub(crate) http: reqwest::Client,
    /// The flags `serve` ran with, other than the key flags.
    flags: Vec<OsString>,
    /// The listening socket, bound by the test and handed to each `serve` it starts (socket
    /// activation): the port, which the issuer URL holds, is the test's for its whole life, so
    /// no other process can take it before the server starts or between two runs.
    listener: TcpListener,
    /// The path of the issuer's URL (`/tenant-a`), or empty.
    issuer_path: String,
    /// Environment variables set for `serve` alone (e.g. a PKCS#11 module's configuration).
    env: Vec<(OsString, OsString)>,
}

/// Where the server's objects come from.
enum Source<'a> {
    /// A manifest file with this content.
    File(&'a str),
    /// The loopback Kubernetes fixture.
    Cluster(&'a warrant_kube_fixture::Fixture),
    /// A real cluster, reached with this kubeconfig file.
    Kubeconfig(&'a Path),
}

/// kube-apiserver's static key flags for the local setup's signing key.
pub(crate) fn static_keys(dir: &Path) -> Vec<OsString> {
    vec![
        "--service-account-signing-key-file".into(),
        dir.join("sa.key").into(),
    ]
}

/// A key directory (`keys` in the setup), which warrant creates at its first start.
pub(crate) fn key_dir(dir: &Path) -> Vec<OsString> {
    vec!["--key-dir".into(), dir.join("keys").into()]
}

impl Warrant {
    /// Sets up a local environment with `objects` in a manifest file and starts the server with
    /// the setup's static signing key; `extra` flags are appended to `warrant serve`.
    pub(crate) async fn start(objects: &str, extra: &[&str]) -> Warrant {
        Self::launch(Source::File(objects), static_keys, extra).await
    }

    /// As [`start`](Self::start), with the key flags `keys` returns for the setup directory
    /// (it may prepare the directory first, e.g. with `warrant keys generate`).
    pub(crate) async fn start_with(
        objects: &str,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
    ) -> Warrant {
        Self::launch(Source::File(objects), keys, extra).await
    }

    /// As [`start_with`](Self::start_with), returning once the server answers at all
    /// (`/livez`), ready or not.
    pub(crate) async fn start_with_unready(
        objects: &str,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
    ) -> Warrant {
        Self::launch_until(Source::File(objects), keys, extra, "/livez", "").await
    }

    /// Starts the server against a cluster: the loopback Kubernetes fixture `cluster`.
    pub(crate) async fn start_cluster(
        cluster: &warrant_kube_fixture::Fixture,
        extra: &[&str],
    ) -> Warrant {
        Self::launch(Source::Cluster(cluster), static_keys, extra).await
    }

    /// As [`start_cluster`](Self::start_cluster), returning once the server answers at all
    /// (`/livez`), ready or not: for a cluster that cannot be listed yet.
    pub(crate) async fn start_cluster_unready(
        cluster: &warrant_kube_fixture::Fixture,
        extra: &[&str],
    ) -> Warrant {
        Self::launch_until(Source::Cluster(cluster), static_keys, extra, "/livez", "").await
    }

    /// Starts the server against the real cluster that `kubeconfig` (a file) reaches, with the
    /// credentials it holds.
    pub(crate) async fn start_kubeconfig(kubeconfig: &Path, extra: &[&str]) -> Warrant {
        Self::launch(Source::Kubeconfig(kubeconfig), static_keys, extra).await
    }

    /// As [`start_cluster`](Self::start_cluster), with the key flags `keys` returns for the
    /// setup directory and `env` set in the server's environment only (a key holder's).
    pub(crate) async fn start_cluster_with_env(
        cluster: &warrant_kube_fixture::Fixture,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
        env: &[(OsString, OsString)],
    ) -> Warrant {
        Self::launch_env(Source::Cluster(cluster), keys, extra, "/readyz", "", env).await
    }

    async fn launch(
        source: Source<'_>,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
    ) -> Warrant {
        Self::launch_until(source, keys, extra, "/readyz", "").await
    }

    /// As [`start_with`](Self::start_with), with `env` set in the server's environment only.
    pub(crate) async fn start_with_env(
        objects: &str,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
        env: &[(OsString, OsString)],
    ) -> Warrant {
        Self::launch_env(Source::File(objects), keys, extra, "/readyz", "", env).await
    }

    /// As [`start`](Self::start), with an issuer URL that has a path (`/tenant-a`), as when
    /// discovery is hosted in a bucket.
    pub(crate) async fn start_at_issuer_path(objects: &str, issuer_path: &str) -> Warrant {
        Self::launch_until(
            Source::File(objects),
            static_keys,
            &[],
            "/readyz",
            issuer_path,
        )
        .await
    }

    /// Starts the server and waits until `health` (`/readyz` or `/livez`) answers 200.
    async fn launch_until(
        source: Source<'_>,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
        health: &str,
        issuer_path: &str,
    ) -> Warrant {
        Self::launch_env(source, keys, extra, health, issuer_path, &[]).await
    }

    async fn launch_env(
        source: Source<'_>,
        keys: impl FnOnce(&Path) -> Vec<OsString>,
        extra: &[&str],
        health: &str,
        issuer_path: &str,
        env: &[(OsString, OsString)],
    ) -> Warrant {
        let dir = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let setup = Command::new(BIN)
            .args(["local-setup", "--dir"])
            .arg(dir.path())
            .args(["--port", &port.to_string()])
            .output()
            .unwrap();
        assert!(
            setup.status.success(),
            "local-setup: {}",
            String::from_utf8_lossy(&setup.stderr)
        );
        let issuer = format!("https://127.0.0.1:{port}{issuer_path}");
        let mut flags: Vec<OsString> = vec!["--service-account-issuer".into(), issuer.into()];
        for (flag, file) in [
            ("--tls-cert-file", "serving.crt"),
            ("--tls-private-key-file", "serving.key"),
            ("--token-auth-file", "tokens.csv"),
        ] {
            flags.push(flag.into());
            flags.push(dir.path().join(file).into());
        }
        match source {
            Source::File(objects) => {
                std::fs::write(dir.path().join("objects.yaml"), objects).unwrap();
                flags.push("--objects-file".into());
                flags.push(dir.path().join("objects.yaml").into());
            }
            Source::Cluster(cluster) => {
                let kubeconfig = dir.path().join("cluster.kubeconfig");
                cluster.write_kubeconfig(&kubeconfig).unwrap();
                flags.push("--kubeconfig".into());
                flags.push(kubeconfig.into());
            }
            Source::Kubeconfig(kubeconfig) => {
                flags.push("--kubeconfig".into());
                flags.push(kubeconfig.into());
            }
        }
        // `{dir}` and `{port}` in the extra flags name the setup's directory and port, which
        // exist only now (a flag naming the setup's CA, or the server's own URL).
        let dir_text = dir.path().display().to_string();
        flags.extend(extra.iter().map(|flag| {
            OsString::from(
                flag.replace("{dir}", &dir_text)
                    .replace("{port}", &port.to_string()),
            )
        }));
        let key_flags = keys(dir.path());
        let (child, stderr) = spawn_serve(&listener, &flags, &key_flags, env);
        let ca = reqwest::Certificate::from_pem(&std::fs::read(dir.path().join("ca.crt")).unwrap())
            .unwrap();
        let http = reqwest::Client::builder()
            .tls_certs_only([ca])
            .build()
            .unwrap();
        let mut warrant = Warrant {
            dir,
            port,
            child,
            stderr,
            http,
            flags,
            listener,
            issuer_path: issuer_path.to_owned(),
            env: env.to_vec(),
        };
        warrant.wait_for(health).await;
        warrant
    }

    /// Stops the server and starts it again on the same setup and port, with the key flags
    /// `keys` returns (they may differ from the last run's: a migration, say).
    pub(crate) async fn restart(&mut self, keys: impl FnOnce(&Path) -> Vec<OsString>) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let key_flags = keys(self.dir.path());
        (self.child, self.stderr) = spawn_serve(&self.listener, &self.flags, &key_flags, &self.env);
        self.wait_ready().await;
    }

    /// Runs another warrant command (not `serve`), returning its output.
    pub(crate) fn warrant(&self, args: &[&OsStr]) -> Output {
        Command::new(BIN).args(args).output().unwrap()
    }

    /// Runs another warrant command, failing the test with its stderr if it fails; returns
    /// its stdout.
    /// As [`restart`](Self::restart), with key flags the server refuses at startup: waits for
    /// it to exit, fails if it exits well, and returns its log.
    pub(crate) fn restart_refused(&mut self, keys: impl FnOnce(&Path) -> Vec<OsString>) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let key_flags = keys(self.dir.path());
        (self.child, self.stderr) = spawn_serve(&self.listener, &self.flags, &key_flags, &self.env);
        let status = self.wait_exit();
        let log = self.log();
        assert!(!status.success(), "the server started:\n{log}");
        log
    }

    pub(crate) fn warrant_ok(&self, args: &[&OsStr]) -> String {
        warrant_ok(args)
    }

    /// Waits until `/readyz` answers 200; fails with the server's log if it exits first.
    async fn wait_ready(&mut self) {
        self.wait_for("/readyz").await;
    }

    /// Waits until `path` answers 200; fails with the server's log if it exits first.
    async fn wait_for(&mut self, path: &str) {
        let url = self.url(path);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            // A bound timeout: the socket is the test's, so a connection made before the server
            // accepts waits in its backlog rather than being refused.
            if let Ok(r) = self
                .http
                .get(&url)
                .timeout(Duration::from_secs(2))
                .send()
                .await
                && r.status().is_success()
            {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "warrant exited with {status} before it was ready:\n{}",
                    self.log()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "warrant did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The server's log so far (stops the server). The log goes through a non-blocking writer,
    /// so the server is asked to stop (SIGTERM, as a kubelet does; its shutdown is bounded by
    /// its grace) and its exit awaited: a SIGKILL loses the lines still queued.
    pub(crate) fn log(&mut self) -> String {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            let _ = self.child.wait();
        }
        self.stderr.read_to_end()
    }

    /// The first line of the running server's log that contains `text`, once it is written
    /// (the server keeps running); fails with the log so far if the server exits first.
    pub(crate) async fn log_line(&mut self, text: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(line) = self.stderr.so_far().lines().find(|l| l.contains(text)) {
                return line.to_owned();
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "warrant exited with {status} before it logged {text:?}:\n{}",
                    self.log()
                );
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "warrant did not log {text:?}:\n{}",
                self.stderr.so_far()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn issuer(&self) -> String {
        format!("https://127.0.0.1:{}{}", self.port, self.issuer_path)
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Sends the server `signal` (`TERM`, `INT`), as a kubelet or a person does.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// Waits for the server process to exit, and says how it did.
    pub(crate) fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }

    /// A figure from the server process's /proc/PID/status (`VmRSS`, in KiB) or, for `"fds"`,
    /// its open descriptors.
    pub(crate) fn process(&self, what: &str) -> u64 {
        let pid = self.child.id();
        if what == "fds" {
            return std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .count() as u64;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{what}:")))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {what} in /proc/{pid}/status"))
    }

    /// A sample (`name value`) from `/metrics`, read as the admin; 0 if absent.
    pub(crate) async fn metric(&self, sample: &str) -> f64 {
        self.metrics_text()
            .await
            .lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
            .map_or(0.0, |v| v.parse().unwrap())
    }

    /// `/metrics`, read as the admin.
    pub(crate) async fn metrics_text(&self) -> String {
        self.get_as_admin("/metrics").await
    }

    /// The body of `path`, read as the admin (who is told what anonymous callers are not:
    /// `/readyz?verbose`'s reasons, say).
    pub(crate) async fn get_as_admin(&self, path: &str) -> String {
        self.get_text(path).await.1
    }

    /// GET `path` as the admin: the status and the body.
    pub(crate) async fn get_text(&self, path: &str) -> (u16, String) {
        let response = self
            .http
            .get(self.url(path))
            .bearer_auth(self.admin_token())
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub(crate) fn admin_token(&self) -> String {
        let csv = std::fs::read_to_string(self.path("tokens.csv")).unwrap();
        csv.split(',').next().unwrap().to_owned()
    }

    /// `warrant verify` against this server's issuer for `audience`, trusting the setup's CA,
    /// ready for more flags and the token.
    pub(crate) fn verify_command(&self, audience: &str) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(["verify", "--issuer", &self.issuer(), "--audience", audience])
            .arg("--ca-file")
            .arg(self.path("ca.crt"));
        command
    }

    /// Runs kubectl against this server as the local setup's admin.
    pub(crate) fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(&self.path("kubeconfig"), args)
    }

    /// Runs kubectl with another kubeconfig.
    pub(crate) fn kubectl_with(&self, kubeconfig: &std::path::Path, args: &[&str]) -> Output {
        self.kubectl_command_with(kubeconfig, args)
            .output()
            .expect("kubectl must be installed for the end-to-end tests")
    }

    /// The command [`kubectl`](Self::kubectl) runs, not started: for a test that runs it on
    /// another thread (`spawn_blocking`) while its own keeps going.
    pub(crate) fn kubectl_command(&self, args: &[&str]) -> Command {
        self.kubectl_command_with(&self.path("kubeconfig"), args)
    }

    fn kubectl_command_with(&self, kubeconfig: &std::path::Path, args: &[&str]) -> Command {
        kubectl_at(kubeconfig, &self.path("kube-cache"), args)
    }

    /// Runs kubectl and returns its stdout, failing the test with stderr if it fails.
    pub(crate) fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl create token <sa> -n demo <extra…>`, as run, for tests of failures.
    pub(crate) fn create_token_as(&self, sa: &str, extra: &[&str]) -> Output {
        let mut args = vec!["create", "token", sa, "-n", "demo"];
        args.extend_from_slice(extra);
        self.kubectl(&args)
    }

    /// A token for `demo/app` from `kubectl create token app -n demo <extra…>`.
    pub(crate) fn token(&self, extra: &[&str]) -> String {
        let out = self.create_token_as("app", extra);
        assert!(
            out.status.success(),
            "kubectl create token {extra:?}: {}",
            stderr(&out)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Writes `manifest` to a new file in the server's directory.
    pub(crate) fn manifest(&self, manifest: &Value) -> PathBuf {
        let file = self.path(&format!("manifest-{}.json", rand_suffix()));
        std::fs::write(&file, manifest.to_string()).unwrap();
        file
    }

    /// `kubectl create -f` of a manifest, as a user types it (so with kubectl's default,
    /// strict, client-side validation against warrant's OpenAPI), returning the created object.
    pub(crate) fn kubectl_create(&self, manifest: &Value) -> Value {
        let file = self.manifest(manifest);
        let out = self.kubectl_ok(&["create", "-o", "json", "-f", file.to_str().unwrap()]);
        serde_json::from_str(&out).unwrap()
    }

    /// Reviews a token with kubectl, as a TokenReview manifest.
    pub(crate) fn review(&self, token: &str, audiences: &[&str]) -> Value {
        let manifest = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": audiences},
        });
        self.kubectl_create(&manifest)["status"].clone()
    }

    /// Replaces the objects file (atomically, as an editor or a ConfigMap update does).
    pub(crate) fn write_objects(&self, objects: &str) {
        let tmp = self.path("objects.yaml.new");
        std::fs::write(&tmp, objects).unwrap();
        std::fs::rename(&tmp, self.path("objects.yaml")).unwrap();
    }

    /// Polls `check` until it holds (the server reloads files on its own schedule).
    pub(crate) async fn eventually(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !check() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// kubectl with `kubeconfig` and its discovery cache in `cache` (never the user's), running
/// `args`; not started.
pub(crate) fn kubectl_at(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args);
    command
}

/// The standard objects with the testkit's UIDs in the cluster fixture `cluster`:
/// ServiceAccount `demo/app`, Node `node-1` and Pod `demo/app-0` of `app` on `node-1`, with a
/// projected token for `audience` if given.
pub(crate) fn create_standard_objects(
    cluster: &warrant_kube_fixture::Cluster,
    audience: Option<&str>,
) {
    use warrant_kube_fixture::objects::{node, pod, service_account};
    use warrant_testkit::{NODE_UID, POD_UID, SA_UID};
    cluster
        .create(&service_account("demo", "app", SA_UID))
        .unwrap();
    cluster.create(&node("node-1", NODE_UID)).unwrap();
    cluster
        .create(&pod("demo", "app-0", POD_UID, "app", "node-1", audience))
        .unwrap();
}

/// Runs `warrant serve` with placeholder files and `args` (in the environment `env`), for a
/// configuration it refuses before it reads any file; returns its output.
pub(crate) fn serve_refusing(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args([
            "serve",
            "--service-account-issuer",
            "https://warrant.example",
            "--service-account-signing-key-file",
            "unused.key",
            "--tls-cert-file",
            "unused.crt",
            "--tls-private-key-file",
            "unused.key",
            "--objects-file",
            "unused.yaml",
        ])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// What a `serve` process writes to stderr, read by a thread as it comes: the test can look at
/// it while the server runs, and the server never waits on a full pipe.
struct ServeLog {
    text: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl ServeLog {
    fn follow(stderr: ChildStderr) -> ServeLog {
        let text = Arc::new(Mutex::new(String::new()));
        let written = Arc::clone(&text);
        let reader = std::thread::spawn(move || {
            let mut stderr = std::io::BufReader::new(stderr);
            let mut line = Vec::new();
            while stderr.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                written
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&line));
                line.clear();
            }
        });
        ServeLog {
            text,
            reader: Some(reader),
        }
    }

    /// What it has written so far.
    fn so_far(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// All it wrote, once the process has exited (its stderr closed).
    fn read_to_end(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.so_far()
    }
}

/// Starts `warrant serve` on `listener`, passed as systemd does (descriptor 3, `LISTEN_FDS=1`).
fn spawn_serve(
    listener: &TcpListener,
    flags: &[OsString],
    key_flags: &[OsString],
    env: &[(OsString, OsString)],
) -> (Child, ServeLog) {
    use command_fds::{CommandFdExt, FdMapping};
    use std::os::fd::AsFd;
    let mut command = Command::new(BIN);
    command
        .arg("serve")
        .args(flags)
        .args(key_flags)
        .env("LISTEN_FDS", "1")
        .env_remove("LISTEN_PID")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
        .fd_mappings(vec![FdMapping {
            parent_fd: listener.as_fd().try_clone_to_owned().unwrap(),
            child_fd: 3,
        }])
        .unwrap();
    let mut child = command.spawn().unwrap();
    let stderr = ServeLog::follow(child.stderr.take().unwrap());
    (child, stderr)
}

impl Drop for Warrant {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rand_suffix() -> String {
    warrant_token::new_jti()
}

/// The claims inside a token (decoded, not verified).
pub(crate) fn claims(token: &str) -> Claims {
    let payload = token.trim().split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Runs a warrant command (not `serve`), failing the test with its stderr if it fails;
/// returns its stdout.
pub(crate) fn warrant_ok<S: AsRef<OsStr> + std::fmt::Debug>(args: &[S]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "warrant {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Text of a kubectl failure.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

/// The two discovery documents under `root` (a web root: exported, published) are byte for
/// byte what `w` serves.
pub(crate) async fn assert_documents_in(w: &Warrant, root: &Path) {
    for (path, file) in [
        (
            "/.well-known/openid-configuration",
            ".well-known/openid-configuration",
        ),
        ("/openid/v1/jwks", "openid/v1/jwks"),
    ] {
        let served = w
            .http
            .get(w.url(path))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let published = std::fs::read(root.join(file))
            .unwrap_or_else(|e| panic!("{file} is not under {}: {e}", root.display()));
        assert_eq!(
            String::from_utf8_lossy(&published),
            String::from_utf8_lossy(&served),
            "{file}"
        );
    }
}

/// Python (the `cryptography` and PyJWT packages, not warrant's code) on the P-256 key in the
/// PKCS#8 PEM file `key` (made there first if it does not exist): the key's RFC 7638
/// thumbprint, computed by the RFC's recipe; and, with `request` (method, URI and optionally the
/// token presented), a DPoP proof for it signed with the key.
pub(crate) fn python_dpop(key: &Path, request: Option<(&str, &str, Option<&str>)>) -> Value {
    const SCRIPT: &str = r#"
import base64, hashlib, json, os, sys, time, uuid
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
path = sys.argv[1]
if not os.path.exists(path):
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(pem)
key = serialization.load_pem_private_key(open(path, "rb").read(), password=None)
assert key.curve.name == "secp256r1"
numbers = key.public_key().public_numbers()
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
jwk = {"kty": "EC", "crv": "P-256", "x": b64(numbers.x.to_bytes(32, "big")),
       "y": b64(numbers.y.to_bytes(32, "big"))}
canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
out = {"jkt": b64(hashlib.sha256(canonical.encode()).digest())}
if len(sys.argv) > 2:
    claims = {"jti": str(uuid.uuid4()), "htm": sys.argv[2], "htu": sys.argv[3],
              "iat": int(time.time())}
    if len(sys.argv) > 4:
        claims["ath"] = b64(hashlib.sha256(sys.argv[4].encode()).digest())
    out["proof"] = jwt.encode(claims, key, algorithm="ES256",
                              headers={"typ": "dpop+jwt", "jwk": jwk})
print(json.dumps(out))
"#;
    let mut command = warrant_testkit::tools::python(&["jwt", "cryptography"]);
    command.arg("-c").arg(SCRIPT).arg(key);
    if let Some((method, uri, token)) = request {
        command.args([method, uri]);
        command.args(token);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "python3: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The kids a key index (`keys.json`, of a key directory or a key Secret) lists, in its order.
pub(crate) fn key_index_kids(index: &[u8]) -> Vec<String> {
    let index: Value = serde_json::from_slice(index).unwrap();
    index["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect()
}

/// The kids the signer on `socket` lists in FetchKeys, in its order.
pub(crate) async fn fetched_kids(socket: &Path) -> Vec<String> {
    let mut signer = warrant_signer::client::connect(socket).await.unwrap();
    signer
        .fetch_keys(warrant_signer::proto::FetchKeysRequest {})
        .await
        .unwrap()
        .into_inner()
        .keys
        .into_iter()
        .map(|k| k.key_id)
        .collect()
}
