//! Writes over HTTP, for every registered resource, as kube-apiserver answers them:
//!
//! - `POST` creates: `201`, or `409 AlreadyExists`;
//! - `PUT` replaces: `200`, `404 NotFound`, or `409 Conflict` when the body's
//!   `metadata.resourceVersion` is not the stored one (optimistic concurrency);
//! - `PATCH` with `application/merge-patch+json` or `application/strategic-merge-patch+json`
//!   merges (a strategic patch is applied as a JSON merge patch: exact for objects without
//!   lists, such as a Lease's spec), honouring a `metadata.resourceVersion` precondition;
//! - `PATCH` with `application/apply-patch+yaml` (server-side apply, JSON bodies only) merges
//!   and tracks which field manager owns each field: applying a value to a field another manager
//!   owns with a different value is a `409 Conflict` unless `force=true`, which is what
//!   leader-election libraries such as kube-lease-manager rely on. Simplified: a field left out
//!   of a manager's later apply is kept (kube-apiserver removes it), and ownership covers fields
//!   outside `metadata` only.
//!
//! Each write is an event at a new revision, so watches see it. Tests can make writes fail
//! ([`Cluster::fail_writes`]), lose a race ([`Cluster::before_next_write`]), or wait until the
//! test lets them through, in the order it chooses ([`Cluster::hold_writes`]). Writes the test
//! makes directly ([`Cluster::update`] and friends) do not change field ownership.

// A refused write is its HTTP response, built once per request: no need to box it.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::cluster::{
    Cluster, EventType, HistoryItem, Line, ResourceType, Scope, encode, resource_mut, scoped,
    set_resource_version,
};
use crate::responses::{not_found, object_failure, qualified, status};
use crate::write_request::WriteRequest;
use crate::write_state::{BeforeWrite, HeldWrite, ObjectKey, Owner};

/// The largest body accepted, as kube-apiserver's limit (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

impl Cluster {
    /// While set, every write over HTTP (create, replace, patch) answers with this HTTP status
    /// (a `Status` body) and changes nothing, as an API server that refuses or cannot commit.
    pub fn fail_writes(&self, status: Option<u16>) {
        self.lock().writes.fail = status;
    }

    /// Runs `hook` once, just before the next write over HTTP of resource `plural` (e.g.
    /// `secrets`) is applied: what the hook changes (with [`Cluster::update`], say) lands first,
    /// as when another client wins a race, and the write's preconditions are checked against it.
    pub fn before_next_write(&self, plural: &str, hook: impl FnOnce(&Cluster) + Send + 'static) {
        let (state, signals) = (Arc::downgrade(&self.state), Arc::downgrade(&self.signals));
        let hook = move || {
            if let (Some(state), Some(signals)) = (state.upgrade(), signals.upgrade()) {
                hook(&Cluster { state, signals });
            }
        };
        self.lock().writes.before = Some(BeforeWrite {
            plural: plural.to_owned(),
            hook: Box::new(hook),
        });
    }

    /// From now on, every write over HTTP of resource `plural` (e.g. `secrets`) waits, received
    /// but not applied, until [`Cluster::release_write`] lets it through: a test orders writers
    /// that raced. A held write is applied when released even if its client has gone meanwhile
    /// (killed, say), as an API server commits a request it received. Writes held stay held
    /// after [`Cluster::stop_holding_writes`].
    pub fn hold_writes(&self, plural: &str) {
        self.lock().writes.hold = Some(plural.to_owned());
    }

    /// Writes arriving from now on are applied at once again.
    pub fn stop_holding_writes(&self) {
        self.lock().writes.hold = None;
    }

    /// The bodies of the writes held and not yet released, in arrival order.
    pub fn held_writes(&self) -> Vec<Value> {
        self.lock()
            .writes
            .held
            .iter()
            .map(|w| w.body.clone())
            .collect()
    }

    /// Applies the oldest held write now, preconditions checked against the objects as they
    /// are now; returns the HTTP status it is answered with (`None` if none is held).
    pub async fn release_write(&self) -> Option<u16> {
        let held = self.lock().writes.held.pop_front()?;
        let (report, status) = tokio::sync::oneshot::channel();
        held.release.send(report).ok()?;
        status.await.ok()
    }

