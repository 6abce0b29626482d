//! Signer-linked ClusterTrustBundles kept current across a CA rotation.

use prometheus_client::registry::Registry;
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use serde_json::{Value, json};
use warrant_kube_fixture::Fixture;
use warrant_kube_fixture::podcert::cluster_trust_bundles;
use warrant_podcert_kube::Error;
use warrant_podcert_kube::trust::{Change, TrustBundles, bundle_name, check_bundle};

use crate::{SIGNER, client, fixture, metric};

fn certificate(ca: bool) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    if ca {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    params.self_signed(&key).unwrap().pem()
}

fn bundles(fixture: &Fixture) -> Vec<Value> {
    let mut names: Vec<Value> = Vec::new();
    for name in [
        bundle_name(SIGNER),
        "warrant.example.com:spiffe:2026-11".to_owned(),
        "warrant.example.com:spiffe:theirs".to_owned(),
    ] {
        if let Some(found) = fixture.get_json(cluster_trust_bundles(), "", &name) {
            names.push(found);
        }
    }
    names
}

fn roots_in(bundle: &Value) -> usize {
    bundle["spec"]["trustBundle"]
        .as_str()
        .unwrap()
        .matches("-----BEGIN CERTIFICATE-----")
        .count()
}

#[tokio::test]
async fn the_live_bundle_is_created_then_follows_a_rotation_and_stale_ones_go() {
    let fixture = fixture("v1beta1").await;
    // A stale bundle of warrant's (an older name) and one someone else keeps.
    let stale = json!({
        "metadata": { "name": "warrant.example.com:spiffe:2026-11",
                      "labels": { "app.kubernetes.io/managed-by": "warrant" } },
        "spec": { "signerName": SIGNER, "trustBundle": certificate(true) },
    });
    let theirs = json!({
        "metadata": { "name": "warrant.example.com:spiffe:theirs" },
        "spec": { "signerName": SIGNER, "trustBundle": certificate(true) },
    });
    fixture.create_json(cluster_trust_bundles(), stale).unwrap();
    fixture
        .create_json(cluster_trust_bundles(), theirs)
        .unwrap();
    let mut registry = Registry::default();
    let keeper = TrustBundles::new(client(&fixture), &mut registry);
    let (old_root, new_root) = (certificate(true), certificate(true));

    let synced = keeper
        .sync(SIGNER, std::slice::from_ref(&old_root))
        .await
        .unwrap();
    assert_eq!(synced.live, Change::Created);
    assert_eq!(synced.deleted, ["warrant.example.com:spiffe:2026-11"]);
    let live = fixture
        .get_json(
            cluster_trust_bundles(),
            "",
            "warrant.example.com:spiffe:live",
        )
        .unwrap();
    assert_eq!(live["spec"]["signerName"], SIGNER);
    assert_eq!(
        live["metadata"]["labels"]["warrant.dev/trust-bundle"],
        "live"
    );
    assert_eq!(roots_in(&live), 1);
    let left: Vec<String> = bundles(&fixture)
        .iter()
        .map(|b| b["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        left,
        [
            "warrant.example.com:spiffe:live",
            "warrant.example.com:spiffe:theirs"
        ],
        "another's bundle is never touched"
    );

    // Rotation: the next root is published beside the old one, then the old one leaves.
    let overlap = keeper
        .sync(SIGNER, &[old_root.clone(), new_root.clone()])
        .await
        .unwrap();
    assert_eq!(overlap.live, Change::Updated);
    let live = fixture
        .get_json(cluster_trust_bundles(), "", &bundle_name(SIGNER))
        .unwrap();
    assert_eq!(roots_in(&live), 2);
    let after = keeper
        .sync(SIGNER, std::slice::from_ref(&new_root))
        .await
        .unwrap();
    assert_eq!(after.live, Change::Updated);
    let live = fixture
        .get_json(cluster_trust_bundles(), "", &bundle_name(SIGNER))
        .unwrap();
    assert_eq!(roots_in(&live), 1);
    let new_body: String = new_root
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let stored_body: String = live["spec"]["trustBundle"]
        .as_str()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert_eq!(stored_body, new_body, "the new root is the one kept");
    assert_eq!(
        keeper.sync(SIGNER, &[new_root]).await.unwrap().live,
        Change::Unchanged
    );
    let errors = format!(
        "warrant_podcert_trust_bundle_errors_total{{signer=\"{SIGNER}\",error=\"invalid\"}}"
    );
    assert_eq!(metric(&registry, &errors), 0.0);
}

/// Two roots of one CA key, each self-signed as a replica signs it: the same certificate but
/// for the signature's randomness.
fn one_root_signed_twice() -> (String, String) {
    use aws_lc_rs::encoding::AsDer as _;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _};
    use warrant_podcert::{CaAlgorithm, RootTemplate};
    let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let spki = key.public_key().as_der().unwrap();
    let at = |s| jiff::Timestamp::from_second(s).unwrap();
    let root = || {
        let template = RootTemplate::new(
            CaAlgorithm::EcdsaP256Sha256,
            spki.as_ref(),
            "warrant pod CA",
            at(1_800_000_000),
            at(1_900_000_000),
        )
        .unwrap();
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let signature = key.sign(&rng, template.tbs()).unwrap();
        let der = template.finish(signature.as_ref()).unwrap().der().to_vec();
        rustls_pki_types::CertificateDer::from(der)
    };
    let pem = |der: rustls_pki_types::CertificateDer<'static>| {
        check_bundle(SIGNER, &[pem_of(der.as_ref())]).unwrap()
    };
    (pem(root()), pem(root()))
}

