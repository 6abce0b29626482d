//! Issue 44's benchmark: how many pod certificates one core issues a second, against the raw
//! signing rate of the CA key's holder (the goal is 90 % of it or more, as for tokens).
//!
//! For a P-256 and a P-384 CA in memory (`MemoryCa`, the holder `serve --pod-certificate-ca-*`
//! files load into), each on one thread:
//!
//! - `podcert/<curve>/ca-sign`: the holder's raw rate, `CaSigner::sign` of a real leaf's
//!   TBSCertificate (352 bytes: the TBS `decide_json` hands it);
//! - `podcert/<curve>/decide`: a whole `decide_json` to `Issued` for one PCR as a watch
//!   delivers it (JSON, a 1.36 stub CSR with an ECDSA P-256 key, no annotations), with the
//!   facts of its pod, service account and node, the policy and `now`;
//!
//! and where the rest of a decision goes, measured apart:
//!
//! - `podcert/<curve>/ca-verify`: the check of the CA's signature with the CA certificate's
//!   key that every leaf gets before it is used (a broken holder must not produce bad leaves);
//! - `podcert/pcr-from-json`: reading the PCR from its JSON (spec, key, status);
//! - `podcert/<curve>/status-mirror`: `validate_status_update` of the issued status, the
//!   mirror of kube-apiserver's rules (it parses the PEM chain and the leaf again).
//!
//! With the CA's key held in a SoftHSM2 token instead (`KeyCa` over a PKCS#11 key, as `serve
//! --pod-certificate-ca-key-dir … --key-pkcs11-uri` signs), P-256, one caller:
//!
//! - `podcert/p256-softhsm/c-sign`: the token's raw rate, one `C_Sign` of the TBS through
//!   warrant-hsm's key (the blocking threads' hop included, as for every signature);
//! - `podcert/p256-softhsm/decide`: the whole decision with that CA.
//!
//! SoftHSM2 reads its configuration once, from the environment: the bench re-runs itself with a
//! SoftHSM2 of its own in a temporary directory (warrant-testkit's `softhsm`); without
//! SoftHSM2 installed it says so and measures the CA in memory alone.
//!
//! After criterion's report the bench prints, per CA, the two medians and their ratio
//! (decisions a second over raw signatures a second), read from criterion's own estimates.
//!
//! `make bench-micro` runs it with the others (`cargo bench -p warrant-podcert --bench issue`
//! alone); docs/benchmarks.md, "Pod certificates", has figures and the breakdown.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::hint::black_box;
use std::path::PathBuf;

use base64::Engine as _;
use criterion::Criterion;
use jiff::{SignedDuration, Timestamp};
use rcgen::{CertificateParams, KeyPair, PKCS_ECDSA_P256_SHA256};
use serde_json::{Value, json};
use warrant_podcert::*;
use x509_parser::prelude::{FromDer, X509Certificate};

const SIGNER: &str = "warrant.example.com/spiffe";
const POD_UID: &str = "da4947b6-839d-4cfd-a5e6-a50f1ba67674";
const SA_UID: &str = "5a692643-4a9b-4e6c-8f6f-878dc9fc4f66";
const NODE_UID: &str = "7ec80e6e-2ac3-474f-9b7b-cbefa4bf5468";

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// A PCR as kube-apiserver v1.36 serves it (the shape of the crate's test vector), for pod
/// `demo/app` on `node1` as `app`, carrying `csr`.
fn pcr(csr: &[u8], now: Timestamp) -> Value {
    json!({
        "apiVersion": "certificates.k8s.io/v1beta1",
        "kind": "PodCertificateRequest",
        "metadata": {
            "name": "req-z6wp8",
            "generateName": "req-",
            "namespace": "demo",
            "uid": "0b8a51c4-3f55-4d0e-9a51-5d2a36f0b3f1",
            "resourceVersion": "4711",
            "creationTimestamp": status::rfc3339(now - SignedDuration::from_secs(2)),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "app", "uid": POD_UID}
            ],
        },
        "spec": {
            "signerName": SIGNER,
            "podName": "app",
            "podUID": POD_UID,
            "serviceAccountName": "app",
            "serviceAccountUID": SA_UID,
            "nodeName": "node1",
            "nodeUID": NODE_UID,
            "maxExpirationSeconds": 86_400,
            "pkixPublicKey": null,
            "proofOfPossession": null,
            "stubPKCS10Request": base64::engine::general_purpose::STANDARD.encode(csr),
        },
        "status": {},
    })
}

fn facts() -> Facts {
    Facts {
        pod: Live::Found(PodFacts {
            namespace: "demo".into(),
            name: "app".into(),
            uid: POD_UID.into(),
            node_name: "node1".into(),
            service_account_name: "app".into(),
            phase: "Running".into(),
            deletion_timestamp: None,
            labels: [("app".to_owned(), "app".to_owned())].into(),
        }),
        service_account: Live::Found(NamedObject {
            name: "app".into(),
            uid: SA_UID.into(),
        }),
        node: Live::Found(NamedObject {
            name: "node1".into(),
            uid: NODE_UID.into(),
        }),
        services: Live::Found(Vec::new()),
    }
}

