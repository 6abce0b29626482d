//! deploy/ renders with kubectl's kustomize (`kubectl apply -k` reads it the same way), alone and
//! with every component, holds what a cluster install needs, and its flags are flags warrant
//! accepts; docs/install.md's local commands run and its overlay renders; the alerts and the
//! dashboard query only metrics warrant exports; the Dockerfile keeps its invariants.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::*;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");

/// The components of deploy/components/, each of which an overlay may add.
const COMPONENTS: &[&str] = &[
    "cert-manager",
    "monitoring",
    "key-secret",
    "audit",
    "external-signer",
    "no-secret-binding",
    "injection",
    "control-plane-monitoring",
    "pod-certificates",
    "pod-certificates-nodes-only",
    "pod-certificates-kept-ca",
];

/// `kubectl kustomize DIR`, parsed.
fn render(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl must be installed for the end-to-end tests");
    assert!(out.status.success(), "{}: {}", dir.display(), stderr(&out));
    serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

fn rendered() -> Vec<Value> {
    render(Path::new(DEPLOY))
}

/// An overlay of deploy/ with `components`, in a scratch directory beside a link to deploy/,
/// as docs/install.md lays one out; rendered.
fn render_with(components: &[&str]) -> Vec<Value> {
    try_render_with(components).unwrap_or_else(|e| panic!("{components:?}: {e}"))
}

/// The same, or kustomize's error.
fn try_render_with(components: &[&str]) -> Result<Vec<Value>, String> {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(DEPLOY, dir.path().join("deploy")).unwrap();
    std::fs::create_dir(dir.path().join("overlay")).unwrap();
    let list: String = components
        .iter()
        .map(|c| format!("  - ../deploy/components/{c}\n"))
        .collect();
    std::fs::write(
        dir.path().join("overlay/kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy\ncomponents:\n{list}"
        ),
    )
    .unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir.path().join("overlay"))
        .output()
        .expect("kubectl must be installed for the end-to-end tests");
    if out.status.success() {
        Ok(serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap())
    } else {
        Err(stderr(&out))
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the render"))
}

fn has(objects: &[Value], kind: &str, name: &str) -> bool {
    objects
        .iter()
        .any(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn args(container: &Value) -> Vec<String> {
    container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// The Deployment's container's flags as the kubelet passes them: `$(NAME)` replaced by the
/// container's variable NAME, a value or the pod's namespace from the downward API.
fn pod_flags(deployment: &Value) -> Vec<String> {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let vars: Vec<(String, String)> = container["env"]
        .as_array()
        .map(|env| {
            env.iter()
                .filter_map(|e| {
                    let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                        Some("metadata.namespace") => deployment["metadata"]["namespace"].as_str(),
                        Some(_) => None,
                        None => e["value"].as_str(),
                    }?;
                    Some((
                        format!("$({})", e["name"].as_str().unwrap()),
                        value.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    args(container)
        .into_iter()
        .map(|flag| {
            let flag = vars
                .iter()
                .fold(flag, |flag, (name, value)| flag.replace(name, value));
            assert!(
                !flag.contains("$("),
                "{flag}: a variable the container lacks"
            );
            flag
        })
        .collect()
}

/// The image and version deploy/release sets.
fn release() -> (String, String) {
    let text = std::fs::read_to_string(format!("{DEPLOY}/release/kustomization.yaml")).unwrap();
    let release: Value = serde_saphyr::from_str(&text).unwrap();
    let image = &release["images"][0];
    let tag = image["newTag"].as_str().unwrap().to_owned();
    (
        format!("{}:{tag}", image["newName"].as_str().unwrap()),
        release["labels"][0]["pairs"]["app.kubernetes.io/version"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
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
    let flags = args(&deployment["spec"]["template"]["spec"]["containers"][0]);
    // The canonical name the docs give (--log-format is its alias).
    assert!(
        flags.contains(&"--logging-format=json".to_owned()),
        "{flags:?}"
    );
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

/// kube-apiserver's static pod as kubeadm 1.34 writes it (flags sorted by name, the key files
/// in the middle), trimmed to what the patches touch and what they must keep.
const KUBEADM_KUBE_APISERVER: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels: {component: kube-apiserver, tier: control-plane}
spec:
  hostNetwork: true
  containers:
    - name: kube-apiserver
      image: registry.k8s.io/kube-apiserver:v1.34.0
      command:
        - kube-apiserver
        - --advertise-address=192.168.1.10
        - --allow-privileged=true
        - --authorization-mode=Node,RBAC
        - --client-ca-file=/etc/kubernetes/pki/ca.crt
        - --enable-admission-plugins=NodeRestriction
        - --etcd-servers=https://127.0.0.1:2379
        - --secure-port=6443
        - --service-account-issuer=https://kubernetes.default.svc.cluster.local
        - --service-account-key-file=/etc/kubernetes/pki/sa.pub
        - --service-account-signing-key-file=/etc/kubernetes/pki/sa.key
        - --service-cluster-ip-range=10.96.0.0/12
        - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt
        - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key
      volumeMounts:
        - {name: k8s-certs, mountPath: /etc/kubernetes/pki, readOnly: true}
  volumes:
    - name: k8s-certs
      hostPath: {path: /etc/kubernetes/pki, type: DirectoryOrCreate}
"#;

/// The control-plane example: a static pod whose flags warrant knows, serving the socket that
/// kube-apiserver names and mounts once kubeadm applied deploy/control-plane/kubeadm (as
/// `kubeadm upgrade --patches` does, the files in name order, each of its type, here with
/// kubectl's implementation of the same patch types): the two key-file flags, which exclude the
/// signing endpoint, gone; the endpoint and warrant's maximum lifetime added; kubeadm's other
/// flags and mounts kept.
#[test]
fn the_control_plane_signer_example_fits_kube_apiserver() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/control-plane");
    // Rendered as the docs render it, with the release's image.
    let pod = render(Path::new(dir)).remove(0);
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["namespace"], "kube-system");
    let container = &pod["spec"]["containers"][0];
    assert_serve_knows(&container["args"]);
    let warrant_flags = args(container);
    let flag = |flags: &[String], name: &str| {
        flags
            .iter()
            .find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_owned))
    };
    let socket = flag(&warrant_flags, "--service-account-signing-endpoint").unwrap();
    let run_dir = std::path::Path::new(&socket).parent().unwrap();

    // kubeadm's manifest, patched as kubeadm patches it.
    let scratch = tempfile::tempdir().unwrap();
    let mut manifest = scratch.path().join("kube-apiserver.yaml");
    std::fs::write(&manifest, KUBEADM_KUBE_APISERVER).unwrap();
    let mut patches: Vec<_> = std::fs::read_dir(format!("{dir}/kubeadm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    patches.sort();
    let names: Vec<String> = patches
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "kube-apiserver0+strategic.yaml",
            "kube-apiserver1+json.yaml"
        ]
    );
    for (i, patch) in patches.iter().enumerate() {
        // kubeadm's naming: target[suffix][+patchtype].extension.
        let name = patch.file_name().unwrap().to_str().unwrap();
        let kind = name
            .strip_suffix(".yaml")
            .and_then(|n| n.split_once('+'))
            .unwrap()
            .1;
        let out = Command::new("kubectl")
            .args(["patch", "--local", "-o", "yaml", "--type", kind, "-f"])
            .arg(&manifest)
            .arg("--patch-file")
            .arg(patch)
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        manifest = scratch.path().join(format!("kube-apiserver-{i}.yaml"));
        std::fs::write(&manifest, &out.stdout).unwrap();
    }
    let patched: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let kube = &patched["spec"]["containers"][0];
    let command: Vec<String> = kube["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    for gone in [
        "--service-account-key-file",
        "--service-account-signing-key-file",
    ] {
        assert_eq!(flag(&command, gone), None, "{command:?}");
    }
    assert_eq!(
        flag(&command, "--service-account-signing-endpoint").as_deref(),
        Some(socket.as_str())
    );
    // Neither refuses the other's tokens: kube-apiserver's maximum is warrant's.
    assert_eq!(
        flag(&command, "--service-account-max-token-expiration"),
        flag(&warrant_flags, "--service-account-max-token-expiration")
    );
    // The issuer stays kubeadm's, which is warrant's.
    assert_eq!(
        flag(&command, "--service-account-issuer"),
        flag(&warrant_flags, "--service-account-issuer")
    );
    // Nothing else of kubeadm's is lost.
    let original: Value = serde_saphyr::from_str(KUBEADM_KUBE_APISERVER).unwrap();
    let kept: Vec<&Value> = original["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            !a.as_str()
                .unwrap()
                .starts_with("--service-account-key-file")
        })
        .filter(|a| {
            !a.as_str()
                .unwrap()
                .starts_with("--service-account-signing-key-file")
        })
        .collect();
    assert_eq!(command.len(), kept.len() + 2, "{command:?}");
    for arg in kept {
        assert!(command.contains(&arg.as_str().unwrap().to_owned()), "{arg}");
    }
    assert!(
        kube["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "k8s-certs")
    );
    let mounted = kube["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == run_dir.to_str().unwrap())
        .expect("kube-apiserver mounts the socket's directory");
    // Neither pod has the kubelet create the socket's directory: one it created would be
    // root's, and warrant (not root) could not bind there.
    let host_dir = |volumes: &Value, path: &std::path::Path| {
        volumes
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["hostPath"]["path"] == path.to_str().unwrap())
            .map(|v| (v["name"].clone(), v["hostPath"]["type"].clone()))
            .unwrap_or_else(|| panic!("no hostPath volume for {}", path.display()))
    };
    let (name, kind) = host_dir(&patched["spec"]["volumes"], run_dir);
    assert_eq!(name, mounted["name"]);
    assert_eq!(kind, "Directory");
    assert_eq!(host_dir(&pod["spec"]["volumes"], run_dir).1, "Directory");

    // external-signer.md's upgrade copies these patches, passes them to each kubeadm command
    // that writes the control plane, and ends with the signer's probe.
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/external-signer.md"
    ))
    .unwrap();
    let section = &doc[doc.find("## Upgrading kubeadm").unwrap()..];
    let section = &section[..section.find("\n## ").unwrap()];
    let blocks = sh_blocks(section);
    let commands = blocks.join("\n");
    for name in &names {
        assert!(
            commands.contains(&format!("deploy/control-plane/kubeadm/{name}")),
            "{name} is not copied"
        );
    }
    for command in [
        "kubeadm upgrade apply",
        "kubeadm upgrade node",
        "kubeadm join",
    ] {
        let line = commands
            .lines()
            .find(|l| l.starts_with(command))
            .unwrap_or_else(|| panic!("no {command}"));
        assert!(
            line.contains("--patches /etc/kubernetes/warrant-patches"),
            "{line}"
        );
    }
    let last = blocks.last().unwrap().trim_end().lines().last().unwrap();
    assert!(
        last.starts_with(&format!("warrant probe-signer --signing-endpoint {socket}")),
        "{last}"
    );
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
/// `warrant credential` knows; warrant's URL (https) and CA are the provider config's, the
/// profile's reserved extensions are ignored for warrant, the profile (under KEP-5339's
/// `accessProviders`) names no warrant, CA or audience of its own, and the member trusts the
/// audience the plugin then uses: the member's server URL.
#[test]
fn the_fleet_examples_fit_the_plugin() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/fleet");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
    let providers: Vec<Value> =
        serde_saphyr::from_multiple(&read("hub-provider-config.yaml")).unwrap();
    let provider = &providers[0]["providers"][0];
    let exec = &provider["execConfig"];
    assert_eq!(exec["provideClusterInfo"], true);
    for policy in ["profileSourcedCLIArgsPolicy", "profileSourcedEnvVarsPolicy"] {
        assert_eq!(provider[policy], "Ignore", "{policy}");
    }
    let help = Command::new(BIN)
        .args(["credential", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let args: Vec<&str> = exec["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "credential");
    for arg in &args[1..] {
        if arg.starts_with("--") {
            assert!(help.contains(arg), "warrant credential does not know {arg}");
        }
    }
    let flag = |name: &str| {
        let at = args.iter().position(|a| *a == name).unwrap();
        args[at + 1]
    };
    assert!(flag("--warrant-url").starts_with("https://"));
    assert!(!flag("--warrant-ca-file").is_empty());
    let profile: Value = serde_saphyr::from_str(&read("hub-cluster-profile.yaml")).unwrap();
    let cluster = &profile["status"]["accessProviders"][0]["cluster"];
    for extension in cluster["extensions"].as_array().into_iter().flatten() {
        for key in ["warrant", "warrantCA", "audience"] {
            assert!(extension["extension"].get(key).is_none(), "{extension}");
        }
    }
    let member: Value = serde_saphyr::from_str(&read("member-authentication-config.yaml")).unwrap();
    assert_eq!(
        member["jwt"][0]["issuer"]["audiences"][0],
        cluster["server"]
    );

    // The controller's pod: no mount inside another (a volume mounted into a ConfigMap's
    // volume, or the reverse, is not what either expects); the command in the image volume,
    // whose root holds the image's /warrant; the CA file in the ConfigMap the docs create.
    let pod = &providers[1];
    let container = &pod["spec"]["containers"][0];
    let mounts: Vec<(&str, &str)> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["mountPath"].as_str().unwrap(),
            )
        })
        .collect();
    for (name, path) in &mounts {
        for (other, inner) in &mounts {
            assert!(
                name == other || !Path::new(inner).starts_with(path),
                "{other} ({inner}) is mounted inside {name} ({path})"
            );
        }
    }
    let volume = |name: &str| {
        pod["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let mounted_from = |file: &str| {
        mounts
            .iter()
            .filter_map(|(name, path)| {
                Path::new(file)
                    .strip_prefix(path)
                    .ok()
                    .map(|rest| (volume(name), rest.to_str().unwrap().to_owned()))
            })
            .next()
            .unwrap_or_else(|| panic!("{file} is on no mount"))
    };
    let (bin, in_image) = mounted_from(exec["command"].as_str().unwrap());
    assert_eq!(
        bin["image"]["reference"],
        release().0,
        "the release's image"
    );
    // The Dockerfile puts the binary at the image's /warrant.
    assert!(
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Dockerfile"))
            .unwrap()
            .contains(&format!("COPY --from=build /warrant /{in_image}")),
        "the command {} is not the image's binary",
        exec["command"]
    );
    let (ca, key) = mounted_from(flag("--warrant-ca-file"));
    let configmap = ca["configMap"]["name"]
        .as_str()
        .expect("the CA is a ConfigMap");
    // docs/fleet.md's command, run offline, makes that ConfigMap with that key.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/fleet.md"))
        .unwrap();
    let create = sh_blocks(&doc)
        .into_iter()
        .find(|b| b.contains("create configmap"))
        .expect("docs/fleet.md creates the CA's ConfigMap");
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("warrant-ca.crt"), "a CA\n").unwrap();
    let out = Command::new("bash")
        .args(["-c", &format!("{} --dry-run=client -o json", create.trim())])
        .current_dir(scratch.path())
        .env("KUBECONFIG", scratch.path().join("none"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{create}: {}", stderr(&out));
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(made["metadata"]["name"], configmap);
    assert_eq!(made["metadata"]["namespace"], pod["metadata"]["namespace"]);
    assert_eq!(made["data"][&key], "a CA\n", "{made}");
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

/// Every object of the base, alone, with each component and with all of them: the labels every
/// object carries, the release's image and version, Linux nodes, flags `warrant serve` knows,
/// volumes that exist and roles that exist.
#[test]
fn deploy_renders_with_every_component() {
    let (image, version) = release();
    assert!(
        image.ends_with(&format!(":{version}")),
        "deploy/release: the image {image} and app.kubernetes.io/version {version} disagree"
    );
    let mut combinations: Vec<Vec<&str>> = vec![vec![]];
    combinations.extend(COMPONENTS.iter().map(|c| vec![*c]));
    // external-signer includes no-secret-binding, and pod-certificates-kept-ca
    // pod-certificates (listing both fails the build).
    combinations.push(
        COMPONENTS
            .iter()
            .copied()
            .filter(|c| *c != "no-secret-binding" && *c != "pod-certificates")
            .collect(),
    );
    for components in combinations {
        let objects = render_with(&components);
        let what = format!("deploy/ with {components:?}");
        check_conventions(&objects, &image, &version, &what);
        check_references(&objects, &what);
        let deployment = find(&objects, "Deployment", "warrant");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_serve_knows(&container["args"]);
        let flags = pod_flags(deployment);
        check_critical_quota(&objects, &what);
        check_metrics_listener(&objects, &flags, &what);
        for component in &components {
            check_component(component, &objects, &flags, &what);
        }
    }
    // The base alone is what `kubectl apply -k deploy/` applies: the same as the empty overlay.
    assert_eq!(rendered(), render_with(&[]));
}

/// A pod of a critical priority class outside kube-system is admitted on clusters that limit
/// those classes (GKE) only with a ResourceQuota matching the class in its namespace: the
/// render has one, with room for the replicas and a rollout's surge.
fn check_critical_quota(objects: &[Value], what: &str) {
    let deployment = find(objects, "Deployment", "warrant");
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let class = deployment["spec"]["template"]["spec"]["priorityClassName"]
        .as_str()
        .unwrap_or_default();
    if !class.starts_with("system-") || namespace == "kube-system" {
        return;
    }
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap();
    let covering = objects.iter().find(|o| {
        o["kind"] == "ResourceQuota"
            && o["metadata"]["namespace"] == namespace
            && o["spec"]["scopeSelector"]["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| {
                    e["scopeName"] == "PriorityClass"
                        && e["operator"] == "In"
                        && e["values"]
                            .as_array()
                            .unwrap()
                            .contains(&Value::from(class))
                })
    });
    let quota = covering.unwrap_or_else(|| {
        panic!("{what}: no ResourceQuota in {namespace} covers the priority class {class}")
    });
    let pods: u64 = quota["spec"]["hard"]["pods"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        pods >= 2 * replicas,
        "{what}: room for {pods} pods of {replicas} replicas"
    );
}

/// The metrics and health listener: the flag's port is the container's `metrics` port, which
/// the Service exposes, the NetworkPolicy admits and liveness probes; readiness stays on the
/// HTTPS port the Service sends requests to.
fn check_metrics_listener(objects: &[Value], flags: &[String], what: &str) {
    let deployment = find(objects, "Deployment", "warrant");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let address = flags
        .iter()
        .find_map(|f| f.strip_prefix("--metrics-bind-address="))
        .unwrap_or_else(|| panic!("{what}: no --metrics-bind-address: {flags:?}"));
    let port: u64 = address.rsplit(':').next().unwrap().parse().unwrap();
    let container_port = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .unwrap_or_else(|| panic!("{what}: no container port named metrics"));
    assert_eq!(container_port["containerPort"], port, "{what}");
    assert_eq!(
        container["livenessProbe"]["httpGet"]["port"], "metrics",
        "{what}"
    );
    assert!(
        container["livenessProbe"]["httpGet"]
            .get("scheme")
            .is_none(),
        "{what}: the metrics listener is plain HTTP"
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"]["port"], "https",
        "{what}"
    );
    let service = find(objects, "Service", "warrant");
    assert!(
        service["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["targetPort"] == "metrics"),
        "{what}: the Service does not expose the metrics port"
    );
    let policy = find(objects, "NetworkPolicy", "warrant");
    assert!(
        policy["spec"]["ingress"]
            .as_array()
            .unwrap()
            .iter()
            .any(|rule| rule["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["port"] == "metrics")),
        "{what}: the NetworkPolicy does not admit the metrics port"
    );
}

/// `app.kubernetes.io/{name,instance,version,component,part-of}` on every object (and pod
/// template), `kubernetes.io/os: linux` on every pod, the release's image everywhere.
fn check_conventions(objects: &[Value], image: &str, version: &str, what: &str) {
    for object in objects {
        let name = format!("{what}: {} {}", object["kind"], object["metadata"]["name"]);
        let mut labelled = vec![&object["metadata"]["labels"]];
        let pod = match object["kind"].as_str() {
            Some("Deployment") => {
                labelled.push(&object["spec"]["template"]["metadata"]["labels"]);
                Some(&object["spec"]["template"]["spec"])
            }
            Some("Pod") => Some(&object["spec"]),
            _ => None,
        };
        for labels in labelled {
            for key in ["name", "instance", "version", "component", "part-of"] {
                let value = &labels[format!("app.kubernetes.io/{key}")];
                assert!(value.is_string(), "{name}: no app.kubernetes.io/{key}");
            }
            assert_eq!(labels["app.kubernetes.io/version"], version, "{name}");
            assert_eq!(labels["app.kubernetes.io/name"], "warrant", "{name}");
        }
        if let Some(pod) = pod {
            assert_eq!(pod["nodeSelector"]["kubernetes.io/os"], "linux", "{name}");
            for container in pod["containers"].as_array().unwrap() {
                assert_eq!(container["image"], image, "{name}");
            }
        }
    }
}

/// What the objects point at is in the render: mounted volumes, bound roles of warrant's own,
/// the Secrets and ServiceAccounts named by other objects.
fn check_references(objects: &[Value], what: &str) {
    for binding in objects
        .iter()
        .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
    {
        let role = binding["roleRef"]["name"].as_str().unwrap();
        if role.starts_with("warrant") {
            assert!(
                has(objects, binding["roleRef"]["kind"].as_str().unwrap(), role),
                "{what}: {} binds {role}, which is not rendered",
                binding["metadata"]["name"]
            );
        }
        for subject in binding["subjects"].as_array().unwrap() {
            if subject["kind"] == "ServiceAccount" {
                assert!(
                    has(objects, "ServiceAccount", subject["name"].as_str().unwrap()),
                    "{what}: {subject}"
                );
            }
        }
    }
    let deployment = find(objects, "Deployment", "warrant");
    let pod = &deployment["spec"]["template"]["spec"];
    let volumes: BTreeSet<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    for mount in mounts {
        assert!(
            volumes.contains(mount["name"].as_str().unwrap()),
            "{what}: mount {mount} has no volume"
        );
    }
    // And the other way: every file a flag names is on a mount.
    for flag in args(&pod["containers"][0]) {
        let Some((name, path)) = flag.split_once('=') else {
            continue;
        };
        if path.starts_with("/etc/warrant/") {
            assert!(
                mounts
                    .iter()
                    .any(|m| path.starts_with(m["mountPath"].as_str().unwrap())),
                "{what}: {name} names {path}, which no volume is mounted at"
            );
        }
    }
}

fn check_component(component: &str, objects: &[Value], flags: &[String], what: &str) {
    let deployment = find(objects, "Deployment", "warrant");
    let pod = &deployment["spec"]["template"]["spec"];
    match component {
        "cert-manager" => {
            let certificate = find(objects, "Certificate", "warrant-serving");
            let secret = certificate["spec"]["secretName"].as_str().unwrap();
            assert!(
                pod["volumes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v["secret"]["secretName"] == secret),
                "{what}: warrant does not mount the certificate's Secret {secret}"
            );
            // The Service's names, in whichever namespace it is.
            let service = find(objects, "Service", "warrant");
            let host = format!(
                "warrant.{}.svc",
                service["metadata"]["namespace"].as_str().unwrap()
            );
            assert_eq!(certificate["spec"]["commonName"], host.as_str(), "{what}");
            for name in [host.clone(), format!("{host}.cluster.local")] {
                assert!(
                    certificate["spec"]["dnsNames"]
                        .as_array()
                        .unwrap()
                        .contains(&Value::from(name.as_str())),
                    "{what}: {name}"
                );
            }
            let issuer = &certificate["spec"]["issuerRef"];
            find(
                objects,
                issuer["kind"].as_str().unwrap(),
                issuer["name"].as_str().unwrap(),
            );
            let api = find(objects, "APIService", "v1alpha1.warrant.dev");
            assert_eq!(
                api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                format!(
                    "{}/{}",
                    certificate["metadata"]["namespace"].as_str().unwrap(),
                    certificate["metadata"]["name"].as_str().unwrap()
                ),
                "{what}"
            );
        }
        "monitoring" => {
            // Scraped on the metrics port with no credentials: nothing to keep or rotate.
            let monitor = find(objects, "ServiceMonitor", "warrant");
            let endpoint = &monitor["spec"]["endpoints"][0];
            for field in ["bearerTokenFile", "authorization", "basicAuth", "tlsConfig"] {
                assert!(endpoint.get(field).is_none(), "{what}: {field}: {endpoint}");
            }
            assert_eq!(endpoint["scheme"], "http", "{what}");
            assert_eq!(endpoint["path"], "/metrics", "{what}");
            assert!(
                !objects
                    .iter()
                    .any(|o| o["type"] == "kubernetes.io/service-account-token"),
                "{what}: a long-lived token Secret"
            );
            // It selects the Service, on its metrics port, which reaches warrant's metrics
            // listener (checked for every render in check_metrics_listener).
            let service = find(objects, "Service", "warrant");
            for (key, value) in monitor["spec"]["selector"]["matchLabels"]
                .as_object()
                .unwrap()
            {
                assert_eq!(&service["metadata"]["labels"][key], value, "{what}: {key}");
            }
            assert!(
                service["spec"]["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == endpoint["port"] && p["targetPort"] == "metrics"),
                "{what}: the Service has no port {} to the metrics listener",
                endpoint["port"]
            );
            // The scrape alerts watch the ServiceMonitor's targets: its job, in its namespace.
            let rule = find(objects, "PrometheusRule", "warrant");
            let target = format!(
                "up{{job=\"warrant\", namespace=\"{}\"}}",
                monitor["metadata"]["namespace"].as_str().unwrap()
            );
            for alert in ["WarrantTargetDown", "WarrantTargetMissing"] {
                let expr = rule["spec"]["groups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|g| g["rules"].as_array().unwrap())
                    .find(|r| r["alert"] == alert)
                    .unwrap_or_else(|| panic!("{what}: no {alert}"))["expr"]
                    .as_str()
                    .unwrap();
                assert!(expr.contains(&target), "{what}: {alert}: {expr}");
            }
            let dashboard = find(objects, "ConfigMap", "warrant-dashboard");
            assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
            let json: Value =
                serde_json::from_str(dashboard["data"]["dashboard.json"].as_str().unwrap())
                    .unwrap();
            assert_eq!(json["uid"], "warrant");
        }
        "key-secret" => {
            let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
            assert!(
                flags.contains(&format!("--key-secret={namespace}/warrant-keys")),
                "{what}: {flags:?}"
            );
            assert!(
                !flags
                    .iter()
                    .any(|f| f.starts_with("--service-account-signing-key-file")),
                "{what}: a static key beside the managed ones: {flags:?}"
            );
            let role = find(objects, "Role", "warrant-keys");
            assert_eq!(role["rules"][0]["resourceNames"][0], "warrant-keys");
            assert_eq!(role["metadata"]["namespace"], namespace, "{what}");
            assert_lease_identity(&pod["containers"][0], what);
        }
        "audit" => assert!(
            flags.contains(&"--audit-log-path=-".to_owned()),
            "{what}: {flags:?}"
        ),
        "external-signer" => {
            let static_pod = render(&Path::new(DEPLOY).join("control-plane")).remove(0);
            let user = "warrant-signer";
            let bound: BTreeSet<&str> = objects
                .iter()
                .filter(|o| o["subjects"][0]["kind"] == "User" && o["subjects"][0]["name"] == user)
                .map(|o| o["roleRef"]["name"].as_str().unwrap())
                .collect();
            // Delegation, the object reads and the key Secret and Lease the static pod's flags
            // ask for, and no more.
            let signer_flags = args(&static_pod["spec"]["containers"][0]);
            assert!(signer_flags.contains(&"--delegate-authentication".to_owned()));
            assert_eq!(
                bound,
                BTreeSet::from([
                    "extension-apiserver-authentication-reader",
                    "system:auth-delegator",
                    "warrant-signer:keys",
                    "warrant-signer:object-reader",
                ]),
                "{what}"
            );
            let secret = signer_flags
                .iter()
                .find_map(|f| f.strip_prefix("--key-secret="))
                .expect("the static pod keeps its keys in a Secret");
            let (namespace, name) = secret.split_once('/').unwrap();
            // Whoever reads the Secret signs any token of the cluster: a namespace of its own,
            // not kube-system (read by bootstrap-signer's and token-cleaner's Roles) nor
            // warrant's, and no Role there but the signer's.
            assert_eq!(namespace, "warrant-signer", "{what}");
            let own = find(objects, "Namespace", namespace);
            assert_eq!(
                own["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
                "{what}"
            );
            let in_namespace: BTreeSet<String> = objects
                .iter()
                .filter(|o| o["metadata"]["namespace"] == namespace)
                .map(|o| {
                    let name = o["metadata"]["name"].as_str().unwrap();
                    format!("{} {name}", o["kind"].as_str().unwrap())
                })
                .collect();
            assert_eq!(
                in_namespace,
                BTreeSet::from([
                    "Lease warrant-keys-leader".to_owned(),
                    "Role warrant-signer:keys".to_owned(),
                    "RoleBinding warrant-signer:keys".to_owned(),
                ]),
                "{what}"
            );
            // warrant's own Deployment can never read it: no role it holds cluster-wide reads
            // Secrets (RBAC cannot grant all namespaces' but one; the list above has no binding
            // of its in the namespace), and it refuses Secret-bound tokens.
            assert!(
                flags.contains(&"--disable-secret-binding".to_owned()),
                "{what}: {flags:?}"
            );
            for binding in objects.iter().filter(|o| {
                o["kind"] == "ClusterRoleBinding"
                    && o["subjects"]
                        .as_array()
                        .is_some_and(|s| s.iter().any(|s| s["kind"] == "ServiceAccount"))
            }) {
                let kind = binding["roleRef"]["kind"].as_str().unwrap();
                let role_name = binding["roleRef"]["name"].as_str().unwrap();
                let Some(role) = objects
                    .iter()
                    .find(|o| o["kind"] == kind && o["metadata"]["name"] == role_name)
                else {
                    // A role of Kubernetes' own (system:auth-delegator, the front proxy's).
                    continue;
                };
                for rule in role["rules"].as_array().unwrap() {
                    assert!(
                        !rule["resources"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|r| r == "secrets" || r == "*"),
                        "{what}: warrant's Deployment may read Secrets through {kind} {role_name}: {rule}"
                    );
                }
            }
            let role = find(objects, "Role", "warrant-signer:keys");
            assert_eq!(role["metadata"]["namespace"], namespace);
            // The Secret and the Lease by name, nothing else; and no create, which cannot be.
            let rules = role["rules"].as_array().unwrap();
            assert_eq!(rules.len(), 2, "{role}");
            assert_eq!(rules[0]["resources"], json!(["secrets"]));
            assert_eq!(rules[0]["resourceNames"], json!([name]));
            assert_eq!(rules[1]["resources"], json!(["leases"]));
            assert_eq!(rules[1]["resourceNames"], json!([format!("{name}-leader")]));
            assert!(!role.to_string().contains("create"), "{role}");
            let lease = find(objects, "Lease", &format!("{name}-leader"));
            assert_eq!(lease["metadata"]["namespace"], namespace);
            // The node's name in the Lease.
            let env = &static_pod["spec"]["containers"][0]["env"];
            assert_eq!(env[0]["name"], "POD_NAME");
            assert_eq!(
                env[0]["valueFrom"]["fieldRef"]["fieldPath"],
                "metadata.name"
            );
        }
        "no-secret-binding" => {
            assert!(
                flags.contains(&"--disable-secret-binding".to_owned()),
                "{what}: {flags:?}"
            );
            let reader = find(objects, "ClusterRole", "warrant-object-reader");
            for rule in reader["rules"].as_array().unwrap() {
                assert!(
                    !rule["resources"]
                        .as_array()
                        .unwrap()
                        .contains(&Value::from("secrets")),
                    "{what}: still reads secrets: {rule}"
                );
            }
        }
        "injection" => check_injection(objects, flags, what),
        "control-plane-monitoring" => check_signer_monitoring(objects, what),
        "pod-certificates" | "pod-certificates-kept-ca" => {
            check_pod_certificates(objects, flags, what)
        }
        "pod-certificates-nodes-only" => check_pcr_nodes_only(objects, what),
        other => panic!("no check for component {other}"),
    }
}

/// `warrant serve --help`, read once.
fn serve_help() -> &'static str {
    static HELP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HELP.get_or_init(|| {
        let help = Command::new(BIN)
            .args(["serve", "--help"])
            .output()
            .unwrap();
        String::from_utf8(help.stdout).unwrap()
    })
}

/// The signer names the Deployment's container gives warrant (its variable
/// `WARRANT_POD_CERTIFICATE_SIGNERS`, comma-separated, or `--pod-certificate-signer` flags),
/// if any.
fn pod_certificate_signers(objects: &[Value], flags: &[String]) -> Vec<String> {
    let deployment = find(objects, "Deployment", "warrant");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut names: Vec<String> = env_value(container, "WARRANT_POD_CERTIFICATE_SIGNERS")
        .map(|v| v.split(',').map(|n| n.trim().to_owned()).collect())
        .unwrap_or_default();
    for flag in flags {
        if let Some(value) = flag.strip_prefix("--pod-certificate-signer=") {
            names.extend(value.split(',').map(|n| n.trim().to_owned()));
        }
    }
    names
}

/// A signer name as kube-apiserver takes it for a signer of one's own: `<domain>/<path>`, the
/// domain a DNS name outside kubernetes.io.
fn assert_signer_name(name: &str, what: &str) {
    let (domain, path) = name
        .split_once('/')
        .unwrap_or_else(|| panic!("{what}: signer name {name:?} has no /"));
    assert!(
        !domain.is_empty()
            && !path.is_empty()
            && domain.contains('.')
            && domain
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-'),
        "{what}: signer name {name:?} is not <domain>/<path>"
    );
    assert!(
        domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io"),
        "{what}: {name:?} is in kubernetes.io's reserved space"
    );
}

/// Whether a `signers` rule's resourceNames grant `name`: by name, or by `<domain>/*`.
fn names_signer(resource_names: &Value, name: &str) -> bool {
    let domain = name.split_once('/').map_or(name, |(d, _)| d);
    resource_names
        .as_array()
        .into_iter()
        .flatten()
        .any(|n| n == name || *n == format!("{domain}/*"))
}

/// The pod certificate signer: signer names that are a signer's own (checked here, and
/// `WARRANT_POD_CERTIFICATE_SIGNERS` a variable `warrant serve` reads); the CA's two files from
/// the Secret warrant-pod-ca, mounted read-only; and warrant's service account bound to
/// exactly the rules of the shared spec's §6 (plus events), `sign` and `attest` for each signer
/// name and no other, no `create` or `delete` on PCRs, nothing on Secrets.
fn check_pod_certificates(objects: &[Value], flags: &[String], what: &str) {
    let deployment = find(objects, "Deployment", "warrant");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let signers = pod_certificate_signers(objects, flags);
    assert!(!signers.is_empty(), "{what}: no signer name");
    for name in &signers {
        assert_signer_name(name, what);
    }
    assert!(
        serve_help().contains("WARRANT_POD_CERTIFICATE_SIGNERS"),
        "{what}: warrant serve does not read WARRANT_POD_CERTIFICATE_SIGNERS"
    );

    // The CA: kept by warrant in its Secret, or both CA files from the one Secret, read-only.
    let kept = flags
        .iter()
        .find_map(|f| f.strip_prefix("--pod-certificate-ca-key-secret="));
    let secret_volumes: BTreeSet<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["secret"]["secretName"] == "warrant-pod-ca")
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    let files = [
        ("WARRANT_POD_CERTIFICATE_CA_CERT_FILE", "tls.crt"),
        ("WARRANT_POD_CERTIFICATE_CA_KEY_FILE", "tls.key"),
    ];
    for (variable, _) in files {
        assert!(
            serve_help().contains(variable),
            "{what}: warrant serve does not read {variable}"
        );
    }
    match kept {
        Some(secret) => {
            let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
            assert_eq!(secret, format!("{namespace}/warrant-pod-ca-keys"), "{what}");
            assert!(
                secret_volumes.is_empty(),
                "{what}: the CA files' Secret is mounted"
            );
            for (variable, _) in files {
                assert_eq!(env_value(container, variable), None, "{what}: {variable}");
            }
            let role = find(objects, "Role", "warrant-pod-ca-keys");
            assert_eq!(role["metadata"]["namespace"], namespace, "{what}");
            assert_eq!(role["rules"][0]["resourceNames"][0], "warrant-pod-ca-keys");
            assert_eq!(
                role["rules"][2]["resourceNames"][0],
                "warrant-pod-ca-keys-leader"
            );
            assert_lease_identity(container, what);
        }
        None => {
            assert_eq!(secret_volumes.len(), 1, "{what}: the Secret warrant-pod-ca");
            for (variable, file) in files {
                let path = env_value(container, variable)
                    .unwrap_or_else(|| panic!("{what}: no {variable}"));
                let mount = container["volumeMounts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| {
                        secret_volumes.contains(m["name"].as_str().unwrap())
                            && path == format!("{}/{file}", m["mountPath"].as_str().unwrap())
                    })
                    .unwrap_or_else(|| {
                        panic!("{what}: {variable}={path} is not {file} of warrant-pod-ca")
                    });
                assert_eq!(mount["readOnly"], true, "{what}: {mount}");
            }
        }
    }

    // The role, rule by rule: (groups, resources, verbs) as the spec lists them.
    let role = find(objects, "ClusterRole", "warrant-pod-certificate-signer");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("{what}: {v} is not a list"))
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        let names = rule.get("resourceNames");
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "{what}: a wildcard in {rule}"
                    );
                    if resource == "signers" {
                        for name in &signers {
                            assert!(
                                names_signer(names.unwrap_or(&Value::Null), name),
                                "{what}: {verb} on signers does not name {name}: {rule}"
                            );
                        }
                        for granted_name in strings(names.unwrap()) {
                            assert!(
                                signers
                                    .iter()
                                    .any(|s| names_signer(&json!([granted_name]), s)),
                                "{what}: {verb} for {granted_name}, which warrant does not sign for"
                            );
                        }
                    } else {
                        assert!(names.is_none(), "{what}: {rule}");
                    }
                    granted.insert(format!("{group}/{resource}:{verb}"));
                }
            }
        }
    }
    let mut want = BTreeSet::new();
    for (group, resources, verbs) in [
        (
            "certificates.k8s.io",
            &["podcertificaterequests"][..],
            &["get", "list", "watch"][..],
        ),
        (
            "certificates.k8s.io",
            &["podcertificaterequests/status"],
            &["update", "patch"],
        ),
        ("certificates.k8s.io", &["signers"], &["sign", "attest"]),
        (
            "certificates.k8s.io",
            &["clustertrustbundles"],
            &["get", "list", "watch", "create", "update", "delete"],
        ),
        ("", &["events"], &["create", "patch"]),
        ("events.k8s.io", &["events"], &["create", "patch"]),
        ("", &["pods", "serviceaccounts", "nodes"], &["get"]),
        ("", &["services"], &["list"]),
    ] {
        for resource in resources {
            for verb in verbs {
                want.insert(format!("{group}/{resource}:{verb}"));
            }
        }
    }
    assert_eq!(granted, want, "{what}: the signer's ClusterRole");

    // Bound to the Deployment's service account, where it is.
    let binding = find(
        objects,
        "ClusterRoleBinding",
        "warrant-pod-certificate-signer",
    );
    assert_eq!(binding["roleRef"]["kind"], "ClusterRole", "{what}");
    assert_eq!(
        binding["roleRef"]["name"], "warrant-pod-certificate-signer",
        "{what}"
    );
    assert_eq!(
        binding["subjects"],
        json!([{
            "kind": "ServiceAccount",
            "name": pod["serviceAccountName"],
            "namespace": deployment["metadata"]["namespace"],
        }]),
        "{what}"
    );
}

/// Only kubelets create PCRs for warrant's signer names: a ValidatingAdmissionPolicy on PCR
/// CREATE (nothing else), for exactly the signer names warrant signs for when the signer is in
/// the render too, allowing `system:node:<spec.nodeName>` of `system:nodes` alone, failing
/// closed, bound cluster-wide to deny.
fn check_pcr_nodes_only(objects: &[Value], what: &str) {
    let policy = find(
        objects,
        "ValidatingAdmissionPolicy",
        "warrant-pcr-only-from-nodes",
    );
    let spec = &policy["spec"];
    assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(spec["failurePolicy"], "Fail", "{what}");
    assert_eq!(
        spec["matchConstraints"]["resourceRules"],
        json!([{
            "apiGroups": ["certificates.k8s.io"],
            "apiVersions": ["*"],
            "operations": ["CREATE"],
            "resources": ["podcertificaterequests"],
        }]),
        "{what}"
    );
    // The match condition lists the signer names as CEL string literals.
    let conditions = spec["matchConditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1, "{what}: {conditions:?}");
    let condition = conditions[0]["expression"].as_str().unwrap();
    let list = condition
        .strip_prefix("object.spec.signerName in [")
        .and_then(|c| c.strip_suffix(']'))
        .unwrap_or_else(|| panic!("{what}: {condition}"));
    let named: BTreeSet<String> = list
        .split(',')
        .map(|n| {
            n.trim()
                .strip_prefix('\'')
                .and_then(|n| n.strip_suffix('\''))
                .unwrap_or_else(|| panic!("{what}: {condition}"))
                .to_owned()
        })
        .collect();
    for name in &named {
        assert_signer_name(name, what);
    }
    let deployment = find(objects, "Deployment", "warrant");
    let signers = pod_certificate_signers(objects, &pod_flags(deployment));
    if !signers.is_empty() {
        assert_eq!(
            named,
            signers.into_iter().collect::<BTreeSet<_>>(),
            "{what}: the policy covers other signer names than warrant signs for"
        );
    }
    let validations = spec["validations"].as_array().unwrap();
    assert_eq!(validations.len(), 1, "{what}");
    let rule = validations[0]["expression"].as_str().unwrap();
    for part in [
        "request.userInfo.username == 'system:node:' + object.spec.nodeName",
        "'system:nodes' in request.userInfo.groups",
    ] {
        assert!(rule.contains(part), "{what}: {rule} lacks {part}");
    }
    assert!(
        rule.contains("&&") && !rule.contains("||"),
        "{what}: both must hold: {rule}"
    );
    let binding = find(
        objects,
        "ValidatingAdmissionPolicyBinding",
        "warrant-pcr-only-from-nodes",
    );
    assert_eq!(
        binding["spec"]["policyName"], policy["metadata"]["name"],
        "{what}"
    );
    assert_eq!(
        binding["spec"]["validationActions"],
        json!(["Deny"]),
        "{what}"
    );
    for narrowing in ["paramRef", "matchResources"] {
        assert!(
            binding["spec"].get(narrowing).is_none(),
            "{what}: the binding has {narrowing}"
        );
    }
}

/// The external signer's static pods scraped: the PodMonitor selects the static pod's labels in
/// its namespace, on the container port its metrics listener binds on the node's address (from
/// the downward API, as the kubelet expands it), with no credentials; the job is the pod's
/// `component`, which the component's scrape alerts name.
fn check_signer_monitoring(objects: &[Value], what: &str) {
    let static_pod = render(&Path::new(DEPLOY).join("control-plane")).remove(0);
    let monitor = find(objects, "PodMonitor", "warrant-signer");
    let spec = &monitor["spec"];
    assert_eq!(
        spec["namespaceSelector"]["matchNames"],
        json!([static_pod["metadata"]["namespace"]]),
        "{what}"
    );
    for (key, value) in spec["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &static_pod["metadata"]["labels"][key], value,
            "{what}: {key}"
        );
    }
    let endpoint = &spec["podMetricsEndpoints"][0];
    for field in [
        "bearerTokenSecret",
        "authorization",
        "basicAuth",
        "tlsConfig",
    ] {
        assert!(endpoint.get(field).is_none(), "{what}: {field}: {endpoint}");
    }
    assert_eq!(endpoint["scheme"], "http", "{what}");
    assert_eq!(endpoint["path"], "/metrics", "{what}");
    let container = &static_pod["spec"]["containers"][0];
    let port = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == endpoint["port"])
        .unwrap_or_else(|| panic!("{what}: the signer has no port {}", endpoint["port"]));
    assert_eq!(static_pod["spec"]["hostNetwork"], true);
    let node_ip = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP")
        .expect("the node's address from the downward API");
    assert!(
        args(container).contains(&format!(
            "--metrics-bind-address=$({}):{}",
            node_ip["name"].as_str().unwrap(),
            port["containerPort"]
        )),
        "{what}: the signer's metrics listener is not on the node's address and its port"
    );
    let job = static_pod["metadata"]["labels"][spec["jobLabel"].as_str().unwrap()]
        .as_str()
        .unwrap();
    let rule = find(objects, "PrometheusRule", "warrant-signer");
    let exprs: Vec<&str> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["expr"].as_str().unwrap())
        .collect();
    for expr in [
        format!(r#"up{{job="{job}"}} == 0"#),
        format!(r#"absent(up{{job="{job}"}})"#),
    ] {
        assert!(
            exprs.contains(&expr.as_str()),
            "{what}: no {expr}: {exprs:?}"
        );
    }
}

/// Token injection: two webhooks, each reaching warrant's Service at the route the server
/// serves, kept out of kube-system, warrant's own namespace and namespaces labelled
/// `warrant.dev/inject: "false"`, away from opted-out pods, in time, promising no side effects:
/// one failing open for every pod but those labelled `warrant.dev/inject: "required"`, the other
/// failing closed for exactly those (no pod is reviewed twice); the agent's image is warrant's
/// own; the agent's CA is the serving Secret's; the policy the agents are allowed by parses and
/// lets them ask for the clouds' default audiences.
fn check_injection(objects: &[Value], flags: &[String], what: &str) {
    let deployment = find(objects, "Deployment", "warrant");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let webhooks = find(
        objects,
        "MutatingWebhookConfiguration",
        "warrant-token-injection",
    )["webhooks"]
        .as_array()
        .unwrap();
    let names: Vec<&str> = webhooks
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "token-injection.warrant.dev",
            "token-injection-required.warrant.dev"
        ],
        "{what}"
    );
    for webhook in webhooks {
        let service = &webhook["clientConfig"]["service"];
        let target = find(objects, "Service", service["name"].as_str().unwrap());
        assert_eq!(
            service["namespace"], target["metadata"]["namespace"],
            "{what}"
        );
        assert_eq!(
            service["port"], target["spec"]["ports"][0]["port"],
            "{what}"
        );
        assert_eq!(service["path"], warrant_proto::ADMISSION_PATH, "{what}");
        assert_eq!(
            webhook["clientConfig"], webhooks[0]["clientConfig"],
            "{what}"
        );
        assert_eq!(webhook["sideEffects"], "None");
        assert!(webhook["timeoutSeconds"].as_u64().unwrap() <= 10);
        assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(webhook["rules"][0]["resources"], json!(["pods"]));
        assert_eq!(webhook["rules"][0]["operations"], json!(["CREATE"]));
        let kept_out = &webhook["namespaceSelector"]["matchExpressions"];
        assert_eq!(kept_out[0]["key"], "kubernetes.io/metadata.name");
        assert_eq!(kept_out[0]["operator"], "NotIn");
        for namespace in [
            "kube-system",
            deployment["metadata"]["namespace"].as_str().unwrap(),
        ] {
            assert!(
                kept_out[0]["values"]
                    .as_array()
                    .unwrap()
                    .contains(&json!(namespace)),
                "{what}: {namespace} is sent to the webhook"
            );
        }
        assert_eq!(
            kept_out[1],
            json!({"key": "warrant.dev/inject", "operator": "NotIn", "values": ["false"]}),
            "{what}: the namespace opt-out"
        );
    }
    let (open, closed) = (&webhooks[0], &webhooks[1]);
    assert_eq!(open["failurePolicy"], "Ignore");
    assert_eq!(
        open["objectSelector"],
        json!({"matchExpressions": [{"key": "warrant.dev/inject", "operator": "NotIn", "values": ["false", "required"]}]})
    );
    assert_eq!(closed["failurePolicy"], "Fail");
    assert_eq!(
        closed["objectSelector"],
        json!({"matchLabels": {"warrant.dev/inject": "required"}})
    );
    assert_eq!(
        warrant_server::REQUIRED_LABEL_VALUE,
        "required",
        "the label the server reads"
    );
    let service = &open["clientConfig"]["service"];
    // The agent runs the image warrant runs, whatever the overlay names.
    let image = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "WARRANT_INJECTION_AGENT_IMAGE")
        .unwrap_or_else(|| panic!("{what}: no agent image"));
    assert_eq!(image["value"], container["image"], "{what}");
    // Who may call is said, not left to a default: anyone, until the overlay switches to
    // kube-apiserver's certificate (the_injection_components_switch_to_client_certificates).
    assert_eq!(
        env_value(container, "WARRANT_INJECTION_ALLOW_ANONYMOUS").as_deref(),
        Some("true"),
        "{what}"
    );
    assert!(
        !flags
            .iter()
            .any(|f| f.starts_with("--injection-allowed-names")),
        "{what}: {flags:?}"
    );
    // The agents reach the Service the webhook names, in its namespace.
    assert!(
        flags.contains(&format!(
            "--injection-warrant-url=https://{}.{}.svc",
            service["name"].as_str().unwrap(),
            service["namespace"].as_str().unwrap()
        )),
        "{what}: {flags:?}"
    );
    // The CA file is the serving Secret's ca.crt, and the policy file its ConfigMap's.
    let mounted = |flag: &str| -> &Value {
        let path = flags
            .iter()
            .find_map(|f| f.strip_prefix(&format!("{flag}=")))
            .unwrap_or_else(|| panic!("{what}: no {flag}"));
        let mount = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("{what}: {path} is not mounted"));
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap()
    };
    assert_eq!(
        mounted("--injection-ca-file")["secret"]["secretName"],
        "warrant-serving"
    );
    let map = mounted("--authorization-policy-file")["configMap"]["name"]
        .as_str()
        .unwrap();
    let text = find(objects, "ConfigMap", map)["data"]["policy.yaml"]
        .as_str()
        .unwrap();
    warrant_auth::Policy::parse(text, "policy.yaml").unwrap();
    let policy: Value = serde_saphyr::from_str(text).unwrap();
    for audience in ["sts.amazonaws.com", "api://AzureADTokenExchange"] {
        assert!(
            policy["selfService"]["audiences"]
                .as_array()
                .unwrap()
                .contains(&json!(audience)),
            "{what}: {audience}"
        );
    }
}

/// The value of the container's variable `name`, if it has one.
/// The container's `POD_NAME` (found by name: other components add variables of their own)
/// comes from the downward API: it names the Lease holder.
fn assert_lease_identity(container: &Value, what: &str) {
    let pod_name = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "POD_NAME")
        .unwrap_or_else(|| panic!("{what}: no POD_NAME"));
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name",
        "{what}: POD_NAME names the Lease holder"
    );
}

