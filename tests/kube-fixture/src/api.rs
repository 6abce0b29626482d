//! The list/watch/get side of the Kubernetes API, for every registered resource, as
//! kube-apiserver serves it: paged lists with a resourceVersion and continue tokens, chunked watch
//! streams of ADDED/MODIFIED/DELETED/BOOKMARK lines from a resourceVersion, `410 Gone` for a
//! compacted one, GET of one object, and `PartialObjectMetadata` when the client asks for it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use crate::cluster::{Cluster, Entry, Line, ResourceType, Snapshot, event_line, scoped};
use crate::responses::{not_found, status};
use crate::rules::Selection;

/// The router: `extra` routes first, then the generic object API as the fallback, all behind
/// the request counter and the stall switch.
pub(crate) fn router(cluster: Cluster, extra: Router) -> Router {
    extra
        .merge(Router::new().fallback(objects).with_state(cluster.clone()))
        .layer(middleware::from_fn_with_state(cluster, observe))
}

/// Counts and logs every request, tracks how many are in flight, and holds them while stalled.
async fn observe(State(cluster): State<Cluster>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let watching = is_watch(&query);
    let metadata_only = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("as=PartialObjectMetadata"));
    {
        let mut state = cluster.lock();
        *state.requests.entry(path.clone()).or_default() += 1;
        state.request_log.push(format!(
            "{} {path}?{query}{}",
            request.method(),
            if metadata_only { " (metadata)" } else { "" }
        ));
        if !watching {
            state.in_flight += 1;
            state.max_in_flight = state.max_in_flight.max(state.in_flight);
        }
    }
    cluster.notify();
    wait_unstalled(&mut cluster.signals.stalled.subscribe()).await;
    let response = next.run(request).await;
    if !watching {
        cluster.lock().in_flight -= 1;
        cluster.notify();
    }
    response
}

async fn wait_unstalled(stalled: &mut watch::Receiver<bool>) {
    // An error means the fixture is gone; nothing to wait for then.
    let _ = stalled.wait_for(|stalled| !stalled).await;
}

fn is_watch(query: &str) -> bool {
    params(query).any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
}

fn params(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    url::form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

/// What a request addresses, parsed from its path.
struct Target {
    info: ResourceType,
    rules: crate::Rules,
    namespace: Option<String>,
    name: Option<String>,
    /// `status` for `…/NAME/status`.
    subresource: Option<String>,
}

fn parse_path(cluster: &Cluster, path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, plural, name, subresource) = match rest {
        ["namespaces", ns, plural] => (Some(*ns), *plural, None, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    let (info, rules) = {
        let state = cluster.lock();
        let resource = state.resources.get(&(group, plural))?;
        (resource.info, resource.rules.clone())
    };
    // A version the resource is not served at is absent, as on a cluster without it.
    if info.version != version || (namespace.is_some() && !info.namespaced) {
        return None;
    }
    if subresource.is_some_and(|s| s != "status" || !rules.status_subresource) {
        return None;
    }
    Some(Target {
        info,
        rules,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    })
}

async fn objects(
    State(cluster): State<Cluster>,
    method: Method,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    if method == Method::GET
        && let Some(document) = crate::discovery::document(&cluster, &path)
    {
        return (StatusCode::OK, axum::Json(document)).into_response();
    }
    let Some(target) = parse_path(&cluster, &path) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    if method != Method::GET {
        let write = crate::write_request::WriteRequest {
            info: target.info,
            rules: target.rules,
            namespace: target.namespace,
            name: target.name,
            subresource: target.subresource,
            method,
            headers,
            params: params(&query).collect(),
        };
        return crate::writes::handle(&cluster, write, request.into_body()).await;
    }
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let metadata_only = accept.contains("as=PartialObjectMetadata");
    let params: Vec<(String, String)> = params(&query).collect();
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    // Selectors the resource does not serve are refused, as kube refuses them, never ignored.
    let selection = match Selection::parse(
        &target.rules,
        &param("fieldSelector").unwrap_or_default(),
        &param("labelSelector").unwrap_or_default(),
    ) {
        Ok(selection) => selection,
        Err(message) => return status(StatusCode::BAD_REQUEST, "BadRequest", &message),
    };
    let filter = Filter {
        namespace: target.namespace.clone(),
        selection,
    };
    match target.name {
        Some(name) => get(
            &cluster,
            target.info,
            target.namespace,
            &name,
            metadata_only,
        ),
        None if is_watch(&query) => watch_stream(
            cluster,
            target.info,
            filter,
            WatchParams {
                resource_version: param("resourceVersion").unwrap_or_default(),
                bookmarks: param("allowWatchBookmarks").is_some_and(|v| v == "true"),
                timeout: param("timeoutSeconds").and_then(|v| v.parse().ok()),
                metadata_only,
            },
        ),
        None => list(
            &cluster,
            target.info,
            filter,
            param("limit").and_then(|v| v.parse().ok()).unwrap_or(0),
            param("continue").unwrap_or_default(),
            metadata_only,
        ),
    }
}

fn get(
    cluster: &Cluster,
    info: ResourceType,
    namespace: Option<String>,
    name: &str,
    metadata_only: bool,
) -> Response {
    let state = cluster.lock();
    if let Some(code) = state.fail_gets {
        let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return status(
            code,
            "InternalError",
            &format!("fixture: GET of {} {name:?} made to fail", info.plural),
        );
    }
    let namespace = scoped(info, namespace.as_deref().unwrap_or_default()).to_owned();
    let entry = state
        .resources
        .get(&(info.group, info.plural))
        .and_then(|r| r.objects.get(&(namespace, name.to_owned())));
    match entry {
        Some(entry) => json_response(if metadata_only {
            entry.meta.clone()
        } else {
            entry.full.clone()
        }),
        None => not_found(info, name),
    }
}

/// Which objects of a resource a list or watch covers: a namespace (or all), and what the
/// field and label selectors select.
#[derive(Debug, Clone, Default)]
struct Filter {
    namespace: Option<String>,
    selection: Selection,
}

impl Filter {
    fn matches(&self, entry: &Entry) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| &entry.namespace == ns)
            && self.selection.matches(entry)
    }
}

