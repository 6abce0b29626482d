//! `warrant serve --pod-certificate-signer` against the loopback Kubernetes fixture serving
//! PodCertificateRequests as kube-apiserver v1.36 does: a CA made with openssl, as an operator
//! makes one; a PCR as a kubelet creates it (a key and CSR from openssl, the CSR asking for a
//! CN that must not reach the certificate); the leaf checked by openssl against the root that
//! warrant published in the ClusterTrustBundle; a forged PCR denied; the audit trail; and a CA
//! rotated in place reaching the trust bundle.

use std::path::Path;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use warrant_kube_fixture::podcert::{cluster_trust_bundles, pod_certificate_requests};
use warrant_kube_fixture::{Fixture, ResourceType};
use warrant_testkit::{NODE_UID, POD_UID, SA_UID};

use crate::pki::openssl;
use crate::support::*;

pub(crate) const SIGNER: &str = "warrant.example.com/spiffe";

/// The fixture serving PCRs (1.36's version), with the standard pod, service account and node.
pub(crate) async fn cluster() -> Fixture {
    let cluster = Fixture::start().await.unwrap();
    cluster.serve_pod_certificates("v1beta1");
    create_standard_objects(&cluster, None);
    cluster
}

/// A CA made with openssl (`pod-ca.crt`, `pod-ca.key`) in a directory of its own, where the
/// tests also keep the pods' keys and what they check with openssl.
pub(crate) struct PodCa {
    dir: tempfile::TempDir,
}

impl PodCa {
    pub(crate) fn new() -> PodCa {
        let dir = tempfile::tempdir().unwrap();
        crate::pki::ca(dir.path(), "pod-ca");
        PodCa { dir }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, name: &str) -> String {
        self.path().join(name).display().to_string()
    }

    /// `serve`'s flags for signing with this CA as [`SIGNER`], then `extra`.
    fn flags(&self, extra: &[&str]) -> Vec<String> {
        self.flags_for(SIGNER, extra)
    }

    /// `serve`'s flags for signing with this CA as `signer`, then `extra`.
    pub(crate) fn flags_for(&self, signer: &str, extra: &[&str]) -> Vec<String> {
        let mut flags = vec![
            "--pod-certificate-signer".to_owned(),
            signer.to_owned(),
            "--pod-certificate-ca-cert-file".to_owned(),
            self.file("pod-ca.crt"),
            "--pod-certificate-ca-key-file".to_owned(),
            self.file("pod-ca.key"),
        ];
        flags.extend(extra.iter().map(|f| (*f).to_owned()));
        flags
    }
}

pub(crate) fn refs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

/// Waits until PCR `demo/name` has a condition (warrant answered it); fails with warrant's log.
pub(crate) async fn answered(w: &mut Warrant, cluster: &Fixture, name: &str) -> Value {
    let pcrs = pod_certificate_requests("v1beta1");
    for _ in 0..400 {
        if let Some(pcr) = cluster.get_json(pcrs, "demo", name)
            && condition(&pcr).is_some()
        {
            return pcr;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("PCR {name} not answered; warrant's log:\n{}", w.log());
}

/// Creates a kubelet's PCR `demo/name` for the standard pod (its key and CSR in `dir`, see
/// [`pcr`]) and waits until warrant answers it: `Issued`, or the test fails with the PCR.
pub(crate) async fn issue(w: &mut Warrant, cluster: &Fixture, dir: &Path, name: &str) -> Value {
    cluster
        .create_json(pod_certificate_requests("v1beta1"), pcr(dir, name, POD_UID))
        .unwrap();
    let issued = answered(w, cluster, name).await;
    assert_eq!(
        condition(&issued),
        Some(("Issued".to_owned(), "Issued".to_owned())),
        "{name}: {issued}"
    );
    issued
}

/// What a PCR names: the pod's namespace, then the pod, its service account and its node, each
/// as (name, UID).
pub(crate) struct Requester<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) pod: (&'a str, &'a str),
    pub(crate) service_account: (&'a str, &'a str),
    pub(crate) node: (&'a str, &'a str),
}