fn env_value(container: &Value, name: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
        .map(str::to_owned)
}

/// The injection component's header shows how to answer kube-apiserver's certificate alone:
/// its patches, pasted into an overlay, leave the Deployment with the allowed names and the
/// anonymous variable off, which warrant accepts; the same with the variable left on is the
/// contradiction warrant refuses to start with.
#[test]
fn the_injection_components_switch_to_client_certificates() {
    let header =
        std::fs::read_to_string(format!("{DEPLOY}/components/injection/kustomization.yaml"))
            .unwrap();
    // The commented `patches:` block: from that line, the lines indented deeper than it.
    let lines: Vec<&str> = header.lines().map_while(|l| l.strip_prefix('#')).collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let start = lines
        .iter()
        .position(|l| l.trim() == "patches:")
        .expect("the header shows the patches");
    let depth = indent(lines[start]);
    let snippet: String = std::iter::once(lines[start])
        .chain(
            lines[start + 1..]
                .iter()
                .copied()
                .take_while(|l| indent(l) > depth),
        )
        .map(|l| format!("{}\n", &l[depth..]))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(DEPLOY, dir.path().join("deploy")).unwrap();
    std::fs::create_dir(dir.path().join("overlay")).unwrap();
    std::fs::write(
        dir.path().join("overlay/kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy\ncomponents:\n  - ../deploy/components/injection\n{snippet}"
        ),
    )
    .unwrap();
    let objects = render(&dir.path().join("overlay"));
    let deployment = find(&objects, "Deployment", "warrant");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let flags = pod_flags(deployment);
    assert!(
        flags.contains(&"--injection-allowed-names=warrant-admission-client".to_owned()),
        "{flags:?}"
    );
    let anonymous = env_value(container, "WARRANT_INJECTION_ALLOW_ANONYMOUS");
    assert_eq!(anonymous.as_deref(), Some("false"));

    // warrant's verdict on the injection flags and that variable, then with it left on.
    let injection: Vec<&str> = flags
        .iter()
        .filter(|f| f.starts_with("--injection-"))
        .map(String::as_str)
        .chain(["--injection-agent-image=warrant"])
        .collect();
    let run = |anonymous: &str| {
        stderr(&serve_refusing(
            &injection,
            &[("WARRANT_INJECTION_ALLOW_ANONYMOUS", anonymous)],
        ))
    };
    let left_on = run("true");
    assert!(left_on.contains("contradict"), "{left_on}");
    let switched = run("false");
    assert!(
        !switched.contains("contradict") && !switched.contains("who may call"),
        "{switched}"
    );
}

