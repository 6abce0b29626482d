//! Managed keys in a Kubernetes Secret, end to end: two real `warrant serve` processes share
//! one Secret on the loopback Kubernetes fixture (objects from a manifest file, so the cluster
//! holds only the keys and the Lease). Only the replica holding the Lease writes; both serve the
//! same keys; when the leader goes, the other takes over; and a replica cut off from the API
//! server goes on serving its keys and says so. A revoked key stays revoked when the Secret is
//! put back to its contents from before the revocation.

use std::ffi::OsString;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use warrant_kube_fixture::{Fixture, ResourceType};

use crate::support::*;
use crate::tokens::OBJECTS;

const SECRET: &str = "warrant/warrant-keys";
const SECRET_PATH: &str = "/api/v1/namespaces/warrant/secrets/warrant-keys";

async fn cluster() -> Fixture {
    let cluster = Fixture::start().await.unwrap();
    cluster.register(ResourceType::of::<Lease>());
    cluster
}

/// The key flags of a replica: the Secret on `cluster`, and a Lease short enough that a
/// hand-over after a replica dies takes seconds, yet renewed 3 s before it expires, so that no
/// scheduling delay on a loaded machine lets it lapse while its holder runs.
fn secret_keys(cluster: &Fixture) -> impl FnOnce(&Path) -> Vec<OsString> + '_ {
    move |dir| {
        let kubeconfig = dir.join("cluster.kubeconfig");
        cluster.write_kubeconfig(&kubeconfig).unwrap();
        vec![
            "--kubeconfig".into(),
            kubeconfig.into(),
            "--key-secret".into(),
            SECRET.into(),
            "--key-lease-duration".into(),
            "9s".into(),
        ]
    }
}

/// `warrant keys generate --key-secret`, as an operator creates the keys ahead (ES256: quick).
fn generate(cluster: &Fixture) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let args: [OsString; 8] = [
        "keys".into(),
        "generate".into(),
        "--key-secret".into(),
        SECRET.into(),
        "--kubeconfig".into(),
        kubeconfig.into_os_string(),
        "--key-algorithm".into(),
        "ES256".into(),
    ];
    warrant_ok(&args);
}

fn secret(cluster: &Fixture) -> Secret {
    cluster.get::<Secret>("warrant", "warrant-keys").unwrap()
}

/// Moves every key's schedule `seconds` into the past, as if the Secret had been written that
/// long ago: a rotation becomes due (the test cannot move the servers' clocks).
fn age_keys(cluster: &Fixture, seconds: i64) {
    age_secret(cluster, "warrant", "warrant-keys", seconds);
}

/// [`age_keys`] for the key Secret `namespace/name`.
pub(crate) fn age_secret(cluster: &Fixture, namespace: &str, name: &str, seconds: i64) {
    let mut secret = cluster.get::<Secret>(namespace, name).unwrap();
    let data = secret.data.as_mut().unwrap();
    let aged = aged_index(&data["keys.json"].0, seconds);
    data.insert("keys.json".into(), ByteString(aged));
    cluster.update(&secret).unwrap();
}

/// A key index (`keys.json`) with every key's schedule moved `seconds` into the past.
pub(crate) fn aged_index(index: &[u8], seconds: i64) -> Vec<u8> {
    let mut index: Value = serde_json::from_slice(index).unwrap();
    for key in index["keys"].as_array_mut().unwrap() {
        for field in ["publishedAt", "activateAt"] {
            let at: jiff::Timestamp = key[field].as_str().unwrap().parse().unwrap();
            key[field] = json!((at - jiff::SignedDuration::from_secs(seconds)).to_string());
        }
    }
    serde_json::to_vec_pretty(&index).unwrap()
}

fn lease_holder(cluster: &Fixture) -> Option<String> {
    cluster
        .get::<Lease>("warrant", "warrant-keys-leader")?
        .spec?
        .holder_identity
}