/// A PCR of `api_version` (`certificates.k8s.io/v1beta1` or `/v1`) for `requester`'s pod and
/// `signer`, as its kubelet creates it, with `metadata` (a name or `generateName`, owner
/// references; the namespace is the requester's): a fresh P-256 key (`pod.key` in `dir`) and its
/// stub CSR, whose subject `CN=admin` must not reach the certificate; at most two hours.
pub(crate) fn pod_certificate_request(
    dir: &Path,
    api_version: &str,
    mut metadata: Value,
    signer: &str,
    requester: &Requester<'_>,
) -> Value {
    openssl(
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
            "pod.key",
            "-subj",
            "/CN=admin",
            "-outform",
            "DER",
            "-out",
            "pod.csr",
        ],
    );
    let csr = std::fs::read(dir.join("pod.csr")).unwrap();
    metadata["namespace"] = json!(requester.namespace);
    json!({
        "apiVersion": api_version,
        "kind": "PodCertificateRequest",
        "metadata": metadata,
        "spec": {
            "signerName": signer,
            "podName": requester.pod.0,
            "podUID": requester.pod.1,
            "serviceAccountName": requester.service_account.0,
            "serviceAccountUID": requester.service_account.1,
            "nodeName": requester.node.0,
            "nodeUID": requester.node.1,
            "maxExpirationSeconds": 7200,
            "stubPKCS10Request": base64::engine::general_purpose::STANDARD.encode(csr),
        },
    })
}

/// A PCR for pod `demo/app-0` as its kubelet on node-1 would create it (see
/// [`pod_certificate_request`]); `pod_uid` as given.
pub(crate) fn pcr(dir: &Path, name: &str, pod_uid: &str) -> Value {
    pod_certificate_request(
        dir,
        "certificates.k8s.io/v1beta1",
        json!({"name": name}),
        SIGNER,
        &Requester {
            namespace: "demo",
            pod: ("app-0", pod_uid),
            service_account: ("app", SA_UID),
            node: ("node-1", NODE_UID),
        },
    )
}

/// The PCR's condition, as (type, reason), once it has one.
pub(crate) fn condition(pcr: &Value) -> Option<(String, String)> {
    let condition = pcr.pointer("/status/conditions/0")?;
    Some((
        condition["type"].as_str()?.to_owned(),
        condition["reason"].as_str()?.to_owned(),
    ))
}

/// Checks an issued PCR's chain as a peer of the pod would, with openssl in `dir` (where
/// [`pod_certificate_request`] left `pod.key`): the leaf (`leaf.pem`, the chain) verifies for
/// client use against `trust_bundle` (`published.pem`, the roots of the ClusterTrustBundle), the
/// URI SAN `spiffe_id` is its one identity and nothing of the CSR's subject reached it, and its
/// key is the pod's. Returns the pod's public key (PEM).
pub(crate) fn check_leaf(dir: &Path, chain: &str, trust_bundle: &str, spiffe_id: &str) -> String {
    check_leaf_names(dir, chain, trust_bundle, &[format!("URI:{spiffe_id}")])
}

/// [`check_leaf`] for a leaf whose SANs, as openssl prints them, are `sans` in that order.
pub(crate) fn check_leaf_names(
    dir: &Path,
    chain: &str,
    trust_bundle: &str,
    sans: &[String],
) -> String {
    std::fs::write(dir.join("leaf.pem"), chain).unwrap();
    std::fs::write(dir.join("published.pem"), trust_bundle).unwrap();
    let verified = openssl(
        dir,
        &[
            "verify",
            "-CAfile",
            "published.pem",
            "-untrusted",
            "leaf.pem",
            "-purpose",
            "sslclient",
            "leaf.pem",
        ],
    );
    assert!(verified.contains("leaf.pem: OK"), "{verified}");
    let text = openssl(
        dir,
        &[
            "x509",
            "-in",
            "leaf.pem",
            "-noout",
            "-subject",
            "-ext",
            "subjectAltName",
        ],
    );
    let found: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("X509v3 Subject Alternative Name"))
        .skip(1)
        .flat_map(|l| l.split(", "))
        .map(str::trim)
        .collect();
    assert_eq!(found, sans, "{text}");
    assert!(
        !text.contains("admin"),
        "the CSR's CN reached the certificate: {text}"
    );
    let leaf_key = openssl(dir, &["x509", "-in", "leaf.pem", "-noout", "-pubkey"]);
    let pod_key = openssl(dir, &["pkey", "-in", "pod.key", "-pubout"]);
    assert_eq!(
        leaf_key, pod_key,
        "the certificate is not for the pod's key"
    );
    pod_key
}

