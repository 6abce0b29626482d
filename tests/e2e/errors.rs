//! TokenRequest errors as kubectl users see them (spec §4.2–§4.3); the complete matrix with
//! exact Status bodies is in crates/warrant-server/tests/api.

use crate::support::*;
use crate::tokens::OBJECTS;

#[tokio::test]
async fn kubectl_shows_kubes_messages() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let pod = |name: &'static str| ["--bound-object-kind", "Pod", "--bound-object-name", name];
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("ghost", vec![], r#"serviceaccounts "ghost" not found"#),
        (
            "app",
            vec!["--duration", "5m"],
            r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"#,
        ),
        ("app", pod("nope").to_vec(), r#"pods "nope" not found"#),
        (
            "app",
            pod("web-0").to_vec(),
            r#"cannot bind token for serviceaccount "app" to pod running with different serviceaccount name."#,
        ),
        (
            "app",
            [&pod("app-0")[..], &["--bound-object-uid", "stale"]].concat(),
            r#"Operation cannot be fulfilled on Pod "app-0": the UID in the bound object reference (stale) does not match the UID in record. The object might have been deleted and then recreated"#,
        ),
        (
            "app",
            vec![
                "--bound-object-kind",
                "Secret",
                "--bound-object-name",
                "nope",
            ],
            r#"secrets "nope" not found"#,
        ),
    ];
    for (sa, args, message) in cases {
        let out = w.create_token_as(sa, &args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = stderr(&out);
        assert!(
            err.contains(message),
            "{args:?}: expected {message:?} in {err:?}"
        );
    }
}

#[tokio::test]
async fn an_unknown_caller_is_refused() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let out = w.kubectl(&[
        "--token",
        "not-a-known-token",
        "create",
        "token",
        "app",
        "-n",
        "demo",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("Unauthorized") || err.contains("You must be logged in"),
        "{err}"
    );
}

/// A failure is said once: `serve` logs it (its output is its log), every other command prints
/// one `warrant: …` line and nothing else.
#[test]
fn a_failure_is_said_once() {
    let serve = serve_refusing(&[], &[]);
    assert!(!serve.status.success());
    let said = stderr(&serve);
    assert!(
        said.lines().filter(|l| l.contains("unused.key")).count() == 1,
        "said more than once:\n{said}"
    );
    assert!(!said.lines().any(|l| l.starts_with("warrant: ")), "{said}");

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let keys = std::process::Command::new(BIN)
        .args(["keys", "list", "--key-dir"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!keys.status.success());
    let said = stderr(&keys);
    assert_eq!(said.trim_end().lines().count(), 1, "{said}");
    assert!(said.starts_with("warrant: "), "{said}");
}
