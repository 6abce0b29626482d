//! The parts of a write that depend on a resource's [`crate::Rules`]: the `/status`
//! subresource (status replaced, everything else kept as stored), the `resourceVersion` some
//! resources require on every replace, validation with kube's `422 Invalid`, and `DELETE`.

// A refused write is its HTTP response, built once per request: no need to box it.
#![allow(clippy::result_large_err)]

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::FixtureError;
use crate::cluster::Cluster;
use crate::responses::{not_found, qualified, status};
use crate::write_request::WriteRequest;

/// `DELETE` of one object: `200` with its last state, or `404`.
pub(crate) fn delete(cluster: &Cluster, request: &WriteRequest, name: &str) -> Response {
    let namespace = request.namespace.as_deref().unwrap_or_default();
    match cluster.delete_in(request.info, namespace, name) {
        Ok((_, object)) => (StatusCode::OK, axum::Json(object)).into_response(),
        Err(FixtureError::NotFound { .. }) => not_found(request.info, name),
        Err(error) => status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            &format!("fixture: {error}"),
        ),
    }
}

/// kube's `422` for a replace without `metadata.resourceVersion`, where the resource needs one.
pub(crate) fn needs_resource_version(
    request: &WriteRequest,
    name: &str,
    body: &Value,
) -> Result<(), Response> {
    let given = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty());
    if given || !request.rules.update_needs_resource_version {
        return Ok(());
    }
    // kube names the resource here by its plural, unlike the validation errors.
    let message = format!(
        "{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update",
        qualified(request.info)
    );
    Err(invalid(request, name, message))
}

/// A write to `/status`: the stored object with `wanted`'s status (spec and metadata sent along
/// are dropped, as kube drops them), validated.
pub(crate) fn status_write(
    request: &WriteRequest,
    name: &str,
    current: &Value,
    wanted: &Value,
) -> Result<Value, Response> {
    let mut object = current.clone();
    if let Some(map) = object.as_object_mut() {
        match wanted.get("status") {
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
    }
    validate(request, name, Some(current), &object)?;
    Ok(object)
}

/// The end of a create (`current` is `None`) or a write to the main resource: where the
/// resource has a `/status` subresource, the status is the stored one (cleared on create), as
/// kube keeps it; then validation.
pub(crate) fn finish(
    request: &WriteRequest,
    name: &str,
    current: Option<&Value>,
    mut object: Value,
) -> Result<Value, Response> {
    if request.rules.status_subresource
        && let Some(map) = object.as_object_mut()
    {
        match current {
            None => {
                map.insert("status".into(), json!({}));
            }
            Some(current) => match current.get("status") {
                Some(status) => {
                    map.insert("status".into(), status.clone());
                }
                None => {
                    map.remove("status");
                }
            },
        }
    }
    validate(request, name, current, &object)?;
    Ok(object)
}

fn validate(
    request: &WriteRequest,
    name: &str,
    current: Option<&Value>,
    object: &Value,
) -> Result<(), Response> {
    let Some(check) = request.rules.validate else {
        return Ok(());
    };
    check(current, object).map_err(|errors| {
        let message = crate::rules::invalid_message(request.info, name, &errors);
        invalid(request, name, message)
    })
}

/// A `422 Invalid` Status about object `name`.
fn invalid(request: &WriteRequest, name: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "details": { "name": name, "group": request.info.group, "kind": request.info.kind },
        "code": 422,
    });
    (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response()
}
