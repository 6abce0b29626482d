//! The token as a managed key set's holder: keys generated, found again from the locator a key
//! store records, signing through warrant-token's `SigningKey::remote` (the issuer core's path),
//! imported from PEM with the same kid, and destroyed when they stop signing.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use warrant_hsm::{KEY_ID_LEN, Pkcs11Holder, Pkcs11Uri};
use warrant_keys::{Disposal, Disposed, KeyHolder};
use warrant_token::{Algorithm, KeyType, SigningKey};

use crate::support::verify_everywhere;
use warrant_keys::KeyPurpose;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Signs a detached JWS with `key` the way the issuer core does, and checks it against the
/// public key alone; returns the header.
fn signs_and_verifies(hsm: &crate::support::SoftHsm, key: &SigningKey) -> String {
    let claims = B64.encode(r#"{"sub":"system:serviceaccount:default:app"}"#);
    let detached = runtime()
        .block_on(key.sign_detached_async(&claims))
        .expect("the token signs");
    let input = format!("{}.{claims}", detached.header);
    let signature = B64.decode(&detached.signature).unwrap();
    verify_everywhere(hsm.dir(), key.verifying_key(), input.as_bytes(), &signature);
    detached.header
}

hsm_test!(
    fn generated_keys_sign_through_the_issuers_path_and_are_labelled_by_kid(hsm) {
        hsm.init_token("held");
        let holder = Pkcs11Holder::new(hsm.open("held").unwrap());
        assert_eq!(holder.describe(), r#"PKCS#11 token "held""#);
        for (key_type, alg) in [(KeyType::P256, Algorithm::ES256), (KeyType::Rsa2048, Algorithm::RS256)] {
            let key = holder.generate(key_type, KeyPurpose::Tokens).unwrap();
            assert_eq!(key.algorithm(), alg);
            // In memory it cannot sign or be written out: it is held in the token.
            assert!(key.sign_payload(b"{}").is_err());
            assert!(key.to_pkcs8_pem().is_err());
            let header = signs_and_verifies(hsm, &key);
            let header: serde_json::Value = serde_json::from_slice(&B64.decode(header).unwrap()).unwrap();
            assert_eq!(header["kid"], key.kid());

            let remote = key.remote_key().expect("held in the token");
            assert!(remote.describe().starts_with(r#"PKCS#11 token "held", object id "#));
            assert_eq!(remote.unavailable(), None);
            let locator: Pkcs11Uri = remote.locator().parse().unwrap();
            assert_eq!(locator.token_label(), Some("held"));
            assert!(locator.module_path().is_none() && locator.pin_source().is_none());
            let id = locator.object_id().unwrap();
            assert_eq!(id.len(), KEY_ID_LEN);
            // CKA_LABEL is the kid; the private object is sensitive and not extractable.
            let entry = holder.token().list_keys().unwrap().into_iter().find(|e| e.id == id).unwrap();
            assert_eq!(entry.label.as_deref(), Some(key.kid()));
            assert!(entry.has_private && entry.has_public);
            let attrs = holder.token().key_attributes(id).unwrap();
            assert!(attrs.sensitive && !attrs.extractable && attrs.never_extractable, "{attrs:?}");
        }
        // Two keys, two ids: random, not reused.
        assert_eq!(holder.token().list_keys().unwrap().len(), 2);
    }
);

hsm_test!(
    fn a_locator_opens_the_same_key_and_a_wrong_one_is_refused(hsm) {
        hsm.init_token("loc");
        let holder = Pkcs11Holder::new(hsm.open("loc").unwrap());
        let first = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        let second = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        let locator = first.remote_key().unwrap().locator();

        // What a store recorded opens the same key: same kid, and it signs.
        let opened = holder.open(&locator, first.verifying_key().clone()).unwrap();
        assert_eq!(opened.kid(), first.kid());
        assert_eq!(opened.remote_key().unwrap().locator(), locator);
        signs_and_verifies(hsm, &opened);

        // A locator pointing at another key than the recorded public key: refused at signing,
        // naming both kids.
        let swapped = holder.open(&locator, second.verifying_key().clone()).unwrap();
        let claims = B64.encode("{}");
        let err = runtime().block_on(swapped.sign_detached_async(&claims)).unwrap_err().to_string();
        assert!(err.contains(first.kid()) && err.contains(second.kid()), "{err}");

        // Another token's locator, one without an id, and one that is not a usable URI.
        let elsewhere = locator.replace("token=loc", "token=other");
        let err = holder.open(&elsewhere, first.verifying_key().clone()).unwrap_err().to_string();
        assert!(err.contains("is on another token than pkcs11:token=loc"), "{err}");
        let err = holder.open("pkcs11:token=loc;type=private", first.verifying_key().clone()).unwrap_err().to_string();
        assert!(err.contains("has no id="), "{err}");
        let err = holder.open("pkcs11:token=loc;id=%01;pin-value=1234", first.verifying_key().clone()).unwrap_err().to_string();
        assert!(err.contains("pin-value") && !err.contains("1234"), "{err}");
    }
);

hsm_test!(
    fn a_destroyed_key_opens_for_its_public_key_but_never_signs_again(hsm) {
        hsm.init_token("retire");
        let holder = Pkcs11Holder::new(hsm.open("retire").unwrap());
        let key = holder.generate(KeyType::P256, KeyPurpose::Tokens).unwrap();
        signs_and_verifies(hsm, &key);
        let locator = key.remote_key().unwrap().locator();
        let id = locator.parse::<Pkcs11Uri>().unwrap().object_id().unwrap().to_vec();

        assert_eq!(holder.dispose(&locator, key.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Destroyed);
        // Idempotent: a second retirement (another replica got there first) finds nothing to do.
        assert_eq!(holder.dispose(&locator, key.kid(), Disposal::Retire, KeyPurpose::Tokens).unwrap(), Disposed::Gone);
        let entry = holder.token().list_keys().unwrap().into_iter().find(|e| e.id == id).unwrap();
        assert!(!entry.has_private && entry.has_public, "{entry:?}");

        // A store still lists the retired key (its public key stays published): it opens
        // without its private object, and signing with it fails for good, not as unavailable.
        let opened = holder.open(&locator, key.verifying_key().clone()).unwrap();
        assert_eq!(opened.kid(), key.kid());
        let claims = B64.encode("{}");
        for k in [&key, &opened] {
            let err = runtime().block_on(k.sign_detached_async(&claims)).unwrap_err();
            let warrant_token::KeyError::Remote(remote) = &err else { panic!("{err:?}") };
            assert!(!remote.unavailable, "{err}");
            assert!(err.to_string().contains("no private key object"), "{err}");
        }
        // A locator on another token names nothing of this holder's: nothing is destroyed.
        let elsewhere = locator.replace("token=retire", "token=other");
        let answer = holder.dispose(&elsewhere, key.kid(), Disposal::Forget, KeyPurpose::Tokens).unwrap();
        assert!(matches!(&answer, Disposed::NotTheKey(why) if why.contains("another token")), "{answer:?}");
    }
);

hsm_test!(
    fn an_imported_pem_key_keeps_its_kid_and_signs_in_the_token(hsm) {
        hsm.init_token("import");
        let holder = Pkcs11Holder::new(hsm.open("import").unwrap());
        for key_type in [KeyType::Rsa2048, KeyType::P256] {
            let original = SigningKey::generate(key_type).unwrap();
            let pem = original.to_pkcs8_pem().unwrap();
            let imported = holder.import_pem(pem.as_str().as_bytes(), KeyPurpose::Tokens).unwrap();
            assert_eq!(imported.kid(), original.kid());
            assert_eq!(imported.verifying_key().jwk_json(), original.verifying_key().jwk_json());
            signs_and_verifies(hsm, &imported);
            let locator: Pkcs11Uri = imported.remote_key().unwrap().locator().parse().unwrap();
            let id = locator.object_id().unwrap();
            let attrs = holder.token().key_attributes(id).unwrap();
            assert!(attrs.sensitive && !attrs.extractable, "{attrs:?}");
            let label = holder.token().list_keys().unwrap().into_iter().find(|e| e.id == id).unwrap().label;
            assert_eq!(label.as_deref(), Some(original.kid()));
        }
    }
);
