//! The decision table: each row is one thing kube-apiserver leaves to the signer (shared spec
//! `pod-certificates.md` §5), with the answer warrant gives. Every Issued, Denied and Failed
//! status here has passed the mirror of kube's status rules inside `decide`; the Issued ones
//! are also checked against it explicitly, and their leaves by an independent reader.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use rcgen::{CertificateParams, DistinguishedName, DnType, SanType};
use serde_json::{Value, json};
use warrant_podcert::*;

use crate::support::*;

fn now() -> Timestamp {
    at("2026-11-27T17:17:09Z")
}

/// Issues to `pcr` with the vector's facts and the default policy, checks the leaf, and
/// checks the status against kube's rules at kube's `now`.
fn issue(pcr: &Value, requested_spki: &[u8], key_type: KeyType) -> Box<Issued> {
    let issued = issued(decide_now(pcr, &facts(), &policy(), now()));
    check_leaf(&issued, requested_spki, key_type);
    let request = PodCertificateRequest::from_json(pcr).unwrap();
    let spec = request.spec.as_ref().unwrap();
    validate_status_update(
        &request.status,
        &issued.status,
        StatusContext {
            key: Some(&spec.key),
            max_expiration_seconds: spec.max_expiration_seconds,
            now: now(),
        },
    )
    .unwrap();
    issued
}

#[test]
fn the_captured_pcr_is_denied_for_its_annotation_which_warrant_does_not_know() {
    let (reason, message) = denied(decide_now(&vector_pcr(now()), &facts(), &policy(), now()));
    assert_eq!(reason, "InvalidUnverifiedUserAnnotations");
    assert!(
        message.contains(r#""warrant.example.com/dns""#),
        "{message}"
    );
}

#[test]
fn the_captured_pcr_without_its_annotation_is_issued_with_the_times_kube_accepted() {
    let mut pcr = vector_pcr(now());
    pcr["spec"]["unverifiedUserAnnotations"] = Value::Null;
    let request = PodCertificateRequest::from_json(&pcr).unwrap();
    let spki = request.spec.as_ref().unwrap().key.spki().to_vec();
    let issued = issue(&pcr, &spki, KeyType::EcdsaP256);
    // The status kube-apiserver accepted for this PCR had these times (status-issued-accepted.json).
    let accepted: PodCertificateRequestStatus =
        serde_json::from_str(include_str!("../vectors/status-issued-accepted.json")).unwrap();
    assert_eq!(issued.status.not_before, accepted.not_before);
    assert_eq!(issued.status.not_after, accepted.not_after);
    assert_eq!(issued.spiffe_id, SPIFFE_ID);
    // Three quarters of the 2 h lifetime.
    assert_eq!(
        issued.status.begin_refresh_at,
        Some(at("2026-11-27T18:46:09Z"))
    );
    let json = issued.status.to_json();
    assert_eq!(json["conditions"][0]["type"], "Issued");
    assert_eq!(
        json["conditions"][0]["lastTransitionTime"],
        "2026-11-27T17:17:09Z"
    );
    assert_eq!(json["notBefore"], "2026-11-27T17:16:09Z");
}

#[test]
fn every_key_type_kube_accepts_is_issued_to_in_both_forms() {
    for key_type in KeyType::ALL {
        let key = key(key_type);
        let issued = issue(&pcr_with_csr(&stub_csr(key), now()), &spki(key), key_type);
        assert_eq!(issued.key_type, key_type);
        let issued = issue(&pcr_with_pkix(&spki(key), now()), &spki(key), key_type);
        assert_eq!(issued.key_type, key_type, "1.35 form");
    }
}

#[test]
fn names_in_the_request_never_reach_the_leaf() {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "evil");
    let mut params = CertificateParams::new(vec!["kubernetes.default.svc".to_owned()]).unwrap();
    params.subject_alt_names.push(SanType::URI(
        "spiffe://x/ns/kube-system/sa/admin".try_into().unwrap(),
    ));
    let key = key(KeyType::EcdsaP256);
    let issued = issue(
        &pcr_with_csr(&csr_with(key, params, dn), now()),
        &spki(key),
        KeyType::EcdsaP256,
    );
    let der = leaf_der(&issued.status.certificate_chain);
    for name in ["evil", "kubernetes.default", "kube-system"] {
        assert!(
            !der.windows(name.len()).any(|w| w == name.as_bytes()),
            "{name} is in the leaf"
        );
    }
}

