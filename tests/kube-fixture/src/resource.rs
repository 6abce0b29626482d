//! What the fixture serves, described: a resource's type and scope, the type of a watch event,
//! and one stored object at one revision.

use bytes::Bytes;

/// Whether a resource lives in a namespace, derived from k8s-openapi's scope types.
pub trait Scope {
    /// True for namespaced resources.
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// A resource the fixture serves: enough to route its URLs and name its lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version, e.g. `v1`.
    pub version: &'static str,
    /// The kind of one object, e.g. `Pod`.
    pub kind: &'static str,
    /// The URL segment, e.g. `pods`.
    pub plural: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

impl ResourceType {
    /// The resource type of a k8s-openapi type, so tests never spell URLs by hand.
    pub fn of<K>() -> Self
    where
        K: k8s_openapi::Resource,
        K::Scope: Scope,
    {
        ResourceType {
            group: K::GROUP,
            version: K::VERSION,
            kind: K::KIND,
            plural: K::URL_PATH_SEGMENT,
            namespaced: <K::Scope as Scope>::NAMESPACED,
        }
    }

    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`
    Added,
    /// `MODIFIED`
    Modified,
    /// `DELETED`
    Deleted,
}

impl EventType {
    pub(crate) fn wire(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One stored object at one revision.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) namespace: String,
    /// `metadata.name`, for `fieldSelector=metadata.name=…`.
    pub(crate) name: String,
    /// The full object as JSON, `metadata.resourceVersion` set.
    pub(crate) full: Bytes,
    /// The same object as `PartialObjectMetadata`.
    pub(crate) meta: Bytes,
}