    /// An object as stored now (resourceVersion included), or `None`.
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
        K::Scope: Scope,
    {
        let info = ResourceType::of::<K>();
        let state = self.lock();
        let entry = state
            .resources
            .get(&(info.group, info.plural))?
            .objects
            .get(&(scoped(info, namespace).to_owned(), name.to_owned()))?
            .clone();
        drop(state);
        serde_json::from_slice(&entry.full).ok()
    }
}

/// Serves a write (any method but GET) on a registered resource.
pub(crate) async fn handle(cluster: &Cluster, request: WriteRequest, body: Body) -> Response {
    if request.param("dryRun").is_some_and(|v| !v.is_empty()) {
        return bad_request("the fixture does not support dryRun");
    }
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                "the request body is too large",
            );
        }
    };
    let body = if bytes.is_empty() && request.method == Method::DELETE {
        json!({})
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(body) => body,
            Err(_) => return bad_request("the fixture accepts JSON bodies only"),
        }
    };
    if !body.is_object() {
        return bad_request("the body is not an object");
    }

    // A racing writer first, then the failure switch, as a test arranged them.
    let hook = {
        let mut state = cluster.lock();
        match state.writes.before.take() {
            Some(before) if before.plural == request.info.plural => Some(before.hook),
            other => {
                state.writes.before = other;
                None
            }
        }
    };
    if let Some(hook) = hook {
        hook();
    }
    let held = {
        let mut state = cluster.lock();
        (state.writes.hold.as_deref() == Some(request.info.plural)).then(|| {
            let (release, released) = tokio::sync::oneshot::channel();
            state.writes.held.push_back(HeldWrite {
                body: body.clone(),
                release,
            });
            released
        })
    };
    match held {
        Some(released) => {
            // Applied in a task of its own, so that it is applied once released whether or
            // not the client still waits for the answer.
            let (answer, answered) = tokio::sync::oneshot::channel();
            let cluster = cluster.clone();
            tokio::spawn(async move {
                let Ok(report) = released.await else { return };
                let response = perform(&cluster, request, body);
                let _ = report.send(response.status().as_u16());
                let _ = answer.send(response);
            });
            answered
                .await
                .unwrap_or_else(|_| internal("the held write was never released"))
        }
        None => perform(cluster, request, body),
    }
}

/// Applies a write whose body was read (and any racing writer's hook run): the failure switch,
/// then the method's semantics.
fn perform(cluster: &Cluster, request: WriteRequest, body: Value) -> Response {
    if let Some(code) = cluster.lock().writes.fail {
        let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return status(
            code,
            "InternalError",
            &format!(
                "fixture: {} of {} made to fail",
                request.method, request.info.plural
            ),
        );
    }

    let manager = request.param("fieldManager").unwrap_or_default().to_owned();
    let on_status = request.subresource.is_some();
    match (&request.method, request.name.clone()) {
        (&Method::DELETE, Some(name)) if !on_status => {
            crate::subresources::delete(cluster, &request, &name)
        }
        (&Method::PUT, Some(name)) if on_status => {
            commit(cluster, &request, &name, |current, _| {
                let current = current.ok_or_else(|| not_found(request.info, &name))?;
                crate::subresources::needs_resource_version(&request, &name, &body)?;
                check_precondition(request.info, &name, &current, &body)?;
                crate::subresources::status_write(&request, &name, &current, &body)
            })
        }
        (&Method::PATCH, Some(name)) if on_status => {
            if !is_merge_patch(&request) {
                return bad_request("the fixture patches /status with merge patches only");
            }
            commit(cluster, &request, &name, |current, _| {
                let current = current.ok_or_else(|| not_found(request.info, &name))?;
                check_precondition(request.info, &name, &current, &body)?;
                let mut merged = current.clone();
                merge(&mut merged, &body);
                crate::subresources::status_write(&request, &name, &current, &merged)
            })
        }
        (&Method::POST, None) => {
            let Some(name) = body
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
            else {
                return bad_request("metadata.name is required (the fixture has no generateName)");
            };
            commit(cluster, &request, &name, |current, owners| {
                if current.is_some() {
                    return Err(already_exists(request.info, &name));
                }
                owners.clear();
                let mut object = body;
                set_meta(
                    &mut object,
                    "uid",
                    json!(format!("fixture-uid-{name}")),
                    false,
                );
                set_meta(
                    &mut object,
                    "creationTimestamp",
                    json!("1970-01-01T00:00:00Z"),
                    false,
                );
                own_leaves(owners, &object, &manager);
                crate::subresources::finish(&request, &name, None, object)
            })
        }
        (&Method::PUT, Some(name)) => commit(cluster, &request, &name, |current, owners| {
            let current = current.ok_or_else(|| not_found(request.info, &name))?;
            if body.pointer("/metadata/name").and_then(Value::as_str) != Some(name.as_str()) {
                return Err(bad_request(&format!(
                    "the name of the object does not match the name on the URL ({name})"
                )));
            }
            crate::subresources::needs_resource_version(&request, &name, &body)?;
            check_precondition(request.info, &name, &current, &body)?;
            let mut object = body;
            for kept in ["uid", "creationTimestamp"] {
                if let Some(value) = current.pointer(&format!("/metadata/{kept}")) {
                    set_meta(&mut object, kept, value.clone(), true);
                }
            }
            take_changed(owners, &current, &object, &manager);
            crate::subresources::finish(&request, &name, Some(&current), object)
        }),
        (&Method::PATCH, Some(name)) => {
            let content_type = request
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            let force = request.param("force") == Some("true");
            match content_type.as_str() {
                "application/apply-patch+yaml" => {
                    if manager.is_empty() {
                        return bad_request("fieldManager is required for apply patch");
                    }
                    commit(cluster, &request, &name, |current, owners| {
                        apply(request.info, &name, current, owners, &body, &manager, force)
                    })
                }
                "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                    commit(cluster, &request, &name, |current, owners| {
                        let current = current.ok_or_else(|| not_found(request.info, &name))?;
                        check_precondition(request.info, &name, &current, &body)?;
                        let mut object = current.clone();
                        merge(&mut object, &body);
                        take_changed(owners, &current, &object, &manager);
                        crate::subresources::finish(&request, &name, Some(&current), object)
                    })
                }
                other => status(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "UnsupportedMediaType",
                    &format!("the fixture does not support patches of type {other:?}"),
                ),
            }
        }
        (method, _) => status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            &format!(
                "the fixture does not serve {method} on {}",
                request.info.plural
            ),
        ),
    }
}

