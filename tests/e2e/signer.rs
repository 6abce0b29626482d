//! The real binary as kube-apiserver's external signer: a gRPC client on the Unix socket, as
//! kube-apiserver dials it, against `warrant serve --service-account-signing-endpoint`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use warrant_signer::proto::{FetchKeysRequest, MetadataRequest, SignJwtRequest};

use crate::support::*;
use crate::tokens::OBJECTS;
use warrant_testkit::SA_UID;

#[tokio::test]
async fn the_binary_signs_for_kube_apiserver_on_its_socket() {
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    // A socket file left by a warrant that crashed: replaced at start.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let audit_log = run.path().join("audit/audit.log");
    let mut w = Warrant::start(
        OBJECTS,
        &[
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
            "--audit-log-path",
            audit_log.to_str().unwrap(),
        ],
    )
    .await;
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.mode() & 0o777, 0o600, "owner-only");

    let mut signer = warrant_signer::client::connect(&socket).await.unwrap();
    // The keys kube-apiserver would publish are warrant's JWKS, kid for kid.
    let keys = signer
        .fetch_keys(FetchKeysRequest {})
        .await
        .unwrap()
        .into_inner();
    let fetched: Vec<String> = keys.keys.iter().map(|k| k.key_id.clone()).collect();
    let jwks: Value = w
        .http
        .get(w.url("/openid/v1/jwks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let published: Vec<String> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(fetched, published);
    assert!(keys.refresh_hint_seconds >= 60);
    let metadata = signer.metadata(MetadataRequest {}).await.unwrap();
    assert!(metadata.into_inner().max_token_expiration_seconds >= 600);

    // Claims as kube-apiserver encodes them (warrant encodes them the same way, byte for
    // byte): those of a token warrant issued, signed again through the socket.
    let issued = w.token(&["--audience", "vault"]);
    let claims = issued.split('.').nth(1).unwrap().to_owned();
    let signed = signer
        .sign(SignJwtRequest {
            claims: claims.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&signed.header).unwrap()).unwrap();
    assert_eq!(header["typ"], "JWT");
    assert!(published.contains(&header["kid"].as_str().unwrap().to_owned()));
    let assembled = format!("{}.{claims}.{}", signed.header, signed.signature);
    let review = w.review(&assembled, &["vault"]);
    assert_eq!(review["authenticated"], true, "{review}");
    assert_eq!(review["user"]["username"], "system:serviceaccount:demo:app");

    // Claims of another issuer are refused, saying so.
    let mut foreign: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&claims).unwrap()).unwrap();
    foreign["iss"] = "https://elsewhere.example".into();
    let refused = signer
        .sign(SignJwtRequest {
            claims: URL_SAFE_NO_PAD.encode(foreign.to_string()),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), warrant_signer::Code::InvalidArgument);
    assert!(
        refused
            .message()
            .contains("is not an issuer of this signer")
    );

    assert_eq!(
        w.metric(r#"warrant_signer_requests_total{rpc="Sign",result="ok"}"#)
            .await,
        1.0
    );
    assert_eq!(
        w.metric(r#"warrant_signer_requests_total{rpc="Sign",result="wrong_issuer"}"#)
            .await,
        1.0
    );

    // The audit trail, written out when warrant stops: kubectl's TokenRequest, the Sign, the
    // review and the refused Sign, in that order; never a token or a signature.
    w.signal("TERM");
    assert!(w.wait_exit().success());
    let text = std::fs::read_to_string(&audit_log).unwrap();
    assert!(!text.contains(&issued) && !text.contains(&signed.signature));
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decisions: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(
        decisions,
        [
            ("TokenRequest", "issued"),
            ("Sign", "signed"),
            ("TokenReview", "authenticated"),
            ("Sign", "refused"),
        ]
    );
    let jti = |token: &str| -> String {
        let claims: Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(token.split('.').nth(1).unwrap())
                .unwrap(),
        )
        .unwrap();
        format!("JTI={}", claims["jti"].as_str().unwrap())
    };
    // The Sign and the review are of the same claims as the issued token.
    for event in &events[..3] {
        assert_eq!(event["credentialID"], jti(&issued).as_str(), "{event}");
        assert_eq!(event["serviceAccount"]["name"], "app");
        assert_eq!(event["audiences"], serde_json::json!(["vault"]));
    }
    assert_eq!(events[1]["keyID"], header["kid"]);
    assert_eq!(events[1]["requester"]["authenticatedBy"], "unix-socket");
    let pid = std::process::id();
    assert_eq!(
        events[1]["requester"]["clientAddress"],
        format!("unix:pid={pid},uid={}", own_uid()).as_str()
    );
    assert!(
        events[3]["reason"]
            .as_str()
            .unwrap()
            .contains("is not an issuer of this signer")
    );
    // kubectl authenticated with the admin's client certificate, from this machine.
    assert_eq!(events[0]["requester"]["user"], "admin");
    assert!(
        events[0]["requester"]["clientAddress"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
}

/// This process's user ID, as the kernel reports it to the socket's other end.
fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// kube-apiserver needs the signer before it can serve anything, including the lists warrant's
/// watch cache waits for: with the cluster stalled, warrant is not ready, yet its socket answers.
// Multi-threaded: the fixture serves while the test waits on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The real binary checks exp against the real clock, so the claims are dated by it.
#[allow(clippy::disallowed_methods)]
async fn the_socket_answers_before_the_cluster_does() {
    use warrant_kube_fixture::Fixture;
    use warrant_kube_fixture::objects::service_account;

    let cluster = Fixture::start().await.unwrap();
    cluster
        .create(&service_account("demo", "app", SA_UID))
        .unwrap();
    cluster.stall(true);
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    let w = Warrant::start_cluster_unready(
        &cluster,
        &[
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
        ],
    )
    .await;
    let readyz = w.http.get(w.url("/readyz")).send().await.unwrap();
    assert_eq!(readyz.status(), 503, "the cache cannot have been listed");

    let mut signer = warrant_signer::client::connect(&socket).await.unwrap();
    let keys = signer.fetch_keys(FetchKeysRequest {}).await.unwrap();
    assert!(!keys.into_inner().keys.is_empty());
    let now = jiff::Timestamp::now().as_second();
    let claims = serde_json::json!({
        "aud": ["https://kubernetes.default.svc"], "exp": now + 3600, "iat": now,
        "iss": w.issuer(), "jti": "7d1c1f3e-0000-4000-8000-000000000001",
        "kubernetes.io": {"namespace": "demo", "serviceaccount": {"name": "app", "uid": SA_UID}},
        "nbf": now, "sub": "system:serviceaccount:demo:app",
    });
    let signed = signer
        .sign(SignJwtRequest {
            claims: URL_SAFE_NO_PAD.encode(claims.to_string()),
        })
        .await;
    assert!(signed.is_ok(), "{signed:?}");
    // Once the cluster answers, warrant becomes ready as usual.
    cluster.stall(false);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while w.http.get(w.url("/readyz")).send().await.unwrap().status() != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "warrant did not become ready once the cluster answered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A control-plane sidecar may serve only the socket: `--secure-port 0` needs no serving
/// certificate, and refuses to start with nothing to serve.
#[tokio::test]
async fn the_socket_alone_with_secure_port_zero() {
    let dir = tempfile::tempdir().unwrap();
    warrant_ok(&[
        "local-setup".as_ref(),
        "--dir".as_ref(),
        dir.path().as_os_str(),
    ]);
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).unwrap();
    let socket = dir.path().join("signer.sock");
    let mut args: Vec<std::ffi::OsString> = vec![
        "serve".into(),
        "--service-account-issuer".into(),
        "https://kubernetes.default.svc".into(),
        "--objects-file".into(),
        dir.path().join("objects.yaml").into(),
        "--secure-port".into(),
        "0".into(),
    ];
    args.extend(static_keys(dir.path()));

    // Nothing to serve: refused, saying why.
    let out = std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("without --service-account-signing-endpoint there would be nothing to serve"),
        "{}",
        stderr(&out)
    );

    args.extend([
        "--service-account-signing-endpoint".into(),
        socket.clone().into(),
    ]);
    let mut child = std::process::Command::new(BIN)
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut signer = signer_when_ready(&mut child, &socket).await;
    let keys = signer
        .fetch_keys(FetchKeysRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(keys.keys.len(), 1);

    // Its liveness probe, with no HTTPS to ask: `probe-signer` calls what kube-apiserver calls.
    let probe = || {
        std::process::Command::new(BIN)
            .arg("probe-signer")
            .arg("--signing-endpoint")
            .arg(&socket)
            .output()
            .unwrap()
    };
    let healthy = probe();
    assert!(healthy.status.success(), "{}", stderr(&healthy));
    let said = String::from_utf8_lossy(&healthy.stdout);
    assert!(said.starts_with("ok: 1 key(s)"), "{said}");
    assert!(said.contains(&keys.keys[0].key_id), "{said}");

    // SIGTERM: it stops, and takes its socket file with it.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
    assert!(!socket.exists(), "the socket file is removed on shutdown");

    // Now the probe fails, in one line that says where it looked.
    let down = probe();
    assert_eq!(down.status.code(), Some(1));
    let error = stderr(&down);
    assert_eq!(error.trim_end().lines().count(), 1, "{error}");
    assert!(
        error.starts_with("warrant: cannot connect to the signer at")
            && error.contains("signer.sock"),
        "{error}"
    );

    // HTTPS without a certificate is refused, naming the flags.
    let https = serve_refusing_with_keys(dir.path());
    assert!(
        stderr(&https).contains("--tls-cert-file and --tls-private-key-file are required"),
        "{}",
        stderr(&https)
    );
}

/// A client of the signer socket of `child` once it answers (30 s at most, and failing at
/// once if warrant exits first).
async fn signer_when_ready(
    child: &mut std::process::Child,
    socket: &std::path::Path,
) -> warrant_signer::client::SignerClient {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(client) = warrant_signer::client::connect(socket).await {
            return client;
        }
        assert!(child.try_wait().unwrap().is_none(), "warrant exited");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the socket never answered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `warrant serve` with the setup's keys and objects on a free port but no TLS files.
fn serve_refusing_with_keys(dir: &std::path::Path) -> std::process::Output {
    let mut args: Vec<std::ffi::OsString> = vec![
        "serve".into(),
        "--service-account-issuer".into(),
        "https://kubernetes.default.svc".into(),
        "--objects-file".into(),
        dir.join("objects.yaml").into(),
    ];
    args.extend(static_keys(dir));
    std::process::Command::new(BIN)
        .args(&args)
        .output()
        .unwrap()
}

/// Issue 22, item 2: under umask 000 the old signer bound its socket beside the final path with
/// mode 0777 for a moment, and a local user who connected then got tokens signed. Watched with
/// inotify from before the start: nothing but a directory is ever created in the socket's
/// directory, the socket arrives there by a rename, already 0600, and is never chmodded there.
#[tokio::test]
async fn the_socket_never_exists_beside_its_path_with_a_looser_mode() {
    use rustix::fs::inotify;

    let dir = tempfile::tempdir().unwrap();
    warrant_ok(&[
        "local-setup".as_ref(),
        "--dir".as_ref(),
        dir.path().as_os_str(),
    ]);
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let socket = run.join("signer.sock");
    let watch =
        inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(
        &watch,
        &run,
        inotify::WatchFlags::CREATE
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::ATTRIB
            | inotify::WatchFlags::DELETE,
    )
    .unwrap();

    // The most permissive umask there is, as in the report.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "umask 000; exec \"$@\"", "sh", BIN, "serve"])
        .args(["--service-account-issuer", "https://kubernetes.default.svc"])
        .arg("--objects-file")
        .arg(dir.path().join("objects.yaml"))
        .args(["--secure-port", "0", "--service-account-signing-endpoint"])
        .arg(&socket)
        .args(static_keys(dir.path()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut signer = signer_when_ready(&mut child, &socket).await;
    assert!(signer.metadata(MetadataRequest {}).await.is_ok());

    let mut buffer = [std::mem::MaybeUninit::uninit(); 4096];
    let mut events = inotify::Reader::new(&watch, &mut buffer);
    let mut seen: Vec<(inotify::ReadFlags, String)> = Vec::new();
    loop {
        match events.next() {
            Ok(event) => seen.push((
                event.events(),
                event
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )),
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => panic!("inotify: {e}"),
        }
    }
    let created: Vec<&(inotify::ReadFlags, String)> = seen
        .iter()
        .filter(|(flags, _)| flags.contains(inotify::ReadFlags::CREATE))
        .collect();
    assert!(!created.is_empty(), "{seen:?}");
    for (flags, name) in &created {
        assert!(
            flags.contains(inotify::ReadFlags::ISDIR),
            "{name} was created beside the socket's path, not a directory: {seen:?}"
        );
        // The private directory is gone again.
        assert!(
            seen.iter()
                .any(|(f, n)| f.contains(inotify::ReadFlags::DELETE) && n == name),
            "{seen:?}"
        );
    }
    assert!(
        seen.iter()
            .any(|(f, n)| f.contains(inotify::ReadFlags::MOVED_TO) && n == "signer.sock"),
        "{seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|(f, n)| f.contains(inotify::ReadFlags::ATTRIB) && n == "signer.sock"),
        "the socket's mode or owner changed after it was in place: {seen:?}"
    );
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert_eq!((meta.mode() & 0o7777, meta.uid()), (0o600, own_uid()));
    let names: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["signer.sock"]);

    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}

/// Issue 22, item 2: a process whose user and group are not allowed is closed before it can
/// call anything. The tests run as root, which the default allows: allow some other user only.
#[tokio::test]
async fn a_peer_that_is_not_allowed_is_refused_by_the_binary() {
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    let mut w = Warrant::start(
        OBJECTS,
        &[
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
            "--signing-endpoint-allowed-uids",
            "4242",
            "--signing-endpoint-max-connections",
            "4",
            "--signing-endpoint-idle-timeout",
            "30s",
        ],
    )
    .await;
    // The kernel accepts the connection; warrant closes it unread.
    if let Ok(mut signer) = warrant_signer::client::connect(&socket).await {
        assert!(signer.metadata(MetadataRequest {}).await.is_err());
    }
    assert!(
        w.metric(r#"warrant_signer_connections_closed_total{reason="peer_not_allowed"}"#)
            .await
            >= 1.0
    );
    assert_eq!(
        w.metric(r#"warrant_signer_requests_total{rpc="Metadata",result="ok"}"#)
            .await,
        0.0
    );
    let log = w.log();
    let line = log
        .lines()
        .find(|l| l.contains("refused a connection to the signing socket"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains(&format!("uid={}", own_uid())), "{line}");
}

/// Issue 22, items 3 and 7, through the binary: with key files and a 48h maximum, Metadata says a
/// year (extended tokens need it), yet Sign holds ordinary tokens to 48h; claims a Go reader
/// would read otherwise are refused; and `probe-signer` warns about a kube-apiserver on this
/// machine that lacks the matching flag.
#[tokio::test]
// The real binary checks exp against the real clock, so the claims are dated by it.
#[allow(clippy::disallowed_methods)]
async fn the_binary_holds_ordinary_tokens_to_its_maximum_and_says_what_kube_needs() {
    use std::os::unix::process::CommandExt;

    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    let w = Warrant::start(
        OBJECTS,
        &[
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
            "--service-account-max-token-expiration",
            "48h",
        ],
    )
    .await;
    let mut signer = warrant_signer::client::connect(&socket).await.unwrap();
    let metadata = signer.metadata(MetadataRequest {}).await.unwrap();
    assert_eq!(
        metadata
            .metadata()
            .get(warrant_signer::ORDINARY_MAX_METADATA)
            .unwrap(),
        "172800"
    );
    let year = 31_536_000;
    assert_eq!(metadata.into_inner().max_token_expiration_seconds, year);

    let now = jiff::Timestamp::now().as_second();
    let claims = |lifetime: i64, warn_after: Option<i64>| {
        let mut claims = serde_json::json!({
            "aud": ["https://kubernetes.default.svc"], "exp": now + lifetime, "iat": now,
            "iss": w.issuer(), "jti": "7d1c1f3e-0000-4000-8000-000000000002",
            "kubernetes.io": {"namespace": "demo", "serviceaccount": {"name": "app", "uid": SA_UID}},
            "nbf": now, "sub": "system:serviceaccount:demo:app",
        });
        if let Some(warn_after) = warn_after {
            claims["kubernetes.io"]["warnafter"] = warn_after.into();
        }
        claims.to_string()
    };
    let mut sign = async |claims: String| {
        signer
            .sign(SignJwtRequest {
                claims: URL_SAFE_NO_PAD.encode(claims),
            })
            .await
    };
    // What kube-apiserver v1.36.2 minted for a 100000h request with Metadata's year as its cap.
    let refused = sign(claims(year, None)).await.unwrap_err();
    assert_eq!(refused.code(), warrant_signer::Code::InvalidArgument);
    assert!(
        refused
            .message()
            .contains("beyond the 172800 s maximum of a token that is not extended"),
        "{}",
        refused.message()
    );
    assert!(sign(claims(172_800, None)).await.is_ok());
    assert!(sign(claims(year, Some(now + 3607))).await.is_ok());
    // The issue's two claims sets: a far exp hidden before the near one, or as "EXP".
    let near = claims(3600, None);
    for hidden in [
        near.replacen('{', "{\"exp\":99999999999,", 1),
        near.replacen('{', "{\"EXP\":99999999999,", 1),
    ] {
        let refused = sign(hidden).await.unwrap_err();
        assert_eq!(refused.code(), warrant_signer::Code::InvalidArgument);
    }
    assert!(sign(near).await.is_ok());
    for (result, count) in [
        ("exp_beyond_max", 1.0),
        ("duplicate_claim", 1.0),
        ("case_variant_claim", 1.0),
        ("ok", 3.0),
    ] {
        assert_eq!(
            w.metric(&format!(
                r#"warrant_signer_requests_total{{rpc="Sign",result="{result}"}}"#
            ))
            .await,
            count,
            "{result}"
        );
    }

    // Two kube-apiservers on this machine using the socket (stand-ins: a shell that waits,
    // named kube-apiserver, with the flags on its command line): one without a cap, which takes
    // Metadata's year for every token, and one with warrant's.
    let kube_apiserver = |extra: &[&str]| {
        std::process::Command::new("sh")
            .arg0("kube-apiserver")
            .args(["-c", "read _"])
            .arg(format!(
                "--service-account-signing-endpoint={}",
                socket.display()
            ))
            .args(extra)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut uncapped = kube_apiserver(&[]);
    let mut capped = kube_apiserver(&["--service-account-max-token-expiration=48h"]);
    let probe = std::process::Command::new(BIN)
        .arg("probe-signer")
        .arg("--signing-endpoint")
        .arg(&socket)
        .output()
        .unwrap();
    let _ = (uncapped.kill(), capped.kill());
    let _ = (uncapped.wait(), capped.wait());
    assert!(probe.status.success(), "{}", stderr(&probe));
    let warnings = stderr(&probe);
    assert_eq!(warnings.lines().count(), 1, "{warnings}");
    assert!(
        warnings.starts_with(&format!(
            "warrant: warning: kube-apiserver (pid {}) issues tokens of up to 31536000 s",
            uncapped.id()
        )),
        "{warnings}"
    );
    assert!(
        warnings
            .trim_end()
            .ends_with("give kube-apiserver --service-account-max-token-expiration=172800s"),
        "{warnings}"
    );
}

/// The control-plane example gives kube-apiserver warrant's own maximum, so that neither refuses
/// the other's tokens (issue 22, item 3).
#[test]
fn the_control_plane_example_gives_kube_apiserver_warrants_maximum() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/control-plane");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
    let flag = "--service-account-max-token-expiration=";
    let warrant = read("warrant-signer.yaml");
    let value = warrant
        .lines()
        .find_map(|l| l.trim().strip_prefix("- ")?.strip_prefix(flag))
        .expect("warrant-signer.yaml sets --service-account-max-token-expiration");
    let patch = read("kubeadm/kube-apiserver1+json.yaml");
    assert!(
        patch.contains(&format!("{flag}{value}")),
        "kubeadm/kube-apiserver1+json.yaml must give kube-apiserver {flag}{value}"
    );
}
