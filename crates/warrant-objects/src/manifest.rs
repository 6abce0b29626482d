//! Reading a manifest file: multi-document YAML or JSON of v1 ServiceAccounts, Pods, Secrets and
//! Nodes, as `kubectl get -o yaml` / `-o json` writes them (a `kind: List` included).
//!
//! The parser reads only what a [`Record`](crate::Record) needs: `kind`, `apiVersion`,
//! `metadata.{name,namespace,uid,deletionTimestamp}` and, for pods, the service account, node
//! and projected token audiences. Every other field (`status`, `managedFields`, a Secret's
//! `data` and `stringData`) is skipped by the deserializer as it goes past, never stored. The
//! file's text is held only while it is parsed.
//!
//! Cost: one pass over the text; memory is the text plus the entries kept (a few hundred bytes
//! each). Parse errors never quote the file (no source snippet), so a syntax error inside a
//! Secret's data cannot leak it into a log.

use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_saphyr::{MessageFormatter, Spanned};

use crate::record::{Kind, PodInfo};

/// Why a manifest file could not be loaded or watched. Every message starts with the file's path
/// and, where the problem is in its text, the line, so an operator can go straight to it. No
/// message quotes the file's content beyond the names and timestamps it reports.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read: it is missing, unreadable, or not UTF-8.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The text is not valid YAML or JSON, or a field warrant reads has the wrong type
    /// (e.g. `metadata.name` is a mapping).
    #[error("{path}: {}{message}", position(*.line, *.column))]
    Syntax {
        /// The file.
        path: String,
        /// The line of the problem (1-based), when the parser knows it.
        line: Option<u64>,
        /// The column of the problem (1-based), when the parser knows it.
        column: Option<u64>,
        /// What the parser found wrong.
        message: String,
    },
    /// A document or list item has no `kind`, so warrant cannot tell what it is.
    #[error("{path}: line {line}: object has no kind")]
    MissingKind {
        /// The file.
        path: String,
        /// The line where the object starts.
        line: u64,
    },
    /// The file holds no document at all while the last good load had objects: most likely a
    /// writer truncated it and has not finished writing.
    #[error(
        "{path}: the file is empty (perhaps still being written); keeping the last good objects. To remove every object on purpose, write an empty list: `apiVersion: v1`, `kind: List`, `items: []`"
    )]
    Empty {
        /// The file.
        path: String,
    },
    /// An object has no `metadata.name`; Kubernetes requires one, and tokens name objects by it.
    #[error("{path}: line {line}: {kind} has no metadata.name")]
    MissingName {
        /// The file.
        path: String,
        /// The line where the object starts.
        line: u64,
        /// The object's kind, as written.
        kind: String,
    },
    /// `metadata.deletionTimestamp` is not an RFC 3339 time.
    #[error(
        "{path}: line {line}: {} {object:?}: metadata.deletionTimestamp {value:?} is not an RFC 3339 time: {reason}",
        .kind.name()
    )]
    DeletionTimestamp {
        /// The file.
        path: String,
        /// The line of the timestamp.
        line: u64,
        /// The object's kind.
        kind: Kind,
        /// `namespace/name`, or `name` for a node.
        object: String,
        /// The timestamp as written.
        value: String,
        /// Why it does not parse.
        reason: String,
    },
    /// The same object appears twice; warrant will not guess which one is meant.
    #[error(
        "{path}: line {line}: {} {object:?} appears twice (first at line {first_line})",
        .kind.name()
    )]
    Duplicate {
        /// The file.
        path: String,
        /// The line of the second occurrence.
        line: u64,
        /// The line of the first occurrence.
        first_line: u64,
        /// The object's kind.
        kind: Kind,
        /// `namespace/name`, or `name` for a node.
        object: String,
    },
    /// The file's directory could not be watched for changes.
    #[error("{path}: cannot watch its directory for changes: {source}")]
    Watch {
        /// The file.
        path: String,
        /// The watcher's error.
        #[source]
        source: Arc<warrant_watch::WatchError>,
    },
    /// Watching needs a Tokio runtime to run the reload task, and there was none.
    #[error("{path}: cannot watch for changes outside a Tokio runtime")]
    NoRuntime {
        /// The file.
        path: String,
    },
}

