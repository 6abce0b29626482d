//! The fixture's own tests: what warrant's cluster tests rely on it for, checked over plain
//! HTTP against kube-apiserver's behaviour (status codes, reasons and messages as kube-apiserver
//! sends them). If the fixture drifted from kube here, the watch cache, Secret store and Lease
//! tests built on it would prove nothing.

// Test helpers outside #[test] functions: a panic is how a test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "protocol/podcert.rs"]
mod podcert;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use warrant_kube_fixture::objects::{pod, secret};
use warrant_kube_fixture::{Fixture, ResourceType};

const SECRETS: &str = "/api/v1/namespaces/ns/secrets";
const PODS: &str = "/api/v1/pods";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(fixture: &Fixture) -> Self {
        Client {
            http: reqwest::Client::new(),
            base: fixture.url(),
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.unwrap();
        let code = response.status().as_u16();
        let body = response.bytes().await.unwrap();
        (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(self.http.put(format!("{}{path}", self.base)).json(body))
            .await
    }

    async fn apply(&self, path: &str, manager: &str, force: bool, body: &Value) -> (u16, Value) {
        let url = format!(
            "{}{path}?fieldManager={manager}{}",
            self.base,
            if force { "&force=true" } else { "" }
        );
        let request = self
            .http
            .patch(url)
            .header("content-type", "application/apply-patch+yaml")
            .body(body.to_string());
        self.send(request).await
    }

    /// The lines of a watch until `count` have arrived (a safety net bounds the wait).
    async fn watch(&self, query: &str, count: usize) -> Vec<Value> {
        let url = format!("{}{PODS}?watch=true&{query}", self.base);
        let mut response = self.http.get(url).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut buffer = Vec::new();
        let mut lines = Vec::new();
        while lines.len() < count {
            let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
                .await
                .unwrap_or_else(|_| panic!("the watch ({query}) sent nothing more after {lines:?}"))
                .unwrap();
            let Some(chunk) = chunk else { break };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buffer.drain(..=end).collect();
                lines.push(serde_json::from_slice(&line).unwrap());
            }
        }
        lines
    }
}

fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn writes_are_refused_as_kube_refuses_them() {
    let fixture = Fixture::start().await.unwrap();
    let client = Client::new(&fixture);
    let created = serde_json::to_value(secret("ns", "creds", "uid-1")).unwrap();

    let (code, first) = client.post(SECRETS, &created).await;
    assert_eq!(code, 201, "{first}");
    let (code, status) = client.post(SECRETS, &created).await;
    assert_eq!(
        (code, &status["reason"], &status["message"]),
        (
            409,
            &json!("AlreadyExists"),
            &json!("secrets \"creds\" already exists")
        )
    );

    // A replace must name the version it read: a stale one is a Conflict, with kube's message.
    let mut stale = first.clone();
    stale["metadata"]["resourceVersion"] = json!((rv(&first) - 1).to_string());
    let (code, status) = client.put(&format!("{SECRETS}/creds"), &stale).await;
    assert_eq!((code, &status["reason"]), (409, &json!("Conflict")));
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on secrets \"creds\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let (code, replaced) = client.put(&format!("{SECRETS}/creds"), &first).await;
    assert_eq!(code, 200, "{replaced}");
    assert!(rv(&replaced) > rv(&first), "every write is a new revision");
    // The version read before is stale now.
    let (code, _) = client.put(&format!("{SECRETS}/creds"), &first).await;
    assert_eq!(code, 409);

    let (code, status) = client.get(&format!("{SECRETS}/missing")).await;
    assert_eq!(
        (code, &status["reason"], &status["message"]),
        (
            404,
            &json!("NotFound"),
            &json!("secrets \"missing\" not found")
        )
    );
    assert_eq!(status["details"]["name"], "missing");
}

