//! Reading a manifest file: multi-document YAML or JSON of v1 ServiceAccounts, Pods, Secrets and
//! Nodes, as `kubectl get -o yaml` / `-o json` writes them (a `kind: List` included).
//!
//! The parser reads only what a [`Record`](crate::Record) needs: `kind`, `apiVersion`,
//! `metadata.{name,namespace,uid,deletionTimestamp}`, the annotations in warrant's domains (kept
//! for ServiceAccounts only; every other annotation's value is stepped over unread) and, for
//! pods, the service account, node and projected token audiences. Every other field (`status`, `managedFields`, a Secret's
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
    /// A ServiceAccount's annotations in warrant's domains, sorted; empty for other kinds.
    pub(crate) annotations: Vec<(String, String)>,
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
    /// Adds one document or list item (a List's items one by one), or skips it with a warning.
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
            return self.list(line, &api_version, raw.items.unwrap_or_default());
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
        let Some(known) = self.known(line, &kind, &api_version, namespace.as_deref(), &name) else {
            return Ok(());
        };

        // Kubernetes clears the namespace of a cluster-scoped object, and kubectl puts a
        // namespaced object without one in `default`.
        let namespace = if known.namespaced() {
            namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
        } else {
            String::new()
        };
        let object_name = display_name(Some(&namespace), &name);
        let deletion_timestamp =
            self.deletion_timestamp(metadata.deletion_timestamp, known, &object_name)?;
        self.first_sighting(known, &namespace, &name, line, object_name)?;

        let labels = match metadata.labels {
            Some(WarrantAnnotations(kept)) => kept.into_iter().collect(),
            None => Vec::new(),
        };
        let pod = (known == Kind::Pod).then(|| pod_info(raw.spec.unwrap_or_default(), labels));
        let annotations = match metadata.annotations {
            Some(WarrantAnnotations(kept)) if known == Kind::ServiceAccount => {
                kept.into_iter().collect()
            }
            _ => Vec::new(),
        };
        self.entries.push(Entry {
            kind: known,
            namespace,
            name,
            uid: metadata.uid.filter(|u| !u.is_empty()),
            deletion_timestamp,
            pod,
            annotations,
        });
        Ok(())
    }

    /// A List's items, each as a document; a List of another API version is skipped whole.
    fn list(
        &mut self,
        line: u64,
        api_version: &str,
        items: Vec<Spanned<RawObject>>,
    ) -> Result<(), ManifestError> {
        if api_version != "v1" {
            tracing::warn!(
                path = self.path,
                line,
                api_version,
                "skipping a List that is not apiVersion v1, and its items"
            );
            return Ok(());
        }
        for item in items {
            self.object(item)?;
        }
        Ok(())
    }

    /// The kind of an object warrant reads (a v1 ServiceAccount, Pod, Secret or Node), or
    /// `None` after a warning that it is skipped.
    fn known(
        &self,
        line: u64,
        kind: &str,
        api_version: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Kind> {
        let Some(known) = Kind::ALL.into_iter().find(|k| k.name() == kind) else {
            tracing::warn!(
                path = self.path,
                line,
                kind,
                api_version,
                object = %display_name(namespace, name),
                "skipping object: warrant reads only v1 ServiceAccounts, Pods, Secrets and Nodes"
            );
            return None;
        };
        if api_version != "v1" {
            tracing::warn!(
                path = self.path,
                line,
                kind,
                api_version,
                object = %display_name(namespace, name),
                "skipping object: warrant reads these kinds only in the core v1 API"
            );
            return None;
        }
        Some(known)
    }

    /// `metadata.deletionTimestamp` of the object `object_name`, if it has one that parses.
    fn deletion_timestamp(
        &self,
        value: Option<Spanned<String>>,
        known: Kind,
        object_name: &str,
    ) -> Result<Option<Timestamp>, ManifestError> {
        let Some(spanned) = value else {
            return Ok(None);
        };
        match spanned.value.parse::<Timestamp>() {
            Ok(t) => Ok(Some(t)),
            Err(e) => Err(ManifestError::DeletionTimestamp {
                path: self.path.to_owned(),
                line: spanned.referenced.line(),
                kind: known,
                object: object_name.to_owned(),
                value: spanned.value,
                reason: e.to_string(),
            }),
        }
    }

    /// Notes where the object was first seen (at `line`); a second one fails the file.
    fn first_sighting(
        &mut self,
        known: Kind,
        namespace: &str,
        name: &str,
        line: u64,
        object_name: String,
    ) -> Result<(), ManifestError> {
        match self
            .first_seen
            .entry((known, namespace.to_owned(), name.to_owned()))
        {
            MapEntry::Occupied(first) => Err(ManifestError::Duplicate {
                path: self.path.to_owned(),
                line,
                first_line: *first.get(),
                kind: known,
                object: object_name,
            }),
            MapEntry::Vacant(slot) => {
                slot.insert(line);
                Ok(())
            }
        }
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object (or one whose namespace is unknown).
fn display_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

fn pod_info(spec: RawPodSpec, labels: Vec<(String, String)>) -> PodInfo {
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
        labels,
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
    annotations: Option<WarrantAnnotations>,
    /// A pod's labels in warrant's domains, read as the annotations are.
    labels: Option<WarrantAnnotations>,
}

/// `metadata.annotations`, of which only warrant's keys are read
/// ([`crate::is_warrant_annotation`]); the value of any other key (a last-applied
/// configuration that could quote a Secret's data) is stepped over unread. A key given twice
/// keeps its last value, as Kubernetes' own decoding does.
#[derive(Default)]
struct WarrantAnnotations(std::collections::BTreeMap<String, String>);

impl<'de> Deserialize<'de> for WarrantAnnotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AnnotationsVisitor;
        impl<'de> Visitor<'de> for AnnotationsVisitor {
            type Value = WarrantAnnotations;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of annotation keys to strings")
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<WarrantAnnotations, E> {
                Ok(WarrantAnnotations::default())
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<WarrantAnnotations, A::Error> {
                let mut kept = std::collections::BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if crate::is_warrant_annotation(&key) {
                        kept.insert(key, map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(WarrantAnnotations(kept))
            }
        }
        deserializer.deserialize_map(AnnotationsVisitor)
    }
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
mod tests;
