//! The records of one kind, keyed by namespace and then name.
//!
//! Keys are nested (namespace, then name) so a lookup borrows its `&str`s and allocates nothing,
//! and a namespace's name is stored once, not once per object.
//!
//! A relist does not build a second map: objects are upserted in place and tagged with the
//! list's generation, and when the list is complete whatever was not seen in it is swept out.
//! So a relist of 150,000 pods costs no second copy of them, and lookups keep answering from the
//! old state (plus whatever the new list has already brought) until it completes, as a
//! reflector's store does.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::record::Record;

#[derive(Debug)]
struct Slot {
    record: Arc<Record>,
    /// The list generation this object was last seen in (or a later watch event).
    generation: u32,
}

#[derive(Debug, Default)]
struct Inner {
    namespaces: HashMap<Box<str>, HashMap<Box<str>, Slot>>,
    generation: u32,
    len: usize,
}

/// One kind's records.
#[derive(Debug, Default)]
pub(super) struct KindStore {
    inner: RwLock<Inner>,
}

impl KindStore {
    pub(super) fn get(&self, namespace: &str, name: &str) -> Option<Arc<Record>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner
            .namespaces
            .get(namespace)?
            .get(name)
            .map(|slot| slot.record.clone())
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
        let generation = inner.generation;
        let slot = Slot {
            record: Arc::new(record),
            generation,
        };
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

    /// The list is complete: drops what it did not contain. Returns how many were dropped.
    pub(super) fn finish_list(&self) -> usize {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let generation = inner.generation;
        let mut dropped = 0;
        inner.namespaces.retain(|_, names| {
            let before = names.len();
            names.retain(|_, slot| slot.generation == generation);
            dropped += before - names.len();
            names.shrink_to_fit();
            !names.is_empty()
        });
        inner.namespaces.shrink_to_fit();
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
