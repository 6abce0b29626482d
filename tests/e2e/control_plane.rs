//! kube-apiserver's external signer on a highly available control plane, end to end: three
//! `warrant serve` processes, each a control-plane node's signer on its own Unix socket, share
//! one key Secret and Lease (`kube-system/warrant-keys`, `kube-system/warrant-keys-leader`) on
//! the loopback Kubernetes fixture, which plays the cluster's store (etcd). Each node reaches it
//! through its own kube-apiserver ([`NodeApiserver`], a relay on a port of its own that the test
//! stops and starts as that node's kube-apiserver), and keeps its local copy in
//! `--key-copy-dir`. A test caller plays each node's kube-apiserver on the socket
//! ([`KubeApiserver`]): FetchKeys at its start and again exactly after each refresh hint (10 s
//! after a failure), Sign, and verification with the keys it fetched, as kube-apiserver 1.36's
//! key cache does.
//!
//! What every test checks, whenever a kube-apiserver refreshes and whenever one signs: every
//! token signed so far through any node verifies with every started kube-apiserver's keys, and
//! no node signs with a key another node's kube-apiserver does not hold.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;
use warrant_kube_fixture::{Fixture, ResourceType};
use warrant_signer::client::SignerClient;
use warrant_signer::proto::{FetchKeysRequest, SignJwtRequest};

use crate::secret_keys::{age_secret, aged_index};
use crate::support::*;
use crate::tokens::OBJECTS;
use warrant_testkit::SA_UID;

