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
    assert_eq!(container["startupProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    find("NetworkPolicy", "warrant");

    // The pod's grace covers the shutdown delay and the 30 s requests in flight get after it,
    // or the kubelet would kill warrant mid-request.
    let delay = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str()?.strip_prefix("--shutdown-delay-duration="))
        .expect("the Deployment sets --shutdown-delay-duration");
    let delay: u64 = delay.trim_end_matches('s').parse().unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        grace > delay + 30,
        "{grace} s of grace for {delay} s + 30 s"
    );

    assert_serve_knows(&container["args"]);
}

/// Every flag in `args` (`["serve", "--flag=value", …]`) is one `warrant serve` knows.
fn assert_serve_knows(args: &Value) {
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let args = args.as_array().unwrap();
    assert_eq!(args[0], "serve");
    for arg in &args[1..] {
        let flag = arg.as_str().unwrap().split('=').next().unwrap();
        assert!(help.contains(flag), "warrant serve does not know {flag}");
    }
}

/// The control-plane example: a static pod whose flags warrant knows, serving the socket the
/// kube-apiserver patch mounts and names.
#[test]
fn the_control_plane_signer_example_fits_kube_apiserver() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/control-plane");
    let read = |name: &str| -> Value {
        serde_saphyr::from_str(&std::fs::read_to_string(format!("{dir}/{name}")).unwrap()).unwrap()
    };
    let pod = read("warrant-signer.yaml");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["namespace"], "kube-system");
    let container = &pod["spec"]["containers"][0];
    assert_serve_knows(&container["args"]);
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let socket = args
        .iter()
        .find_map(|a| a.strip_prefix("--service-account-signing-endpoint="))
        .unwrap();
    let run_dir = std::path::Path::new(socket).parent().unwrap();
    let patch = read("kube-apiserver-patch.yaml");
    let mounts = &patch["spec"]["containers"][0]["volumeMounts"];
    assert_eq!(mounts[0]["mountPath"], run_dir.to_str().unwrap());
    let patch_text = std::fs::read_to_string(format!("{dir}/kube-apiserver-patch.yaml")).unwrap();
    assert!(patch_text.contains(&format!("--service-account-signing-endpoint={socket}")));
}

/// Socket activation: `serve` takes the listening socket it is passed (systemd's LISTEN_FDS) and
/// ignores --secure-port; every other end-to-end test relies on it to own its port. After a
/// restart on the same socket, the server answers again without the port ever being free.
#[tokio::test]
async fn serve_takes_the_socket_it_is_passed() {
    use crate::tokens::OBJECTS;
    let mut w = Warrant::start(OBJECTS, &["--secure-port", "1"]).await;
    let before = w.token(&["--audience", "vault"]);
    w.restart(static_keys).await;
    assert_eq!(w.review(before.trim(), &["vault"])["authenticated"], true);
    let log = w.log();
    let serving = log
        .lines()
        .find(|l| l.contains("serving"))
        .unwrap_or_else(|| panic!("no serving line in:\n{log}"));
    assert!(
        serving.contains("socket_activated=true")
            && serving.contains(&format!("127.0.0.1:{}", w.port)),
        "{serving}"
    );
}

/// A service manager passing more than one socket is refused with the reason.
#[test]
fn serve_refuses_more_than_one_passed_socket() {
    let out = serve_refusing(&[], &[("LISTEN_FDS", "2")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("LISTEN_FDS passes 2 sockets; warrant serves on exactly one"),
        "{}",
        stderr(&out)
    );
}

/// The fleet examples parse, and the plugin flags the hub's provider config passes are ones
/// `warrant credential` knows; the member's audience is the one the ClusterProfile hands out.
#[test]
fn the_fleet_examples_fit_the_plugin() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/fleet");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
    let providers: Vec<Value> =
        serde_saphyr::from_multiple(&read("hub-provider-config.yaml")).unwrap();
    let exec = &providers[0]["providers"][0]["execConfig"];
    assert_eq!(exec["provideClusterInfo"], true);
    let help = Command::new(BIN)
        .args(["credential", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let args = exec["args"].as_array().unwrap();
    assert_eq!(args[0], "credential");
    for arg in &args[1..] {
        let arg = arg.as_str().unwrap();
        if arg.starts_with("--") {
            assert!(help.contains(arg), "warrant credential does not know {arg}");
        }
    }
    let profile: Value = serde_saphyr::from_str(&read("hub-cluster-profile.yaml")).unwrap();
    let audience = &profile["status"]["credentialProviders"][0]["cluster"]["extensions"][0]["extension"]
        ["audience"];
    let member: Value = serde_saphyr::from_str(&read("member-authentication-config.yaml")).unwrap();
    assert_eq!(&member["jwt"][0]["issuer"]["audiences"][0], audience);
}

/// The structured-authentication examples give a warrant token the user UID the webhook path
/// gives it (the service account's), not one that changes with every token: the mapping names
/// the claim that TokenReview's user UID comes from.
#[tokio::test]
async fn authentication_configs_map_uid_as_the_webhook_does() {
    let warrant = Warrant::start(&demo_objects(), &[]).await;
    let token = warrant.token(&[]);
    let reviewed = warrant.review(&token, &[]);
    assert_eq!(reviewed["authenticated"], true, "{reviewed}");
    let claims = claims(&token);
    assert_eq!(
        reviewed["user"]["uid"].as_str(),
        Some(claims.kubernetes.serviceaccount.uid.as_str()),
        "the webhook's user UID is the service account's"
    );
    for file in [
        "kube-apiserver/authentication-config.yaml",
        "fleet/member-authentication-config.yaml",
    ] {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/").to_owned() + file;
        let config: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let uid = &config["jwt"][0]["claimMappings"]["uid"];
        assert_eq!(
            uid["expression"], r#"claims["kubernetes.io"].serviceaccount.uid"#,
            "{file}: {uid}"
        );
        assert!(uid.get("claim").is_none(), "{file}: uid maps a claim too");
    }
}