/// The caBundle by hand (injection: none, for the overlay to set) or by cert-manager's CA
/// injector (injection/cert-manager, beside the cert-manager component: the annotation names
/// the Certificate that makes warrant's serving Secret).
#[test]
fn the_injection_webhooks_ca_comes_by_hand_or_from_cert_manager() {
    let by_hand = render_with(&["injection"]);
    let webhook = find(
        &by_hand,
        "MutatingWebhookConfiguration",
        "warrant-token-injection",
    );
    assert!(webhook["metadata"].get("annotations").is_none());
    assert!(
        webhook["webhooks"][0]["clientConfig"]
            .get("caBundle")
            .is_none()
    );
    let injected = render_with(&["cert-manager", "injection/cert-manager"]);
    let flags = pod_flags(find(&injected, "Deployment", "warrant"));
    check_injection(&injected, &flags, "injection/cert-manager");
    let certificate = find(&injected, "Certificate", "warrant-serving");
    let webhook = find(
        &injected,
        "MutatingWebhookConfiguration",
        "warrant-token-injection",
    );
    assert_eq!(
        webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!(
            "{}/{}",
            certificate["metadata"]["namespace"].as_str().unwrap(),
            certificate["metadata"]["name"].as_str().unwrap()
        )
    );
    assert_eq!(certificate["spec"]["secretName"], "warrant-serving");
    // Without the cert-manager component, nothing would fill the caBundle: refused.
    for components in [
        &["injection/cert-manager"][..],
        &["injection/cert-manager", "cert-manager"],
    ] {
        let refused = try_render_with(components).unwrap_err();
        assert!(
            refused.contains("Certificate.[noVer].[noGrp]/warrant-serving"),
            "{components:?}: {refused}"
        );
    }
}