/// The serial number of the certificate in `file` (in `dir`): lowercase hex without leading
/// zeros, as an audit event's `serialNumber` compares once its own are trimmed.
pub(crate) fn serial(dir: &Path, file: &str) -> String {
    let serial = openssl(dir, &["x509", "-in", file, "-noout", "-serial"]);
    serial
        .trim()
        .trim_start_matches("serial=")
        .to_ascii_lowercase()
        .trim_start_matches('0')
        .to_owned()
}

/// The `PodCertificate` events of the audit log at `path`, in order (none while it is not
/// written yet).
pub(crate) fn pod_certificate_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["kind"] == "PodCertificate")
        .collect()
}

pub(crate) fn trust_bundle(cluster: &Fixture) -> Option<String> {
    cluster
        .get_json(
            cluster_trust_bundles(),
            "",
            "warrant.example.com:spiffe:live",
        )
        .and_then(|b| b.pointer("/spec/trustBundle")?.as_str().map(str::to_owned))
}

pub(crate) fn pem_count(text: &str) -> usize {
    text.matches("-----BEGIN CERTIFICATE-----").count()
}

// Multi-threaded: openssl runs synchronously on the test thread while the fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_certificates_that_verify_against_the_published_root() {
    let cluster = cluster().await;
    let pod_ca = PodCa::new();
    let ca = pod_ca.path();
    let cert = pod_ca.file("pod-ca.crt");
    let bundle = pod_ca.file("previous.crt");
    std::fs::write(&bundle, "").unwrap();
    let flags = pod_ca.flags(&[
        "--pod-certificate-ca-bundle-file",
        &bundle,
        "--audit-log-path",
        "{dir}/audit.log",
    ]);
    let mut w = Warrant::start_cluster(&cluster, &refs(&flags)).await;
    let pcrs = pod_certificate_requests("v1beta1");

    // The root is published for pods to trust.
    w.eventually("the ClusterTrustBundle", || {
        trust_bundle(&cluster).is_some()
    })
    .await;
    let root = std::fs::read_to_string(&cert).unwrap();
    assert_eq!(trust_bundle(&cluster).unwrap().trim(), root.trim());

    // A kubelet's PCR: issued, with the SPIFFE ID alone.
    let issued = issue(&mut w, &cluster, ca, "app-0-cert").await;
    let chain = issued["status"]["certificateChain"].as_str().unwrap();
    let pod_key = check_leaf(
        ca,
        chain,
        &trust_bundle(&cluster).unwrap(),
        "spiffe://cluster.local/ns/demo/sa/app",
    );

    // Outside the cluster: the SPIFFE bundle holds the same root (for X.509-SVIDs) and the
    // JWKS's keys (for JWT-SVIDs).
    let spiffe: Value =
        serde_json::from_str(&w.get_as_admin("/.well-known/spiffe-bundle").await).unwrap();
    let jwks: Value = serde_json::from_str(&w.get_as_admin("/openid/v1/jwks").await).unwrap();
    let x509: Vec<&Value> = spiffe["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["use"] == "x509-svid")
        .collect();
    assert_eq!(x509.len(), 1, "{spiffe}");
    let root_der = openssl(
        ca,
        &[
            "x509",
            "-in",
            "published.pem",
            "-outform",
            "DER",
            "-out",
            "root.der",
        ],
    );
    assert!(root_der.is_empty());
    assert_eq!(
        x509[0]["x5c"][0],
        base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(ca.join("root.der")).unwrap())
    );
    let jwt_kids: Vec<&Value> = spiffe["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["use"] == "jwt-svid")
        .map(|k| &k["kid"])
        .collect();
    let kids: Vec<&Value> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["kid"])
        .collect();
    assert_eq!(jwt_kids, kids);

    // A PCR naming the pod with another UID (a forged or stale request): denied.
    cluster
        .create_json(pcrs, pcr(ca, "forged", "0000-not-the-pod"))
        .unwrap();
    let forged = answered(&mut w, &cluster, "forged").await;
    let (kind, reason) = condition(&forged).unwrap();
    assert_eq!(kind, "Denied", "{forged}");
    assert!(reason.starts_with("Pod"), "{forged}");
    assert!(forged["status"].get("certificateChain").is_none());

    // The audit trail: one event per decision, the certificate's serial and the pod's UID,
    // never the key.
    let events = || pod_certificate_events(&w.path("audit.log"));
    w.eventually("both decisions in the audit log", || events().len() >= 2)
        .await;
    let audit = std::fs::read_to_string(w.path("audit.log")).unwrap();
    let events = events();
    let decisions: Vec<&str> = events
        .iter()
        .map(|e| e["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["issued", "denied"], "{audit}");
    assert_eq!(
        events[0]["podCertificate"]["serialNumber"]
            .as_str()
            .unwrap()
            .trim_start_matches('0'),
        serial(ca, "leaf.pem")
    );
    assert_eq!(events[0]["podCertificate"]["pod"]["uid"], POD_UID);
    assert_eq!(events[0]["serviceAccount"]["uid"], SA_UID);
    for line in pod_key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!audit.contains(line), "the pod's key is in the audit log");
    }
    assert_eq!(
        w.metric(&format!(
            "warrant_podcert_decisions_total{{signer=\"{SIGNER}\",result=\"issued\",reason=\"\"}}"
        ))
        .await,
        1.0
    );

    // The CA rotated in place, the old root kept in the bundle file: both are published.
    std::fs::rename(ca.join("pod-ca.crt"), &bundle).unwrap();
    crate::pki::ca(ca, "pod-ca");
    w.eventually("the new root beside the old", || {
        trust_bundle(&cluster).is_some_and(|b| pem_count(&b) == 2)
    })
    .await;
    let published = trust_bundle(&cluster).unwrap();
    let new_root = std::fs::read_to_string(&cert).unwrap();
    assert!(
        published.starts_with(new_root.trim()),
        "the signing root comes first"
    );
    let spiffe: Value =
        serde_json::from_str(&w.get_as_admin("/.well-known/spiffe-bundle").await).unwrap();
    let roots = spiffe["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["use"] == "x509-svid")
        .count();
    assert_eq!(roots, 2, "the SPIFFE bundle follows the rotation: {spiffe}");

    // CA files that change into something unusable keep the CA in force: readiness holds, and
    // /readyz?verbose says why.
    std::fs::write(ca.join("pod-ca.key"), "not a key\n").unwrap();
    let mut verbose = String::new();
    for _ in 0..400 {
        verbose = w.get_as_admin("/readyz?verbose").await;
        if verbose.contains("do not load") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        verbose.contains("pod-certificate-ca the CA files changed but do not load"),
        "{verbose}"
    );
    assert!(verbose.contains("[+]pod-certificates ok"), "{verbose}");
}

