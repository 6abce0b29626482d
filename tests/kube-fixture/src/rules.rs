//! What kube-apiserver does for particular resources beyond the generic object API, and the
//! selectors every list and watch takes:
//!
//! - field selectors: `metadata.name` and `metadata.namespace` for every resource, plus the
//!   labels a resource's [`Rules`] name (kube serves a fixed set per resource: PCRs have
//!   `spec.signerName`, `spec.nodeName` and `spec.podName`); any other label is a `400`
//!   `field label not supported: <label>`, kube's words;
//! - label selectors, equality- and set-based (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`,
//!   `a notin (x)`), for every resource;
//! - a `/status` subresource ([`Rules::status_subresource`]), a `resourceVersion` required on
//!   every replace ([`Rules::update_needs_resource_version`]) and a validation function
//!   ([`Rules::validate`]) whose field errors become kube's `422 Invalid`.

use serde_json::Value;

use crate::resource::{Entry, ResourceType};

/// Checks a write: `old` is the stored object (`None` on create), `new` the object about to be
/// stored. Returns kube's field errors (`metadata.name: Invalid value: …`), which the fixture
/// answers as one `422 Invalid`.
pub type Validate = fn(old: Option<&Value>, new: &Value) -> Result<(), Vec<String>>;

/// How kube-apiserver treats one resource beyond the generic object API (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Field selector labels served beyond `metadata.name` and `metadata.namespace`, each with
    /// the JSON pointer it reads (`("spec.signerName", "/spec/signerName")`).
    pub fields: Vec<(&'static str, &'static str)>,
    /// A `/status` subresource: create clears the status, replacing or patching the object
    /// keeps the stored status, and writes to `/status` keep the stored spec and metadata.
    pub status_subresource: bool,
    /// A `PUT` without `metadata.resourceVersion` is refused with kube's `422`, as for
    /// PodCertificateRequests (kube allows it for most resources).
    pub update_needs_resource_version: bool,
    /// Checks every create and update over HTTP.
    pub validate: Option<Validate>,
}

/// One requirement of a field selector.
#[derive(Debug, Clone)]
struct FieldRequirement {
    /// `None` for `metadata.name` / `metadata.namespace` (read from the entry), else a pointer.
    pointer: Option<&'static str>,
    label: String,
    equal: bool,
    value: String,
}

#[derive(Debug, Clone)]
enum LabelRequirement {
    Equal(String, String),
    NotEqual(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// What a list or watch selects, from its `fieldSelector` and `labelSelector`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    fields: Vec<FieldRequirement>,
    labels: Vec<LabelRequirement>,
}

impl Selection {
    /// Parses both selectors; `Err` is the message of kube's `400`.
    pub(crate) fn parse(rules: &Rules, fields: &str, labels: &str) -> Result<Self, String> {
        Ok(Selection {
            fields: parse_fields(rules, fields)?,
            labels: parse_labels(labels)?,
        })
    }

    /// Whether the stored object matches.
    pub(crate) fn matches(&self, entry: &Entry) -> bool {
        if self.fields.is_empty() && self.labels.is_empty() {
            return true;
        }
        let needs_body = !self.labels.is_empty() || self.fields.iter().any(|f| f.pointer.is_some());
        let body: Value = if needs_body {
            serde_json::from_slice(&entry.full).unwrap_or(Value::Null)
        } else {
            Value::Null
        };
        self.fields.iter().all(|f| {
            let actual = match f.pointer {
                Some(pointer) => body.pointer(pointer).and_then(Value::as_str).unwrap_or(""),
                None if f.label == "metadata.name" => entry.name.as_str(),
                None => entry.namespace.as_str(),
            };
            (actual == f.value) == f.equal
        }) && {
            let labels = body.pointer("/metadata/labels");
            let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            self.labels.iter().all(|r| match r {
                LabelRequirement::Equal(k, v) => label(k) == Some(v.as_str()),
                LabelRequirement::NotEqual(k, v) => label(k) != Some(v.as_str()),
                LabelRequirement::Exists(k) => label(k).is_some(),
                LabelRequirement::Absent(k) => label(k).is_none(),
                LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
                LabelRequirement::NotIn(k, vs) => {
                    label(k).is_none_or(|l| vs.iter().all(|v| v != l))
                }
            })
        }
    }
}

fn parse_fields(rules: &Rules, selector: &str) -> Result<Vec<FieldRequirement>, String> {
    let mut out = Vec::new();
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (label, equal, value) = if let Some((l, v)) = term.split_once("!=") {
            (l, false, v)
        } else if let Some((l, v)) = term.split_once("==") {
            (l, true, v)
        } else if let Some((l, v)) = term.split_once('=') {
            (l, true, v)
        } else {
            return Err(format!(
                "invalid selector: '{term}'; can't understand '{term}'"
            ));
        };
        let label = label.trim();
        let pointer = match label {
            "metadata.name" | "metadata.namespace" => None,
            other => match rules.fields.iter().find(|(l, _)| *l == other) {
                Some((_, pointer)) => Some(*pointer),
                None => return Err(format!("field label not supported: {other}")),
            },
        };
        out.push(FieldRequirement {
            pointer,
            label: label.to_owned(),
            equal,
            value: value.trim().to_owned(),
        });
    }
    Ok(out)
}

/// Splits at commas outside parentheses.
fn terms(selector: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(selector.get(start..i).unwrap_or_default());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(selector.get(start..).unwrap_or_default());
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_labels(selector: &str) -> Result<Vec<LabelRequirement>, String> {
    let mut out = Vec::new();
    for term in terms(selector) {
        let set = |rest: &str| -> Option<Vec<String>> {
            let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
            Some(inner.split(',').map(|v| v.trim().to_owned()).collect())
        };
        let requirement = if let Some((k, v)) = term.split_once("!=") {
            LabelRequirement::NotEqual(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            LabelRequirement::Equal(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            let values = set(rest).ok_or_else(|| bad_label(term))?;
            LabelRequirement::NotIn(k.trim().to_owned(), values)
        } else if let Some((k, rest)) = term.split_once(" in ") {
            let values = set(rest).ok_or_else(|| bad_label(term))?;
            LabelRequirement::In(k.trim().to_owned(), values)
        } else if let Some(k) = term.strip_prefix('!') {
            LabelRequirement::Absent(k.trim().to_owned())
        } else if term.contains([' ', '(', ')']) {
            return Err(bad_label(term));
        } else {
            LabelRequirement::Exists(term.to_owned())
        };
        out.push(requirement);
    }
    Ok(out)
}

fn bad_label(term: &str) -> String {
    format!("unable to parse requirement: {term:?}")
}

/// kube's `422` message for field errors of object `name`: `Kind.group "name" is invalid: …`
/// (several errors are listed in brackets, as kube aggregates them).
pub(crate) fn invalid_message(info: ResourceType, name: &str, errors: &[String]) -> String {
    let kind = if info.group.is_empty() {
        info.kind.to_owned()
    } else {
        format!("{}.{}", info.kind, info.group)
    };
    let listed = match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{kind} \"{name}\" is invalid: {listed}")
}
