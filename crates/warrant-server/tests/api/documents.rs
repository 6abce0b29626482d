//! The documents relying parties and clients fetch, with their headers.

use http::{Request, StatusCode};
use jiff::Timestamp;
use serde_json::json;
use warrant_keys::KeySet;
use warrant_token::{KeyType, SigningKey};

use crate::support::*;

#[tokio::test]
async fn openid_configuration_and_jwks() {
    let api = api();
    let r = api.get("/.well-known/openid-configuration").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.headers["cache-control"], "public, max-age=3600");
    assert_eq!(
        r.text,
        format!(
            r#"{{"issuer":"{ISSUER}","jwks_uri":"{ISSUER}/openid/v1/jwks","response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"],"dpop_signing_alg_values_supported":["RS256","ES256","ES384"]}}"#
        )
    );
    let r = api.get("/openid/v1/jwks").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/jwk-set+json");
    assert_eq!(r.headers["cache-control"], "public, max-age=3600");
    assert_eq!(r.json["keys"][0]["kid"], key().kid());

    // A key change re-renders both documents.
    let next = SigningKey::generate(KeyType::Rsa2048).unwrap();
    api.state.issuer().set_keys(KeySet::new(
        next.clone(),
        vec![key().verifying_key().clone()],
    ));
    let r = api.get("/openid/v1/jwks").await;
    let kids: Vec<&str> = r.json["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, [next.kid(), key().kid()]);
    let r = api.get("/.well-known/openid-configuration").await;
    assert_eq!(
        r.json["id_token_signing_alg_values_supported"],
        json!(["ES256", "RS256"])
    );
}