const NAMESPACE: &str = "kube-system";
const NAME: &str = "warrant-keys";
const SECRET: &str = "kube-system/warrant-keys";
/// The cluster's issuer: every kube-apiserver's `--service-account-issuer`, and each warrant's.
const CLUSTER_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Tokens live an hour (the shortest maximum kube-apiserver's flag allows), so no key leaves
/// the JWKS while a test runs.
const TOKEN_SECONDS: i64 = 3600;
const DAY: i64 = 86_400;

/// How the keys rotate in a test: its flags.
#[derive(Clone, Copy)]
struct Schedule {
    rotation_period: &'static str,
    publish_ahead: &'static str,
}

/// The shortest schedule a shared Secret accepts: a key every 100 s, published 90 s ahead.
const SHORT: Schedule = Schedule {
    rotation_period: "100s",
    publish_ahead: "90s",
};
/// The defaults: rotations are made due by moving the Secret's schedule into the past.
const DEFAULTS: Schedule = Schedule {
    rotation_period: "168h",
    publish_ahead: "24h",
};

/// A node's kube-apiserver as its warrant sees it: a TCP relay, on a port of its own, to the
/// fixture. Stopped, connections to it are refused (its port stays reserved) while the other
/// nodes still reach the store through theirs.
struct NodeApiserver {
    addr: SocketAddr,
    upstream: SocketAddr,
    relay: Option<AbortOnDropHandle<()>>,
    reserved: Option<TcpSocket>,
}

fn reusable(addr: SocketAddr) -> TcpSocket {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_reuseport(true).unwrap();
    socket.bind(addr).unwrap();
    socket
}

impl NodeApiserver {
    fn start(upstream: SocketAddr) -> NodeApiserver {
        let socket = reusable(SocketAddr::from(([127, 0, 0, 1], 0)));
        let addr = socket.local_addr().unwrap();
        let mut apiserver = NodeApiserver {
            addr,
            upstream,
            relay: None,
            reserved: Some(socket),
        };
        apiserver.resume();
        apiserver
    }

    /// Serves again on its port.
    fn resume(&mut self) {
        let socket = self.reserved.take().unwrap_or_else(|| reusable(self.addr));
        let listener = socket.listen(64).unwrap();
        let upstream = self.upstream;
        self.relay = Some(AbortOnDropHandle::new(tokio::spawn(relay(
            listener, upstream,
        ))));
    }

    /// Stops, as the node's kube-apiserver process dies: every connection is cut.
    fn stop(&mut self) {
        self.reserved = Some(reusable(self.addr));
        self.relay = None;
    }

    /// A kubeconfig for this kube-apiserver (the fixture's, at this address).
    fn kubeconfig(&self, cluster: &Fixture) -> String {
        cluster
            .kubeconfig()
            .replace(&cluster.url(), &format!("http://{}", self.addr))
    }
}

/// Relays every connection to `upstream` until aborted, which cuts them all.
async fn relay(listener: TcpListener, upstream: SocketAddr) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        connections.spawn(async move {
            if let Ok(mut server) = TcpStream::connect(upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
        while connections.try_join_next().is_some() {}
    }
}

/// One control-plane node: its kube-apiserver (as warrant reaches the store), and its warrant.
struct Node {
    name: &'static str,
    apiserver: NodeApiserver,
    warrant: Warrant,
    schedule: Schedule,
    /// Flags beyond [`node_flags`]' (the PKCS#11 URI, say).
    extra: Vec<String>,
}

impl Node {
    /// Starts the node's warrant: `serve` with the signer on `signer.sock`, the Secret through
    /// this node's kube-apiserver, its copy in `key-copy`, as the static pod runs it.
    async fn start(cluster: &Fixture, name: &'static str, schedule: Schedule) -> Node {
        Self::start_with(cluster, name, schedule, &[], &[]).await
    }

    /// As [`start`](Self::start), with `env` in the server's environment and `extra` flags.
    async fn start_with(
        cluster: &Fixture,
        name: &'static str,
        schedule: Schedule,
        env: &[(OsString, OsString)],
        extra: &[String],
    ) -> Node {
        let apiserver = NodeApiserver::start(cluster.addr());
        let kubeconfig = apiserver.kubeconfig(cluster);
        let mut env = env.to_vec();
        env.push(("POD_NAME".into(), name.into()));
        let warrant = Warrant::start_with_env(
            OBJECTS,
            |dir| node_flags(dir, &kubeconfig, schedule, extra),
            &[],
            &env,
        )
        .await;
        Node {
            name,
            apiserver,
            warrant,
            schedule,
            extra: extra.to_vec(),
        }
    }

    /// Stops the node's warrant at once (SIGKILL) and starts it again, as after a crash or a
    /// reboot of the node; it answers again before this returns.
    async fn restart(&mut self, cluster: &Fixture) {
        let kubeconfig = self.apiserver.kubeconfig(cluster);
        let (schedule, extra) = (self.schedule, self.extra.clone());
        self.warrant
            .restart(|dir| node_flags(dir, &kubeconfig, schedule, &extra))
            .await;
    }

    fn socket(&self) -> PathBuf {
        self.warrant.path("signer.sock")
    }

    fn copy(&self) -> PathBuf {
        self.warrant.path("key-copy")
    }

    /// The kids in the node's local copy, in its order.
    fn copy_kids(&self) -> Vec<String> {
        key_index_kids(&std::fs::read(self.copy().join("keys.json")).unwrap())
    }

    async fn readyz(&self) -> String {
        self.warrant.get_text("/readyz?verbose").await.1
    }
}

/// The flags of a node's `serve` beside the harness's (its own issuer, TLS, objects file):
/// the cluster's issuer, the signer's socket, the keys in the Secret with a local copy.
fn node_flags(dir: &Path, kubeconfig: &str, schedule: Schedule, extra: &[String]) -> Vec<OsString> {
    let path = dir.join("node.kubeconfig");
    std::fs::write(&path, kubeconfig).unwrap();
    let mut flags: Vec<OsString> = vec![
        "--service-account-issuer".into(),
        CLUSTER_ISSUER.into(),
        "--service-account-signing-endpoint".into(),
        dir.join("signer.sock").into(),
        "--service-account-max-token-expiration".into(),
        "1h".into(),
        "--kubeconfig".into(),
        path.into(),
        "--key-secret".into(),
        SECRET.into(),
        "--key-copy-dir".into(),
        dir.join("key-copy").into(),
        "--key-algorithm".into(),
        "ES256".into(),
        "--key-rotation-period".into(),
        schedule.rotation_period.into(),
        "--key-publish-ahead".into(),
        schedule.publish_ahead.into(),
        // A hand-over takes seconds, yet a holder renews 3 s before expiry on a loaded machine.
        "--key-lease-duration".into(),
        "9s".into(),
    ];
    flags.extend(extra.iter().map(OsString::from));
    flags
}

/// The fixture with Leases served.
async fn cluster() -> Fixture {
    let cluster = Fixture::start().await.unwrap();
    cluster.register(ResourceType::of::<Lease>());
    cluster
}

fn secret(cluster: &Fixture) -> Secret {
    cluster.get::<Secret>(NAMESPACE, NAME).unwrap()
}

/// Seconds from now until key `kid` of the Secret activates.
fn until_activation(cluster: &Fixture, kid: &str) -> i64 {
    let index: Value =
        serde_json::from_slice(&secret(cluster).data.unwrap()["keys.json"].0).unwrap();
    let key = index["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .unwrap_or_else(|| panic!("{kid} is not in the Secret: {index}"));
    let at: jiff::Timestamp = key["activateAt"].as_str().unwrap().parse().unwrap();
    warrant_clock::Clock::System
        .now()
        .duration_until(at)
        .as_secs()
}

fn secret_kids(cluster: &Fixture) -> Vec<String> {
    key_index_kids(&secret(cluster).data.unwrap()["keys.json"].0)
}

fn written_by(body: &Value) -> String {
    body["metadata"]["annotations"]["warrant.dev/written-by"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn lease_holder(cluster: &Fixture) -> Option<String> {
    cluster
        .get::<Lease>(NAMESPACE, "warrant-keys-leader")?
        .spec?
        .holder_identity
}

/// Writes to the Secret over HTTP so far (the fixture's log): creates and replaces.
fn secret_writes(cluster: &Fixture) -> usize {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/secrets");
    cluster
        .request_log()
        .iter()
        .filter(|r| {
            (r.starts_with("PUT ") && r.contains(&format!("{path}/{NAME}?")))
                || r.starts_with(&format!("POST {path}"))
        })
        .count()
}

/// A kubeconfig file for the fixture itself, for operators' commands.
fn admin_kubeconfig(cluster: &Fixture, dir: &Path) -> PathBuf {
    let path = dir.join("admin.kubeconfig");
    cluster.write_kubeconfig(&path).unwrap();
    path
}

/// `warrant keys generate --key-secret`, as an operator creates the keys ahead (ES256).
fn generate(cluster: &Fixture, env: &[(OsString, OsString)], extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = admin_kubeconfig(cluster, dir.path());
    let mut command = std::process::Command::new(BIN);
    command
        .args(["keys", "generate", "--key-secret", SECRET, "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--key-algorithm", "ES256"])
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k, v)));
    let out = command.output().unwrap();
    assert!(out.status.success(), "keys generate: {}", stderr(&out));
}

/// Polls `check` until it holds, with a safety net.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The claims kube-apiserver asks a signer to sign for a token issued now.
// kube-apiserver dates the claims by the wall clock, and warrant checks them against it.
#[allow(clippy::disallowed_methods)]
fn claims_now() -> String {
    let now = jiff::Timestamp::now().as_second();
    let claims = json!({
        "aud": [CLUSTER_ISSUER],
        "exp": now + TOKEN_SECONDS,
        "iat": now,
        "iss": CLUSTER_ISSUER,
        "jti": warrant_token::new_jti(),
        "kubernetes.io": {"namespace": "demo", "serviceaccount": {"name": "app", "uid": SA_UID}},
        "nbf": now,
        "sub": "system:serviceaccount:demo:app",
    });
    URL_SAFE_NO_PAD.encode(claims.to_string())
}

/// A token's kid.
fn kid_of(token: &str) -> String {
    jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
}

/// One node's kube-apiserver, as far as its signer sees it: its key cache (kid to PKIX public
/// key) and when it next calls FetchKeys; before its first FetchKeys succeeds, it has not
/// started (it verifies nothing, and signs nothing).
struct KubeApiserver {
    node: &'static str,
    socket: PathBuf,
    client: Option<SignerClient>,
    keys: Option<BTreeMap<String, Vec<u8>>>,
    next_fetch: Instant,
    /// A kube-apiserver not switched to the signer yet signs with this key file (kubeadm's
    /// `sa.key`) and verifies with its public half only.
    key_file: Option<(jsonwebtoken::EncodingKey, String)>,
}

impl KubeApiserver {
    fn new(node: &Node) -> KubeApiserver {
        KubeApiserver {
            node: node.name,
            socket: node.socket(),
            client: None,
            keys: None,
            next_fetch: Instant::now(),
            key_file: None,
        }
    }

    /// kube-apiserver with kubeadm's key files on `node`: it signs with `key` and verifies with
    /// its public half (`--service-account-key-file`), and never asks a signer.
    fn with_key_file(node: &'static str, key: &warrant_token::SigningKey) -> KubeApiserver {
        // A PKCS#8 PrivateKeyInfo's third element holds the PKCS#1 key jsonwebtoken takes.
        let pem = key.to_pkcs8_pem().unwrap();
        let body: String = pem
            .as_str()
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        let pkcs8 = STANDARD.decode(body).unwrap();
        let info = der_elements(der_elements(&pkcs8)[0].1);
        let encoding = jsonwebtoken::EncodingKey::from_rsa_der(info[2].1);
        KubeApiserver {
            node,
            socket: PathBuf::new(),
            client: None,
            keys: Some(BTreeMap::from([(
                key.kid().to_owned(),
                key.verifying_key().spki_der().to_vec(),
            )])),
            next_fetch: Instant::now() + Duration::from_secs(365 * DAY as u64),
            key_file: Some((encoding, key.kid().to_owned())),
        }
    }

    async fn client(&mut self) -> Option<&mut SignerClient> {
        if self.client.is_none() {
            self.client = warrant_signer::client::connect(&self.socket).await.ok();
        }
        self.client.as_mut()
    }

    /// FetchKeys if it is due: true if the cache changed.
    async fn refresh(&mut self) -> bool {
        if Instant::now() < self.next_fetch {
            return false;
        }
        let fetched = match self.client().await {
            Some(client) => client.fetch_keys(FetchKeysRequest {}).await.ok(),
            None => None,
        };
        let Some(fetched) = fetched else {
            // kube-apiserver keeps its keys and retries in 10 s.
            self.client = None;
            self.next_fetch = Instant::now() + Duration::from_secs(10);
            return false;
        };
        let fetched = fetched.into_inner();
        assert!(fetched.refresh_hint_seconds > 0);
        assert!(!fetched.keys.is_empty(), "kube-apiserver refuses no keys");
        let keys: BTreeMap<String, Vec<u8>> = fetched
            .keys
            .into_iter()
            .map(|k| (k.key_id, k.key))
            .collect();
        self.next_fetch = Instant::now() + Duration::from_secs(fetched.refresh_hint_seconds as u64);
        let changed = self.keys.as_ref() != Some(&keys);
        self.keys = Some(keys);
        changed
    }

    /// Asks again now: a test moved the store's schedule forward, and kube-apiserver's
    /// refreshes over that time with it.
    fn refetch(&mut self) {
        if self.key_file.is_none() {
            self.next_fetch = Instant::now();
        }
    }

    /// kube-apiserver's Sign of a token issued now: the assembled token, or the signer's refusal.
    async fn sign(&mut self) -> Result<String, warrant_signer::Status> {
        let claims = claims_now();
        if let Some((key, kid)) = &self.key_file {
            let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
            header.kid = Some(kid.clone());
            let payload: Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&claims).unwrap()).unwrap();
            return Ok(jsonwebtoken::encode(&header, &payload, key).unwrap());
        }
        let Some(client) = self.client().await else {
            return Err(warrant_signer::Status::unavailable("no socket"));
        };
        let signed = client
            .sign(SignJwtRequest {
                claims: claims.clone(),
            })
            .await;
        if signed.is_err() {
            self.client = None;
        }
        let signed = signed?.into_inner();
        Ok(format!("{}.{claims}.{}", signed.header, signed.signature))
    }

    /// Whether `token` verifies with the keys this kube-apiserver holds (`None` before it
    /// started): signature with the key its kid names, issuer, audience, time.
    fn verifies(&self, token: &str) -> Option<Result<(), String>> {
        let keys = self.keys.as_ref()?;
        let header = jsonwebtoken::decode_header(token).unwrap();
        let kid = header.kid.clone().unwrap();
        let Some(der) = keys.get(&kid) else {
            return Some(Err(format!(
                "{}'s kube-apiserver has no key {kid} (it has {:?})",
                self.node,
                keys.keys().collect::<Vec<_>>()
            )));
        };
        // A SubjectPublicKeyInfo's BIT STRING (after its unused-bits byte) is the PKCS#1 key
        // or the EC point jsonwebtoken takes.
        let info = der_elements(der_elements(der)[0].1);
        let public = &info[1].1[1..];
        let key = match header.alg {
            jsonwebtoken::Algorithm::RS256 => jsonwebtoken::DecodingKey::from_rsa_der(public),
            _ => jsonwebtoken::DecodingKey::from_ec_der(public),
        };
        let mut validation = jsonwebtoken::Validation::new(header.alg);
        validation.set_audience(&[CLUSTER_ISSUER]);
        validation.set_issuer(&[CLUSTER_ISSUER]);
        Some(
            jsonwebtoken::decode::<Value>(token, &key, &validation)
                .map(|_| ())
                .map_err(|e| format!("{}'s kube-apiserver refuses it: {e}", self.node)),
        )
    }
}

