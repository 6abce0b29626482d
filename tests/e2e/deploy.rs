//! deploy/ renders with kubectl's kustomize (`kubectl apply -k deploy/` reads it the same way),
//! holds what a cluster install needs, and its Deployment's flags are flags warrant accepts.

use std::process::Command;

use serde_json::Value;

use crate::support::*;

fn rendered() -> Vec<Value> {
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let out = Command::new("kubectl")
        .args(["kustomize", deploy])
        .output()
        .expect("kubectl must be installed for the end-to-end tests");
    assert!(out.status.success(), "{}", stderr(&out));
    serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

#[test]
fn deploy_renders_a_complete_install() {
    let objects = rendered();
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("deploy/ has no {kind} {name}"))
            .clone()
    };
    find("Namespace", "warrant");
    find("ServiceAccount", "warrant");
    find("ClusterRoleBinding", "warrant:system:auth-delegator");
    let reader = find(
        "RoleBinding",
        "warrant:extension-apiserver-authentication-reader",
    );
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    find("ClusterRole", "warrant-object-reader");
    find("Service", "warrant");
    find("PodDisruptionBudget", "warrant");
    let api = find("APIService", "v1alpha1.warrant.dev");
    assert_eq!(api["spec"]["group"], "warrant.dev");
    assert_eq!(api["spec"]["version"], "v1alpha1");

    let deployment = find("Deployment", "warrant");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "ghcr.io/warrant-dev/warrant:v0.1.0");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert!(container["resources"]["requests"]["cpu"].is_string());
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");

    // Every flag the Deployment passes is one `warrant serve` knows.
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let args = container["args"].as_array().unwrap();
    assert_eq!(args[0], "serve");
    for arg in &args[1..] {
        let flag = arg.as_str().unwrap().split('=').next().unwrap();
        assert!(help.contains(flag), "warrant serve does not know {flag}");
    }
}
