//! The pod certificate CA kept by warrant itself (`--pod-certificate-ca-key-dir`): the CA key
//! generated in a key directory at the first start, its root published in the
//! ClusterTrustBundle and the SPIFFE bundle, leaves that openssl verifies against it; a
//! rotation started with `warrant keys rotate` on the CA's directory publishes the next root
//! beside the current one while the current key keeps signing; a restart makes the same roots
//! again and leaves the bundle as it was.
//!
//! The same CA with its private keys in the token keys' holder: a SoftHSM2 token (and what
//! a token that goes away does to PCRs and readiness) and moto's KMS (ES256 and ES384), each
//! leaf verified with openssl and rustls-webpki against the ClusterTrustBundle alone; and
//! two replicas sharing the CA's keys in a Secret, one key made and the bundle written once.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, UnixTime};
use serde_json::Value;
use warrant_kube_fixture::podcert::pod_certificate_requests;
use warrant_kube_fixture::{Fixture, ResourceType};
use warrant_testkit::POD_UID;
use warrant_testkit::servers::Emulator;

use crate::held::{keys_command, no_private_key_under};
use crate::hsm::SoftHsm;
use crate::kms::{boto3, moto_endpoint, recorded_arns};
use crate::pki::openssl;
use crate::pod_certificates::{
    SIGNER, answered, cluster, condition, issue, pcr, pem_count, refs, trust_bundle,
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
    assert_eq!(listed["purpose"], "pod-certificate-ca", "{listed}");
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
    let issued = issue(&mut w, &cluster, dir, "app-0-cert").await;
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
    issue(&mut w, &cluster, dir, "app-0-cert-3").await;

    // The CA's directory named as the token keys' store too: refused at startup, saying what
    // it holds, rather than its CA keys signing tokens.
    let log = w.restart_refused(|_| vec!["--key-dir".into(), ca_dir.clone().into()]);
    assert!(
        log.contains("holds pod certificate CA keys")
            && log.contains("is read here for service account token keys"),
        "{log}"
    );
}

/// The pod certificate signer's flags with the CA's keys in `{dir}/ca-keys`, new keys of
/// `algorithm` (`es256`, `es384`).
fn ca_key_dir_flags(algorithm: &str) -> Vec<String> {
    [
        "--pod-certificate-signer",
        SIGNER,
        "--pod-certificate-ca-key-dir",
        "{dir}/ca-keys",
        "--pod-certificate-ca-algorithm",
        algorithm,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Verifies the leaf of PCR `issued` against the ClusterTrustBundle alone, as files `name`.pem
/// and `name`-bundle.pem in `dir`: with `openssl verify` as a TLS client certificate, and with
/// rustls's client-certificate verifier (rustls-webpki), as a pod's TLS peer checks it. Returns
/// the leaf's `issuer=` line.
fn leaf_verifies(dir: &Path, cluster: &Fixture, issued: &Value, name: &str) -> String {
    let chain = issued["status"]["certificateChain"].as_str().unwrap();
    let bundle = trust_bundle(cluster).unwrap();
    let (leaf_file, bundle_file) = (format!("{name}.pem"), format!("{name}-bundle.pem"));
    std::fs::write(dir.join(&leaf_file), chain).unwrap();
    std::fs::write(dir.join(&bundle_file), &bundle).unwrap();
    let verified = openssl(
        dir,
        &[
            "verify",
            "-CAfile",
            &bundle_file,
            "-purpose",
            "sslclient",
            &leaf_file,
        ],
    );
    assert!(verified.contains(&format!("{leaf_file}: OK")), "{verified}");

    let mut roots = rustls::RootCertStore::empty();
    for root in CertificateDer::pem_slice_iter(bundle.as_bytes()) {
        roots.add(root.unwrap()).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let mut chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain.as_bytes())
        .map(Result::unwrap)
        .collect();
    let leaf = chain.remove(0);
    let now = warrant_clock::Clock::System.now().as_second();
    let now = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now).unwrap()));
    if let Err(refused) = verifier.verify_client_cert(&leaf, &chain, now) {
        panic!("rustls-webpki refuses the leaf {name}: {refused}");
    }
    issuer(dir, &leaf_file)
}

