//! What the tests share: the vector PCR, the facts of the cluster it came from, keys and CSRs
//! made with rcgen, a policy, and an independent check of a leaf.

use std::sync::OnceLock;

use base64::Engine as _;
use jiff::{SignedDuration, Timestamp};
use rcgen::{CertificateParams, DistinguishedName, KeyPair, PublicKeyData as _};
use serde_json::{Value, json};
use warrant_podcert::*;
use x509_parser::prelude::*;

/// The cluster of the vectors (their README): namespace, pod, service account and node.
pub(crate) const NAMESPACE: &str = "demo";
pub(crate) const POD: &str = "app";
pub(crate) const POD_UID: &str = "da4947b6-839d-4cfd-a5e6-a50f1ba67674";
pub(crate) const SA: &str = "app";
pub(crate) const SA_UID: &str = "5a692643-4a9b-4e6c-8f6f-878dc9fc4f66";
pub(crate) const NODE: &str = "node1";
pub(crate) const NODE_UID: &str = "7ec80e6e-2ac3-474f-9b7b-cbefa4bf5468";
pub(crate) const SIGNER: &str = "warrant.example.com/spiffe";
pub(crate) const SPIFFE_ID: &str = "spiffe://cluster.local/ns/demo/sa/app";

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// The time of the vectors' status captures (their leaves began a minute before).
pub(crate) fn vector_now() -> Timestamp {
    at("2026-11-27T17:16:56Z")
}

/// The PCR of `pcr-v1beta1-stub-csr-p256.json`, as kube-apiserver returned it, with the
/// metadata its capture left out (uid, resourceVersion, creationTimestamp 2 s before `now`).
pub(crate) fn vector_pcr(now: Timestamp) -> Value {
    let mut pcr: Value =
        serde_json::from_str(include_str!("../vectors/pcr-v1beta1-stub-csr-p256.json")).unwrap();
    pcr["apiVersion"] = json!("certificates.k8s.io/v1beta1");
    pcr["kind"] = json!("PodCertificateRequest");
    pcr["metadata"]["uid"] = json!("0b8a51c4-3f55-4d0e-9a51-5d2a36f0b3f1");
    pcr["metadata"]["resourceVersion"] = json!("4711");
    pcr["metadata"]["creationTimestamp"] =
        json!(status::rfc3339(now - SignedDuration::from_secs(2)));
    pcr
}

/// The vector PCR without its annotation, carrying `csr` (DER) instead of its own request.
pub(crate) fn pcr_with_csr(csr: &[u8], now: Timestamp) -> Value {
    let mut pcr = vector_pcr(now);
    pcr["spec"]["unverifiedUserAnnotations"] = json!({});
    pcr["spec"]["stubPKCS10Request"] = json!(b64(csr));
    pcr
}

/// The vector PCR in the 1.35 form: `pkixPublicKey` and a proof, no stub request.
pub(crate) fn pcr_with_pkix(spki: &[u8], now: Timestamp) -> Value {
    let mut pcr = vector_pcr(now);
    pcr["spec"]["unverifiedUserAnnotations"] = json!({});
    pcr["spec"]["stubPKCS10Request"] = Value::Null;
    pcr["spec"]["pkixPublicKey"] = json!(b64(spki));
    pcr["spec"]["proofOfPossession"] = json!(b64(b"a signature kube-apiserver checked"));
    pcr
}

/// The facts of the vectors' cluster: pod `demo/app` running on `node1` as `app`.
pub(crate) fn facts() -> Facts {
    Facts {
        pod: Live::Found(PodFacts {
            namespace: NAMESPACE.into(),
            name: POD.into(),
            uid: POD_UID.into(),
            node_name: NODE.into(),
            service_account_name: SA.into(),
            phase: "Running".into(),
            deletion_timestamp: None,
            labels: [("app".to_owned(), "app".to_owned())].into(),
        }),
        service_account: Live::Found(NamedObject {
            name: SA.into(),
            uid: SA_UID.into(),
        }),
        node: Live::Found(NamedObject {
            name: NODE.into(),
            uid: NODE_UID.into(),
        }),
        services: Live::Found(Vec::new()),
    }
}