#[test]
fn key_types_outside_kubes_or_the_policys_set_are_denied_naming_the_allowed_ones() {
    let (reason, message) = denied(decide_now(
        &pcr_with_csr(&stub_csr(&rsa_2048()), now()),
        &facts(),
        &policy(),
        now(),
    ));
    assert_eq!(reason, "UnsupportedKeyType");
    assert!(message.contains("2048-bit"), "{message}");
    assert!(
        message.contains("RSA3072, RSA4096, ECDSAP256, ECDSAP384, ECDSAP521, ED25519"),
        "{message}"
    );

    // secp256k1, which kube's parser cannot read, sent as a 1.35 pkixPublicKey.
    let mut k1 = vec![
        0x30, 0x56, 0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
    ];
    k1.extend([
        0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a, 0x03, 0x42, 0x00, 0x04,
    ]);
    k1.extend([7u8; 64]);
    let (reason, message) = denied(decide_now(
        &pcr_with_pkix(&k1, now()),
        &facts(),
        &policy(),
        now(),
    ));
    assert_eq!(reason, "UnsupportedKeyType");
    assert!(message.contains("1.3.132.0.10"), "{message}");

    let mut narrow = policy();
    narrow.signers[0].key_types = vec![KeyType::EcdsaP256, KeyType::Ed25519];
    let p384 = key(KeyType::EcdsaP384);
    let (reason, message) = denied(decide_now(
        &pcr_with_csr(&stub_csr(p384), now()),
        &facts(),
        &narrow,
        now(),
    ));
    assert_eq!(reason, "UnsupportedKeyType");
    assert!(
        message.ends_with("use one of ECDSAP256, ED25519"),
        "{message}"
    );
}

fn with_pod(change: impl FnOnce(&mut PodFacts)) -> Facts {
    let mut facts = facts();
    if let Live::Found(pod) = &mut facts.pod {
        change(pod);
    }
    facts
}

#[test]
fn a_forged_or_finished_identity_is_denied_never_issued() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let other = |name: &str, uid: &str| {
        Live::Found(NamedObject {
            name: name.into(),
            uid: uid.into(),
        })
    };
    let rows: Vec<(&str, Facts, &str)> = vec![
        (
            "no such pod",
            Facts {
                pod: Live::Absent,
                ..facts()
            },
            "PodNotFound",
        ),
        (
            "another pod of that name",
            with_pod(|p| p.uid = "other".into()),
            "PodNotFound",
        ),
        (
            "the pod on another node",
            with_pod(|p| p.node_name = "node2".into()),
            "PodMismatch",
        ),
        (
            "the pod not scheduled",
            with_pod(|p| p.node_name = String::new()),
            "PodMismatch",
        ),
        (
            "the pod as another SA",
            with_pod(|p| p.service_account_name = "default".into()),
            "PodMismatch",
        ),
        (
            "the pod Succeeded",
            with_pod(|p| p.phase = "Succeeded".into()),
            "PodNotRunning",
        ),
        (
            "the pod Failed",
            with_pod(|p| p.phase = "Failed".into()),
            "PodNotRunning",
        ),
        (
            "the pod being deleted",
            with_pod(|p| p.deletion_timestamp = Some(now())),
            "PodNotRunning",
        ),
        (
            "no such SA",
            Facts {
                service_account: Live::Absent,
                ..facts()
            },
            "ServiceAccountMismatch",
        ),
        (
            "the SA recreated",
            Facts {
                service_account: other(SA, "new-uid"),
                ..facts()
            },
            "ServiceAccountMismatch",
        ),
        (
            "no such node",
            Facts {
                node: Live::Absent,
                ..facts()
            },
            "NodeMismatch",
        ),
        (
            "the node recreated",
            Facts {
                node: other(NODE, "new-uid"),
                ..facts()
            },
            "NodeMismatch",
        ),
    ];
    for (row, facts, want) in rows {
        let decision = decide_now(&pcr, &facts, &policy(), now());
        assert!(
            matches!(decision, Decision::Denied { .. }),
            "{row}: {decision:?}"
        );
        assert_eq!(denied(decision).0, want, "{row}");
    }
    // Pending is fine: the pod waits for its certificate to start.
    let pending = with_pod(|p| p.phase = "Pending".into());
    issued(decide_now(&pcr, &pending, &policy(), now()));
}

