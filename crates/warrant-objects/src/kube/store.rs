//! The records of one kind, keyed by namespace and then name.
//!
//! Keys are nested (namespace, then name) so a lookup borrows its `&str`s and allocates nothing,
//! and a namespace's name is stored once, not once per object.
//!
//! Records are kept compact and turned into a [`Record`] on lookup (a few small allocations per
//! lookup, against hundreds of thousands of objects held): a UUID is 16 bytes instead of a
//! 36-byte string, a deletion timestamp takes space only when set, and a pod's service account
//! and node names are shared between all pods that name them. That is about 200 bytes per object
//! on average, map overhead included, pods about twice the rest (see `docs/benchmarks.md`).
//!
//! A relist does not build a second map: objects are upserted in place and tagged with the
//! list's generation, and when the list is complete whatever was not seen in it is swept out.
//! So a relist of 150,000 pods costs no second copy of them, and lookups keep answering from the
//! old state (plus whatever the new list has already brought) until it completes, as a
//! reflector's store does.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use jiff::Timestamp;

use crate::record::{PodInfo, Record};

/// A UID: the 16 bytes of a canonical (lowercase, hyphenated) UUID, as Kubernetes generates
/// them, or the string as given for anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Uid {
    Uuid([u8; 16]),
    Other(Box<str>),
}

impl Uid {
    fn new(uid: &str) -> Uid {
        Self::parse(uid).map_or_else(|| Uid::Other(uid.into()), Uid::Uuid)
    }

    /// The bytes of `uid` if it is in canonical form, so that writing them back gives `uid`.
    fn parse(uid: &str) -> Option<[u8; 16]> {
        let text = uid.as_bytes();
        if text.len() != 36 {
            return None;
        }
        let mut bytes = [0u8; 16];
        let mut nibbles = 0usize;
        for (i, &c) in text.iter().enumerate() {
            if matches!(i, 8 | 13 | 18 | 23) {
                if c != b'-' {
                    return None;
                }
                continue;
            }
            let value = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
            let byte = bytes.get_mut(nibbles / 2)?;
            *byte = (*byte << 4) | value;
            nibbles += 1;
        }
        Some(bytes)
    }

    fn text(&self) -> String {
        match self {
            Uid::Other(text) => text.to_string(),
            Uid::Uuid(bytes) => {
                let mut text = String::with_capacity(36);
                for (i, byte) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        text.push('-');
                    }
                    for nibble in [byte >> 4, byte & 0xf] {
                        text.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
                    }
                }
                text
            }
        }
    }
}

/// What a pod adds, with its names shared with other pods.
#[derive(Debug)]
struct PodSlot {
    service_account: Arc<str>,
    node: Arc<str>,
    audiences: Box<[Box<str>]>,
    /// Its labels in warrant's domains; `None` (no space) for the many that have none.
    labels: Annotations,
}

/// A ServiceAccount's warrant annotations; `None` (no space) for the many that have none.
type Annotations = Option<Box<[(Box<str>, Box<str>)]>>;

#[derive(Debug)]
struct Slot {
    uid: Uid,
    deleted: Option<Box<Timestamp>>,
    pod: Option<Box<PodSlot>>,
    annotations: Annotations,
    /// The list generation this object was last seen in (or a later watch event).
    generation: u32,
}

impl Slot {
    fn record(&self) -> Record {
        Record {
            uid: self.uid.text(),
            deletion_timestamp: self.deleted.as_deref().copied(),
            pod: self.pod.as_ref().map(|pod| PodInfo {
                service_account_name: pod.service_account.to_string(),
                node_name: pod.node.to_string(),
                token_audiences: pod.audiences.iter().map(ToString::to_string).collect(),
                labels: pairs(&pod.labels),
            }),
            annotations: pairs(&self.annotations),
        }
    }
}

