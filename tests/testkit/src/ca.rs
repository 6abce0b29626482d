//! A certificate authority made in memory, and certificates it signs: users' client
//! certificates, front-proxy certificates, serving certificates.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls_pki_types::CertificateDer;

/// A self-signed CA named `name` (its CN), with a fresh P-256 key.
pub struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate a [`TestCa`] signed, and its key.
pub struct Issued {
    der: CertificateDer<'static>,
    pem: String,
    key_pem: String,
}

impl TestCa {
    /// A new CA whose subject CN is `name`.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().expect("a P-256 key");
        let mut params =
            CertificateParams::new(Vec::<String>::new()).expect("CA certificate parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).expect("a self-signed CA").pem();
        TestCa {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA certificate, PEM (what a `--client-ca-file` holds).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A client certificate (client-auth usage) for user `cn` in groups `groups` (its Os).
    pub fn issue_client(&self, cn: &str, groups: &[&str]) -> Issued {
        self.issue(cn, groups, &[], ExtendedKeyUsagePurpose::ClientAuth, |_| {})
    }

    /// [`TestCa::issue_client`] valid only from `not_before` to `not_after` (UTC dates: year,
    /// month, day).
    pub fn issue_client_valid(
        &self,
        cn: &str,
        groups: &[&str],
        not_before: (i32, u8, u8),
        not_after: (i32, u8, u8),
    ) -> Issued {
        self.issue(
            cn,
            groups,
            &[],
            ExtendedKeyUsagePurpose::ClientAuth,
            |params| {
                params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
                params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
            },
        )
    }

    /// A serving certificate (server-auth usage only) for DNS names `names`, the first also
    /// its CN.
    pub fn issue_server(&self, names: &[&str]) -> Issued {
        let cn = names.first().copied().unwrap_or_default();
        self.issue(cn, &[], names, ExtendedKeyUsagePurpose::ServerAuth, |_| {})
    }

    fn issue(
        &self,
        cn: &str,
        groups: &[&str],
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Issued {
        let key = KeyPair::generate().expect("a P-256 key");
        let names = names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).expect("certificate parameters");
        params.distinguished_name.push(DnType::CommonName, cn);
        for group in groups {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        params.extended_key_usages = vec![usage];
        adjust(&mut params);
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("a certificate signed by the test CA");
        Issued {
            der: certificate.der().clone(),
            pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Issued {
    /// The certificate, DER.
    pub fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    /// The certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Its private key, PEM (PKCS#8).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

#[cfg(feature = "state")]
impl TestCa {
    /// The CA as a trust bundle (client CA or front-proxy CA).
    pub fn bundle(&self) -> warrant_auth::CaBundle {
        warrant_auth::CaBundle::from_pem(self.pem.as_bytes(), "test CA")
            .expect("the test CA's PEM parses")
    }
}

#[cfg(feature = "state")]
impl Issued {
    /// The certificate as the TLS layer attaches it to a request (a chain of one).
    pub fn peer(&self) -> warrant_auth::PeerCertificate {
        warrant_auth::PeerCertificate::new(vec![self.der.clone()])
    }
}