fn list(
    cluster: &Cluster,
    info: ResourceType,
    filter: Filter,
    limit: usize,
    continue_token: String,
    metadata_only: bool,
) -> Response {
    let mut state = cluster.lock();
    // A continue token is `snapshot:offset`; a new list takes a snapshot.
    let (id, offset) = if continue_token.is_empty() {
        let Some(resource) = state.resources.get(&(info.group, info.plural)) else {
            return not_found(info, "");
        };
        let items: Vec<Arc<Entry>> = resource
            .objects
            .values()
            .filter(|e| filter.matches(e))
            .cloned()
            .collect();
        let id = state.next_snapshot;
        state.next_snapshot += 1;
        let revision = state.revision;
        state.snapshots.insert(
            id,
            Snapshot {
                revision,
                items: Arc::new(items),
            },
        );
        (id, 0)
    } else {
        let parsed = continue_token
            .split_once(':')
            .and_then(|(id, off)| Some((id.parse::<u64>().ok()?, off.parse::<usize>().ok()?)));
        match parsed {
            Some(parsed) if state.snapshots.contains_key(&parsed.0) => parsed,
            _ => {
                return status(
                    StatusCode::GONE,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                );
            }
        }
    };
    let Some(snapshot) = state.snapshots.get(&id) else {
        return not_found(info, "");
    };
    let (revision, items) = (snapshot.revision, snapshot.items.clone());
    let end = if limit == 0 {
        items.len()
    } else {
        offset.saturating_add(limit).min(items.len())
    };
    let more = end < items.len();
    if !more {
        state.snapshots.remove(&id);
    }
    drop(state);

    let page = items.get(offset..end).unwrap_or_default();
    let (kind, api_version) = if metadata_only {
        (
            "PartialObjectMetadataList".to_owned(),
            "meta.k8s.io/v1".to_owned(),
        )
    } else {
        (format!("{}List", info.kind), api_version(info))
    };
    let metadata = if more {
        json!({
            "resourceVersion": revision.to_string(),
            "continue": format!("{id}:{end}"),
            "remainingItemCount": items.len() - end,
        })
    } else {
        json!({ "resourceVersion": revision.to_string() })
    };
    let mut body = Vec::with_capacity(page.iter().map(|e| e.full.len() + 1).sum::<usize>() + 256);
    body.extend_from_slice(
        format!(
            r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{metadata},"items":["#
        )
        .as_bytes(),
    );
    for (i, entry) in page.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(if metadata_only {
            &entry.meta
        } else {
            &entry.full
        });
    }
    body.extend_from_slice(b"]}");
    json_response(Bytes::from(body))
}

fn api_version(info: ResourceType) -> String {
    if info.group.is_empty() {
        info.version.to_owned()
    } else {
        format!("{}/{}", info.group, info.version)
    }
}

struct WatchParams {
    resource_version: String,
    bookmarks: bool,
    timeout: Option<u64>,
    metadata_only: bool,
}

/// A watch: a task writes lines into a channel that the response body drains. The task ends
/// when the client goes away, the timeout passes, or a test drops the connection (then the body
/// ends with an error, so the client sees a cut connection, not a clean end).
fn watch_stream(
    cluster: Cluster,
    info: ResourceType,
    filter: Filter,
    params: WatchParams,
) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(run_watch(cluster, info, filter, params, tx));
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

struct WatcherGuard {
    cluster: Cluster,
    plural: &'static str,
}

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        if let Some(n) = self.cluster.lock().watchers.get_mut(self.plural) {
            *n = n.saturating_sub(1);
        }
        self.cluster.notify();
    }
}