/// An overlay in another namespace, laid out as docs/install.md says (deploy/another-namespace
/// copied in and its namespace changed, after every component but external-signer): each value
/// that names warrant's namespace names the new one (the checks of every component, run on this
/// render, compare with the objects' namespace), nothing says `warrant` where the namespace goes,
/// and the control plane's objects stay in kube-system. Listed before external-signer's
/// objects, the component refuses to render.
#[test]
fn another_namespace_is_derived_everywhere() {
    let overlay = |components: &[&str]| {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(DEPLOY, dir.path().join("deploy")).unwrap();
        let overlay = dir.path().join("overlay");
        std::fs::create_dir_all(overlay.join("another-namespace")).unwrap();
        let text =
            std::fs::read_to_string(format!("{DEPLOY}/another-namespace/kustomization.yaml"))
                .unwrap();
        let marked = "namespace: identity # the namespace";
        assert!(text.contains(marked), "{text}");
        std::fs::write(
            overlay.join("another-namespace/kustomization.yaml"),
            text.replace(marked, "namespace: idp"),
        )
        .unwrap();
        let list: String = components
            .iter()
            .map(|c| match *c {
                "another-namespace" => "  - another-namespace\n".to_owned(),
                c => format!("  - ../deploy/components/{c}\n"),
            })
            .collect();
        std::fs::write(
            overlay.join("kustomization.yaml"),
            format!("resources:\n  - ../deploy\ncomponents:\n{list}"),
        )
        .unwrap();
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(&overlay)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(
                serde_saphyr::from_multiple::<Value>(&String::from_utf8(out.stdout).unwrap())
                    .unwrap(),
            )
        } else {
            Err(stderr(&out))
        }
    };
    let components = [
        "cert-manager",
        "monitoring",
        "control-plane-monitoring",
        "key-secret",
        "audit",
        "injection/cert-manager",
        "pod-certificates",
        "pod-certificates-nodes-only",
        "another-namespace",
        // Brings no-secret-binding with it (listing both fails the render).
        "external-signer",
    ];
    let objects = overlay(&components).unwrap();
    let what = "deploy/ in namespace idp";
    let deployment = find(&objects, "Deployment", "warrant");
    assert_eq!(deployment["metadata"]["namespace"], "idp");
    let flags = pod_flags(deployment);
    check_references(&objects, what);
    check_critical_quota(&objects, what);
    check_metrics_listener(&objects, &flags, what);
    for component in components {
        match component {
            "another-namespace" => {}
            "injection/cert-manager" => check_injection(&objects, &flags, what),
            c => check_component(c, &objects, &flags, what),
        }
    }
    assert!(flags.contains(&"--service-account-issuer=https://warrant.idp.svc".to_owned()));
    assert!(flags.contains(&"--key-secret=idp/warrant-keys".to_owned()));
    assert!(flags.contains(&"--injection-warrant-url=https://warrant.idp.svc".to_owned()));
    find(&objects, "Namespace", "idp");
    // Every namespaced object in idp but the control plane's, which stay where the
    // external-signer component puts them; the Services, subjects and certificates other
    // objects name, in idp too.
    let signer_objects = render_with(&["external-signer"]);
    for object in &objects {
        let namespace = &object["metadata"]["namespace"];
        if object["metadata"]["labels"]["app.kubernetes.io/component"] == "external-signer" {
            let kind = object["kind"].as_str().unwrap();
            let name = object["metadata"]["name"].as_str().unwrap();
            assert_eq!(
                namespace,
                &find(&signer_objects, kind, name)["metadata"]["namespace"],
                "{what}: {object}"
            );
        } else {
            assert!(
                namespace.is_null() || namespace == "idp",
                "{what}: {object}"
            );
        }
        for subject in object["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" {
                assert_eq!(subject["namespace"], "idp", "{what}: {object}");
            }
        }
    }
    assert_eq!(
        find(&objects, "APIService", "v1alpha1.warrant.dev")["spec"]["service"]["namespace"],
        "idp"
    );
    for kind in ["APIService", "MutatingWebhookConfiguration"] {
        let object = objects.iter().find(|o| o["kind"] == kind).unwrap();
        assert_eq!(
            object["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "idp/warrant-serving",
            "{kind}"
        );
    }
    for webhook in find(
        &objects,
        "MutatingWebhookConfiguration",
        "warrant-token-injection",
    )["webhooks"]
        .as_array()
        .unwrap()
    {
        assert_eq!(
            webhook["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["kube-system", "idp"])
        );
    }
    // Nothing left that names `warrant` as the namespace.
    let text = serde_json::to_string(&objects).unwrap();
    for stale in [
        "warrant.warrant.svc",
        "warrant/warrant-",
        r#"namespace=\"warrant\""#,
        r#""namespace":"warrant""#,
    ] {
        assert!(!text.contains(stale), "{what}: {stale} is left");
    }

    // external-signer listed before: its objects (its own namespace, warrant-signer, and
    // kube-system's) would move; refused, by the component's named check or, since the key
    // Secret has a Namespace of its own, by kustomize itself (two Namespaces renamed to one).
    let mut early = components.to_vec();
    early.rotate_right(1);
    let refused = overlay(&early).unwrap_err();
    assert!(
        refused.contains("list-external-signer-after-another-namespace")
            || refused.contains("namespace transformation produces ID conflict"),
        "{refused}"
    );
}

/// Every component directory is one the test above renders (a new one cannot go unchecked).
#[test]
fn every_component_is_checked() {
    let mut found: Vec<String> = std::fs::read_dir(format!("{DEPLOY}/components"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    found.sort();
    let mut listed: Vec<&str> = COMPONENTS.to_vec();
    listed.sort();
    assert_eq!(found, listed);
}

/// The static pod of the external signer: non-root, no capabilities, its own serving
/// certificate and kubeconfig, none of kube-apiserver's keys or admin.conf.
#[test]
fn the_control_plane_signer_runs_unprivileged_on_its_own_files() {
    let pod = render(&Path::new(DEPLOY).join("control-plane")).remove(0);
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_ne!(spec["securityContext"]["runAsUser"], 0);
    let container = &spec["containers"][0];
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"][0],
        "ALL"
    );
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    for volume in spec["volumes"].as_array().unwrap() {
        let path = volume["hostPath"]["path"].as_str().unwrap_or_default();
        assert!(
            !path.starts_with("/etc/kubernetes"),
            "the signer mounts kube-apiserver's files: {path}"
        );
    }
    for flag in args(container) {
        assert!(!flag.contains("/etc/kubernetes"), "{flag}");
        assert!(!flag.contains("admin.conf"), "{flag}");
    }
}

/// docs/install.md's commands that need no cluster (openssl, the overlay), run as written in a
/// scratch directory beside a link to deploy/; the overlay renders with the CA as the
/// APIService's caBundle, the issuer set, the Service's IP pinned, and the certificate verifies
/// for the Service's names. The commands that need a cluster are checked for shell syntax.
#[test]
fn install_doc_commands_run_and_its_overlay_renders() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/install.md"
    ))
    .unwrap();
    let blocks = sh_blocks(&doc);
    let needs_cluster = |block: &str| {
        block.lines().any(|l| {
            let l = l.trim_start();
            (l.starts_with("kubectl ") && !l.starts_with("kubectl kustomize"))
                || [
                    "docker ",
                    "kind ",
                    "minikube ",
                    "install ",
                    "warrant ",
                    "KUBECONFIG=",
                    "ctr ",
                    "gcloud ",
                    "aws ",
                    "ssh-keygen ",
                    "sha256sum ",
                ]
                .iter()
                .any(|p| l.starts_with(p))
                || l.contains("$(docker ")
                || l.contains("/etc/kubernetes")
        })
    };
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(DEPLOY, dir.path().join("deploy")).unwrap();
    let mut script = String::from("set -euo pipefail\n");
    for block in &blocks {
        let syntax = Command::new("bash")
            .args(["-n", "-c", block])
            .output()
            .unwrap();
        assert!(syntax.status.success(), "{block}: {}", stderr(&syntax));
        if !needs_cluster(block) {
            script.push_str(block);
        }
    }
    assert!(script.contains("my-warrant/kustomization.yaml"), "{script}");
    let out = Command::new("bash")
        .args(["-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}\n{}", stderr(&out));

    let objects = render(&dir.path().join("my-warrant"));
    let ca = std::fs::read(dir.path().join("warrant-ca.crt")).unwrap();
    use base64::Engine as _;
    let api = find(&objects, "APIService", "v1alpha1.warrant.dev");
    assert_eq!(
        api["spec"]["caBundle"],
        base64::engine::general_purpose::STANDARD.encode(&ca)
    );
    // The token injection section adds its component; each of its webhooks trusts the same CA.
    let webhook = find(
        &objects,
        "MutatingWebhookConfiguration",
        "warrant-token-injection",
    );
    for entry in webhook["webhooks"].as_array().unwrap() {
        assert_eq!(
            entry["clientConfig"]["caBundle"],
            base64::engine::general_purpose::STANDARD.encode(&ca),
            "{}",
            entry["name"]
        );
    }
    let deployment = find(&objects, "Deployment", "warrant");
    let flags = args(&deployment["spec"]["template"]["spec"]["containers"][0]);
    assert!(flags.contains(&"--service-account-issuer=https://warrant.example.com".to_owned()));
    // The self-service policy, replaced by the doc's own component: the one policy ConfigMap is
    // the doc's file, which parses, and the one the pods mount.
    let policies: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("warrant-policy")
        })
        .collect();
    assert_eq!(policies.len(), 1, "{policies:?}");
    let text = policies[0]["data"]["policy.yaml"].as_str().unwrap();
    warrant_auth::Policy::parse(text, "policy.yaml").unwrap();
    let policy: Value = serde_saphyr::from_str(text).unwrap();
    assert!(
        policy["selfService"]["audiences"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a
                .as_str()
                .unwrap()
                .starts_with("https://iam.googleapis.com/projects/")),
        "the doc's policy did not replace the component's: {text}"
    );
    let mounted = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "policy")
        .unwrap();
    assert_eq!(
        mounted["configMap"]["name"],
        policies[0]["metadata"]["name"]
    );
    let service = find(&objects, "Service", "warrant");
    let ip = service["spec"]["clusterIP"].as_str().unwrap();
    // The certificate names the Service and that IP, and chains to the CA.
    for (check, value) in [
        ("-verify_hostname", "warrant.warrant.svc"),
        ("-verify_ip", ip),
    ] {
        let out = Command::new("openssl")
            .args([
                "verify",
                "-CAfile",
                "warrant-ca.crt",
                check,
                value,
                "tls.crt",
            ])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{check} {value}: {}", stderr(&out));
    }
    // Step 5 makes what it uses and asks as someone else, and nothing edits deploy/ itself.
    let step5 = &doc[doc.find("## 5.").unwrap()..doc.find("## 6.").unwrap()];
    for want in [
        "kubectl create namespace build",
        "kubectl -n build create serviceaccount deployer",
        "--as=alice --as-group=ci",
    ] {
        assert!(step5.contains(want), "step 5 lacks {want}");
    }
    assert!(
        !doc.contains("in `deploy/"),
        "docs/install.md asks for an edit in deploy/; use the overlay"
    );
    // The namespace comes from the base's manifest, with its pod security label, before the
    // Secrets go into it.
    assert!(!doc.contains("kubectl create namespace warrant"));
    let step2 = &doc[doc.find("## 2.").unwrap()..doc.find("## 3.").unwrap()];
    assert!(
        step2.contains("kubectl apply -f deploy/namespace.yaml"),
        "{step2}"
    );
    let namespace = find(&objects, "Namespace", "warrant");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    // Uninstalling says what is lost, and how to keep it, before the command that loses it.
    let uninstall = &doc[doc.find("## Uninstalling").unwrap()..];
    let delete = uninstall.find("kubectl delete -k my-warrant/").unwrap();
    for kept in ["backup warrant-keys", "backup warrant-ca"] {
        let at = uninstall
            .find(kept)
            .unwrap_or_else(|| panic!("no {kept:?}"));
        assert!(at < delete, "{kept} comes after the delete");
    }
    assert!(uninstall.contains("create secret generic warrant-keys --from-file=warrant-keys/"));
}

