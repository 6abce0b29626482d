//! Revocations that stay revoked, with the key manager and the local copy on real directories,
//! driven by Tokio's paused clock: a store put back to before a revocation, and a store
//! refilled from a node's older copy, never bring the revoked key back into the keys a replica
//! publishes, and the writer repairs the store forward.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};
use warrant_clock::Clock;
use warrant_token::SigningKey;

use super::*;
use crate::KeySet;
use crate::copy::{CopiedStore, LocalCopy};
use crate::manager::{KeyManager, KeyManagerTask, Writer};
use crate::metrics::KeyMetrics;
use crate::store::{KeyStore, MemoryStore};
use crate::test_support::*;

#[test]
fn a_read_that_forgets_a_revocation_or_goes_back_is_refused_with_the_reason() {
    let before = ManagedKeySet::default()
        .rotate(&policy(), at(T0), SigningKey::generate)
        .unwrap()
        .unwrap();
    let revoked_kid = before.keys()[0].kid().to_owned();
    let after = before
        .revoke(&revoked_kid, &policy(), at(T0 + HOUR), SigningKey::generate)
        .unwrap()
        .keys;
    assert_eq!(check(&after, 4, &after, 4), Ok(()));
    assert_eq!(check(&after, 4, &after, 5), Ok(()));
    assert_eq!(
        check(&after, 4, &before, 5),
        Err(Rollback::RevokedKeyListed {
            kid: revoked_kid.clone()
        })
    );
    let forgotten = ManagedKeySet::new(after.keys().to_vec()).unwrap();
    let refused = check(&after, 4, &forgotten, 5).unwrap_err();
    assert_eq!(
        refused,
        Rollback::RevocationDropped {
            kid: revoked_kid.clone()
        }
    );
    assert_eq!(refused.reason(), "revocation_dropped");
    let refused = check(&after, 4, &after, 3).unwrap_err();
    assert_eq!(refused.reason(), "generation_back");
    assert_eq!(
        refused.to_string(),
        "its key set is generation 3, older than generation 4 read or written before: an older key set was put back"
    );
}

/// One replica: its manager over the shared store, copied into its own directory, publishing
/// every key set it serves.
struct Replica {
    _task: KeyManagerTask,
    published: mpsc::UnboundedReceiver<KeySet>,
    registry: Registry,
}

impl Replica {
    async fn open(
        store: &MemoryStore,
        copy: &Arc<LocalCopy>,
        writer: Writer,
        clock: &Clock,
    ) -> Replica {
        let metrics = KeyMetrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let copied = CopiedStore::new(store.clone(), copy.clone());
        let manager = match copy.read().await.unwrap() {
            Some(seed) => {
                KeyManager::open_from_copy(copied, policy(), writer, metrics, clock.now(), seed)
                    .await
            }
            None => KeyManager::open(copied, policy(), writer, metrics, clock.now()).await,
        }
        .unwrap();
        let (sender, published) = mpsc::unbounded_channel();
        let task = manager
            .spawn(clock.clone(), move |keys: KeySet| {
                sender.send(keys).unwrap();
            })
            .unwrap();
        Replica {
            _task: task,
            published,
            registry,
        }
    }

    /// The next key set published (the first comes once the task runs).
    async fn next(&mut self) -> KeySet {
        self.published.recv().await.unwrap()
    }

    /// Every key set published since the last call; the last of them is in force.
    fn drain(&mut self) -> Vec<KeySet> {
        std::iter::from_fn(|| self.published.try_recv().ok()).collect()
    }

    fn rollbacks(&self, reason: &str) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        let line = format!("warrant_keys_store_rollbacks_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .unwrap_or("0")
            .to_owned()
    }
}

/// Lets the replicas hear of the store's last change and act on it (a second of Tokio's paused
/// clock: the watch fires at once).
async fn settle() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

fn listed(keys: &KeySet) -> Vec<String> {
    keys.verifying()
        .iter()
        .map(|k| k.kid().to_owned())
        .collect()
}

/// `warrant keys revoke KID`, as the operator runs it against the store: the next generation.
async fn revoke(store: &MemoryStore, kid: &str, clock: &Clock) {
    let stored = store.load().await.unwrap().unwrap();
    let revoked = stored
        .keys
        .revoke(kid, &policy(), clock.now(), SigningKey::generate)
        .unwrap()
        .keys;
    store.save(&revoked, Some(&stored.version)).await.unwrap();
}

/// Asserts that no key set in `sets` lists `kid`, and that the last one refuses it by name.
fn never_listed(sets: &[KeySet], kid: &str, who: &str) {
    for keys in sets {
        assert!(
            !listed(keys).iter().any(|k| k == kid),
            "{who} lists the revoked key {kid} again: {:?}",
            listed(keys)
        );
    }
}

