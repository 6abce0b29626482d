//! What a write request asks of the fixture, read from its method, headers and query.

use axum::http::{HeaderMap, Method};

use crate::resource::ResourceType;

/// What a write request asks, from its method, headers and query.
pub(crate) struct WriteRequest {
    pub(crate) info: ResourceType,
    pub(crate) rules: crate::Rules,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    /// `status` for a write to `…/NAME/status`.
    pub(crate) subresource: Option<String>,
    pub(crate) method: Method,
    pub(crate) headers: HeaderMap,
    pub(crate) params: Vec<(String, String)>,
}

impl WriteRequest {
    /// The query parameter `key`, if given.
    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}