/// The kube-apiservers of the control plane and every token they had signed, checking the
/// invariant at every refresh and every signature.
struct Caller {
    kube: Vec<KubeApiserver>,
    /// Tokens signed so far, with the node that signed them.
    tokens: Vec<(&'static str, String)>,
}

impl Caller {
    fn new(nodes: &[&Node]) -> Caller {
        Caller {
            kube: nodes.iter().map(|n| KubeApiserver::new(n)).collect(),
            tokens: Vec::new(),
        }
    }

    /// One round: every kube-apiserver whose refresh is due calls FetchKeys, and must then still
    /// verify every token signed so far; then each signs a token, which every kube-apiserver
    /// must verify with the keys it holds (kube-apiserver verifies from its cache). Returns the
    /// kids signed with, by node, and each refusal.
    async fn round(&mut self) -> Vec<(&'static str, Result<String, String>)> {
        for i in 0..self.kube.len() {
            if self.kube[i].refresh().await {
                for (by, token) in &self.tokens {
                    if let Some(Err(why)) = self.kube[i].verifies(token) {
                        panic!(
                            "after a FetchKeys, a token {by} signed with {} no longer verifies: {why}",
                            kid_of(token)
                        );
                    }
                }
            }
        }
        let mut signed = Vec::new();
        for i in 0..self.kube.len() {
            if self.kube[i].keys.is_none() {
                continue;
            }
            let node = self.kube[i].node;
            match self.kube[i].sign().await {
                Ok(token) => {
                    for kube in &self.kube {
                        if let Some(Err(why)) = kube.verifies(&token) {
                            panic!(
                                "{node} signed with {}, which another node's kube-apiserver cannot verify: {why}",
                                kid_of(&token)
                            );
                        }
                    }
                    signed.push((node, Ok(kid_of(&token))));
                    self.tokens.push((node, token));
                }
                Err(status) => signed.push((node, Err(status.message().to_owned()))),
            }
        }
        signed
    }