/// Held writes wait, received but not applied, until the test releases them in the order it
/// chooses; preconditions are checked when they are applied, and a write whose client went away
/// is still applied.
#[tokio::test]
async fn held_writes_are_applied_when_released_in_the_order_chosen() {
    let fixture = Fixture::start().await.unwrap();
    let client = Client::new(&fixture);
    let created = serde_json::to_value(secret("ns", "creds", "uid-1")).unwrap();
    let (code, first) = client.post(SECRETS, &created).await;
    assert_eq!(code, 201);

    fixture.hold_writes("secrets");
    let mut a = first.clone();
    a["metadata"]["labels"] = json!({"writer": "a"});
    let mut b = first.clone();
    b["metadata"]["labels"] = json!({"writer": "b"});
    // A's client gives up (dies) while its write is held; B's waits for its answer.
    let url = format!("{}{SECRETS}/creds", fixture.url());
    let gone = tokio::spawn(reqwest::Client::new().put(&url).json(&a).send());
    fixture.until(|c| c.held_writes().len() == 1).await;
    gone.abort();
    let waiting = tokio::spawn({
        let request = reqwest::Client::new().put(&url).json(&b);
        async move { request.send().await.unwrap().status().as_u16() }
    });
    fixture.until(|c| c.held_writes().len() == 2).await;
    let held = fixture.held_writes();
    assert_eq!(held[0]["metadata"]["labels"]["writer"], "a");
    assert_eq!(held[1]["metadata"]["labels"]["writer"], "b");
    let (_, unchanged) = client.get(&format!("{SECRETS}/creds")).await;
    assert_eq!(rv(&unchanged), rv(&first), "nothing applied while held");

    // A's write lands; B's, made against the same version, is then a Conflict.
    assert_eq!(fixture.release_write().await, Some(200));
    assert_eq!(fixture.release_write().await, Some(409));
    assert_eq!(waiting.await.unwrap(), 409);
    assert_eq!(fixture.release_write().await, None);
    let (_, stored) = client.get(&format!("{SECRETS}/creds")).await;
    assert_eq!(stored["metadata"]["labels"]["writer"], "a");

    // Writes go through at once again.
    fixture.stop_holding_writes();
    let (code, _) = client.put(&format!("{SECRETS}/creds"), &stored).await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn server_side_apply_protects_fields_another_manager_owns() {
    let fixture = Fixture::start().await.unwrap();
    fixture.register(ResourceType::of::<Lease>());
    let client = Client::new(&fixture);
    let lease = |holder: &str| {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "leader", "namespace": "ns"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
        })
    };
    let path = format!("{LEASES}/leader");

    // Applying creates, and the manager owns what it set.
    let (code, created) = client.apply(&path, "a", false, &lease("a")).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["holderIdentity"], "a");
    // The same manager may change its own fields.
    let (code, _) = client.apply(&path, "a", false, &lease("a")).await;
    assert_eq!(code, 200);
    // Another manager setting them to other values conflicts...
    let (code, status) = client.apply(&path, "b", false, &lease("b")).await;
    assert_eq!((code, &status["reason"]), (409, &json!("Conflict")));
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("Apply failed with 1 conflict: conflict with \"a\"")
            && message.contains(".spec.holderIdentity"),
        "{message}"
    );
    let (_, unchanged) = client.get(&path).await;
    assert_eq!(unchanged["spec"]["holderIdentity"], "a");
    // ...unless it forces, taking the fields over.
    let (code, taken) = client.apply(&path, "b", true, &lease("b")).await;
    assert_eq!(code, 200, "{taken}");
    assert_eq!(taken["spec"]["holderIdentity"], "b");
    let (code, _) = client.apply(&path, "a", false, &lease("a")).await;
    assert_eq!(code, 409, "the fields are b's now");
}

#[tokio::test]
async fn lists_page_through_one_snapshot() {
    let fixture = Fixture::start().await.unwrap();
    for i in 0..5 {
        fixture
            .create(&pod(
                "ns",
                &format!("p{i}"),
                &format!("u{i}"),
                "app",
                "n",
                None,
            ))
            .unwrap();
    }
    let client = Client::new(&fixture);
    let (code, page) = client.get(&format!("{PODS}?limit=2")).await;
    assert_eq!(code, 200);
    let taken_at = rv(&page);
    let mut names: Vec<String> = Vec::new();
    let mut page = page;
    loop {
        assert_eq!(page["kind"], "PodList");
        assert_eq!(
            rv(&page),
            taken_at,
            "every page reports the first page's revision"
        );
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned()),
        );
        let Some(token) = page["metadata"]["continue"].as_str().map(str::to_owned) else {
            break;
        };
        // A change in the middle of the list does not show in its later pages.
        fixture
            .create(&pod(
                "ns",
                &format!("late-{}", names.len()),
                "late",
                "app",
                "n",
                None,
            ))
            .unwrap();
        let (code, next) = client
            .get(&format!("{PODS}?limit=2&continue={token}"))
            .await;
        assert_eq!(code, 200, "{next}");
        page = next;
    }
    names.sort();
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);

    // A continue token outlived by a compaction is 410 Expired, as from etcd.
    let (_, first) = client.get(&format!("{PODS}?limit=2")).await;
    fixture.compact();
    let token = first["metadata"]["continue"].as_str().unwrap();
    let (code, status) = client
        .get(&format!("{PODS}?limit=2&continue={token}"))
        .await;
    assert_eq!((code, &status["reason"]), (410, &json!("Expired")));
}