#[test]
fn facts_that_cannot_be_read_requeue() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    fn down<T>() -> Live<T> {
        Live::Unreadable("connection refused".into())
    }
    for facts in [
        Facts {
            pod: down(),
            ..facts()
        },
        Facts {
            service_account: down(),
            ..facts()
        },
        Facts {
            node: down(),
            ..facts()
        },
    ] {
        let (reason, message) = requeued(decide_now(&pcr, &facts, &policy(), now()));
        assert_eq!(reason, "FactsUnavailable");
        assert!(message.contains("connection refused"));
    }
}

#[test]
fn the_policy_decides_who_gets_certificates_and_whose_pcrs_are_answered() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let mut narrow = policy();
    narrow.signers[0].namespaces = vec!["prod-*".into()];
    let (reason, message) = denied(decide_now(&pcr, &facts(), &narrow, now()));
    assert_eq!(reason, "NotPermitted");
    assert!(message.contains("demo/app"), "{message}");

    let mut other_signer = pcr.clone();
    other_signer["spec"]["signerName"] = json!("other.example.com/x");
    assert!(matches!(
        decide_now(&other_signer, &facts(), &policy(), now()),
        Decision::Ignored { .. }
    ));
}

#[test]
fn a_terminal_pcr_is_left_alone() {
    let mut pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    pcr["status"] = json!({"conditions": [{"type": "Denied", "status": "True", "reason": "X",
        "message": "", "lastTransitionTime": "2026-11-27T17:00:00Z"}]});
    assert!(matches!(
        decide_now(&pcr, &facts(), &policy(), now()),
        Decision::Ignored { .. }
    ));
}

#[test]
fn unusable_key_material_is_denied() {
    let key = key(KeyType::EcdsaP256);
    let mut both = pcr_with_csr(&stub_csr(key), now());
    both["spec"]["pkixPublicKey"] = json!(b64(&spki(key)));
    both["spec"]["proofOfPossession"] = json!(b64(b"proof"));
    let mut neither = pcr_with_csr(&stub_csr(key), now());
    neither["spec"]["stubPKCS10Request"] = Value::Null;
    let mut not_base64 = pcr_with_csr(&stub_csr(key), now());
    not_base64["spec"]["stubPKCS10Request"] = json!("%%%");
    let mut v1_with_pair = pcr_with_pkix(&spki(key), now());
    v1_with_pair["apiVersion"] = json!("certificates.k8s.io/v1");
    let rows = [
        (
            both,
            "InvalidRequest",
            "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set",
        ),
        (neither, "InvalidRequest", "exactly one of"),
        (
            not_base64,
            "InvalidRequest",
            "spec.stubPKCS10Request is not base64",
        ),
        (
            pcr_with_csr(b"not a request", now()),
            "InvalidKeyMaterial",
            "not a DER PKCS#10",
        ),
        (
            pcr_with_pkix(b"\x30\x00", now()),
            "InvalidKeyMaterial",
            "spec.pkixPublicKey is not a DER",
        ),
        (v1_with_pair, "InvalidRequest", "only stubPKCS10Request"),
    ];
    for (pcr, want_reason, want_message) in rows {
        let (reason, message) = denied(decide_now(&pcr, &facts(), &policy(), now()));
        assert_eq!(reason, want_reason, "{message}");
        assert!(message.contains(want_message), "{message}");
    }
}

/// Names no object can have are denied before anything is read: one with `/` or `..` would
/// otherwise name another object in the path of the live read.
#[test]
fn names_no_object_can_have_are_denied() {
    let key = key(KeyType::EcdsaP256);
    for (field, bad) in [
        ("podName", "../../secrets/token"),
        ("podName", "App"),
        ("serviceAccountName", "a/b"),
        ("nodeName", "-node"),
        ("nodeName", &"n".repeat(254)),
    ] {
        let mut pcr = pcr_with_csr(&stub_csr(key), now());
        pcr["spec"][field] = json!(bad);
        let (reason, message) = denied(decide_now(&pcr, &facts(), &policy(), now()));
        assert_eq!(reason, "InvalidRequest", "{field}={bad}: {message}");
        assert!(
            message.contains(&format!("spec.{field} is not a valid object name")),
            "{message}"
        );
    }
}