fn policy() -> PodCertificatePolicy {
    let policy: PodCertificatePolicy = serde_json::from_value(json!({
        "trustDomain": "cluster.local",
        "signers": [{"signerName": SIGNER, "namespaces": ["*"]}],
    }))
    .unwrap();
    policy.validate().unwrap();
    policy
}

/// The output of a future that is ready at once (an in-memory CA signs without waiting).
fn ready<F: std::future::Future>(future: F) -> F::Output {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("an in-memory CA's signature was not ready at once"),
    }
}

/// The DER of the first certificate of a PEM chain.
fn leaf_der(chain: &str) -> Vec<u8> {
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

fn issued(decision: Decision) -> Box<Issued> {
    match decision {
        Decision::Issued(issued) => issued,
        other => panic!("expected Issued, got {other:?}"),
    }
}

const CURVES: [(&str, CaCurve); 2] = [("p256", CaCurve::P256), ("p384", CaCurve::P384)];

/// Where the re-run bench finds its SoftHSM2.
const HSM_DIR: &str = "WARRANT_PODCERT_BENCH_HSM_DIR";

/// A P-256 CA whose key is generated in the SoftHSM2 token at `dir` (made by `main`), as
/// `serve` holds a kept CA in a token: the key from warrant-hsm's holder, its root made by
/// `KeyCa`.
fn held_ca(dir: &std::path::Path, runtime: &tokio::runtime::Runtime) -> KeyCa {
    use warrant_keys::KeyPurpose;
    let softhsm = warrant_testkit::softhsm::SoftHsm2::at(dir);
    softhsm.init_token("podcert");
    let uri: warrant_hsm::Pkcs11Uri = softhsm
        .uri(
            "podcert",
            &softhsm.pin_file("pin", warrant_testkit::softhsm::PIN),
        )
        .parse()
        .unwrap();
    let token = warrant_hsm::Token::open(
        warrant_hsm::TokenConfig::new(uri),
        warrant_hsm::HsmMetrics::default(),
    )
    .unwrap();
    let holder = warrant_hsm::Pkcs11Holder::new(token);
    runtime.block_on(async {
        let key = warrant_keys::KeyHolder::generate(
            &holder,
            warrant_token::KeyType::P256,
            KeyPurpose::PodCertificateCa,
        )
        .await
        .unwrap();
        KeyCa::root(&key, at("2026-01-01T00:00:00Z"), 10 * 365 * 86_400)
            .await
            .unwrap()
    })
}

/// The CA held in SoftHSM2 against its raw `C_Sign` (see the module's doc).
fn bench_held(c: &mut Criterion, dir: &std::path::Path, pcr: &Value, facts: &Facts) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ca = held_ca(dir, &runtime);
    let (policy, now) = (policy(), at("2026-11-27T17:16:56Z"));
    let first = issued(
        runtime
            .block_on(decide_json(pcr, facts, &policy, now, &ca))
            .unwrap(),
    );
    let leaf = leaf_der(&first.status.certificate_chain);
    let (_, parsed) = X509Certificate::from_der(&leaf).unwrap();
    let tbs = parsed.tbs_certificate.as_ref().to_vec();
    c.bench_function("podcert/p256-softhsm/c-sign", |b| {
        b.iter(|| {
            runtime
                .block_on(ca.key().sign_message(black_box(tbs.clone())))
                .unwrap()
        })
    });
    c.bench_function("podcert/p256-softhsm/decide", |b| {
        b.iter(|| {
            let decision = runtime
                .block_on(decide_json(black_box(pcr), facts, &policy, now, &ca))
                .unwrap();
            assert!(matches!(decision, Decision::Issued(_)));
            decision
        })
    });
}