/// Every namespace and key type, a 24 h maximum, trust domain `cluster.local`.
pub(crate) fn policy() -> PodCertificatePolicy {
    let policy: PodCertificatePolicy = serde_json::from_value(json!({
        "trustDomain": "cluster.local",
        "signers": [{"signerName": SIGNER, "namespaces": ["*"]}],
    }))
    .unwrap();
    policy.validate().unwrap();
    policy
}

/// A root valid for ten years around the vectors' time.
pub(crate) fn ca() -> &'static MemoryCa {
    static CA: OnceLock<MemoryCa> = OnceLock::new();
    CA.get_or_init(|| {
        let from = at("2026-01-01T00:00:00Z");
        let to = at("2036-01-01T00:00:00Z");
        MemoryCa::generate(CaCurve::P256, "warrant pod CA (test)", from, to)
            .unwrap()
            .0
    })
}

fn ca_der() -> rustls_pki_types::CertificateDer<'static> {
    rustls_pki_types::CertificateDer::from(ca().certificate().der().to_vec())
}

/// A key of each type kube accepts, made once (RSA keys are slow to make).
pub(crate) fn key(key_type: KeyType) -> &'static KeyPair {
    use rcgen::{
        PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384, PKCS_ECDSA_P521_SHA512, PKCS_ED25519,
        PKCS_RSA_SHA256, RsaKeySize,
    };
    static KEYS: OnceLock<Vec<(KeyType, KeyPair)>> = OnceLock::new();
    let keys = KEYS.get_or_init(|| {
        KeyType::ALL
            .iter()
            .map(|&t| {
                let key = match t {
                    KeyType::Rsa3072 => {
                        KeyPair::generate_rsa_for(&PKCS_RSA_SHA256, RsaKeySize::_3072)
                    }
                    KeyType::Rsa4096 => {
                        KeyPair::generate_rsa_for(&PKCS_RSA_SHA256, RsaKeySize::_4096)
                    }
                    KeyType::EcdsaP256 => KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256),
                    KeyType::EcdsaP384 => KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384),
                    KeyType::EcdsaP521 => KeyPair::generate_for(&PKCS_ECDSA_P521_SHA512),
                    KeyType::Ed25519 => KeyPair::generate_for(&PKCS_ED25519),
                };
                (t, key.unwrap())
            })
            .collect()
    });
    &keys.iter().find(|(t, _)| *t == key_type).unwrap().1
}

pub(crate) fn rsa_2048() -> KeyPair {
    KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048).unwrap()
}

/// An empty stub request, as a 1.36 kubelet makes it.
pub(crate) fn stub_csr(key: &KeyPair) -> Vec<u8> {
    csr_with(key, CertificateParams::default(), DistinguishedName::new())
}

/// A request with `params`' SANs and subject `dn`.
pub(crate) fn csr_with(
    key: &KeyPair,
    mut params: CertificateParams,
    dn: DistinguishedName,
) -> Vec<u8> {
    params.distinguished_name = dn;
    params.serialize_request(key).unwrap().der().to_vec()
}

pub(crate) fn spki(key: &KeyPair) -> Vec<u8> {
    key.subject_public_key_info()
}