/// docs/install.md's bucket publishing: the component copied into the overlay (the doc's own
/// commands, run) renders with the base and the key-secret component: `--publish-discovery`
/// appended, `AWS_REGION` merged by name beside key-secret's `POD_NAME` (a JSON `add` of the
/// whole env list replaced it), the IRSA role on the service account; and the doc's issuer fits
/// the target, as warrant checks at startup.
#[test]
fn the_bucket_component_renders_in_an_overlay() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/install.md"
    ))
    .unwrap();
    let block = sh_blocks(&doc)
        .into_iter()
        .find(|b| b.contains("deploy/publish-discovery"))
        .expect("install.md copies the publish-discovery component");
    let issuer = block
        .lines()
        .find_map(|l| l.strip_prefix("ISSUER="))
        .and_then(|l| l.split_whitespace().next())
        .expect("the block names the bucket's issuer")
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(DEPLOY, dir.path().join("deploy")).unwrap();
    std::fs::create_dir(dir.path().join("my-warrant")).unwrap();
    let out = Command::new("bash")
        .args([
            "-c",
            &format!(
                "set -euo pipefail
{block}"
            ),
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{block}
{}",
        stderr(&out)
    );
    // "list publish-discovery under your overlay's components, and make the issuer the
    // bucket's URL" (step 3's patch).
    std::fs::write(
        dir.path().join("my-warrant/kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../deploy
components:
  - ../deploy/components/key-secret
  - publish-discovery
patches:
  - target: {{kind: Deployment, name: warrant}}
    patch: |
      - op: replace
        path: /spec/template/spec/containers/0/args/1
        value: --service-account-issuer={issuer}
"
        ),
    )
    .unwrap();
    let objects = render(&dir.path().join("my-warrant"));
    let deployment = find(&objects, "Deployment", "warrant");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_serve_knows(&container["args"]);
    let flags = args(container);
    let target = flags
        .iter()
        .find_map(|f| f.strip_prefix("--publish-discovery="))
        .expect("--publish-discovery");
    let env: Vec<&str> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(
        env.contains(&"POD_NAME") && env.contains(&"AWS_REGION"),
        "{env:?}"
    );
    let account = find(&objects, "ServiceAccount", "warrant");
    assert!(
        account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:iam::"),
        "{account}"
    );
    // The placement rule `serve` applies at startup.
    let jwks_uri = format!("{issuer}/openid/v1/jwks");
    warrant_publish::Target::open(target, &warrant_publish::Endpoint::default(), &[])
        .unwrap()
        .placement(&issuer, &jwks_uri)
        .unwrap_or_else(|e| panic!("{issuer} does not fit {target}: {e}"));
}

