//! Publishing against real storage: moto's standalone S3 server on loopback (behind a proxy the
//! test switches off to take the "bucket" down), Azurite's Azure Blob service, and a directory.
//! Google Cloud Storage has no emulator this project can install (fake-gcs-server is a Go
//! program, on none of its registries), so the gs:// target is tested only as far as its URL. Key schedules are stepped
//! with explicit times (the lifecycle's pure functions) where the network is involved, and on
//! Tokio's paused clock for the publisher's own task on a directory.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::task::AbortOnDropHandle;
use warrant_clock::Clock;
use warrant_issuer::{Published, Settings};
use warrant_keys::{KeySet, ManagedKeySet, RotationPolicy};
use warrant_publish::{PublishMetrics, Publisher, Target, kids};
use warrant_testkit::tools;
use warrant_token::{Binding, Claims, ExpirationPolicy, KeyType, NewToken, ObjectRef, SigningKey};

const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;
const ISSUER: &str = "https://oidc.test/cluster-a";

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

fn policy() -> RotationPolicy {
    RotationPolicy {
        key_type: KeyType::P256,
        rotation_period_seconds: 7 * DAY,
        publish_ahead_seconds: DAY,
        max_token_seconds: DAY,
    }
}

fn settings() -> Settings {
    Settings {
        issuers: vec![ISSUER.into()],
        api_audiences: vec![ISSUER.into()],
        jwks_uri: format!("{ISSUER}/openid/v1/jwks"),
        expiration: ExpirationPolicy::default(),
        signature_cache_entries: 16,
    }
}

fn published(keys: &ManagedKeySet, now: i64) -> Published {
    let set: KeySet = keys.key_set_at(at(now), &policy()).unwrap();
    Published::new(&settings(), set)
}