/// A GET with `If-None-Match`.
async fn get_if_none_match(api: &Api, uri: &str, tags: &str) -> Reply {
    api.send(
        Request::builder()
            .uri(uri)
            .header("if-none-match", tags)
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn clients_revalidate_with_etags() {
    let api = api();
    for path in ["/openid/v1/jwks", "/.well-known/openid-configuration"] {
        let r = api.get(path).await;
        let etag = r.headers["etag"].to_str().unwrap().to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        // The current copy: 304, no body, the same validators and caching.
        for tags in [
            etag.clone(),
            format!("W/{etag}"),
            format!("\"stale\", {etag}"),
            "*".to_owned(),
        ] {
            let r = get_if_none_match(&api, path, &tags).await;
            assert_eq!(r.code, StatusCode::NOT_MODIFIED, "{path} {tags}");
            assert_eq!(r.text, "");
            assert_eq!(r.headers["etag"], etag.as_str());
            assert_eq!(r.headers["cache-control"], "public, max-age=3600");
        }
        // A stale copy: the document.
        let r = get_if_none_match(&api, path, "\"stale\"").await;
        assert_eq!(r.code, StatusCode::OK);
        assert_eq!(r.headers["etag"], etag.as_str());

        // A key change that changes the document changes the ETag (an RSA key adds RS256 to
        // the discovery document's algorithms).
        let before = etag;
        api.state.issuer().set_keys(KeySet::new(
            SigningKey::generate(KeyType::Rsa2048).unwrap(),
            vec![key().verifying_key().clone()],
        ));
        let r = get_if_none_match(&api, path, &before).await;
        assert_eq!(r.code, StatusCode::OK);
        assert_ne!(r.headers["etag"], before.as_str());
        api.state
            .issuer()
            .set_keys(KeySet::new(key().clone(), vec![]));
    }
}

/// Managed keys: max-age never reaches past the next scheduled change, and the key that signs
/// changes at its activation second, whenever the key set was published.
#[tokio::test]
async fn max_age_and_signing_follow_the_key_schedule() {
    let api = api();
    let at = |s| Timestamp::from_second(s).unwrap();
    let next = SigningKey::generate(KeyType::P256).unwrap();
    api.state.issuer().set_keys(KeySet::scheduled(
        key().clone(),
        vec![(at(NOW + 100), next.clone())],
        vec![],
        Some(at(NOW + 1000)),
    ));
    let cache = |r: &Reply| r.headers["cache-control"].to_str().unwrap().to_owned();
    assert_eq!(
        cache(&api.get("/openid/v1/jwks").await),
        "public, max-age=1000"
    );
    let kids: Vec<String> = api.get("/openid/v1/jwks").await.json["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kids,
        [key().kid(), next.kid()],
        "the next key is published ahead"
    );

    let kid_of = |token: &str| -> String {
        let header = token.split('.').next().unwrap();
        let header: serde_json::Value = serde_json::from_slice(
            &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, header)
                .unwrap(),
        )
        .unwrap();
        header["kid"].as_str().unwrap().to_owned()
    };
    let token = |r: Reply| r.json["status"]["token"].as_str().unwrap().to_owned();
    api.set_now(NOW + 99);
    assert_eq!(
        kid_of(&token(api.token("app", json!({})).await)),
        key().kid()
    );
    api.set_now(NOW + 100);
    let issued = token(api.token("app", json!({})).await);
    assert_eq!(kid_of(&issued), next.kid());
    // And it verifies.
    let r = api.review("authentication.k8s.io/v1", &issued, &[]).await;
    r.assert_authenticated();

    api.set_now(NOW + 940);
    assert_eq!(
        cache(&api.get("/.well-known/openid-configuration").await),
        "public, max-age=60"
    );
    // Even once the change is due and the new set not yet published: a floor, never no-cache.
    api.set_now(NOW + 1001);
    assert_eq!(
        cache(&api.get("/openid/v1/jwks").await),
        "public, max-age=60"
    );
}

#[tokio::test]
async fn kubernetes_discovery() {
    let api = api();
    let r = api.get("/apis/warrant.dev/v1alpha1").await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.json["kind"], "APIResourceList");
    assert_eq!(r.json["groupVersion"], "warrant.dev/v1alpha1");
    let names: Vec<&str> = r.json["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["serviceaccounts", "serviceaccounts/token", "tokenreviews"]
    );
    // The subresource takes an authentication.k8s.io/v1 TokenRequest in every group, as in kube.
    assert_eq!(r.json["resources"][1]["group"], "authentication.k8s.io");
    assert_eq!(r.json["resources"][1]["version"], "v1");
    // The parent of the subresource is listed with no verbs: warrant serves none of its own.
    assert_eq!(r.json["resources"][0]["kind"], "ServiceAccount");
    assert_eq!(r.json["resources"][0]["verbs"], serde_json::json!([]));
    let r = api.get("/apis").await;
    let groups: Vec<&str> = r.json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["authentication.k8s.io", "warrant.dev"]);
    assert_eq!(
        api.get("/apis/authentication.k8s.io/v1").await.json["resources"][0]["name"],
        "tokenreviews"
    );
    assert_eq!(api.get("/api").await.json["versions"], json!(["v1"]));
    assert_eq!(api.get("/version").await.json["major"], "1");
}

