//! Managed keys rotating under the signer, with the clock as a parameter: FetchKeys lists the
//! next key before it signs and hints kube-apiserver to come back by the next change, Sign
//! switches at the activation second, and a retired key stays listed until its tokens expire.

use warrant_keys::{ManagedKeySet, RotationPolicy};
use warrant_signer::proto::{FetchKeysRequest, SignJwtRequest};
use warrant_token::{ExpirationPolicy, KeyType, SigningKey};

use crate::support::*;

const DAY: i64 = 86_400;

fn policy() -> RotationPolicy {
    RotationPolicy {
        key_type: KeyType::P256,
        rotation_period_seconds: 7 * DAY,
        publish_ahead_seconds: DAY,
        max_token_seconds: DAY,
    }
}

fn at(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(second).unwrap()
}

async fn fetch(env: &mut Env) -> warrant_signer::proto::FetchKeysResponse {
    env.client
        .fetch_keys(FetchKeysRequest {})
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn fetch_keys_follows_the_rotation_and_sign_switches_on_the_second() {
    let p = policy();
    let first = ManagedKeySet::default()
        .rotate(&p, at(NOW), SigningKey::generate)
        .unwrap()
        .unwrap();
    let a = first.keys()[0].kid().to_owned();
    let expiration = ExpirationPolicy {
        max_seconds: Some(DAY),
        ..ExpirationPolicy::default()
    };
    let mut env = start(first.key_set_at(at(NOW), &p).unwrap(), expiration).await;
    let kids = |keys: &warrant_signer::proto::FetchKeysResponse| -> Vec<String> {
        keys.keys.iter().map(|k| k.key_id.clone()).collect()
    };
    let started = fetch(&mut env).await;
    assert_eq!(kids(&started), std::slice::from_ref(&a));
    assert_eq!(started.data_timestamp.unwrap().seconds, NOW);
    // The successor is due in six days: come back within the hour.
    assert_eq!(started.refresh_hint_seconds, 3600);

    // Six days on, the successor B is published; it signs a day later.
    let created = NOW + 6 * DAY;
    env.clock.set(at(created));
    let with_b = first
        .rotate(&p, at(created), SigningKey::generate)
        .unwrap()
        .unwrap();
    let b = with_b.keys()[1].kid().to_owned();
    env.state
        .issuer()
        .set_keys(with_b.key_set_at(at(created), &p).unwrap());
    let listed = fetch(&mut env).await;
    assert_eq!(kids(&listed), [a.clone(), b.clone()]);
    assert_eq!(listed.data_timestamp.unwrap().seconds, created);
    let sign = |claims_at: i64| SignJwtRequest {
        claims: encode_claims(&pod_claims(claims_at, 3600)),
    };
    let before = env.client.sign(sign(created)).await.unwrap().into_inner();
    assert_eq!(
        header_kid(&before.header),
        a,
        "B is published, not signing yet"
    );

    // At the activation second, B signs: the snapshot already held the schedule.
    let activation = NOW + 7 * DAY;
    env.clock.set(at(activation - 1));
    let last = env.client.sign(sign(activation - 1)).await.unwrap();
    assert_eq!(header_kid(&last.into_inner().header), a);
    env.clock.set(at(activation));
    let switched = env.client.sign(sign(activation)).await.unwrap();
    assert_eq!(header_kid(&switched.into_inner().header), b);

    // A, retired, stays listed until its last token (a day) and the leeway have passed.
    let removal = activation + DAY + 60;
    let still = with_b.key_set_at(at(removal - 1), &p).unwrap();
    env.clock.set(at(removal - 1));
    env.state.issuer().set_keys(still);
    let listed = fetch(&mut env).await;
    assert_eq!(kids(&listed), [b.clone(), a.clone()]);
    // The hint never falls under a minute, even a second before a change.
    assert_eq!(listed.refresh_hint_seconds, 60);
    let gone = with_b
        .rotate(&p, at(removal), SigningKey::generate)
        .unwrap()
        .unwrap();
    env.clock.set(at(removal));
    env.state
        .issuer()
        .set_keys(gone.key_set_at(at(removal), &p).unwrap());
    let listed = fetch(&mut env).await;
    assert_eq!(kids(&listed), [b]);
    assert_eq!(listed.data_timestamp.unwrap().seconds, removal);
}