fn written_by(cluster: &Fixture) -> String {
    secret(cluster).metadata.annotations.unwrap()["warrant.dev/written-by"].clone()
}

/// The replaces warrant sent to the Secret.
fn replaces(cluster: &Fixture) -> usize {
    cluster
        .request_log()
        .iter()
        .filter(|r| r.starts_with(&format!("PUT {SECRET_PATH}?")))
        .count()
}

/// The kids of the JWKS a replica serves, in its order.
async fn jwks(w: &Warrant) -> Vec<String> {
    let (code, text) = w.get_text("/openid/v1/jwks").await;
    assert_eq!(code, 200);
    let jwks: Value = serde_json::from_str(&text).unwrap();
    jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls until `check` holds on what the replica answers, with a safety net.
async fn until(w: &Warrant, what: &str, path: &str, check: impl Fn(u16, &str) -> bool) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (code, text) = w.get_text(path).await;
        if check(code, &text) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}; last answer {code}: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn until_jwks(w: &Warrant, what: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let kids = jwks(w).await;
        if check(&kids) {
            return kids;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}; last JWKS {kids:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

// Multi-threaded: kubectl and the warrant CLI run synchronously on the test thread while the
// fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_a_key_secret_and_only_the_lease_holder_writes_it() {
    let cluster = cluster().await;
    generate(&cluster);
    // The first key has signed for six days and a minute: its successor is due.
    age_keys(&cluster, 6 * 86400 + 60);
    let first = jwks_of_secret(&cluster);

    let a = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    let b = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;

    // A came first and took the Lease; it creates the successor, and both publish it.
    let rotated = until_jwks(&a, "the leader publishes the successor", |k| k.len() == 2).await;
    assert_eq!(rotated[0], first[0]);
    until_jwks(&b, "the follower publishes the same keys", |k| k == rotated).await;
    let leader = lease_holder(&cluster).expect("a replica holds the Lease");
    assert_eq!(written_by(&cluster), leader);
    assert_eq!(replaces(&cluster), 1, "one write, by the leader alone");
    let (_, text) = a.get_text("/metrics").await;
    assert!(text.contains("\nwarrant_keys_leader 1\n"), "{text}");
    let (_, text) = b.get_text("/metrics").await;
    assert!(text.contains("\nwarrant_keys_leader 0\n"), "{text}");
    let (code, verbose) = a.get_text("/readyz?verbose").await;
    assert_eq!(code, 200);
    assert!(
        verbose.contains("[+]key-store ok, last read at ")
            && verbose.contains(&format!(
                "[+]key-lease leading (warrant/warrant-keys-leader as {leader})"
            )),
        "{verbose}"
    );
    let (_, verbose) = b.get_text("/readyz?verbose").await;
    assert!(verbose.contains("[+]key-lease following ("), "{verbose}");

    // Tokens of either replica verify with the other's keys.
    let token = a.token(&["--audience", "vault"]);
    let kid = jsonwebtoken::decode_header(&token).unwrap().kid.unwrap();
    assert_eq!(
        kid, first[0],
        "the successor signs only after publish-ahead"
    );
    assert!(jwks(&b).await.contains(&kid));

    // The leader goes away without a word; the follower takes the Lease once it expires, and
    // the next change is its to make: a week later, the first key goes and a third comes.
    drop(a);
    until(&b, "the follower takes the Lease", "/metrics", |_, text| {
        text.contains("\nwarrant_keys_leader 1\n")
    })
    .await;
    let new_leader = lease_holder(&cluster).unwrap();
    assert_ne!(new_leader, leader);
    age_keys(&cluster, 7 * 86400);
    let third = until_jwks(&b, "the new leader rotates", |k| {
        k.len() == 2 && k[0] == rotated[1]
    })
    .await;
    assert!(
        !third.contains(&first[0]),
        "the first key's tokens expired: removed"
    );
    assert_eq!(written_by(&cluster), new_leader);
}

/// The kids in the Secret's index, in order.
fn jwks_of_secret(cluster: &Fixture) -> Vec<String> {
    key_index_kids(&secret(cluster).data.unwrap()["keys.json"].0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_the_api_server_keeps_serving_its_keys_and_says_so() {
    let mut cluster = cluster().await;
    let a = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    let b = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    // The first replica created the Secret and its first key at its first start.
    let keys = jwks(&a).await;
    assert_eq!(keys.len(), 1);
    assert_eq!(jwks(&b).await, keys);

    cluster.stop().await;
    for w in [&a, &b] {
        until(
            w,
            "the replica reports its key store stale",
            "/readyz?verbose",
            |code, text| {
                code == 200
                    && text.contains("[+]key-store stale since ")
                    && text.contains("Kubernetes Secret warrant/warrant-keys: unavailable")
            },
        )
        .await;
        let (_, text) = w.get_text("/metrics").await;
        assert!(
            text.contains(r#"warrant_keys_store_errors_total{operation="load"}"#)
                && !text.contains("warrant_keys_store_stale_since_timestamp_seconds 0\n"),
            "{text}"
        );
        // Still ready, still serving the same keys, still issuing.
        assert_eq!(w.get_text("/readyz").await, (200, "ok".to_owned()));
        assert_eq!(jwks(w).await, keys);
    }
    let token = b.token(&["--audience", "vault"]);
    assert_eq!(
        jsonwebtoken::decode_header(&token).unwrap().kid.unwrap(),
        keys[0]
    );
    assert_eq!(b.review(&token, &["vault"])["authenticated"], true);

    // The API server is back: the watches resume and the reports clear by themselves.
    cluster.restart().await.unwrap();
    for w in [&a, &b] {
        until(
            w,
            "the key store answers again",
            "/readyz?verbose",
            |_, text| text.contains("[+]key-store ok, last read at "),
        )
        .await;
    }
    let (_, text) = b.get_text("/metrics").await;
    assert!(
        text.contains("warrant_keys_store_stale_since_timestamp_seconds 0\n"),
        "{text}"
    );
}

/// A key revoked in the shared Secret is refused by both replicas, each answering with the
/// reason, a signature either had remembered included; both sign with its replacement. (Each
/// replica has an issuer of its own here, its address, so each reviews its own tokens.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_replicas_refuse_a_revoked_keys_tokens() {
    let cluster = cluster().await;
    generate(&cluster);
    let a = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    let mut b = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    let kid_of = |token: &str| jsonwebtoken::decode_header(token).unwrap().kid.unwrap();
    let leaked = [
        a.token(&["--audience", "vault"]),
        b.token(&["--audience", "vault"]),
    ];
    let kid = kid_of(&leaked[0]);
    assert_eq!(
        kid_of(&leaked[1]),
        kid,
        "both replicas sign with the shared key"
    );
    for (w, token) in [(&a, &leaked[0]), (&b, &leaked[1])] {
        for _ in 0..2 {
            let review = w.review(token, &["vault"]);
            assert_eq!(review["authenticated"], true, "{review}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let out = a.warrant(&[
        "keys".as_ref(),
        "revoke".as_ref(),
        kid.as_ref(),
        "--key-secret".as_ref(),
        SECRET.as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a new key signs from now on"),
        "{}",
        stderr(&out)
    );

    let refused =
        format!("invalid signature: the key that signed this token ({kid}) has been revoked");
    let mut replacement = None;
    for (w, token) in [(&a, &leaked[0]), (&b, &leaked[1])] {
        let kids = until_jwks(w, "the revoked key out of the JWKS", |k| !k.contains(&kid)).await;
        assert_eq!(kids.len(), 1);
        assert_eq!(*replacement.get_or_insert(kids[0].clone()), kids[0]);
        assert_eq!(w.review(token, &["vault"])["error"], refused.as_str());
        // New tokens are signed by the replacement.
        let fresh = w.token(&["--audience", "vault"]);
        assert_eq!(kid_of(&fresh), kids[0]);
        assert_eq!(w.review(&fresh, &["vault"])["authenticated"], true);
    }
    // Every replica says so in its log, not only the one that writes.
    let log = b.log();
    assert!(
        log.lines()
            .any(|l| l.contains("KEY REVOKED") && l.contains(&kid)),
        "{log}"
    );
}

/// `warrant keys revoke KID --key-secret`, as the operator runs it beside the replicas.
fn revoke(cluster: &Fixture, w: &Warrant, kid: &str) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let out = w.warrant(&[
        "keys".as_ref(),
        "revoke".as_ref(),
        kid.as_ref(),
        "--key-secret".as_ref(),
        SECRET.as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The key Secret put back to its contents from before a revocation (what an etcd restore or a
/// re-applied backup does): the revoked key is listed, and signs, in the Secret again. Neither
/// replica takes it back: the Lease holder writes the revocation back over the restored
/// contents, the key never returns to either JWKS, and a token it signed never authenticates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_secret_restored_to_before_a_revocation_does_not_bring_the_key_back() {
    let cluster = cluster().await;
    generate(&cluster);
    let a = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    let b = Warrant::start_with(OBJECTS, secret_keys(&cluster), &[]).await;
    let leaked = [
        a.token(&["--audience", "vault"]),
        b.token(&["--audience", "vault"]),
    ];
    let kid = jsonwebtoken::decode_header(&leaked[0])
        .unwrap()
        .kid
        .unwrap();
    let backup = secret(&cluster);

    revoke(&cluster, &a, &kid);
    for w in [&a, &b] {
        until_jwks(w, "the revoked key out of the JWKS", |k| !k.contains(&kid)).await;
    }
    let revoked = secret(&cluster);

    // The backup goes back over the Secret, as it was before the revocation.
    let mut restored = revoked.clone();
    restored.data = backup.data.clone();
    cluster.update(&restored).unwrap();

    // The Lease holder repairs the Secret forward: the revocation is back, and the generation
    // is after both the restored one and the revocation's.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while jwks_of_secret(&cluster).contains(&kid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the restored Secret was never repaired: it lists {kid} again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let index = |s: &Secret| -> Value {
        serde_json::from_slice(&s.data.as_ref().unwrap()["keys.json"].0).unwrap()
    };
    let repaired = index(&secret(&cluster));
    assert!(
        repaired["revoked"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kid"] == kid.as_str()),
        "{repaired}"
    );
    assert!(
        repaired["generation"].as_u64() > index(&revoked)["generation"].as_u64(),
        "{repaired}"
    );
    let leader = lease_holder(&cluster).unwrap();
    assert_eq!(written_by(&cluster), leader);

    // Neither replica took the key back: not in the JWKS, and its tokens are refused by name.
    let refused =
        format!("invalid signature: the key that signed this token ({kid}) has been revoked");
    for (w, token) in [(&a, &leaked[0]), (&b, &leaked[1])] {
        assert!(!jwks(w).await.contains(&kid));
        assert_eq!(w.review(token, &["vault"])["error"], refused.as_str());
        let fresh = w.token(&["--audience", "vault"]);
        assert_ne!(
            jsonwebtoken::decode_header(&fresh).unwrap().kid.unwrap(),
            kid
        );
    }
    // The replica that writes saw the rollback, and says so: an error, a metric, an alert.
    let writer = if a.metric("warrant_keys_leader").await == 1.0 {
        &a
    } else {
        &b
    };
    let rollbacks = writer
        .metric(r#"warrant_keys_store_rollbacks_total{reason="revoked_key_listed"}"#)
        .await;
    assert!(rollbacks >= 1.0, "{rollbacks}");
}