#[tokio::test]
async fn health_and_metrics() {
    let api = api();
    assert_eq!(api.get("/livez").await.text, "ok");
    assert_eq!(api.get("/readyz").await.text, "ok");
    let verbose = api.get("/readyz?verbose").await.text;
    assert!(
        verbose.contains("[+]objects ok") && verbose.ends_with("readyz check passed\n"),
        "{verbose}"
    );
    // Metrics need a caller, and count what happened.
    assert_eq!(api.get("/metrics").await.code, StatusCode::UNAUTHORIZED);
    api.token("app", json!({})).await;
    let r = api
        .send(
            http::Request::builder()
                .uri("/metrics")
                .header("authorization", format!("Bearer {ADMIN}"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK);
    assert!(
        r.text
            .contains(r#"warrant_tokens_issued_total{binding="none"} 1"#),
        "{}",
        r.text
    );
    assert!(
        r.text.contains(
            r#"warrant_http_requests_total{route="tokenrequest",method="POST",code="201"} 1"#
        ),
        "{}",
        r.text
    );
    // The process's own figures, under the names every Prometheus client library uses.
    for name in [
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(
            r.text.lines().any(|l| l.starts_with(name)),
            "{name}missing:\n{}",
            r.text
        );
    }
}

/// `/version` says what was built, as kube-apiserver does: the git commit (and its date), and
/// the platform in Go's names, which kubectl shows.
#[tokio::test]
async fn version_names_the_build() {
    let api = api();
    let version = api.get("/version").await.json;
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    match head {
        // Built from this checkout: its commit (the build script reruns when HEAD moves).
        Some(head) => {
            assert_eq!(version["gitCommit"], head.as_str());
            assert!(
                version["buildDate"].as_str().unwrap().ends_with('Z'),
                "{version}"
            );
            // kube's two values (the tree may have changed since the build, so not which).
            assert!(
                ["clean", "dirty"].contains(&version["gitTreeState"].as_str().unwrap()),
                "{version}"
            );
        }
        None => assert_eq!(version["gitCommit"], ""),
    }
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(
        version["platform"],
        format!("{}/{arch}", std::env::consts::OS).as_str()
    );
}

/// Named checks, as kube-apiserver has them: each alone at `/readyz/NAME` and `/livez/NAME`,
/// `?exclude=NAME`, and readiness failing from the start of shutdown while requests are served.
#[tokio::test]
async fn named_health_checks_and_shutdown() {
    let api = api();
    for path in [
        "/readyz/shutdown",
        "/readyz/objects",
        "/livez/ping",
        "/livez/keys",
    ] {
        let r = api.get(path).await;
        assert_eq!((r.code, r.text.as_str()), (StatusCode::OK, "ok"), "{path}");
    }
    assert_eq!(api.get("/readyz/nothing").await.code, StatusCode::NOT_FOUND);
    let live = api.get("/livez?verbose").await.text;
    assert_eq!(live, "[+]ping ok\n[+]keys ok\nlivez check passed\n");

    api.state.begin_shutdown();
    // Anonymous callers (probes) learn which check fails, in kube-apiserver's words; callers
    // who authenticated learn why.
    let r = api.get("/readyz").await;
    assert_eq!(r.code, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        r.text.starts_with("[-]shutdown failed: reason withheld\n")
            && r.text.ends_with("readyz check failed\n"),
        "{}",
        r.text
    );
    let r = api.get("/readyz/shutdown").await;
    assert_eq!(
        (r.code, r.text.as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "internal server error: reason withheld"
        )
    );
    let admin = format!("Bearer {ADMIN}");
    let r = api
        .get_with("/readyz/shutdown", &[("authorization", &admin)])
        .await;
    assert_eq!(
        (r.code, r.text.as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "internal server error: the server is shutting down"
        )
    );
    let r = api
        .get_with("/readyz?verbose", &[("authorization", &admin)])
        .await;
    assert!(
        r.text
            .starts_with("[-]shutdown failed: the server is shutting down\n")
            && r.text.ends_with("readyz check failed\n"),
        "{}",
        r.text
    );
    let r = api.get("/readyz?verbose&exclude=shutdown").await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.text);
    assert!(
        r.text.starts_with("[+]shutdown excluded: ok\n"),
        "{}",
        r.text
    );
    // Still serving: liveness holds and tokens are issued.
    assert_eq!(api.get("/livez").await.text, "ok");
    assert_eq!(api.token("app", json!({})).await.code, StatusCode::CREATED);
}

#[tokio::test]
async fn degraded_components_are_reported_without_failing_readiness() {
    let api = api();
    let state = std::sync::Arc::new(std::sync::Mutex::new("ok".to_owned()));
    let report = state.clone();
    api.state
        .add_report("key-store", move || report.lock().unwrap().clone());
    // Reported to callers who authenticated; anonymous ones see the checks alone.
    let admin = format!("Bearer {ADMIN}");
    let verbose = async || {
        api.get_with("/readyz?verbose", &[("authorization", &admin)])
            .await
    };
    assert!(verbose().await.text.contains("[+]key-store ok\n"));
    *state.lock().unwrap() = "stale since 2027-01-15T08:00:00Z: the store is down".into();
    let anonymous = api.get("/readyz?verbose").await.text;
    assert!(!anonymous.contains("key-store"), "{anonymous}");
    let reply = verbose().await;
    assert_eq!(reply.code, StatusCode::OK);
    assert!(
        reply
            .text
            .contains("[+]key-store stale since 2027-01-15T08:00:00Z: the store is down\n")
            && reply.text.ends_with("readyz check passed\n"),
        "{}",
        reply.text
    );
    assert_eq!(api.get("/readyz").await.text, "ok");
}