/// Fenced `sh` blocks of a markdown page, in order.
pub(crate) fn sh_blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    // The block's text and its fence's indentation (a block inside a list item is indented).
    let mut current: Option<(String, usize)> = None;
    for line in doc.lines() {
        let trimmed = line.trim_start();
        match &mut current {
            Some((text, _)) if trimmed.starts_with("```") => {
                blocks.push(std::mem::take(text));
                current = None;
            }
            Some((text, indent)) => {
                let strip = line.len() - line.trim_start_matches(' ').len();
                text.push_str(&line[strip.min(*indent)..]);
                text.push('\n');
            }
            None if trimmed == "```sh" => {
                current = Some((String::new(), line.len() - trimmed.len()));
            }
            None => {}
        }
    }
    blocks
}

/// The Dockerfile, read: a non-root user, the OCI labels, a stripped binary with its debug info
/// apart, dependencies cached apart from the source.
#[test]
fn the_dockerfile_keeps_its_invariants() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Dockerfile")).unwrap();
    let user = text
        .lines()
        .filter_map(|l| l.strip_prefix("USER "))
        .next_back()
        .expect("a USER");
    let uid: u32 = user.split(':').next().unwrap().trim().parse().unwrap();
    assert_ne!(uid, 0, "runs as root");
    for label in [
        "org.opencontainers.image.source",
        "org.opencontainers.image.version",
        "org.opencontainers.image.revision",
    ] {
        assert!(text.contains(&format!("{label}=")), "no {label}");
    }
    assert!(text.contains("--strip-all"), "the binary is not stripped");
    assert!(text.contains("--only-keep-debug"), "no separate debug info");
    assert!(text.contains("--mount=type=cache,target=/src/target"));
    assert!(text.contains("--mount=type=cache,target=/usr/local/cargo/registry"));
    // The image the Deployment runs is the last stage (what `docker build` builds).
    let last = text.lines().rfind(|l| l.starts_with("FROM ")).unwrap();
    assert!(
        last.contains("distroless") && last.contains("nonroot"),
        "{last}"
    );
    // It exposes the ports the Deployment's container listens on: the API and the metrics.
    let exposed: BTreeSet<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(|l| l.split_whitespace().map(|p| p.parse().unwrap()))
        .collect();
    let objects = rendered();
    let deployment = find(&objects, "Deployment", "warrant");
    let ports: BTreeSet<u64> = deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_u64().unwrap())
        .collect();
    assert_eq!(exposed, ports);
}

/// The components to copy into an overlay say how many values to change, and mark that many.
#[test]
fn copied_components_count_their_marked_values() {
    for (dir, says, want) in [
        ("publish-discovery", "change the three marked values", 3),
        ("another-namespace", "change the marked value", 1),
    ] {
        let text = std::fs::read_to_string(format!("{DEPLOY}/{dir}/kustomization.yaml")).unwrap();
        let marked = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && l.contains(" # "))
            .count();
        assert!(
            text.contains(says),
            "{dir}: the header does not say {says:?}"
        );
        assert_eq!(marked, want, "{dir}: {marked} marked values");
    }
}

/// Every metric the PrometheusRule and the dashboard query is one a running warrant exports:
/// warrant is started in the modes that export each family (beside a cluster with delegation,
/// the external signer and the audit trail; then standalone with managed keys in an HSM and in
/// KMS; then as the pod certificate signer), and /metrics
/// scraped. A labelled family shows in /metrics only once it has a sample, so the test first
/// makes one of each: a token issued and reviewed twice, the signer probed, the serving
/// certificate reloaded, the key store failing once, PodCertificateRequests answered, put off,
/// refused and raced ([`pod_certificate_metrics`]).
#[tokio::test]
async fn alerts_and_dashboard_query_only_exported_metrics() {
    use warrant_kube_fixture::Fixture;
    let fixture = Fixture::start().await.unwrap();
    create_standard_objects(&fixture, None);
    let run = tempfile::tempdir().unwrap();
    let socket = run.path().join("signer.sock");
    let audit = run.path().join("audit.log");
    let cluster = Warrant::start_cluster(
        &fixture,
        &[
            "--delegate-authentication",
            "--delegate-authorization",
            "--authentication-skip-lookup",
            "--service-account-signing-endpoint",
            socket.to_str().unwrap(),
            "--audit-log-path",
            audit.to_str().unwrap(),
            "--injection-agent-image",
            "warrant",
            "--injection-warrant-url",
            "https://127.0.0.1:{port}",
            "--injection-allow-anonymous",
        ],
    )
    .await;
    // Token injection's families: a pod reviewed, and one past the bound on containers.
    for containers in [1, 200] {
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "namespace": "demo", "operation": "CREATE",
                "object": {"spec": {"serviceAccountName": "app", "containers": vec![serde_json::json!({"name": "c"}); containers]}},
            },
        });
        cluster
            .http
            .post(cluster.url("/mutate/pods"))
            .json(&review)
            .send()
            .await
            .unwrap();
    }
    let token = cluster.token(&["--bound-object-kind", "Pod", "--bound-object-name", "app-0"]);
    for _ in 0..2 {
        assert_eq!(cluster.review(&token, &[])["authenticated"], true);
    }
    // A TokenRequest with a proof that is not one: a DPoP proof checked (and refused).
    let refused = cluster
        .http
        .post(cluster.url("/api/v1/namespaces/demo/serviceaccounts/app/token"))
        .bearer_auth(cluster.admin_token())
        .header("DPoP", "not-a-proof")
        .header("content-type", "application/json")
        .body(r#"{"spec": {}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let probe = cluster.warrant(&[
        "probe-signer".as_ref(),
        "--signing-endpoint".as_ref(),
        socket.as_os_str(),
    ]);
    assert!(probe.status.success(), "{}", stderr(&probe));
    let serving = std::fs::read(cluster.path("serving.crt")).unwrap();
    std::fs::write(cluster.path("serving.crt.new"), serving).unwrap();
    std::fs::rename(cluster.path("serving.crt.new"), cluster.path("serving.crt")).unwrap();
    let text = metrics_holding(
        &cluster,
        &[
            "warrant_tls_serving_certificate_reloads_total{",
            "warrant_signer_requests_total{",
            "warrant_audit_events_total{",
            "warrant_dpop_proofs_total{",
            "warrant_admission_limited_total{",
        ],
    )
    .await;
    let mut exported = exported_metrics(&text);

    // Standalone with managed keys in an HSM, publishing to a directory: the key store, the
    // HSM's and the publisher's families.
    let hsm = crate::hsm::SoftHsm::new();
    let uri = hsm.uri();
    let scratch = tempfile::tempdir().unwrap();
    let www = scratch.path().join("www");
    std::fs::create_dir(&www).unwrap();
    let target = format!("file://{}", www.display());
    let standalone = Warrant::start_with_env(
        &demo_objects(),
        |dir| crate::hsm::flags(dir, &uri),
        &["--publish-discovery", &target],
        &hsm.env(),
    )
    .await;
    // The target's directory becomes a file, and a rotation gives the publisher something to
    // write there: the round fails. Then the key store stops parsing.
    std::fs::remove_dir_all(&www).unwrap();
    std::fs::write(&www, "not a directory").unwrap();
    let rotated = Command::new(BIN)
        .args(["keys", "rotate", "--key-dir"])
        .arg(standalone.path("keys"))
        .args(["--key-pkcs11-uri", &uri])
        .envs(hsm.env())
        .output()
        .unwrap();
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    metrics_holding(&standalone, &["warrant_publish_failures_total{"]).await;
    std::fs::write(standalone.path("keys/keys.json"), "not json").unwrap();
    let text = metrics_holding(
        &standalone,
        &[
            "warrant_keys_store_errors_total{",
            "warrant_hsm_operations_total{",
            "warrant_publish_failures_total{",
        ],
    )
    .await;
    exported.extend(exported_metrics(&text));

    // Standalone with managed keys in AWS KMS (moto's server): the KMS holder's own gauge.
    let moto = warrant_testkit::servers::Emulator::moto().await;
    let endpoint = format!("http://127.0.0.1:{}", moto.port());
    let in_kms = Warrant::start_with_env(
        &demo_objects(),
        |dir| crate::kms::flags(&dir.join("keys"), &endpoint, "ES256"),
        &[],
        &crate::kms::env(),
    )
    .await;
    let text = metrics_holding(&in_kms, &["warrant_kms_revoked_keys_enabled"]).await;
    exported.extend(exported_metrics(&text));

    // Beside a cluster as the pod certificate signer.
    exported.extend(exported_metrics(&pod_certificate_metrics().await));

    // The alerts of the monitoring component and of the control plane's.
    let rule_files: Vec<Value> = ["monitoring", "control-plane-monitoring"]
        .iter()
        .map(|c| {
            serde_saphyr::from_str(
                &std::fs::read_to_string(format!("{DEPLOY}/components/{c}/prometheusrule.yaml"))
                    .unwrap(),
            )
            .unwrap()
        })
        .collect();
    let groups: Vec<&Value> = rule_files
        .iter()
        .flat_map(|r| r["spec"]["groups"].as_array().unwrap())
        .collect();
    let mut queries: Vec<(String, String)> = Vec::new();
    for group in &groups {
        for rule in group["rules"].as_array().unwrap() {
            queries.push((
                format!("alert {}", rule["alert"]),
                rule["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DEPLOY}/components/monitoring/dashboard.json")).unwrap(),
    )
    .unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push((
                format!("panel {}", panel["title"]),
                target["expr"].as_str().unwrap().to_owned(),
            ));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(query) = variable["query"]["query"].as_str() {
            queries.push((format!("variable {}", variable["name"]), query.to_owned()));
        }
    }
    assert!(queries.len() > 20, "{queries:?}");
    // Prometheus's own series for the ServiceMonitor's targets: job is the Service's name
    // (the Prometheus Operator's default), in warrant's namespace.
    let objects = render_with(&["monitoring"]);
    let service = find(&objects, "Service", "warrant");
    let scrape = format!(
        r#"up{{job="{}", namespace="{}"}}"#,
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    // The control plane's signers: job is the static pod's label the PodMonitor names.
    let monitor = find(
        &render_with(&["control-plane-monitoring"]),
        "PodMonitor",
        "warrant-signer",
    )
    .clone();
    let static_pod = render(&Path::new(DEPLOY).join("control-plane")).remove(0);
    let signer_scrape = format!(
        r#"up{{job="{}"}}"#,
        static_pod["metadata"]["labels"][monitor["spec"]["jobLabel"].as_str().unwrap()]
            .as_str()
            .unwrap()
    );
    // kube-apiserver's series are queried for warrant's webhooks by their names.
    let webhooks: Vec<String> = find(
        &render_with(&["injection"]),
        "MutatingWebhookConfiguration",
        "warrant-token-injection",
    )["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect();
    let mut referenced = BTreeSet::new();
    for (what, query) in &queries {
        let names = metric_names(query);
        if names.is_empty() {
            assert!(
                query.contains(&scrape) || query.contains(&signer_scrape),
                "{what} queries neither a warrant metric nor {scrape} nor {signer_scrape}: {query}"
            );
        }
        for name in names {
            if name.starts_with("apiserver_") {
                assert!(
                    KUBE_APISERVER_METRICS.contains(&name.as_str()),
                    "{what} queries {name}, which is not one of kube-apiserver's metrics this test knows: {query}"
                );
                assert!(
                    webhooks.iter().any(|w| query.contains(&format!("\"{w}"))),
                    "{what} queries {name} for none of warrant's webhooks {webhooks:?}: {query}"
                );
                referenced.insert(name);
                continue;
            }
            assert!(
                exported.contains(&name),
                "{what} queries {name}, which warrant does not export: {query}"
            );
            referenced.insert(name);
        }
    }
    // What the dashboard shows of publishing, the HSM and key binding.
    for family in [
        "warrant_publish_failing",
        "warrant_keys_activations_held_total",
        "warrant_hsm_operations_total",
        "warrant_hsm_sessions_in_use",
        "warrant_dpop_proofs_total",
        r#"warrant_signer_request_duration_seconds_bucket{job="warrant-signer"}"#,
        "warrant_admission_reviews_total",
        "warrant_admission_limited_total",
        r#"route="admission""#,
        "apiserver_admission_webhook_fail_open_count",
        "apiserver_admission_webhook_rejection_count",
        "apiserver_admission_webhook_admission_duration_seconds_bucket",
        "warrant_podcert_decisions_total",
        "warrant_podcert_issuance_age_seconds_bucket",
        "warrant_podcert_queue_oldest_seconds",
        "warrant_podcert_ca_expiration_timestamp_seconds",
    ] {
        assert!(
            queries
                .iter()
                .any(|(what, q)| what.starts_with("panel") && q.contains(family)),
            "no dashboard panel shows {family}"
        );
    }
    // Every alert is listed in docs/install.md and has its runbook: a section of
    // docs/alerts.md, which its runbook_url names.
    let install = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/install.md"
    ))
    .unwrap();
    let runbooks =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/alerts.md"))
            .unwrap();
    let mut alerts = Vec::new();
    for group in &groups {
        for rule in group["rules"].as_array().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            alerts.push(alert);
            assert!(
                install.contains(&format!("`{alert}`")),
                "docs/install.md does not list {alert}"
            );
            assert!(
                runbooks.contains(&format!("\n## {alert}\n")),
                "docs/alerts.md has no section for {alert}"
            );
            let url = rule["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_default();
            assert!(
                url.ends_with(&format!("docs/alerts.md#{}", alert.to_lowercase())),
                "{alert}'s runbook_url is {url:?}"
            );
        }
    }
    for alert in [
        "WarrantPublishFailing",
        "WarrantKeyActivationHeld",
        "WarrantHsmOperationsFailing",
        "WarrantTargetDown",
        "WarrantSignerTargetDown",
        "WarrantSignerTargetMissing",
        "WarrantAdmissionErrors",
        "WarrantAdmissionLimited",
        "WarrantAdmissionSlow",
        "WarrantInjectionFailedOpen",
        "WarrantInjectionFailedClosed",
        "WarrantPodCertificateCAExpiring",
        "WarrantPodCertificateRequestsRequeued",
        "WarrantPodCertificateStatusRefused",
        "WarrantPodCertificateTrustBundleFailing",
        "WarrantPodCertificateQueueStuck",
    ] {
        assert!(alerts.contains(&alert), "no alert {alert}");
    }
}

