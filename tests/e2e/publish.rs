//! Discovery published where relying parties read it (docs/discovery.md), on the real binary:
//! `serve --publish-discovery` and `discovery publish`, into a directory served as a web root
//! (`file://`). The object-store targets are tested against an S3 server in warrant-publish.

use std::ffi::{OsStr, OsString};

use crate::support::*;
use crate::tokens::OBJECTS;

#[tokio::test]
async fn serve_keeps_a_directory_target_current_and_ready() {
    let www = tempfile::tempdir().unwrap();
    let target = format!("file://{}", www.path().display());
    let w = Warrant::start_with(OBJECTS, key_dir, &["--publish-discovery", &target]).await;
    // Ready means published: the first round is done before the keys start.
    assert_documents_in(&w, www.path()).await;
    let ready = w.http.get(w.url("/readyz/publish")).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    // The one-shot command writes the same bytes from the same key directory.
    let again = tempfile::tempdir().unwrap();
    let dir = w.path("keys");
    let args: Vec<OsString> = vec![
        "discovery".into(),
        "publish".into(),
        format!("file://{}", again.path().display()).into(),
        "--service-account-issuer".into(),
        w.issuer().into(),
        "--key-dir".into(),
        dir.into(),
    ];
    let args: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    w.warrant_ok(&args);
    assert_documents_in(&w, again.path()).await;
}

#[tokio::test]
async fn a_target_where_the_issuer_cannot_be_is_refused_at_startup() {
    let www = tempfile::tempdir().unwrap();
    let key = signing_key(www.path());
    let web_root = www.path().join("www");
    std::fs::create_dir(&web_root).unwrap();
    let args: Vec<OsString> = vec![
        "discovery".into(),
        "publish".into(),
        format!("file://{}", web_root.display()).into(),
        "--service-account-issuer".into(),
        "https://issuer.example/tenant-a".into(),
        "--service-account-jwks-uri".into(),
        "https://elsewhere.example/openid/v1/jwks".into(),
        "--service-account-signing-key-file".into(),
        key.into(),
    ];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warrant"))
        .args(&args)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("jwks_uri"), "{stderr}");
    assert!(
        std::fs::read_dir(&web_root).unwrap().next().is_none(),
        "something was published by a refused command"
    );
}

/// A P-256 signing key file in `dir`, made by openssl.
fn signing_key(dir: &std::path::Path) -> std::path::PathBuf {
    let key = dir.join("sa.key");
    let made = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&key)
        .status()
        .unwrap();
    assert!(made.success());
    key
}

/// Whoever deploys the web site can plant a symbolic link inside the web root, pointing where
/// warrant (perhaps root) may write and they may not. `discovery publish file://` and
/// `discovery export --dir` refuse to write through it, naming it, and write nothing there.
#[tokio::test]
async fn a_symbolic_link_inside_the_web_root_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let key = signing_key(tmp.path());
    let web_root = tmp.path().join("www");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&web_root).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, web_root.join("tenant-a")).unwrap();
    let issuer = "https://issuer.example/tenant-a";
    let runs: [Vec<OsString>; 2] = [
        vec![
            "discovery".into(),
            "publish".into(),
            format!("file://{}", web_root.display()).into(),
        ],
        vec![
            "discovery".into(),
            "export".into(),
            "--dir".into(),
            web_root.clone().into(),
        ],
    ];
    for mut args in runs {
        args.extend([
            "--service-account-issuer".into(),
            issuer.into(),
            "--service-account-signing-key-file".into(),
            key.clone().into(),
        ]);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_warrant"))
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
        assert!(
            stderr.contains("tenant-a is a symbolic link"),
            "{args:?}: {stderr}"
        );
        assert!(
            std::fs::read_dir(&outside).unwrap().next().is_none(),
            "{args:?} wrote through the link"
        );
    }
}

