//! TokenRequest errors as kubectl users see them (spec §4.2–§4.3); the complete matrix with
//! exact Status bodies is in crates/warrant-server/tests/api.

use crate::support::*;
use crate::tokens::OBJECTS;

#[tokio::test]
async fn kubectl_shows_kubes_messages() {
    let w = Warrant::start(OBJECTS, &[]).await;
    let cases: &[(&[&str], &str)] = &[
        (
            &["create", "token", "ghost", "-n", "demo"],
            r#"serviceaccounts "ghost" not found"#,
        ),
        (
            &["create", "token", "app", "-n", "demo", "--duration", "5m"],
            r#"TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"#,
        ),
        (
            &[
                "create",
                "token",
                "app",
                "-n",
                "demo",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "nope",
            ],
            r#"pods "nope" not found"#,
        ),
        (
            &[
                "create",
                "token",
                "app",
                "-n",
                "demo",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "web-0",
            ],
            r#"cannot bind token for serviceaccount "app" to pod running with different serviceaccount name."#,
        ),
        (
            &[
                "create",
                "token",
                "app",
                "-n",
                "demo",
                "--bound-object-kind",
                "Pod",
                "--bound-object-name",
                "app-0",
                "--bound-object-uid",
                "stale",
            ],
            r#"Operation cannot be fulfilled on Pod "app-0": the UID in the bound object reference (stale) does not match the UID in record. The object might have been deleted and then recreated"#,
        ),
        (
            &[
                "create",
                "token",
                "app",
                "-n",
                "demo",
                "--bound-object-kind",
                "Secret",
                "--bound-object-name",
                "nope",
            ],
            r#"secrets "nope" not found"#,
        ),
    ];
    for (args, message) in cases {
        let out = w.kubectl(args);
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