#[test]
fn a_v1_pcr_is_read_as_a_v1beta1_one() {
    let key = key(KeyType::Ed25519);
    let mut pcr = pcr_with_csr(&stub_csr(key), now());
    pcr["apiVersion"] = json!("certificates.k8s.io/v1");
    issue(&pcr, &spki(key), KeyType::Ed25519);
}

#[test]
fn what_is_not_a_pcr_is_an_error_for_the_caller() {
    let mut pod = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    pod["kind"] = json!("Pod");
    let error = ready(decide_json(&pod, &facts(), &policy(), now(), ca())).unwrap_err();
    assert!(matches!(
        error,
        DecideError::Request(RequestError::NotAPodCertificateRequest { .. })
    ));
    let mut nameless = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    nameless["metadata"]["name"] = Value::Null;
    assert!(ready(decide_json(&nameless, &facts(), &policy(), now(), ca())).is_err());
}

fn lifetime(issued: &Issued) -> i64 {
    issued
        .status
        .not_after
        .unwrap()
        .duration_since(issued.status.not_before.unwrap())
        .as_secs()
}

#[test]
fn lifetimes_at_each_bound() {
    let key = key(KeyType::EcdsaP256);
    let with_max = |max: Value| {
        let mut pcr = pcr_with_csr(&stub_csr(key), now());
        pcr["spec"]["maxExpirationSeconds"] = max;
        pcr
    };
    let mut long_policy = policy();
    long_policy.signers[0].max_expiration_seconds = 7_862_400;
    let mut hour_policy = policy();
    hour_policy.signers[0].max_expiration_seconds = 3600;
    let rows = [
        (
            "the PCR's minimum",
            with_max(json!(3600)),
            policy(),
            3600,
            2700,
        ),
        (
            "kube's default",
            with_max(Value::Null),
            policy(),
            86_400,
            64_800,
        ),
        (
            "the policy below the PCR",
            with_max(json!(86_400)),
            hour_policy,
            3600,
            2700,
        ),
        (
            "kube's maximum",
            with_max(json!(7_862_400)),
            long_policy.clone(),
            7_862_400,
            5_896_800,
        ),
        (
            "the PCR below the policy",
            with_max(json!(7200)),
            long_policy,
            7200,
            5400,
        ),
    ];
    for (row, pcr, policy, want, refresh_after) in rows {
        let issued = issued(decide_now(&pcr, &facts(), &policy, now()));
        assert_eq!(lifetime(&issued), want, "{row}");
        let nb = issued.status.not_before.unwrap();
        assert_eq!(nb, now() - SignedDuration::from_secs(60), "{row}");
        assert_eq!(
            issued.status.begin_refresh_at,
            Some(nb + SignedDuration::from_secs(refresh_after)),
            "{row}"
        );
    }
}

fn short_ca(not_before: Timestamp, not_after: Timestamp) -> MemoryCa {
    MemoryCa::generate(CaCurve::P384, "short", not_before, not_after)
        .unwrap()
        .0
}

#[test]
fn a_leaf_never_outlives_its_ca_and_a_ca_near_its_end_requeues() {
    let key = key(KeyType::EcdsaP256);
    let pcr = pcr_with_csr(&stub_csr(key), now());
    let nb = now() - SignedDuration::from_secs(60);
    let from = at("2026-01-01T00:00:00Z");

    let ending = short_ca(from, nb + SignedDuration::from_secs(5400));
    let cut = issued(ready(decide_json(&pcr, &facts(), &policy(), now(), &ending)).unwrap());
    assert_eq!(lifetime(&cut), 5400, "cut to the CA's end");

    let at_end = short_ca(from, nb + SignedDuration::from_secs(3599));
    let decision = ready(decide_json(&pcr, &facts(), &policy(), now(), &at_end)).unwrap();
    assert_eq!(requeued(decision).0, "CAExpiring");

    // A CA made this second signs at once, its leaf starting with it rather than backdated.
    let fresh = short_ca(now(), now() + SignedDuration::from_hours(1000));
    let leaf = issued(ready(decide_json(&pcr, &facts(), &policy(), now(), &fresh)).unwrap());
    assert_eq!(leaf.status.not_before, Some(now()));

    let future = short_ca(
        now() + SignedDuration::from_secs(1),
        now() + SignedDuration::from_hours(1000),
    );
    let decision = ready(decide_json(&pcr, &facts(), &policy(), now(), &future)).unwrap();
    assert_eq!(requeued(decision).0, "CANotYetValid");
}

