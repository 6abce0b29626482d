//! Serving the API over TLS: rustls (aws-lc-rs), HTTP/1.1 and HTTP/2 by ALPN, a serving
//! certificate reloaded when its files change, the verified client certificate attached to
//! every request on its connection, graceful shutdown. The versions and cipher suites are
//! kube-apiserver's flags with Go's meaning ([`TlsSettings`]), within what rustls implements:
//! TLS 1.2 and 1.3, ECDHE key exchange and AEAD ciphers only.
//!
//! This is a small accept loop over tokio-rustls and hyper-util rather than axum-server: it is
//! where the peer certificate of a connection is at hand, to hand to the authenticator.
//!
//! Three parts: `config` (the rustls configuration: versions, cipher suites, client
//! certificates, and the errors of setting it up), `certificate` (the serving certificate and
//! key, loaded and reloaded from their files) and `accept` (the accept loop and each
//! connection's life).

mod accept;
mod certificate;
mod config;

pub use accept::serve;
pub use certificate::{ServingCertificate, TlsFiles};
pub use config::{TlsError, TlsMinVersion, TlsSettings, server_config};

/// The target of every log line of the three parts: `warrant_server::tls`, the name they had
/// as one file, so that filters (`--log-level warrant_server::tls=debug`) and log readers see
/// the lines under the same name.
const LOG_TARGET: &str = module_path!();

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use rcgen::{CertificateParams, KeyPair};

    use super::*;

    /// A subscriber that keeps the target of every event.
    struct Targets(Arc<Mutex<Vec<String>>>);

    impl tracing::Subscriber for Targets {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            self.0
                .lock()
                .unwrap()
                .push(event.metadata().target().to_owned());
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// The parts log under the name they had as one file, which `--log-level` filters name.
    #[test]
    fn log_lines_keep_the_modules_name() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        let targets = Arc::new(Mutex::new(Vec::new()));
        tracing::subscriber::with_default(Targets(targets.clone()), || {
            // A warning from the configuration: the suite list has no effect with TLS 1.3.
            TlsSettings::new(TlsMinVersion::Tls13, &["TLS_AES_128_GCM_SHA256".to_owned()]).unwrap();
            // A reload that succeeds and one that fails.
            let certificate = ServingCertificate::load(&files).unwrap();
            certificate.reload().unwrap();
            std::fs::remove_file(&files.key).unwrap();
            certificate.reload().unwrap_err();
        });
        assert_eq!(*targets.lock().unwrap(), ["warrant_server::tls"; 3]);
    }
}
