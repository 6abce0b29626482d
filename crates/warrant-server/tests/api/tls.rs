//! The serving certificate is reloaded when its files change (cert-manager, Secret volumes),
//! and a pair that does not load leaves the last good one serving. Waits on reload events.
//! The TLS versions and cipher suites served follow kube-apiserver's flags: handshakes in
//! memory, with rustls on both sides.

use std::path::Path;
use std::time::Duration;

use prometheus_client::registry::Registry;
use rcgen::{CertificateParams, KeyPair};
use rustls::{CipherSuite, ProtocolVersion};
use warrant_auth::ClientTrust;
use warrant_server::{ServingCertificate, TlsFiles, TlsMinVersion, TlsSettings, server_config};

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

/// A server configuration with `settings` for a new self-signed ECDSA certificate for
/// `localhost` (what `warrant local-setup` makes), and the roots a client trusts it with.
fn server_with(
    settings: &TlsSettings,
) -> (
    std::sync::Arc<rustls::ServerConfig>,
    rustls::RootCertStore,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let (cert, key, der) = pair("localhost");
    std::fs::write(&files.cert, cert).unwrap();
    std::fs::write(&files.key, key).unwrap();
    let certificate = ServingCertificate::load(&files).unwrap();
    let config = server_config(&certificate, &ClientTrust::default(), settings).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.into()).unwrap();
    (config, roots, dir)
}

/// A client speaking only `versions`, offering only `suites` (all it has, if empty).
fn client(
    roots: &rustls::RootCertStore,
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: &[CipherSuite],
) -> rustls::ClientConfig {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if !suites.is_empty() {
        provider
            .cipher_suites
            .retain(|s| suites.contains(&s.suite()));
    }
    rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_no_client_auth()
}

/// A whole handshake between `client` and `server`, in memory: the version and suite agreed,
/// or the first side's error.
fn handshake(
    server: std::sync::Arc<rustls::ServerConfig>,
    client: rustls::ClientConfig,
) -> Result<(ProtocolVersion, CipherSuite), rustls::Error> {
    let mut server = rustls::ServerConnection::new(server).unwrap();
    let mut client =
        rustls::ClientConnection::new(std::sync::Arc::new(client), "localhost".try_into().unwrap())
            .unwrap();
    while client.is_handshaking() || server.is_handshaking() {
        let mut moved = false;
        while client.wants_write() {
            let mut bytes = Vec::new();
            client.write_tls(&mut bytes).unwrap();
            let mut bytes = &bytes[..];
            while !bytes.is_empty() {
                moved = true;
                server.read_tls(&mut bytes).unwrap();
                server.process_new_packets()?;
            }
        }
        while server.wants_write() {
            let mut bytes = Vec::new();
            server.write_tls(&mut bytes).unwrap();
            let mut bytes = &bytes[..];
            while !bytes.is_empty() {
                moved = true;
                client.read_tls(&mut bytes).unwrap();
                client.process_new_packets()?;
            }
        }
        assert!(moved, "the handshake stalled");
    }
    Ok((
        client.protocol_version().unwrap(),
        client.negotiated_cipher_suite().unwrap().suite(),
    ))
}

static TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
static TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// kube-apiserver's `--tls-min-version VersionTLS13`: a client that speaks only TLS 1.2 is
/// refused at the handshake (a `protocol_version` alert); TLS 1.3 is served. By default both are.
#[test]
fn a_tls13_minimum_refuses_tls12_clients() {
    let (server, roots, _dir) = server_with(&TlsSettings::default());
    assert_eq!(
        handshake(server.clone(), client(&roots, TLS12, &[]))
            .unwrap()
            .0,
        ProtocolVersion::TLSv1_2
    );
    assert_eq!(
        handshake(server, client(&roots, TLS13, &[])).unwrap().0,
        ProtocolVersion::TLSv1_3
    );

    let settings = TlsSettings::new(TlsMinVersion::parse("VersionTLS13").unwrap(), &[]).unwrap();
    let (server, roots, _dir) = server_with(&settings);
    let refused = handshake(server.clone(), client(&roots, TLS12, &[])).unwrap_err();
    assert_eq!(
        refused,
        rustls::Error::PeerIncompatible(rustls::PeerIncompatible::Tls12NotOfferedOrEnabled)
    );
    assert_eq!(
        handshake(server, client(&roots, TLS13, &[])).unwrap().0,
        ProtocolVersion::TLSv1_3
    );
}

/// `--tls-cipher-suites` restricts the TLS 1.2 suites, as in Go; TLS 1.3's stay on.
#[test]
fn the_suite_list_restricts_tls12_only() {
    let settings = TlsSettings::new(
        TlsMinVersion::Tls12,
        &["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_owned()],
    )
    .unwrap();
    let (server, roots, _dir) = server_with(&settings);
    let refused = handshake(
        server.clone(),
        client(
            &roots,
            TLS12,
            &[CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384],
        ),
    )
    .unwrap_err();
    assert_eq!(
        refused,
        rustls::Error::PeerIncompatible(rustls::PeerIncompatible::NoCipherSuitesInCommon)
    );
    assert_eq!(
        handshake(server.clone(), client(&roots, TLS12, &[])).unwrap(),
        (
            ProtocolVersion::TLSv1_2,
            CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        )
    );
    assert_eq!(
        handshake(
            server,
            client(
                &roots,
                TLS13,
                &[CipherSuite::TLS13_CHACHA20_POLY1305_SHA256]
            )
        )
        .unwrap(),
        (
            ProtocolVersion::TLSv1_3,
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
        )
    );
}
