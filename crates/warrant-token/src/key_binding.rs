//! Key binding decided once: one check ([`check_binding`]) of the evidence a caller gathered
//! against the bindings a token's `cnf` claim names ([`Cnf`], read in `cnf.rs`).
//!
//! Every place that accepts a token (warrant's own API, the `warrant.dev` TokenReview, kube's
//! TokenReview routes, `warrant verify`) asks the same two questions through these: what does the
//! token's `cnf` bind it to, and did what came with the token prove every one of those
//! bindings? The rules:
//!
//! - no `cnf` claim: a bearer token, as kube-apiserver's are; evidence offered for a binding it
//!   does not have is refused (a relying party that checks proofs expects bound tokens);
//! - a `cnf` whose members are all understood (`jkt`, RFC 9449; `x5t#S256`, RFC 8705), each a
//!   string: every member present must be proven: a token bound to a DPoP key and a certificate
//!   needs the proof and the certificate;
//! - any other `cnf`: the token is unusable everywhere, never a bearer token.
//!
//! What this trusts: the token's signature, checked before (a `cnf` is only as good as the key
//! that signed it), and the caller for the evidence it gathered: the certificate of its own
//! connection, and the DPoP proof, which the caller checks against its request and its replay
//! cache through the `prove` function it passes (see `crate::verify_proof`).
//!
//! Cost: a few comparisons, plus the caller's proof check.

use thiserror::Error;

use crate::cnf::{Cnf, CnfError, Confirmation};
use crate::dpop::{DpopError, VerifiedProof};

/// The client certificate that came with a token, as the caller knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CertificateEvidence<'a> {
    /// None.
    #[default]
    None,
    /// The certificate of the connection the token came over, by its RFC 8705 thumbprint. It
    /// may be there for another reason (at warrant's API a certificate also names a user), so
    /// it proves a certificate binding, and beside a token not bound to it means nothing.
    Connection(&'a str),
    /// A certificate's thumbprint given as the proof of the token's binding (a review's
    /// `spec.certificateThumbprint`, `warrant verify --client-certificate`): refused beside a
    /// token not bound to a certificate.
    Given(&'a str),
}

/// What came with a token to prove its binding, as the caller gathered it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Evidence<'a> {
    /// True if a DPoP proof came with the token (under the `DPoP` scheme, in a review's
    /// `spec.dpop`, as `warrant verify --dpop-proof`). It is checked, if the token is bound to a
    /// DPoP key, by the `prove` function given to [`check_binding`]; otherwise it is refused.
    pub dpop_proof: bool,
    /// The client certificate.
    pub certificate: CertificateEvidence<'a>,
}

/// Why a token's binding does not hold. Messages name bindings by their thumbprints (hashes of
/// public keys and certificates), never the token or the proof.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BindingError {
    /// The token's `cnf` is one warrant does not understand: never a bearer token.
    #[error("{0}: the token is not valid anywhere")]
    Unusable(#[source] CnfError),
    /// Bound to a DPoP key, and no proof came with it.
    #[error(
        "the token is bound to a DPoP key (cnf.jkt {jkt}) and is not valid without a proof of that key"
    )]
    ProofMissing {
        /// The key's thumbprint.
        jkt: String,
    },
    /// Bound to a certificate, and none came with it.
    #[error(
        "the token is bound to a client certificate (cnf x5t#S256 {x5t}) and is not valid without it"
    )]
    CertificateMissing {
        /// The certificate's thumbprint.
        x5t: String,
    },
    /// A DPoP proof came with a token not bound to a DPoP key.
    #[error(
        "a DPoP proof came with the token, but the token is not bound to a DPoP key (it has no cnf.jkt)"
    )]
    NotDpopBound,
    /// A certificate was given as proof for a token not bound to one.
    #[error(
        "a client certificate was given as proof, but the token is not bound to a certificate (it has no cnf x5t#S256)"
    )]
    NotCertificateBound,
    /// The proof does not hold for this token and request (or could not be recorded: see
    /// [`DpopError::is_overload`]).
    #[error("invalid DPoP proof: {0}")]
    Proof(#[source] DpopError),
    /// The certificate is another one.
    #[error(
        "the client certificate (x5t#S256 {presented}) is not the one the token is bound to (cnf x5t#S256 {bound})"
    )]
    Certificate {
        /// The token's `x5t#S256`.
        bound: String,
        /// The presented certificate's.
        presented: String,
    },
}

