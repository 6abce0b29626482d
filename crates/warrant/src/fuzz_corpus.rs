//! The fuzz targets' inputs, run as ordinary tests: every file committed under
//! `fuzz/corpus/<target>/` (the seeds, and each input a fuzzer found a bug with), and a bounded
//! number of generated inputs, through the same entry points the targets call. A fuzzing
//! campaign (`make fuzz`) explores; this keeps what it found from coming back.

use std::path::PathBuf;

use proptest::prelude::*;

/// Runs `check` on every file of the target's corpus; a target must have some.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no inputs", dir.display());
    for file in files {
        let data = std::fs::read(&file).unwrap();
        eprintln!("{}", file.display());
        check(&data);
    }
}

fn duration(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::duration::check(text);
    }
}

#[test]
fn token_corpus() {
    replay("token", warrant_token::fuzzing::token);
}

#[test]
fn signed_payload_corpus() {
    replay("signed_payload", warrant_token::fuzzing::signed_payload);
}

#[test]
fn dpop_proof_corpus() {
    replay("dpop_proof", warrant_token::fuzzing::dpop_proof);
}

#[test]
fn signed_proof_corpus() {
    replay("signed_proof", warrant_token::fuzzing::signed_proof);
}

#[test]
fn cnf_corpus() {
    replay("cnf", warrant_token::fuzzing::cnf);
}

#[test]
fn request_body_corpus() {
    replay("request_body", warrant_server::fuzzing::request_body);
}

#[test]
fn admission_review_corpus() {
    replay(
        "admission_review",
        warrant_server::fuzzing::admission_review,
    );
}

#[test]
fn request_path_corpus() {
    replay("request_path", warrant_server::fuzzing::request_path);
}

#[test]
fn manifest_corpus() {
    replay("manifest", warrant_objects::fuzzing::manifest);
}

#[test]
fn duration_corpus() {
    replay("duration", duration);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_token_text(text in "[A-Za-z0-9_.=-]{0,300}") {
        warrant_token::fuzzing::token(text.as_bytes());
    }

    #[test]
    fn any_signed_payload(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        warrant_token::fuzzing::signed_payload(&data);
    }

    #[test]
    fn any_dpop_proof(text in "[A-Za-z0-9_.=-]{0,300}") {
        warrant_token::fuzzing::dpop_proof(text.as_bytes());
    }

    #[test]
    fn any_signed_proof(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        warrant_token::fuzzing::signed_proof(&data);
    }

    #[test]
    fn any_cnf(text in r#"(\{|\}|\[|\]|,|:|"jkt"|"x5t#S256"|"jwk"|"JKT"|"[a-zA-Z0-9_-]{0,8}"|null|true|[0-9]{1,3}| ){0,24}"#) {
        warrant_token::fuzzing::cnf(text.as_bytes());
    }

    #[test]
    fn any_request_body(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        warrant_server::fuzzing::request_body(&data);
    }

    #[test]
    fn any_admission_review(
        text in r#"(\{|\}|\[|\]|,|:|"apiVersion"|"admission.k8s.io/v1"|"kind"|"AdmissionReview"|"request"|"uid"|"Pod"|"v1"|"version"|"operation"|"CREATE"|"object"|"spec"|"containers"|"initContainers"|"name"|"env"|"volumeMounts"|"volumes"|"mountPath"|"warrant-tokens"|"[a-z0-9-]{0,8}"|null|true|[0-9]{1,3}| ){0,60}"#
    ) {
        warrant_server::fuzzing::admission_review(text.as_bytes());
    }

    #[test]
    fn any_request_path(
        text in "(/|api|apis|v1|namespaces|serviceaccounts|token|tokenreviews|openapi|v3|\\.well-known|readyz|[a-z0-9.-]{1,8}|%[0-9A-Fa-f]{0,2}|\\{\\*x\\}){0,14}"
    ) {
        warrant_server::fuzzing::request_path(text.as_bytes());
    }

    #[test]
    fn any_manifest(text in "[a-zA-Z0-9:{}\\[\\], \n-]{0,400}") {
        warrant_objects::fuzzing::manifest(text.as_bytes());
    }
}