/// The Secret put back to its contents before a revocation (an etcd restore, a backup applied
/// again): neither the writer nor the follower takes the revoked key back, in memory or in
/// their copies; both count and report the rollback; the writer writes the revocation back,
/// numbered after everything seen, and the follower then accepts the repaired store.
#[tokio::test(start_paused = true)]
async fn a_store_put_back_to_before_a_revocation_never_brings_the_key_back() {
    let temp = tempfile::tempdir().unwrap();
    let clock = clock();
    let store = MemoryStore::new();
    let copy_a = Arc::new(LocalCopy::new(temp.path().join("a"), None));
    let copy_b = Arc::new(LocalCopy::new(temp.path().join("b"), None));
    let mut a = Replica::open(&store, &copy_a, Writer::Always, &clock).await;
    let mut b = Replica::open(&store, &copy_b, Writer::Never, &clock).await;
    let leaked = listed(&a.next().await)[0].clone();
    assert_eq!(listed(&b.next().await), std::slice::from_ref(&leaked));
    let before_revocation = store.files().unwrap();

    revoke(&store, &leaked, &clock).await;
    settle().await;
    for replica in [&mut a, &mut b] {
        let keys = replica.drain();
        let last = keys.last().expect("the revocation is published");
        assert!(!listed(last).contains(&leaked));
        assert_eq!(last.revoked(), std::slice::from_ref(&leaked));
    }
    let revoked_generation = store.load().await.unwrap().unwrap().generation;

    // The store's previous contents are put back: the key is listed and signs again there.
    store.restore(before_revocation);
    settle().await;
    let (from_a, from_b) = (a.drain(), b.drain());
    never_listed(&from_a, &leaked, "the writer");
    never_listed(&from_b, &leaked, "the follower");
    assert_eq!(a.rollbacks("revoked_key_listed"), "1");

    // The writer repaired the store forward: the revocation is back, numbered after both.
    let repaired = store.load().await.unwrap().unwrap();
    assert!(repaired.generation > revoked_generation, "{repaired:?}");
    assert!(!repaired.keys.keys().iter().any(|k| k.kid() == leaked));
    assert!(repaired.keys.revocations().iter().any(|r| r.kid == leaked));
    // Both copies hold the revocation: a restart of either would not take the key back.
    for copy in [&copy_a, &copy_b] {
        let seed = copy.read().await.unwrap().unwrap();
        assert!(seed.keys.revocations().iter().any(|r| r.kid == leaked));
        assert!(!seed.keys.keys().iter().any(|k| k.kid() == leaked));
    }

    // Long after, through rotations, it never comes back.
    tokio::time::sleep(Duration::from_secs((15 * DAY) as u64)).await;
    never_listed(&a.drain(), &leaked, "the writer");
    never_listed(&b.drain(), &leaked, "the follower");
}

/// A node whose copy is older than a revocation (it was down when the key was revoked) takes
/// the Lease while the Secret is deleted, and refills it from that copy: the replica that saw
/// the revocation refuses the refill and keeps the key out; once it holds the Lease, it writes
/// the revocation back, and the stale node then drops the key too.
#[tokio::test(start_paused = true)]
async fn a_store_refilled_from_an_older_copy_never_brings_the_key_back() {
    let temp = tempfile::tempdir().unwrap();
    let clock = clock();
    let store = MemoryStore::new();
    let copy_a = Arc::new(LocalCopy::new(temp.path().join("a"), None));
    let copy_b = Arc::new(LocalCopy::new(temp.path().join("b"), None));
    let (a_leads, a_leading) = watch::channel(true);
    let mut a = Replica::open(&store, &copy_a, Writer::WhileLeader(a_leading), &clock).await;
    let leaked = listed(&a.next().await)[0].clone();
    // B runs long enough to copy the first key set, and goes down.
    let mut b = Replica::open(&store, &copy_b, Writer::Never, &clock).await;
    b.next().await;
    drop(b);

    // The key leaks and is revoked; A hears of it, then steps down; the Secret is deleted.
    revoke(&store, &leaked, &clock).await;
    settle().await;
    assert!(!listed(a.drain().last().unwrap()).contains(&leaked));
    a_leads.send_replace(false);
    store.clear();
    settle().await;

    // B comes back, holding the Lease and the older copy, and refills the Secret from it.
    let (b_leads, b_leading) = watch::channel(true);
    let mut b = Replica::open(&store, &copy_b, Writer::WhileLeader(b_leading), &clock).await;
    settle().await;
    let refilled = store.load().await.unwrap().unwrap();
    assert!(refilled.keys.keys().iter().any(|k| k.kid() == leaked));
    b.drain();
    // A refuses it, and keeps the key out.
    never_listed(&a.drain(), &leaked, "the replica that saw the revocation");
    assert_eq!(a.rollbacks("revoked_key_listed"), "1");
    let seed = copy_a.read().await.unwrap().unwrap();
    assert!(seed.keys.revocations().iter().any(|r| r.kid == leaked));

    // The Lease moves to A: it writes the revocation back, and B takes it.
    b_leads.send_replace(false);
    a_leads.send_replace(true);
    settle().await;
    let repaired = store.load().await.unwrap().unwrap();
    assert!(!repaired.keys.keys().iter().any(|k| k.kid() == leaked));
    assert!(repaired.generation > refilled.generation);
    never_listed(&a.drain(), &leaked, "the replica that saw the revocation");
    let last = b.drain().pop().expect("B takes the repaired store");
    assert!(!listed(&last).contains(&leaked));
    assert_eq!(last.revoked(), std::slice::from_ref(&leaked));
    let seed = copy_b.read().await.unwrap().unwrap();
    assert!(seed.keys.revocations().iter().any(|r| r.kid == leaked));
}
