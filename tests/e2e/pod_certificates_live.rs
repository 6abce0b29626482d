//! `warrant serve --pod-certificate-signer` against a real kube-apiserver, opt-in: the test runs
//! when `WARRANT_KUBE_APISERVER` names the admin kubeconfig of a disposable cluster, and
//! otherwise says on stderr that it was skipped, and passes (CI has no cluster).
//!
//! The cluster: kind or kubeadm, Kubernetes 1.35 or later, with PodCertificateRequests turned on
//! as docs/pod-certificates.md ("Turning it on in Kubernetes") says (the three feature gates and
//! the `certificates.k8s.io/v1beta1` runtime config on kube-apiserver; the kubelets' and
//! kube-controller-manager's gates do not matter, as no kubelet takes part), the `Node`
//! authorizer and the `NodeRestriction` admission plugin (both kubeadm's and kind's defaults),
//! and kube-controller-manager signing kubelet client certificates (also the default). The admin
//! kubeconfig must be able to do anything (`cluster-admin`): warrant runs with it too. The
//! commands for a kind cluster are in docs/pod-certificates.md ("Testing against a real
//! cluster").
//!
//! What it does, the kubelet's part played with kubectl and openssl:
//!
//! 1. In a new namespace `warrant-live-<random>`, a service account `app` and a pod `app-0` of
//!    it, pinned to the cluster's first node (`spec.nodeName`, the pause image): whether it runs
//!    does not matter, warrant accepts a Pending pod.
//! 2. A client certificate for that node, got as a kubelet gets one when it bootstraps: a
//!    CertificateSigningRequest for `kubernetes.io/kube-apiserver-client-kubelet`,
//!    `CN=system:node:<node>`, `O=system:nodes`, ten minutes long, approved by the admin
//!    (`kubectl certificate approve`) and signed by kube-controller-manager; then a kubeconfig
//!    with that certificate and the admin kubeconfig's server and CA.
//! 3. It starts warrant (the real binary) with the admin kubeconfig, a CA made with openssl, the
//!    signer name `warrant.example.com/live-test`, the trust domain `live.warrant.test` and an
//!    audit log.
//! 4. The node creates the PCR (`certificates.k8s.io/v1beta1`, as 1.35's and 1.36's kubelets do;
//!    `v1` where v1beta1 is not served), `generateName: req-`, owned by the pod, with a stub
//!    PKCS#10 request of a fresh P-256 key: NodeRestriction checks it as it checks a kubelet's
//!    (the node's own pod, service account and UIDs).
//!
//! It then checks what a pod and its peers rely on: the PCR is `Issued`; the chain's leaf
//! verifies with openssl against the roots of the signer's ClusterTrustBundle (found by its label
//! `warrant.dev/trust-bundle: live` and signer name, as a pod's volume selects it), is for the
//! pod's key and names `spiffe://live.warrant.test/ns/<namespace>/sa/app` alone; and warrant's
//! audit log has the `issued` event of that PCR, with its name and UID, the pod's, service
//! account's and node's UIDs and the leaf's serial number, and not the key.
//!
//! What it created is deleted when it ends, passed or failed: the namespace (with the pod and the
//! PCR), the CSR and the signer's ClusterTrustBundle (after warrant has stopped, so that it does
//! not write it again). A deletion that fails is reported on stderr, naming what to delete by
//! hand. The node's certificate stays valid for its ten minutes; its key is only in the test's
//! temporary directory, removed at the end.
//!
//! The waits on the cluster (kube-controller-manager signing, kube-apiserver's admission caches
//! catching up with a fresh object, warrant answering) poll every quarter second with a deadline
//! of a minute each; a wait that runs out fails with what the cluster said last and, once warrant
//! runs, its log.
//!
//! Not run here: this machine has no kube-apiserver. The part from warrant's start on was run
//! once, while it was written, against the loopback fixture of `pod_certificates` (which has no
//! CSRs, NodeRestriction or `generateName`): the kubectl commands, the trust bundle's selection
//! and deletion and the audit checks passed there.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::pod_certificates::{
    PodCa, Requester, check_leaf, condition, pod_certificate_events, pod_certificate_request, refs,
    serial,
};
use crate::support::*;

/// The variable naming the admin kubeconfig.
const VARIABLE: &str = "WARRANT_KUBE_APISERVER";

/// The signer name the test answers for: its own, so that no other signer's requests or trust
/// bundle are touched.
const SIGNER: &str = "warrant.example.com/live-test";

const TRUST_DOMAIN: &str = "live.warrant.test";

/// How long each wait on the cluster may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// How often a wait asks again.
const POLL: Duration = Duration::from_millis(250);