fn pem_of(der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n")
}

#[tokio::test]
async fn replicas_signing_their_own_root_of_one_key_leave_the_bundle_alone() {
    let fixture = fixture("v1beta1").await;
    let mut registry = Registry::default();
    let keeper = TrustBundles::new(client(&fixture), &mut registry);
    let (first, second) = one_root_signed_twice();
    assert_ne!(first, second, "two signatures, two encodings");
    let written = keeper
        .sync(SIGNER, std::slice::from_ref(&first))
        .await
        .unwrap();
    assert_eq!(written.live, Change::Created);
    // The other replica's root of the same key: nothing to write, the first one stays.
    let again = keeper
        .sync(SIGNER, std::slice::from_ref(&second))
        .await
        .unwrap();
    assert_eq!(again.live, Change::Unchanged);
    let live = fixture
        .get_json(cluster_trust_bundles(), "", &bundle_name(SIGNER))
        .unwrap();
    assert_eq!(live["spec"]["trustBundle"], first.as_str());
    // A root of another key is a change.
    let other = certificate(true);
    let changed = keeper.sync(SIGNER, &[other]).await.unwrap();
    assert_eq!(changed.live, Change::Updated);
}

#[tokio::test]
async fn contents_kube_would_refuse_are_refused_before_writing_and_counted() {
    let fixture = fixture("v1beta1").await;
    let mut registry = Registry::default();
    let keeper = TrustBundles::new(client(&fixture), &mut registry);
    let root = certificate(true);
    let key = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_owned();
    let cases: [(&str, Vec<String>, &str); 4] = [
        (
            "a leaf",
            vec![certificate(false)],
            "entry 0 does not have the CA bit set",
        ),
        (
            "a duplicate",
            vec![root.clone(), root.clone()],
            "duplicate trust anchor (indices [0 1])",
        ),
        (
            "a key block",
            vec![root.clone(), key],
            "only CERTIFICATE blocks",
        ),
        ("nothing", vec![], "no certificate"),
    ];
    for (what, roots, expected) in cases {
        let refused = keeper.sync(SIGNER, &roots).await;
        match refused {
            Err(Error::Bundle { reason, .. }) => {
                assert!(reason.contains(expected), "{what}: {reason}")
            }
            other => panic!("{what}: {other:?}"),
        }
        assert!(check_bundle(SIGNER, &roots).is_err(), "{what}");
    }
    assert!(bundles(&fixture).is_empty(), "nothing was written");
    let errors = format!(
        "warrant_podcert_trust_bundle_errors_total{{signer=\"{SIGNER}\",error=\"invalid\"}}"
    );
    assert_eq!(metric(&registry, &errors), 4.0);
}

#[tokio::test]
async fn the_fixture_refuses_a_misnamed_bundle_as_kube_does_and_the_error_is_counted() {
    let fixture = fixture("v1beta1").await;
    let resource = kube::core::ApiResource {
        group: "certificates.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "certificates.k8s.io/v1beta1".into(),
        kind: "ClusterTrustBundle".into(),
        plural: "clustertrustbundles".into(),
    };
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(client(&fixture), &resource);
    let misnamed = kube::api::DynamicObject::new("warrant-spiffe-2026-11", &resource).data(json!({
        "spec": { "signerName": SIGNER, "trustBundle": certificate(true) }
    }));
    let refusal = api
        .create(&kube::api::PostParams::default(), &misnamed)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refusal else {
        panic!("{refusal:?}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "ClusterTrustBundle.certificates.k8s.io \"warrant-spiffe-2026-11\" is invalid: metadata.name: Invalid value: \"warrant-spiffe-2026-11\": ClusterTrustBundle for signerName warrant.example.com/spiffe must be named with prefix warrant.example.com:spiffe:"
    );

    // The keeper's own writes fail the same way when the API server refuses them.
    let mut registry = Registry::default();
    let keeper = TrustBundles::new(client(&fixture), &mut registry);
    fixture.fail_writes(Some(403));
    assert!(matches!(
        keeper.sync(SIGNER, &[certificate(true)]).await,
        Err(Error::Kube(_))
    ));
    let errors =
        format!("warrant_podcert_trust_bundle_errors_total{{signer=\"{SIGNER}\",error=\"api\"}}");
    assert_eq!(metric(&registry, &errors), 1.0);
}
