//! The operations the documents describe: every route of the route table that discovery lists
//! (`warrant_server::tooling::discoverable`), and nothing else. warrant has no GET, PATCH or DELETE on objects, so none is
//! described; kubectl reads the absence of PATCH as "no server-side field validation" and
//! validates manifests itself, as it does for TokenReview against kube-apiserver.

use serde_json::{Map, Value};

use super::definitions::{TOKEN_REQUEST, TOKEN_REVIEW, WARRANT_TOKEN_REVIEW};
use super::schema::{GVK_EXTENSION, GroupVersionExt as _, Gvk};
use warrant_server::tooling::{Endpoint, GroupVersion, WARRANT_V1ALPHA1, discoverable};

/// The media types request bodies may be in (`body.rs` reads them).
pub(crate) const CONSUMES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
/// The media types answers are in.
pub(crate) const PRODUCES: &[&str] = &["application/json"];

/// A path parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathParameter {
    /// Its name in the path template.
    pub(crate) name: &'static str,
    /// What it is.
    pub(crate) description: &'static str,
}

const NAMESPACED_NAME: &[PathParameter] = &[
    PathParameter {
        name: "name",
        description: "The service account's name.",
    },
    PathParameter {
        name: "namespace",
        description: "The service account's namespace.",
    },
];

/// A POST operation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Operation {
    /// The group-version of the URL: which `/openapi/v3` document lists it.
    pub(crate) group_version: GroupVersion,
    /// The path template, as the router has it.
    pub(crate) path: &'static str,
    /// Unique across the documents, in kube-apiserver's style.
    pub(crate) operation_id: &'static str,
    /// What it does.
    pub(crate) description: &'static str,
    /// The kind of the body it takes and returns.
    pub(crate) kind: Gvk,
    /// The definition of that body.
    pub(crate) body: &'static str,
    /// The parameters in the path.
    pub(crate) parameters: &'static [PathParameter],
}

impl Operation {
    /// The path item of either OpenAPI version: `post`, marked with the kind it takes, and the
    /// path parameters, each in the version's own shape.
    pub(crate) fn path_item(
        &self,
        mut post: Value,
        parameter: impl Fn(&PathParameter) -> Value,
    ) -> Value {
        if let Value::Object(map) = &mut post {
            map.insert(GVK_EXTENSION.into(), self.kind.to_json());
        }
        let mut item = Map::new();
        item.insert("post".into(), post);
        if !self.parameters.is_empty() {
            let parameters: Vec<Value> = self.parameters.iter().map(parameter).collect();
            item.insert("parameters".into(), parameters.into());
        }
        Value::Object(item)
    }

    /// The tag kube-apiserver would give it: `core_v1`, `authentication_v1`, `warrantDev_v1alpha1`.
    pub(crate) fn tag(&self) -> String {
        let GroupVersion { group, version, .. } = self.group_version;
        let group = match group {
            "" => "core".to_owned(),
            _ => {
                let mut words = group.trim_end_matches(".k8s.io").split('.');
                let mut tag = words.next().unwrap_or_default().to_owned();
                for word in words {
                    let mut chars = word.chars();
                    if let Some(first) = chars.next() {
                        tag.extend(first.to_uppercase());
                        tag.push_str(chars.as_str());
                    }
                }
                tag
            }
        };
        format!("{group}_{version}")
    }
}

/// Every operation warrant serves that discovery lists, from the route table.
pub(crate) fn operations() -> Vec<Operation> {
    discoverable()
        .filter_map(|route| {
            let group_version = route.group_version?;
            let resource = route.endpoint.resource()?;
            let (description, body) = match route.endpoint {
                Endpoint::TokenRequest => ("Issues a token for a service account.", TOKEN_REQUEST),
                // warrant's own group's TokenReview takes the proof of a key-bound token.
                Endpoint::TokenReview if group_version == WARRANT_V1ALPHA1 => (
                    "Reviews a token, with the proof of its key if it is key-bound.",
                    WARRANT_TOKEN_REVIEW,
                ),
                Endpoint::TokenReview => ("Reviews a token.", TOKEN_REVIEW),
                _ => return None,
            };
            Some(Operation {
                group_version,
                path: route.path,
                operation_id: route.operation_id?,
                description,
                // A TokenRequest is an authentication.k8s.io/v1 object wherever it is posted.
                kind: resource
                    .kind_group_version
                    .unwrap_or(group_version)
                    .kind(resource.kind),
                body,
                parameters: if resource.namespaced {
                    NAMESPACED_NAME
                } else {
                    &[]
                },
            })
        })
        .collect()
}

/// Who a document is for, which decides what it may describe.
///
/// kube-apiserver's aggregator merges the documents of an aggregated server into its own. It
/// keeps its own paths where they clash in `/openapi/v2`, but it merges the `/openapi/v3`
/// index as given and proxies each listed group-version to whichever server listed it last, in
/// no fixed order. If warrant listed `api/v1` there, the cluster's core OpenAPI would at times
/// be warrant's. And through the aggregator only `warrant.dev/v1alpha1` reaches warrant at all.
/// So what the aggregator relays is answered with the aggregated view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    /// A client talking to warrant directly: everything warrant serves.
    Direct,
    /// A request relayed by kube-apiserver's aggregator: warrant's own group only, and no
    /// claim on the kinds of kube-apiserver's groups.
    Aggregated,
}

impl View {
    /// Whether the view describes `endpoint`.
    pub(crate) fn describes(self, endpoint: &Operation) -> bool {
        match self {
            View::Direct => true,
            View::Aggregated => endpoint.group_version == WARRANT_V1ALPHA1,
        }
    }

    /// Whether the view may tie a definition to `kind` (for kubectl, the last definition that
    /// claims a kind in a merged document is that kind's schema).
    pub(crate) fn claims(self, kind: &Gvk) -> bool {
        match self {
            View::Direct => true,
            View::Aggregated => kind.group == WARRANT_V1ALPHA1.group,
        }
    }

    /// The group-versions the view describes, in order of first appearance.
    pub(crate) fn group_versions(self) -> Vec<GroupVersion> {
        let mut out: Vec<GroupVersion> = Vec::new();
        for endpoint in operations().iter().filter(|e| self.describes(e)) {
            if !out.contains(&endpoint.group_version) {
                out.push(endpoint.group_version);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warrant_server::tooling::{AUTHENTICATION_V1, CORE_V1};

    #[test]
    fn tags_follow_kube_apiserver() {
        let tags: Vec<String> = operations().iter().map(Operation::tag).collect();
        assert_eq!(
            tags,
            [
                "core_v1",
                "authentication_v1",
                "warrantDev_v1alpha1",
                "warrantDev_v1alpha1"
            ]
        );
    }

    #[test]
    fn the_aggregated_view_is_warrants_group_only() {
        assert_eq!(
            View::Aggregated.group_versions(),
            [WARRANT_V1ALPHA1],
            "the aggregator must not be offered kube-apiserver's group-versions"
        );
        assert_eq!(
            View::Direct.group_versions(),
            [CORE_V1, AUTHENTICATION_V1, WARRANT_V1ALPHA1]
        );
        assert!(!View::Aggregated.claims(&AUTHENTICATION_V1.kind("TokenReview")));
        assert!(View::Aggregated.claims(&WARRANT_V1ALPHA1.kind("TokenReview")));
    }

    #[test]
    fn operation_ids_are_unique() {
        let mut ids: Vec<&str> = operations().iter().map(|e| e.operation_id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), operations().len());
    }
}
