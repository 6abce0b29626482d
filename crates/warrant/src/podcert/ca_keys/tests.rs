use std::sync::Arc;

use rustls_pki_types::{CertificateDer, UnixTime};
use warrant_keys::{ManagedKey, ManagedKeySet, RotationPolicy};
use warrant_podcert::certificate::{LeafSpec, sign_leaf};
use warrant_podcert::{CaCertificate, CaSigner as _, KeyType, SignError};
use warrant_token::{Algorithm, RemoteKey, RemoteSignError, RemoteSignature, SigningKey};

use super::*;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(second).unwrap()
}

const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

fn policy(key_type: warrant_token::KeyType) -> RotationPolicy {
    RotationPolicy {
        key_type,
        rotation_period_seconds: 30 * DAY,
        publish_ahead_seconds: DAY,
        max_token_seconds: DAY,
    }
}

/// A key published at `published` that signs from `activates`.
fn managed(key: &SigningKey, published: i64, activates: i64) -> ManagedKey {
    ManagedKey::new(key.clone(), at(published), at(activates), DAY)
}

fn key_set(keys: Vec<ManagedKey>, now: i64) -> KeySet {
    let algorithm = keys[0].key().algorithm();
    let key_type = match algorithm {
        Algorithm::ES384 => warrant_token::KeyType::P384,
        _ => warrant_token::KeyType::P256,
    };
    ManagedKeySet::new(keys)
        .unwrap()
        .key_set_at(at(now), &policy(key_type))
        .unwrap()
}

/// A leaf for a fresh P-256 key, signed by `ca`.
async fn leaf(ca: &dyn CaSigner, now: i64) -> Vec<u8> {
    let pod_key = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let spec = LeafSpec {
        spki: pod_key.verifying_key().spki_der(),
        key_type: KeyType::EcdsaP256,
        spiffe_id: "spiffe://cluster.local/ns/demo/sa/app",
        dns_names: &[],
        not_before: at(now - 60),
        not_after: at(now + 3600),
    };
    sign_leaf(ca, &spec).await.unwrap().der
}

/// Verifies `leaf` as a TLS client certificate against `roots`, with rustls's verifier
/// (rustls-webpki): what a peer of the pod does.
fn webpki_accepts(leaf: &[u8], roots: &[CaCertificate], now: i64) -> bool {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store
            .add(CertificateDer::from(root.der().to_vec()))
            .unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(store))
        .build()
        .unwrap();
    let time = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now).unwrap()));
    verifier
        .verify_client_cert(&CertificateDer::from(leaf.to_vec()), &[], time)
        .is_ok()
}

#[tokio::test]
async fn a_managed_key_is_a_root_whose_leaves_verify_with_webpki() {
    for key_type in [warrant_token::KeyType::P256, warrant_token::KeyType::P384] {
        let key = SigningKey::generate(key_type).unwrap();
        let keys = key_set(vec![managed(&key, T0, T0)], T0 + 60);
        let set = Roots::default().ca_set(&keys, at(T0 + 60)).await.unwrap();
        let ca = set.signing.as_ref().unwrap();
        assert_eq!(set.trusted.len(), 1);
        let root = &set.trusted[0];
        assert_eq!(root, ca.certificate());
        assert_eq!(
            root.not_before(),
            at(T0),
            "valid from the key's publication"
        );
        assert_eq!(root.not_after(), at(T0 + ROOT_VALIDITY_SECONDS));
        let leaf = leaf(ca.as_ref(), T0 + 60).await;
        assert!(
            webpki_accepts(&leaf, &set.trusted, T0 + 120),
            "{key_type:?}"
        );
        // Not against another key's root.
        let other = SigningKey::generate(key_type).unwrap();
        let other = key_set(vec![managed(&other, T0, T0)], T0 + 60);
        let other = Roots::default().ca_set(&other, at(T0 + 60)).await.unwrap();
        assert!(!webpki_accepts(&leaf, &other.trusted, T0 + 120));
    }
}

#[tokio::test]
async fn replicas_make_equivalent_roots_of_one_key() {
    let key = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let keys = key_set(vec![managed(&key, T0, T0)], T0);
    let one = Roots::default().ca_set(&keys, at(T0)).await.unwrap();
    let two = Roots::default().ca_set(&keys, at(T0)).await.unwrap();
    assert!(warrant_podcert::equivalent_roots(
        one.trusted[0].der(),
        two.trusted[0].der()
    ));
    // A leaf one replica signed verifies against the other's root.
    let leaf = leaf(one.signing.as_ref().unwrap().as_ref(), T0 + 60).await;
    assert!(webpki_accepts(&leaf, &two.trusted, T0 + 120));
}

