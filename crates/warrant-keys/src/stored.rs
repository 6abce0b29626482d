//! The serialised form of a managed key set, shared by every store: a small index of schedules
//! ([`INDEX_FILE`], JSON) and one PKCS#8 PEM file per key ([`key_file_name`]: `<kid>.pem`).
//!
//! A directory holds these as files; a Kubernetes Secret holds them as its `data` entries (a
//! kid is base64url, so `<kid>.pem` is a valid Secret key). Both stay readable by a person with
//! `cat` or `kubectl get secret -o yaml | base64 -d`, and every key opens with standard tools
//! (`openssl pkey -in <kid>.pem -noout -text`).
//!
//! ```json
//! {
//!   "apiVersion": "warrant.dev/v1alpha1",
//!   "kind": "KeySet",
//!   "generation": 4,
//!   "keys": [
//!     {
//!       "kid": "JHJehTTTZlsspKHT-GaJxK7Kd1NQgZJu3fyK6K_QDYU",
//!       "algorithm": "RS256",
//!       "publishedAt": "2026-07-01T00:00:00Z",
//!       "activateAt": "2026-07-01T00:00:00Z",
//!       "maxTokenSeconds": 86400
//!     }
//!   ],
//!   "revoked": [
//!     {
//!       "kid": "Vq3f2QmZ8hX1yTnJ0bL4cRkE7sWdPaGuIoYv9zMxN6A",
//!       "revokedAt": "2026-07-03T12:00:00Z",
//!       "forgetAt": "2026-07-04T12:01:00Z"
//!     }
//!   ]
//! }
//! ```
//!
//! `revoked` (absent when empty) names keys an operator revoked, for good (see
//! [`crate::Revocation`]); their files are gone. `signingStoppedAt` (absent unless it happened) says
//! since when no key signs: the signing key was revoked while no key could be made to take over
//! (see [`crate::ManagedKeySet::stopped`]). A revoked key that was held elsewhere keeps its
//! `heldIn`, so the store's writer can destroy it there once it reaches the holder.
//! `purpose` (absent for token keys) says what the keys are for, `"pod-certificate-ca"` for the
//! pod certificate CA's (see [`crate::KeyPurpose`]): a server refuses a store whose keys are
//! for something else, and the holder checks each held key's own marking against it.
//!
//! A key whose private half is held elsewhere ([`crate::KeyHolder`], an HSM) has `heldIn`, the
//! locator of its private key (`"heldIn": "pkcs11:token=warrant;id=%0a%1b;type=private"`), and
//! its file holds only its `PUBLIC KEY`: the store then holds no key material at all. What such
//! an entry claims is not believed: the holder vouches for every held key before the set is
//! used, and one it does not vouch for refuses the store ([`StoreError::NotVouched`]); once
//! vouched for, keys are published and verified without asking the holder again. A store is all
//! one or all the other: a held key read without a holder, or a private key read with one, is
//! refused ([`StoreError::HeldElsewhere`], [`StoreError::PrivateKeyInStore`]), so neither is
//! ever taken for the other. Only what cannot be derived is stored; states, retirement and
//! removal times follow from the records (see [`crate::ManagedKeySet`]). `generation` counts
//! writes.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use warrant_token::{
    KeyError, PrivateKeyPem, VerifyingKey, signing_key_from_pem, verifying_keys_from_pem,
};

use crate::holder::{Held, KeyHolder};
use crate::lifecycle::{ManagedKey, ManagedKeySet, Revocation};
use crate::purpose::KeyPurpose;
use crate::store_error::StoreError;

/// The name of the index.
pub const INDEX_FILE: &str = "keys.json";

const API_VERSION: &str = "warrant.dev/v1alpha1";
const KIND: &str = "KeySet";

