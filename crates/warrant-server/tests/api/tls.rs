//! The serving certificate is reloaded when its files change (cert-manager, Secret volumes),
//! and a pair that does not load leaves the last good one serving. Waits on reload events.

use std::path::Path;
use std::time::Duration;

use prometheus_client::registry::Registry;
use rcgen::{CertificateParams, KeyPair};
use warrant_server::{ServingCertificate, TlsFiles};

/// A self-signed certificate for `name`: (certificate PEM, key PEM, certificate DER).
fn pair(name: &str) -> (String, String, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![name.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// Replaces a file in one step, as Secret volumes and careful tools do.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test]
async fn the_serving_certificate_follows_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let (cert_a, key_a, der_a) = pair("a.test");
    std::fs::write(&files.cert, &cert_a).unwrap();
    std::fs::write(&files.key, &key_a).unwrap();
    let certificate = ServingCertificate::load(&files).unwrap();
    let mut registry = Registry::default();
    certificate.register_metrics(&mut registry);
    let served = |c: &ServingCertificate| c.chain().first().unwrap().to_vec();
    assert_eq!(served(&certificate), der_a);
    let _watch = certificate.watch().unwrap();
    let mut reloads = certificate.reloads();

    // Rotation: the key first, then the certificate. In between the pair does not match,
    // which is refused; once both are there, the new pair serves.
    let (cert_b, key_b, der_b) = pair("b.test");
    replace(&files.key, &key_b);
    replace(&files.cert, &cert_b);
    tokio::time::timeout(Duration::from_secs(20), async {
        while served(&certificate) != der_b {
            reloads.changed().await.unwrap();
        }
    })
    .await
    .expect("the new certificate is served");

    // A broken write: the last good pair stays.
    reloads.mark_unchanged();
    replace(&files.cert, "-----BEGIN CERTIFICATE-----\nnot base64\n");
    tokio::time::timeout(Duration::from_secs(20), reloads.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(served(&certificate), der_b);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("warrant_tls_serving_certificate_reloads_total{result=\"failure\"}"),
        "{text}"
    );
    assert!(text.contains("warrant_tls_serving_certificate_reloads_total{result=\"success\"}"));
    assert!(text.contains("warrant_tls_serving_certificate_expiration_timestamp_seconds "));
}
