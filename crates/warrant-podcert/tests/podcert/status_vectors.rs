//! The mirror of kube-apiserver's status rules against kube-apiserver's own answers: every
//! status write v1.36.2 refused for a status rule is refused here with the same message, and
//! every write it accepted is accepted. The vectors kept no certificates, so each case's leaf
//! is remade with the times its message shows (kube's clock at 17:16:56, leaves from
//! 17:15:56 for 2 h, refresh an hour in, unless the case says otherwise).

use jiff::{SignedDuration, Timestamp};
use rcgen::KeyPair;
use serde_json::Value;
use warrant_podcert::certificate::{LeafSpec, sign_leaf};
use warrant_podcert::status::{self, Condition};
use warrant_podcert::*;

use crate::support::*;

const MINUTE: SignedDuration = SignedDuration::from_secs(60);
const HOUR: SignedDuration = SignedDuration::from_secs(3600);

fn nb() -> Timestamp {
    vector_now() - MINUTE
}

/// A chain of one leaf for `key` from `not_before` to `not_after`.
fn chain(key: &KeyPair, not_before: Timestamp, not_after: Timestamp) -> String {
    let spki = spki(key);
    let key_type = RequestedKey::from_spki(&spki).unwrap().key_type().unwrap();
    let leaf = ready(sign_leaf(
        ca(),
        &LeafSpec {
            spki: &spki,
            key_type,
            spiffe_id: SPIFFE_ID,
            dns_names: &[],
            not_before,
            not_after,
        },
    ))
    .unwrap();
    pem_of(&leaf.der)
}

fn condition(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        observed_generation: 0,
        last_transition_time: Some(vector_now()),
        reason: reason.into(),
        message: String::new(),
    }
}

/// An Issued status with `chain` and the three times.
fn issued_status(
    chain: String,
    nb: Timestamp,
    na: Timestamp,
    bra: Option<Timestamp>,
) -> PodCertificateRequestStatus {
    PodCertificateRequestStatus {
        conditions: vec![condition("Issued", "True", "Issued")],
        certificate_chain: chain,
        not_before: Some(nb),
        begin_refresh_at: bra,
        not_after: Some(na),
    }
}

/// The default leaf of the vectors, for the PCR's key, and its status.
fn default_issued() -> PodCertificateRequestStatus {
    let key = key(KeyType::EcdsaP256);
    issued_status(
        chain(key, nb(), nb() + 2 * HOUR),
        nb(),
        nb() + 2 * HOUR,
        Some(nb() + HOUR),
    )
}

fn denied_only() -> PodCertificateRequestStatus {
    PodCertificateRequestStatus {
        conditions: vec![condition("Denied", "True", "UnsupportedKeyType")],
        ..Default::default()
    }
}

