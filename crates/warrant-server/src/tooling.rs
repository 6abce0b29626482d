//! What the OpenAPI generator (the `openapi` test target, `tests/openapi/`) reads from the
//! crate: the route table's discoverable routes and the hash the served documents are tagged
//! with. Not an API; nothing else should use it.

pub use crate::routes::{Endpoint, Resource, Route, discoverable};
pub use warrant_proto::groups::{AUTHENTICATION_V1, CORE_V1, GroupVersion, WARRANT_V1ALPHA1};

/// The hash `/openapi/v3` puts in a document's URL and its entity tag: the generator writes
/// it into the v3 index, so the index names the documents as the server will serve them.
pub fn openapi_hash(body: &[u8]) -> String {
    crate::openapi::hash(body)
}
