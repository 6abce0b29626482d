//! The certificate chain a client presented on its connection, and what has been verified of it.
//!
//! A connection's chain never changes (TLS 1.3 has no renegotiation, and rustls offers none in
//! 1.2), yet every request on it is authenticated again. Verifying the chain against a CA costs a
//! signature check per certificate (60 µs for a P-256 CA on the bench machine, more than the
//! rest of a TokenReview together), so a connection remembers which CA bundles its chain
//! verified against, and for how long that holds: while `now` is within every certificate's
//! validity. The verdict depends on nothing else (the chain bytes, the bundle's trust anchors
//! and the time; warrant checks no revocation, as kube-apiserver checks none), so a remembered
//! success is exactly what verifying again would say. A bundle that is replaced (the client CA
//! file or the cluster's ConfigMap changed) has a new identity, so nothing verified against the
//! old one counts for it. Failures are not remembered. docs/decisions.md has the argument.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use jiff::Timestamp;
use rustls_pki_types::CertificateDer;

use super::x509::{CaBundle, ClientCertificateError, subject};
use super::{Failure, Outcome, User, Via};

/// The certificate chain a client presented on this connection (end entity first). The TLS
/// handshake has checked that it chains to one of the configured client CAs and that the
/// client holds its key; each authenticator checks it again against the CA it trusts (once
/// per connection and CA, see the module docs).
#[derive(Debug, Clone, Default)]
pub struct PeerCertificate(Option<Arc<Presented>>);

#[derive(Debug)]
pub(crate) struct Presented {
    chain: Box<[CertificateDer<'static>]>,
    /// The seconds (inclusive) in which every certificate of the chain is valid; `None` if one
    /// does not parse (then nothing is remembered).
    window: OnceLock<Option<(i64, i64)>>,
    /// The end entity's CN and Os.
    subject: OnceLock<Option<(String, Vec<String>)>>,
    /// Identities of the bundles the chain verified against (0: none). Two: a connection is
    /// checked against the front-proxy CA and the users' CA at most.
    verified: [AtomicU64; 2],
}

impl PeerCertificate {
    /// A presented chain, end entity first.
    pub fn new(chain: Vec<CertificateDer<'static>>) -> Self {
        PeerCertificate((!chain.is_empty()).then(|| {
            Arc::new(Presented {
                chain: chain.into(),
                window: OnceLock::new(),
                subject: OnceLock::new(),
                verified: [AtomicU64::new(0), AtomicU64::new(0)],
            })
        }))
    }

    /// The chain, if a certificate was presented.
    pub fn chain(&self) -> Option<&[CertificateDer<'static>]> {
        self.0.as_deref().map(|p| &p.chain[..])
    }

    /// The RFC 8705 thumbprint (`x5t#S256`) of the end entity, if a certificate was presented:
    /// what a token bound to this connection's certificate names in `cnf`.
    pub fn thumbprint(&self) -> Option<String> {
        self.chain()
            .and_then(<[_]>::first)
            .map(|leaf| warrant_token::certificate_thumbprint(leaf.as_ref()))
    }

    pub(crate) fn presented(&self) -> Option<&Presented> {
        self.0.as_deref()
    }
}

impl Presented {
    /// The end entity's CN and Os, parsed once.
    pub(crate) fn subject(&self) -> Option<&(String, Vec<String>)> {
        self.subject
            .get_or_init(|| self.chain.first().and_then(subject))
            .as_ref()
    }

    /// Checks the chain against `ca` at `now` as [`CaBundle::verify`] does, from memory when
    /// this connection's chain already verified against `ca` and `now` is within its validity.
    pub(crate) fn verify(
        &self,
        ca: &CaBundle,
        now: Timestamp,
    ) -> Result<(), ClientCertificateError> {
        let id = ca.id();
        let second = now.as_second();
        let in_window = self
            .window()
            .is_some_and(|(from, until)| from <= second && second <= until);
        if in_window
            && self
                .verified
                .iter()
                .any(|v| v.load(Ordering::Relaxed) == id)
        {
            return Ok(());
        }
        ca.verify(&self.chain, now)?;
        if in_window {
            let slot = self
                .verified
                .iter()
                .find(|v| v.load(Ordering::Relaxed) == 0)
                .unwrap_or(&self.verified[1]);
            slot.store(id, Ordering::Relaxed);
        }
        Ok(())
    }