/// The pod certificate signer's `/metrics` once each family the alerts and the dashboard read
/// has a sample: warrant as the signer of `warrant.example.com/spiffe` beside the cluster
/// fixture, with a CA made by openssl. One PCR issued (decisions, statuses written, the time to
/// issue, the CA's end); one put off while the pod cannot be read (a requeue); one whose status
/// kube-apiserver refuses with `422`; one another writer answers first (a lost race); a line
/// the watch cannot read (a watch error); and the CA replaced while ClusterTrustBundle writes
/// fail (a trust bundle error).
// The real binary dates its decisions by the real clock, so the PCRs' creation is dated by it.
#[allow(clippy::disallowed_methods)]
async fn pod_certificate_metrics() -> String {
    use warrant_kube_fixture::Fixture;
    use warrant_kube_fixture::podcert::{cluster_trust_bundles, pod_certificate_requests};
    use warrant_testkit::{NODE_UID, POD_UID, SA_UID};
    const SIGNER: &str = "warrant.example.com/spiffe";
    // A stub PKCS#10 request for a P-256 key, as a 1.36 kubelet sends.
    const CSR: &str = "MIG7MGICAQAwADBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABEbXApSixJM4pedRw535xibamIRjf8IRhcRswGHwjbrDlTqCcEjVbaO3sVu5YVCIv7s1vcil4sHPSXrKND9H9p2gADAKBggqhkjOPQQDAgNJADBGAiEA77wE+wk/2cgGrhMQATJIRTqahEALr5J/ukd0QPSASuwCIQCwdvlMCSfiF9mkch216s9bVXotjgocx1KMnKRxyGKhww==";
    // Created now, as kube-apiserver stamps it (the time to issue is counted from it).
    let pcr = |name: &str| {
        let now = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).unwrap();
        json!({
            "apiVersion": "certificates.k8s.io/v1beta1",
            "kind": "PodCertificateRequest",
            "metadata": {
                "name": name,
                "namespace": "demo",
                "creationTimestamp": now.to_string(),
            },
            "spec": {
                "signerName": SIGNER,
                "podName": "app-0",
                "podUID": POD_UID,
                "serviceAccountName": "app",
                "serviceAccountUID": SA_UID,
                "nodeName": "node-1",
                "nodeUID": NODE_UID,
                "maxExpirationSeconds": 7200,
                "stubPKCS10Request": CSR,
            },
        })
    };
    let cluster = Fixture::start().await.unwrap();
    cluster.serve_pod_certificates("v1beta1");
    create_standard_objects(&cluster, None);
    let pcrs = pod_certificate_requests("v1beta1");
    let ca_dir = tempfile::tempdir().unwrap();
    let ca = ca_dir.path();
    let w = Warrant::start_cluster(
        &cluster,
        &[
            "--pod-certificate-signer",
            SIGNER,
            // A CA warrant keeps: its key store's families too.
            "--pod-certificate-ca-key-dir",
            ca.join("ca-keys").to_str().unwrap(),
        ],
    )
    .await;
    let answered = |name: &str| {
        cluster
            .get_json(pcrs, "demo", name)
            .is_some_and(|p| warrant_kube_fixture::podcert::is_terminal(p.get("status")))
    };
    w.eventually("the trust bundle", || {
        cluster
            .get_json(
                cluster_trust_bundles(),
                "",
                "warrant.example.com:spiffe:live",
            )
            .is_some()
    })
    .await;

    cluster.create_json(pcrs, pcr("issued")).unwrap();
    metrics_holding(
        &w,
        &[
            "warrant_podcert_decisions_total{",
            "warrant_podcert_decisions_written_total{",
            "warrant_podcert_issuance_age_seconds_bucket{",
            "warrant_podcert_ca_expiration_timestamp_seconds{",
        ],
    )
    .await;

    // The pod cannot be read: put off, then issued once it can.
    cluster.fail_gets(Some(500));
    cluster.create_json(pcrs, pcr("requeued")).unwrap();
    metrics_holding(&w, &["warrant_podcert_requeues_total{"]).await;
    cluster.fail_gets(None);
    w.eventually("the requeued PCR answered", || answered("requeued"))
        .await;

    // kube-apiserver refuses the status.
    cluster.fail_writes(Some(422));
    cluster.create_json(pcrs, pcr("refused")).unwrap();
    metrics_holding(&w, &["warrant_podcert_status_write_errors_total{"]).await;
    cluster.fail_writes(None);

    // Another writer answers first: warrant's write is held while the test writes a terminal
    // status through the API, then let through, and refused with 409.
    cluster.hold_writes("podcertificaterequests");
    cluster.create_json(pcrs, pcr("raced")).unwrap();
    cluster.until(|c| c.held_writes().len() == 1).await;
    cluster.stop_holding_writes();
    let mut other = cluster.get_json(pcrs, "demo", "raced").unwrap();
    other["status"] = json!({"conditions": [{
        "type": "Denied",
        "status": "True",
        "reason": "AnsweredByAnother",
        "message": "another writer",
        "lastTransitionTime": "2026-11-27T17:17:09Z",
    }]});
    let written = reqwest::Client::new()
        .put(format!(
            "{}/apis/certificates.k8s.io/v1beta1/namespaces/demo/podcertificaterequests/raced/status",
            cluster.url()
        ))
        .json(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), 200, "{}", written.text().await.unwrap());
    assert_eq!(cluster.release_write().await, Some(409));
    metrics_holding(&w, &["warrant_podcert_lost_races_total{"]).await;

    // A watch line that is not an event.
    cluster
        .inject_raw_line(pcrs, "this is not a watch event")
        .unwrap();
    metrics_holding(&w, &["warrant_podcert_watch_errors_total{"]).await;

    // A new CA key published while trust bundle writes fail.
    cluster.fail_writes(Some(500));
    w.warrant_ok(&[
        std::ffi::OsStr::new("keys"),
        std::ffi::OsStr::new("rotate"),
        std::ffi::OsStr::new("--key-dir"),
        ca.join("ca-keys").as_os_str(),
    ]);
    let text = metrics_holding(
        &w,
        &[
            "warrant_podcert_trust_bundle_errors_total{",
            "warrant_podcert_queue_depth",
            "warrant_podcert_queue_oldest_seconds",
        ],
    )
    .await;
    cluster.fail_writes(None);
    text
}

/// docs/pod-certificates.md's overlay (its yaml block listing both components), rendered
/// beside deploy/ as install.md lays an overlay out: both components' checks hold with the
/// doc's own signer name, and the example's name is left in no object, so the doc patches every
/// place the components mark.
#[test]
fn the_pod_certificate_overlay_in_the_docs_renders() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/pod-certificates.md"
    ))
    .unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in doc.lines() {
        match (&mut current, line.trim()) {
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, "```yaml") => current = Some(String::new()),
            (None, _) => {}
        }
    }
    let overlay = blocks
        .iter()
        .find(|b| b.contains("../deploy/components/pod-certificates-nodes-only"))
        .expect("docs/pod-certificates.md has the overlay");
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(DEPLOY, dir.path().join("deploy")).unwrap();
    std::fs::create_dir(dir.path().join("my-warrant")).unwrap();
    std::fs::write(dir.path().join("my-warrant/kustomization.yaml"), overlay).unwrap();
    let objects = render(&dir.path().join("my-warrant"));
    let what = "docs/pod-certificates.md's overlay";
    let (image, version) = release();
    check_conventions(&objects, &image, &version, what);
    check_references(&objects, what);
    let deployment = find(&objects, "Deployment", "warrant");
    let flags = pod_flags(deployment);
    check_component("pod-certificates", &objects, &flags, what);
    check_component("pod-certificates-nodes-only", &objects, &flags, what);
    let example = "warrant.example.com/spiffe";
    assert!(
        !serde_json::to_string(&objects).unwrap().contains(example),
        "{what} leaves the example's signer name {example} in place"
    );
    // And the components mark each place the name is, as their headers say.
    let marked: usize = ["pod-certificates", "pod-certificates-nodes-only"]
        .iter()
        .flat_map(|c| std::fs::read_dir(format!("{DEPLOY}/components/{c}")).unwrap())
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .map(|text| {
            text.lines()
                .filter(|l| !l.trim_start().starts_with('#') && l.contains(example))
                .inspect(|l| assert!(l.ends_with(" # the signer name"), "unmarked: {l}"))
                .count()
        })
        .sum();
    assert_eq!(marked, 3, "the variable, the ClusterRole and the policy");
}

/// `/metrics` once it holds every one of `want` (warrant counts some things on its own schedule:
/// a file reload, a watch event).
async fn metrics_holding(w: &Warrant, want: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let text = w.metrics_text().await;
        if want.iter().all(|w| text.contains(w)) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/metrics never held all of {want:?}:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The metric names warrant exports: every sample's name, and for families without samples yet
/// the names their samples will have.
fn exported_metrics(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap());
            match kind {
                "counter" => {
                    names.insert(format!("{}_total", name.trim_end_matches("_total")));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        names.insert(format!("{name}{suffix}"));
                    }
                }
                "info" => {
                    names.insert(format!("{name}_info"));
                }
                _ => {
                    names.insert(name.to_owned());
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_owned());
        }
    }
    names
}