/// The name of the file (or Secret entry) holding key `kid`.
pub fn key_file_name(kid: &str) -> String {
    format!("{kid}.pem")
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Index {
    api_version: String,
    kind: String,
    generation: u64,
    keys: Vec<IndexEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    revoked: Vec<RevokedEntry>,
    /// When signing stopped: the signing key was revoked and no key could be made to take over
    /// (see [`ManagedKeySet::stopped`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signing_stopped_at: Option<Timestamp>,
    /// What the keys are for ([`KeyPurpose::name`]); absent for token keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    purpose: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RevokedEntry {
    kid: String,
    revoked_at: Timestamp,
    forget_at: Timestamp,
    /// Where the revoked key was held, for a key held outside the store: so that the store's
    /// writer can destroy it there, however long the holder stays out of reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held_in: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IndexEntry {
    kid: String,
    algorithm: String,
    published_at: Timestamp,
    activate_at: Timestamp,
    max_token_seconds: i64,
    /// Where the private key is, for a key held outside the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held_in: Option<String>,
}

/// What a key's file holds.
enum KeyFile {
    /// The private key (the store holds the keys).
    Private(PrivateKeyPem),
    /// The public key of a key held elsewhere.
    Public(String),
}

impl KeyFile {
    fn bytes(&self) -> &[u8] {
        match self {
            KeyFile::Private(pem) => pem.as_str().as_bytes(),
            KeyFile::Public(pem) => pem.as_bytes(),
        }
    }
}

/// A key set in its stored form: the key files, then the index. Its `Debug` lists file names
/// only.
pub struct EncodedKeySet {
    keys: Vec<(String, KeyFile)>,
    index: Vec<u8>,
}

impl EncodedKeySet {
    /// Every file, as (name, contents): the keys first, the index last, which is the order a
    /// store without transactions must write them in (the index is the commit).
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.keys
            .iter()
            .map(|(name, file)| (name.as_str(), file.bytes()))
            .chain(std::iter::once((INDEX_FILE, self.index.as_slice())))
    }

    /// The key files' names.
    pub fn key_files(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(name, _)| name.as_str())
    }
}

impl std::fmt::Debug for EncodedKeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedKeySet")
            .field("keys", &self.key_files().collect::<Vec<_>>())
            .finish()
    }
}

/// Encodes `keys` as written generation `generation`. The error names the key that could not
/// be encoded.
pub fn encode(keys: &ManagedKeySet, generation: u64) -> Result<EncodedKeySet, (String, KeyError)> {
    let mut files = Vec::with_capacity(keys.keys().len());
    let mut entries = Vec::with_capacity(keys.keys().len());
    for key in keys.keys() {
        let (file, held_in) = match key.key().remote_key() {
            Some(remote) => (
                KeyFile::Public(key.key().verifying_key().to_pem()),
                Some(remote.locator()),
            ),
            None => (
                KeyFile::Private(
                    key.key()
                        .to_pkcs8_pem()
                        .map_err(|e| (key.kid().to_owned(), e))?,
                ),
                None,
            ),
        };
        files.push((key_file_name(key.kid()), file));
        entries.push(IndexEntry {
            kid: key.kid().to_owned(),
            algorithm: key.algorithm().name().to_owned(),
            published_at: key.published_at(),
            activate_at: key.activate_at(),
            max_token_seconds: key.max_token_seconds(),
            held_in,
        });
    }
    let index = Index {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        generation,
        keys: entries,
        revoked: keys
            .revocations()
            .iter()
            .map(|r| RevokedEntry {
                kid: r.kid.clone(),
                revoked_at: r.revoked_at,
                forget_at: r.forget_at,
                held_in: r.held_in.clone(),
            })
            .collect(),
        signing_stopped_at: keys.stopped(),
        purpose: match keys.purpose() {
            KeyPurpose::Tokens => None,
            other => Some(other.name().to_owned()),
        },
    };
    let mut index = serde_json::to_vec_pretty(&index)
        .map_err(|_| (String::new(), KeyError::Crypto("encode the key index")))?;
    index.push(b'\n');
    Ok(EncodedKeySet { keys: files, index })
}

