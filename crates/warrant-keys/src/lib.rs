//! warrant's keys: the one that signs new tokens and every key that verifies them.
//!
//! A [`KeySet`] is an immutable snapshot; the server swaps in a new one when the keys change.
//! Today the keys come from kube-apiserver's static key flags ([`load_static`]).

mod static_files;

pub use static_files::{StaticKeyError, load_static};

use warrant_token::{SigningKey, VerifyingKey};

/// The keys in force: one signing key, and the verification keys in publication order.
#[derive(Debug, Clone)]
pub struct KeySet {
    signing: SigningKey,
    verifying: Vec<VerifyingKey>,
}

impl KeySet {
    /// A key set signing with `signing` and verifying with `verifying`. The signing key's public
    /// half is always a verification key: it is added (first) if `verifying` lacks it, because a
    /// signing key missing from the JWKS mints tokens nobody can verify. Duplicate keys (the same
    /// key listed twice, or in two files) are kept once, at their first position.
    pub fn new(signing: SigningKey, verifying: Vec<VerifyingKey>) -> Self {
        let mut keys: Vec<VerifyingKey> = Vec::with_capacity(verifying.len() + 1);
        if !verifying.contains(signing.verifying_key()) {
            keys.push(signing.verifying_key().clone());
        }
        for key in verifying {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        KeySet {
            signing,
            verifying: keys,
        }
    }

    /// The key that signs new tokens.
    pub fn signing(&self) -> &SigningKey {
        &self.signing
    }

    /// Every verification key, in publication order.
    pub fn verifying(&self) -> &[VerifyingKey] {
        &self.verifying
    }
}

#[cfg(test)]
mod tests {
    use warrant_token::KeyType;

    use super::*;

    #[test]
    fn signing_key_is_always_published_and_duplicates_collapse() {
        let a = SigningKey::generate(KeyType::P256).unwrap();
        let b = SigningKey::generate(KeyType::P256).unwrap();
        let set = KeySet::new(a.clone(), vec![b.verifying_key().clone()]);
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [a.kid(), b.kid()]);

        let set = KeySet::new(
            a.clone(),
            vec![
                b.verifying_key().clone(),
                a.verifying_key().clone(),
                b.verifying_key().clone(),
            ],
        );
        let kids: Vec<&str> = set.verifying().iter().map(|k| k.kid()).collect();
        assert_eq!(kids, [b.kid(), a.kid()]);
    }
}