/// Reads the object, lets `change` compute its next state (or refuse), and stores that at a new
/// revision, all under one lock. `201` if it was created, else `200`, with the stored object.
fn commit(
    cluster: &Cluster,
    request: &WriteRequest,
    name: &str,
    change: impl FnOnce(Option<Value>, &mut BTreeMap<String, Owner>) -> Result<Value, Response>,
) -> Response {
    let info = request.info;
    let namespace = scoped(info, request.namespace.as_deref().unwrap_or_default()).to_owned();
    if info.namespaced && namespace.is_empty() {
        return bad_request("a namespaced object is written under /namespaces/NAMESPACE/");
    }
    let mut state = cluster.lock();
    let key = (namespace.clone(), name.to_owned());
    let owners_key: ObjectKey = (info.group, info.plural, namespace.clone(), name.to_owned());
    let current = match state
        .resources
        .get(&(info.group, info.plural))
        .and_then(|r| r.objects.get(&key))
    {
        Some(entry) => match serde_json::from_slice::<Value>(&entry.full) {
            Ok(value) => Some(value),
            Err(_) => return internal("the stored object is not JSON"),
        },
        None => None,
    };
    let created = current.is_none();
    let mut owners = state
        .writes
        .owners
        .get(&owners_key)
        .cloned()
        .unwrap_or_default();
    let mut object = match change(current, &mut owners) {
        Ok(object) => object,
        Err(response) => return response,
    };
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(given) if info.namespaced && given != namespace => {
            return bad_request(&format!(
                "the namespace of the object ({given}) does not match the namespace on the URL ({namespace})"
            ));
        }
        _ if info.namespaced => set_meta(&mut object, "namespace", json!(namespace), true),
        _ => {}
    }
    set_meta(&mut object, "name", json!(name), true);
    let revision = state.revision + 1;
    set_resource_version(&mut object, revision);
    let entry = match encode(info, &namespace, &object) {
        Ok(entry) => Arc::new(entry),
        Err(e) => return internal(&e.to_string()),
    };
    let full = entry.full.clone();
    let resource = match resource_mut(&mut state, info) {
        Ok(resource) => resource,
        Err(e) => return internal(&e.to_string()),
    };
    resource.objects.insert(key, entry.clone());
    resource.history.push(HistoryItem {
        revision,
        line: Line::Event(
            if created {
                EventType::Added
            } else {
                EventType::Modified
            },
            entry,
        ),
    });
    state.revision = revision;
    state.writes.owners.insert(owners_key, owners);
    drop(state);
    cluster.signals.revision.send_replace(revision);
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (code, [(header::CONTENT_TYPE, "application/json")], full).into_response()
}

