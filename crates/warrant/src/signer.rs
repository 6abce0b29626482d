//! `serve --service-account-signing-endpoint`: kube-apiserver's external signer on a Unix
//! socket, beside the HTTPS API, from the same state (see the warrant-signer crate); and
//! `probe-signer`, which calls it as kube-apiserver does at its start.

use std::error::Error;
use std::path::{Path, PathBuf};

use prometheus_client::registry::Registry;
use warrant_issuer::Issuer;
use warrant_signer::{PeerPolicy, ServeOptions, Signer, SignerMetrics, SocketOptions};

use crate::cli::{ProbeSignerArgs, ServeArgs};
use crate::running::Running;

/// The signer's metrics, registered before the state takes the registry; `None` without the
/// flag.
pub(crate) fn metrics(args: &ServeArgs, registry: &mut Registry) -> Option<SignerMetrics> {
    args.signing_endpoint.as_ref().map(|_| {
        let metrics = SignerMetrics::default();
        metrics.register(registry);
        metrics
    })
}

/// How long calls in flight may take to finish at shutdown: stop the signer with
/// [`Running::stop_within`] this. kube-apiserver holds its connection open for good, so
/// graceful shutdown alone would wait forever; a Sign takes milliseconds. Past it, every
/// connection is closed (the aborted task drops the server) and the socket file removed.
pub(crate) const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Binds the socket and serves the signer on it, if the flag is given. Fails (and so does the
/// start) if the socket cannot be set up: kube-apiserver would not start without it. Dropping
/// the returned task stops it at once, and removes the socket file.
pub(crate) fn start(
    args: &ServeArgs,
    issuer: &Issuer,
    metrics: Option<SignerMetrics>,
) -> Result<Option<Running>, Box<dyn Error>> {
    let (Some(path), Some(metrics)) = (&args.signing_endpoint, metrics) else {
        return Ok(None);
    };
    let mut socket = warrant_signer::bind(&SocketOptions {
        path: path.clone(),
        group: args.signing_endpoint_group.clone(),
    })?;
    let Some(listener) = socket.take_listener() else {
        return Err("the signing socket was bound without a listener".into());
    };
    let default = PeerPolicy::for_socket(socket.owner_uid(), socket.group_gid());
    let peers = PeerPolicy {
        uids: args
            .signing_endpoint_allowed_uids
            .clone()
            .unwrap_or(default.uids),
        gids: args
            .signing_endpoint_allowed_gids
            .clone()
            .unwrap_or(default.gids),
    };
    let options = ServeOptions {
        idle_timeout: args.signing_endpoint_idle_timeout,
        max_connections: usize::from(args.signing_endpoint_max_connections),
        peers,
    };
    let signer = Signer::new(issuer.clone(), metrics);
    tracing::info!(
        path = %path.display(),
        group = args.signing_endpoint_group.as_deref().unwrap_or("-"),
        allowed_uids = ?options.peers.uids,
        allowed_gids = ?options.peers.gids,
        "serving kube-apiserver's external signer (ExternalJWTSigner v1)"
    );
    Ok(Some(Running::spawn(|stop| async move {
        warrant_signer::serve(listener, signer, options, stop.cancelled_owned()).await;
        // The socket file goes with the guard, now that nothing serves on it.
        drop(socket);
    })))
}

/// `warrant probe-signer`: Metadata, then FetchKeys, as kube-apiserver calls them when it
/// starts (it refuses to start if either fails or the key list is empty). Prints one line on
/// success; a failure is the command's error. Warns (on stderr, still a success) when a
/// kube-apiserver on this machine that uses the socket would ask for tokens longer than warrant
/// signs.
pub(crate) async fn probe(args: &ProbeSignerArgs) -> Result<(), Box<dyn Error>> {
    let path = &args.signing_endpoint;
    let calls = async {
        let mut client = warrant_signer::client::connect(path)
            .await
            .map_err(|e| format!("cannot connect to the signer at {}: {e}", path.display()))?;
        let metadata = client
            .metadata(warrant_signer::proto::MetadataRequest {})
            .await
            .map_err(|s| format!("Metadata failed: {}", s.message()))?;
        // warrant's maximum for tokens that are not extended; absent from other signers.
        let ordinary = metadata
            .metadata()
            .get(warrant_signer::ORDINARY_MAX_METADATA)
            .and_then(|v| v.to_str().ok()?.parse::<i64>().ok());
        let metadata = (metadata.into_inner(), ordinary);
        let keys = client
            .fetch_keys(warrant_signer::proto::FetchKeysRequest {})
            .await
            .map_err(|s| format!("FetchKeys failed: {}", s.message()))?
            .into_inner();
        Ok::<_, String>((metadata, keys))
    };
    let (metadata, keys) = tokio::time::timeout(args.timeout, calls)
        .await
        .map_err(|_| {
            format!(
                "the signer at {} did not answer Metadata and FetchKeys within {} s",
                path.display(),
                args.timeout.as_secs()
            )
        })??;
    let (metadata, ordinary) = metadata;
    if keys.keys.is_empty() {
        return Err("the signer lists no keys: kube-apiserver would refuse to start".into());
    }
    if let Some(ordinary) = ordinary {
        for warning in kube_apiserver_mismatches(
            Path::new("/proc"),
            path,
            metadata.max_token_expiration_seconds,
            ordinary,
        ) {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("warrant: warning: {warning}");
            }
        }
    }
    let kids: Vec<&str> = keys.keys.iter().map(|k| k.key_id.as_str()).collect();
    #[allow(clippy::print_stdout)]
    {
        println!(
            "ok: {} key(s) ({}), refresh hint {} s, tokens up to {} s",
            kids.len(),
            kids.join(", "),
            keys.refresh_hint_seconds,
            metadata.max_token_expiration_seconds
        );
    }
    Ok(())
}

