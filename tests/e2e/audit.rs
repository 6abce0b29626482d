//! The audit trail through the real binary: an audit log that cannot be written stops what it
//! would record (tokens, reviews, signatures) instead of letting them out unrecorded.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_signer::proto::SignJwtRequest;

use crate::support::*;
use crate::tokens::OBJECTS;

/// `--audit-log-path /dev/full` (every write fails, as on a full disk), in the default
/// blocking mode: `kubectl create token` fails with the server's reason and prints no token,
/// `/readyz` fails naming the audit log, and a Sign on the external signer's socket is
/// refused `UNAVAILABLE`.
// The real binary checks exp against the real clock, so the Sign's claims are dated by it.
#[allow(clippy::disallowed_methods)]
#[tokio::test]
async fn audit_log_on_a_full_disk_stops_tokens_and_readiness() {
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    let mut w = Warrant::start(
        OBJECTS,
        &[
            "--audit-log-path",
            "/dev/full",
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
        ],
    )
    .await;

    let out = w.create_token_as("app", &["--audience", "vault"]);
    assert!(!out.status.success(), "a token went out unaudited");
    assert!(out.stdout.is_empty(), "kubectl printed a token");
    let err = stderr(&out);
    assert!(
        err.contains("the audit log cannot be written"),
        "kubectl said: {err}"
    );

    let ready = w.http.get(w.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let text = ready.text().await.unwrap();
    assert!(text.contains("audit-log"), "{text}");
    // Why, to a caller who authenticated (anonymous probes read "reason withheld").
    let verbose = w
        .http
        .get(w.url("/readyz?verbose"))
        .bearer_auth(w.admin_token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        verbose
            .contains("[-]audit-log failed: writes to the audit log fail: No space left on device"),
        "{verbose}"
    );

    // Claims as kube-apiserver sends them for a projected token of demo/app.
    let now = jiff::Timestamp::now().as_second();
    let claims = serde_json::json!({
        "aud": ["vault"],
        "exp": now + 3600,
        "iat": now,
        "nbf": now,
        "iss": w.issuer(),
        "jti": "6c1c6b2a-0000-4000-8000-000000000001",
        "sub": "system:serviceaccount:demo:app",
        "kubernetes.io": {
            "namespace": "demo",
            "serviceaccount": {"name": "app", "uid": "sa-uid-app"}
        }
    });
    let mut signer = warrant_signer::client::connect(&socket).await.unwrap();
    let refused = signer
        .sign(SignJwtRequest {
            claims: URL_SAFE_NO_PAD.encode(claims.to_string()),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        warrant_signer::Code::Unavailable,
        "{refused:?}"
    );

    // The TokenRequest and the Sign, each lost to the disk and counted.
    assert!(
        w.metric(r#"warrant_audit_events_total{result="failed"}"#)
            .await
            >= 2.0
    );
    w.signal("TERM");
    assert!(w.wait_exit().success());
}