fn pairs(kept: &Annotations) -> Vec<(String, String)> {
    kept.iter()
        .flatten()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn compact(pairs: Vec<(String, String)>) -> Annotations {
    (!pairs.is_empty()).then(|| {
        pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect()
    })
}

#[derive(Debug, Default)]
struct Inner {
    namespaces: HashMap<Box<str>, HashMap<Box<str>, Slot>>,
    /// Service account and node names that pods share.
    names: HashSet<Arc<str>>,
    generation: u32,
    len: usize,
}

impl Inner {
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.names.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = name.into();
        self.names.insert(shared.clone());
        shared
    }

    fn slot(&mut self, record: Record) -> Slot {
        let pod = record.pod.map(|pod| {
            Box::new(PodSlot {
                service_account: self.intern(&pod.service_account_name),
                node: self.intern(&pod.node_name),
                audiences: pod.token_audiences.into_iter().map(Into::into).collect(),
                labels: compact(pod.labels),
            })
        });
        let annotations = compact(record.annotations);
        Slot {
            uid: Uid::new(&record.uid),
            deleted: record.deletion_timestamp.map(Box::new),
            pod,
            annotations,
            generation: self.generation,
        }
    }
}

/// One kind's records.
#[derive(Debug, Default)]
pub(super) struct KindStore {
    inner: RwLock<Inner>,
}