fn position(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("line {line}, column {column}: "),
        (Some(line), None) => format!("line {line}: "),
        _ => String::new(),
    }
}

/// One object read from the file, ready to become a record (its UID may still be missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) kind: Kind,
    /// `""` for nodes; `default` for a namespaced object that names none.
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// `metadata.uid` if the file gives one (an empty one counts as none).
    pub(crate) uid: Option<String>,
    pub(crate) deletion_timestamp: Option<Timestamp>,
    pub(crate) pod: Option<PodInfo>,
}

/// The namespace kubectl puts a namespaced object in when its manifest names none.
const DEFAULT_NAMESPACE: &str = "default";
/// The service account the ServiceAccount admission plugin gives a pod that names none.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Parses the text of a manifest file. `path` only labels errors and warnings.
///
/// Objects of other kinds, or of these kinds in another API version, are skipped with a
/// warning; anything that makes an object unusable (no kind, no name, a bad deletion timestamp,
/// a duplicate) fails the whole file, so a typo never silently drops an object.
pub(crate) fn parse(path: &str, text: &str) -> Result<Vec<Entry>, ManifestError> {
    let documents: Vec<Spanned<RawObject>> =
        serde_saphyr::from_multiple_with_options(text, parse_options())
            .map_err(|e| syntax_error(path, &e))?;
    let mut collector = Collector {
        path,
        entries: Vec::new(),
        first_seen: HashMap::new(),
    };
    for document in documents {
        collector.object(document)?;
    }
    Ok(collector.entries)
}

/// Parser options: no source snippet in errors (it could quote a Secret's data), and limits
/// sized for a large `kubectl get -A -o yaml` rather than a small config file, while keeping
/// the parser's protection against alias bombs.
fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_documents: 1_000_000,
            max_nodes: 100_000_000,
            max_events: 200_000_000,
            max_depth: 256,
            max_total_scalar_bytes: 1 << 30,
        },
    }
}

fn syntax_error(path: &str, error: &serde_saphyr::Error) -> ManifestError {
    let location = error.location();
    let message = match error {
        // The parser would name the key, and the mapping could be a Secret's data.
        serde_saphyr::Error::DuplicateMappingKey { .. } => Cow::Borrowed("duplicate mapping key"),
        _ => serde_saphyr::UserMessageFormatter.format_message(error),
    };
    ManifestError::Syntax {
        path: path.to_owned(),
        line: location.map(|l| l.line()).filter(|&l| l > 0),
        column: location.map(|l| l.column()).filter(|&c| c > 0),
        message: printable(&message),
    }
}

/// The text with control characters escaped: the parser's message goes to logs as it is, so
/// it must not be able to break a log line (the formatter's docs ask callers to do this).
fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

struct Collector<'a> {
    path: &'a str,
    entries: Vec<Entry>,
    /// Where each object was first seen, to report duplicates.
    first_seen: HashMap<(Kind, String, String), u64>,
}