/// `discovery export` is a publish round to a directory, as a `file://` target: for an issuer
/// and `jwks_uri` such a target accepts, the two write the same files. A `jwks_uri` on another
/// host than the issuer (a CDN, `--external-hostname`) is refused by a `file://` target, the
/// issuer host's web root that the activation gate reads back; an export is copied by the
/// operator, so it writes the JWKS at its URL's path all the same and says which URL must serve
/// each file.
#[test]
fn export_writes_what_a_directory_target_does_and_a_jwks_for_another_host() {
    let tmp = tempfile::tempdir().unwrap();
    let key = signing_key(tmp.path());
    let issuer = "https://issuer.example/tenant-a";
    let run = |how: &[&OsStr], jwks_uri: Option<&str>| {
        let mut command = std::process::Command::new(BIN);
        command
            .args(["discovery"])
            .args(how)
            .args(["--service-account-issuer", issuer])
            .arg("--service-account-signing-key-file")
            .arg(&key);
        if let Some(jwks_uri) = jwks_uri {
            command.args(["--service-account-jwks-uri", jwks_uri]);
        }
        command.output().unwrap()
    };
    let exported = tmp.path().join("exported");
    let published = tmp.path().join("published");
    let out = run(
        &["export".as_ref(), "--dir".as_ref(), exported.as_os_str()],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let target = format!("file://{}", published.display());
    let out = run(&["publish".as_ref(), target.as_ref()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let files = files_below(&exported);
    assert_eq!(
        files,
        [
            "tenant-a/.well-known/openid-configuration",
            "tenant-a/openid/v1/jwks"
        ]
    );
    assert_eq!(files_below(&published), files);
    for file in &files {
        assert_eq!(
            std::fs::read(exported.join(file)).unwrap(),
            std::fs::read(published.join(file)).unwrap(),
            "{file}"
        );
    }

    let jwks_uri = "https://keys.example.net/tenant-a/jwks";
    let refused = tmp.path().join("refused");
    let target = format!("file://{}", refused.display());
    let out = run(&["publish".as_ref(), target.as_ref()], Some(jwks_uri));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not on the issuer's host"),
        "{}",
        stderr(&out)
    );

    let cdn = tmp.path().join("cdn");
    let out = run(
        &["export".as_ref(), "--dir".as_ref(), cdn.as_os_str()],
        Some(jwks_uri),
    );
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    assert_eq!(
        files_below(&cdn),
        ["tenant-a/.well-known/openid-configuration", "tenant-a/jwks"]
    );
    let discovery: serde_json::Value = serde_json::from_slice(
        &std::fs::read(cdn.join("tenant-a/.well-known/openid-configuration")).unwrap(),
    )
    .unwrap();
    assert_eq!(discovery["jwks_uri"], jwks_uri);
    assert_eq!(
        std::fs::read(cdn.join("tenant-a/jwks")).unwrap(),
        std::fs::read(published.join("tenant-a/openid/v1/jwks")).unwrap(),
        "the JWKS for the other host lists the same keys"
    );
    for (file, url) in [
        (
            "tenant-a/.well-known/openid-configuration",
            "https://issuer.example/tenant-a/.well-known/openid-configuration",
        ),
        ("tenant-a/jwks", jwks_uri),
    ] {
        let line = log
            .lines()
            .find(|l| l.contains(&format!("{}/{file}", cdn.display())))
            .unwrap_or_else(|| panic!("no log line names {file}: {log}"));
        assert!(
            line.contains(url),
            "{file} is to be served at {url}: {line}"
        );
    }
}

/// The files below `root`, by their paths relative to it, sorted.
fn files_below(root: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                files.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    files
}

/// `--publish-endpoint http://` to a host that is not loopback would send the bucket's
/// credentials in clear: refused before anything is sent, saying what to do instead; so is a CA
/// file that holds no certificate, and a CA file without an endpoint.
#[tokio::test]
async fn plain_http_to_a_remote_endpoint_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let key = signing_key(tmp.path());
    let not_a_ca = tmp.path().join("ca.pem");
    std::fs::write(&not_a_ca, "not a certificate\n").unwrap();
    let run = |extra: &[&OsStr]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_warrant"))
            .args(["discovery", "publish", "s3://bucket/tenant-a"])
            .args([
                "--service-account-issuer",
                "https://issuer.example/tenant-a",
            ])
            .arg("--service-account-signing-key-file")
            .arg(&key)
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // 0.0.0.0 is this machine but not loopback: were it not refused, the request would stay here.
    let stderr = run(&["--publish-endpoint".as_ref(), "http://0.0.0.0:9".as_ref()]);
    assert!(
        stderr.contains("plain HTTP to a host that is not loopback")
            && stderr.contains("--publish-allow-http")
            && stderr.contains("--publish-ca-file"),
        "{stderr}"
    );
    let stderr = run(&[
        "--publish-endpoint".as_ref(),
        "https://127.0.0.1:9".as_ref(),
        "--publish-ca-file".as_ref(),
        not_a_ca.as_os_str(),
    ]);
    assert!(stderr.contains("holds no CERTIFICATE block"), "{stderr}");
    let stderr = run(&["--publish-ca-file".as_ref(), not_a_ca.as_os_str()]);
    assert!(stderr.contains("--publish-endpoint"), "{stderr}");
}

/// A failing target's reason can carry what only operators should read (here a path of the
/// web root; from a bucket, its error body with an account id or a role ARN). Readiness names
/// the failing check to anyone, as kube-apiserver does (`reason withheld`), and says why only
/// to a caller who authenticated, and in the log.
#[tokio::test]
async fn readiness_says_why_a_target_fails_only_to_callers_who_authenticate() {
    let www = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), www.path().join("openid")).unwrap();
    let target = format!("file://{}", www.path().display());
    let mut w =
        Warrant::start_with_unready(OBJECTS, key_dir, &["--publish-discovery", &target]).await;
    let get = async |path: &str, token: Option<String>| {
        let mut request = w.http.get(w.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let (code, body) = get("/readyz", None).await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("[-]publish failed: reason withheld\n")
            && body.ends_with("readyz check failed\n"),
        "{body}"
    );
    assert!(
        !body.contains("symbolic link") && !body.contains(&target),
        "{body}"
    );
    let (code, body) = get("/readyz/publish", None).await;
    assert_eq!(
        (code, body.as_str()),
        (503, "internal server error: reason withheld")
    );

    let admin = Some(w.admin_token());
    let (code, body) = get("/readyz", admin.clone()).await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("[-]publish failed: ") && body.contains("openid is a symbolic link"),
        "{body}"
    );
    let (_, body) = get("/readyz/publish", admin).await;
    assert!(body.contains("openid is a symbolic link"), "{body}");
    let log = w.log();
    assert!(
        log.contains("[-]publish failed: ") && log.contains("openid is a symbolic link"),
        "{log}"
    );
}

/// A target that cannot be used is named as the operator gave it: `serve` by its flag,
/// `discovery publish` by the URL alone (it takes targets as arguments, and has no
/// `--publish-discovery` flag to look for).
#[test]
fn a_bad_target_is_named_where_it_was_given() {
    let out = serve_refusing(&["--publish-discovery", "ftp://bucket/prefix"], &[]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("--publish-discovery ftp://bucket/prefix: unsupported scheme \"ftp\""),
        "{said}"
    );

    let dir = tempfile::tempdir().unwrap();
    let key = signing_key(dir.path());
    let out = std::process::Command::new(BIN)
        .args([
            "discovery",
            "publish",
            "ftp://bucket/prefix",
            "--service-account-issuer",
            "https://warrant.example/prefix",
            "--service-account-signing-key-file",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("ftp://bucket/prefix: unsupported scheme \"ftp\""),
        "{said}"
    );
    assert!(!said.contains("--publish-discovery"), "{said}");
}
