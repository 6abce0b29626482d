//! The pod certificate CA kept in warrant's key holders (`--pod-certificate-ca-key-dir` or
//! `--pod-certificate-ca-key-secret`, with `--key-pkcs11-uri` or `--key-kms-uri` holding the
//! private keys): a managed key set of its own, beside the token keys, rotated on its own
//! schedule by the same key manager, so it inherits everything the token keys have: one
//! writer elected through a Lease, a node's local copy, a holder that vouches for each key,
//! revocations that stay revoked, and `warrant keys list|rotate|revoke` on its store.
//!
//! Each key of the set is a root CA. Its certificate is not stored: each replica makes it
//! from the key's record ([`RootTemplate`]: subject `CN=warrant pod CA <kid>`, valid from the
//! key's publication for [`ROOT_VALIDITY_SECONDS`]) and signs it with the key, in its holder.
//! Every replica so makes the same certificate but for the signature's randomness, and the
//! ClusterTrustBundle keeper takes such roots for one another (`equivalent_roots`), so
//! replicas never rewrite each other's bundle.
//!
//! The schedule is the token keys': a new key is published (in the ClusterTrustBundles and
//! the SPIFFE bundle) `--pod-certificate-ca-publish-ahead` before it signs its first leaf, and
//! a retired key stays published until the last leaf it signed has expired (the longest leaf
//! lifetime of the policy, recorded on the key). A root's own validity is long on purpose:
//! what ends trust in a CA key is its leaving the bundles (rotation, or
//! `warrant keys revoke`), which relying parties see at their next read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use warrant_clock::Clock;
use warrant_keys::KeySet;
use warrant_podcert::{CaSet, CaSigner, KeyCa};

/// How long a managed CA key's root certificate is valid from the key's publication: ten
/// years. Not what bounds trust in the key (its place in the bundles does); long, so that a
/// rotation that stalls never leaves a CA that can no longer sign an hour-long leaf.
pub(crate) const ROOT_VALIDITY_SECONDS: i64 = 10 * 365 * 24 * 3600;

/// The roots this process has made, by kid: each is made once (one signature in the holder),
/// then reused for as long as its key is in force.
#[derive(Default)]
pub(crate) struct Roots {
    made: HashMap<String, Arc<KeyCa>>,
}

impl Roots {
    /// The CA set of `keys` at `now`: the key signing at `now` as the CA, every key in force
    /// as a trusted root (the signing one first). Fails, naming the key, if a root cannot be
    /// made (its holder out of reach): publishing a set without it would drop a root whose
    /// leaves are still valid.
    pub(crate) async fn ca_set(&mut self, keys: &KeySet, now: Timestamp) -> Result<CaSet, String> {
        let published = keys.published_keys();
        self.made
            .retain(|kid, _| published.iter().any(|p| p.key.kid() == kid));
        let mut trusted = Vec::with_capacity(published.len());
        for key in published {
            let root = match self.made.get(key.key.kid()) {
                Some(root) => root.clone(),
                None => {
                    let root = KeyCa::root(&key.key, key.published_at, ROOT_VALIDITY_SECONDS);
                    let root = Arc::new(root.await?);
                    self.made.insert(root.kid().to_owned(), root.clone());
                    root
                }
            };
            trusted.push(root);
        }
        let signing = match keys.signing_at(now) {
            Ok(key) => trusted
                .iter()
                .find(|root| root.kid() == key.kid())
                .map(|root| Arc::clone(root) as Arc<dyn CaSigner>)
                .ok_or_else(|| format!("CA key {} has no root", key.kid())),
            Err(stopped) => Err(stopped.to_string()),
        };
        // The signing key's root first, then the others in the key set's order.
        if let Ok(ca) = &signing {
            let kid = ca.certificate().key_id();
            trusted.sort_by_key(|root| root.certificate().key_id() != kid);
        }
        Ok(CaSet {
            signing,
            trusted: trusted.iter().map(|r| r.certificate().clone()).collect(),
        })
    }
}

impl Roots {
    /// True if the root of key `kid` is made.
    fn has(&self, kid: &str) -> bool {
        self.made.contains_key(kid)
    }

    /// The certificate key ID of key `kid`'s root, or an empty string.
    fn key_id(&self, kid: &str) -> String {
        self.made
            .get(kid)
            .map(|root| root.certificate().key_id())
            .unwrap_or_default()
    }
}

/// True when two sets would publish and sign the same: the same roots, the same CA.
fn same(a: &CaSet, b: &CaSet) -> bool {
    let signing = |s: &CaSet| match &s.signing {
        Ok(ca) => Ok(ca.certificate().der().to_vec()),
        Err(why) => Err(why.clone()),
    };
    a.trusted == b.trusted && signing(a) == signing(b)
}

/// How long after a root could not be made it is tried again.
const ROOT_RETRY: Duration = Duration::from_secs(10);

/// Keeps `cas` the CA set of the latest key set in `keys`, until `stop`: at each new key set,
/// and when a successor key starts signing. While a root cannot be made, the roots already
/// published stay, the set signs nothing (saying why), and it is tried again every
/// [`ROOT_RETRY`].
pub(crate) async fn follow(
    mut keys: watch::Receiver<KeySet>,
    mut roots: Roots,
    cas: watch::Sender<CaSet>,
    clock: Clock,
    stop: CancellationToken,
) {
    loop {
        let set = keys.borrow_and_update().clone();
        let now = clock.now();
        let retry = match roots.ca_set(&set, now).await {
            Ok(next) => {
                cas.send_if_modified(|current| {
                    let changed = !same(current, &next);
                    if changed {
                        *current = next;
                    }
                    changed
                });
                None
            }
            Err(why) => {
                tracing::warn!(error = %why, retry_in = ?ROOT_RETRY, "the pod certificate CA's roots could not be made; the roots already published stay");
                // The CA in force signs on if it is still the key that signs now (a next key's
                // root is what failed); a key that signs now without its root cannot.
                let signing_now = set.signing_at(now).ok().map(|k| k.kid().to_owned());
                cas.send_if_modified(|current| {
                    let still = match (&current.signing, &signing_now) {
                        (Ok(ca), Some(kid)) => {
                            roots.has(kid) && ca.certificate().key_id() == roots.key_id(kid)
                        }
                        _ => false,
                    };
                    if still {
                        return false;
                    }
                    current.signing = Err(why);
                    true
                });
                Some(ROOT_RETRY)
            }
        };
        let switch = set
            .signing_changes()
            .find(|at| *at > now)
            .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or_default());
        let wake = match (retry, switch) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async {
            match wake {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            changed = keys.changed() => if changed.is_err() { return },
            () = sleep => {}
        }
    }
}

#[cfg(test)]
mod tests;