/// A kube-apiserver process using a signing socket, as its command line says.
#[derive(Debug, PartialEq, Eq)]
struct KubeApiserver {
    pid: String,
    /// `--service-account-max-token-expiration` in seconds, if set (and not 0).
    max_token_seconds: Option<i64>,
}

/// Reads a command line: `Some` if it is kube-apiserver's and names `socket` as its
/// `--service-account-signing-endpoint`.
fn kube_apiserver_of(pid: &str, args: &[String], socket: &Path) -> Option<KubeApiserver> {
    let program = args.first()?;
    if Path::new(program).file_name()? != "kube-apiserver" {
        return None;
    }
    let flag = |name: &str| -> Option<String> {
        let long = format!("--{name}");
        let mut rest = args.iter().skip(1);
        let mut found = None;
        // The last occurrence counts, as with kube's flag parser.
        while let Some(arg) = rest.next() {
            if let Some(value) = arg.strip_prefix(&format!("{long}=")) {
                found = Some(value.to_owned());
            } else if *arg == long {
                found = rest.next().cloned();
            }
        }
        found
    };
    let endpoint = PathBuf::from(flag("service-account-signing-endpoint")?);
    let same = endpoint == socket
        || matches!((endpoint.canonicalize(), socket.canonicalize()), (Ok(a), Ok(b)) if a == b);
    if !same {
        return None;
    }
    let max_token_seconds = flag("service-account-max-token-expiration")
        .and_then(|v| crate::duration::parse_seconds(&v).ok())
        .filter(|s| *s > 0);
    Some(KubeApiserver {
        pid: pid.to_owned(),
        max_token_seconds,
    })
}

/// What is wrong with each kube-apiserver visible in `proc` that uses `socket`, given the
/// signer's Metadata answer (`metadata`, kube-apiserver's cap when its flag is unset) and
/// warrant's maximum for tokens that are not extended (`ordinary`). Processes out of sight
/// (another PID namespace, hidepid) are not checked.
fn kube_apiserver_mismatches(
    proc: &Path,
    socket: &Path,
    metadata: i64,
    ordinary: i64,
) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    let mut found: Vec<KubeApiserver> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid = entry.file_name().into_string().ok()?;
            if !pid.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let raw = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            kube_apiserver_of(&pid, &args, socket)
        })
        .collect();
    found.sort_by(|a, b| a.pid.cmp(&b.pid));
    found
        .into_iter()
        .filter_map(|kube| mismatch(&kube, metadata, ordinary))
        .collect()
}