/// The (old, new) statuses of a case, by its description; `None` for the cases that are not
/// about the status rules (RBAC, preconditions, the Node authorizer).
fn statuses(case: &str) -> Option<(PodCertificateRequestStatus, PodCertificateRequestStatus)> {
    let pending = PodCertificateRequestStatus::default();
    let key = key(KeyType::EcdsaP256);
    let na = nb() + 2 * HOUR;
    let new = match case {
        "Issued; leaf issued to a different P-256 key than the PCR's" => {
            let other = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
            issued_status(chain(&other, nb(), na), nb(), na, Some(nb() + HOUR))
        }
        "Issued; status.notBefore one minute later than the leaf's notBefore" => {
            issued_status(chain(key, nb(), na), nb() + MINUTE, na, Some(nb() + HOUR))
        }
        "Issued; status.notAfter one minute earlier than the leaf's notAfter" => {
            issued_status(chain(key, nb(), na), nb(), na - MINUTE, Some(nb() + HOUR))
        }
        "Issued; leaf and status notBefore = now - 10 min"
        | "Issued; leaf and status notBefore = now + 10 min" => {
            let shift = if case.ends_with("- 10 min") {
                -10 * MINUTE
            } else {
                10 * MINUTE
            };
            let nb = vector_now() + shift;
            issued_status(
                chain(key, nb, nb + 2 * HOUR),
                nb,
                nb + 2 * HOUR,
                Some(nb + HOUR),
            )
        }
        "Issued; leaf lifetime 59 min (beginRefreshAt = notBefore + 20 min)" => {
            let na = nb() + 59 * MINUTE;
            issued_status(chain(key, nb(), na), nb(), na, Some(nb() + 20 * MINUTE))
        }
        "Issued; leaf lifetime 2 h 1 min with spec.maxExpirationSeconds 7200" => {
            let na = nb() + 121 * MINUTE;
            issued_status(chain(key, nb(), na), nb(), na, Some(nb() + HOUR))
        }
        "Issued; beginRefreshAt = notBefore + 5 min" => {
            issued_status(chain(key, nb(), na), nb(), na, Some(nb() + 5 * MINUTE))
        }
        "Issued; beginRefreshAt = notAfter - 5 min" => {
            issued_status(chain(key, nb(), na), nb(), na, Some(na - 5 * MINUTE))
        }
        "Issued; beginRefreshAt absent" => issued_status(chain(key, nb(), na), nb(), na, None),
        "chain and times set, conditions empty" => PodCertificateRequestStatus {
            conditions: Vec::new(),
            ..default_issued()
        },
        "conditions Issued and Denied together" => PodCertificateRequestStatus {
            conditions: vec![
                condition("Issued", "True", "Issued"),
                condition("Denied", "True", "X"),
            ],
            ..default_issued()
        },
        "Issued condition with status False" => PodCertificateRequestStatus {
            conditions: vec![condition("Issued", "False", "Issued")],
            ..default_issued()
        },
        "Issued plus an extra condition of type WarrantAudit" => PodCertificateRequestStatus {
            conditions: vec![
                condition("Issued", "True", "Issued"),
                condition("WarrantAudit", "True", "Logged"),
            ],
            ..default_issued()
        },
        "Issued; certificateChain is a CERTIFICATE block whose body is not a certificate" => {
            PodCertificateRequestStatus {
                certificate_chain: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
                    .into(),
                ..default_issued()
            }
        }
        "PCR already Issued; beginRefreshAt changed" => {
            let old = default_issued();
            let new = PodCertificateRequestStatus {
                begin_refresh_at: Some(nb() + HOUR + MINUTE),
                ..old.clone()
            };
            return Some((old, new));
        }
        "PCR already Issued; a new valid chain and times" => {
            return Some((default_issued(), default_issued()));
        }
        "PCR already Issued; conditions replaced by Failed" => {
            let new = PodCertificateRequestStatus {
                conditions: vec![condition("Failed", "True", "HSMUnavailable")],
                ..Default::default()
            };
            return Some((default_issued(), new));
        }
        "Denied (UnsupportedKeyType) together with a chain and times" => {
            PodCertificateRequestStatus {
                conditions: denied_only().conditions,
                ..default_issued()
            }
        }
        "Failed (HSMUnavailable) condition without lastTransitionTime" => {
            PodCertificateRequestStatus {
                conditions: vec![Condition {
                    last_transition_time: None,
                    ..condition("Failed", "True", "HSMUnavailable")
                }],
                ..Default::default()
            }
        }
        "Denied condition with reason \"\"" => PodCertificateRequestStatus {
            conditions: vec![condition("Denied", "True", "")],
            ..Default::default()
        },
        // Accepted writes.
        "Issued; chain = correct leaf followed by an unrelated certificate that is not a CA and did not sign the leaf" =>
        {
            let mut status = default_issued();
            let other = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
            status.certificate_chain.push_str(&chain(&other, nb(), na));
            status
        }
        "Issued to a P-256 key (stub CSR)"
        | "Issued via JSON merge patch of {\"status\": {...}}"
        | "first of two writers with the same resourceVersion"
        | "Issued after the PCR's pod was force-deleted (the PCR itself still existed)" => {
            default_issued()
        }
        "Issued to a P-384 key (stub CSR)"
        | "Issued to an Ed25519 key (stub CSR)"
        | "Issued to an RSA-3072 key (stub CSR)" => {
            return None; // by key type, below (the PCR's key differs)
        }
        "PUT to /status of an Issued PCR with spec.podName changed to \"other\"" => {
            // The spec sent is discarded; the status sent is the stored one.
            let stored = default_issued();
            return Some((stored.clone(), stored));
        }
        "Denied, reason UnsupportedKeyType, message suggesting other key types; no other status fields" => {
            denied_only()
        }
        "Issued to the key in spec.pkixPublicKey of a PCR created in the deprecated form" => {
            default_issued()
        }
        _ => return None,
    };
    Some((pending, new))
}

