//! Signatures checked from the published key alone, by two verifiers that share nothing with
//! warrant's signing path: aws-lc ([`verify_signature`]) and the `openssl` command
//! ([`verify_with_openssl`]). Every key holder's tests (SoftHSM2, moto's KMS, in memory) check
//! what their holder signed with these.

use std::path::Path;
use std::process::Command;

use warrant_token::{Algorithm, VerifyingKey};

/// Checks `signature` (JWS form: ECDSA as `r‖s`) over `message` with aws-lc.
#[track_caller]
pub fn verify_signature(key: &VerifyingKey, message: &[u8], signature: &[u8]) {
    use aws_lc_rs::signature as sig;
    let alg: &dyn sig::VerificationAlgorithm = match key.algorithm() {
        Algorithm::RS256 => &sig::RSA_PKCS1_2048_8192_SHA256,
        Algorithm::ES256 => &sig::ECDSA_P256_SHA256_FIXED,
        Algorithm::ES384 => &sig::ECDSA_P384_SHA384_FIXED,
        Algorithm::ES512 => &sig::ECDSA_P521_SHA512_FIXED,
    };
    sig::ParsedPublicKey::new(alg, key.spki_der())
        .expect("the published key parses")
        .verify_sig(message, signature)
        .expect("aws-lc verifies the signature with the published key");
}

/// Checks `signature` over `message` with `openssl dgst -verify`, writing its inputs into `dir`.
#[track_caller]
pub fn verify_with_openssl(dir: &Path, key: &VerifyingKey, message: &[u8], signature: &[u8]) {
    crate::tools::command("openssl", "the openssl command");
    // openssl wants ECDSA signatures as DER `SEQUENCE { r, s }`.
    let (digest, der) = match key.algorithm() {
        Algorithm::RS256 => ("-sha256", signature.to_vec()),
        Algorithm::ES256 => ("-sha256", ecdsa_der(signature)),
        Algorithm::ES384 => ("-sha384", ecdsa_der(signature)),
        Algorithm::ES512 => ("-sha512", ecdsa_der(signature)),
    };
    let n = next();
    let (pem, sig, msg) = (
        dir.join(format!("pub-{n}.pem")),
        dir.join(format!("sig-{n}.bin")),
        dir.join(format!("msg-{n}.bin")),
    );
    std::fs::write(&pem, key.to_pem()).expect("writes the public key");
    std::fs::write(&sig, der).expect("writes the signature");
    std::fs::write(&msg, message).expect("writes the message");
    let out = Command::new("openssl")
        .args(["dgst", digest, "-verify"])
        .arg(&pem)
        .arg("-signature")
        .arg(&sig)
        .arg(&msg)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Verified OK"),
        "openssl: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A number no other call in this process got, for file names.
fn next() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// A JWS ECDSA signature (`r‖s`) as DER.
fn ecdsa_der(raw: &[u8]) -> Vec<u8> {
    let (r, s) = raw.split_at(raw.len() / 2);
    let int = |v: &[u8]| {
        let v: Vec<u8> = v.iter().copied().skip_while(|&b| b == 0).collect();
        let mut body = if v.first().is_some_and(|&b| b & 0x80 != 0) {
            vec![0]
        } else {
            vec![]
        };
        body.extend(v);
        let mut out = vec![0x02];
        out.extend(der_len(body.len()));
        out.extend(body);
        out
    };
    let body = [int(r), int(s)].concat();
    let mut out = vec![0x30];
    out.extend(der_len(body.len()));
    out.extend(body);
    out
}

/// A DER length: P-521's `SEQUENCE` (up to 139 bytes) needs the long form.
fn der_len(len: usize) -> Vec<u8> {
    let len = u8::try_from(len).expect("an ECDSA signature is short");
    if len < 0x80 {
        vec![len]
    } else {
        vec![0x81, len]
    }
}
