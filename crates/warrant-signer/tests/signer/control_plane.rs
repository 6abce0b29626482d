//! Three control-plane nodes in virtual time, across two rotations and a change of writer: each
//! node's key manager follows one shared store (a `MemoryStore` standing in for the key Secret,
//! its change notifications lost (`MemoryStore::deaf`), the Lease a switch the test flips), publishes to its issuer,
//! and its signer answers that node's kube-apiserver. Beside each, a model of kube-apiserver
//! 1.36's key cache (`pkg/serviceaccount/externaljwt/plugin/keycache.go`): FetchKeys when it
//! starts, then again exactly `refresh_hint_seconds` later, every time.
//!
//! Every second every node signs, and the key it signs with must be in every started
//! kube-apiserver's cache already: kube-apiserver verifies with its cache, and a publish-ahead
//! of `MIN_SHARED_PUBLISH_AHEAD_SECONDS` covers a follower's lag plus the refresh hint's floor.
//! Each FetchKeys must still list the key of every token signed so far that has not expired.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tonic::Request;
use warrant_audit::Auditor;
use warrant_clock::Clock;
use warrant_issuer::{Issuer, Settings};
use warrant_keys::{
    KeyManager, KeyManagerTask, KeyMetrics, KeySet, MIN_SHARED_PUBLISH_AHEAD_SECONDS, MemoryStore,
    RotationPolicy, Writer,
};
use warrant_signer::proto::external_jwt_signer_server::ExternalJwtSigner as _;
use warrant_signer::proto::{FetchKeysRequest, SignJwtRequest};
use warrant_signer::{Signer, SignerMetrics};
use warrant_token::{ExpirationPolicy, KeyType};

use crate::support::*;

/// Token lifetime: kube-apiserver's smallest acceptable Metadata answer.
const TOKEN_SECONDS: i64 = 600;