impl BindingError {
    /// True if the proof was not refused but could not be taken now (the replay cache is full):
    /// the caller is to retry, neither refused nor let in.
    pub fn is_overload(&self) -> bool {
        matches!(self, BindingError::Proof(e) if e.is_overload())
    }
}

/// The one check of a token's key binding: whether `evidence` proves every binding `cnf` (the
/// token's claim, signature already verified) names. `prove` checks the DPoP proof that came
/// with the token against the thumbprint the token is bound to (and against the caller's
/// request, token and replay cache); it is called only for a token bound to a DPoP key, and
/// last, once everything else holds, so a proof is spent only when it decides.
///
/// Returns the binding proven, `None` for a bearer token (no `cnf`, no evidence offered).
pub fn check_binding<'c>(
    cnf: Option<&'c Cnf>,
    evidence: &Evidence<'_>,
    prove: impl FnOnce(&str) -> Result<VerifiedProof, DpopError>,
) -> Result<Option<&'c Confirmation>, BindingError> {
    let given_certificate = matches!(evidence.certificate, CertificateEvidence::Given(_));
    let confirmation = match cnf {
        None if evidence.dpop_proof => return Err(BindingError::NotDpopBound),
        None if given_certificate => return Err(BindingError::NotCertificateBound),
        None => return Ok(None),
        Some(Cnf::Unusable(why)) => return Err(BindingError::Unusable(why.clone())),
        Some(Cnf::Binds(confirmation)) if !confirmation.binds() => {
            return Err(BindingError::Unusable(CnfError::Empty));
        }
        Some(Cnf::Binds(confirmation)) => confirmation,
    };
    if evidence.dpop_proof && confirmation.jkt.is_none() {
        return Err(BindingError::NotDpopBound);
    }
    if given_certificate && confirmation.x5t_s256.is_none() {
        return Err(BindingError::NotCertificateBound);
    }
    if let Some(jkt) = &confirmation.jkt
        && !evidence.dpop_proof
    {
        return Err(BindingError::ProofMissing { jkt: jkt.clone() });
    }
    if let Some(x5t) = &confirmation.x5t_s256 {
        let presented = match evidence.certificate {
            CertificateEvidence::None => {
                return Err(BindingError::CertificateMissing { x5t: x5t.clone() });
            }
            CertificateEvidence::Connection(presented) | CertificateEvidence::Given(presented) => {
                presented
            }
        };
        if !same_thumbprint(x5t, presented) {
            return Err(BindingError::Certificate {
                bound: x5t.clone(),
                presented: presented.to_owned(),
            });
        }
    }
    if let Some(jkt) = &confirmation.jkt {
        let proof = prove(jkt).map_err(BindingError::Proof)?;
        // `prove` was asked for this key; a proof of another key never passes, whatever it did.
        if !same_thumbprint(jkt, &proof.jkt) {
            return Err(BindingError::Proof(DpopError::Thumbprint));
        }
    }
    Ok(Some(confirmation))
}