#[test]
fn a_clock_behind_kube_apiservers_requeues_before_kube_would_refuse_the_leaf() {
    let key = key(KeyType::EcdsaP256);
    let created_at = |ahead: i64| {
        let mut pcr = pcr_with_csr(&stub_csr(key), now());
        pcr["metadata"]["creationTimestamp"] =
            json!(status::rfc3339(now() + SignedDuration::from_secs(ahead)));
        pcr
    };
    // Created 3 min 59 s "in the future": kube's clock is at least that far ahead, and a
    // notBefore of now − 1 min is still within its 5 minutes.
    let issued = issued(decide_now(&created_at(239), &facts(), &policy(), now()));
    let request = PodCertificateRequest::from_json(&created_at(239)).unwrap();
    let key = &request.spec.as_ref().unwrap().key;
    let at_kube = |skew: i64| {
        validate_status_update(
            &PodCertificateRequestStatus::default(),
            &issued.status,
            StatusContext {
                key: Some(key),
                max_expiration_seconds: 7200,
                now: now() + SignedDuration::from_secs(skew),
            },
        )
    };
    at_kube(239).unwrap();
    // kube's window around notBefore = now − 60 s is open at both ends: (now − 360, now + 240).
    let refused = at_kube(240).unwrap_err();
    assert!(
        refused
            .to_string()
            .ends_with("must be set to within 5 minutes of kube-apiserver's current time")
    );
    at_kube(-359).unwrap();
    at_kube(-360).unwrap_err();

    let (reason, message) = requeued(decide_now(&created_at(240), &facts(), &policy(), now()));
    assert_eq!(reason, "ClockBehind");
    assert!(message.contains("synchronise the clocks"), "{message}");
}

enum Mode {
    Unavailable,
    Refused,
    Garbage,
    RawEcdsa,
}

/// The shared CA behind a holder that misbehaves in one way.
struct Holder(Mode);

impl CaSigner for Holder {
    fn algorithm(&self) -> CaAlgorithm {
        ca().algorithm()
    }
    fn certificate(&self) -> &CaCertificate {
        ca().certificate()
    }
    fn sign(&self, tbs: Vec<u8>) -> CaSignature<'_> {
        let cause = || Arc::new(std::io::Error::other("device says no")) as Arc<_>;
        let signature = match self.0 {
            Mode::Unavailable => Err(SignError::Unavailable(cause())),
            Mode::Refused => Err(SignError::Refused(cause())),
            Mode::Garbage => Ok(vec![0x30, 0x00]),
            // A holder that forgot to convert r || s: the signature does not parse as DER.
            Mode::RawEcdsa => ready(ca().sign(tbs)).map(|der| der[der.len() - 64..].to_vec()),
        };
        Box::pin(std::future::ready(signature))
    }
}

#[test]
fn a_ca_that_cannot_sign_requeues_and_one_that_refuses_fails() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let decide_with = |mode| ready(decide_json(&pcr, &facts(), &policy(), now(), &Holder(mode)));

    let (reason, message) = requeued(decide_with(Mode::Unavailable).unwrap());
    assert_eq!(reason, "CAUnavailable");
    assert!(message.contains("device says no"), "{message}");

    match decide_with(Mode::Refused).unwrap() {
        Decision::Failed { reason, status, .. } => {
            assert_eq!(reason, "SigningRefused");
            assert_eq!(status.terminal_condition(), Some("Failed"));
        }
        other => panic!("expected Failed, got {other:?}"),
    }

    for mode in [Mode::Garbage, Mode::RawEcdsa] {
        let error = decide_with(mode).unwrap_err();
        assert!(matches!(error, DecideError::BadSignature(_)), "{error}");
    }
}

#[test]
fn the_captured_pcr_reads_with_its_nulls_and_defaults() {
    let pcr = vector_pcr(now());
    let request = PodCertificateRequest::from_json(&pcr).unwrap();
    assert_eq!(
        (request.namespace.as_str(), request.name.as_str()),
        (NAMESPACE, "req-z6wp8")
    );
    assert_eq!(request.resource_version.as_deref(), Some("4711"));
    assert!(!request.is_terminal());
    let spec = request.spec.unwrap();
    assert_eq!(spec.key_form, KeyForm::StubPkcs10);
    assert_eq!(spec.key.key_type(), Ok(KeyType::EcdsaP256));
    assert_eq!(
        (spec.pod_uid.as_str(), spec.node_uid.as_str()),
        (POD_UID, NODE_UID)
    );
    assert_eq!(spec.max_expiration_seconds, 7200);
    let mut defaulted = pcr.clone();
    defaulted["spec"]
        .as_object_mut()
        .unwrap()
        .remove("maxExpirationSeconds");
    let spec = PodCertificateRequest::from_json(&defaulted)
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.max_expiration_seconds, 86_400);
}

