//! The write side of the fixture's state: what tests arranged for writes (failures, a racing
//! writer, writes held), and who owns each field.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::Value;

/// Where an object's field owners are kept: `(group, plural, namespace, name)`.
pub(crate) type ObjectKey = (&'static str, &'static str, String, String);

/// The field manager that last set a field (a JSON pointer outside `metadata`, such as
/// `/spec/holderIdentity`), by apply or by update.
pub(crate) type Owner = String;

/// The write side of the fixture's state.
#[derive(Debug, Default)]
pub(crate) struct WriteState {
    /// Writes answer with this HTTP status instead, while set.
    pub(crate) fail: Option<u16>,
    /// Runs before the next write of a resource plural is applied.
    pub(crate) before: Option<BeforeWrite>,
    /// Who owns each field of each object (server-side apply).
    pub(crate) owners: HashMap<ObjectKey, BTreeMap<String, Owner>>,
    /// Writes of this resource plural are held, while set.
    pub(crate) hold: Option<String>,
    /// Writes held and not yet released, in arrival order.
    pub(crate) held: VecDeque<HeldWrite>,
}

/// A write the fixture received and holds: its body, and how to let it through (with where to
/// report the status it is answered with).
#[derive(Debug)]
pub(crate) struct HeldWrite {
    pub(crate) body: Value,
    pub(crate) release: tokio::sync::oneshot::Sender<tokio::sync::oneshot::Sender<u16>>,
}

/// What runs before the next write of resource `plural`: a test's change to the cluster, which
/// holds the cluster only weakly (the state holds the hook).
pub(crate) struct BeforeWrite {
    pub(crate) plural: String,
    pub(crate) hook: Box<dyn FnOnce() + Send>,
}

impl std::fmt::Debug for BeforeWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BeforeWrite")
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}