/// kube-apiserver's metrics the alerts and the dashboard query, for warrant's webhooks (named
/// by their `name` label): the webhooks' calls that failed open (`failurePolicy: Ignore`) and
/// the reviews rejected (`error_type` says whether the webhook refused or could not be called),
/// both alpha since Kubernetes 1.24, and the calls' latency (stable). k8s.io/apiserver's
/// pkg/admission/metrics defines them; Prometheus holds them when it scrapes kube-apiserver
/// (kube-prometheus does, job `apiserver`), which docs/install.md says.
const KUBE_APISERVER_METRICS: &[&str] = &[
    "apiserver_admission_webhook_fail_open_count",
    "apiserver_admission_webhook_rejection_count",
    "apiserver_admission_webhook_admission_duration_seconds_bucket",
];

/// The metric names in a PromQL expression: identifiers starting `warrant_`, `process_` or
/// `apiserver_` (kube-apiserver's), outside quoted strings (label values).
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = query.char_indices().peekable();
    let mut in_string = false;
    while let Some((at, c)) = chars.next() {
        if c == '"' {
            in_string = !in_string;
            continue;
        }
        if in_string || !(c.is_ascii_alphabetic() || c == '_') {
            continue;
        }
        let mut end = at + c.len_utf8();
        while let Some(&(next, d)) = chars.peek() {
            if d.is_ascii_alphanumeric() || d == '_' || d == ':' {
                end = next + d.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let word = &query[at..end];
        if ["warrant_", "process_", "apiserver_"]
            .iter()
            .any(|prefix| word.starts_with(prefix))
        {
            names.push(word.to_owned());
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_queries() {
    assert_eq!(
        metric_names(
            r#"sum by (route) (rate(warrant_http_requests_total{code=~"4..", x="warrant_no"}[5m])) / process_open_fds"#
        ),
        ["warrant_http_requests_total", "process_open_fds"]
    );
    assert_eq!(
        metric_names(
            r#"increase(apiserver_admission_webhook_fail_open_count{name="apiserver_x"}[10m]) > 0"#
        ),
        ["apiserver_admission_webhook_fail_open_count"]
    );
    let exported = exported_metrics(
        "# TYPE warrant_a counter\n# TYPE warrant_b histogram\n# TYPE warrant_c gauge\nwarrant_c 1\n",
    );
    for name in [
        "warrant_a_total",
        "warrant_b_bucket",
        "warrant_b_count",
        "warrant_c",
    ] {
        assert!(exported.contains(name), "{name}");
    }
    assert!(!exported.contains("warrant_a"));
}

/// docs/install.md's setup for the external signer, run as written with the node's paths
/// (`/etc/…`, `/var/lib/warrant`, `/run/warrant`) moved under a scratch directory, a throw-away
/// cluster CA and kubeadm key there, and the loopback Kubernetes fixture as the cluster
/// (kubeadm's admin.conf and controller-manager.conf point at it): the key Secret created once,
/// then one node's setup. The static pod's own arguments (deploy/control-plane, rendered, paths
/// moved the same way, the HTTPS port the test's) start warrant as the pod does, as uid 65532
/// when the test runs as root: it reads the Secret, writes its copy, and its socket answers
/// kube-apiserver's startup calls; the HTTPS API serves the setup's own certificate for
/// 127.0.0.1. Stopped and started again with the cluster gone, the socket answers from the copy.
// Multi-threaded: the setup's commands run synchronously while the fixture serves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signer_node_setup_runs_and_the_static_pod_serves() {
    let root_dir = tempfile::tempdir().unwrap();
    let root = root_dir.path().to_str().unwrap().to_owned();
    let as_root = rustix::process::geteuid().is_root();
    // 65532 must reach the files under the scratch directory, as it reaches /etc on a node.
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let pki = format!("{root}/etc/kubernetes/pki");
    std::fs::create_dir_all(&pki).unwrap();
    std::fs::create_dir_all(format!("{root}/etc/kubernetes/manifests")).unwrap();
    std::fs::create_dir_all(format!("{root}/etc/tmpfiles.d")).unwrap();
    std::fs::create_dir_all(format!("{root}/bin")).unwrap();
    std::os::unix::fs::symlink(BIN, format!("{root}/bin/warrant")).unwrap();
    std::os::unix::fs::symlink(DEPLOY, format!("{root}/deploy")).unwrap();
    for command in [
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -keyout ca.key -out ca.crt -subj /CN=kubernetes",
        "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key",
        "openssl pkey -in sa.key -pubout -out sa.pub",
    ] {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(&pki)
            .output()
            .unwrap();
        assert!(out.status.success(), "{command}: {}", stderr(&out));
    }

    // The cluster, as kubeadm's admin and this node's controller-manager reach it.
    let mut cluster = warrant_kube_fixture::Fixture::start().await.unwrap();
    cluster.register(warrant_kube_fixture::ResourceType::of::<
        k8s_openapi::api::coordination::v1::Lease,
    >());
    for conf in ["admin.conf", "controller-manager.conf"] {
        cluster
            .write_kubeconfig(Path::new(&format!("{root}/etc/kubernetes/{conf}")))
            .unwrap();
    }

    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/install.md"
    ))
    .unwrap();
    let blocks = sh_blocks(&doc);
    let once = blocks
        .iter()
        .find(|b| b.contains("warrant keys generate --key-secret warrant-signer/warrant-keys"))
        .expect("install.md creates the control plane's key Secret");
    let block = blocks
        .iter()
        .find(|b| b.contains("/etc/tmpfiles.d/warrant.conf"))
        .expect("install.md has the signer's node setup");
    let mut script = format!("{once}\n{block}")
        .replace("/etc/", &format!("{root}/etc/"))
        .replace("/var/lib/warrant", &format!("{root}/var/lib/warrant"))
        .replace("/run/warrant", &format!("{root}/run/warrant"));
    if !as_root {
        // Without root, the files stay the test user's, and warrant runs as that user.
        script = script
            .replace("-o 65532 -g 65532 ", "")
            .replace("0700 65532 65532", "0700 - -")
            .lines()
            .filter(|l| !l.starts_with("chown "))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let path = format!("{root}/bin:{}", std::env::var("PATH").unwrap());
    let out = Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{script}")])
        .current_dir(&root)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}\n{}", stderr(&out));

    // The static pod the setup wrote, with the release's image; its arguments, run.
    let manifest = std::fs::read_to_string(format!(
        "{root}/etc/kubernetes/manifests/warrant-signer.yaml"
    ))
    .unwrap();
    let pod: Value = serde_saphyr::from_str(&manifest).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // The metrics listener on the node's address (the loopback is this test's node), at a
    // port of the test's instead of the pod's.
    let metrics_port = pod["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .expect("the signer names its metrics port")["containerPort"]
        .to_string();
    let metrics = {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        free.local_addr().unwrap()
    };
    let flags: Vec<String> = args(&pod["spec"]["containers"][0])
        .into_iter()
        .map(|f| {
            f.replace("/etc/warrant", &format!("{root}/etc/warrant"))
                .replace("/var/lib/warrant", &format!("{root}/var/lib/warrant"))
                .replace("/var/run/warrant", &format!("{root}/run/warrant"))
                .replace(&format!("$(NODE_IP):{metrics_port}"), &metrics.to_string())
        })
        .collect();
    assert!(
        flags.contains(&format!("--metrics-bind-address={metrics}")),
        "{flags:?}"
    );
    let spawn = || {
        let mut command = if as_root {
            let user = pod["spec"]["securityContext"]["runAsUser"].to_string();
            let group = pod["spec"]["securityContext"]["runAsGroup"].to_string();
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={user}"),
                &format!("--regid={group}"),
                "--clear-groups",
                "--",
                BIN,
            ]);
            c
        } else {
            Command::new(BIN)
        };
        command
            .args(&flags)
            .env("LISTEN_FDS", "1")
            .env_remove("LISTEN_PID")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        {
            use command_fds::{CommandFdExt, FdMapping};
            use std::os::fd::AsFd;
            command
                .fd_mappings(vec![FdMapping {
                    parent_fd: listener.as_fd().try_clone_to_owned().unwrap(),
                    child_fd: 3,
                }])
                .unwrap();
        }
        Kill(command.spawn().unwrap())
    };
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = spawn();

    serves(&mut child.0, &pki, port).await;
    // The socket answers Metadata and FetchKeys, as kube-apiserver asks at its start.
    let socket = format!("{root}/run/warrant/signer.sock");
    probe_signer(&socket);
    // Prometheus scrapes the node's address with no credentials, and sees those calls.
    let scraped = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap();
    assert_eq!(scraped.status(), 200);
    let scraped = scraped.text().await.unwrap();
    assert!(
        scraped.contains(r#"warrant_signer_requests_total{result="ok",rpc="Metadata"}"#)
            || scraped.contains(r#"warrant_signer_requests_total{rpc="Metadata",result="ok"}"#),
        "{scraped}"
    );
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
    if as_root {
        assert_eq!(meta.uid(), 65532, "the signer runs as 65532");
    }
    // The node's copy holds the Secret's key set: kubeadm's key, imported.
    let secret: k8s_openapi::api::core::v1::Secret =
        cluster.get("warrant-signer", "warrant-keys").unwrap();
    let index = secret.data.unwrap()["keys.json"].0.clone();
    let copy = format!("{root}/var/lib/warrant/keys/keys.json");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read(&copy).ok().map(|c| key_index_kids(&c)) != Some(key_index_kids(&index)) {
        assert!(tokio::time::Instant::now() < deadline, "no copy in {copy}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The whole cluster goes down, and the node restarts: the signer starts from its copy.
    cluster.stop().await;
    drop(child);
    let mut child = spawn();
    serves(&mut child.0, &pki, port).await;
    probe_signer(&socket);
}

/// `warrant probe-signer` on `socket` succeeds.
fn probe_signer(socket: &str) {
    let probe = Command::new(BIN)
        .args(["probe-signer", "--signing-endpoint", socket])
        .output()
        .unwrap();
    assert!(probe.status.success(), "{}", stderr(&probe));
    let out = String::from_utf8(probe.stdout).unwrap();
    assert!(out.starts_with("ok: "), "{out}");
}

/// Waits until the signer serves HTTPS on the loopback with the setup's certificate, from the
/// "cluster" CA in `pki`; fails with its log if it exits first.
async fn serves(child: &mut std::process::Child, pki: &str, port: u16) {
    let ca = std::fs::read(format!("{pki}/ca.crt")).unwrap();
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).unwrap()])
        .build()
        .unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(r) = http
            .get(format!("https://127.0.0.1:{port}/livez"))
            .timeout(std::time::Duration::from_secs(2))
            .send()
            .await
            && r.status().is_success()
        {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut log = String::new();
            use std::io::Read as _;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut log)
                .unwrap();
            panic!("the signer exited with {status}:\n{log}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the signer never served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The control-plane example with the keys in an HSM: warrant knows its flags, its PKCS#11 URI
/// parses (so it holds no PIN), and the module and the PIN file it names are on read-only
/// mounts.
#[test]
fn the_control_plane_hsm_example_mounts_what_its_uri_names() {
    let pod = render(&Path::new(DEPLOY).join("control-plane-pkcs11")).remove(0);
    let container = &pod["spec"]["containers"][0];
    assert_serve_knows(&container["args"]);
    let flags = args(container);
    assert!(
        flags.contains(&"--key-secret=warrant-signer/warrant-keys".to_owned())
            && flags.contains(&"--key-copy-dir=/var/lib/warrant/keys".to_owned()),
        "{flags:?}"
    );
    let uri = flags
        .iter()
        .find_map(|f| f.strip_prefix("--key-pkcs11-uri="))
        .expect("--key-pkcs11-uri");
    let uri: warrant_hsm::Pkcs11Uri = uri.parse().unwrap();
    let mounted_read_only = |path: &Path| {
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["readOnly"] == true && path.starts_with(m["mountPath"].as_str().unwrap()))
    };
    assert!(mounted_read_only(uri.module_path().unwrap()), "{uri}");
    assert!(mounted_read_only(uri.pin_source().unwrap()), "{uri}");
}

/// What the dashboard and the alerts say callers of an overloaded delegation get is what
/// warrant answers them: 429 with Retry-After (`Refusal::overloaded`), for authentication and
/// authorization alike, never a 503.
#[test]
fn overload_is_named_by_the_code_warrant_answers() {
    let code = match warrant_auth::Refusal::overloaded() {
        warrant_auth::Refusal::TooManyRequests { .. } => "429",
        other => panic!("overload is {other:?}"),
    };
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DEPLOY}/components/monitoring/dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut named = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            if target["expr"]
                .as_str()
                .unwrap()
                .contains("_overloaded_total")
            {
                let legend = target["legendFormat"].as_str().unwrap();
                assert!(legend.contains(&format!("({code})")), "{legend}");
                named += 1;
            }
        }
    }
    assert_eq!(named, 2, "authentication's and authorization's overload");
    let rules: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(format!(
            "{DEPLOY}/components/monitoring/prometheusrule.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let rule = rules["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .find(|r| r["alert"] == "WarrantDelegationOverloaded")
        .unwrap();
    let description = rule["annotations"]["description"].as_str().unwrap();
    assert!(
        description.contains(code) && !description.contains("503"),
        "{description}"
    );
}