#[test]
fn the_status_put_body_is_the_pcr_as_read_with_the_new_status() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let issued = issued(decide_now(&pcr, &facts(), &policy(), now()));
    let body = with_status(&pcr, &issued.status);
    assert_eq!(body["metadata"]["resourceVersion"], "4711");
    assert_eq!(body["spec"], pcr["spec"]);
    assert_eq!(body["status"]["notAfter"], "2026-11-27T19:16:09Z");
    let read_back = PodCertificateRequest::from_json(&body).unwrap();
    assert!(read_back.is_terminal());
    assert!(matches!(
        decide_now(&body, &facts(), &policy(), now()),
        Decision::Ignored { .. }
    ));
}

/// A holder whose chain is broken: the status would draw a 422, so decide says so instead.
struct BrokenChain(Vec<Vec<u8>>);

impl CaSigner for BrokenChain {
    fn algorithm(&self) -> CaAlgorithm {
        ca().algorithm()
    }
    fn certificate(&self) -> &CaCertificate {
        ca().certificate()
    }
    fn chain(&self) -> &[Vec<u8>] {
        &self.0
    }
    fn sign(&self, tbs: Vec<u8>) -> CaSignature<'_> {
        ca().sign(tbs)
    }
}

#[test]
fn a_status_kube_would_refuse_is_an_error_never_written() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let holder = BrokenChain(vec![b"not a certificate".to_vec()]);
    match ready(decide_json(&pcr, &facts(), &policy(), now(), &holder)) {
        Err(DecideError::StatusRejected(rejected)) => assert!(
            rejected
                .to_string()
                .ends_with("intermediate certificate does not parse as valid X.509"),
            "{rejected}"
        ),
        other => panic!("expected StatusRejected, got {other:?}"),
    }
    // With the CA's own certificate as the intermediate, the chain has two blocks, leaf first.
    let holder = BrokenChain(vec![ca().certificate().der().to_vec()]);
    let issued = issued(ready(decide_json(&pcr, &facts(), &policy(), now(), &holder)).unwrap());
    let chain = &issued.status.certificate_chain;
    assert_eq!(chain.matches("-----BEGIN CERTIFICATE-----").count(), 2);
    assert!(chain.ends_with(&pem_of(ca().certificate().der())));
}

/// The default policy with DNS name templates.
fn dns_policy(templates: &[&str]) -> PodCertificatePolicy {
    let mut policy = policy();
    policy.signers[0].dns_names = templates.iter().map(|t| (*t).to_owned()).collect();
    policy.validate().unwrap();
    policy
}

fn service(name: &str, selector: &[(&str, &str)]) -> ServiceFacts {
    ServiceFacts {
        name: name.into(),
        selector: selector
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        external_name: false,
    }
}

fn with_services(services: Vec<ServiceFacts>) -> Facts {
    Facts {
        services: Live::Found(services),
        ..with_pod(|p| {
            p.labels.insert("tier".into(), "web".into());
        })
    }
}

/// Issues with `policy` and `facts`, checking the leaf and the status as [`issue`] does.
fn issue_with(pcr: &Value, facts: &Facts, policy: &PodCertificatePolicy) -> Box<Issued> {
    let issued = issued(decide_now(pcr, facts, policy, now()));
    let request = PodCertificateRequest::from_json(pcr).unwrap();
    let spec = request.spec.as_ref().unwrap();
    check_leaf(&issued, spec.key.spki(), KeyType::EcdsaP256);
    validate_status_update(
        &request.status,
        &issued.status,
        StatusContext {
            key: Some(&spec.key),
            max_expiration_seconds: spec.max_expiration_seconds,
            now: now(),
        },
    )
    .unwrap();
    issued
}

