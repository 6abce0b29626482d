//! What a published JWKS lists, as a relying party would use it: the activation gate's input
//! ([`ManagedKeySet::hold_unlisted`](crate::ManagedKeySet::hold_unlisted)).
//!
//! Who controls it: whoever can write a bucket warrant publishes to (warrant, and anyone else
//! the bucket's policy lets write). So a JWKS read back is never believed by its kid strings: a
//! relying party looks a token's `kid` up in the JWKS and verifies with the key material found
//! there, so a key is listed only where its own `kid` names its own public key, as a key that
//! signs (`alg` the key's, `use` absent or `sig`). A kid listed twice with different material,
//! or once with material that does not parse, lists nothing: relying parties differ in which
//! entry they take. Cost: one public-key parse per JWK (a handful per read).

use std::collections::BTreeMap;

use warrant_token::VerifyingKey;

/// Keys a JWKS lists, by kid and public key (DER SubjectPublicKeyInfo).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ListedKeys {
    keys: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for ListedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.keys.keys()).finish()
    }
}

impl ListedKeys {
    /// Nothing listed (a target never read).
    pub fn none() -> ListedKeys {
        ListedKeys::default()
    }

    /// Exactly `keys`, as warrant renders them in its own JWKS.
    pub fn of<'a>(keys: impl IntoIterator<Item = &'a VerifyingKey>) -> ListedKeys {
        ListedKeys {
            keys: keys
                .into_iter()
                .map(|k| (k.kid().to_owned(), k.spki_der().to_vec()))
                .collect(),
        }
    }

    /// The keys a JWKS document lists usably (see the module documentation); nothing if it is
    /// not a JWKS.
    pub fn from_jwks(jwks: &[u8]) -> ListedKeys {
        let Ok(document) = serde_json::from_slice::<serde_json::Value>(jwks) else {
            return ListedKeys::none();
        };
        let Some(entries) = document.get("keys").and_then(serde_json::Value::as_array) else {
            return ListedKeys::none();
        };
        // Per kid: the material every entry of that kid agrees on, or `None` once two disagree
        // or one is unusable.
        let mut by_kid: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        for entry in entries {
            let Some(kid) = entry.get("kid").and_then(serde_json::Value::as_str) else {
                continue;
            };
            let material = usable(entry);
            by_kid
                .entry(kid.to_owned())
                .and_modify(|agreed| {
                    if *agreed != material {
                        *agreed = None;
                    }
                })
                .or_insert(material);
        }
        ListedKeys {
            keys: by_kid
                .into_iter()
                .filter_map(|(kid, material)| Some((kid, material?)))
                .collect(),
        }
    }

    /// True if `key` is listed: its kid names exactly its public key.
    pub fn lists(&self, key: &VerifyingKey) -> bool {
        self.keys
            .get(key.kid())
            .is_some_and(|spki| spki.as_slice() == key.spki_der())
    }

    /// What both list, the same way.
    pub fn intersection(&self, other: &ListedKeys) -> ListedKeys {
        ListedKeys {
            keys: self
                .keys
                .iter()
                .filter(|(kid, spki)| other.keys.get(*kid) == Some(*spki))
                .map(|(kid, spki)| (kid.clone(), spki.clone()))
                .collect(),
        }
    }

    /// The kids of `self` that `other` does not list the same way, in order.
    pub fn missing_from(&self, other: &ListedKeys) -> Vec<String> {
        self.keys
            .iter()
            .filter(|(kid, spki)| other.keys.get(*kid) != Some(*spki))
            .map(|(kid, _)| kid.clone())
            .collect()
    }

    /// The kids listed, in order.
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// True if nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// A JWK's public key, if a relying party would verify a token of its kid with it: the material
/// parses, its `kid` is the one derived from that material, `alg` (if present) is the key's and
/// `use` (if present) is `sig`.
fn usable(jwk: &serde_json::Value) -> Option<Vec<u8>> {
    let key = VerifyingKey::from_jwk(jwk).ok()?;
    let kid = jwk.get("kid").and_then(serde_json::Value::as_str);
    let alg = jwk.get("alg");
    let use_ = jwk.get("use");
    let signs = kid == Some(key.kid())
        && alg.is_none_or(|a| a.as_str() == Some(key.algorithm().name()))
        && use_.is_none_or(|u| u.as_str() == Some("sig"));
    signs.then(|| key.spki_der().to_vec())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use warrant_token::{KeyType, SigningKey};

    use super::*;

    fn jwk(key: &SigningKey) -> Value {
        serde_json::from_str(key.verifying_key().jwk_json()).unwrap()
    }

    fn jwks(entries: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(&json!({ "keys": entries })).unwrap()
    }

    /// Each JWKS a bucket's writer could leave, and whether it lists the next key.
    #[test]
    fn a_key_is_listed_only_by_its_own_material_under_its_own_kid() {
        let next = SigningKey::generate(KeyType::P256).unwrap();
        let other = SigningKey::generate(KeyType::P256).unwrap();
        let rsa = SigningKey::generate(KeyType::Rsa2048).unwrap();
        let with = |mut v: Value, member: &str, value: Value| {
            v[member] = value;
            v
        };
        let next_kid = json!(next.kid());
        let cases: Vec<(&str, Vec<u8>, bool)> = vec![
            ("its own JWK", jwks(vec![jwk(&next)]), true),
            (
                "beside other keys",
                jwks(vec![jwk(&other), jwk(&next), jwk(&rsa)]),
                true,
            ),
            (
                "the same JWK twice",
                jwks(vec![jwk(&next), jwk(&next)]),
                true,
            ),
            (
                "members in another order, no alg or use",
                jwks(vec![json!({
                    "y": jwk(&next)["y"], "x": jwk(&next)["x"], "kid": next_kid,
                    "kty": "EC", "crv": "P-256",
                })]),
                true,
            ),
            ("absent", jwks(vec![jwk(&other)]), false),
            ("an empty JWKS", jwks(vec![]), false),
            ("not JSON", b"<html>".to_vec(), false),
            ("no keys member", br#"{"kid":"x"}"#.to_vec(), false),
            (
                "its kid with another key's material",
                jwks(vec![with(jwk(&other), "kid", next_kid.clone())]),
                false,
            ),
            (
                "its kid with another key's material first, its own second",
                jwks(vec![with(jwk(&other), "kid", next_kid.clone()), jwk(&next)]),
                false,
            ),
            (
                "its kid on material that does not parse, and its own",
                jwks(vec![with(jwk(&next), "x", json!("AAAA")), jwk(&next)]),
                false,
            ),
            (
                "its material under another kid",
                jwks(vec![with(jwk(&next), "kid", json!(other.kid()))]),
                false,
            ),
            (
                "its material with another algorithm",
                jwks(vec![with(jwk(&next), "alg", json!("ES384"))]),
                false,
            ),
            (
                "its material for encryption",
                jwks(vec![with(jwk(&next), "use", json!("enc"))]),
                false,
            ),
            (
                "another curve's name on its point",
                jwks(vec![with(jwk(&next), "crv", json!("P-384"))]),
                false,
            ),
        ];
        for (what, document, listed) in cases {
            let read = ListedKeys::from_jwks(&document);
            assert_eq!(read.lists(next.verifying_key()), listed, "{what}");
        }
        // An RSA key is listed by its own JWK as well.
        let read = ListedKeys::from_jwks(&jwks(vec![jwk(&rsa)]));
        assert!(read.lists(rsa.verifying_key()));
        assert!(!read.lists(next.verifying_key()));
    }

    #[test]
    fn what_two_targets_list_alike_and_what_one_lacks() {
        let a = SigningKey::generate(KeyType::P256).unwrap();
        let b = SigningKey::generate(KeyType::P256).unwrap();
        let both = ListedKeys::of([a.verifying_key(), b.verifying_key()]);
        let only_a = ListedKeys::of([a.verifying_key()]);
        let forged = ListedKeys::from_jwks(&jwks(vec![jwk(&a), {
            let mut v = jwk(&a);
            v["kid"] = json!(b.kid());
            v
        }]));
        assert_eq!(both.intersection(&only_a), only_a);
        assert_eq!(both.intersection(&forged), only_a);
        assert_eq!(both.missing_from(&forged), vec![b.kid().to_owned()]);
        assert!(both.missing_from(&both).is_empty());
        assert!(ListedKeys::none().is_empty());
        assert_eq!(
            ListedKeys::from_jwks(&jwks(vec![jwk(&a), jwk(&b)])),
            both,
            "warrant's own JWK reads back as the key it renders"
        );
    }
}