/// The leaf of a chain (its first block), DER.
pub(crate) fn leaf_der(chain: &str) -> Vec<u8> {
    let body: String = chain
        .lines()
        .skip_while(|l| *l != "-----BEGIN CERTIFICATE-----")
        .skip(1)
        .take_while(|l| *l != "-----END CERTIFICATE-----")
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// Checks a leaf independently of the code that made it: x509-parser reads it, aws-lc-rs
/// verifies its signature with the CA certificate's key. Returns the leaf's DER.
pub(crate) fn check_leaf(issued: &Issued, requested_spki: &[u8], key_type: KeyType) -> Vec<u8> {
    let chain = &issued.status.certificate_chain;
    assert_eq!(
        chain.matches("-----BEGIN CERTIFICATE-----").count(),
        1,
        "a root-signed leaf alone"
    );
    let der = leaf_der(chain);
    let (rest, leaf) = X509Certificate::from_der(&der).unwrap();
    assert!(rest.is_empty());
    let (_, ca) = X509Certificate::from_der(ca().certificate().der()).unwrap();
    assert_eq!(
        leaf.issuer().as_raw(),
        ca.subject().as_raw(),
        "issuer is the CA's subject"
    );
    assert_eq!(leaf.subject().as_raw(), [0x30, 0x00], "empty subject");
    assert_eq!(
        leaf.public_key().raw,
        requested_spki,
        "the requested key, byte for byte"
    );
    assert_eq!(leaf.version(), X509Version::V3);
    let serial = leaf.raw_serial();
    assert!(serial.len() <= 20 && serial[0] & 0x80 == 0 && serial.iter().any(|&b| b != 0));
    assert_eq!(
        x509_parser::utils::format_serial(serial).replace(':', ""),
        issued.serial_hex
    );
    // The signature, by the CA's key.
    aws_lc_rs::signature::UnparsedPublicKey::new(
        &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
        ca.public_key().subject_public_key.data.as_ref(),
    )
    .verify(
        leaf.tbs_certificate.as_ref(),
        leaf.signature_value.data.as_ref(),
    )
    .expect("the CA's signature verifies");
    // Extensions.
    let bc = leaf.basic_constraints().unwrap().unwrap();
    assert!(bc.critical && !bc.value.ca);
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && eku.server_auth && !eku.any && eku.other.is_empty());
    let ku = leaf.key_usage().unwrap().unwrap();
    assert!(ku.critical && ku.value.digital_signature());
    assert_eq!(ku.value.key_encipherment(), key_type.is_rsa());
    assert!(!ku.value.key_cert_sign());
    let san = leaf.subject_alternative_name().unwrap().unwrap();
    assert!(san.critical, "SAN critical: the subject is empty");
    let mut names = vec![GeneralName::URI(&issued.spiffe_id)];
    names.extend(issued.dns_names.iter().map(|n| GeneralName::DNSName(n)));
    assert_eq!(san.value.general_names, names);
    // An independent verifier: rustls-webpki builds the path to the CA, for both usages.
    let ca_der = ca_der();
    let anchor = webpki::anchor_from_trusted_cert(&ca_der).unwrap();
    let leaf_der = rustls_pki_types::CertificateDer::from(der.clone());
    let end_entity = webpki::EndEntityCert::try_from(&leaf_der).unwrap();
    let during = issued.status.not_before.unwrap().as_second() as u64 + 60;
    let time = rustls_pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(during));
    for usage in [
        webpki::KeyUsage::client_auth(),
        webpki::KeyUsage::server_auth(),
    ] {
        end_entity
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                std::slice::from_ref(&anchor),
                &[],
                time,
                usage,
                None,
                None,
            )
            .expect("the leaf verifies to the CA");
    }
    // The status's times are the leaf's.
    assert_eq!(
        issued.status.not_before.unwrap().as_second(),
        leaf.validity().not_before.timestamp()
    );
    assert_eq!(
        issued.status.not_after.unwrap().as_second(),
        leaf.validity().not_after.timestamp()
    );
    der
}

/// `decide_json` with the shared CA.
pub(crate) fn decide_now(
    pcr: &Value,
    facts: &Facts,
    policy: &PodCertificatePolicy,
    now: Timestamp,
) -> Decision {
    ready(decide_json(pcr, facts, policy, now, ca())).unwrap()
}

/// The output of a future that must be ready at once: every CA in these tests signs in memory.
pub(crate) fn ready<F: std::future::Future>(future: F) -> F::Output {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("an in-memory CA's signature was not ready at once"),
    }
}

/// The issued decision, or a failure naming what was decided instead.
pub(crate) fn issued(decision: Decision) -> Box<Issued> {
    match decision {
        Decision::Issued(issued) => issued,
        other => panic!("expected Issued, got {other:?}"),
    }
}

/// The reason and message of a denial, or a failure naming what was decided instead.
pub(crate) fn denied(decision: Decision) -> (&'static str, String) {
    match decision {
        Decision::Denied {
            reason,
            message,
            status,
        } => {
            assert_eq!(status.terminal_condition(), Some("Denied"));
            assert_eq!(status.conditions[0].reason, reason);
            assert!(status.certificate_chain.is_empty() && status.not_before.is_none());
            (reason, message)
        }
        other => panic!("expected Denied, got {other:?}"),
    }
}

pub(crate) fn requeued(decision: Decision) -> (&'static str, String) {
    match decision {
        Decision::Requeue { reason, message } => (reason, message),
        other => panic!("expected Requeue, got {other:?}"),
    }
}

/// One `CERTIFICATE` block, 64 characters a line.
pub(crate) fn pem_of(der: &[u8]) -> String {
    let body = b64(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}
