//! An in-memory source that its owner fills directly: for embedding warrant with objects from
//! elsewhere, and for tests and benchmarks of everything above the sources.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::record::{Kind, Record};
use crate::source::ObjectSource;

type Key = (Kind, String, String);

/// Records held in a map behind a lock. Lookups take a read lock and allocate the key; the
/// production sources avoid both, this one is for simplicity.
#[derive(Debug, Default)]
pub struct MemorySource {
    records: RwLock<HashMap<Key, Arc<Record>>>,
}

impl MemorySource {
    /// An empty source (ready: it has everything it will ever have).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an object. `namespace` is empty for nodes.
    pub fn put(&self, kind: Kind, namespace: &str, name: &str, record: Record) {
        if let Ok(mut records) = self.records.write() {
            records.insert(
                (kind, namespace.to_owned(), name.to_owned()),
                Arc::new(record),
            );
        }
    }

    /// Removes an object.
    pub fn remove(&self, kind: Kind, namespace: &str, name: &str) {
        if let Ok(mut records) = self.records.write() {
            records.remove(&(kind, namespace.to_owned(), name.to_owned()));
        }
    }
}

impl ObjectSource for MemorySource {
    fn cached(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Record>> {
        let records = self.records.read().ok()?;
        records
            .get(&(kind, namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    fn not_ready(&self) -> Option<String> {
        None
    }

    fn count(&self, kind: Kind) -> usize {
        self.records
            .read()
            .map_or(0, |r| r.keys().filter(|(k, _, _)| *k == kind).count())
    }
}