/// The warning for one kube-apiserver, if its cap on ordinary tokens is above warrant's.
fn mismatch(kube: &KubeApiserver, metadata: i64, ordinary: i64) -> Option<String> {
    let (cap, whence) = match kube.max_token_seconds {
        Some(seconds) => (seconds, "its --service-account-max-token-expiration"),
        None => (
            metadata,
            "it has no --service-account-max-token-expiration, so it takes the signer's Metadata answer, which extended tokens need",
        ),
    };
    (cap > ordinary).then(|| {
        format!(
            "kube-apiserver (pid {}) issues tokens of up to {cap} s ({whence}), but warrant signs tokens that are not extended for at most {ordinary} s (its --service-account-max-token-expiration), so TokenRequests for longer fail: give kube-apiserver --service-account-max-token-expiration={ordinary}s",
            kube.pid
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropping the running signer (without `stop`) ends its task at once: the server goes, and
    /// with it the socket file.
    #[tokio::test]
    async fn dropping_the_running_signer_stops_it() {
        use clap::Parser as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signer.sock");
        let cli = crate::cli::Cli::try_parse_from([
            "warrant",
            "serve",
            "--service-account-issuer",
            "https://warrant.test",
            "--key-dir",
            dir.path().join("keys").to_str().unwrap(),
            "--service-account-signing-endpoint",
            path.to_str().unwrap(),
        ])
        .unwrap();
        let crate::cli::Command::Serve(args) = cli.command else {
            panic!("not serve");
        };
        let key = warrant_token::SigningKey::generate(warrant_token::KeyType::P256).unwrap();
        let issuer = Issuer::new(
            warrant_issuer::Settings {
                issuers: vec!["https://warrant.test".into()],
                api_audiences: vec!["https://warrant.test".into()],
                jwks_uri: "https://warrant.test/openid/v1/jwks".into(),
                expiration: warrant_token::ExpirationPolicy::default(),
                signature_cache_entries: 0,
                jwks_x5c: false,
            },
            warrant_keys::KeySet::new(key, vec![]),
            warrant_clock::Clock::System,
            warrant_audit::Auditor::disabled(),
        );
        let metrics = metrics(&args, &mut Registry::default());
        let running = start(&args, &issuer, metrics).unwrap().unwrap();
        assert!(path.exists());
        drop(running);
        // The aborted task is dropped at the runtime's next turn.
        for _ in 0..1000 {
            if !path.exists() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(!path.exists(), "the signer outlived its owner");
    }

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn a_kube_apiserver_is_recognised_by_its_command_line() {
        let socket = Path::new("/var/run/warrant/signer.sock");
        let kube = |line: &str| kube_apiserver_of("7", &args(line), socket);
        assert_eq!(
            kube(
                "kube-apiserver --service-account-signing-endpoint=/var/run/warrant/signer.sock --service-account-max-token-expiration=48h"
            ),
            Some(KubeApiserver {
                pid: "7".into(),
                max_token_seconds: Some(172_800)
            })
        );
        assert_eq!(
            kube(
                "/usr/local/bin/kube-apiserver --service-account-signing-endpoint /var/run/warrant/signer.sock --service-account-max-token-expiration 0"
            ),
            Some(KubeApiserver {
                pid: "7".into(),
                max_token_seconds: None
            })
        );
        assert_eq!(
            kube("kube-apiserver --service-account-signing-endpoint=/elsewhere.sock"),
            None
        );
        assert_eq!(
            kube(
                "kube-controller-manager --service-account-signing-endpoint=/var/run/warrant/signer.sock"
            ),
            None
        );
        assert_eq!(
            kube("kube-apiserver --service-account-key-file=/sa.pub"),
            None
        );
    }

    #[test]
    fn only_a_cap_above_warrants_is_a_mismatch() {
        let kube = |max| KubeApiserver {
            pid: "7".into(),
            max_token_seconds: max,
        };
        let year = 31_536_000;
        // Unset: kube-apiserver takes Metadata's year for ordinary tokens too.
        let unset = mismatch(&kube(None), year, 172_800).unwrap();
        assert!(unset.contains("up to 31536000 s"), "{unset}");
        assert!(
            unset.ends_with("give kube-apiserver --service-account-max-token-expiration=172800s"),
            "{unset}"
        );
        assert!(mismatch(&kube(Some(259_200)), year, 172_800).is_some());
        assert_eq!(mismatch(&kube(Some(172_800)), year, 172_800), None);
        assert_eq!(mismatch(&kube(Some(3_600)), year, 172_800), None);
        // Metadata equal to warrant's maximum (managed keys): unset is right.
        assert_eq!(mismatch(&kube(None), 86_400, 86_400), None);
    }
}
