//! The rotation scenario every key holder runs (warrant-testkit's `rotation`), with the keys in
//! a real token: generated there (sensitive, never extractable), the retired key's private
//! object destroyed after the grace while its public object stays, everything destroyed when
//! it leaves the key set; signatures checked by openssl too.

use std::sync::Arc;

use warrant_hsm::{Pkcs11Holder, Pkcs11Uri};
use warrant_keys::KeyHolder;
use warrant_testkit::purposes::keys_of_one_purpose_serve_no_other;
use warrant_testkit::rotation::{HolderUnderTest, InHolder, keys_rotate_in_the_holder};
use warrant_testkit::signatures::verify_with_openssl;
use warrant_token::SigningKey;

use crate::support::SoftHsm;

/// The `CKA_ID` of a key held in the token, from the locator a store records.
fn object_id(key: &SigningKey) -> Vec<u8> {
    let locator: Pkcs11Uri = key
        .remote_key()
        .expect("held in the token")
        .locator()
        .parse()
        .unwrap();
    locator.object_id().unwrap().to_vec()
}

struct InToken<'a> {
    holder: Pkcs11Holder,
    hsm: &'a SoftHsm,
}

impl HolderUnderTest for InToken<'_> {
    fn holder(&self) -> Arc<dyn KeyHolder> {
        Arc::new(self.holder.clone())
    }

    fn state(&self, key: &SigningKey) -> InHolder {
        let id = object_id(key);
        let entry = self
            .holder
            .token()
            .list_keys()
            .unwrap()
            .into_iter()
            .find(|e| e.id == id);
        match entry {
            Some(entry) if entry.has_private => InHolder::Signs,
            Some(entry) if entry.has_public => InHolder::Retired,
            _ => InHolder::Forgotten,
        }
    }

    fn check(&self, key: &SigningKey, message: &[u8], signature: &[u8]) {
        let attrs = self.holder.token().key_attributes(&object_id(key)).unwrap();
        assert!(
            attrs.sensitive && !attrs.extractable && attrs.never_extractable,
            "{attrs:?}"
        );
        verify_with_openssl(self.hsm.dir(), key.verifying_key(), message, signature);
    }
}

hsm_test!(
    fn keys_rotate_in_the_token_on_a_paused_clock(hsm) {
        hsm.init_token("rotation");
        let holder = Pkcs11Holder::new(hsm.open("rotation").unwrap());
        keys_rotate_in_the_holder(&InToken { holder, hsm });
    }
);

hsm_test!(
    fn a_token_keeps_token_and_ca_keys_apart(hsm) {
        hsm.init_token("purposes");
        let holder = Pkcs11Holder::new(hsm.open("purposes").unwrap());
        keys_of_one_purpose_serve_no_other(Arc::new(holder.clone()));
        assert!(
            holder.token().list_keys().unwrap().is_empty(),
            "both keys are destroyed at the end"
        );
    }
);
