//! The real binary as kube-apiserver's external signer: a gRPC client on the Unix socket, as
//! kube-apiserver dials it, against `warrant serve --service-account-signing-endpoint`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use warrant_signer::proto::{FetchKeysRequest, MetadataRequest, SignJwtRequest};

use crate::support::*;
use crate::tokens::OBJECTS;

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
        .create(&service_account("demo", "app", "sa-1"))
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
        "kubernetes.io": {"namespace": "demo", "serviceaccount": {"name": "app", "uid": "sa-1"}},
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
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut signer = loop {
        if let Ok(client) = warrant_signer::client::connect(&socket).await {
            break client;
        }
        assert!(child.try_wait().unwrap().is_none(), "warrant exited");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the socket never answered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
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