/// An audit log that cannot be written (`/dev/full`, blocking mode): the certificate is not
/// handed out unrecorded, and the PCR is left without a condition (a Failed one would stop
/// the kubelet asking again), to be decided once the log can be written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_audit_log_leaves_the_request_waiting() {
    let cluster = cluster().await;
    let pod_ca = PodCa::new();
    let ca = pod_ca.path();
    let flags = pod_ca.flags(&["--audit-log-path", "/dev/full"]);
    let w = Warrant::start_cluster_unready(&cluster, &refs(&flags)).await;
    let pcrs = pod_certificate_requests("v1beta1");
    cluster
        .create_json(pcrs, pcr(ca, "app-0-cert", POD_UID))
        .unwrap();
    let sample = format!(
        "warrant_podcert_decisions_total{{signer=\"{SIGNER}\",result=\"requeued\",reason=\"AuditUnavailable\"}}"
    );
    for _ in 0..400 {
        if w.metric(&sample).await >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(w.metric(&sample).await >= 1.0, "{}", w.metrics_text().await);
    let waiting = cluster.get_json(pcrs, "demo", "app-0-cert").unwrap();
    assert_eq!(condition(&waiting), None, "{waiting}");
    assert!(waiting["status"].get("certificateChain").is_none());
}

/// Two replicas with the same CA race for every PCR: each is answered once (kube keeps the
/// first status; the other write is refused `409`), and the loser records a lost race, not
/// an error. A pod deleted after the PCR was made is read live, not from a cache: denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_answer_each_request_once() {
    let cluster = cluster().await;
    let pod_ca = PodCa::new();
    let ca = pod_ca.path();
    let flags = pod_ca.flags(&["--audit-log-path", "{dir}/audit.log"]);
    let mut replicas = [
        Warrant::start_cluster(&cluster, &refs(&flags)).await,
        Warrant::start_cluster(&cluster, &refs(&flags)).await,
    ];
    let pcrs = pod_certificate_requests("v1beta1");
    const N: usize = 12;
    for i in 0..N {
        cluster
            .create_json(pcrs, pcr(ca, &format!("race-{i}"), POD_UID))
            .unwrap();
    }
    let all_answered = || {
        (0..N).all(|i| {
            cluster
                .get_json(pcrs, "demo", &format!("race-{i}"))
                .and_then(|p| condition(&p))
                .is_some()
        })
    };
    replicas[0]
        .eventually("every PCR answered", all_answered)
        .await;
    for i in 0..N {
        let answered = cluster
            .get_json(pcrs, "demo", &format!("race-{i}"))
            .unwrap();
        assert_eq!(condition(&answered).unwrap().0, "Issued", "{answered}");
    }
    // Every decision is in one replica's audit log or the other's: N issued that were stored,
    // and for each issued one that was not, a lost race.
    let decisions = |w: &Warrant, decision: &str| {
        std::fs::read_to_string(w.path("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["kind"] == "PodCertificate" && e["decision"] == decision)
            .count()
    };
    let count =
        |decision: &str| decisions(&replicas[0], decision) + decisions(&replicas[1], decision);
    replicas[0]
        .eventually("the audit logs to account for every decision", || {
            count("issued") == N + count("lostRace")
        })
        .await;

    // The pod goes; a PCR for it made afterwards (a kubelet a moment behind) is denied.
    cluster
        .delete::<k8s_openapi::api::core::v1::Pod>("demo", "app-0")
        .unwrap();
    cluster
        .create_json(pcrs, pcr(ca, "after-deletion", POD_UID))
        .unwrap();
    let denied = answered(&mut replicas[0], &cluster, "after-deletion").await;
    assert_eq!(
        condition(&denied),
        Some(("Denied".to_owned(), "PodNotFound".to_owned())),
        "{denied}"
    );
}

/// A Service `demo/name` selecting pods by `selector`.
fn service(name: &str, selector: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some("demo".to_owned()),
            name: Some(name.to_owned()),
            uid: Some(format!("{name}-uid")),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(
                selector
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signer_with_dns_names_gives_those_of_the_services_that_select_the_pod() {
    let cluster = cluster().await;
    cluster.register(ResourceType::of::<Service>());
    // The standard pod `demo/app-0` is labelled app=app: `web` selects it; `db` selects other
    // pods, `manual` none (its endpoints are whoever's choice).
    cluster.create(&service("web", &[("app", "app")])).unwrap();
    cluster.create(&service("db", &[("app", "db")])).unwrap();
    cluster.create(&service("manual", &[])).unwrap();
    let pod_ca = PodCa::new();
    let ca = pod_ca.path();
    let policy = ca.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "apiVersion: warrant.dev/v1alpha1\nkind: AuthorizationPolicy\npodCertificates:\n  \
             trustDomain: cluster.local\n  signers:\n  - signerName: {SIGNER}\n    \
             namespaces: [demo]\n    dnsNames:\n    - \"${{service}}.${{namespace}}.svc\"\n    \
             - \"${{service}}.${{namespace}}.svc.cluster.local\"\n"
        ),
    )
    .unwrap();
    let flags = pod_ca.flags(&["--authorization-policy-file", policy.to_str().unwrap()]);
    let mut w = Warrant::start_cluster(&cluster, &refs(&flags)).await;
    w.eventually("the ClusterTrustBundle", || {
        trust_bundle(&cluster).is_some()
    })
    .await;

    let issued = issue(&mut w, &cluster, ca, "app-0-cert").await;
    let chain = issued["status"]["certificateChain"].as_str().unwrap();
    let bundle = trust_bundle(&cluster).unwrap();
    check_leaf_names(
        ca,
        chain,
        &bundle,
        &[
            "URI:spiffe://cluster.local/ns/demo/sa/app".to_owned(),
            "DNS:web.demo.svc".to_owned(),
            "DNS:web.demo.svc.cluster.local".to_owned(),
        ],
    );
    // A peer that checks the server's name accepts it for the Service's name, not another's.
    let verify = |host: &str| {
        let out = warrant_testkit::tools::command("openssl", "the openssl command")
            .args([
                "verify",
                "-CAfile",
                "published.pem",
                "-purpose",
                "sslserver",
                "-verify_hostname",
                host,
                "leaf.pem",
            ])
            .current_dir(ca)
            .output()
            .expect("openssl is required");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        out.status.success() && text.contains("leaf.pem: OK")
    };
    assert!(verify("web.demo.svc.cluster.local"));
    assert!(!verify("db.demo.svc.cluster.local"));
}