#[tokio::test]
async fn a_watch_resumes_after_its_revision_and_is_gone_after_a_compaction() {
    let fixture = Fixture::start().await.unwrap();
    let client = Client::new(&fixture);
    fixture
        .create(&pod("ns", "before", "u0", "app", "n", None))
        .unwrap();
    let from = fixture.revision();
    fixture
        .create(&pod("ns", "after", "u1", "app", "n", None))
        .unwrap();
    fixture.delete::<Pod>("ns", "before").unwrap();

    // From a revision: exactly the changes after it, in order, each at its own revision.
    let lines = client.watch(&format!("resourceVersion={from}"), 2).await;
    let seen: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap(),
                l["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("ADDED", "after"), ("DELETED", "before")]);
    assert!(rv(&lines[0]["object"]) > from && rv(&lines[1]["object"]) > rv(&lines[0]["object"]));

    // A watch that asks for bookmarks gets one, at the newest revision. (The watch above is
    // counted until the fixture notices it closed.)
    tokio::time::timeout(
        Duration::from_secs(30),
        fixture.until(|c| c.watchers("pods") == 0),
    )
    .await
    .unwrap();
    let bookmarked = {
        let query = format!(
            "resourceVersion={}&allowWatchBookmarks=true",
            fixture.revision()
        );
        let watch = client.watch(&query, 1);
        let send = async {
            while fixture.cluster().watchers("pods") == 0 {
                tokio::task::yield_now().await;
            }
            fixture.bookmark();
        };
        let (lines, ()) = tokio::join!(watch, send);
        lines
    };
    assert_eq!(bookmarked[0]["type"], "BOOKMARK");
    assert_eq!(rv(&bookmarked[0]["object"]), fixture.revision());

    // After a compaction, a watch from before it gets 410 Expired as an ERROR event.
    fixture.compact();
    let lines = client.watch(&format!("resourceVersion={from}"), 1).await;
    assert_eq!(lines[0]["type"], "ERROR");
    let status = &lines[0]["object"];
    assert_eq!(
        (&status["code"], &status["reason"]),
        (&json!(410), &json!("Expired"))
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {from} (")),
        "{status}"
    );
}

#[tokio::test]
async fn metadata_only_and_selectors_are_served_or_refused_never_ignored() {
    let fixture = Fixture::start().await.unwrap();
    fixture.create(&secret("ns", "creds", "uid-1")).unwrap();
    fixture.create(&secret("ns", "other", "uid-2")).unwrap();
    let client = Client::new(&fixture);

    let request = client.http.get(format!("{}{SECRETS}", client.base)).header(
        "accept",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    );
    let (code, list) = client.send(request).await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    let item = &list["items"][0];
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert!(
        item.get("data").is_none(),
        "no secret data in metadata: {item}"
    );

    let (code, list) = client
        .get(&format!("{SECRETS}?fieldSelector=metadata.name%3Dcreds"))
        .await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["items"][0]["metadata"]["name"], "creds");

    // Label selectors are served; a field label the resource does not have is refused, as
    // kube refuses it, so no test passes on a wrong answer.
    let (code, list) = client
        .get(&format!("{SECRETS}?labelSelector=app%3Dx"))
        .await;
    assert_eq!((code, list["items"].as_array().unwrap().len()), (200, 0));
    let (code, status) = client
        .get(&format!("{SECRETS}?fieldSelector=spec.nodeName%3Dn"))
        .await;
    assert_eq!(
        (code, &status["reason"], &status["message"]),
        (
            400,
            &json!("BadRequest"),
            &json!("field label not supported: spec.nodeName")
        )
    );
}