async fn run_watch(
    cluster: Cluster,
    info: ResourceType,
    mut filter: Filter,
    params: WatchParams,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    // Subscribed before the watch is counted: a test that sends a bookmark (or cuts watches)
    // once it sees the watch open must reach this watch, not fall between the two.
    let signals = cluster.signals.clone();
    let mut revisions = signals.revision.subscribe();
    let mut bookmarks = signals.bookmarks.subscribe();
    let mut drops = signals.drops.subscribe();
    let mut paused = signals.paused.subscribe();
    let mut stalled = signals.stalled.subscribe();
    bookmarks.mark_unchanged();
    drops.mark_unchanged();

    *cluster.lock().watchers.entry(info.plural).or_default() += 1;
    let _guard = WatcherGuard {
        cluster: cluster.clone(),
        plural: info.plural,
    };
    cluster.notify();
    let deadline = tokio::time::sleep(Duration::from_secs(params.timeout.unwrap_or(1800)));
    tokio::pin!(deadline);

    if !info.namespaced {
        filter.namespace = None;
    }
    let mut cursor = match params.resource_version.as_str() {
        // "Any" or "most recent": the current state as ADDED events, then changes.
        "" | "0" => {
            let (revision, lines) = {
                let state = cluster.lock();
                let lines: Vec<Bytes> = state
                    .resources
                    .get(&(info.group, info.plural))
                    .map(|r| {
                        r.objects
                            .values()
                            .filter(|e| filter.matches(e))
                            .map(|e| {
                                event_line(
                                    "ADDED",
                                    if params.metadata_only {
                                        &e.meta
                                    } else {
                                        &e.full
                                    },
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                (state.revision, lines)
            };
            for line in lines {
                if tx.send(Ok(line)).await.is_err() {
                    return;
                }
            }
            revision
        }
        rv => match rv.parse::<u64>() {
            Ok(rv) if rv >= cluster.lock().compacted => rv,
            Ok(rv) => {
                let compacted = cluster.lock().compacted;
                let status = json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure",
                    "message": format!("too old resource version: {rv} ({compacted})"),
                    "reason": "Expired", "code": 410,
                });
                let _ = tx
                    .send(Ok(event_line("ERROR", status.to_string().as_bytes())))
                    .await;
                return;
            }
            Err(_) => {
                let status = json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure",
                    "message": format!("invalid resourceVersion {rv:?}"),
                    "reason": "BadRequest", "code": 400,
                });
                let _ = tx
                    .send(Ok(event_line("ERROR", status.to_string().as_bytes())))
                    .await;
                return;
            }
        },
    };
    let mut bookmark_due = false;

    loop {
        let held = *paused.borrow_and_update() || *stalled.borrow_and_update();
        if !held {
            let pending = {
                let state = cluster.lock();
                if state.compacted > cursor {
                    None
                } else {
                    let lines: Vec<(u64, Bytes)> = state
                        .resources
                        .get(&(info.group, info.plural))
                        .map(|r| {
                            let start = r.history.partition_point(|h| h.revision <= cursor);
                            r.history
                                .get(start..)
                                .unwrap_or_default()
                                .iter()
                                .filter(|h| match &h.line {
                                    Line::Event(_, e) => filter.matches(e),
                                    Line::Raw(_) => true,
                                })
                                .map(|h| (h.revision, h.line.render(params.metadata_only)))
                                .collect()
                        })
                        .unwrap_or_default();
                    Some((lines, state.revision))
                }
            };
            let Some((lines, newest)) = pending else {
                // History this watch still needed is gone: tell the client to relist.
                let status = json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure",
                    "message": format!("too old resource version: {cursor}"),
                    "reason": "Expired", "code": 410,
                });
                let _ = tx
                    .send(Ok(event_line("ERROR", status.to_string().as_bytes())))
                    .await;
                return;
            };
            for (revision, line) in lines {
                if tx.send(Ok(line)).await.is_err() {
                    return;
                }
                cursor = revision;
            }
            if bookmark_due && params.bookmarks {
                let bookmark = json!({
                    "kind": info.kind, "apiVersion": api_version(info),
                    "metadata": { "resourceVersion": newest.to_string() },
                });
                if tx
                    .send(Ok(event_line("BOOKMARK", bookmark.to_string().as_bytes())))
                    .await
                    .is_err()
                {
                    return;
                }
                cursor = cursor.max(newest);
            }
            bookmark_due = false;
        }
        tokio::select! {
            changed = revisions.changed() => if changed.is_err() { return },
            changed = bookmarks.changed() => {
                if changed.is_err() { return }
                bookmark_due = true;
            }
            changed = paused.changed() => if changed.is_err() { return },
            changed = stalled.changed() => if changed.is_err() { return },
            _ = drops.changed() => {
                let _ = tx.send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "fixture: watch connection dropped",
                ))).await;
                return;
            }
            () = tx.closed() => return,
            () = &mut deadline => return,
        }
    }
}

fn json_response(body: Bytes) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