impl Collector<'_> {
    fn object(&mut self, object: Spanned<RawObject>) -> Result<(), ManifestError> {
        let line = object.referenced.line();
        let raw = object.value;
        let Some(kind) = raw.kind.filter(|k| !k.is_empty()) else {
            return Err(ManifestError::MissingKind {
                path: self.path.to_owned(),
                line,
            });
        };
        let api_version = raw.api_version.unwrap_or_default();
        if kind == "List" {
            if api_version != "v1" {
                tracing::warn!(
                    path = self.path,
                    line,
                    api_version,
                    "skipping a List that is not apiVersion v1, and its items"
                );
                return Ok(());
            }
            for item in raw.items.unwrap_or_default() {
                self.object(item)?;
            }
            return Ok(());
        }

        let metadata = raw.metadata.unwrap_or_default();
        let Some(name) = metadata.name.filter(|n| !n.is_empty()) else {
            return Err(ManifestError::MissingName {
                path: self.path.to_owned(),
                line,
                kind,
            });
        };
        let namespace = metadata.namespace.filter(|n| !n.is_empty());
        let Some(known) = Kind::ALL.into_iter().find(|k| k.name() == kind) else {
            tracing::warn!(
                path = self.path,
                line,
                kind,
                api_version,
                object = %display_name(namespace.as_deref(), &name),
                "skipping object: warrant reads only v1 ServiceAccounts, Pods, Secrets and Nodes"
            );
            return Ok(());
        };
        if api_version != "v1" {
            tracing::warn!(
                path = self.path,
                line,
                kind,
                api_version,
                object = %display_name(namespace.as_deref(), &name),
                "skipping object: warrant reads these kinds only in the core v1 API"
            );
            return Ok(());
        }

        // Kubernetes clears the namespace of a cluster-scoped object, and kubectl puts a
        // namespaced object without one in `default`.
        let namespace = if known.namespaced() {
            namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
        } else {
            String::new()
        };
        let object_name = display_name(Some(&namespace), &name);

        let deletion_timestamp = match metadata.deletion_timestamp {
            None => None,
            Some(spanned) => match spanned.value.parse::<Timestamp>() {
                Ok(t) => Some(t),
                Err(e) => {
                    return Err(ManifestError::DeletionTimestamp {
                        path: self.path.to_owned(),
                        line: spanned.referenced.line(),
                        kind: known,
                        object: object_name,
                        value: spanned.value,
                        reason: e.to_string(),
                    });
                }
            },
        };

        match self
            .first_seen
            .entry((known, namespace.clone(), name.clone()))
        {
            MapEntry::Occupied(first) => {
                return Err(ManifestError::Duplicate {
                    path: self.path.to_owned(),
                    line,
                    first_line: *first.get(),
                    kind: known,
                    object: object_name,
                });
            }
            MapEntry::Vacant(slot) => {
                slot.insert(line);
            }
        }

        let pod = (known == Kind::Pod).then(|| pod_info(raw.spec.unwrap_or_default()));
        self.entries.push(Entry {
            kind: known,
            namespace,
            name,
            uid: metadata.uid.filter(|u| !u.is_empty()),
            deletion_timestamp,
            pod,
        });
        Ok(())
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object (or one whose namespace is unknown).
fn display_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

fn pod_info(spec: RawPodSpec) -> PodInfo {
    // The deprecated `serviceAccount` stands in for `serviceAccountName` (API defaulting), and
    // admission fills in `default` when neither is set.
    let service_account_name = spec
        .service_account_name
        .filter(|s| !s.is_empty())
        .or(spec.service_account.filter(|s| !s.is_empty()))
        .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_owned());
    let token_audiences = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.projected)
        .flat_map(|p| p.sources.unwrap_or_default())
        .filter_map(|s| s.service_account_token)
        .map(|t| t.audience.unwrap_or_default())
        .collect();
    PodInfo {
        service_account_name,
        node_name: spec.node_name.unwrap_or_default(),
        token_audiences,
    }
}

