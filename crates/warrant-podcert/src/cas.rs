//! The CAs of one signer in force at one time, as the key holders hand them to the decision.

use std::sync::Arc;

use crate::certificate::{CaCertificate, CaSigner};

/// What a signer's CAs are at one moment: the CA that signs new leaves, and the certificates a
/// relying party must trust to verify every leaf still valid.
///
/// The trusted set is what trust distribution publishes (the ClusterTrustBundle linked to the
/// signer name, the SPIFFE bundle): the signing CA's root, a successor published before it
/// signs its first leaf, and predecessors until the last leaf they signed has expired. A
/// producer (a CA kept in a key holder, or one read from files) replaces the whole set when
/// any of it changes; consumers read a snapshot and never see half a rotation.
#[derive(Clone, Debug)]
pub struct CaSet {
    /// The CA that signs now, or why none can (a holder out of reach, no CA made yet): the
    /// decision then requeues the PCR with this reason, never fails it.
    pub signing: Result<Arc<dyn CaSigner>, String>,
    /// The roots to trust, DER-parsed, in the order to publish them (newest first).
    pub trusted: Vec<CaCertificate>,
}

impl CaSet {
    /// A set with one CA that signs and is its own trust anchor (a root, as tests make).
    pub fn single(ca: Arc<dyn CaSigner>) -> Self {
        let trusted = vec![ca.certificate().clone()];
        CaSet {
            signing: Ok(ca),
            trusted,
        }
    }

    /// A set that signs nothing, saying why, and publishes `trusted` (the roots already out).
    pub fn unavailable(why: impl Into<String>, trusted: Vec<CaCertificate>) -> Self {
        CaSet {
            signing: Err(why.into()),
            trusted,
        }
    }

    /// The trusted certificates as one PEM bundle (what a ClusterTrustBundle holds).
    pub fn trusted_pem(&self) -> String {
        let ders: Vec<&[u8]> = self.trusted.iter().map(CaCertificate::der).collect();
        crate::pem::certificates(&ders)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificate::{CaCurve, MemoryCa};

    #[test]
    fn a_single_ca_signs_and_is_the_one_root_published() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let end = now + jiff::SignedDuration::from_hours(24);
        let (ca, _) = MemoryCa::generate(CaCurve::P256, "pod CA", now, end).unwrap();
        let der = ca.certificate().der().to_vec();
        let set = CaSet::single(Arc::new(ca));
        assert_eq!(set.signing.as_ref().unwrap().certificate().der(), der);
        let pem = set.trusted_pem();
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 1);
        assert_eq!(pem, crate::pem::certificates(&[der.as_slice()]));

        let out = CaSet::unavailable("the HSM is unreachable", set.trusted.clone());
        assert_eq!(out.signing.unwrap_err(), "the HSM is unreachable");
        assert_eq!(out.trusted.len(), 1);
    }
}