/// The status-rule cases of a vector file: (case, PCR name, statuses).
fn cases(file: &str) -> Vec<(String, Value)> {
    let vectors: Value = serde_json::from_str(file).unwrap();
    vectors["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["case"].as_str().unwrap().to_owned(), c.clone()))
        .collect()
}

fn context(key: &RequestedKey, max: i64) -> StatusContext<'_> {
    StatusContext {
        key: Some(key),
        max_expiration_seconds: max,
        now: vector_now(),
    }
}

#[test]
fn every_status_kube_refused_for_a_status_rule_is_refused_with_its_message() {
    let key = RequestedKey::from_spki(&spki(key(KeyType::EcdsaP256))).unwrap();
    let mut mirrored = 0;
    for (case, vector) in cases(include_str!("../vectors/status-updates-rejected.json")) {
        let message = vector["message"].as_str().unwrap();
        let not_a_status_rule = vector["http_status"] != 422
            || message.contains(": spec.signerName: Forbidden: User ")
            || message.contains("metadata.resourceVersion");
        if not_a_status_rule {
            continue;
        }
        let (old, new) = statuses(&case).unwrap_or_else(|| panic!("no statuses for case {case:?}"));
        let name = message.split('"').nth(1).unwrap();
        let refused = validate_status_update(&old, &new, context(&key, 7200)).expect_err(&case);
        let ours = refused.message(name);
        if vector["message_truncated"] == true {
            // Cut inside the chain kube echoed (its leaf, not ours): compare around it.
            let (head, _) = message.split_once("Invalid value: \"").unwrap();
            assert!(
                ours.starts_with(&format!(
                    "{head}Invalid value: \"-----BEGIN CERTIFICATE-----\\n"
                )),
                "{case}: {ours}"
            );
            assert!(
                ours.ends_with("\": leaf certificate was not issued to the requested public key"),
                "{case}: {ours}"
            );
        } else {
            assert_eq!(ours, message, "{case}");
        }
        mirrored += 1;
    }
    assert_eq!(mirrored, 21, "the status-rule cases of the vector file");
}

#[test]
fn every_status_kube_accepted_is_accepted() {
    let p256 = RequestedKey::from_spki(&spki(key(KeyType::EcdsaP256))).unwrap();
    let mut checked = 0;
    for (case, _) in cases(include_str!("../vectors/status-updates-accepted.json")) {
        let Some((old, new)) = statuses(&case) else {
            continue;
        };
        validate_status_update(&old, &new, context(&p256, 7200))
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        checked += 1;
    }
    assert_eq!(checked, 8);
    // Issued per key type (P-384, Ed25519, RSA-3072 in the vectors; all six here).
    for key_type in KeyType::ALL {
        let key = key(key_type);
        let requested = RequestedKey::from_spki(&spki(key)).unwrap();
        let new = issued_status(
            chain(key, nb(), nb() + 2 * HOUR),
            nb(),
            nb() + 2 * HOUR,
            Some(nb() + HOUR),
        );
        validate_status_update(
            &PodCertificateRequestStatus::default(),
            &new,
            context(&requested, 7200),
        )
        .unwrap_or_else(|e| panic!("{key_type}: {e}"));
    }
}