/// Compares two thumbprints. Both are public hashes; the comparison is constant-time all the
/// same.
fn same_thumbprint(a: &str, b: &str) -> bool {
    aws_lc_rs::constant_time::verify_slices_are_equal(a.as_bytes(), b.as_bytes()).is_ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(value: serde_json::Value) -> Cnf {
        serde_json::from_value(value).unwrap()
    }

    const JKT: &str = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs";
    const X5T: &str = "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0";

    fn proof_of(jkt: &str) -> VerifiedProof {
        VerifiedProof {
            jkt: jkt.to_owned(),
            jti: "j".to_owned(),
            iat: 0,
        }
    }

    /// A `prove` that must not be called.
    fn unreachable_proof(_: &str) -> Result<VerifiedProof, DpopError> {
        panic!("the proof was checked")
    }

    #[test]
    fn a_bearer_token_takes_no_evidence() {
        let none = Evidence::default();
        assert_eq!(check_binding(None, &none, unreachable_proof), Ok(None));
        // The connection's certificate says nothing about an unbound token.
        let connection = Evidence {
            certificate: CertificateEvidence::Connection(X5T),
            ..none
        };
        assert_eq!(
            check_binding(None, &connection, unreachable_proof),
            Ok(None)
        );
        let proof = Evidence {
            dpop_proof: true,
            ..none
        };
        assert_eq!(
            check_binding(None, &proof, unreachable_proof),
            Err(BindingError::NotDpopBound)
        );
        let given = Evidence {
            certificate: CertificateEvidence::Given(X5T),
            ..none
        };
        assert_eq!(
            check_binding(None, &given, unreachable_proof),
            Err(BindingError::NotCertificateBound)
        );
    }

    /// Every binding present must be proven: a token bound to a DPoP key and a certificate
    /// passes with both, and with either alone it does not.
    #[test]
    fn every_binding_present_must_be_proven() {
        let both = Cnf::Binds(Confirmation {
            jkt: Some(JKT.into()),
            x5t_s256: Some(X5T.into()),
        });
        let proof_only = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::None,
        };
        assert_eq!(
            check_binding(Some(&both), &proof_only, |_| Ok(proof_of(JKT))),
            Err(BindingError::CertificateMissing { x5t: X5T.into() })
        );
        let certificate_only = Evidence {
            dpop_proof: false,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert_eq!(
            check_binding(Some(&both), &certificate_only, unreachable_proof),
            Err(BindingError::ProofMissing { jkt: JKT.into() })
        );
        let all = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert_eq!(
            check_binding(Some(&both), &all, |jkt| {
                assert_eq!(jkt, JKT);
                Ok(proof_of(JKT))
            }),
            Ok(both.binding().ok())
        );
        // Another certificate: refused before the proof is spent.
        let other = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection("another"),
        };
        assert!(matches!(
            check_binding(Some(&both), &other, unreachable_proof),
            Err(BindingError::Certificate { .. })
        ));
    }

    #[test]
    fn a_proof_must_be_of_the_bound_key() {
        let dpop = Cnf::Binds(Confirmation::dpop(JKT));
        let proof = Evidence {
            dpop_proof: true,
            ..Evidence::default()
        };
        assert_eq!(
            check_binding(Some(&dpop), &proof, |_| Ok(proof_of("another"))),
            Err(BindingError::Proof(DpopError::Thumbprint))
        );
        assert_eq!(
            check_binding(Some(&dpop), &proof, |_| Err(DpopError::Replayed)),
            Err(BindingError::Proof(DpopError::Replayed))
        );
        assert_eq!(
            check_binding(Some(&dpop), &Evidence::default(), unreachable_proof),
            Err(BindingError::ProofMissing { jkt: JKT.into() })
        );
        // A certificate given for a DPoP-bound token proves nothing and is refused.
        let given = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Given(X5T),
        };
        assert_eq!(
            check_binding(Some(&dpop), &given, unreachable_proof),
            Err(BindingError::NotCertificateBound)
        );
        // A connection's certificate beside a DPoP-bound token is no matter.
        let beside = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert!(check_binding(Some(&dpop), &beside, |_| Ok(proof_of(JKT))).is_ok());
    }

    #[test]
    fn a_certificate_binding_takes_its_certificate_only() {
        let certificate = Cnf::Binds(Confirmation::certificate(X5T));
        for evidence in [
            CertificateEvidence::Connection(X5T),
            CertificateEvidence::Given(X5T),
        ] {
            let evidence = Evidence {
                dpop_proof: false,
                certificate: evidence,
            };
            assert!(check_binding(Some(&certificate), &evidence, unreachable_proof).is_ok());
        }
        assert_eq!(
            check_binding(Some(&certificate), &Evidence::default(), unreachable_proof),
            Err(BindingError::CertificateMissing { x5t: X5T.into() })
        );
        let with_proof = Evidence {
            dpop_proof: true,
            certificate: CertificateEvidence::Connection(X5T),
        };
        assert_eq!(
            check_binding(Some(&certificate), &with_proof, unreachable_proof),
            Err(BindingError::NotDpopBound)
        );
    }

    /// An unusable `cnf` is refused whatever came with it, before any proof is spent.
    #[test]
    fn an_unusable_cnf_is_never_a_bearer_token() {
        let unusable = read(json!({"jwk": {"kty": "EC", "crv": "P-256"}}));
        for evidence in [
            Evidence::default(),
            Evidence {
                dpop_proof: true,
                certificate: CertificateEvidence::Connection(X5T),
            },
            Evidence {
                dpop_proof: false,
                certificate: CertificateEvidence::Given(X5T),
            },
        ] {
            assert!(matches!(
                check_binding(Some(&unusable), &evidence, unreachable_proof),
                Err(BindingError::Unusable(CnfError::NotUnderstood(_)))
            ));
        }
        // A Confirmation naming nothing, made in code, is as unusable as one read.
        let empty = Cnf::Binds(Confirmation::default());
        assert_eq!(
            check_binding(Some(&empty), &Evidence::default(), unreachable_proof),
            Err(BindingError::Unusable(CnfError::Empty))
        );
    }
}
