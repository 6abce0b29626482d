//! The client certificates trusted now, for the TLS handshake and the authenticators alike:
//! users' CAs ([`super::x509`]) and the front proxy's ([`super::frontproxy`]), replaced together
//! while warrant runs (the cluster's ConfigMap), read afresh by every handshake.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use tokio::sync::watch;

use super::frontproxy::FrontProxy;
use super::x509::{CaBundle, provider, roots};

/// What client certificates are trusted for, now.
#[derive(Debug, Default)]
pub(crate) struct TrustState {
    /// Users' certificates.
    pub(crate) client_ca: Option<CaBundle>,
    /// The front proxy (aggregator) and how it names users.
    pub(crate) front_proxy: Option<Arc<FrontProxy>>,
    /// The handshake's verifier: every CA above; `None` asks for no certificate.
    handshake: Option<Arc<dyn ClientCertVerifier>>,
}

impl TrustState {
    fn new(client_ca: Option<CaBundle>, front_proxy: Option<Arc<FrontProxy>>) -> TrustState {
        let mut certificates: Vec<CertificateDer<'static>> = Vec::new();
        let bundles = client_ca.iter().chain(front_proxy.iter().map(|f| &f.ca));
        for bundle in bundles {
            certificates.extend(bundle.certificates.iter().cloned());
        }
        // Each bundle was accepted on its own, so their union is too; should it not be, no
        // certificate gets through the handshake rather than any.
        let handshake = if certificates.is_empty() {
            None
        } else {
            roots(&certificates, "client CAs").ok().and_then(|roots| {
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                    .allow_unauthenticated()
                    .build()
                    .ok()
            })
        };
        TrustState {
            client_ca,
            front_proxy,
            handshake,
        }
    }
}

#[derive(Debug)]
struct TrustInner {
    current: ArcSwap<TrustState>,
    /// False until a source that is loaded later (the cluster's ConfigMap) has loaded once.
    ready: AtomicBool,
    /// Moves on every change, for tests and the ConfigMap follower to wait on.
    changes: watch::Sender<u64>,
}

/// The client CAs and front-proxy rules in force, shared by the TLS handshake and the
/// authenticators. Cheap to clone; replacing a part takes effect for the next handshake and
/// the next request.
#[derive(Debug, Clone)]
pub struct ClientTrust {
    inner: Arc<TrustInner>,
}

impl Default for ClientTrust {
    fn default() -> Self {
        ClientTrust::new(None, None)
    }
}

impl ClientTrust {
    /// Trust for users' certificates from `client_ca`, and for `front_proxy`.
    pub fn new(client_ca: Option<CaBundle>, front_proxy: Option<FrontProxy>) -> ClientTrust {
        ClientTrust {
            inner: Arc::new(TrustInner {
                current: ArcSwap::from_pointee(TrustState::new(
                    client_ca,
                    front_proxy.map(Arc::new),
                )),
                ready: AtomicBool::new(true),
                changes: watch::Sender::new(0),
            }),
        }
    }

    pub(crate) fn load(&self) -> Arc<TrustState> {
        self.inner.current.load_full()
    }

    /// Replaces the users' CA (`None`: no client-certificate users).
    pub fn set_client_ca(&self, client_ca: Option<CaBundle>) {
        let current = self.load();
        self.store(TrustState::new(client_ca, current.front_proxy.clone()));
    }

    /// Replaces the front-proxy rules (`None`: no front proxy).
    pub fn set_front_proxy(&self, front_proxy: Option<FrontProxy>) {
        let current = self.load();
        self.store(TrustState::new(
            current.client_ca.clone(),
            front_proxy.map(Arc::new),
        ));
    }

    fn store(&self, state: TrustState) {
        self.inner.current.store(Arc::new(state));
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The users' CA in force.
    pub fn client_ca(&self) -> Option<CaBundle> {
        self.load().client_ca.clone()
    }

    /// The front-proxy rules in force.
    pub fn front_proxy(&self) -> Option<Arc<FrontProxy>> {
        self.load().front_proxy.clone()
    }

    /// Marks the trust as waiting for a source that loads later (see [`ClientTrust::ready`]).
    pub fn set_ready(&self, ready: bool) {
        self.inner.ready.store(ready, Ordering::Relaxed);
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes whoever waits on [`ClientTrust::changes`] without changing anything (a source
    /// that read something it could not use says so).
    pub(crate) fn notify(&self) {
        self.inner.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// False while a source of trust that loads after startup has not loaded yet.
    pub fn ready(&self) -> bool {
        self.inner.ready.load(Ordering::Relaxed)
    }

    /// A receiver that changes whenever the trust does.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// The verifier for rustls: asks for a client certificate while any CA is configured, and
    /// accepts one only if it chains to one of them.
    pub fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::new(HandshakeVerifier {
            trust: self.clone(),
            provider: provider(),
        })
    }
}

/// rustls's view of [`ClientTrust`]: the CAs of the moment, on every handshake.
#[derive(Debug)]
struct HandshakeVerifier {
    trust: ClientTrust,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for HandshakeVerifier {
    fn offer_client_auth(&self) -> bool {
        self.trust.load().handshake.is_some()
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// No hints: the CAs change at run time and rustls borrows the hints from the verifier.
    /// Without hints, a client that has a certificate sends it.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match &self.trust.load().handshake {
            Some(verifier) => verifier.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::General(
                "no client certificate is accepted".to_owned(),
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