#[test]
fn the_accepted_issued_status_holds_with_a_leaf_of_its_times() {
    let accepted: PodCertificateRequestStatus =
        serde_json::from_str(include_str!("../vectors/status-issued-accepted.json")).unwrap();
    let key = key(KeyType::EcdsaP256);
    let (nb, na) = (accepted.not_before.unwrap(), accepted.not_after.unwrap());
    let new = PodCertificateRequestStatus {
        certificate_chain: chain(key, nb, na),
        ..accepted
    };
    let requested = RequestedKey::from_spki(&spki(key)).unwrap();
    let now = status::whole_seconds(nb + MINUTE);
    validate_status_update(
        &PodCertificateRequestStatus::default(),
        &new,
        StatusContext {
            key: Some(&requested),
            max_expiration_seconds: 7200,
            now,
        },
    )
    .unwrap();
}

#[test]
fn several_condition_errors_are_reported_together_as_kube_aggregates_them() {
    let new = PodCertificateRequestStatus {
        conditions: vec![Condition {
            last_transition_time: None,
            ..condition("Bogus", "Maybe", "")
        }],
        ..Default::default()
    };
    let key = RequestedKey::from_spki(&spki(key(KeyType::EcdsaP256))).unwrap();
    let refused = validate_status_update(
        &PodCertificateRequestStatus::default(),
        &new,
        context(&key, 7200),
    )
    .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "[status.conditions.[0].type: Unsupported value: \"Bogus\": supported values: \"Issued\", \"Denied\", \"Failed\", \
         status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\", \
         status.conditions[0].lastTransitionTime: Required value, \
         status.conditions[0].reason: Required value]"
    );
}

/// The rules the vectors have no case for, with the upstream source's words.
#[test]
fn chain_rules_without_a_vector_hold_too() {
    let key = key(KeyType::EcdsaP256);
    let requested = RequestedKey::from_spki(&spki(key)).unwrap();
    let pending = PodCertificateRequestStatus::default();
    let na = nb() + 2 * HOUR;
    let with_chain = |chain: String| issued_status(chain, nb(), na, Some(nb() + HOUR));
    let refused = |status: &PodCertificateRequestStatus| {
        validate_status_update(&pending, status, context(&requested, 7200))
            .unwrap_err()
            .to_string()
    };
    let leaf = chain(key, nb(), na);

    let none = refused(&with_chain("no PEM here".into()));
    assert!(
        none.ends_with(": issued certificate chain must contain at least one certificate"),
        "{none}"
    );
    let key_first = refused(&with_chain(leaf.replace("CERTIFICATE", "PRIVATE KEY")));
    assert!(
        key_first.ends_with(
            ": issued certificate chain must consist entirely of CERTIFICATE PEM blocks"
        ),
        "{key_first}"
    );
    let key_after = refused(&with_chain(format!(
        "{leaf}{}",
        leaf.replace("CERTIFICATE", "PRIVATE KEY")
    )));
    assert!(
        key_after
            .ends_with(": issued certificate chain must consist entirely of CERTFICATE PEM blocks"),
        "{key_after}"
    );
    let junk_after = refused(&with_chain(format!(
        "{leaf}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    )));
    assert!(
        junk_after.ends_with(": intermediate certificate does not parse as valid X.509"),
        "{junk_after}"
    );
    let huge = refused(&with_chain(
        leaf.repeat(status::MAX_CERTIFICATE_CHAIN_SIZE / leaf.len() + 1),
    ));
    assert!(
        huge.starts_with("status.certificateChain: Too long"),
        "{huge}"
    );

    // DNS names kube refuses in a leaf (checked before the key, so any certificate will do).
    let mut params = rcgen::CertificateParams::new(vec![".a..b.".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(rcgen::SanType::Rfc822Name("nobody".try_into().unwrap()));
    let odd = params.self_signed(key).unwrap();
    let errors = refused(&with_chain(odd.pem()));
    assert_eq!(
        errors,
        "[status.certificateChain: Invalid value: \".a..b.\": leaf certificate's DNSName should not contain '..', \
         status.certificateChain: Invalid value: \".a..b.\": leaf certificate's DNSName should not start or end with '.', \
         status.certificateChain: Invalid value: \"nobody\": leaf certificate should not contain invalid EmailAddress]"
    );
}