/// Decodes a stored key set from its `index` and the key files `read` returns (`Ok(None)` for
/// a missing file), checking that every file holds the key its name and the index claim.
/// Keys held elsewhere are opened through `held`, which must be given exactly when the store
/// records such keys, and only once the holder has vouched for every one of them (see
/// `holder.rs`): a store with one entry it does not vouch for is refused whole. Decoding asks
/// nothing; vouching asks the holder, in [`Decoded::vouched`], which is the only way to the
/// set. A set recorded for another purpose than `purpose` is refused (`None`: any purpose,
/// its holder asked about each key for the one recorded). `store` names the store in errors.
pub fn decode(
    store: &str,
    index: &[u8],
    purpose: Option<KeyPurpose>,
    held: Option<&Held>,
    mut read: impl FnMut(&str) -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<Decoded, StoreError> {
    let index: Index = serde_json::from_slice(index)
        .map_err(|e| corrupt(store, format!("{INDEX_FILE} is not a valid key index: {e}")))?;
    let recorded = recorded_purpose(store, &index)?;
    if let Some(expected) = purpose.filter(|p| *p != recorded) {
        return Err(StoreError::OtherPurpose {
            store: store.to_owned(),
            recorded,
            expected,
        });
    }
    let holder = held.map(|h| h.holder().as_ref());
    let mut keys = Vec::with_capacity(index.keys.len());
    // Held keys, as the store claims them: vouched for before any is used.
    let mut claimed = Vec::new();
    for entry in &index.keys {
        let (key, claim) = decode_key(store, entry, holder, &mut read)?;
        claimed.extend(claim);
        keys.push(key);
    }
    let revoked = index
        .revoked
        .into_iter()
        .map(|r| Revocation {
            kid: r.kid,
            revoked_at: r.revoked_at,
            forget_at: r.forget_at,
            held_in: r.held_in,
        })
        .collect();
    let stopped = index.signing_stopped_at;
    let set = ManagedKeySet::new(keys)
        .and_then(|set| set.with_revocations(revoked))
        .map(|set| set.with_stop(stopped).with_purpose(recorded))
        .map_err(|source| StoreError::Lifecycle {
            store: store.to_owned(),
            source,
        })?;
    Ok(Decoded {
        keys: set,
        generation: index.generation,
        vouch: held.map(|held| (held.clone(), store.to_owned(), claimed)),
    })
}

/// `store` is corrupt, for `reason`.
fn corrupt(store: &str, reason: String) -> StoreError {
    StoreError::Corrupt {
        store: store.to_owned(),
        reason,
    }
}

/// Checks that `index` is a key index this warrant reads, and returns the purpose it records
/// (token keys when it records none).
fn recorded_purpose(store: &str, index: &Index) -> Result<KeyPurpose, StoreError> {
    if index.api_version != API_VERSION || index.kind != KIND {
        return Err(corrupt(
            store,
            format!(
                "{INDEX_FILE} is a {}/{}, not a {API_VERSION}/{KIND}",
                index.api_version, index.kind
            ),
        ));
    }
    Ok(match index.purpose.as_deref() {
        None => KeyPurpose::Tokens,
        Some(name) => KeyPurpose::from_name(name).ok_or_else(|| {
            corrupt(store, format!(
                "{INDEX_FILE} says its keys are for {name:?}, which this warrant does not know (it knows {})",
                KeyPurpose::ALL.map(KeyPurpose::name).join(", ")
            ))
        })?,
    })
}

/// Decodes the key `entry` lists, from its file as `read` returns it: a private key, or, for a
/// key held in `holder`, its public half opened there (and returned as the store claims it, to
/// be vouched for). The file must hold the key the entry names, of the algorithm it names.
fn decode_key(
    store: &str,
    entry: &IndexEntry,
    holder: Option<&dyn KeyHolder>,
    read: &mut impl FnMut(&str) -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<(ManagedKey, Option<Claimed>), StoreError> {
    let name = key_file_name(&entry.kid);
    let key_error = |source| StoreError::Key {
        store: store.to_owned(),
        kid: entry.kid.clone(),
        source,
    };
    let pem = read(&name)?.ok_or_else(|| {
        corrupt(
            store,
            format!("{INDEX_FILE} lists {name}, which is missing"),
        )
    })?;
    let mut claimed = None;
    let key = match (&entry.held_in, holder) {
        (None, None) => signing_key_from_pem(&pem).map_err(key_error)?,
        (Some(locator), Some(holder)) => {
            // Only a public key: a store of held keys never holds a private one.
            if signing_key_from_pem(&pem).is_ok() {
                return Err(corrupt(
                    store,
                    format!(
                        "{name} holds a private key, but {INDEX_FILE} says the key is held in {locator}: remove the file's private key from this store"
                    ),
                ));
            }
            let public = verifying_keys_from_pem(&pem)
                .map_err(key_error)?
                .into_iter()
                .next()
                .ok_or_else(|| key_error(KeyError::NoPublicKeys))?;
            claimed = Some((public.kid().to_owned(), locator.clone(), public.clone()));
            holder.open(locator, public).map_err(key_error)?
        }
        (Some(locator), None) => {
            return Err(StoreError::HeldElsewhere {
                store: store.to_owned(),
                kid: entry.kid.clone(),
                locator: locator.clone(),
                instead: "without one: start it with the same --key-pkcs11-uri as the replica that wrote the store".into(),
            });
        }
        (None, Some(holder)) => {
            return Err(StoreError::PrivateKeyInStore {
                store: store.to_owned(),
                kid: entry.kid.clone(),
                holder: holder.describe(),
            });
        }
    };
    if key.kid() != entry.kid {
        return Err(corrupt(
            store,
            format!("{name} holds key {}, not {}", key.kid(), entry.kid),
        ));
    }
    if key.algorithm().name() != entry.algorithm {
        return Err(corrupt(
            store,
            format!(
                "{name} is an {} key, but {INDEX_FILE} says {}",
                key.algorithm(),
                entry.algorithm
            ),
        ));
    }
    let key = ManagedKey::new(
        key,
        entry.published_at,
        entry.activate_at,
        entry.max_token_seconds,
    );
    Ok((key, claimed))
}

/// A key set [decoded](decode) from a store, its held keys not vouched for yet.
#[derive(Debug)]
#[must_use = "a decoded key set is used only once its holder vouched for it"]
pub struct Decoded {
    keys: ManagedKeySet,
    generation: u64,
    /// The holder, the store's name, and the held keys as the store claims them.
    vouch: Option<(Held, String, Vec<Claimed>)>,
}

/// A held key as a store claims it: kid, locator, public key.
type Claimed = (String, String, VerifyingKey);

impl Decoded {
    /// The set and its generation, once the holder (if any) vouched for every held key it
    /// lists: last, once the records are known to be well formed, and the only step that asks
    /// the holder.
    pub async fn vouched(self) -> Result<(ManagedKeySet, u64), StoreError> {
        if let Some((held, store, claimed)) = &self.vouch {
            held.vouch_all(store, self.keys.purpose(), claimed).await?;
        }
        Ok((self.keys, self.generation))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use warrant_token::{KeyType, SigningKey};

    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn files(encoded: &EncodedKeySet) -> BTreeMap<String, Vec<u8>> {
        encoded
            .files()
            .map(|(n, b)| (n.to_owned(), b.to_vec()))
            .collect()
    }

    fn decode_files(files: &BTreeMap<String, Vec<u8>>) -> Result<(ManagedKeySet, u64), StoreError> {
        vouched(decode(
            "test store",
            &files[INDEX_FILE],
            Some(KeyPurpose::Tokens),
            None,
            |name| Ok(files.get(name).cloned()),
        ))
    }

    /// What a store reads: the decoded set, vouched for (the fake holder answers at once).
    fn vouched(decoded: Result<Decoded, StoreError>) -> Result<(ManagedKeySet, u64), StoreError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(decoded?.vouched())
    }

    #[test]
    fn round_trips_keys_and_times_and_reads_like_a_person_would() {
        let rsa = SigningKey::generate(KeyType::Rsa2048).unwrap();
        let ec = SigningKey::generate(KeyType::P384).unwrap();
        let set = ManagedKeySet::new(vec![
            ManagedKey::new(rsa.clone(), at(1_800_000_000), at(1_800_000_000), 86400),
            ManagedKey::new(ec.clone(), at(1_800_500_000), at(1_800_600_000), 3600),
        ])
        .unwrap();
        let encoded = encode(&set, 7).unwrap();
        let names: Vec<&str> = encoded.files().map(|(n, _)| n).collect();
        let (rsa_file, ec_file) = (key_file_name(rsa.kid()), key_file_name(ec.kid()));
        assert_eq!(names, [rsa_file.as_str(), ec_file.as_str(), INDEX_FILE]);
        assert!(!format!("{encoded:?}").contains("PRIVATE"));

        let files = files(&encoded);
        let index = String::from_utf8(files[INDEX_FILE].clone()).unwrap();
        assert!(
            index.contains(r#""activateAt": "2027-01-22T06:40:00Z""#),
            "{index}"
        );
        assert!(index.contains(r#""algorithm": "ES384""#), "{index}");
        assert!(
            String::from_utf8_lossy(&files[&rsa_file]).starts_with("-----BEGIN PRIVATE KEY-----")
        );

        let (decoded, generation) = decode_files(&files).unwrap();
        assert_eq!(generation, 7);
        let summary = |s: &ManagedKeySet| -> Vec<(String, Timestamp, Timestamp, i64)> {
            s.keys()
                .iter()
                .map(|k| {
                    (
                        k.kid().to_owned(),
                        k.published_at(),
                        k.activate_at(),
                        k.max_token_seconds(),
                    )
                })
                .collect()
        };
        assert_eq!(summary(&decoded), summary(&set));
    }

    #[test]
    fn a_store_says_what_its_keys_are_for_and_is_read_for_that_alone() {
        let key = SigningKey::generate(KeyType::P256).unwrap();
        let first = ManagedKeySet::first(key, at(1_800_000_000), 3600);
        let read_as = |files: &BTreeMap<String, Vec<u8>>, purpose| {
            vouched(decode(
                "test store",
                &files[INDEX_FILE],
                purpose,
                None,
                |name| Ok(files.get(name).cloned()),
            ))
        };

        // Token keys record no purpose: every store written before there were two reads the same.
        let tokens = files(&encode(&first, 1).unwrap());
        let index = String::from_utf8(tokens[INDEX_FILE].clone()).unwrap();
        assert!(!index.contains("purpose"), "{index}");
        let ca_set = first.clone().with_purpose(KeyPurpose::PodCertificateCa);
        let ca = files(&encode(&ca_set, 1).unwrap());
        let index = String::from_utf8(ca[INDEX_FILE].clone()).unwrap();
        assert!(
            index.contains(r#""purpose": "pod-certificate-ca""#),
            "{index}"
        );

        let (read, _) = read_as(&ca, Some(KeyPurpose::PodCertificateCa)).unwrap();
        assert_eq!(read.purpose(), KeyPurpose::PodCertificateCa);
        assert!(read.same_records(&ca_set));
        assert!(
            !read.same_records(&first),
            "the purpose is part of the records"
        );
        let (read, _) = read_as(&ca, None).unwrap();
        assert_eq!(read.purpose(), KeyPurpose::PodCertificateCa, "as recorded");

        // Each read as the other's: refused, saying what it holds and what to do.
        for (files, recorded, expected) in [
            (&ca, KeyPurpose::PodCertificateCa, KeyPurpose::Tokens),
            (&tokens, KeyPurpose::Tokens, KeyPurpose::PodCertificateCa),
        ] {
            let error = read_as(files, Some(expected)).unwrap_err();
            assert!(
                matches!(&error, StoreError::OtherPurpose { recorded: r, expected: e, .. } if *r == recorded && *e == expected),
                "{error:?}"
            );
            let said = error.to_string();
            assert!(said.contains(recorded.keys()), "{said}");
            assert!(said.contains("needs a store of its own"), "{said}");
        }

        // A purpose this warrant does not know is a damaged index, not token keys.
        let mut odd = ca.clone();
        let index = String::from_utf8(odd[INDEX_FILE].clone()).unwrap();
        odd.insert(
            INDEX_FILE.into(),
            index.replace("pod-certificate-ca", "ssh-ca").into_bytes(),
        );
        let said = read_as(&odd, None).unwrap_err().to_string();
        assert!(
            said.contains(r#""ssh-ca""#) && said.contains("does not know"),
            "{said}"
        );
    }

    #[test]
    fn a_damaged_store_is_reported_precisely() {
        let key = SigningKey::generate(KeyType::P256).unwrap();
        let other = SigningKey::generate(KeyType::P256).unwrap();
        let set = ManagedKeySet::first(key.clone(), at(1_800_000_000), 3600);
        let good = files(&encode(&set, 1).unwrap());
        let name = key_file_name(key.kid());

        let mut missing = good.clone();
        missing.remove(&name);
        assert_eq!(
            decode_files(&missing).unwrap_err().to_string(),
            format!("test store: keys.json lists {name}, which is missing")
        );

        let mut swapped = good.clone();
        swapped.insert(
            name.clone(),
            other.to_pkcs8_pem().unwrap().as_str().as_bytes().to_vec(),
        );
        assert_eq!(
            decode_files(&swapped).unwrap_err().to_string(),
            format!(
                "test store: {name} holds key {}, not {}",
                other.kid(),
                key.kid()
            )
        );

        let mut truncated = good.clone();
        truncated.insert(name.clone(), b"-----BEGIN PRIVATE KEY-----\nMIIB".to_vec());
        let message = decode_files(&truncated).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("test store: key {}: malformed PEM", key.kid())),
            "{message}"
        );

        let mut garbage = good.clone();
        garbage.insert(INDEX_FILE.into(), b"{\"apiVersion\":".to_vec());
        assert!(
            decode_files(&garbage)
                .unwrap_err()
                .to_string()
                .starts_with("test store: keys.json is not a valid key index: ")
        );
        let mut wrong_kind = good;
        wrong_kind.insert(
            INDEX_FILE.into(),
            br#"{"apiVersion":"v1","kind":"Secret","generation":1,"keys":[]}"#.to_vec(),
        );
        assert_eq!(
            decode_files(&wrong_kind).unwrap_err().to_string(),
            "test store: keys.json is a v1/Secret, not a warrant.dev/v1alpha1/KeySet"
        );
    }

    #[test]
    fn revocations_are_kept_and_a_revoked_key_cannot_come_back() {
        let p = crate::test_support::policy();
        let key = SigningKey::generate(KeyType::P256).unwrap();
        let set = ManagedKeySet::first(key.clone(), at(1_800_000_000), 3600);
        let revoked = set
            .revoke(key.kid(), &p, at(1_800_000_100), SigningKey::generate)
            .unwrap()
            .keys;
        let encoded = files(&encode(&revoked, 2).unwrap());
        let index = String::from_utf8(encoded[INDEX_FILE].clone()).unwrap();
        assert!(
            index.contains(r#""revokedAt": "2027-01-15T08:01:40Z""#),
            "{index}"
        );
        // The revoked key's file is not written.
        assert!(!encoded.contains_key(&key_file_name(key.kid())));
        let (decoded, _) = decode_files(&encoded).unwrap();
        assert_eq!(decoded.revocations(), revoked.revocations());

        // An index that lists a key and revokes it too is refused, not half-believed.
        let mut both = files(&encode(&set, 3).unwrap());
        let listed = String::from_utf8(both[INDEX_FILE].clone()).unwrap();
        let tampered = listed.trim_end().trim_end_matches('}').to_owned()
            + &format!(
                r#","revoked":[{{"kid":"{}","revokedAt":"2027-01-15T08:01:40Z","forgetAt":"2027-01-15T09:02:40Z"}}]}}"#,
                key.kid()
            );
        both.insert(INDEX_FILE.into(), tampered.into_bytes());
        assert_eq!(
            decode_files(&both).unwrap_err().to_string(),
            format!(
                "test store: key {} is both in the set and revoked",
                key.kid()
            )
        );
    }

    /// A store of held keys records public keys and locators only, opens with its holder, and
    /// is refused without one; a store of private keys is refused with one.
    #[test]
    fn held_keys_and_private_keys_are_never_taken_for_each_other() {
        let fake = std::sync::Arc::new(crate::test_support::FakeHolder::default());
        let holder = Held::new(fake.clone());
        let held = fake.generate(KeyType::P256).unwrap();
        let set = ManagedKeySet::new(vec![ManagedKey::new(
            held.clone(),
            at(1_800_000_000),
            at(1_800_000_000),
            3600,
        )])
        .unwrap();
        let encoded = files(&encode(&set, 1).unwrap());
        let index = String::from_utf8_lossy(&encoded[INDEX_FILE]).into_owned();
        assert!(
            index.contains(&format!("\"heldIn\": \"fake:{}\"", held.kid())),
            "{index}"
        );
        let key_file = String::from_utf8_lossy(&encoded[&key_file_name(held.kid())]).into_owned();
        assert!(
            key_file.starts_with("-----BEGIN PUBLIC KEY-----"),
            "{key_file}"
        );

        let (decoded, _) = vouched(decode(
            "test store",
            &encoded[INDEX_FILE],
            Some(KeyPurpose::Tokens),
            Some(&holder),
            |name| Ok(encoded.get(name).cloned()),
        ))
        .unwrap();
        let key = decoded.keys()[0].key();
        assert_eq!(key.kid(), held.kid());
        assert!(key.remote_key().is_some());

        let without = decode_files(&encoded).unwrap_err().to_string();
        assert!(
            without.contains(&format!(
                "is held in fake:{}, but warrant was started without one",
                held.kid()
            )),
            "{without}"
        );

        let pem_store = files(
            &encode(
                &ManagedKeySet::new(vec![ManagedKey::new(
                    SigningKey::generate(KeyType::P256).unwrap(),
                    at(1_800_000_000),
                    at(1_800_000_000),
                    3600,
                )])
                .unwrap(),
                1,
            )
            .unwrap(),
        );
        let with = decode(
            "test store",
            &pem_store[INDEX_FILE],
            Some(KeyPurpose::Tokens),
            Some(&holder),
            |name| Ok(pem_store.get(name).cloned()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            with.contains(
                "is a private key in the store, but warrant was started with keys in fake holder"
            ),
            "{with}"
        );
    }

    /// A store of held keys whose entries `entries` lists as (key, published, activates),
    /// encoded as a store writer would write it.
    fn held_store(entries: &[(&SigningKey, i64, i64)]) -> BTreeMap<String, Vec<u8>> {
        let keys = entries
            .iter()
            .map(|(key, published, activates)| {
                ManagedKey::new((*key).clone(), at(*published), at(*activates), 3600)
            })
            .collect();
        files(&encode(&ManagedKeySet::new(keys).unwrap(), 1).unwrap())
    }

    fn decode_held(
        files: &BTreeMap<String, Vec<u8>>,
        held: &Held,
    ) -> Result<(ManagedKeySet, u64), StoreError> {
        vouched(decode(
            "test store",
            &files[INDEX_FILE],
            Some(KeyPurpose::Tokens),
            Some(held),
            |name| Ok(files.get(name).cloned()),
        ))
    }

    /// Whoever can write the store cannot make warrant trust a key by listing it: a retired
    /// entry with the writer's own public key and any locator, or a real key's locator with
    /// another public key, is not vouched for by the holder, and the whole store is refused
    /// with an error naming the entry (never key material).
    #[test]
    fn an_entry_its_holder_does_not_vouch_for_refuses_the_store() {
        use crate::KeyHolder as _;
        let fake = std::sync::Arc::new(crate::test_support::FakeHolder::default());
        let holder = Held::new(fake.clone());
        let (t0, day) = (1_800_000_000, 86_400);
        let old = fake.generate(KeyType::P256).unwrap();
        let active = fake.generate(KeyType::P256).unwrap();
        let good = held_store(&[(&old, t0, t0), (&active, t0 + day, t0 + 2 * day)]);
        decode_held(&good, &holder).unwrap();

        // The writer's own key, as a retired entry "held" in the holder: refused, by name.
        let attacker = SigningKey::generate(KeyType::P256).unwrap();
        let forged_key = fake
            .open(
                &format!("fake:{}", attacker.kid()),
                attacker.verifying_key().clone(),
            )
            .unwrap();
        let forged = held_store(&[
            (&forged_key, t0 - day, t0 - day),
            (&old, t0, t0),
            (&active, t0 + day, t0 + 2 * day),
        ]);
        let err = decode_held(&forged, &holder).unwrap_err();
        assert!(
            matches!(&err, StoreError::NotVouched { kid, .. } if kid == attacker.kid()),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "test store: key {} is not vouched for by fake holder: the store says it is held in fake:{}, and the fake holder holds no such key. The store is refused",
                attacker.kid(),
                attacker.kid()
            )),
            "{message}"
        );
        assert!(!message.contains("BEGIN"), "{message}");

        // A genuine locator with the writer's public key: refused the same way.
        let swapped_key = fake
            .open(
                &format!("fake:{}", old.kid()),
                attacker.verifying_key().clone(),
            )
            .unwrap();
        let swapped = held_store(&[
            (&swapped_key, t0 - day, t0 - day),
            (&active, t0 + day, t0 + 2 * day),
        ]);
        let err = decode_held(&swapped, &holder).unwrap_err();
        assert!(
            matches!(&err, StoreError::NotVouched { kid, locator, .. } if kid == attacker.kid() && locator == &format!("fake:{}", old.kid())),
            "{err:?}"
        );

        // A key that left the store (revoked, removed) and was forgotten by the holder cannot
        // be listed again either.
        decode_held(&held_store(&[(&active, t0 + day, t0 + 2 * day)]), &holder).unwrap();
        fake.dispose(
            &format!("fake:{}", old.kid()),
            old.kid(),
            crate::Disposal::Forget,
            KeyPurpose::Tokens,
        )
        .unwrap();
        let err = decode_held(&good, &holder).unwrap_err();
        assert!(
            matches!(&err, StoreError::NotVouched { kid, .. } if kid == old.kid()),
            "{err:?}"
        );
    }

    /// Keys vouched for at the last good read are not asked about again, so a store read while
    /// the holder is out of reach still takes effect when it only takes keys away (a
    /// revocation); a key not seen before cannot be checked then, and the read fails as
    /// unavailable (neither believed nor refused).
    #[test]
    fn keys_vouched_for_are_not_asked_again_while_they_stay() {
        use std::sync::atomic::Ordering;

        let fake = std::sync::Arc::new(crate::test_support::FakeHolder::default());
        let holder = Held::new(fake.clone());
        let (t0, day) = (1_800_000_000, 86_400);
        let a = fake.generate(KeyType::P256).unwrap();
        let b = fake.generate(KeyType::P256).unwrap();
        decode_held(
            &held_store(&[(&a, t0, t0), (&b, t0 + day, t0 + 2 * day)]),
            &holder,
        )
        .unwrap();
        assert_eq!(fake.vouches.load(Ordering::SeqCst), 2);

        fake.set_unreachable(true);
        let (fewer, _) =
            decode_held(&held_store(&[(&b, t0 + day, t0 + 2 * day)]), &holder).unwrap();
        assert_eq!(fewer.keys().len(), 1);
        assert_eq!(
            fake.vouches.load(Ordering::SeqCst),
            2,
            "a vouched key was asked about again"
        );

        // A key that left the store is asked about again if it comes back.
        let err = decode_held(
            &held_store(&[(&a, t0, t0), (&b, t0 + day, t0 + 2 * day)]),
            &holder,
        )
        .unwrap_err();
        assert!(
            matches!(&err, StoreError::HolderUnavailable { kid, .. } if kid == a.kid()),
            "{err:?}"
        );
        fake.set_unreachable(false);
        decode_held(
            &held_store(&[(&a, t0, t0), (&b, t0 + day, t0 + 2 * day)]),
            &holder,
        )
        .unwrap();
    }
}