fn rotated(keys: &ManagedKeySet, now: i64) -> ManagedKeySet {
    keys.rotate(&policy(), at(now), SigningKey::generate)
        .unwrap()
        .unwrap_or_else(|| keys.clone())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A storage server for the tests (moto, Azurite): a process on a free loopback port, in a
/// temporary directory of its own; killed when dropped.
struct Emulator {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Emulator {
    /// Starts `program` (`what` names it) with the arguments `args` gives for its port and
    /// directory, and waits until it listens (moto takes a second or two to import).
    async fn start(
        program: &str,
        what: &str,
        args: impl FnOnce(u16, &Path) -> Vec<String>,
    ) -> Emulator {
        let mut command = tools::command(program, what);
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = command
            .args(args(port, dir.path()))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let emulator = Emulator {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..300 {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return emulator;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{program} did not start on port {port}");
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// moto's S3 server.
struct Moto {
    server: Emulator,
}

impl Moto {
    async fn start() -> Moto {
        let server = Emulator::start(
            "moto_server",
            "moto's S3 server (moto_server)",
            |port, _| {
                vec![
                    "-H".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    port.to_string(),
                ]
            },
        )
        .await;
        Moto { server }
    }

    fn port(&self) -> u16 {
        self.server.port
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port())
    }

    async fn create_bucket(&self, bucket: &str) {
        let response = reqwest::Client::new()
            .put(self.url(&format!("/{bucket}")))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{:?}", response.status());
        // Public read, as docs/discovery.md has the operator set it.
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{bucket}/*"}}]}}"#
        );
        let response = reqwest::Client::new()
            .put(self.url(&format!("/{bucket}?policy")))
            .body(policy)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{:?}", response.status());
    }

    /// An object as a relying party reads it: (bytes, content type, cache control).
    async fn get(&self, key: &str) -> (Vec<u8>, String, String) {
        read_anonymously(&self.url(&format!("/bucket/{key}"))).await
    }
}

/// An object read as a relying party reads it, without credentials: (bytes, content type,
/// cache control).
async fn read_anonymously(url: &str) -> (Vec<u8>, String, String) {
    let response = reqwest::get(url).await.unwrap();
    assert!(
        response.status().is_success(),
        "{url}: {:?}",
        response.status()
    );
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (content_type, cache_control) = (header("content-type"), header("cache-control"));
    (
        response.bytes().await.unwrap().to_vec(),
        content_type,
        cache_control,
    )
}

/// A TCP proxy to moto that the test turns off (connection refused, open connections cut)
/// and on again: the bucket "down" with its contents kept.
struct Proxy {
    port: u16,
    upstream: u16,
    task: Option<AbortOnDropHandle<()>>,
}

impl Proxy {
    async fn start(upstream: u16) -> Proxy {
        let mut proxy = Proxy {
            port: free_port(),
            upstream,
            task: None,
        };
        proxy.up().await;
        proxy
    }

    async fn up(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        let upstream = self.upstream;
        self.task = Some(AbortOnDropHandle::new(tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", upstream)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        })));
    }

    fn down(&mut self) {
        self.task = None;
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn s3_target(endpoint: &str) -> Target {
    Target::open(
        "s3://bucket/cluster-a",
        Some(endpoint),
        &[
            ("aws_access_key_id".into(), "testing".into()),
            ("aws_secret_access_key".into(), "testing".into()),
            ("aws_region".into(), "us-east-1".into()),
        ],
    )
    .unwrap()
}

fn metric(registry: &Registry, name: &str) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text.lines()
        .filter(|l| l.starts_with(name))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A relying party's view: discovery and JWKS fetched from the bucket's URL (the issuer's host
/// mapped to it, as a CDN would), the token verified with PyJWT.
fn relying_party_verifies(bucket_base: &str, token: &str, now: i64) {
    const SCRIPT: &str = r#"
import json, sys, urllib.request, jwt
issuer, base, token, now = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def fetch(url):
    return json.loads(urllib.request.urlopen(url.replace("https://oidc.test", base, 1)).read())
discovery = json.loads(json.dumps(fetch(issuer + "/.well-known/openid-configuration")))
assert discovery["issuer"] == issuer, discovery
jwks = fetch(discovery["jwks_uri"])
kid = jwt.get_unverified_header(token)["kid"]
key = [k for k in jwks["keys"] if k["kid"] == kid][0]
claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=[key["alg"]], audience="sts.test",
                    issuer=issuer, options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
assert claims["iat"] <= now < claims["exp"], (claims, now)
print(claims["sub"])
"#;
    let out = tools::python(&["jwt"])
        .args(["-c", SCRIPT, ISSUER, bucket_base, token, &now.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "PyJWT refused the token: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "system:serviceaccount:demo:app"
    );
}

fn token(keys: &ManagedKeySet, now: i64) -> (String, String) {
    let key = keys.active_at(at(now)).unwrap().key().clone();
    let claims = Claims::new(NewToken {
        issuer: ISSUER,
        namespace: "demo",
        service_account: ObjectRef::new("app", "uid-1"),
        audiences: vec!["sts.test".into()],
        binding: Binding::None,
        issued_at: now,
        expires_at: now + 3600,
        warn_after: None,
        jti: String::new(),
    });
    (key.sign(&claims).unwrap(), key.kid().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_lists_each_key_before_it_signs_and_is_restored_when_overwritten() {
    let moto = Moto::start().await;
    moto.create_bucket("bucket").await;
    let mut proxy = Proxy::start(moto.port()).await;
    let metrics = PublishMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut publisher = Publisher::new(
        vec![s3_target(&proxy.endpoint())],
        ISSUER,
        &format!("{ISSUER}/openid/v1/jwks"),
        metrics,
    )
    .unwrap();
    let gate = publisher.gate();
    let health = publisher.health();
    let policy = policy();
    let lead = policy.gate_lead_seconds();

    // The first key: the objects are exactly what warrant serves, with its headers.
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let a = keys.keys()[0].kid().to_owned();
    let served = published(&keys, T0);
    publisher.round(&served, at(T0), true).await.unwrap();
    let (discovery, content_type, cache_control) =
        moto.get("cluster-a/.well-known/openid-configuration").await;
    assert_eq!(discovery, served.discovery().unwrap().to_vec());
    assert_eq!(content_type, "application/json");
    assert_eq!(
        cache_control,
        served.cache_control(at(T0)).to_str().unwrap()
    );
    let (jwks, content_type, cache_control) = moto.get("cluster-a/openid/v1/jwks").await;
    assert_eq!(jwks, served.jwks().to_vec());
    assert_eq!(content_type, "application/json");
    assert_eq!(cache_control, "public, max-age=3600");
    assert_eq!(*gate.borrow(), BTreeSet::from([a.clone()]));
    let (first_token, _) = token(&keys, T0 + 60);
    relying_party_verifies(&moto.url("/bucket"), &first_token, T0 + 60);

    // Unchanged bytes are not written again.
    let written = metric(&registry, "warrant_publish_written_bytes_total");
    publisher.round(&served, at(T0 + 60), true).await.unwrap();
    assert_eq!(
        metric(&registry, "warrant_publish_written_bytes_total"),
        written
    );

    // Someone overwrites the JWKS: the next round restores it.
    use object_store::ObjectStoreExt as _;
    s3_target(&moto.url(""))
        .store()
        .put(
            &"cluster-a/openid/v1/jwks".into(),
            object_store::PutPayload::from_static(br#"{"keys":[]}"#),
        )
        .await
        .unwrap();
    assert_eq!(
        moto.get("cluster-a/openid/v1/jwks").await.0,
        br#"{"keys":[]}"#
    );
    publisher.round(&served, at(T0 + 120), true).await.unwrap();
    assert_eq!(
        moto.get("cluster-a/openid/v1/jwks").await.0,
        served.jwks().to_vec()
    );
    assert_ne!(
        metric(&registry, "warrant_publish_written_bytes_total"),
        written
    );

    // Rotation: the successor is in the bucket as soon as it is published, so the gate lets it
    // sign on time, and a relying party verifies its tokens from the bucket.
    let keys = rotated(&keys, T0 + 6 * DAY);
    let b = keys.keys()[1].kid().to_owned();
    let served = published(&keys, T0 + 6 * DAY);
    publisher
        .round(&served, at(T0 + 6 * DAY), true)
        .await
        .unwrap();
    assert!(kids(&moto.get("cluster-a/openid/v1/jwks").await.0).contains(&b));
    assert!(gate.borrow().contains(&b));
    let listed = gate.borrow().clone();
    assert!(
        keys.hold_unlisted(&policy, at(T0 + 7 * DAY - lead), |kid| listed.contains(kid))
            .is_none()
    );
    let served = published(&keys, T0 + 7 * DAY);
    publisher
        .round(&served, at(T0 + 7 * DAY), true)
        .await
        .unwrap();
    let (second_token, kid) = token(&keys, T0 + 7 * DAY);
    assert_eq!(kid, b);
    relying_party_verifies(&moto.url("/bucket"), &second_token, T0 + 7 * DAY);
    // A token of the retired key still verifies from the bucket.
    let (old_token, _) = token(&keys, T0 + 7 * DAY - 1);
    relying_party_verifies(&moto.url("/bucket"), &old_token, T0 + 7 * DAY);

    // The bucket goes down before the next key is published: it cannot be listed, so the gate
    // holds it and the key in force signs on; readiness and metrics say why.
    proxy.down();
    let keys = rotated(&keys, T0 + 13 * DAY);
    let c = keys.keys().last().unwrap().kid().to_owned();
    let served = published(&keys, T0 + 13 * DAY);
    let error = publisher
        .round(&served, at(T0 + 13 * DAY), true)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "read", "{error}");
    assert!(!gate.borrow().contains(&c));
    let failure = health.borrow().failure().unwrap();
    assert!(
        failure.contains("s3://bucket/cluster-a failing since"),
        "{failure}"
    );
    assert!(
        metric(&registry, "warrant_publish_failures_total").contains(r#"reason="read""#),
        "{}",
        metric(&registry, "warrant_publish_failures_total")
    );
    let listed = gate.borrow().clone();
    let (held, holds) = keys
        .hold_unlisted(&policy, at(T0 + 14 * DAY - lead), |kid| {
            listed.contains(kid)
        })
        .unwrap();
    assert_eq!(holds[0].kid, c);
    assert_eq!(held.active_at(at(T0 + 14 * DAY)).unwrap().kid(), b);

    // It comes back: the next round catches up, the gate lists the key, and it signs at the
    // held time.
    proxy.up().await;
    let served = published(&held, T0 + 14 * DAY - lead + 10);
    publisher
        .round(&served, at(T0 + 14 * DAY - lead + 10), true)
        .await
        .unwrap();
    assert!(health.borrow().failure().is_none());
    assert!(gate.borrow().contains(&c));
    let listed = gate.borrow().clone();
    assert!(
        held.hold_unlisted(&policy, at(T0 + 14 * DAY), |kid| listed.contains(kid))
            .is_none()
    );
    let signs_at = T0 + 14 * DAY + lead;
    assert_eq!(held.active_at(at(signs_at)).unwrap().kid(), c);
    let served = published(&held, signs_at);
    publisher.round(&served, at(signs_at), true).await.unwrap();
    assert_eq!(
        moto.get("cluster-a/openid/v1/jwks").await.0,
        served.jwks().to_vec()
    );
    let (third_token, _) = token(&held, signs_at);
    relying_party_verifies(&moto.url("/bucket"), &third_token, signs_at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_does_not_write_only_checks() {
    let moto = Moto::start().await;
    moto.create_bucket("bucket").await;
    let target = s3_target(&moto.url(""));
    let jwks_uri = format!("{ISSUER}/openid/v1/jwks");
    let mut follower = Publisher::new(
        vec![target.clone()],
        ISSUER,
        &jwks_uri,
        PublishMetrics::new(),
    )
    .unwrap();
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    let error = follower.round(&served, at(T0), false).await.unwrap_err();
    assert_eq!(error.reason(), "missing", "{error}");
    // Nothing was written by the follower.
    let missing = reqwest::get(moto.url("/bucket/cluster-a/openid/v1/jwks"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let mut writer =
        Publisher::new(vec![target], ISSUER, &jwks_uri, PublishMetrics::new()).unwrap();
    writer.round(&served, at(T0), true).await.unwrap();
    follower.round(&served, at(T0), false).await.unwrap();
}

fn read(dir: &Path, key: &str) -> Vec<u8> {
    std::fs::read(dir.join(key)).unwrap()
}

/// A directory: the same documents at the issuer's paths, written by rename (never half a
/// file, no temporary left), kept current by the publisher's task on a paused clock, restored
/// when overwritten; dropping the task stops it.
#[tokio::test(start_paused = true)]
async fn a_directory_is_kept_current_by_the_task_until_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let target = Target::open(&url, None, &[]).unwrap();
    let publisher = Publisher::new(
        vec![target],
        ISSUER,
        &format!("{ISSUER}/openid/v1/jwks"),
        PublishMetrics::new(),
    )
    .unwrap();
    let gate = publisher.gate();
    let mut health = publisher.health();
    let clock = Clock::manual(at(T0));
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let (feed, feed_rx) = watch::channel(Arc::new(published(&keys, T0)));
    let task = publisher.spawn(feed_rx, warrant_keys::Writer::Always, clock.clone());
    health
        .wait_for(|h| h.targets[0].last_success.is_some())
        .await
        .unwrap();
    let discovery = "cluster-a/.well-known/openid-configuration";
    let jwks = "cluster-a/openid/v1/jwks";
    assert_eq!(
        read(dir.path(), discovery),
        feed.borrow().discovery().unwrap().to_vec()
    );
    assert_eq!(read(dir.path(), jwks), feed.borrow().jwks().to_vec());
    let names: Vec<String> = std::fs::read_dir(dir.path().join("cluster-a/openid/v1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["jwks".to_owned()],
        "no temporary file is left behind"
    );

    // Overwritten: restored within the re-check interval.
    std::fs::write(dir.path().join(jwks), b"{}").unwrap();
    tokio::time::sleep(warrant_publish::RECHECK + Duration::from_secs(1)).await;
    health.mark_unchanged();
    health.changed().await.ok();
    assert_eq!(read(dir.path(), jwks), feed.borrow().jwks().to_vec());
    // Overwritten with an object too large to be the document: rewritten without being read.
    std::fs::write(dir.path().join(jwks), vec![b' '; 2 * 1024 * 1024]).unwrap();
    tokio::time::sleep(warrant_publish::RECHECK + Duration::from_secs(1)).await;
    health.mark_unchanged();
    health.changed().await.ok();
    assert_eq!(read(dir.path(), jwks), feed.borrow().jwks().to_vec());

    // A rotation reaches the directory and the gate.
    let keys = rotated(&keys, T0 + 6 * DAY);
    let b = keys.keys()[1].kid().to_owned();
    clock.set(at(T0 + 6 * DAY));
    feed.send_replace(Arc::new(published(&keys, T0 + 6 * DAY)));
    let mut gate_rx = gate.clone();
    gate_rx.wait_for(|kids| kids.contains(&b)).await.unwrap();
    assert_eq!(read(dir.path(), jwks), feed.borrow().jwks().to_vec());

    // Dropped: nothing restores the file any more.
    drop(task);
    std::fs::write(dir.path().join(jwks), b"{}").unwrap();
    tokio::time::sleep(3 * warrant_publish::RECHECK).await;
    assert_eq!(read(dir.path(), jwks), b"{}");
}

/// Azurite's Blob service (npm's `azurite`, Microsoft's Azure Storage emulator). Its one
/// account is the emulator's well-known `devstoreaccount1`, addressed path-style.
struct Azurite {
    server: Emulator,
}

/// The emulator's published account key (the same in every Azurite and in Microsoft's docs).
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

impl Azurite {
    async fn start() -> Azurite {
        let server = Emulator::start(
            "azurite-blob",
            "Azurite, Microsoft's Azure Storage emulator (azurite-blob)",
            |port, dir| {
                let mut args: Vec<String> = ["--blobHost", "127.0.0.1", "--blobPort"]
                    .map(str::to_owned)
                    .into();
                args.push(port.to_string());
                args.push("--location".into());
                args.push(dir.display().to_string());
                args.extend(["--silent".into(), "--skipApiVersionCheck".into()]);
                args
            },
        )
        .await;
        Azurite { server }
    }

    /// The account's URL, as the emulator serves it.
    fn account_url(&self) -> String {
        format!("http://127.0.0.1:{}/devstoreaccount1", self.server.port)
    }

    /// Creates `container` with anonymous read of its blobs, as docs/discovery.md has the
    /// operator set it, with Microsoft's Python SDK (not object_store, which warrant uses).
    fn create_public_container(&self, container: &str) {
        const SCRIPT: &str = r#"
import sys
from azure.storage.blob import BlobServiceClient
account_url, key, container = sys.argv[1], sys.argv[2], sys.argv[3]
service = BlobServiceClient(account_url, credential={"account_name": "devstoreaccount1", "account_key": key})
service.create_container(container, public_access="blob")
"#;
        let out = tools::python(&["azure.storage.blob"])
            .args(["-c", SCRIPT, &self.account_url(), AZURITE_KEY, container])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "creating the container: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// An Azure target for `az://<container>/cluster-a` on this emulator, with the account's key
    /// (in production the `AZURE_*` environment or a managed identity gives the credential).
    fn target(&self, container: &str) -> Target {
        Target::open(
            &format!("az://{container}/cluster-a"),
            None,
            &[
                (
                    "azure_storage_account_name".into(),
                    "devstoreaccount1".into(),
                ),
                ("azure_storage_account_key".into(), AZURITE_KEY.into()),
                ("azure_storage_endpoint".into(), self.account_url()),
                ("azure_allow_http".into(), "true".into()),
            ],
        )
        .unwrap()
    }

    /// A blob as a relying party reads it, anonymously: (bytes, content type, cache control).
    async fn get(&self, container: &str, name: &str) -> (Vec<u8>, String, String) {
        read_anonymously(&format!("{}/{container}/{name}", self.account_url())).await
    }
}

/// Azure Blob Storage, through Azurite: the documents land with warrant's bytes and headers, a
/// relying party verifies a token from them anonymously (PyJWT), an overwritten JWKS is
/// restored, a rotation's successor is listed before it signs, and a follower only checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_container_holds_the_documents_a_relying_party_reads() {
    let azurite = Azurite::start().await;
    azurite.create_public_container("oidc");
    let metrics = PublishMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let jwks_uri = format!("{ISSUER}/openid/v1/jwks");
    let mut follower = Publisher::new(
        vec![azurite.target("oidc")],
        ISSUER,
        &jwks_uri,
        PublishMetrics::new(),
    )
    .unwrap();
    let mut publisher =
        Publisher::new(vec![azurite.target("oidc")], ISSUER, &jwks_uri, metrics).unwrap();
    let gate = publisher.gate();

    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    // Before anyone wrote: the follower finds nothing, and writes nothing.
    let error = follower.round(&served, at(T0), false).await.unwrap_err();
    assert_eq!(error.reason(), "missing", "{error}");

    publisher.round(&served, at(T0), true).await.unwrap();
    let (discovery, content_type, cache_control) = azurite
        .get("oidc", "cluster-a/.well-known/openid-configuration")
        .await;
    assert_eq!(discovery, served.discovery().unwrap().to_vec());
    assert_eq!(content_type, "application/json");
    assert_eq!(
        cache_control,
        served.cache_control(at(T0)).to_str().unwrap()
    );
    let (jwks, content_type, cache_control) = azurite.get("oidc", "cluster-a/openid/v1/jwks").await;
    assert_eq!(jwks, served.jwks().to_vec());
    assert_eq!(content_type, "application/json");
    assert_eq!(cache_control, "public, max-age=3600");
    follower.round(&served, at(T0), false).await.unwrap();
    let (first_token, _) = token(&keys, T0 + 60);
    relying_party_verifies(
        &format!("{}/oidc", azurite.account_url()),
        &first_token,
        T0 + 60,
    );

    // Unchanged bytes are not written again; an overwritten JWKS is restored.
    let written = metric(&registry, "warrant_publish_written_bytes_total");
    publisher.round(&served, at(T0 + 60), true).await.unwrap();
    assert_eq!(
        metric(&registry, "warrant_publish_written_bytes_total"),
        written
    );
    use object_store::ObjectStoreExt as _;
    azurite
        .target("oidc")
        .store()
        .put(
            &"cluster-a/openid/v1/jwks".into(),
            object_store::PutPayload::from_static(br#"{"keys":[]}"#),
        )
        .await
        .unwrap();
    publisher.round(&served, at(T0 + 120), true).await.unwrap();
    assert_eq!(
        azurite.get("oidc", "cluster-a/openid/v1/jwks").await.0,
        served.jwks().to_vec()
    );

    // Rotation: the successor is listed in the container once published, so the gate lets it
    // sign on time, and its tokens verify from the container.
    let keys = rotated(&keys, T0 + 6 * DAY);
    let b = keys.keys()[1].kid().to_owned();
    let served = published(&keys, T0 + 6 * DAY);
    publisher
        .round(&served, at(T0 + 6 * DAY), true)
        .await
        .unwrap();
    assert!(kids(&azurite.get("oidc", "cluster-a/openid/v1/jwks").await.0).contains(&b));
    assert!(gate.borrow().contains(&b));
    let served = published(&keys, T0 + 7 * DAY);
    publisher
        .round(&served, at(T0 + 7 * DAY), true)
        .await
        .unwrap();
    let (second_token, kid) = token(&keys, T0 + 7 * DAY);
    assert_eq!(kid, b);
    relying_party_verifies(
        &format!("{}/oidc", azurite.account_url()),
        &second_token,
        T0 + 7 * DAY,
    );
}
