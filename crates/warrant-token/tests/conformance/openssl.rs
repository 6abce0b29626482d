//! Independent checks with openssl: tokens warrant signs verify with `openssl dgst -verify`, and
//! keys and signatures that openssl makes (PKCS#1, PKCS#8, SEC1, certificates) work in warrant.
//! These tests need the `openssl` command; `.ci/run` installs it.

use std::path::PathBuf;
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use warrant_token::{
    Algorithm, KeyError, KeyType, TokenError, Verifier, signing_key_from_pem,
    verifying_keys_from_pem,
};

use crate::support::{self, ISSUER, now};

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, data).unwrap();
        path
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).unwrap()
    }

    /// Runs openssl in this directory; panics with its stderr on failure.
    fn openssl(&self, args: &[&str]) -> Vec<u8> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.0.path())
            .output()
            .expect("the openssl command is required for these tests");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}

fn digest(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::RS256 | Algorithm::ES256 => "-sha256",
        Algorithm::ES384 => "-sha384",
        Algorithm::ES512 => "-sha512",
    }
}

fn coordinate_len(alg: Algorithm) -> usize {
    match alg {
        Algorithm::RS256 => 0,
        Algorithm::ES256 => 32,
        Algorithm::ES384 => 48,
        Algorithm::ES512 => 66,
    }
}

/// ECDSA `r || s` (JWS) to DER `SEQUENCE { INTEGER r, INTEGER s }` (openssl).
fn ecdsa_to_der(sig: &[u8]) -> Vec<u8> {
    let int = |mut v: &[u8]| {
        while v.len() > 1 && v[0] == 0 {
            v = &v[1..];
        }
        let mut out = vec![0x02];
        let pad = v[0] & 0x80 != 0;
        push_len(&mut out, v.len() + usize::from(pad));
        if pad {
            out.push(0);
        }
        out.extend_from_slice(v);
        out
    };
    let (r, s) = sig.split_at(sig.len() / 2);
    let body = [int(r), int(s)].concat();
    let mut out = vec![0x30];
    push_len(&mut out, body.len());
    out.extend(body);
    out
}

fn push_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        out.extend([0x81, len as u8]);
    }
}

/// DER `SEQUENCE { INTEGER r, INTEGER s }` to fixed-width `r || s`.
fn der_to_ecdsa(der: &[u8], width: usize) -> Vec<u8> {
    fn read(input: &[u8]) -> (&[u8], &[u8]) {
        let (len, header) = if input[1] < 0x80 {
            (input[1] as usize, 2)
        } else {
            (input[2] as usize, 3)
        };
        (&input[header..header + len], &input[header + len..])
    }
    let (seq, _) = read(der);
    let (r, rest) = read(seq);
    let (s, _) = read(rest);
    let fixed = |v: &[u8]| {
        let v = &v[v.len().saturating_sub(width)..];
        [vec![0; width - v.len()], v.to_vec()].concat()
    };
    [fixed(r), fixed(s)].concat()
}

#[test]
fn warrant_tokens_verify_with_openssl() {
    let dir = Dir::new();
    for key_type in [
        KeyType::Rsa2048,
        KeyType::P256,
        KeyType::P384,
        KeyType::P521,
    ] {
        let key = support::key(key_type);
        let token = key.sign(&support::claims()).unwrap();
        let (input, sig) = token.rsplit_once('.').unwrap();
        let mut sig = URL_SAFE_NO_PAD.decode(sig).unwrap();
        if key.algorithm() != Algorithm::RS256 {
            assert_eq!(sig.len(), 2 * coordinate_len(key.algorithm()));
            sig = ecdsa_to_der(&sig);
        }
        dir.write("pub.pem", key.verifying_key().to_pem().as_bytes());
        dir.write("input", input.as_bytes());
        dir.write("sig", &sig);
        let out = dir.openssl(&[
            "dgst",
            digest(key.algorithm()),
            "-verify",
            "pub.pem",
            "-signature",
            "sig",
            "input",
        ]);
        assert_eq!(
            String::from_utf8_lossy(&out).trim(),
            "Verified OK",
            "{key_type:?}"
        );

        // openssl's own key ID computation: SHA-256 of the DER SubjectPublicKeyInfo.
        dir.openssl(&[
            "pkey", "-pubin", "-in", "pub.pem", "-outform", "DER", "-out", "pub.der",
        ]);
        let hash = dir.openssl(&["dgst", "-sha256", "-binary", "pub.der"]);
        assert_eq!(URL_SAFE_NO_PAD.encode(hash), key.kid());
    }
}