impl KindStore {
    pub(super) fn get(&self, namespace: &str, name: &str) -> Option<Arc<Record>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        let slot = inner.namespaces.get(namespace)?.get(name)?;
        Some(Arc::new(slot.record()))
    }

    pub(super) fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len
    }

    /// A new list begins: what it does not bring is swept out by [`KindStore::finish_list`].
    pub(super) fn begin_list(&self) {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        inner.generation = inner.generation.wrapping_add(1);
    }

    pub(super) fn upsert(&self, namespace: &str, name: &str, record: Record) {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let slot = inner.slot(record);
        let names = match inner.namespaces.get_mut(namespace) {
            Some(names) => names,
            None => inner.namespaces.entry(namespace.into()).or_default(),
        };
        let added = match names.get_mut(name) {
            Some(existing) => {
                *existing = slot;
                false
            }
            None => {
                names.insert(name.into(), slot);
                true
            }
        };
        if added {
            inner.len += 1;
        }
    }

    pub(super) fn remove(&self, namespace: &str, name: &str) {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let Some(names) = inner.namespaces.get_mut(namespace) else {
            return;
        };
        let removed = names.remove(name).is_some();
        if names.is_empty() {
            inner.namespaces.remove(namespace);
        }
        if removed {
            inner.len -= 1;
        }
    }

    /// The list is complete: drops what it did not contain, and names no pod shares any more.
    /// Returns how many objects were dropped.
    ///
    /// The pass over every record runs under the read lock, which reviews share, so they never
    /// wait on it; the write lock is held only to remove what the pass found (usually nothing),
    /// each removal re-checked in case an event refreshed the record in between.
    pub(super) fn finish_list(&self) -> usize {
        let (generation, stale, unshared) = {
            let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            let stale: Vec<(Box<str>, Box<str>)> = inner
                .namespaces
                .iter()
                .flat_map(|(namespace, names)| {
                    names
                        .iter()
                        .filter(|(_, slot)| slot.generation != inner.generation)
                        .map(move |(name, _)| (namespace.clone(), name.clone()))
                })
                .collect();
            let unshared =
                !stale.is_empty() || inner.names.iter().any(|name| Arc::strong_count(name) == 1);
            (inner.generation, stale, unshared)
        };
        if stale.is_empty() && !unshared {
            return 0;
        }
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let mut dropped = 0;
        for (namespace, name) in &stale {
            let Some(names) = inner.namespaces.get_mut(namespace) else {
                continue;
            };
            if names
                .get(name)
                .is_some_and(|slot| slot.generation != generation)
            {
                names.remove(name);
                dropped += 1;
                if names.is_empty() {
                    inner.namespaces.remove(namespace);
                } else if names.len() * 4 < names.capacity() {
                    names.shrink_to_fit();
                }
            }
        }
        if inner.namespaces.len() * 4 < inner.namespaces.capacity() {
            inner.namespaces.shrink_to_fit();
        }
        inner.names.retain(|name| Arc::strong_count(name) > 1);
        if inner.names.len() * 4 < inner.names.capacity() {
            inner.names.shrink_to_fit();
        }
        inner.len -= dropped;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uid: &str) -> Record {
        Record {
            uid: uid.into(),
            deletion_timestamp: None,
            pod: None,
            annotations: vec![],
        }
    }

    #[test]
    fn a_relist_keeps_what_it_saw_and_sweeps_the_rest() {
        let store = KindStore::default();
        store.begin_list();
        store.upsert("a", "x", record("1"));
        store.upsert("a", "y", record("2"));
        store.upsert("b", "z", record("3"));
        assert_eq!(store.finish_list(), 0);
        assert_eq!(store.len(), 3);

        store.begin_list();
        store.upsert("a", "x", record("1b"));
        // Until the list completes, the old state still answers.
        assert_eq!(store.get("b", "z").unwrap().uid, "3");
        assert_eq!(store.finish_list(), 2);
        assert_eq!(store.len(), 1);
        assert_eq!(store.get("a", "x").unwrap().uid, "1b");
        assert!(store.get("a", "y").is_none());
        assert!(store.get("b", "z").is_none());
    }

    #[test]
    fn records_come_back_as_they_went_in() {
        let store = KindStore::default();
        let pod = Record {
            uid: "0f8fad5b-d9cb-469f-a165-70867728950e".into(),
            deletion_timestamp: Some(Timestamp::from_second(1_800_000_000).unwrap()),
            pod: Some(PodInfo {
                service_account_name: "app".into(),
                node_name: "n1".into(),
                token_audiences: vec![String::new(), "vault".into()],
                labels: vec![("abac.warrant.dev/team".into(), "blue".into())],
            }),
            annotations: vec![],
        };
        store.upsert("ns", "p", pod.clone());
        assert_eq!(*store.get("ns", "p").unwrap(), pod);
        let account = Record {
            annotations: vec![
                (
                    "aws.warrant.dev/role-arn".into(),
                    "arn:aws:iam::1:role/r".into(),
                ),
                ("warrant.dev/audience".into(), "vault".into()),
            ],
            ..record("0f8fad5b-d9cb-469f-a165-70867728950f")
        };
        store.upsert("ns", "sa", account.clone());
        assert_eq!(*store.get("ns", "sa").unwrap(), account);
        // Anything that is not a canonical UUID is kept as it is.
        for uid in [
            "pod-1",
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "0f8fad5b-d9cb-469f-a165-70867728950",
            "0f8fad5bxd9cb-469f-a165-70867728950e",
            "0f8fad5b-d9cb-469f-a165-70867728950g",
            "",
        ] {
            store.upsert("ns", "x", record(uid));
            assert_eq!(store.get("ns", "x").unwrap().uid, uid);
        }
        assert_eq!(
            Uid::new("00000000-0000-0000-0000-000000000000").text(),
            "00000000-0000-0000-0000-000000000000"
        );
        assert!(matches!(
            Uid::new("ffffffff-ffff-ffff-ffff-ffffffffffff"),
            Uid::Uuid(_)
        ));
    }

    #[test]
    fn pods_share_names_until_none_uses_them() {
        let store = KindStore::default();
        let pod = |node: &str| Record {
            uid: "u".into(),
            deletion_timestamp: None,
            pod: Some(PodInfo {
                service_account_name: "app".into(),
                node_name: node.into(),
                token_audiences: vec![],
                labels: vec![],
            }),
            annotations: vec![],
        };
        store.begin_list();
        store.upsert("ns", "a", pod("n1"));
        store.upsert("ns", "b", pod("n1"));
        store.finish_list();
        assert_eq!(store.inner.read().unwrap().names.len(), 2);
        store.begin_list();
        store.upsert("ns", "a", pod("n2"));
        store.finish_list();
        // "n1" went with pod b.
        let inner = store.inner.read().unwrap();
        let mut names: Vec<&str> = inner.names.iter().map(|n| &**n).collect();
        names.sort_unstable();
        assert_eq!(names, ["app", "n2"]);
    }

    #[test]
    fn remove_and_len_agree() {
        let store = KindStore::default();
        store.upsert("", "n", record("1"));
        store.upsert("", "n", record("2"));
        assert_eq!(store.len(), 1);
        store.remove("", "n");
        store.remove("", "n");
        store.remove("other", "n");
        assert_eq!(store.len(), 0);
        assert!(store.get("", "n").is_none());
    }
}