/// The shortest schedule replicas sharing a store accept.
fn policy() -> RotationPolicy {
    RotationPolicy {
        key_type: KeyType::P256,
        rotation_period_seconds: MIN_SHARED_PUBLISH_AHEAD_SECONDS + 10,
        publish_ahead_seconds: MIN_SHARED_PUBLISH_AHEAD_SECONDS,
        max_token_seconds: TOKEN_SECONDS,
    }
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

/// One control-plane node: its manager, issuer and signer, and its kube-apiserver's cache.
struct Node {
    signer: Signer,
    lease: watch::Sender<bool>,
    task: Option<KeyManagerTask>,
    /// The kids of kube-apiserver's last FetchKeys; `None` before it started.
    cache: Option<BTreeSet<String>>,
    /// When kube-apiserver next calls FetchKeys.
    next_fetch: i64,
}

impl Node {
    async fn open(store: &MemoryStore, clock: &Clock, leads: bool, kube_starts: i64) -> Node {
        let (lease, leading) = watch::channel(leads);
        let manager = KeyManager::open(
            store.clone().deaf(),
            policy(),
            Writer::WhileLeader(leading),
            KeyMetrics::new(),
            clock.now(),
        )
        .await
        .unwrap();
        let expiration = ExpirationPolicy {
            max_seconds: Some(TOKEN_SECONDS),
            ..ExpirationPolicy::default()
        };
        let settings = Settings {
            issuers: vec![ISSUER.into()],
            api_audiences: vec![ISSUER.into()],
            jwks_uri: format!("{ISSUER}/openid/v1/jwks"),
            expiration,
            signature_cache_entries: 0,
            jwks_x5c: false,
        };
        let keys = manager.key_set(clock.now()).unwrap();
        let issuer = Issuer::new(settings, keys, clock.clone(), Auditor::disabled());
        let published = issuer.clone();
        let task = manager
            .spawn(clock.clone(), move |keys: KeySet| published.set_keys(keys))
            .unwrap();
        Node {
            signer: Signer::new(issuer, SignerMetrics::default()),
            lease,
            task: Some(task),
            cache: None,
            next_fetch: kube_starts,
        }
    }

    /// kube-apiserver's FetchKeys, if due at `now`: its cache, and when it comes back.
    async fn refresh(&mut self, now: i64) {
        if now < self.next_fetch {
            return;
        }
        let keys = self
            .signer
            .fetch_keys(Request::new(FetchKeysRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert!(keys.refresh_hint_seconds > 0, "kube-apiserver refuses it");
        self.cache = Some(keys.keys.into_iter().map(|k| k.key_id).collect());
        self.next_fetch = now + keys.refresh_hint_seconds;
    }

    /// kube-apiserver's Sign of a token issued at `now`: the kid of its header.
    async fn sign(&self, now: i64) -> String {
        let signed = self
            .signer
            .sign(Request::new(SignJwtRequest {
                claims: encode_claims(&pod_claims(now, TOKEN_SECONDS)),
            }))
            .await
            .unwrap()
            .into_inner();
        header_kid(&signed.header)
    }
}

/// Runs the control plane for two rotations, kube-apiservers starting at `kube_starts` seconds;
/// node 0 writes until it goes away between the rotations, then node 1. Returns the kids that
/// signed, in order.
async fn control_plane(kube_starts: [i64; 3]) -> Vec<String> {
    let store = MemoryStore::new();
    let clock = Clock::follows_tokio(at(NOW));
    let mut nodes = Vec::new();
    for (i, start) in kube_starts.into_iter().enumerate() {
        nodes.push(Node::open(&store, &clock, i == 0, NOW + start).await);
    }
    let p = policy();
    let handover = NOW + p.rotation_period_seconds + 5;
    let end = NOW + 2 * p.rotation_period_seconds + 60;
    let mut signed: Vec<(String, i64)> = Vec::new();
    let mut signers: Vec<String> = Vec::new();
    let mut now = clock.now().as_second();
    while now < end {
        if now >= handover && nodes[0].task.is_some() {
            // The writer dies without a word; another node takes the Lease.
            nodes[0].task = None;
            nodes[0].cache = None;
            nodes[0].lease.send_replace(false);
            nodes[1].lease.send_replace(true);
        }
        for node in nodes.iter_mut().filter(|n| n.task.is_some()) {
            node.refresh(now).await;
            let cache = node.cache.as_ref().unwrap_or(&BTreeSet::new()).clone();
            for (kid, exp) in &signed {
                if node.cache.is_some() && *exp > now {
                    assert!(
                        cache.contains(kid),
                        "at +{}s a FetchKeys dropped {kid}, whose token lives until +{}s",
                        now - NOW,
                        exp - NOW
                    );
                }
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            if node.cache.is_none() || node.task.is_none() {
                continue;
            }
            let kid = node.sign(now).await;
            for (j, other) in nodes.iter().enumerate() {
                if let Some(cache) = &other.cache {
                    assert!(
                        cache.contains(&kid),
                        "at +{}s node {i} signed with {kid}, which node {j}'s kube-apiserver does not have (it has {cache:?}, refreshes at +{}s)",
                        now - NOW,
                        other.next_fetch - NOW
                    );
                }
            }
            if signers.last() != Some(&kid) {
                signers.push(kid.clone());
            }
            signed.push((kid, now + TOKEN_SECONDS));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        now = clock.now().as_second();
    }
    signers
}

#[tokio::test(start_paused = true)]
async fn every_node_s_kube_apiserver_has_each_key_before_any_node_signs_with_it() {
    // kube-apiservers that start at every phase of the one-minute floor of the refresh hint,
    // so one of them always asks just before its node hears of a new key.
    for base in (0..60).step_by(10) {
        let starts = [base, (base + 23) % 60, (base + 47) % 60];
        let signers = control_plane(starts).await;
        assert_eq!(
            signers.len(),
            3,
            "two rotations, signing with one key after the other: {signers:?}"
        );
    }
}
