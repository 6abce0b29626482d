//! PodCertificateRequests and ClusterTrustBundles as kube-apiserver v1.36.2 answered a signer
//! (messages from shared/spec/vectors/pod-certificates/), and discovery listing them.

use serde_json::{Value, json};
use warrant_kube_fixture::Fixture;
use warrant_kube_fixture::podcert::{cluster_trust_bundles, pod_certificate_requests};

use super::{Client, rv};

const PCRS: &str = "/apis/certificates.k8s.io/v1beta1/podcertificaterequests";
const DEMO: &str = "/apis/certificates.k8s.io/v1beta1/namespaces/demo/podcertificaterequests";
const BUNDLES: &str = "/apis/certificates.k8s.io/v1beta1/clustertrustbundles";
const SIGNER: &str = "warrant.example.com/spiffe";

fn pcr(namespace: &str, name: &str, signer: &str, node: &str) -> Value {
    json!({
        "metadata": { "name": name, "namespace": namespace },
        "spec": { "signerName": signer, "podName": format!("pod-{name}"), "nodeName": node },
        "status": {},
    })
}

async fn fixture() -> Fixture {
    let fixture = Fixture::start().await.unwrap();
    fixture.serve_pod_certificates("v1beta1");
    let info = pod_certificate_requests("v1beta1");
    fixture
        .create_json(info, pcr("demo", "a", SIGNER, "node1"))
        .unwrap();
    fixture
        .create_json(info, pcr("demo", "b", "other.example.com/x", "node1"))
        .unwrap();
    fixture
        .create_json(info, pcr("prod", "c", SIGNER, "node2"))
        .unwrap();
    fixture
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn pcrs_are_selected_by_signer_node_and_pod_and_other_field_labels_are_refused() {
    let fixture = fixture().await;
    let client = Client::new(&fixture);
    for (path, selector, expected) in [
        (
            PCRS,
            "spec.signerName=warrant.example.com/spiffe",
            vec!["a", "c"],
        ),
        (
            DEMO,
            "spec.signerName=warrant.example.com/spiffe",
            vec!["a"],
        ),
        (PCRS, "spec.nodeName=node1", vec!["a", "b"]),
        (PCRS, "spec.podName=pod-c", vec!["c"]),
        (
            PCRS,
            "spec.signerName!=warrant.example.com/spiffe",
            vec!["b"],
        ),
        (PCRS, "metadata.namespace=prod", vec!["c"]),
    ] {
        let query: String = url_encode(selector);
        let (code, list) = client.get(&format!("{path}?fieldSelector={query}")).await;
        assert_eq!(code, 200, "{selector}");
        assert_eq!(names(&list), expected, "{selector}");
    }
    for label in ["spec.serviceAccountName", "spec.podUID", "status.phase"] {
        let (code, status) = client
            .get(&format!("{PCRS}?fieldSelector={label}%3Dx"))
            .await;
        assert_eq!(code, 400);
        assert_eq!(
            status["message"],
            format!("field label not supported: {label}")
        );
    }
}

fn url_encode(value: &str) -> String {
    value
        .replace('=', "%3D")
        .replace('/', "%2F")
        .replace('!', "%21")
}

#[tokio::test]
async fn status_writes_need_the_current_resource_version_and_change_only_the_status() {
    let fixture = fixture().await;
    let client = Client::new(&fixture);
    let (_, current) = client.get(&format!("{DEMO}/a")).await;
    let issued = json!({ "conditions": [{ "type": "Issued", "status": "True", "reason": "Issued",
        "lastTransitionTime": "2026-11-27T17:17:09Z" }] });

    let mut unversioned = current.clone();
    unversioned["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    unversioned["status"] = issued.clone();
    let (code, status) = client.put(&format!("{DEMO}/a/status"), &unversioned).await;
    assert_eq!((code, &status["reason"]), (422, &json!("Invalid")));
    assert_eq!(
        status["message"],
        "podcertificaterequests.certificates.k8s.io \"a\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );

    let mut stale = current.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    stale["status"] = issued.clone();
    let (code, status) = client.put(&format!("{DEMO}/a/status"), &stale).await;
    assert_eq!(code, 409);
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on podcertificaterequests.certificates.k8s.io \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Spec and labels sent to /status are dropped; the status lands.
    let mut write = current.clone();
    write["status"] = issued.clone();
    write["spec"]["podName"] = json!("forged");
    write["metadata"]["labels"] = json!({ "x": "y" });
    let (code, stored) = client.put(&format!("{DEMO}/a/status"), &write).await;
    assert_eq!(code, 200);
    assert_eq!(stored["spec"]["podName"], "pod-a");
    assert!(stored["metadata"].get("labels").is_none());
    assert_eq!(stored["status"], issued);
    assert!(rv(&stored) > rv(&current));

    // Terminal now: no further change, by PUT or merge patch.
    let mut again = stored.clone();
    again["status"] = json!({ "conditions": [{ "type": "Denied", "status": "True",
        "reason": "X", "lastTransitionTime": "2026-11-27T17:17:09Z" }] });
    let (code, status) = client.put(&format!("{DEMO}/a/status"), &again).await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "PodCertificateRequest.certificates.k8s.io \"a\" is invalid: status: Invalid value: immutable after PodCertificateRequest is issued, denied, or failed"
    );
    let patch = client
        .http
        .patch(format!("{}{DEMO}/a/status", client.base))
        .header("content-type", "application/merge-patch+json")
        .body(json!({ "status": { "notBefore": "2026-11-27T17:16:09Z" } }).to_string());
    let (code, _) = client.send(patch).await;
    assert_eq!(code, 422);
}

#[tokio::test]
async fn a_merge_patch_sets_the_status_and_the_main_resource_keeps_it() {
    let fixture = fixture().await;
    let client = Client::new(&fixture);
    let denied = json!({ "conditions": [{ "type": "Denied", "status": "True",
        "reason": "UnsupportedKeyType", "lastTransitionTime": "2026-11-27T17:17:09Z" }] });
    let patch = client
        .http
        .patch(format!("{}{DEMO}/a/status", client.base))
        .header("content-type", "application/merge-patch+json")
        .body(json!({ "status": denied, "spec": { "podName": "forged" } }).to_string());
    let (code, stored) = client.send(patch).await;
    assert_eq!(code, 200);
    assert_eq!(
        (&stored["status"], &stored["spec"]["podName"]),
        (&denied, &json!("pod-a"))
    );

    // A PUT of the main resource cannot change the status; a create starts with none.
    let mut replaced = stored.clone();
    replaced["status"] = json!({});
    let (code, after) = client.put(&format!("{DEMO}/a"), &replaced).await;
    assert_eq!((code, &after["status"]), (200, &denied));
    let mut created = pcr("demo", "new", SIGNER, "node1");
    created["status"] = denied.clone();
    let (code, after) = client.post(DEMO, &created).await;
    assert_eq!((code, &after["status"]), (201, &json!({})));
}

#[tokio::test]
async fn discovery_lists_what_is_served_and_nothing_else() {
    let fixture = fixture().await;
    let client = Client::new(&fixture);
    let (code, groups) = client.get("/apis").await;
    assert_eq!(code, 200);
    let certificates = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "certificates.k8s.io")
        .unwrap();
    assert_eq!(certificates["preferredVersion"]["version"], "v1beta1");
    let (code, list) = client.get("/apis/certificates.k8s.io/v1beta1").await;
    assert_eq!(code, 200);
    let served: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for name in [
        "podcertificaterequests",
        "podcertificaterequests/status",
        "clustertrustbundles",
    ] {
        assert!(served.contains(&name), "{name}: {served:?}");
    }
    assert_eq!(client.get("/apis/certificates.k8s.io/v1").await.0, 404);
    assert_eq!(
        client
            .get("/apis/certificates.k8s.io/v1/podcertificaterequests")
            .await
            .0,
        404,
        "a version not served is absent"
    );
    let (code, core) = client.get("/api/v1").await;
    assert_eq!(code, 200);
    assert!(
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pods")
    );
}

#[tokio::test]
async fn trust_bundles_follow_kubes_naming_rule_and_are_selected_by_signer_and_label() {
    let fixture = fixture().await;
    let client = Client::new(&fixture);
    let bundle = |name: &str, signer: Option<&str>, labels: Value| {
        let mut spec = json!({ "trustBundle": "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n" });
        if let Some(signer) = signer {
            spec["signerName"] = json!(signer);
        }
        json!({ "metadata": { "name": name, "labels": labels }, "spec": spec })
    };
    let (code, status) = client
        .post(
            BUNDLES,
            &bundle("warrant-spiffe-2026-11", Some(SIGNER), json!({})),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "ClusterTrustBundle.certificates.k8s.io \"warrant-spiffe-2026-11\" is invalid: metadata.name: Invalid value: \"warrant-spiffe-2026-11\": ClusterTrustBundle for signerName warrant.example.com/spiffe must be named with prefix warrant.example.com:spiffe:"
    );
    let (code, status) = client
        .post(
            BUNDLES,
            &bundle("warrant.example.com:spiffe:x", None, json!({})),
        )
        .await;
    assert_eq!(code, 422);
    assert_eq!(
        status["message"],
        "ClusterTrustBundle.certificates.k8s.io \"warrant.example.com:spiffe:x\" is invalid: metadata.name: Invalid value: \"warrant.example.com:spiffe:x\": ClusterTrustBundle without signer name must not have \":\" in its name"
    );
    for (name, signer, labels) in [
        (
            "warrant.example.com:spiffe:live",
            Some(SIGNER),
            json!({ "warrant.dev/trust-bundle": "live" }),
        ),
        ("warrant.example.com:spiffe:old", Some(SIGNER), json!({})),
        ("plain", None, json!({ "warrant.dev/trust-bundle": "live" })),
    ] {
        let (code, _) = client.post(BUNDLES, &bundle(name, signer, labels)).await;
        assert_eq!(code, 201, "{name}");
    }
    let (_, list) = client
        .get(&format!(
            "{BUNDLES}?fieldSelector=spec.signerName%3Dwarrant.example.com%2Fspiffe&labelSelector=warrant.dev%2Ftrust-bundle%3Dlive"
        ))
        .await;
    assert_eq!(names(&list), ["warrant.example.com:spiffe:live"]);
    let (_, list) = client
        .get(&format!(
            "{BUNDLES}?labelSelector=warrant.dev%2Ftrust-bundle%20in%20(live,x)"
        ))
        .await;
    assert_eq!(names(&list), ["plain", "warrant.example.com:spiffe:live"]);
    let (_, list) = client
        .get(&format!(
            "{BUNDLES}?labelSelector=!warrant.dev%2Ftrust-bundle"
        ))
        .await;
    assert_eq!(names(&list), ["warrant.example.com:spiffe:old"]);

    let delete = client.http.delete(format!(
        "{}{BUNDLES}/warrant.example.com:spiffe:old",
        client.base
    ));
    let (code, gone) = client.send(delete).await;
    assert_eq!(
        (code, &gone["metadata"]["name"]),
        (200, &json!("warrant.example.com:spiffe:old"))
    );
    assert!(
        fixture
            .get_json(
                cluster_trust_bundles(),
                "",
                "warrant.example.com:spiffe:old"
            )
            .is_none()
    );
    let delete = client.http.delete(format!(
        "{}{BUNDLES}/warrant.example.com:spiffe:old",
        client.base
    ));
    assert_eq!(client.send(delete).await.0, 404);
}
