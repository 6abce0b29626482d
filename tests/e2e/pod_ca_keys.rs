//! The pod certificate CA kept by warrant itself (`--pod-certificate-ca-key-dir`): the CA key
//! generated in a key directory at the first start, its root published in the
//! ClusterTrustBundle and the SPIFFE bundle, leaves that openssl verifies against it; a
//! rotation started with `warrant keys rotate` on the CA's directory publishes the next root
//! beside the current one while the current key keeps signing; a restart makes the same roots
//! again and leaves the bundle as it was.

use std::ffi::OsStr;

use serde_json::Value;
use warrant_kube_fixture::podcert::pod_certificate_requests;
use warrant_testkit::POD_UID;

use crate::pki::openssl;
use crate::pod_certificates::{
    SIGNER, answered, cluster, condition, pcr, pem_count, refs, trust_bundle,
};
use crate::support::*;

/// The `issuer=` line openssl prints for the first certificate of `file` in `dir`.
fn issuer(dir: &std::path::Path, file: &str) -> String {
    openssl(dir, &["x509", "-in", file, "-noout", "-issuer"])
        .trim()
        .to_owned()
}

// Multi-threaded: openssl runs synchronously on the test thread while the fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_in_a_key_directory_signs_and_publishes_its_next_root_ahead() {
    let cluster = cluster().await;
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let flags: Vec<String> = [
        "--pod-certificate-signer",
        SIGNER,
        "--pod-certificate-ca-key-dir",
        "{dir}/ca-keys",
        "--pod-certificate-ca-algorithm",
        "es384",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut w = Warrant::start_cluster(&cluster, &refs(&flags)).await;
    let ca_dir = w.path("ca-keys");
    let pcrs = pod_certificate_requests("v1beta1");

    // The first CA key was made at startup; its root is the one published.
    let listed: Value = serde_json::from_str(&w.warrant_ok(&[
        OsStr::new("keys"),
        OsStr::new("list"),
        OsStr::new("--key-dir"),
        ca_dir.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("json"),
    ]))
    .unwrap();
    let first_kid = listed["keys"][0]["kid"].as_str().unwrap().to_owned();
    assert_eq!(listed["keys"][0]["algorithm"], "ES384", "{listed}");
    w.eventually("the ClusterTrustBundle", || {
        trust_bundle(&cluster).is_some()
    })
    .await;
    let published = trust_bundle(&cluster).unwrap();
    assert_eq!(pem_count(&published), 1);
    std::fs::write(dir.join("published.pem"), &published).unwrap();
    assert!(
        issuer(dir, "published.pem").contains(&format!("warrant pod CA {first_kid}")),
        "{}",
        issuer(dir, "published.pem")
    );

    // A kubelet's PCR: issued by that CA, and the leaf verifies against the bundle.
    cluster
        .create_json(pcrs, pcr(dir, "app-0-cert", POD_UID))
        .unwrap();
    let issued = answered(&mut w, &cluster, "app-0-cert").await;
    assert_eq!(
        condition(&issued),
        Some(("Issued".to_owned(), "Issued".to_owned())),
        "{issued}"
    );
    let verify = |leaf: &str| {
        openssl(
            dir,
            &[
                "verify",
                "-CAfile",
                "published.pem",
                "-purpose",
                "sslclient",
                leaf,
            ],
        )
    };
    std::fs::write(
        dir.join("leaf.pem"),
        issued["status"]["certificateChain"].as_str().unwrap(),
    )
    .unwrap();
    assert!(verify("leaf.pem").contains("leaf.pem: OK"));
    assert!(issuer(dir, "leaf.pem").contains(&first_kid));
    let ca_expiry = w
        .metric(&format!(
            "warrant_podcert_ca_expiration_timestamp_seconds{{signer=\"{SIGNER}\"}}"
        ))
        .await;
    assert!(ca_expiry > 0.0);
    assert_eq!(w.metric("warrant_podcert_ca_keys_generation").await, 1.0);

    // A rotation: the next root is published at once, beside the current one, which keeps
    // signing until the next one's activation (a day later by default).
    w.warrant_ok(&[
        OsStr::new("keys"),
        OsStr::new("rotate"),
        OsStr::new("--key-dir"),
        ca_dir.as_os_str(),
    ]);
    w.eventually("the next root in the ClusterTrustBundle", || {
        trust_bundle(&cluster).is_some_and(|b| pem_count(&b) == 2)
    })
    .await;
    let both = trust_bundle(&cluster).unwrap();
    assert!(
        both.starts_with(published.trim_end()),
        "the signing root stays first"
    );
    std::fs::write(dir.join("published.pem"), &both).unwrap();
    let spiffe: Value =
        serde_json::from_str(&w.get_as_admin("/.well-known/spiffe-bundle").await).unwrap();
    let x509 = spiffe["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["use"] == "x509-svid")
        .count();
    assert_eq!(x509, 2, "{spiffe}");
    cluster
        .create_json(pcrs, pcr(dir, "app-0-cert-2", POD_UID))
        .unwrap();
    let issued = answered(&mut w, &cluster, "app-0-cert-2").await;
    std::fs::write(
        dir.join("leaf-2.pem"),
        issued["status"]["certificateChain"].as_str().unwrap(),
    )
    .unwrap();
    assert!(verify("leaf-2.pem").contains("leaf-2.pem: OK"));
    assert!(
        issuer(dir, "leaf-2.pem").contains(&first_kid),
        "the next key does not sign before its time"
    );

    // A restart signs the roots again: the same certificates but for the signature, so the
    // bundle is left as the first start wrote it.
    w.restart(static_keys).await;
    let unchanged = format!(
        "warrant_podcert_trust_bundle_syncs_total{{signer=\"{SIGNER}\",change=\"unchanged\"}}"
    );
    for _ in 0..200 {
        if w.metric(&unchanged).await >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(w.metric(&unchanged).await, 1.0, "{}", w.log());
    assert_eq!(trust_bundle(&cluster).unwrap(), both);
    cluster
        .create_json(pcrs, pcr(dir, "app-0-cert-3", POD_UID))
        .unwrap();
    let issued = answered(&mut w, &cluster, "app-0-cert-3").await;
    assert_eq!(
        condition(&issued),
        Some(("Issued".to_owned(), "Issued".to_owned())),
        "{issued}"
    );
}
