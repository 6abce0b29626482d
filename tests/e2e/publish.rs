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
    let key = www.path().join("sa.key");
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
    let key = dir.path().join("sa.key");
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