    fn window(&self) -> Option<(i64, i64)> {
        *self.window.get_or_init(|| {
            let mut window = (i64::MIN, i64::MAX);
            for der in &self.chain {
                let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
                let validity = certificate.validity();
                window.0 = window.0.max(validity.not_before.timestamp());
                window.1 = window.1.min(validity.not_after.timestamp());
            }
            Some(window)
        })
    }
}

/// The user a client certificate from `ca` names, if it chains to it.
pub(crate) fn authenticate(ca: &CaBundle, peer: &Presented, now: Timestamp) -> Outcome {
    if let Err(why) = peer.verify(ca, now) {
        // Chained to another CA the handshake trusts (the front proxy's): not a user.
        return Outcome::Failed(Failure::Certificate(why));
    }
    match peer.subject() {
        Some((name, groups)) if !name.is_empty() => Outcome::User(Arc::new(User::new(
            name.clone(),
            String::new(),
            groups.clone(),
            Via::ClientCertificate,
        ))),
        _ => Outcome::Failed(Failure::NoCommonName),
    }
}

#[cfg(test)]
mod tests {
    use warrant_testkit::TestCa;

    use super::*;

    /// `ca` as the trust bundle the authenticators hold.
    fn bundle(ca: &TestCa) -> CaBundle {
        CaBundle::from_pem(ca.pem().as_bytes(), "test").unwrap()
    }

    /// A client certificate for `alice` from `ca`, valid for 2030 only.
    fn client(ca: &TestCa) -> PeerCertificate {
        let issued = ca.issue_client_valid("alice", &[], (2030, 1, 1), (2031, 1, 1));
        PeerCertificate::new(vec![issued.der().clone()])
    }

    fn at(date: &str) -> Timestamp {
        format!("{date}T00:00:00Z").parse().unwrap()
    }

    /// A success is remembered for its bundle, and holds only while every certificate is
    /// valid: the same connection's certificate is refused once it has expired.
    #[test]
    fn a_remembered_success_ends_with_the_certificate() {
        let users = TestCa::new("users");
        let bundle = bundle(&users);
        let peer = client(&users);
        let presented = peer.presented().unwrap();
        assert_eq!(presented.verify(&bundle, at("2030-06-01")), Ok(()));
        assert!(
            presented
                .verified
                .iter()
                .any(|v| v.load(Ordering::Relaxed) == bundle.id()),
            "the success is remembered"
        );
        assert_eq!(presented.verify(&bundle, at("2030-06-02")), Ok(()));
        // rustls's own cause comes back as a value, not as words.
        let expired = presented.verify(&bundle, at("2031-01-02")).unwrap_err();
        assert!(
            matches!(
                expired.certificate_error(),
                Some(
                    rustls::CertificateError::Expired
                        | rustls::CertificateError::ExpiredContext { .. }
                )
            ),
            "{expired:?}"
        );
        let early = presented.verify(&bundle, at("2029-12-31")).unwrap_err();
        assert!(
            matches!(
                early.certificate_error(),
                Some(
                    rustls::CertificateError::NotValidYet
                        | rustls::CertificateError::NotValidYetContext { .. }
                )
            ),
            "{early:?}"
        );
        assert!(early.to_string().starts_with("x509: "), "{early}");
    }

    /// What verified against one bundle counts for no other: not for another CA, and a
    /// bundle read again (a reloaded file) is checked afresh.
    #[test]
    fn a_success_counts_only_for_its_bundle() {
        let users = TestCa::new("users");
        let proxies = TestCa::new("front proxies");
        let peer = client(&users);
        let presented = peer.presented().unwrap();
        let now = at("2030-06-01");
        assert_eq!(presented.verify(&bundle(&users), now), Ok(()));
        assert!(presented.verify(&bundle(&proxies), now).is_err());
        assert!(presented.verify(&bundle(&proxies), now).is_err());
        let reread = bundle(&users);
        assert_eq!(presented.verify(&reread, now), Ok(()));
        assert_eq!(presented.subject().unwrap().0, "alice");
    }
}