/// The one key of the CA's key directory `ca_keys`, from its index: its kid and where its
/// private half is held (`heldIn`). The directory holds that key's public key and no private
/// key.
fn held_ca_key(ca_keys: &Path) -> (String, String) {
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(ca_keys.join(warrant_keys::INDEX_FILE)).unwrap(),
    )
    .unwrap();
    let keys = index["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1, "{index}");
    let kid = keys[0]["kid"].as_str().unwrap().to_owned();
    let held_in = keys[0]["heldIn"].as_str().unwrap_or_default().to_owned();
    no_private_key_under(ca_keys);
    let public = std::fs::read_to_string(ca_keys.join(warrant_keys::key_file_name(&kid))).unwrap();
    assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
    (kid, held_in)
}

/// The roots (`x5c`, base64 DER) of the SPIFFE bundle `w` serves.
async fn spiffe_roots(w: &Warrant) -> Vec<String> {
    let bundle: Value =
        serde_json::from_str(&w.get_as_admin("/.well-known/spiffe-bundle").await).unwrap();
    bundle["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["use"] == "x509-svid")
        .map(|k| k["x5c"][0].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until `/readyz/pod-certificates` answers ready (200) or not (503); its body.
async fn pod_certificates_ready(w: &mut Warrant, ready: bool) -> String {
    for _ in 0..600 {
        let (code, body) = w.get_text("/readyz/pod-certificates").await;
        if (code == 200) == ready {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "/readyz/pod-certificates never became {}: {}",
        if ready { "ready" } else { "unready" },
        w.log()
    );
}

/// Waits until `sample` counts at least `least`; fails with the metrics.
async fn counted(w: &Warrant, sample: &str, least: f64) {
    for _ in 0..600 {
        if w.metric(sample).await >= least {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{sample} never reached {least}: {}", w.metrics_text().await);
}

// Multi-threaded: openssl and pkcs11-tool run synchronously on the test thread while the
// fixture serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_in_a_pkcs11_token_signs_leaves_and_waits_while_the_token_is_away() {
    let cluster = cluster().await;
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    // The token keys and the CA's keys, each in its own key directory, both held in the token.
    let mut w = Warrant::start_cluster_with_env(
        &cluster,
        |d| crate::hsm::flags(d, &uri),
        &refs(&ca_key_dir_flags("es256")),
        &hsm.env(),
    )
    .await;
    let pcrs = pod_certificate_requests("v1beta1");
    w.eventually("the ClusterTrustBundle", || {
        trust_bundle(&cluster).is_some()
    })
    .await;

    let issued = issue(&mut w, &cluster, dir, "app-0-cert").await;
    let (ca_kid, held_in) = held_ca_key(&w.path("ca-keys"));
    assert!(
        leaf_verifies(dir, &cluster, &issued, "leaf").contains(&ca_kid),
        "the leaf is signed by the CA key in the token"
    );
    assert!(
        held_in.starts_with("pkcs11:token=warrant;type=private;id=%"),
        "{held_in}"
    );

    // The token holds the CA's private key beside the token key's, neither extractable.
    let token_kids =
        key_index_kids(&std::fs::read(w.path("keys").join(warrant_keys::INDEX_FILE)).unwrap());
    let token_kid = token_kids[0].clone();
    let objects = hsm.private_objects();
    assert_eq!(
        objects.matches("Private Key Object").count(),
        2,
        "{objects}"
    );
    // Each labelled with what it is for: the token key by its kid, the CA's as a CA key, so that
    // neither store can list the other's key (docs/keys.md).
    for label in [format!("pod-certificate-ca:{ca_kid}"), token_kid.clone()] {
        assert!(
            objects.contains(&format!("label:      {label}\n")),
            "{objects}"
        );
    }
    for access in objects.lines().filter(|l| l.contains("Access:")) {
        assert!(access.contains("never extractable"), "{access}");
        assert!(
            !access.split([':', ',']).any(|a| a.trim() == "extractable"),
            "{access}"
        );
    }

    // The token goes away: a PCR made meanwhile waits, with no condition (a Failed one would
    // stop its kubelet asking), and the signer is not ready.
    hsm.take_token_away();
    cluster
        .create_json(pcrs, pcr(dir, "while-away", POD_UID))
        .unwrap();
    let requeued = format!(
        "warrant_podcert_decisions_total{{signer=\"{SIGNER}\",result=\"requeued\",reason=\"CAUnavailable\"}}"
    );
    counted(&w, &requeued, 1.0).await;
    let waiting = cluster.get_json(pcrs, "demo", "while-away").unwrap();
    assert_eq!(condition(&waiting), None, "{waiting}");
    assert!(waiting["status"].get("certificateChain").is_none());
    let unready = pod_certificates_ready(&mut w, false).await;
    assert!(unready.contains("pkcs11:token=warrant"), "{unready}");

    // Back: the waiting PCR is issued by the same CA, without a restart.
    hsm.bring_token_back();
    let issued = answered(&mut w, &cluster, "while-away").await;
    assert_eq!(
        condition(&issued),
        Some(("Issued".to_owned(), "Issued".to_owned())),
        "{issued}"
    );
    assert!(leaf_verifies(dir, &cluster, &issued, "after").contains(&ca_kid));
    pod_certificates_ready(&mut w, true).await;
}

// Multi-threaded: openssl and boto3 run synchronously on the test thread while the fixture
// serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_in_kms_signs_leaves_that_openssl_and_webpki_verify() {
    let moto = Emulator::moto().await;
    let endpoint = moto_endpoint(&moto);
    for (algorithm, spec) in [("es256", "ECC_NIST_P256"), ("es384", "ECC_NIST_P384")] {
        let cluster = cluster().await;
        let work = tempfile::tempdir().unwrap();
        let dir = work.path();
        let mut w = Warrant::start_cluster_with_env(
            &cluster,
            |d| crate::kms::flags(&d.join("keys"), &endpoint, "ES256"),
            &refs(&ca_key_dir_flags(algorithm)),
            &crate::kms::env(),
        )
        .await;
        w.eventually("the ClusterTrustBundle", || {
            trust_bundle(&cluster).is_some()
        })
        .await;
        let issued = issue(&mut w, &cluster, dir, "app-0-cert").await;
        let (ca_kid, held_in) = held_ca_key(&w.path("ca-keys"));
        assert!(leaf_verifies(dir, &cluster, &issued, "leaf").contains(&ca_kid));
        let signature = openssl(
            dir,
            &[
                "x509",
                "-in",
                "leaf.pem",
                "-noout",
                "-text",
                "-certopt",
                "ca_default",
            ],
        );
        let hash = if algorithm == "es256" { "256" } else { "384" };
        assert!(
            signature.contains(&format!("ecdsa-with-SHA{hash}")),
            "{signature}"
        );

        // The CA's key is KMS's, of the spec asked for; the store records its ARN only.
        assert!(held_in.starts_with("arn:aws:kms:us-east-1:"), "{held_in}");
        let described = boto3(
            &moto,
            &format!(
                "m = kms.describe_key(KeyId='{held_in}')['KeyMetadata']\nprint(m['KeyUsage'], m['KeySpec'], m['KeyState'])"
            ),
        );
        assert_eq!(
            described.trim(),
            format!("SIGN_VERIFY {spec} Enabled"),
            "{algorithm}"
        );
        assert_ne!(recorded_arns(&w.path("keys")), [held_in]);
    }
}

/// Two replicas share the CA's keys in a Secret, the one holding its Lease writing it: one CA
/// key is made; each replica signs a root of its own for it (the same certificate but for the
/// signature), and the ClusterTrustBundle the first wrote is left as it is by the second;
/// leaves of either verify against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_a_ca_key_secret_make_one_key_and_write_the_bundle_once() {
    let cluster = cluster().await;
    cluster.register(ResourceType::of::<Lease>());
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let flags: Vec<String> = [
        "--pod-certificate-signer",
        SIGNER,
        "--pod-certificate-ca-key-secret",
        "warrant/pod-ca-keys",
        // The CA Secret's Lease takes the token keys' duration (with static token keys).
        "--key-lease-duration",
        "9s",
    ]
    .map(str::to_owned)
    .to_vec();
    let pcrs = pod_certificate_requests("v1beta1");
    let bundle_writes = || {
        cluster
            .request_log()
            .iter()
            .filter(|r| {
                (r.starts_with("POST ") || r.starts_with("PUT ") || r.starts_with("PATCH "))
                    && r.contains("clustertrustbundles")
            })
            .count()
    };
    let synced = |change: &str| {
        format!(
            "warrant_podcert_trust_bundle_syncs_total{{signer=\"{SIGNER}\",change=\"{change}\"}}"
        )
    };

    // The first replica makes the CA key and writes the bundle, and issues.
    let mut first = Warrant::start_cluster(&cluster, &refs(&flags)).await;
    first
        .eventually("the ClusterTrustBundle", || {
            trust_bundle(&cluster).is_some()
        })
        .await;
    let written = trust_bundle(&cluster).unwrap();
    assert_eq!(pem_count(&written), 1);
    // The replica counts its write once the API server has answered it, a moment after the
    // bundle can be read.
    counted(&first, &synced("created"), 1.0).await;
    assert_eq!(first.metric(&synced("created")).await, 1.0);
    cluster
        .create_json(pcrs, pcr(dir, "from-first", POD_UID))
        .unwrap();
    let issued_first = answered(&mut first, &cluster, "from-first").await;
    assert_eq!(condition(&issued_first).unwrap().0, "Issued");

    // The second finds the key, signs its own root of it, and leaves the bundle as it is.
    let mut second = Warrant::start_cluster(&cluster, &refs(&flags)).await;
    counted(&second, &synced("unchanged"), 1.0).await;
    assert_eq!(second.metric(&synced("updated")).await, 0.0);
    assert_eq!(second.metric(&synced("created")).await, 0.0);
    assert_eq!(trust_bundle(&cluster).unwrap(), written);
    assert_eq!(bundle_writes(), 1, "{:?}", cluster.request_log());
    assert_ne!(
        spiffe_roots(&first).await,
        spiffe_roots(&second).await,
        "each replica serves the root it signed itself"
    );

    // The first goes; the second (now the Secret's writer) issues, from the same key: its
    // leaf verifies against the root the first wrote.
    drop(first);
    cluster
        .create_json(pcrs, pcr(dir, "from-second", POD_UID))
        .unwrap();
    let issued_second = answered(&mut second, &cluster, "from-second").await;
    assert_eq!(condition(&issued_second).unwrap().0, "Issued");
    let issuer_first = leaf_verifies(dir, &cluster, &issued_first, "first");
    let issuer_second = leaf_verifies(dir, &cluster, &issued_second, "second");
    assert_eq!(issuer_first, issuer_second);

    // One CA key in the Secret, the one both signed with.
    let secret = cluster.get::<Secret>("warrant", "pod-ca-keys").unwrap();
    let index: Value = serde_json::from_slice(&secret.data.unwrap()["keys.json"].0).unwrap();
    let kids: Vec<&str> = index["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids.len(), 1, "{index}");
    assert!(issuer_first.contains(kids[0]), "{issuer_first}");
    assert_eq!(trust_bundle(&cluster).unwrap(), written);
    assert_eq!(bundle_writes(), 1, "{:?}", cluster.request_log());
}

/// `dir`'s key index with every key's schedule moved `seconds` into the past and its
/// generation bumped, written as warrant writes (a file renamed into place), so the running
/// server reads it: time passes for the key set without the test waiting for it.
fn age_key_dir(dir: &Path, seconds: i64) {
    let path = dir.join(warrant_keys::INDEX_FILE);
    let aged = crate::secret_keys::aged_index(&std::fs::read(&path).unwrap(), seconds);
    let mut index: Value = serde_json::from_slice(&aged).unwrap();
    index["generation"] = (index["generation"].as_u64().unwrap() + 1).into();
    let temp = dir.join(".aged");
    std::fs::write(&temp, serde_json::to_vec_pretty(&index).unwrap()).unwrap();
    std::fs::rename(&temp, &path).unwrap();
}

/// A CA key that stopped signing stays published until the last leaf it signed expires, and
/// each replica (or restart) makes its root by signing it with the key: the key's private half
/// stays in the token until then, so a restart after a rotation starts, publishes both roots,
/// and the old key's leaves verify as the new one's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_ca_key_in_a_token_still_makes_its_root_after_a_restart() {
    let cluster = cluster().await;
    let hsm = SoftHsm::new();
    let uri = hsm.uri();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let mut w = Warrant::start_cluster_with_env(
        &cluster,
        |d| crate::hsm::flags(d, &uri),
        &refs(&ca_key_dir_flags("es256")),
        &hsm.env(),
    )
    .await;
    let ca_dir = w.path("ca-keys");
    let pcrs = pod_certificate_requests("v1beta1");
    cluster
        .create_json(pcrs, pcr(dir, "before", POD_UID))
        .unwrap();
    let before = answered(&mut w, &cluster, "before").await;
    let (old_kid, _) = held_ca_key(&ca_dir);

    // A rotation, then a day and two minutes pass: the next key signs, the old one retired
    // (past the grace after which a token key's private half is destroyed) but published.
    let in_token = ["--key-pkcs11-uri".into(), uri.clone().into()];
    let rotated = keys_command(&ca_dir, &in_token, &hsm.env(), "rotate", &[]);
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    w.eventually("the next root in the ClusterTrustBundle", || {
        trust_bundle(&cluster).is_some_and(|b| pem_count(&b) == 2)
    })
    .await;
    let listed = key_index_kids(&std::fs::read(ca_dir.join(warrant_keys::INDEX_FILE)).unwrap());
    let new_kid = listed.iter().find(|k| **k != old_kid).unwrap().clone();
    age_key_dir(&ca_dir, 24 * 3600 + 120);
    w.log_line(&format!("key is now signing kid={new_kid}"))
        .await;
    cluster
        .create_json(pcrs, pcr(dir, "after", POD_UID))
        .unwrap();
    let after = answered(&mut w, &cluster, "after").await;
    assert!(leaf_verifies(dir, &cluster, &after, "after").contains(&new_kid));
    assert!(leaf_verifies(dir, &cluster, &before, "before").contains(&old_kid));
    let objects = hsm.private_objects();
    assert!(
        objects.contains(&format!("label:      pod-certificate-ca:{old_kid}")),
        "the retired CA key's private half was destroyed while its root is published: {objects}"
    );

    // A restart signs both roots again: the old key's leaves still verify.
    w.restart(|d| crate::hsm::flags(d, &uri)).await;
    w.eventually("both roots in the bundle", || {
        trust_bundle(&cluster).is_some_and(|b| pem_count(&b) == 2)
    })
    .await;
    assert!(leaf_verifies(dir, &cluster, &before, "before-2").contains(&old_kid));
    cluster
        .create_json(pcrs, pcr(dir, "restarted", POD_UID))
        .unwrap();
    let restarted = answered(&mut w, &cluster, "restarted").await;
    assert!(leaf_verifies(dir, &cluster, &restarted, "restarted").contains(&new_kid));
}
