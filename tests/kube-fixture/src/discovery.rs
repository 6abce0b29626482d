//! Discovery as kube-apiserver serves it without aggregation: `/api` (APIVersions), `/api/v1`
//! and `/apis/GROUP/VERSION` (APIResourceList), `/apis` (APIGroupList) and `/apis/GROUP`
//! (APIGroup), built from the registered resources, so a client that discovers (kube-rs's
//! `Discovery`, or a controller choosing between `v1beta1` and `v1`) finds exactly what the
//! fixture serves. A resource with a `/status` subresource lists `NAME/status` too, as kube
//! does. The aggregated form (`apidiscovery.k8s.io/v2`) is not served.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cluster::{Cluster, ResourceType};

/// The discovery document at `path`, or `None` if `path` is not one (or names a group or
/// version nothing is served at).
pub(crate) fn document(cluster: &Cluster, path: &str) -> Option<Value> {
    let served: Vec<(ResourceType, bool)> = cluster
        .lock()
        .resources
        .values()
        .map(|r| (r.info, r.rules.status_subresource))
        .collect();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api"] => Some(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [],
        })),
        ["api", "v1"] => resource_list(&served, "", "v1"),
        ["apis"] => {
            let groups: Vec<Value> = groups(&served)
                .into_iter()
                .map(|(name, versions)| group(&name, &versions))
                .collect();
            Some(json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups }))
        }
        ["apis", name] => {
            let versions = groups(&served).remove(*name)?;
            let mut document = group(name, &versions);
            if let Some(object) = document.as_object_mut() {
                object.insert("kind".into(), json!("APIGroup"));
                object.insert("apiVersion".into(), json!("v1"));
            }
            Some(document)
        }
        ["apis", group, version] => resource_list(&served, group, version),
        _ => None,
    }
}

/// Named groups and the versions served in each (newest registered first is not tracked; the
/// order is the versions' sort order).
fn groups(served: &[(ResourceType, bool)]) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (info, _) in served.iter().filter(|(i, _)| !i.group.is_empty()) {
        let versions = groups.entry(info.group.to_owned()).or_default();
        if !versions.iter().any(|v| v == info.version) {
            versions.push(info.version.to_owned());
        }
    }
    for versions in groups.values_mut() {
        // kube prefers GA over beta over alpha; "v1" sorts before "v1beta1" here, which is
        // that order for the versions the fixture serves.
        versions.sort();
    }
    groups
}

fn group(name: &str, versions: &[String]) -> Value {
    let listed: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
        .collect();
    json!({
        "name": name,
        "versions": listed,
        "preferredVersion": listed.first().cloned().unwrap_or(Value::Null),
    })
}

fn resource_list(served: &[(ResourceType, bool)], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for (info, status) in served
        .iter()
        .filter(|(i, _)| i.group == group && i.version == version)
    {
        resources.push(json!({
            "name": info.plural,
            "singularName": info.kind.to_ascii_lowercase(),
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }));
        if *status {
            resources.push(json!({
                "name": format!("{}/status", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}