fn bench(c: &mut Criterion) {
    let now = at("2026-11-27T17:16:56Z");
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let csr = CertificateParams::default()
        .serialize_request(&key)
        .unwrap()
        .der()
        .to_vec();
    let pcr = pcr(&csr, now);
    let facts = facts();
    let policy = policy();

    c.bench_function("podcert/pcr-from-json", |b| {
        b.iter(|| PodCertificateRequest::from_json(black_box(&pcr)).unwrap())
    });

    for (name, curve) in CURVES {
        let (ca, _pkcs8) = MemoryCa::generate(
            curve,
            "warrant pod CA (bench)",
            at("2026-01-01T00:00:00Z"),
            at("2036-01-01T00:00:00Z"),
        )
        .unwrap();
        // One decision first: it must issue, and its leaf gives the TBS the holder signs.
        let first = issued(ready(decide_json(&pcr, &facts, &policy, now, &ca)).unwrap());
        let leaf = leaf_der(&first.status.certificate_chain);
        let (_, parsed) = X509Certificate::from_der(&leaf).unwrap();
        let tbs = parsed.tbs_certificate.as_ref().to_vec();
        let (_, ca_parsed) = X509Certificate::from_der(ca.certificate().der()).unwrap();
        let ca_point = ca_parsed.public_key().subject_public_key.data.to_vec();
        println!(
            "podcert/{name}: leaf {} bytes, TBSCertificate {} bytes",
            leaf.len(),
            tbs.len()
        );

        c.bench_function(&format!("podcert/{name}/ca-sign"), |b| {
            b.iter(|| ready(ca.sign(black_box(tbs.clone()))).unwrap())
        });
        c.bench_function(&format!("podcert/{name}/decide"), |b| {
            b.iter(|| {
                let decision =
                    ready(decide_json(black_box(&pcr), &facts, &policy, now, &ca)).unwrap();
                assert!(matches!(decision, Decision::Issued(_)));
                decision
            })
        });

        let signature = ready(ca.sign(tbs.clone())).unwrap();
        let verification: &'static dyn aws_lc_rs::signature::VerificationAlgorithm = match curve {
            CaCurve::P256 => &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1,
            CaCurve::P384 => &aws_lc_rs::signature::ECDSA_P384_SHA384_ASN1,
        };
        c.bench_function(&format!("podcert/{name}/ca-verify"), |b| {
            b.iter(|| {
                aws_lc_rs::signature::UnparsedPublicKey::new(verification, ca_point.as_slice())
                    .verify(black_box(&tbs), black_box(&signature))
                    .unwrap()
            })
        });

        let request = PodCertificateRequest::from_json(&pcr).unwrap();
        let spec = request.spec.as_ref().unwrap();
        c.bench_function(&format!("podcert/{name}/status-mirror"), |b| {
            b.iter(|| {
                validate_status_update(
                    &request.status,
                    black_box(&first.status),
                    StatusContext {
                        key: Some(&spec.key),
                        max_expiration_seconds: spec.max_expiration_seconds,
                        now,
                    },
                )
                .unwrap()
            })
        });
    }

    match std::env::var_os(HSM_DIR) {
        Some(dir) => bench_held(c, std::path::Path::new(&dir), &pcr, &facts),
        None => println!(
            "podcert/p256-softhsm: SoftHSM2 is not installed ({}): the held CA is not measured",
            warrant_testkit::softhsm::module().display()
        ),
    }
}

/// Where criterion keeps its estimates: `$CRITERION_HOME`, or `criterion` in the target
/// directory this bench was built in (`target/release/deps/issue-…` → `target`).
fn criterion_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(PathBuf::from(home));
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// The median (ns) criterion estimated for `id` in this run, if it ran.
fn median_ns(id: &str) -> Option<f64> {
    let path = criterion_home()?
        .join(id)
        .join("new")
        .join("estimates.json");
    let estimates: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    estimates.pointer("/median/point_estimate")?.as_f64()
}

/// Per CA: the raw signature, the decision and their ratio, from criterion's medians.
fn summary() {
    let cas = CURVES
        .map(|(name, _)| (name, "ca-sign"))
        .into_iter()
        .chain([("p256-softhsm", "c-sign")]);
    for (name, raw) in cas {
        let (Some(sign), Some(decide)) = (
            median_ns(&format!("podcert_{name}_{raw}")),
            median_ns(&format!("podcert_{name}_decide")),
        ) else {
            continue;
        };
        let verify = median_ns(&format!("podcert_{name}_ca-verify"));
        println!(
            "podcert/{name}: raw signature {:.1} µs ({:.0}/s), decision to Issued {:.1} µs \
             ({:.0}/s): {:.0} % of the raw rate{}",
            sign / 1e3,
            1e9 / sign,
            decide / 1e3,
            1e9 / decide,
            100.0 * sign / decide,
            verify.map_or(String::new(), |v| format!(
                "; the signature's check {:.1} µs ({:.0} % of the decision)",
                v / 1e3,
                100.0 * v / decide
            )),
        );
    }
}

fn main() {
    // SoftHSM2 reads SOFTHSM2_CONF when its module is loaded: run again with one of our own.
    let module = warrant_testkit::softhsm::module();
    if std::env::var_os(HSM_DIR).is_none() && module.exists() {
        let temp = tempfile::tempdir().unwrap();
        let softhsm = warrant_testkit::softhsm::SoftHsm2::create(temp.path());
        let status = softhsm
            .command(std::env::current_exe().unwrap())
            .args(std::env::args_os().skip(1))
            .env(HSM_DIR, softhsm.dir())
            .status()
            .unwrap();
        std::process::exit(status.code().unwrap_or(1));
    }
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
    summary();
}