/// Each way openssl writes a private key, and the signatures openssl makes with it.
#[test]
fn openssl_keys_and_signatures_work_in_warrant() {
    let dir = Dir::new();
    let cases: &[(&str, &[&str], Algorithm, &str)] = &[
        (
            "RSA PKCS#1",
            &["genrsa", "-traditional", "-out", "k.pem", "2048"],
            Algorithm::RS256,
            "RSA PRIVATE KEY",
        ),
        (
            "RSA PKCS#8 3072",
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:3072",
                "-out",
                "k.pem",
            ],
            Algorithm::RS256,
            "PRIVATE KEY",
        ),
        (
            "P-256 SEC1",
            &[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                "k.pem",
            ],
            Algorithm::ES256,
            "EC PRIVATE KEY",
        ),
        (
            "P-384 PKCS#8",
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-384",
                "-out",
                "k.pem",
            ],
            Algorithm::ES384,
            "PRIVATE KEY",
        ),
        // With an EC PARAMETERS block first, which is skipped as kube-apiserver skips it.
        (
            "P-521 SEC1 with parameters",
            &["ecparam", "-name", "secp521r1", "-genkey", "-out", "k.pem"],
            Algorithm::ES512,
            "EC PRIVATE KEY",
        ),
    ];
    for (name, generate, alg, label) in cases {
        dir.openssl(generate);
        let pem = dir.read("k.pem");
        assert!(
            String::from_utf8_lossy(&pem).contains(&format!("BEGIN {label}-----")),
            "{name}"
        );
        let key = signing_key_from_pem(&pem).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(key.algorithm(), *alg, "{name}");

        // The public key openssl derives has the same kid.
        dir.openssl(&["pkey", "-in", "k.pem", "-pubout", "-out", "pub.pem"]);
        let public = verifying_keys_from_pem(&dir.read("pub.pem")).unwrap();
        assert_eq!(public[0].kid(), key.kid(), "{name}");
        // So does a certificate for it.
        dir.openssl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            "k.pem",
            "-subj",
            "/CN=warrant-test",
            "-days",
            "1",
            "-out",
            "cert.pem",
        ]);
        let from_cert = verifying_keys_from_pem(&dir.read("cert.pem")).unwrap();
        assert_eq!(from_cert[0].kid(), key.kid(), "{name}");
        // A key file may hold the private key too; it verifies as its public half.
        assert_eq!(
            verifying_keys_from_pem(&pem).unwrap()[0].kid(),
            key.kid(),
            "{name}"
        );

        // A token signed by openssl verifies in warrant.
        let header = URL_SAFE_NO_PAD.encode(format!(
            r#"{{"alg":"{}","kid":"{}"}}"#,
            alg.name(),
            key.kid()
        ));
        let input = format!(
            "{header}.{}",
            URL_SAFE_NO_PAD.encode(support::claims().to_json())
        );
        dir.write("input", input.as_bytes());
        let mut sig = dir.openssl(&["dgst", digest(*alg), "-sign", "k.pem", "input"]);
        if *alg != Algorithm::RS256 {
            sig = der_to_ecdsa(&sig, coordinate_len(*alg));
        }
        let token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(&sig));
        let verifier = Verifier::new(vec![ISSUER.into()], vec![ISSUER.into()], public);
        assert_eq!(
            verifier.verify(&token, &[], now()).map(|_| ()),
            Ok(()),
            "{name}"
        );
        // …and the same token with one signature bit flipped does not.
        sig[5] ^= 1;
        let bad = format!("{input}.{}", URL_SAFE_NO_PAD.encode(&sig));
        assert_eq!(
            verifier.verify(&bad, &[], now()).map(|_| ()),
            Err(TokenError::Signature),
            "{name}"
        );
    }
}

#[test]
fn keys_warrant_cannot_use_are_reported() {
    let dir = Dir::new();
    dir.openssl(&["genrsa", "-out", "small.pem", "1024"]);
    assert_eq!(
        signing_key_from_pem(&dir.read("small.pem")).unwrap_err(),
        KeyError::RsaSize(1024)
    );
    dir.openssl(&["pkey", "-in", "small.pem", "-pubout", "-out", "small.pub"]);
    assert_eq!(
        verifying_keys_from_pem(&dir.read("small.pub")).unwrap_err(),
        KeyError::RsaSize(1024)
    );

    dir.openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:secp256k1",
        "-out",
        "k1.pem",
    ]);
    assert!(signing_key_from_pem(&dir.read("k1.pem")).is_err());
    dir.openssl(&["pkey", "-in", "k1.pem", "-pubout", "-out", "k1.pub"]);
    assert_eq!(
        verifying_keys_from_pem(&dir.read("k1.pub")).unwrap_err(),
        KeyError::Curve
    );

    dir.openssl(&["genpkey", "-algorithm", "ED25519", "-out", "ed.pem"]);
    assert!(matches!(
        signing_key_from_pem(&dir.read("ed.pem")),
        Err(KeyError::Invalid { .. })
    ));

    dir.openssl(&[
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-aes256",
        "-pass",
        "pass:x",
        "-out",
        "enc.pem",
    ]);
    assert_eq!(
        signing_key_from_pem(&dir.read("enc.pem")).unwrap_err(),
        KeyError::Encrypted
    );
    dir.openssl(&[
        "genrsa",
        "-traditional",
        "-aes256",
        "-passout",
        "pass:x",
        "-out",
        "enc1.pem",
        "2048",
    ]);
    assert_eq!(
        verifying_keys_from_pem(&dir.read("enc1.pem")).unwrap_err(),
        KeyError::Encrypted
    );
}
