//! `--metrics-bind-address`: metrics and health over plain HTTP, to anyone, and nothing else;
//! the HTTPS port keeps asking who reads `/metrics`.

use crate::support::*;
use crate::tokens::OBJECTS;

/// Starts warrant with a metrics listener on a loopback port of the system's choice (port 0,
/// so that no other process can take it between a choice and warrant's bind) and `extra`
/// flags; returns the server and the `ADDRESS:PORT` it says it listens on.
async fn start_with_metrics_listener(extra: &[&str]) -> (Warrant, String) {
    let mut flags = vec!["--metrics-bind-address", "127.0.0.1:0"];
    flags.extend_from_slice(extra);
    let mut w = Warrant::start(OBJECTS, &flags).await;
    let line = w.log_line("serving metrics and health over HTTP").await;
    let address = line
        .split_once("address=")
        .and_then(|(_, after)| after.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    assert!(
        address.starts_with("127.0.0.1:") && !address.ends_with(":0"),
        "{line}"
    );
    (w, address)
}

#[tokio::test]
async fn the_metrics_listener_serves_metrics_and_health_only() {
    let (w, address) = start_with_metrics_listener(&[]).await;
    let plain = reqwest::Client::new();
    let get = |path: &str| {
        let request = plain.get(format!("http://{address}{path}"));
        async move { request.send().await.unwrap() }
    };
    // No credentials: the same metrics and health as the HTTPS port.
    let metrics = get("/metrics").await;
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(text.contains("warrant_build_info{"), "{text}");
    for path in [
        "/livez",
        "/readyz",
        "/healthz",
        "/livez/ping",
        "/readyz/keys",
    ] {
        let r = get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.text().await.unwrap(), "ok", "{path}");
    }
    let verbose = get("/readyz?verbose").await.text().await.unwrap();
    assert!(verbose.contains("[+]keys ok"), "{verbose}");
    assert_eq!(get("/readyz/nonesuch").await.status(), 404);
    // Nothing else: not the API, not discovery, not a token.
    for path in [
        "/version",
        "/.well-known/openid-configuration",
        "/api/v1",
        "/openapi/v2",
    ] {
        assert_eq!(get(path).await.status(), 404, "{path}");
    }
    let post = plain
        .post(format!(
            "http://{address}/api/v1/namespaces/demo/serviceaccounts/app/token"
        ))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 404);
    let post = plain
        .post(format!("http://{address}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    // The HTTPS port still refuses /metrics to a caller without a token.
    let https = w.http.get(w.url("/metrics")).send().await.unwrap();
    assert_eq!(https.status(), 401);
}

/// Readiness on the metrics listener fails from SIGTERM on, through the shutdown delay, as on
/// the HTTPS port; liveness holds.
#[tokio::test]
async fn the_metrics_listener_reports_a_shutdown() {
    let (w, address) = start_with_metrics_listener(&["--shutdown-delay-duration", "30s"]).await;
    let plain = reqwest::Client::new();
    let status = |path: &'static str| {
        let request = plain.get(format!("http://{address}{path}"));
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(status("/readyz").await, 200);
    w.signal("TERM");
    // warrant notices the signal on its own schedule.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while status("/readyz").await != 503 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never failed on the metrics listener"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status("/livez").await, 200);
}
