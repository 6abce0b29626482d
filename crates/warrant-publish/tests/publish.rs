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

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use warrant_clock::Clock;
use warrant_issuer::{Published, Settings};
use warrant_keys::{KeySet, ListedKeys, ManagedKeySet, RotationPolicy};
use warrant_publish::{Endpoint, PublishMetrics, Publisher, Target};
use warrant_testkit::servers::{Emulator, Proxy};
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
        jwks_x5c: false,
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

/// moto's S3 server, on plain HTTP or (with a serving certificate) on TLS.
struct Moto {
    server: Emulator,
    scheme: &'static str,
    /// A client that trusts the server (the test CA's, for TLS).
    client: reqwest::Client,
}

impl Moto {
    async fn start() -> Moto {
        Moto::launch(None).await
    }

    /// moto serving TLS with `certificate`, trusted by `ca` (PEM) in the test's own client.
    async fn start_tls(certificate: &warrant_testkit::Issued, ca: &str) -> Moto {
        Moto::launch(Some((certificate, ca))).await
    }

    async fn launch(tls: Option<(&warrant_testkit::Issued, &str)>) -> Moto {
        let mut client = reqwest::Client::builder();
        if let Some((_, ca)) = tls {
            let ca = reqwest::Certificate::from_pem(ca.as_bytes()).unwrap();
            client = client.tls_certs_only([ca]);
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = Emulator::start(
            "moto_server",
            "moto's S3 server (moto_server)",
            |port, dir| {
                let mut args = vec![
                    "-H".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    port.to_string(),
                ];
                if let Some((certificate, _)) = tls {
                    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
                    std::fs::write(&cert, certificate.pem()).unwrap();
                    std::fs::write(&key, certificate.key_pem()).unwrap();
                    args.extend([
                        "-c".to_owned(),
                        cert.display().to_string(),
                        "-k".to_owned(),
                        key.display().to_string(),
                    ]);
                }
                args
            },
        )
        .await;
        Moto {
            server,
            scheme,
            client: client.build().unwrap(),
        }
    }

    fn port(&self) -> u16 {
        self.server.port()
    }

    fn url(&self, path: &str) -> String {
        format!("{}://127.0.0.1:{}{path}", self.scheme, self.port())
    }

    async fn create_bucket(&self, bucket: &str) {
        let response = self
            .client
            .put(self.url(&format!("/{bucket}")))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{:?}", response.status());
        // Public read, as docs/discovery.md has the operator set it.
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{bucket}/*"}}]}}"#
        );
        let response = self
            .client
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
fn s3_target(endpoint: &str) -> Target {
    Target::open(
        "s3://bucket/cluster-a",
        &Endpoint::at(endpoint),
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

/// A publisher for `targets` at the test issuer, with metrics nobody reads.
fn publisher(targets: Vec<Target>) -> Publisher {
    Publisher::new(
        targets,
        ISSUER,
        &format!("{ISSUER}/openid/v1/jwks"),
        PublishMetrics::new(),
    )
    .unwrap()
}

/// A JWKS listing `a` as warrant renders it, and `kid` on `stranger`'s public key.
fn forged_jwks(a: &SigningKey, kid: &str, stranger: &SigningKey) -> Vec<u8> {
    let jwk = |key: &SigningKey| -> serde_json::Value {
        serde_json::from_str(key.verifying_key().jwk_json()).unwrap()
    };
    let mut forged = jwk(stranger);
    forged["kid"] = kid.into();
    serde_json::to_vec(&serde_json::json!({ "keys": [jwk(a), forged] })).unwrap()
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
    assert_eq!(
        *gate.borrow(),
        ListedKeys::of([keys.keys()[0].key().verifying_key()])
    );
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
        .unwrap()
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
    let b_key = keys.keys()[1].key().verifying_key().clone();
    let b = b_key.kid().to_owned();
    let served = published(&keys, T0 + 6 * DAY);
    publisher
        .round(&served, at(T0 + 6 * DAY), true)
        .await
        .unwrap();
    assert!(ListedKeys::from_jwks(&moto.get("cluster-a/openid/v1/jwks").await.0).lists(&b_key));
    assert!(gate.borrow().lists(&b_key));
    let listed = gate.borrow().clone();
    assert!(
        keys.hold_unlisted(&policy, at(T0 + 7 * DAY - lead), &listed)
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
    let c_key = keys.keys().last().unwrap().key().verifying_key().clone();
    let c = c_key.kid().to_owned();
    let served = published(&keys, T0 + 13 * DAY);
    let error = publisher
        .round(&served, at(T0 + 13 * DAY), true)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "read", "{error}");
    assert!(!gate.borrow().lists(&c_key));
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
        .hold_unlisted(&policy, at(T0 + 14 * DAY - lead), &listed)
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
    assert!(gate.borrow().lists(&c_key));
    let listed = gate.borrow().clone();
    assert!(
        held.hold_unlisted(&policy, at(T0 + 14 * DAY), &listed)
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
    let mut follower = publisher(vec![target.clone()]);
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    let error = follower.round(&served, at(T0), false).await.unwrap_err();
    assert_eq!(error.reason(), "missing", "{error}");
    // Nothing was written by the follower.
    let missing = reqwest::get(moto.url("/bucket/cluster-a/openid/v1/jwks"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let mut writer = publisher(vec![target]);
    writer.round(&served, at(T0), true).await.unwrap();
    follower.round(&served, at(T0), false).await.unwrap();
}

/// Headers as a bucket's writer might leave them: warrant's content type, and `extra` on top.
fn headers(
    cache_control: &str,
    extra: &[(object_store::Attribute, &'static str)],
) -> object_store::Attributes {
    let mut attributes = object_store::Attributes::new();
    attributes.insert(
        object_store::Attribute::ContentType,
        "application/json".into(),
    );
    attributes.insert(
        object_store::Attribute::CacheControl,
        cache_control.to_owned().into(),
    );
    for (name, value) in extra {
        attributes.insert(name.clone(), (*value).into());
    }
    attributes
}

/// A bucket writer that keeps the documents' bytes and changes only the headers a relying party
/// acts on (a year's `Cache-Control`, so a revoked key would be cached for a year; a
/// `Content-Encoding` no client can undo): the next round restores warrant's headers; a
/// writer's own metadata is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_a_bucket_writer_changed_are_restored() {
    use object_store::{Attribute, PutOptions, PutPayload};
    let moto = Moto::start().await;
    moto.create_bucket("bucket").await;
    let metrics = PublishMetrics::new();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let jwks_uri = format!("{ISSUER}/openid/v1/jwks");
    let mut publisher =
        Publisher::new(vec![s3_target(&moto.url(""))], ISSUER, &jwks_uri, metrics).unwrap();
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    publisher.round(&served, at(T0), true).await.unwrap();
    let jwks = "cluster-a/openid/v1/jwks";
    let other_writer = s3_target(&moto.url(""));
    let overwrite = async |attributes| {
        other_writer
            .store()
            .unwrap()
            .put_opts(
                &jwks.into(),
                PutPayload::from_bytes(served.jwks().clone()),
                PutOptions {
                    attributes,
                    ..PutOptions::default()
                },
            )
            .await
            .unwrap();
    };

    // A year's max-age on the same bytes.
    overwrite(headers("public, max-age=31536000", &[])).await;
    let (bytes, _, cache_control) = moto.get(jwks).await;
    assert_eq!(bytes, served.jwks().to_vec());
    assert_eq!(cache_control, "public, max-age=31536000");
    let written = metric(&registry, "warrant_publish_written_bytes_total");
    publisher.round(&served, at(T0 + 60), true).await.unwrap();
    let (bytes, content_type, cache_control) = moto.get(jwks).await;
    assert_eq!(bytes, served.jwks().to_vec());
    assert_eq!(content_type, "application/json");
    assert_eq!(cache_control, "public, max-age=3600");
    assert_ne!(
        metric(&registry, "warrant_publish_written_bytes_total"),
        written,
        "restored by a write"
    );

    // A content encoding warrant did not set.
    overwrite(headers(
        "public, max-age=3600",
        &[(Attribute::ContentEncoding, "gzip")],
    ))
    .await;
    publisher.round(&served, at(T0 + 120), true).await.unwrap();
    let encoding = reqwest::get(moto.url(&format!("/bucket/{jwks}")))
        .await
        .unwrap()
        .headers()
        .get("content-encoding")
        .cloned();
    assert_eq!(encoding, None);

    // Metadata of the writer's own changes nothing a relying party does: left as it is.
    overwrite(headers(
        "public, max-age=3600",
        &[(Attribute::Metadata("owner".into()), "platform-team")],
    ))
    .await;
    let written = metric(&registry, "warrant_publish_written_bytes_total");
    publisher.round(&served, at(T0 + 180), true).await.unwrap();
    assert_eq!(
        metric(&registry, "warrant_publish_written_bytes_total"),
        written
    );
}

/// A replica that only checks is not fooled by a JWKS that lists the next key's kid on another
/// key's material (relying parties would verify its tokens with that material, and refuse
/// them): it fails its check naming the key, and the writer's next round repairs the JWKS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kid_on_another_keys_material_does_not_list_the_key() {
    use object_store::{PutOptions, PutPayload};
    let moto = Moto::start().await;
    moto.create_bucket("bucket").await;
    let target = s3_target(&moto.url(""));
    let mut writer = publisher(vec![target.clone()]);
    let mut follower = publisher(vec![target.clone()]);
    let gate = writer.gate();
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let keys = rotated(&keys, T0 + 6 * DAY);
    let served = published(&keys, T0 + 6 * DAY);
    writer.round(&served, at(T0 + 6 * DAY), true).await.unwrap();
    follower
        .round(&served, at(T0 + 6 * DAY), false)
        .await
        .unwrap();

    // The next kid, on a stranger's public key; the headers are warrant's.
    let (a, b) = (keys.keys()[0].key(), keys.keys()[1].key());
    let stranger = SigningKey::generate(KeyType::P256).unwrap();
    target
        .store()
        .unwrap()
        .put_opts(
            &"cluster-a/openid/v1/jwks".into(),
            PutPayload::from(forged_jwks(a, b.kid(), &stranger)),
            PutOptions {
                attributes: headers("public, max-age=3600", &[]),
                ..PutOptions::default()
            },
        )
        .await
        .unwrap();
    let error = follower
        .round(&served, at(T0 + 6 * DAY + 60), false)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "missing", "{error}");
    assert!(error.to_string().contains(b.kid()), "{error}");
    assert!(
        !follower.health().borrow().targets[0]
            .listed
            .lists(b.verifying_key())
    );

    writer
        .round(&served, at(T0 + 6 * DAY + 60), true)
        .await
        .unwrap();
    assert!(gate.borrow().lists(b.verifying_key()));
    follower
        .round(&served, at(T0 + 6 * DAY + 120), false)
        .await
        .unwrap();
}

/// An S3-compatible server on TLS with a private CA: trusted through `--publish-ca-file`, and
/// through it alone (not without it, not with another CA's file). Plain HTTP to a host that is
/// not loopback is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_s3_server_is_trusted_through_its_ca_file() {
    let ca = warrant_testkit::TestCa::new("private-s3");
    let moto = Moto::start_tls(&ca.issue_server(&["127.0.0.1"]), ca.pem()).await;
    moto.create_bucket("bucket").await;
    let files = tempfile::tempdir().unwrap();
    let ca_file = files.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let other_ca = files.path().join("other.pem");
    std::fs::write(&other_ca, warrant_testkit::TestCa::new("other").pem()).unwrap();
    let target = |ca_file: Option<&Path>| {
        Target::open(
            "s3://bucket/cluster-a",
            &Endpoint {
                ca_file: ca_file.map(Path::to_owned),
                ..Endpoint::at(&moto.url(""))
            },
            &[
                ("aws_access_key_id".into(), "testing".into()),
                ("aws_secret_access_key".into(), "testing".into()),
                ("aws_region".into(), "us-east-1".into()),
            ],
        )
        .unwrap()
    };
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    for untrusted in [None, Some(other_ca.as_path())] {
        let mut publisher = publisher(vec![target(untrusted)]);
        let error = publisher.round(&served, at(T0), true).await.unwrap_err();
        assert_eq!(error.reason(), "read", "{untrusted:?}: {error}");
    }
    let mut publisher = publisher(vec![target(Some(&ca_file))]);
    publisher.round(&served, at(T0), true).await.unwrap();
    let jwks = moto
        .client
        .get(moto.url("/bucket/cluster-a/openid/v1/jwks"))
        .send()
        .await
        .unwrap();
    assert_eq!(jwks.bytes().await.unwrap(), served.jwks().clone());

    let error = Target::open(
        "s3://bucket/cluster-a",
        &Endpoint::at("http://minio.example:9000"),
        &[],
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("plain HTTP to a host that is not loopback"),
        "{error}"
    );
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
    let target = Target::open(&url, &Endpoint::default(), &[]).unwrap();
    let publisher = publisher(vec![target]);
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
    let b = keys.keys()[1].key().verifying_key().clone();
    clock.set(at(T0 + 6 * DAY));
    feed.send_replace(Arc::new(published(&keys, T0 + 6 * DAY)));
    let mut gate_rx = gate.clone();
    gate_rx.wait_for(|listed| listed.lists(&b)).await.unwrap();
    assert_eq!(read(dir.path(), jwks), feed.borrow().jwks().to_vec());

    // Dropped: nothing restores the file any more.
    drop(task);
    std::fs::write(dir.path().join(jwks), b"{}").unwrap();
    tokio::time::sleep(3 * warrant_publish::RECHECK).await;
    assert_eq!(read(dir.path(), jwks), b"{}");
}

/// With the pod certificate signer's roots, the SPIFFE trust bundle goes beside the discovery
/// document, and follows the roots: none before they are given, then the roots as x509-svid
/// keys and the JWKS's keys as jwt-svid.
#[tokio::test(start_paused = true)]
async fn the_spiffe_bundle_is_published_beside_discovery_once_roots_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let target = Target::open(&url, &Endpoint::default(), &[]).unwrap();
    let mut publisher = publisher(vec![target]);
    let (roots, roots_rx) = watch::channel(None);
    publisher.follow_spiffe_roots(roots_rx);
    let mut health = publisher.health();
    let clock = Clock::manual(at(T0));
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let (feed, feed_rx) = watch::channel(Arc::new(published(&keys, T0)));
    let _task = publisher.spawn(feed_rx, warrant_keys::Writer::Always, clock.clone());
    health
        .wait_for(|h| h.targets[0].last_success.is_some())
        .await
        .unwrap();
    let bundle = dir.path().join("cluster-a/.well-known/spiffe-bundle");
    assert!(!bundle.exists(), "no bundle before the signer gives roots");

    let certificate = warrant_testkit::TestCa::new("pod CA")
        .issue_server(&["ca.example"])
        .der()
        .to_vec();
    roots.send_replace(Some(Arc::new(
        warrant_issuer::SpiffeRoots::new(std::slice::from_ref(&certificate)).unwrap(),
    )));
    for _ in 0..100 {
        if bundle.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&bundle).unwrap()).unwrap();
    let uses: Vec<&str> = written["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["use"].as_str().unwrap())
        .collect();
    assert_eq!(uses, ["x509-svid", "jwt-svid"], "{written}");
    let kid = feed.borrow().keys().verifying()[0].kid().to_owned();
    assert_eq!(written["keys"][1]["kid"], kid);
}

/// A symbolic link planted inside a directory target, pointing outside it: the round fails,
/// saying so, and nothing is written where the link points; the documents land once the link
/// is gone.
#[tokio::test]
async fn a_directory_target_writes_nothing_through_a_link_inside_it() {
    let www = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), www.path().join("cluster-a")).unwrap();
    let target = Target::open(
        &format!("file://{}", www.path().display()),
        &Endpoint::default(),
        &[],
    )
    .unwrap();
    let mut publisher = publisher(vec![target]);
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    let error = publisher.round(&served, at(T0), true).await.unwrap_err();
    assert!(
        error.to_string().contains("cluster-a is a symbolic link"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "written through the link"
    );
    assert!(publisher.gate().borrow().is_empty());

    std::fs::remove_file(www.path().join("cluster-a")).unwrap();
    publisher.round(&served, at(T0 + 10), true).await.unwrap();
    assert_eq!(
        read(www.path(), "cluster-a/openid/v1/jwks"),
        served.jwks().to_vec()
    );
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
        format!("http://127.0.0.1:{}/devstoreaccount1", self.server.port())
    }

    /// Runs `action` with Microsoft's Python SDK (not object_store, which warrant uses), as
    /// another writer of the account would: `create-public CONTAINER` (anonymous read of its
    /// blobs, as docs/discovery.md has the operator set it), `headers CONTAINER BLOB
    /// CACHE_CONTROL` (the blob's headers replaced, its bytes kept), `upload-and-lease CONTAINER
    /// BLOB [CACHE_CONTROL]` (`stdin` written with warrant's content type and that cache control,
    /// warrant's by default, then leased forever, so that writes without the lease fail) and
    /// `break-lease CONTAINER BLOB`.
    fn sdk(&self, action: &[&str], stdin: &[u8]) {
        const SCRIPT: &str = r#"
import sys
from azure.storage.blob import BlobLeaseClient, BlobServiceClient, ContentSettings
account_url, key, action, container = sys.argv[1:5]
service = BlobServiceClient(account_url, credential={"account_name": "devstoreaccount1", "account_key": key})
if action == "create-public":
    service.create_container(container, public_access="blob")
    sys.exit(0)
blob = service.get_blob_client(container, sys.argv[5])
if action == "headers":
    blob.set_http_headers(ContentSettings(content_type="application/json", cache_control=sys.argv[6]))
elif action == "upload-and-lease":
    cache_control = sys.argv[6] if len(sys.argv) > 6 else "public, max-age=3600"
    settings = ContentSettings(content_type="application/json", cache_control=cache_control)
    blob.upload_blob(sys.stdin.buffer.read(), overwrite=True, content_settings=settings)
    blob.acquire_lease(lease_duration=-1)
elif action == "break-lease":
    BlobLeaseClient(blob).break_lease(lease_break_period=0)
else:
    sys.exit("unknown action " + action)
"#;
        use std::io::Write as _;
        let mut child = tools::python(&["azure.storage.blob"])
            .args(["-c", SCRIPT, &self.account_url(), AZURITE_KEY])
            .args(action)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{action:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates `container` with anonymous read of its blobs.
    fn create_public_container(&self, container: &str) {
        self.sdk(&["create-public", container], b"");
    }

    /// An Azure target for `az://<container>/cluster-a` on this emulator, with the account's key
    /// (in production the `AZURE_*` environment or a managed identity gives the credential).
    fn target(&self, container: &str) -> Target {
        Target::open(
            &format!("az://{container}/cluster-a"),
            &Endpoint::default(),
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
    let mut follower = publisher(vec![azurite.target("oidc")]);
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
        .unwrap()
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
    let b_key = keys.keys()[1].key().verifying_key().clone();
    let b = b_key.kid().to_owned();
    let served = published(&keys, T0 + 6 * DAY);
    publisher
        .round(&served, at(T0 + 6 * DAY), true)
        .await
        .unwrap();
    assert!(
        ListedKeys::from_jwks(&azurite.get("oidc", "cluster-a/openid/v1/jwks").await.0)
            .lists(&b_key)
    );
    assert!(gate.borrow().lists(&b_key));
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

/// Azure, with another writer of the account using Microsoft's SDK: headers replaced on the same
/// bytes (a year's `Cache-Control`) are restored; a JWKS that lists the next key's kid on
/// another key's material, leased so that warrant's rewrite fails, does not let the next key
/// sign (a failing target lists nothing new); once the lease is broken the JWKS is repaired and
/// the key listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_writer_cannot_change_headers_or_list_a_key_by_its_kid() {
    let azurite = Azurite::start().await;
    azurite.create_public_container("oidc");
    let mut publisher = publisher(vec![azurite.target("oidc")]);
    let gate = publisher.gate();
    let health = publisher.health();
    let policy = policy();
    let keys = ManagedKeySet::first(SigningKey::generate(KeyType::P256).unwrap(), at(T0), DAY);
    let served = published(&keys, T0);
    publisher.round(&served, at(T0), true).await.unwrap();
    let blob = "cluster-a/openid/v1/jwks";

    azurite.sdk(&["headers", "oidc", blob, "public, max-age=31536000"], b"");
    let (bytes, _, cache_control) = azurite.get("oidc", blob).await;
    assert_eq!(bytes, served.jwks().to_vec());
    assert_eq!(cache_control, "public, max-age=31536000");
    publisher.round(&served, at(T0 + 60), true).await.unwrap();
    let (bytes, content_type, cache_control) = azurite.get("oidc", blob).await;
    assert_eq!(bytes, served.jwks().to_vec());
    assert_eq!(
        (content_type.as_str(), cache_control.as_str()),
        ("application/json", "public, max-age=3600")
    );

    // The next key is due, and the other writer gets there first: with the right bytes under
    // the wrong headers, leased. The round fails, and a failing target lists nothing new.
    let keys = rotated(&keys, T0 + 6 * DAY);
    let (a, b) = (keys.keys()[0].key(), keys.keys()[1].key());
    let served = published(&keys, T0 + 6 * DAY);
    azurite.sdk(
        &["upload-and-lease", "oidc", blob, "public, max-age=31536000"],
        served.jwks(),
    );
    let error = publisher
        .round(&served, at(T0 + 6 * DAY), true)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "write", "{error}");
    assert!(gate.borrow().lists(a.verifying_key()));
    assert!(!gate.borrow().lists(b.verifying_key()));
    azurite.sdk(&["break-lease", "oidc", blob], b"");

    // Or with the next kid on another key's material, leased.
    let stranger = SigningKey::generate(KeyType::P256).unwrap();
    let document = forged_jwks(a, b.kid(), &stranger);
    azurite.sdk(&["upload-and-lease", "oidc", blob], &document);
    let error = publisher
        .round(&served, at(T0 + 6 * DAY), true)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "write", "{error}");
    assert!(health.borrow().failure().is_some());
    assert!(
        gate.borrow().lists(a.verifying_key()),
        "what it listed stays"
    );
    assert!(!gate.borrow().lists(b.verifying_key()));
    let listed = gate.borrow().clone();
    let lead = policy.gate_lead_seconds();
    let (_, holds) = keys
        .hold_unlisted(&policy, at(T0 + 7 * DAY - lead), &listed)
        .expect("the next key is held");
    assert_eq!(holds[0].kid, b.kid());

    azurite.sdk(&["break-lease", "oidc", blob], b"");
    publisher
        .round(&served, at(T0 + 6 * DAY + 10), true)
        .await
        .unwrap();
    assert_eq!(azurite.get("oidc", blob).await.0, served.jwks().to_vec());
    assert!(gate.borrow().lists(b.verifying_key()));
}
