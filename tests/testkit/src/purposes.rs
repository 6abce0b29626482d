//! The check every key holder runs that keys made for one purpose serve no other
//! ([`KeyPurpose`]): token keys and the pod certificate CA's keys may share one holder, and the
//! stores that list them hold nothing secret, so the holder itself must tell them apart. It
//! asserts what an attacker who can write a store, and nothing else, would try: a CA key listed
//! in the token keys' store (and the reverse) is not vouched for and refuses the store whole;
//! disposing of a key under the other purpose destroys nothing.

use std::sync::Arc;

use jiff::Timestamp;
use warrant_keys::{
    Disposal, Disposed, KeyHolder, KeyPurpose, KeyStore as _, ManagedKeySet, MemoryStore,
    StoreError, encode,
};
use warrant_token::{KeyType, SigningKey};

/// Runs the check against `holder` (see the module's documentation), on a runtime of its own.
/// Leaves nothing in the holder: both keys it makes are forgotten at the end.
pub fn keys_of_one_purpose_serve_no_other(holder: Arc<dyn KeyHolder>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(check(holder));
}

fn locator(key: &SigningKey) -> String {
    key.remote_key().expect("held in the holder").locator()
}

/// A store of `purpose` read through `holder`, whose files list `key` as its only key: what
/// whoever can write the store could make it say.
async fn store_listing(
    holder: &Arc<dyn KeyHolder>,
    purpose: KeyPurpose,
    key: &SigningKey,
) -> Result<(), StoreError> {
    let now = Timestamp::from_second(crate::NOW).expect("a time");
    let set = ManagedKeySet::first(key.clone(), now, 3600).with_purpose(purpose);
    let files = encode(&set, 1).expect("encodes");
    let store = MemoryStore::new()
        .with_holder(holder.clone())
        .for_purpose(purpose);
    store.restore(
        files
            .files()
            .map(|(name, bytes)| (name.to_owned(), bytes.to_vec()))
            .collect(),
    );
    store.load().await.map(|_| ())
}

async fn check(holder: Arc<dyn KeyHolder>) {
    let (tokens, ca) = (KeyPurpose::Tokens, KeyPurpose::PodCertificateCa);
    let token_key = holder
        .generate(KeyType::P256, tokens)
        .await
        .expect("a token key is made");
    let ca_key = holder
        .generate(KeyType::P256, ca)
        .await
        .expect("a CA key is made");

    // Each is vouched for as what it was made for, and not as the other.
    for (key, made_for, other) in [(&token_key, tokens, ca), (&ca_key, ca, tokens)] {
        let public = key.verifying_key();
        holder
            .vouch(&locator(key), public, made_for)
            .await
            .unwrap_or_else(|e| panic!("a key made for {made_for} is vouched for as such: {e}"));
        let refused = holder
            .vouch(&locator(key), public, other)
            .await
            .expect_err("a key is vouched for only for the purpose it was made for");
        assert!(
            !matches!(&refused, warrant_token::KeyError::Remote(e) if e.unavailable),
            "refused, not unavailable: {refused}"
        );
    }

    // A store of token keys listing the CA key (and the reverse) is refused whole, naming it.
    for (key, listed_as) in [(&ca_key, tokens), (&token_key, ca)] {
        match store_listing(&holder, listed_as, key).await {
            Err(StoreError::NotVouched { kid, .. }) => assert_eq!(kid, key.kid()),
            other => panic!("a store of {listed_as} listing a key of the other purpose: {other:?}"),
        }
    }
    // Each read as its own purpose is accepted.
    store_listing(&holder, tokens, &token_key)
        .await
        .expect("a token store of a token key");
    store_listing(&holder, ca, &ca_key)
        .await
        .expect("a CA store of a CA key");

    // Disposing of a key as the other purpose's leaves it whole.
    for (key, made_for, other) in [(&token_key, tokens, ca), (&ca_key, ca, tokens)] {
        let disposed = holder
            .dispose(&locator(key), key.kid(), Disposal::Forget, other)
            .await
            .expect("the holder answers");
        assert!(
            matches!(disposed, Disposed::NotTheKey(_)),
            "a {made_for} key disposed of as a {other} key: {disposed:?}"
        );
        holder
            .vouch(&locator(key), key.verifying_key(), made_for)
            .await
            .expect("still there");
        holder
            .check(key)
            .await
            .expect("its private half still signs");
    }

    for (key, made_for) in [(&token_key, tokens), (&ca_key, ca)] {
        let disposed = holder
            .dispose(&locator(key), key.kid(), Disposal::Forget, made_for)
            .await
            .expect("the holder answers");
        assert_eq!(disposed, Disposed::Destroyed, "{made_for} key forgotten");
    }
}
