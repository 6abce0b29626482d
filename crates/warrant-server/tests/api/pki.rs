//! Test certificates: a users' client CA, a front-proxy CA and a stranger CA, and client
//! certificates from each, as the TLS layer would attach them to a request.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls_pki_types::CertificateDer;
use warrant_auth::{CaBundle, PeerCertificate};

pub(crate) struct Ca {
    pub(crate) pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    pub(crate) fn bundle(&self) -> CaBundle {
        CaBundle::from_pem(self.pem.as_bytes(), "test CA").unwrap()
    }

    /// A client certificate (client-auth usage) for `cn` in organisations `orgs`.
    pub(crate) fn client(&self, cn: &str, orgs: &[&str]) -> Client {
        self.certificate(cn, orgs, vec![ExtendedKeyUsagePurpose::ClientAuth])
    }

    /// A client certificate for `cn` valid only from `not_before` to `not_after` (UTC dates).
    pub(crate) fn client_valid(
        &self,
        cn: &str,
        not_before: (i32, u8, u8),
        not_after: (i32, u8, u8),
    ) -> Client {
        self.issue(
            cn,
            &[],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            |params| {
                params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
                params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
            },
        )
    }

    /// A certificate for `cn` with only the server-auth usage.
    pub(crate) fn server_only(&self, cn: &str) -> Client {
        self.certificate(cn, &[], vec![ExtendedKeyUsagePurpose::ServerAuth])
    }

    fn certificate(&self, cn: &str, orgs: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> Client {
        self.issue(cn, orgs, usages, |_| {})
    }

    fn issue(
        &self,
        cn: &str,
        orgs: &[&str],
        usages: Vec<ExtendedKeyUsagePurpose>,
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Client {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = usages;
        adjust(&mut params);
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        Client {
            der: certificate.der().clone(),
            pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

pub(crate) struct Client {
    der: CertificateDer<'static>,
    #[allow(dead_code)]
    pub(crate) pem: String,
    #[allow(dead_code)]
    pub(crate) key_pem: String,
}

impl Client {
    /// As the TLS layer attaches it.
    pub(crate) fn peer(&self) -> PeerCertificate {
        PeerCertificate::new(vec![self.der.clone()])
    }
}