#[test]
fn dns_names_come_from_the_services_that_select_the_pod_and_nothing_else() {
    let templates = [
        "${service}.${namespace}.svc",
        "${service}.${namespace}.svc.cluster.local",
    ];
    let with_templates = dns_policy(&templates);
    // The CSR asks for names of its own: none reaches the leaf.
    let mut params = CertificateParams::new(vec!["kubernetes.default.svc".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::DnsName("evil.demo.svc".try_into().unwrap()));
    let key = key(KeyType::EcdsaP256);
    let pcr = pcr_with_csr(&csr_with(key, params, DistinguishedName::new()), now());
    let rows: Vec<(&str, Vec<ServiceFacts>, Vec<&str>)> = vec![
        (
            "a Service selecting the pod by a subset of its labels",
            vec![service("web", &[("app", "app")])],
            vec!["web.demo.svc", "web.demo.svc.cluster.local"],
        ),
        (
            "two Services, in any order; the names sorted",
            vec![
                service("web", &[("app", "app"), ("tier", "web")]),
                service("api", &[("tier", "web")]),
            ],
            vec![
                "api.demo.svc",
                "api.demo.svc.cluster.local",
                "web.demo.svc",
                "web.demo.svc.cluster.local",
            ],
        ),
        (
            "a selector with a label the pod does not have",
            vec![service("db", &[("app", "app"), ("tier", "db")])],
            vec![],
        ),
        (
            "a selector with another value",
            vec![service("other", &[("app", "other")])],
            vec![],
        ),
        (
            "an empty selector (endpoints someone else chose)",
            vec![service("manual", &[])],
            vec![],
        ),
        (
            "an ExternalName Service",
            vec![ServiceFacts {
                external_name: true,
                ..service("outside", &[("app", "app")])
            }],
            vec![],
        ),
        ("no Services", vec![], vec![]),
    ];
    for (row, services, want) in rows {
        let issued = issue_with(&pcr, &with_services(services), &with_templates);
        assert_eq!(issued.dns_names, want, "{row}");
        assert_eq!(issued.services_left_out, 0, "{row}");
        let der = leaf_der(&issued.status.certificate_chain);
        for asked in ["kubernetes.default", "evil"] {
            assert!(
                !der.windows(asked.len()).any(|w| w == asked.as_bytes()),
                "{row}: {asked} from the CSR is in the leaf"
            );
        }
    }

    // Without templates nothing is looked at: Services unread still issue, with no names.
    let unread = Facts {
        services: Live::Unreadable("not read".into()),
        ..facts()
    };
    assert!(issue_with(&pcr, &unread, &policy()).dns_names.is_empty());
}

#[test]
fn services_that_cannot_be_read_requeue_when_the_policy_wants_dns_names() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let facts = Facts {
        services: Live::Unreadable("connection refused".into()),
        ..facts()
    };
    let (reason, message) = requeued(decide_now(
        &pcr,
        &facts,
        &dns_policy(&["${service}.${namespace}.svc"]),
        now(),
    ));
    assert_eq!(reason, "FactsUnavailable");
    assert!(
        message.contains("Services") && message.contains("connection refused"),
        "{message}"
    );
}

#[test]
fn a_namespace_of_many_services_gives_a_bounded_leaf() {
    let pcr = pcr_with_csr(&stub_csr(key(KeyType::EcdsaP256)), now());
    let services: Vec<ServiceFacts> = (0..200)
        .rev()
        .map(|i| service(&format!("svc-{i:03}"), &[("app", "app")]))
        .collect();
    // Two templates: the first 32 Services by name.
    let two = dns_policy(&["${service}.${namespace}.svc", "${service}.example.com"]);
    let issued = issue_with(&pcr, &with_services(services.clone()), &two);
    assert_eq!(issued.dns_names.len(), 64);
    assert_eq!(issued.services_left_out, 200 - 32);
    assert!(issued.dns_names.contains(&"svc-031.demo.svc".to_owned()));
    assert!(!issued.dns_names.contains(&"svc-032.demo.svc".to_owned()));
    // Eight templates: at most 100 names, so 12 Services.
    let templates: Vec<String> = (0..8)
        .map(|i| format!("${{service}}.t{i}.example"))
        .collect();
    let refs: Vec<&str> = templates.iter().map(String::as_str).collect();
    let issued = issue_with(&pcr, &with_services(services), &dns_policy(&refs));
    assert_eq!(issued.dns_names.len(), 96);
    assert_eq!(issued.services_left_out, 200 - 12);
}
