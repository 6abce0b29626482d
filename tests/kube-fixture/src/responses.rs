//! kube-apiserver's failure answers, as every route of the fixture gives them: a `Status` body
//! with its reason and code, naming the object in kube's words.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::resource::ResourceType;

pub(crate) fn not_found(info: ResourceType, name: &str) -> Response {
    object_failure(info, name, StatusCode::NOT_FOUND, "NotFound", "not found")
}

/// A `Status` about one object, in kube-apiserver's words: `secrets "x" not found`.
pub(crate) fn object_failure(
    info: ResourceType,
    name: &str,
    code: StatusCode,
    reason: &str,
    what: &str,
) -> Response {
    let mut details = serde_json::Map::new();
    details.insert("name".into(), name.into());
    // StatusDetails.group is omitempty: the core group is not named.
    if !info.group.is_empty() {
        details.insert("group".into(), info.group.into());
    }
    details.insert("kind".into(), info.plural.into());
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure",
        "message": format!("{} \"{name}\" {what}", qualified(info)),
        "reason": reason,
        "details": details,
        "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}

/// `secrets`, or `leases.coordination.k8s.io`: how kube-apiserver names a resource in messages.
pub(crate) fn qualified(info: ResourceType) -> String {
    if info.group.is_empty() {
        info.plural.to_owned()
    } else {
        format!("{}.{}", info.plural, info.group)
    }
}

/// A Kubernetes `Status` error body.
pub(crate) fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason,
        "code": code.as_u16(),
    });
    (code, axum::Json(body)).into_response()
}