fn is_merge_patch(request: &WriteRequest) -> bool {
    request
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/merge-patch+json"))
}

/// Server-side apply of `config` by `manager`.
fn apply(
    info: ResourceType,
    name: &str,
    current: Option<Value>,
    owners: &mut BTreeMap<String, Owner>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, Response> {
    let mut object = current.unwrap_or_else(|| json!({ "metadata": { "name": name } }));
    let mut leaves = Vec::new();
    collect_leaves(config, String::new(), &mut leaves);
    let mut conflicts: Vec<(String, String)> = Vec::new();
    for (path, value) in &leaves {
        let Some(owner) = owners.get(path) else {
            continue;
        };
        if owner != manager && object.pointer(path).is_some_and(|v| v != value) {
            conflicts.push((owner.clone(), path.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        let listed: Vec<String> = conflicts
            .iter()
            .map(|(owner, path)| format!("conflict with {owner:?}: {}", path.replace('/', ".")))
            .collect();
        let body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure",
            "message": format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                listed.join("\n")
            ),
            "reason": "Conflict",
            "details": { "name": name, "group": info.group, "kind": info.plural },
            "code": 409,
        });
        return Err((StatusCode::CONFLICT, axum::Json(body)).into_response());
    }
    merge(&mut object, config);
    for (path, _) in leaves {
        owners.insert(path, manager.to_owned());
    }
    Ok(object)
}

/// `409 Conflict` if `body` names a resourceVersion other than the stored one.
pub(crate) fn check_precondition(
    info: ResourceType,
    name: &str,
    current: &Value,
    body: &Value,
) -> Result<(), Response> {
    let wanted = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty());
    let stored = current
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    match wanted {
        Some(wanted) if Some(wanted) != stored => Err(status(
            StatusCode::CONFLICT,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(info)
            ),
        )),
        _ => Ok(()),
    }
}

/// Every leaf outside `apiVersion`, `kind` and `metadata`, as (JSON pointer, value).
fn collect_leaves(value: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                collect_leaves(child, format!("{path}/{}", escape(key)), out);
            }
        }
        leaf => {
            if !path.is_empty() {
                out.push((path, leaf.clone()));
            }
        }
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Gives `manager` every field of `object`.
fn own_leaves(owners: &mut BTreeMap<String, Owner>, object: &Value, manager: &str) {
    let mut leaves = Vec::new();
    collect_leaves(object, String::new(), &mut leaves);
    for (path, _) in leaves {
        owners.insert(path, manager.to_owned());
    }
}

/// After an update by `manager` from `before` to `after`: fields it changed or set are its now,
/// and fields that are gone have no owner.
fn take_changed(
    owners: &mut BTreeMap<String, Owner>,
    before: &Value,
    after: &Value,
    manager: &str,
) {
    let mut leaves = Vec::new();
    collect_leaves(after, String::new(), &mut leaves);
    owners.retain(|path, _| after.pointer(path).is_some());
    for (path, value) in leaves {
        if before.pointer(&path) != Some(&value) {
            owners.insert(path, manager.to_owned());
        }
    }
}

/// A JSON merge patch (RFC 7386): objects merge, `null` removes, anything else replaces.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Sets `metadata.<field>`; if `overwrite` is false, only when it is not set.
fn set_meta(object: &mut Value, field: &str, value: Value, overwrite: bool) {
    if let Some(object) = object.as_object_mut() {
        let metadata = object.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut()
            && (overwrite || !metadata.contains_key(field))
        {
            metadata.insert(field.to_owned(), value);
        }
    }
}

fn already_exists(info: ResourceType, name: &str) -> Response {
    object_failure(
        info,
        name,
        StatusCode::CONFLICT,
        "AlreadyExists",
        "already exists",
    )
}

pub(crate) fn bad_request(message: &str) -> Response {
    status(StatusCode::BAD_REQUEST, "BadRequest", message)
}

fn internal(message: &str) -> Response {
    status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        &format!("fixture: {message}"),
    )
}