/// kubectl as one identity of the cluster (its kubeconfig), with a discovery cache of its own.
#[derive(Clone)]
struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str]) -> Output {
        self.run_quietly(args).expect("kubectl is required")
    }

    /// Runs kubectl, handing back a failure to start it rather than failing the test (for
    /// [`Created`]'s drop, which may run while the test is already failing).
    fn run_quietly(&self, args: &[&str]) -> std::io::Result<Output> {
        kubectl_at(&self.kubeconfig, &self.cache, args).output()
    }

    /// Runs kubectl; its stdout, or the test fails with its stderr.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            stderr(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs kubectl with `-o json` among `args`; the object it printed.
    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    /// `kubectl create -f` of `manifest` (written to `file`); the created object. An answer
    /// that something was not found, or that the node has no relationship with it, is asked
    /// again until the deadline: kube-apiserver's admission plugins and Node authorizer read
    /// objects from caches, which a moment ago did not hold the namespace, service account or
    /// pod just created.
    async fn create(&self, file: &Path, manifest: &Value) -> Value {
        std::fs::write(file, manifest.to_string()).unwrap();
        let file = file.to_str().unwrap();
        let deadline = Instant::now() + DEADLINE;
        loop {
            let out = self.run(&["create", "-o", "json", "-f", file]);
            if out.status.success() {
                return serde_json::from_slice(&out.stdout).unwrap();
            }
            let error = stderr(&out);
            let lagging = error.contains("not found") || error.contains("no relationship found");
            assert!(
                lagging && Instant::now() < deadline,
                "kubectl create {} failed: {error}",
                manifest["kind"]
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

/// What the test created in the cluster: each a `kubectl delete` (as the admin) run when this
/// is dropped, the test passed or failed, the last created first.
struct Created {
    admin: Kubectl,
    deletions: Vec<Vec<String>>,
}

impl Created {
    /// Deletes, at the end, what `kubectl delete <args>` names.
    fn delete_at_end(&mut self, args: &[&str]) {
        self.deletions
            .push(args.iter().map(|a| (*a).to_owned()).collect());
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        for args in self.deletions.iter().rev() {
            let mut command = vec!["delete", "--ignore-not-found"];
            command.extend(args.iter().map(String::as_str));
            let failed = match self.admin.run_quietly(&command) {
                Ok(out) if out.status.success() => continue,
                Ok(out) => stderr(&out),
                Err(e) => e.to_string(),
            };
            // Straight to the process's stderr, which the test harness does not capture: a
            // leftover must be seen even when the test passed.
            let _ = writeln!(
                std::io::stderr(),
                "cleanup: kubectl {command:?} failed ({failed}): delete it by hand"
            );
        }
    }
}

/// Polls `check` until it answers, at most [`DEADLINE`]; then fails with `what`, `last` (what
/// the cluster said last time) and, once it has started, warrant's log.
async fn wait_for<T>(
    what: &str,
    w: Option<&mut Warrant>,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match check() {
            Ok(answer) => return answer,
            Err(last) if Instant::now() >= deadline => {
                let log = w.map(|w| format!("\nwarrant's log:\n{}", w.log()));
                panic!(
                    "{what} did not happen within {DEADLINE:?}; last seen: {last}{}",
                    log.unwrap_or_default()
                );
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// The version of `certificates.k8s.io` whose PodCertificateRequests a kubelet would create:
/// `v1beta1` (1.35, 1.36), else `v1` (once v1beta1 is no longer served). Neither fails the
/// test with what the cluster answered.
fn pcr_version(admin: &Kubectl) -> &'static str {
    let mut answers = Vec::new();
    for version in ["v1beta1", "v1"] {
        let out = admin.run(&[
            "get",
            "--raw",
            &format!("/apis/certificates.k8s.io/{version}"),
        ]);
        if !out.status.success() {
            answers.push(format!("{version}: {}", stderr(&out)));
            continue;
        }
        let resources: Value = serde_json::from_slice(&out.stdout).unwrap();
        let served = resources["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["name"] == "podcertificaterequests"));
        if served {
            return version;
        }
        answers.push(format!("{version}: no podcertificaterequests"));
    }
    panic!(
        "the cluster of {VARIABLE} serves no PodCertificateRequest API ({}): turn on the feature \
         gates and the runtime config that docs/pod-certificates.md names",
        answers.join("; ")
    )
}

/// A client certificate for node `node` as its kubelet gets one, and a kubeconfig for it next to
/// the key in `dir`; the CSR is deleted at the end.
async fn node_kubeconfig(
    admin: &Kubectl,
    created: &mut Created,
    dir: &Path,
    node: &str,
    csr_name: &str,
) -> Kubectl {
    crate::pki::openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "node.key",
            "-out",
            "node.csr",
            "-subj",
            &format!("/O=system:nodes/CN=system:node:{node}"),
        ],
    );
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    created.delete_at_end(&["csr", csr_name]);
    admin
        .create(
            &dir.join("csr.json"),
            &json!({
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "CertificateSigningRequest",
                "metadata": {"name": csr_name},
                "spec": {
                    "request": b64(&std::fs::read(dir.join("node.csr")).unwrap()),
                    "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                    "usages": ["digital signature", "client auth"],
                    "expirationSeconds": 600,
                },
            }),
        )
        .await;
    admin.ok(&["certificate", "approve", csr_name]);
    let certificate = wait_for(
        "kube-controller-manager signing the node's CSR",
        None,
        || {
            let csr = admin.json(&["get", "csr", csr_name, "-o", "json"]);
            if let Some(refused) = csr["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] != "Approved"))
            {
                panic!("the node's CSR was not signed: {refused}");
            }
            match csr["status"]["certificate"].as_str() {
                Some(certificate) if !certificate.is_empty() => Ok(certificate.to_owned()),
                _ => Err(csr["status"].to_string()),
            }
        },
    )
    .await;
    // The admin kubeconfig's cluster (server, CA, TLS server name), its files read in.
    let view = admin.json(&[
        "config",
        "view",
        "--raw",
        "--minify",
        "--flatten",
        "-o",
        "json",
    ]);
    let cluster = view["clusters"][0]["cluster"].clone();
    assert!(cluster.is_object(), "no cluster in {VARIABLE}'s kubeconfig");
    let user = format!("system:node:{node}");
    let kubeconfig = dir.join("node.kubeconfig");
    std::fs::write(
        &kubeconfig,
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "live", "cluster": cluster}],
            "users": [{"name": user, "user": {
                "client-certificate-data": certificate,
                "client-key-data": b64(&std::fs::read(dir.join("node.key")).unwrap()),
            }}],
            "contexts": [{"name": "node", "context": {"cluster": "live", "user": user}}],
            "current-context": "node",
        })
        .to_string(),
    )
    .unwrap();
    let node = Kubectl {
        kubeconfig,
        cache: dir.join("node-cache"),
    };
    let whoami = node.json(&["auth", "whoami", "-o", "json"]);
    assert_eq!(whoami["status"]["userInfo"]["username"], user, "{whoami}");
    node
}

// Multi-threaded: kubectl and openssl run synchronously on the test thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_request_is_issued_and_verifies_against_the_trust_bundle() {
    let Some(admin_kubeconfig) = std::env::var_os(VARIABLE).filter(|v| !v.is_empty()) else {
        // Straight to the process's stderr, which the test harness does not capture.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: set {VARIABLE}=<admin kubeconfig> to run against a real kube-apiserver \
             (needs a disposable kind or kubeadm cluster, Kubernetes 1.35 or later, with the \
             PodCertificateRequest, ClusterTrustBundle and ClusterTrustBundleProjection feature \
             gates and --runtime-config=certificates.k8s.io/v1beta1=true on kube-apiserver: \
             docs/pod-certificates.md)"
        );
        return;
    };
    let admin_kubeconfig = std::path::absolute(admin_kubeconfig).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let admin = Kubectl {
        kubeconfig: admin_kubeconfig.clone(),
        cache: dir.join("admin-cache"),
    };
    let mut created = Created {
        admin: admin.clone(),
        deletions: Vec::new(),
    };
    let version = pcr_version(&admin);
    let suffix = warrant_token::new_jti()[..8].to_owned();
    let namespace = format!("warrant-live-{suffix}");

    let nodes = admin.json(&["get", "nodes", "-o", "json"]);
    let node = nodes["items"]
        .get(0)
        .unwrap_or_else(|| panic!("the cluster has no node"));
    let node_name = node["metadata"]["name"].as_str().unwrap().to_owned();
    let node_uid = node["metadata"]["uid"].as_str().unwrap().to_owned();

    // The pod and its service account.
    created.delete_at_end(&["namespace", &namespace, "--wait=false"]);
    admin
        .create(
            &dir.join("namespace.json"),
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        )
        .await;
    let sa = admin
        .create(
            &dir.join("sa.json"),
            &json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "app", "namespace": namespace},
            }),
        )
        .await;
    let sa_uid = sa["metadata"]["uid"].as_str().unwrap().to_owned();
    // Pinned to the node past the scheduler and every taint; acceptable to the `restricted`
    // Pod Security level, should the cluster enforce it.
    let pod = admin
        .create(
            &dir.join("pod.json"),
            &json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "app-0", "namespace": namespace},
                "spec": {
                    "nodeName": node_name,
                    "serviceAccountName": "app",
                    "automountServiceAccountToken": false,
                    "tolerations": [{"operator": "Exists"}],
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": 65535,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                },
            }),
        )
        .await;
    let pod_uid = pod["metadata"]["uid"].as_str().unwrap().to_owned();

    let node = node_kubeconfig(
        &admin,
        &mut created,
        dir,
        &node_name,
        &format!("warrant-live-{suffix}"),
    )
    .await;

    // warrant, with the admin's credentials. Its trust bundle goes at the end, after warrant
    // (declared later, so dropped first) has stopped.
    created.delete_at_end(&[
        "clustertrustbundles",
        "-l",
        "app.kubernetes.io/managed-by=warrant",
        "--field-selector",
        &format!("spec.signerName={SIGNER}"),
    ]);
    let pod_ca = PodCa::new();
    let flags = pod_ca.flags_for(
        SIGNER,
        &[
            "--pod-certificate-trust-domain",
            TRUST_DOMAIN,
            "--audit-log-path",
            "{dir}/audit.log",
        ],
    );
    let mut w = Warrant::start_kubeconfig(&admin_kubeconfig, &refs(&flags)).await;

    // The node asks, as its kubelet would for a `podCertificate` volume of the pod.
    let request = pod_certificate_request(
        pod_ca.path(),
        &format!("certificates.k8s.io/{version}"),
        json!({
            "generateName": "req-",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "app-0", "uid": pod_uid}],
        }),
        SIGNER,
        &Requester {
            namespace: &namespace,
            pod: ("app-0", &pod_uid),
            service_account: ("app", &sa_uid),
            node: (&node_name, &node_uid),
        },
    );
    let request = node.create(&dir.join("pcr.json"), &request).await;
    let pcr_name = request["metadata"]["name"].as_str().unwrap().to_owned();
    let pcr_uid = request["metadata"]["uid"].as_str().unwrap().to_owned();

    // warrant answers.
    let resource = format!("podcertificaterequests.{version}.certificates.k8s.io");
    let answered = wait_for("warrant answering the PCR", Some(&mut w), || {
        let pcr = admin.json(&["get", &resource, "-n", &namespace, &pcr_name, "-o", "json"]);
        match condition(&pcr) {
            Some(_) => Ok(pcr),
            None => Err(pcr.to_string()),
        }
    })
    .await;
    assert_eq!(
        condition(&answered),
        Some(("Issued".to_owned(), "Issued".to_owned())),
        "{answered}\nwarrant's log:\n{}",
        w.log()
    );

    // The chain verifies against the roots a pod's `clusterTrustBundle` source selects.
    let bundle = wait_for("warrant's ClusterTrustBundle", Some(&mut w), || {
        let bundles = admin.json(&[
            "get",
            "clustertrustbundles",
            "-l",
            "warrant.dev/trust-bundle=live",
            "-o",
            "json",
        ]);
        let ours: Vec<&Value> = bundles["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["spec"]["signerName"] == SIGNER)
            .collect();
        match ours[..] {
            [bundle] => Ok(bundle["spec"]["trustBundle"].as_str().unwrap().to_owned()),
            _ => Err(format!("{} bundles for {SIGNER}", ours.len())),
        }
    })
    .await;
    let spiffe_id = format!("spiffe://{TRUST_DOMAIN}/ns/{namespace}/sa/app");
    let chain = answered["status"]["certificateChain"].as_str().unwrap();
    let pod_key = check_leaf(pod_ca.path(), chain, &bundle, &spiffe_id);

    // The audit trail: the PCR's one lasting record.
    let audit_log = w.path("audit.log");
    let issued = || {
        pod_certificate_events(&audit_log)
            .into_iter()
            .find(|e| e["decision"] == "issued" && e["podCertificate"]["name"] == pcr_name)
    };
    w.eventually("the audit event of the certificate", || issued().is_some())
        .await;
    let event = issued().unwrap();
    let audited = &event["podCertificate"];
    assert_eq!(audited["signerName"], SIGNER, "{event}");
    assert_eq!(audited["namespace"], namespace, "{event}");
    assert_eq!(audited["uid"], pcr_uid, "{event}");
    assert_eq!(audited["pod"]["name"], "app-0", "{event}");
    assert_eq!(audited["pod"]["uid"], pod_uid, "{event}");
    assert_eq!(audited["node"]["name"], node_name, "{event}");
    assert_eq!(audited["node"]["uid"], node_uid, "{event}");
    assert_eq!(event["serviceAccount"]["uid"], sa_uid, "{event}");
    assert_eq!(audited["spiffeID"], spiffe_id, "{event}");
    assert_eq!(
        audited["serialNumber"]
            .as_str()
            .unwrap()
            .trim_start_matches('0'),
        serial(pod_ca.path(), "leaf.pem"),
        "{event}"
    );
    let audit = std::fs::read_to_string(&audit_log).unwrap();
    for line in pod_key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!audit.contains(line), "the pod's key is in the audit log");
    }
}
