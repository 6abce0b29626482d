//! Client certificates: the CAs they are checked against, the TLS handshake's verifier, and the
//! user a certificate names.
//!
//! What this trusts: every CA in `--client-ca-file` (or the cluster's `client-ca-file`, when
//! warrant follows the `extension-apiserver-authentication` ConfigMap), completely. Any
//! certificate such a CA signs, with the client-auth usage and within its validity, is the user
//! its subject names: CN is the user name, each O a group, `system:masters` included. Whoever
//! holds such a CA's key can be anyone.
//!
//! The handshake accepts a certificate that chains to any configured CA (client or front-proxy)
//! and rejects every other certificate; a client without one is let in, for the other
//! authenticators. Which CA vouches for a certificate is decided per request, by each
//! authenticator against its own CA, so a front-proxy certificate is never a user and a user
//! certificate never a front proxy. The CAs can change while warrant runs (the ConfigMap), so
//! the handshake verifier reads the current set on every handshake.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use jiff::Timestamp;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};
use tokio::sync::watch;

use super::frontproxy::FrontProxy;
use super::{Outcome, User, Via};

/// Why a CA bundle is unusable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CaError {
    /// The bundle could not be read or parsed.
    #[error("{origin}: {message}")]
    Bundle {
        /// The file or ConfigMap key.
        origin: String,
        /// What is wrong.
        message: String,
    },
}

/// A bundle of CA certificates that client certificates are verified against (chain, validity
/// and the client-auth extended key usage, by webpki).
#[derive(Clone)]
pub struct CaBundle {
    origin: String,
    certificates: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle")
            .field("origin", &self.origin)
            .field("certificates", &self.certificates.len())
            .finish()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn roots(certificates: &[CertificateDer<'static>], origin: &str) -> Result<RootCertStore, CaError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate.clone())
            .map_err(|e| CaError::Bundle {
                origin: origin.to_owned(),
                message: e.to_string(),
            })?;
    }
    Ok(roots)
}

impl CaBundle {
    /// Parses a PEM bundle; `origin` names it in errors and logs.
    pub fn from_pem(pem: &[u8], origin: &str) -> Result<CaBundle, CaError> {
        let invalid = |message: String| CaError::Bundle {
            origin: origin.to_owned(),
            message,
        };
        let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(e.to_string()))?;
        if certificates.is_empty() {
            return Err(invalid("no CERTIFICATE block found".to_owned()));
        }
        let roots = roots(&certificates, origin)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(CaBundle {
            origin: origin.to_owned(),
            certificates,
            verifier,
        })
    }

    /// Reads a PEM bundle from a file.
    pub fn from_file(path: &Path) -> Result<CaBundle, CaError> {
        let origin = path.display().to_string();
        let pem = std::fs::read(path).map_err(|e| CaError::Bundle {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        Self::from_pem(&pem, &origin)
    }

    /// Where the bundle came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Checks that `chain` (end entity first) chains to this bundle, is valid at `now` and may
    /// be used for client authentication.
    pub(crate) fn verify(
        &self,
        chain: &[CertificateDer<'static>],
        now: Timestamp,
    ) -> Result<(), String> {
        let Some((end_entity, intermediates)) = chain.split_first() else {
            return Err("no certificate".to_owned());
        };
        let seconds = u64::try_from(now.as_second()).unwrap_or_default();
        let now = UnixTime::since_unix_epoch(Duration::from_secs(seconds));
        self.verifier
            .verify_client_cert(end_entity, intermediates, now)
            .map(|_| ())
            .map_err(|e| format!("x509: {e}"))
    }
}

/// The user a client certificate from `ca` names, if it chains to it.
pub(crate) fn authenticate(
    ca: &CaBundle,
    chain: &[CertificateDer<'static>],
    now: Timestamp,
) -> Outcome {
    if let Err(why) = ca.verify(chain, now) {
        // Chained to another CA the handshake trusts (the front proxy's): not a user.
        return Outcome::Failed(why);
    }
    let Some(end_entity) = chain.first() else {
        return Outcome::NotMine;
    };
    match subject(end_entity) {
        Some((name, groups)) if !name.is_empty() => Outcome::User(Arc::new(User::new(
            name,
            String::new(),
            groups,
            Via::ClientCertificate,
        ))),
        _ => Outcome::Failed("x509: the certificate has no common name".to_owned()),
    }
}

/// The CN and the Os of a certificate's subject.
pub(crate) fn subject(der: &CertificateDer<'_>) -> Option<(String, Vec<String>)> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some((name, groups))
}

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