#[tokio::test(start_paused = true)]
async fn the_next_root_is_published_before_it_signs_and_the_old_stays_until_removed() {
    let old = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let next = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let switch = T0 + 10 * DAY;
    // The successor is published a day before it signs.
    let keys = key_set(
        vec![managed(&old, T0, T0), managed(&next, switch - DAY, switch)],
        switch - DAY,
    );
    let clock = Clock::follows_tokio(at(switch - DAY));
    let mut roots = Roots::default();
    let first = roots.ca_set(&keys, clock.now()).await.unwrap();
    let root_of = |set: &CaSet| set.signing.as_ref().unwrap().certificate().clone();
    let old_root = root_of(&first);
    assert_eq!(first.trusted.len(), 2, "the next root is published first");
    assert_eq!(first.trusted[0], old_root, "the signing root comes first");

    let (feed, keys_rx) = watch::channel(keys);
    let (cas, mut cas_rx) = watch::channel(first);
    let stop = CancellationToken::new();
    let task = tokio::spawn(follow(keys_rx, roots, cas, clock.clone(), stop.clone()));
    // At the activation, without a new key set, the next key signs.
    cas_rx.changed().await.unwrap();
    assert_eq!(clock.now(), at(switch));
    let switched = cas_rx.borrow_and_update().clone();
    let next_root = root_of(&switched);
    assert_ne!(next_root, old_root);
    assert_eq!(switched.trusted, [next_root.clone(), old_root.clone()]);
    let leaf = leaf(switched.signing.as_ref().unwrap().as_ref(), switch).await;
    assert!(webpki_accepts(&leaf, &switched.trusted, switch + 60));

    // The old key removed from the store (its last leaf expired): its root goes.
    feed.send_replace(key_set(
        vec![managed(&old, T0, T0), managed(&next, switch - DAY, switch)],
        switch + 2 * DAY,
    ));
    cas_rx.changed().await.unwrap();
    assert_eq!(cas_rx.borrow().trusted, [next_root]);
    stop.cancel();
    task.await.unwrap();
}

/// A key held in a holder that cannot be reached.
struct Unreachable;

impl RemoteKey for Unreachable {
    fn sign(&self, _: Vec<u8>) -> RemoteSignature<'_> {
        Box::pin(std::future::ready(Err(RemoteSignError {
            unavailable: true,
            source: Arc::new(std::io::Error::other("the token is gone")),
        })))
    }
    fn describe(&self) -> String {
        "an unreachable token".to_owned()
    }
    fn locator(&self) -> String {
        "pkcs11:token=gone".to_owned()
    }
    fn unavailable(&self) -> Option<String> {
        Some("the token is gone".to_owned())
    }
}

#[tokio::test]
async fn a_holder_out_of_reach_signs_nothing_and_the_pcr_waits() {
    let key = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let keys = key_set(vec![managed(&key, T0, T0)], T0);
    let mut roots = Roots::default();
    let made = roots.ca_set(&keys, at(T0)).await.unwrap();
    // The same key, now unreachable: the root already made is kept, signing is unavailable.
    let held = KeyCa::with_root(
        SigningKey::remote(key.verifying_key().clone(), Arc::new(Unreachable)),
        made.trusted[0].clone(),
    )
    .unwrap();
    match held.sign(b"tbs".to_vec()).await {
        Err(SignError::Unavailable(why)) => assert!(why.to_string().contains("gone")),
        other => panic!("{other:?}"),
    }
    // A root that cannot be made now is an error naming the key, not a set without it.
    let remote = SigningKey::remote(key.verifying_key().clone(), Arc::new(Unreachable));
    let unreachable = key_set(vec![managed(&remote, T0, T0)], T0);
    let error = Roots::default()
        .ca_set(&unreachable, at(T0))
        .await
        .unwrap_err();
    assert!(
        error.contains(key.kid()) && error.contains("gone"),
        "{error}"
    );
}

#[tokio::test]
async fn the_signer_is_not_ready_while_the_ca_keys_holder_is_out_of_reach() {
    let key = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let keys = key_set(vec![managed(&key, T0, T0)], T0);
    let made = Roots::default().ca_set(&keys, at(T0)).await.unwrap();
    assert_eq!(super::super::cannot_sign(&made, at(T0 + 60)), None);

    // The CA in force, its key's token gone: readiness says so, naming the CA and the holder's
    // reason (the key's own root, made before, is still the one published).
    let held = KeyCa::with_root(
        SigningKey::remote(key.verifying_key().clone(), Arc::new(Unreachable)),
        made.trusted[0].clone(),
    )
    .unwrap();
    let away = CaSet {
        signing: Ok(Arc::new(held)),
        trusted: made.trusted.clone(),
    };
    let why = super::super::cannot_sign(&away, at(T0 + 60)).unwrap();
    assert_eq!(
        why,
        format!(
            "the pod certificate CA {} cannot sign now: the token is gone",
            made.trusted[0].key_id()
        )
    );
}

/// A next key whose root cannot be made yet (its holder out of reach) leaves the CA in force
/// signing; only once that key is due to sign does the set sign nothing, saying why.
#[tokio::test(start_paused = true)]
async fn a_next_root_that_cannot_be_made_stops_nothing_until_it_is_due() {
    let active = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let next_public = SigningKey::generate(warrant_token::KeyType::P256).unwrap();
    let next = SigningKey::remote(next_public.verifying_key().clone(), Arc::new(Unreachable));
    let switch = T0 + 10 * DAY;
    let clock = Clock::follows_tokio(at(switch - DAY));
    let first = key_set(vec![managed(&active, T0, T0)], switch - DAY);
    let mut roots = Roots::default();
    let set = roots.ca_set(&first, clock.now()).await.unwrap();
    let (feed, keys) = watch::channel(first);
    let (cas, mut cas_rx) = watch::channel(set);
    let stop = CancellationToken::new();
    let task = tokio::spawn(follow(keys, roots, cas, clock.clone(), stop.clone()));
    feed.send_replace(key_set(
        vec![
            managed(&active, T0, T0),
            managed(&next, switch - DAY, switch),
        ],
        switch - DAY,
    ));
    // Retried meanwhile; the active CA signs on.
    tokio::time::sleep(ROOT_RETRY * 3).await;
    assert!(cas_rx.borrow_and_update().signing.is_ok());
    // Its time come, the next key cannot sign without its root: nothing signs, and why.
    tokio::time::sleep(Duration::from_secs(u64::try_from(DAY).unwrap())).await;
    let why = cas_rx.borrow().signing.clone().unwrap_err();
    assert!(why.contains(next.kid()), "{why}");
    stop.cancel();
    task.await.unwrap();
}