    /// Rounds every quarter of a second until `done` says so (a safety net of `limit`), failing
    /// on any refusal to sign.
    async fn run_until(
        &mut self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&Self, &[(&'static str, Result<String, String>)]) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        loop {
            let signed = self.round().await;
            for (node, result) in &signed {
                if let Err(why) = result {
                    panic!("{node} refused to sign while {what}: {why}");
                }
            }
            if done(self, &signed) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out while {what}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Every kube-apiserver asks again at its next round (see [`KubeApiserver::refetch`]).
    fn refetch(&mut self) {
        self.kube.iter_mut().for_each(KubeApiserver::refetch);
    }

    /// The distinct kids signed with so far, in the order they first signed.
    fn signers(&self) -> Vec<String> {
        let mut kids: Vec<String> = Vec::new();
        for (_, token) in &self.tokens {
            let kid = kid_of(token);
            if !kids.contains(&kid) {
                kids.push(kid);
            }
        }
        kids
    }
}

/// What `node` lists through FetchKeys now.
async fn fetched(node: &Node) -> BTreeSet<String> {
    fetched_kids(&node.socket()).await.into_iter().collect()
}

/// The elements of a DER sequence's contents (or of a whole DER document): tag and contents.
/// Enough of DER for keys' outer structure (definite lengths only).
fn der_elements(mut der: &[u8]) -> Vec<(u8, &[u8])> {
    let mut elements = Vec::new();
    while let [tag, first, rest @ ..] = der {
        let (length, rest) = if *first < 0x80 {
            (usize::from(*first), rest)
        } else {
            let count = usize::from(first & 0x7f);
            let length = rest[..count]
                .iter()
                .fold(0usize, |n, b| (n << 8) | usize::from(*b));
            (length, &rest[count..])
        };
        elements.push((*tag, &rest[..length]));
        der = &rest[length..];
    }
    elements
}

/// The kid signed with in a round by every node that signed, if all signed with one.
fn one_kid(signed: &[(&'static str, Result<String, String>)]) -> Option<String> {
    let kids: BTreeSet<&String> = signed.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
    (kids.len() == 1).then(|| kids.into_iter().next().unwrap().clone())
}

/// Polls what `node` lists through FetchKeys until it is `expected`.
async fn until_fetched(node: &Node, expected: &[String]) {
    let expected: BTreeSet<String> = expected.iter().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = fetched(node).await;
        if listed == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} lists {listed:?}, not {expected:?}",
            node.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three nodes on the shortest schedule, through two rotations in real time: the Lease holder
/// (node-a, the first to start) creates each successor 90 s before it signs, every node follows
/// through its own kube-apiserver, and every kube-apiserver holds each key before any node signs
/// with it. Only the holder writes; `/readyz?verbose` and `warrant keys list` say who writes,
/// when each node last read the store, and how its copy stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_sign_with_one_key_set_across_two_rotations() {
    let cluster = cluster().await;
    // node-a starts first: it takes the Lease and creates the Secret and its first key.
    let a = Node::start(&cluster, "node-a", SHORT).await;
    let b = Node::start(&cluster, "node-b", SHORT).await;
    let c = Node::start(&cluster, "node-c", SHORT).await;
    assert_eq!(lease_holder(&cluster).as_deref(), Some("node-a"));
    let mut caller = Caller::new(&[&a, &b, &c]);

    // Until every node signs with the third key.
    caller
        .run_until(
            "rotating twice",
            Duration::from_secs(420),
            |caller, signed| {
                signed.len() == 3
                    && caller.signers().len() == 3
                    && one_kid(signed).as_ref() == caller.signers().last()
            },
        )
        .await;
    let signers = caller.signers();
    let kids = secret_kids(&cluster);
    assert_eq!(kids, signers, "the Secret holds the three keys, in order");
    // node-a wrote them all: the Secret, then one successor per rotation.
    assert_eq!(lease_holder(&cluster).as_deref(), Some("node-a"));
    assert_eq!(secret_writes(&cluster), 3);
    assert_eq!(
        secret(&cluster).metadata.annotations.unwrap()["warrant.dev/written-by"],
        "node-a"
    );

    for node in [&a, &b, &c] {
        assert_eq!(node.copy_kids(), kids, "{}'s copy", node.name);
        let readyz = node.readyz().await;
        // Each node says which node writes, how old its view of the Secret is, and its copy's.
        let role = if node.name == "node-a" {
            "leading (kube-system/warrant-keys-leader as node-a): this replica writes the keys"
                .to_owned()
        } else {
            format!(
                "following (kube-system/warrant-keys-leader as {}): another replica writes the keys; the key Secret was last written by node-a",
                node.name
            )
        };
        let aged = readyz
            .lines()
            .filter(|l| {
                (l.starts_with("[+]key-store ok, last read at ") || l.starts_with("[+]key-copy "))
                    && l.contains(" s ago)")
            })
            .count();
        assert!(
            readyz.contains(&format!("[+]key-lease {role}\n"))
                && readyz.contains("[+]key-store ok, last read at ")
                && readyz.contains(&format!(
                    "[+]key-copy {} written at ",
                    node.copy().display()
                ))
                && readyz.contains(", holding the key store's keys")
                && aged == 2,
            "{readyz}"
        );
    }

    // On node-c, keys list names the writer and compares the node's copy with the Secret.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = admin_kubeconfig(&cluster, dir.path());
    let listed = warrant_ok(&[
        "keys".as_ref(),
        "list".as_ref(),
        "--key-secret".as_ref(),
        SECRET.as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "--key-copy-dir".as_ref(),
        c.copy().as_os_str(),
    ]);
    for expected in [
        "store: Kubernetes Secret kube-system/warrant-keys, last written by node-a".to_owned(),
        "writer: node-a holds the Lease kube-system/warrant-keys-leader (renewed at ".to_owned(),
        format!("local copy {}: written at ", c.copy().display()),
        "s ago), holding the store's keys".to_owned(),
    ] {
        assert!(listed.contains(&expected), "{expected:?} not in:\n{listed}");
    }
}

/// The key index in a write's body (a Secret, `data` base64).
fn kids_written(body: &Value) -> Vec<String> {
    key_index_kids(
        &STANDARD
            .decode(body["data"]["keys.json"].as_str().unwrap())
            .unwrap(),
    )
}

/// The Lease holder dies in the middle of a rotation: it generated the successor and sent its
/// write, which the store received but had not applied when the holder died. Another node takes
/// the Lease, reads the Secret as it was, generates a successor of its own and writes it against
/// the same version; the dead holder's write lands first, so the new holder's is refused (the
/// Secret's resourceVersion precondition), and it re-reads and finds the rotation made. One
/// successor in the store, the same on every node; the other never reaches anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_holder_killed_mid_rotation_leaves_one_successor() {
    let cluster = cluster().await;
    generate(&cluster, &[], &[]);
    let mut a = Node::start(&cluster, "node-a", DEFAULTS).await;
    until("node-a holds the Lease", || {
        lease_holder(&cluster).as_deref() == Some("node-a")
    })
    .await;
    let mut b = Node::start(&cluster, "node-b", DEFAULTS).await;
    let mut c = Node::start(&cluster, "node-c", DEFAULTS).await;
    let first = secret_kids(&cluster);

    // The first key's successor falls due; node-a generates it and sends its write, which the
    // store holds; node-a dies before it is answered.
    cluster.hold_writes("secrets");
    age_secret(&cluster, NAMESPACE, NAME, 6 * DAY + 60);
    until("node-a's rotation reaches the store", || {
        cluster.held_writes().len() == 1
    })
    .await;
    let from_a = cluster.held_writes().remove(0);
    assert_eq!(written_by(&from_a), "node-a");
    let rotated_by_a = kids_written(&from_a);
    assert_eq!(rotated_by_a.len(), 2);
    assert_eq!(rotated_by_a[0], first[0]);
    a.warrant.signal("KILL");
    a.warrant.wait_exit();

    // Once the Lease runs out another node takes it, reads the Secret without node-a's write,
    // and makes the same rotation with a key of its own.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.held_writes().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "no other node rotated after node-a died"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let from_new = cluster.held_writes().remove(1);
    let new_holder = written_by(&from_new);
    assert!(
        ["node-b", "node-c"].contains(&new_holder.as_str()),
        "{new_holder}"
    );
    assert_eq!(lease_holder(&cluster).as_deref(), Some(new_holder.as_str()));
    let rotated_by_new = kids_written(&from_new);
    assert_eq!(rotated_by_new[0], first[0]);
    assert_ne!(
        rotated_by_new[1], rotated_by_a[1],
        "each generated a successor"
    );

    // The dead holder's write lands; the new holder's, made against the same version, does not.
    assert_eq!(cluster.release_write().await, Some(200));
    assert_eq!(cluster.release_write().await, Some(409));
    cluster.stop_holding_writes();
    for node in [&b, &c] {
        until_fetched(node, &rotated_by_a).await;
    }
    let mut caller = Caller::new(&[&b, &c]);
    caller
        .run_until(
            "the survivors sign",
            Duration::from_secs(30),
            |_, signed| signed.len() == 2 && one_kid(signed).as_ref() == Some(&first[0]),
        )
        .await;
    // The new holder re-read the Secret and found nothing to do: no second successor, ever.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(secret_kids(&cluster), rotated_by_a);
    for node in [&b, &c] {
        assert_eq!(node.copy_kids(), rotated_by_a, "{}'s copy", node.name);
        assert!(!fetched(node).await.contains(&rotated_by_new[1]));
    }
    let holder = if new_holder == "node-b" {
        &mut b
    } else {
        &mut c
    };
    let log = holder.warrant.log();
    assert!(
        log.contains("the key store changed under this write; re-reading it"),
        "{log}"
    );
}

/// The store goes down (etcd, behind every node's kube-apiserver): every node keeps signing and
/// verifying with the keys it has, a successor's activation comes on time from the schedule, and
/// when the next successor falls due nobody can create it: none generates a key. Every process
/// is then stopped and started again with the store still down: each starts from its local copy.
/// The store returns: the holder creates the successor, and every node and copy converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_store_down_every_node_serves_its_copy_and_none_generates() {
    let mut cluster = cluster().await;
    let mut a = Node::start(&cluster, "node-a", SHORT).await;
    let mut b = Node::start(&cluster, "node-b", SHORT).await;
    let mut c = Node::start(&cluster, "node-c", SHORT).await;
    let mut caller = Caller::new(&[&a, &b, &c]);
    // The holder publishes the second key ten seconds after the first; every copy holds it.
    caller
        .run_until(
            "the second key reaches every copy",
            Duration::from_secs(120),
            |_, _| [&a, &b, &c].iter().all(|n| n.copy_kids().len() == 2),
        )
        .await;
    let known = secret_kids(&cluster);
    let index: Value =
        serde_json::from_slice(&secret(&cluster).data.unwrap()["keys.json"].0).unwrap();
    let second_signs: jiff::Timestamp = index["keys"][1]["activateAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // The third key falls due 10 s after the second signs (100 s period, 90 s ahead).
    let third_due = second_signs + jiff::SignedDuration::from_secs(10);

    cluster.stop().await;
    for node in [&a, &b, &c] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !node.readyz().await.contains("[+]key-store stale since ") {
            assert!(
                Instant::now() < deadline,
                "{} does not see the outage",
                node.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    caller
        .run_until("the store is down", Duration::from_secs(10), |_, signed| {
            signed.len() == 3 && one_kid(signed).is_some()
        })
        .await;

    // Every warrant stops and starts again, the store still down: each from its copy.
    for node in [&mut a, &mut b, &mut c] {
        node.restart(&cluster).await;
        assert_eq!(fetched(node).await, known.iter().cloned().collect());
        let readyz = node.readyz().await;
        assert!(
            readyz.contains("; serving its keys until the key store answers")
                && readyz.contains("[+]key-store stale since ")
                && readyz.contains("serving the keys it started with (a local copy)")
                && readyz.contains("; signs until "),
            "{readyz}"
        );
    }
    // The second key signs on time, and the third falls due: nobody creates it.
    #[allow(clippy::disallowed_methods)]
    let past_due = || jiff::Timestamp::now() > third_due + jiff::SignedDuration::from_secs(15);
    caller
        .run_until(
            "the store is down",
            Duration::from_secs(180),
            |_, signed| signed.len() == 3 && past_due(),
        )
        .await;
    assert_eq!(
        caller.signers(),
        known,
        "both keys signed, the second on time"
    );
    for node in [&a, &b, &c] {
        assert_eq!(
            fetched(node).await,
            known.iter().cloned().collect(),
            "{} generated a key",
            node.name
        );
        assert_eq!(node.copy_kids(), known, "{}'s copy", node.name);
    }
    assert_eq!(secret_kids(&cluster), known);

    // The store is back: the holder creates the third key, which every node and copy gets.
    #[allow(clippy::disallowed_methods)]
    let back = jiff::Timestamp::now();
    cluster.restart().await.unwrap();
    caller
        .run_until("the store is back", Duration::from_secs(120), |_, _| {
            [&a, &b, &c].iter().all(|n| n.copy_kids().len() == 3)
        })
        .await;
    let kids = secret_kids(&cluster);
    assert_eq!(kids[..2], known[..]);
    let index: Value =
        serde_json::from_slice(&secret(&cluster).data.unwrap()["keys.json"].0).unwrap();
    let published: jiff::Timestamp = index["keys"][2]["publishedAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        published.as_second() >= back.as_second() - 1,
        "the third key was made at {published}, before the store came back at {back}"
    );
    for node in [&a, &b, &c] {
        assert_eq!(fetched(node).await, kids.iter().cloned().collect());
        assert!(
            node.readyz()
                .await
                .contains("[+]key-store ok, last read at ")
        );
    }
}

/// A node stays down for two rotations; its copy (its schedule and its age, moved back as far
/// as the store's) holds only the key that signed then. It starts before its kube-apiserver
/// answers: it serves the copy's key for verifying, and signs nothing with a key the writer has
/// long retired. Its kube-apiserver comes up: the store wins, and the node says so in its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_copy_is_two_rotations_old_converges_and_says_so() {
    let cluster = cluster().await;
    generate(&cluster, &[], &[]);
    let a = Node::start(&cluster, "node-a", DEFAULTS).await;
    until("node-a holds the Lease", || {
        lease_holder(&cluster).as_deref() == Some("node-a")
    })
    .await;
    let b = Node::start(&cluster, "node-b", DEFAULTS).await;
    let mut c = Node::start(&cluster, "node-c", DEFAULTS).await;
    let first = secret_kids(&cluster);
    assert_eq!(c.copy_kids(), first);

    // node-c goes down with its kube-apiserver.
    c.warrant.signal("KILL");
    c.warrant.wait_exit();
    c.apiserver.stop();

    // Two rotations while it is down (the schedule moved into the past, as time would).
    let mut aged = 0;
    for (seconds, what, keys) in [
        (6 * DAY + 60, "the second key is created", 2),
        (DAY + 60, "the second key signs", 2),
        (6 * DAY, "the third key is created, the first removed", 2),
        (DAY + 60, "the third key signs", 2),
    ] {
        let before = secret_kids(&cluster);
        age_secret(&cluster, NAMESPACE, NAME, seconds);
        aged += seconds;
        if seconds == DAY + 60 {
            continue;
        }
        until(what, || {
            let now = secret_kids(&cluster);
            now != before && now.len() == keys
        })
        .await;
    }
    let kids = secret_kids(&cluster);
    assert!(!kids.contains(&first[0]));
    for node in [&a, &b] {
        until_fetched(node, &kids).await;
    }

    // node-c's copy is as old as the rest of the node.
    let index = c.copy().join("keys.json");
    let copied = std::fs::read(&index).unwrap();
    std::fs::write(&index, aged_index(&copied, aged)).unwrap();
    let modified = std::fs::metadata(&index).unwrap().modified().unwrap();
    std::fs::File::options()
        .write(true)
        .open(&index)
        .unwrap()
        .set_modified(modified - Duration::from_secs(aged as u64))
        .unwrap();

    // It starts before its kube-apiserver answers: from its copy. FetchKeys answers (its
    // kube-apiserver can start); Sign does not, with the reason.
    c.restart(&cluster).await;
    assert_eq!(fetched(&c).await, first.iter().cloned().collect());
    let mut kube_c = KubeApiserver::new(&c);
    kube_c.refresh().await;
    let refused = kube_c.sign().await.unwrap_err();
    assert_eq!(refused.code(), warrant_signer::Code::Unavailable);
    assert!(
        refused.message().contains(&format!(
            "may have retired the signing key {}: no signature until the store answers again",
            first[0]
        )),
        "{}",
        refused.message()
    );
    let readyz = c.readyz().await;
    assert!(readyz.contains("; signing nothing since "), "{readyz}");
    // On the node, keys list cannot read the Secret either: it lists the copy, saying so.
    let listed = warrant_ok(&[
        "keys".as_ref(),
        "list".as_ref(),
        "--key-secret".as_ref(),
        SECRET.as_ref(),
        "--kubeconfig".as_ref(),
        c.warrant.path("node.kubeconfig").as_os_str(),
        "--key-copy-dir".as_ref(),
        c.copy().as_os_str(),
    ]);
    assert!(
        listed.contains(&first[0])
            && listed
                .contains("store: Kubernetes Secret kube-system/warrant-keys cannot be read (")
            && listed.contains(&format!(
                "): the keys above are the local copy {}'s, written at ",
                c.copy().display()
            )),
        "{listed}"
    );

    // Its kube-apiserver answers: node-c reads the Secret, whose keys replace the copy's.
    c.apiserver.resume();
    until_fetched(&c, &kids).await;
    let mut caller = Caller::new(&[&a, &b, &c]);
    caller
        .run_until(
            "node-c has converged",
            Duration::from_secs(30),
            |_, signed| signed.len() == 3 && one_kid(signed).as_ref() == kids.last(),
        )
        .await;
    assert_eq!(c.copy_kids(), kids);
    let log = c.warrant.log();
    let line = log
        .lines()
        .find(|l| l.contains("the local copy was behind the key store"))
        .unwrap_or_else(|| panic!("node-c does not say it converged:\n{log}"));
    assert!(
        line.contains(&first[0]) && kids.iter().all(|k| line.contains(k.as_str())),
        "{line}"
    );
}

/// The keys in one PKCS#11 token (SoftHSM2) that every node's process opens: the Secret and
/// every copy hold public keys and locators only; the holder generates the successor in the
/// token, and every node signs with it; a node started with the store down signs through the
/// token with the objects its copy locates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_in_one_shared_token_sign_on_every_node() {
    use crate::held::no_private_key_under;
    use crate::hsm::SoftHsm;
    let mut cluster = cluster().await;
    let hsm = SoftHsm::new();
    let env = hsm.env();
    let uri = hsm.uri();
    generate(&cluster, &env, &["--key-pkcs11-uri", &uri]);
    let pkcs11 = vec!["--key-pkcs11-uri".to_owned(), uri.clone()];
    let a = Node::start_with(&cluster, "node-a", DEFAULTS, &env, &pkcs11).await;
    until("node-a holds the Lease", || {
        lease_holder(&cluster).as_deref() == Some("node-a")
    })
    .await;
    let b = Node::start_with(&cluster, "node-b", DEFAULTS, &env, &pkcs11).await;
    let mut c = Node::start_with(&cluster, "node-c", DEFAULTS, &env, &pkcs11).await;
    let first = secret_kids(&cluster);
    let mut caller = Caller::new(&[&a, &b, &c]);
    caller
        .run_until("every node signs", Duration::from_secs(30), |_, signed| {
            signed.len() == 3 && one_kid(signed).as_ref() == Some(&first[0])
        })
        .await;

    // The successor, generated in the token by the holder, published by every node; then it
    // signs everywhere.
    age_secret(&cluster, NAMESPACE, NAME, 6 * DAY + 60);
    until("the holder creates the successor", || {
        secret_kids(&cluster).len() == 2
    })
    .await;
    let kids = secret_kids(&cluster);
    for node in [&a, &b, &c] {
        until_fetched(node, &kids).await;
    }
    caller.refetch();
    caller.round().await;
    // Activation is made to have just passed, as it does in real time: moved further into the
    // past, the holder would find the first key retired for longer than the grace and destroy
    // it at once, before the other nodes had read the moved schedule.
    age_secret(
        &cluster,
        NAMESPACE,
        NAME,
        until_activation(&cluster, &kids[1]) + 1,
    );
    caller
        .run_until(
            "the successor signs on every node",
            Duration::from_secs(30),
            |_, signed| signed.len() == 3 && one_kid(signed).as_ref() == Some(&kids[1]),
        )
        .await;
    let secret = secret(&cluster);
    for (name, bytes) in secret.data.unwrap() {
        assert!(
            !String::from_utf8_lossy(&bytes.0).contains("PRIVATE KEY"),
            "{name}"
        );
    }
    for node in [&a, &b, &c] {
        no_private_key_under(&node.copy());
        let index = std::fs::read_to_string(node.copy().join("keys.json")).unwrap();
        assert_eq!(index.matches("\"heldIn\": \"pkcs11:").count(), 2, "{index}");
    }
    // The retired first key's object is destroyed by the holder.
    let deadline = Instant::now() + Duration::from_secs(30);
    while hsm.private_objects().matches("Private Key Object").count() != 1 {
        assert!(Instant::now() < deadline, "{}", hsm.private_objects());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The store goes down; node-c starts again, from its copy, and signs through the token.
    cluster.stop().await;
    c.restart(&cluster).await;
    caller
        .run_until(
            "node-c restarted with the store down",
            Duration::from_secs(30),
            |_, signed| signed.len() == 3 && one_kid(signed).as_ref() == Some(&kids[1]),
        )
        .await;
}

/// A running control plane that signs with kubeadm's `sa.key` (the same file on every node)
/// moves to one managed key set without a token failing: `keys generate --key-secret` imports
/// the key as the Secret's first key, then one node at a time its warrant starts and its
/// kube-apiserver switches to the signer. At every step, every token signed through any node
/// (with the key file or through warrant) verifies at every node; then rotation starts by
/// itself, from the imported key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_control_plane_moves_from_sa_key_one_node_at_a_time() {
    let cluster = cluster().await;
    let sa_dir = tempfile::tempdir().unwrap();
    let sa_key = warrant_token::SigningKey::generate(warrant_token::KeyType::Rsa2048).unwrap();
    let sa_path = sa_dir.path().join("sa.key");
    std::fs::write(&sa_path, sa_key.to_pkcs8_pem().unwrap().as_str()).unwrap();
    let mut caller = Caller {
        kube: ["node-a", "node-b", "node-c"]
            .into_iter()
            .map(|n| KubeApiserver::with_key_file(n, &sa_key))
            .collect(),
        tokens: Vec::new(),
    };
    caller
        .run_until(
            "kubeadm's control plane",
            Duration::from_secs(10),
            |_, s| s.len() == 3,
        )
        .await;

    // The key goes into the Secret, as it is: the same kid, signing from now on.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = admin_kubeconfig(&cluster, dir.path());
    warrant_ok(&[
        "keys".as_ref(),
        "generate".as_ref(),
        "--key-secret".as_ref(),
        SECRET.as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
        "--service-account-signing-key-file".as_ref(),
        sa_path.as_os_str(),
        "--service-account-max-token-expiration".as_ref(),
        "1h".as_ref(),
    ]);
    assert_eq!(secret_kids(&cluster), [sa_key.kid()]);

    // One node at a time: its warrant starts, then its kube-apiserver uses it.
    let mut nodes = Vec::new();
    for (i, name) in ["node-a", "node-b", "node-c"].into_iter().enumerate() {
        let node = Node::start(&cluster, name, DEFAULTS).await;
        caller.kube[i] = KubeApiserver::new(&node);
        nodes.push(node);
        caller
            .run_until(
                &format!("{name} switched"),
                Duration::from_secs(30),
                |_, signed| signed.len() == 3 && one_kid(signed).as_deref() == Some(sa_key.kid()),
            )
            .await;
    }
    for node in &nodes {
        assert_eq!(node.copy_kids(), [sa_key.kid()]);
    }

    // Rotation now happens by itself: the successor is published on every node, while the
    // imported key signs on.
    age_secret(&cluster, NAMESPACE, NAME, 6 * DAY + 60);
    until("the successor is created", || {
        secret_kids(&cluster).len() == 2
    })
    .await;
    let kids = secret_kids(&cluster);
    for node in &nodes {
        until_fetched(node, &kids).await;
    }
    caller.refetch();
    caller
        .run_until(
            "the successor is published",
            Duration::from_secs(30),
            |_, signed| signed.len() == 3 && one_kid(signed).as_deref() == Some(sa_key.kid()),
        )
        .await;
}

/// A schedule that cannot get a key to every node's kube-apiserver before it signs is refused
/// at startup, before warrant connects anywhere, saying why and what would do.
#[test]
fn a_shared_schedule_too_short_for_kube_apiserver_s_refresh_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["serve", "--service-account-issuer", CLUSTER_ISSUER])
        .args(["--key-secret", SECRET, "--kubeconfig"])
        .arg(dir.path().join("no-such.kubeconfig"))
        .arg("--key-copy-dir")
        .arg(dir.path().join("key-copy"))
        .args([
            "--key-rotation-period",
            "100s",
            "--key-publish-ahead",
            "60s",
        ])
        .args(["--secure-port", "0", "--service-account-signing-endpoint"])
        .arg(dir.path().join("signer.sock"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains(
            "--key-publish-ahead of 60s is too short for keys shared through a Kubernetes Secret"
        ) && said.contains("(at least 90s; the default is 24h)"),
        "{said}"
    );
    assert!(!dir.path().join("key-copy").exists());
}