/// One document or list item. Deserialized by hand so that `spec` and `items` are read only when
/// the object's kind could need them: kubectl writes `kind` before `spec`, so the spec of a
/// Deployment or a custom resource is skipped unread rather than read as a pod spec. (When a
/// hand-written file puts `spec` before `kind`, it is read as a pod spec, which only fails if
/// the fields warrant reads have the wrong shape.) `items` comes before `kind` in kubectl's
/// YAML, so it is read unless the kind is already known not to be a List.
#[derive(Default)]
struct RawObject {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<RawMetadata>,
    spec: Option<RawPodSpec>,
    items: Option<Vec<Spanned<RawObject>>>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ObjectField {
    ApiVersion,
    Kind,
    Metadata,
    Spec,
    Items,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = RawObject;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object (a mapping with kind, apiVersion and metadata)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawObject, A::Error> {
        let mut object = RawObject::default();
        while let Some(field) = map.next_key::<ObjectField>()? {
            match field {
                ObjectField::ApiVersion => object.api_version = map.next_value()?,
                ObjectField::Kind => object.kind = map.next_value()?,
                ObjectField::Metadata => object.metadata = map.next_value()?,
                ObjectField::Spec if kind_is(&object, |k| k == "Pod") => {
                    object.spec = map.next_value()?;
                }
                ObjectField::Items if kind_is(&object, |k| k == "List") => {
                    object.items = map.next_value()?;
                }
                // Everything else, a Secret's data included, is stepped over unread.
                ObjectField::Spec | ObjectField::Items | ObjectField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(object)
    }
}

/// True if the object's kind is not known yet, or passes `test`.
fn kind_is(object: &RawObject, test: impl Fn(&str) -> bool) -> bool {
    object.kind.as_deref().is_none_or(test)
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMetadata {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    deletion_timestamp: Option<Spanned<String>>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPodSpec {
    service_account_name: Option<String>,
    service_account: Option<String>,
    node_name: Option<String>,
    volumes: Option<Vec<RawVolume>>,
}

#[derive(Deserialize)]
struct RawVolume {
    projected: Option<RawProjected>,
}

#[derive(Deserialize)]
struct RawProjected {
    sources: Option<Vec<RawProjection>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProjection {
    service_account_token: Option<RawServiceAccountToken>,
}

#[derive(Deserialize)]
struct RawServiceAccountToken {
    audience: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<Entry> {
        parse("objects.yaml", text).unwrap()
    }

    fn error(text: &str) -> String {
        parse("objects.yaml", text).unwrap_err().to_string()
    }

    fn find<'a>(entries: &'a [Entry], kind: Kind, name: &str) -> &'a Entry {
        entries
            .iter()
            .find(|e| e.kind == kind && e.name == name)
            .unwrap_or_else(|| panic!("{kind:?} {name} not found in {entries:?}"))
    }

    #[test]
    fn multi_document_yaml_with_defaults() {
        let text = "\
# objects for the demo
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app
  namespace: demo
  uid: 5b0c2c5e-0000-4000-8000-000000000001
---
apiVersion: v1
kind: Pod
metadata:
  name: app-0
spec:
  serviceAccount: legacy
---
apiVersion: v1
kind: Pod
metadata:
  name: bare
  namespace: demo
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
  namespace: ignored
---
---
apiVersion: v1
kind: Secret
metadata:
  name: token
  namespace: demo
  deletionTimestamp: \"2027-01-15T10:00:00Z\"
type: Opaque
data:
  password: c2VjcmV0
stringData:
  other: plain
";
        let got = entries(text);
        assert_eq!(got.len(), 5);
        let sa = find(&got, Kind::ServiceAccount, "app");
        assert_eq!(sa.namespace, "demo");
        assert_eq!(
            sa.uid.as_deref(),
            Some("5b0c2c5e-0000-4000-8000-000000000001")
        );
        assert_eq!(sa.pod, None);

        // No namespace: `default`. Only the deprecated field: it stands in.
        let pod = find(&got, Kind::Pod, "app-0");
        assert_eq!(pod.namespace, "default");
        assert_eq!(pod.uid, None);
        let info = pod.pod.as_ref().unwrap();
        assert_eq!(info.service_account_name, "legacy");
        assert_eq!(info.node_name, "");

        // No service account at all: `default`, as admission sets.
        let bare = find(&got, Kind::Pod, "bare");
        assert_eq!(bare.pod.as_ref().unwrap().service_account_name, "default");

        // Nodes are cluster-scoped whatever the manifest says.
        assert_eq!(find(&got, Kind::Node, "node-1").namespace, "");

        let secret = find(&got, Kind::Secret, "token");
        assert_eq!(
            secret.deletion_timestamp,
            Some("2027-01-15T10:00:00Z".parse().unwrap())
        );
    }

    #[test]
    fn service_account_name_wins_over_the_deprecated_field() {
        let got = entries(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n\
             spec: {serviceAccountName: new, serviceAccount: old, nodeName: n1}\n",
        );
        let info = find(&got, Kind::Pod, "p").pod.clone().unwrap();
        assert_eq!(info.service_account_name, "new");
        assert_eq!(info.node_name, "n1");
    }

    #[test]
    fn projected_token_audiences_in_volume_order() {
        let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec:
  volumes:
  - name: config
    configMap: {name: cfg}
  - name: vault
    projected:
      sources:
      - serviceAccountToken: {audience: vault, expirationSeconds: 600, path: token}
      - configMap: {name: ca}
      - serviceAccountToken: {path: api-token}
  - name: empty
    projected: {}
  - name: cloud
    projected:
      sources:
      - serviceAccountToken: {audience: "sts.amazonaws.com", path: token}
"#;
        let got = entries(text);
        let info = find(&got, Kind::Pod, "p").pod.clone().unwrap();
        assert_eq!(
            info.token_audiences,
            ["vault", "", "sts.amazonaws.com"].map(String::from)
        );
    }

    /// The shape `kubectl get pod,sa,secret -o yaml` prints: a List, keys in alphabetical order
    /// (`items` before `kind`), managedFields, status and secret data included.
    #[test]
    fn kubectl_get_o_yaml_list() {
        let text = r#"apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/restartedAt: "2025-01-01T00:00:00Z"
    creationTimestamp: "2025-06-01T12:00:00Z"
    generateName: web-7d4b9c-
    labels:
      app: web
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:generateName: {}
          f:labels:
            .: {}
            f:app: {}
        f:spec:
          f:containers:
            k:{"name":"web"}:
              .: {}
              f:image: {}
      manager: kube-controller-manager
      operation: Update
      time: "2025-06-01T12:00:00Z"
    name: web-7d4b9c-abcde
    namespace: shop
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: web-7d4b9c
      uid: 11111111-2222-4333-8444-555555555555
    resourceVersion: "4242"
    uid: 0d5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f
  spec:
    containers:
    - image: nginx:1.27
      name: web
      volumeMounts:
      - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
        name: kube-api-access-x7k2p
        readOnly: true
    nodeName: worker-2
    serviceAccount: web
    serviceAccountName: web
    volumes:
    - name: kube-api-access-x7k2p
      projected:
        defaultMode: 420
        sources:
        - serviceAccountToken:
            expirationSeconds: 3607
            path: token
        - configMap:
            items:
            - key: ca.crt
              path: ca.crt
            name: kube-root-ca.crt
  status:
    conditions:
    - lastProbeTime: null
      status: "True"
      type: Ready
    phase: Running
    podIP: 10.244.1.7
- apiVersion: v1
  kind: ServiceAccount
  metadata:
    creationTimestamp: "2025-06-01T11:00:00Z"
    name: web
    namespace: shop
    resourceVersion: "4000"
    uid: 7e6f5d4c-3b2a-4190-8f7e-6d5c4b3a2918
- apiVersion: v1
  data:
    password: c3VwZXJzZWNyZXQ=
  kind: Secret
  metadata:
    name: db
    namespace: shop
    uid: aa5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f
  type: Opaque
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
    namespace: shop
  spec:
    replicas: 2
    volumes: not a list of volumes
kind: List
metadata:
  resourceVersion: ""
"#;
        let got = entries(text);
        assert_eq!(got.len(), 3, "{got:?}");
        let pod = find(&got, Kind::Pod, "web-7d4b9c-abcde");
        assert_eq!(pod.namespace, "shop");
        assert_eq!(
            pod.uid.as_deref(),
            Some("0d5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f")
        );
        assert_eq!(
            pod.pod,
            Some(PodInfo {
                service_account_name: "web".into(),
                node_name: "worker-2".into(),
                token_audiences: vec![String::new()],
            })
        );
        assert_eq!(
            find(&got, Kind::Secret, "db").uid.as_deref(),
            Some("aa5e1f3a-9c1b-4b1e-8f0a-6a7b8c9d0e1f")
        );
    }

    /// The shape `kubectl get -o json` prints.
    #[test]
    fn kubectl_get_o_json_list() {
        let text = r#"{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "labels": {"kubernetes.io/hostname": "worker-2"},
                "name": "worker-2",
                "uid": "3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
            },
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"nodeInfo": {"kubeletVersion": "v1.33.1"}}
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "job-\u0031",
                "namespace": "batch",
                "deletionTimestamp": "2025-06-01T12:00:30Z"
            },
            "spec": {
                "serviceAccountName": "runner",
                "volumes": [{"name": "t", "projected": {"sources": [
                    {"serviceAccountToken": {"audience": "vault", "path": "t"}}
                ]}}]
            }
        },
        {
            "apiVersion": "v1",
            "data": {"token": "ZXhhbXBsZQ=="},
            "kind": "Secret",
            "metadata": {"name": "tok", "namespace": "batch"},
            "type": "kubernetes.io/service-account-token"
        }
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}
"#;
        let got = entries(text);
        assert_eq!(got.len(), 3);
        let node = find(&got, Kind::Node, "worker-2");
        assert_eq!(node.namespace, "");
        assert_eq!(
            node.uid.as_deref(),
            Some("3c1d2e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f")
        );
        let pod = find(&got, Kind::Pod, "job-1");
        assert_eq!(pod.namespace, "batch");
        assert_eq!(
            pod.deletion_timestamp,
            Some("2025-06-01T12:00:30Z".parse().unwrap())
        );
        let info = pod.pod.clone().unwrap();
        assert_eq!(info.service_account_name, "runner");
        assert_eq!(info.token_audiences, ["vault"]);
        assert_eq!(find(&got, Kind::Secret, "tok").namespace, "batch");
    }

    #[test]
    fn a_single_json_object() {
        let got = entries(
            "{\"apiVersion\": \"v1\", \"kind\": \"ServiceAccount\", \"metadata\": {\"name\": \"a\"}}",
        );
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].namespace, "default");
    }

    #[test]
    fn other_kinds_and_versions_are_skipped() {
        let text = "\
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  template:
    spec: {serviceAccountName: web}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {a: b}
---
apiVersion: example.com/v1
kind: Pod
metadata: {name: not-a-core-pod}
---
kind: Secret
metadata: {name: no-api-version}
---
apiVersion: v2
kind: List
items:
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: in-a-strange-list}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kept}
";
        let (got, logs) = capture_logs(|| entries(text));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].name, "kept");
        // Each skipped object is named in a warning, with where and what it is.
        let expected = [
            r#"line=1 kind="Namespace" api_version="v1" object=demo"#,
            r#"line=5 kind="Deployment" api_version="apps/v1" object=demo/web"#,
            r#"line=12 kind="ConfigMap" api_version="v1" object=cfg"#,
            r#"line=17 kind="Pod" api_version="example.com/v1" object=not-a-core-pod"#,
            r#"line=21 kind="Secret" api_version="" object=no-api-version"#,
            r#"line=24 api_version="v2""#,
        ];
        assert_eq!(logs.len(), expected.len(), "{logs:#?}");
        for (log, want) in logs.iter().zip(expected) {
            assert!(log.starts_with("WARN "), "{log}");
            assert!(log.contains(want), "{log}\nwant: {want}");
        }
    }

    /// Runs `f` and returns what it logged, one line per event: level, then the fields.
    fn capture_logs<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
        use std::fmt::Write as _;
        use std::sync::Mutex;
        use tracing::field::{Field, Visit};
        use tracing::span::{Attributes, Id, Record};
        use tracing::{Event, Metadata};

        #[derive(Default)]
        struct Capture(Mutex<Vec<String>>);
        struct Line(String);
        impl Visit for Line {
            fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
                let _ = write!(self.0, " {}={value:?}", field.name());
            }
        }
        impl tracing::Subscriber for &'static Capture {
            fn enabled(&self, _: &Metadata<'_>) -> bool {
                true
            }
            fn new_span(&self, _: &Attributes<'_>) -> Id {
                Id::from_u64(1)
            }
            fn record(&self, _: &Id, _: &Record<'_>) {}
            fn record_follows_from(&self, _: &Id, _: &Id) {}
            fn event(&self, event: &Event<'_>) {
                let mut line = Line(event.metadata().level().to_string());
                event.record(&mut line);
                self.0.lock().unwrap().push(line.0);
            }
            fn enter(&self, _: &Id) {}
            fn exit(&self, _: &Id) {}
        }

        let capture: &'static Capture = Box::leak(Box::default());
        let out = tracing::subscriber::with_default(capture, f);
        let logs = capture.0.lock().unwrap().clone();
        (out, logs)
    }

    #[test]
    fn empty_files_and_empty_documents_hold_nothing() {
        assert_eq!(entries(""), []);
        assert_eq!(entries("# nothing yet\n---\n---\n"), []);
        assert_eq!(entries("apiVersion: v1\nkind: List\nitems: []\n"), []);
    }

    #[test]
    fn every_error_names_its_line() {
        let cases = [
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
                "objects.yaml: line 5: object has no kind",
            ),
            (
                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n- apiVersion: v1\n  metadata: {name: b}\n",
                "objects.yaml: line 7: object has no kind",
            ),
            (
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  namespace: demo\n",
                "objects.yaml: line 2: Pod has no metadata.name",
            ),
            (
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: \"\"\n",
                "objects.yaml: line 1: Secret has no metadata.name",
            ),
            (
                "apiVersion: v1\nkind: Deployment\nspec: {}\n",
                "objects.yaml: line 1: Deployment has no metadata.name",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-0\n  namespace: demo\n  deletionTimestamp: yesterday\n",
                "objects.yaml: line 6: Pod \"demo/app-0\": metadata.deletionTimestamp \"yesterday\" is not an RFC 3339 time: ",
            ),
            (
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  deletionTimestamp: \"2025-13-01T00:00:00Z\"\n",
                "objects.yaml: line 5: Node \"n1\": metadata.deletionTimestamp \"2025-13-01T00:00:00Z\" is not an RFC 3339 time: ",
            ),
            (
                "# pods\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: app-0\n  namespace: demo\n---\n\
                 apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-1\n  namespace: demo\n---\n\
                 apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-0\n  namespace: demo\n",
                "objects.yaml: line 15: Pod \"demo/app-0\" appears twice (first at line 3)",
            ),
            (
                // `default` is the namespace either way.
                "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n\
                 apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: a, namespace: default}\n",
                "objects.yaml: line 8: ServiceAccount \"default/a\" appears twice (first at line 1)",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n   bad: indent\n",
                "objects.yaml: line 5, column 7: mapping values are not allowed in this context",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {first: a}\n",
                "objects.yaml: line 4, column 9: expected string scalar",
            ),
            (
                "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"a\"\n",
                "objects.yaml: line 4, column 15: unclosed bracket '{'",
            ),
            (
                "- apiVersion: v1\n  kind: Pod\n",
                "objects.yaml: line 1, column 1: expected mapping start",
            ),
        ];
        for (text, want) in cases {
            let got = error(text);
            if want.ends_with(": ") {
                // The rest is jiff's explanation.
                assert!(
                    got.starts_with(want),
                    "{text:?}\n got: {got}\nwant: {want}…"
                );
            } else {
                assert_eq!(got, want, "{text:?}");
            }
        }
    }

    #[test]
    fn errors_never_quote_secret_data() {
        let head = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n";
        let cases = [
            "data:\n  password: hunter2: oops\n",
            "data:\n  password: \"hunter2\\q\"\n",
            "data:\n  password: hunter2\n  password: hunter2\n",
            "data:\n  password: 'hunter2\n",
            "data:\n  password: *hunter2\n",
            "data:\n  password: [hunter2\n",
            "data:\n  password: {hunter2: x, hunter2: y}\n",
            "stringData:\n  password: |\n   hunter2\n  bad\n",
            "data:\n\tpassword: hunter2\n",
        ];
        for case in cases {
            let got = error(&format!("{head}{case}"));
            assert!(got.starts_with("objects.yaml: line "), "{got}");
            assert!(!got.contains("hunter2"), "{got}");
        }
        assert_eq!(
            error(&format!("{head}{}", cases[2])),
            "objects.yaml: line 6, column 3: duplicate mapping key"
        );
    }
}
