//! Who the injection webhook answers (docs/injection.md, "Who may call"), and how far each is
//! trusted.
//!
//! kube-apiserver calls a webhook without credentials unless its AdmissionConfiguration gives
//! it a kubeconfig, so a webhook that answers anonymous callers answers anyone who reaches its
//! port. That is a choice an operator makes knowingly, never one a server falls into: there is
//! no mode "nobody said", only kube-apiserver's certificate (an empty list of names answers no
//! one) or anonymous callers, named as such (`warrant serve` refuses to turn injection on
//! without one of `--injection-allowed-names` and `--injection-allow-anonymous`).

use warrant_auth::{Caller, Via};
use warrant_token::quote_value;

use crate::error::ApiError;

/// Who may call `/mutate/pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmissionCallers {
    /// Client certificates (verified against `--client-ca-file` or the cluster's client CA)
    /// whose name is one of these: the identity kube-apiserver's AdmissionConfiguration
    /// kubeconfig gives it (`--injection-allowed-names`). Anyone else gets `401` (no
    /// certificate) or `403` (another name) before its review is read. Their reviews look a
    /// ServiceAccount missing from the cache up live, on admission's own budget. An empty list
    /// answers no one.
    ClientCertificates(Vec<String>),
    /// Anyone who reaches the port (`--injection-allow-anonymous`), answered from warrant's
    /// cache alone: a review never costs a lookup at kube-apiserver and never shows its
    /// errors, but the patch answered for a cached ServiceAccount shows its warrant
    /// annotations (role ARNs, client and tenant IDs, audiences), and whether a patch comes
    /// back tells whether such an account exists. For clusters whose kube-apiserver cannot
    /// present a client certificate to a webhook (EKS, GKE, AKS).
    Anonymous,
}

impl Default for AdmissionCallers {
    /// No one: a webhook set up without saying who may call answers no one.
    fn default() -> Self {
        AdmissionCallers::ClientCertificates(Vec::new())
    }
}

impl AdmissionCallers {
    /// Whether callers without a client certificate are answered.
    pub fn anonymous(&self) -> bool {
        matches!(self, AdmissionCallers::Anonymous)
    }
}

/// How far a caller is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// kube-apiserver, by its certificate: a miss is looked up live.
    KubeApiserver,
    /// Anyone: answered from memory only.
    CacheOnly,
}

/// Whether `caller` may be answered, and how far it is trusted.
pub(super) fn access(callers: &AdmissionCallers, caller: &Caller) -> Result<Access, ApiError> {
    let names = match callers {
        AdmissionCallers::Anonymous => return Ok(Access::CacheOnly),
        AdmissionCallers::ClientCertificates(names) => names,
    };
    match caller {
        Caller::Anonymous => Err(ApiError::unauthorized()),
        Caller::User(user) if user.via == Via::ClientCertificate && names.contains(&user.name) => {
            Ok(Access::KubeApiserver)
        }
        Caller::User(user) => Err(ApiError::forbidden(
            "",
            "",
            "",
            &format!(
                "user {} may not call the token injection webhook: it answers kube-apiserver's client certificate only (--injection-allowed-names)",
                quote_value(&user.name)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use warrant_auth::User;

    use super::*;

    fn user(name: &str, via: Via) -> Caller {
        Caller::User(User::new(name.to_owned(), String::new(), vec![], via).into())
    }

    #[test]
    fn anonymous_mode_answers_anyone_from_the_cache() {
        let anonymous = AdmissionCallers::Anonymous;
        for caller in [
            Caller::Anonymous,
            user("kube-apiserver-admission", Via::ClientCertificate),
        ] {
            // Even kube-apiserver's name earns no live lookup: nothing here proves it.
            assert_eq!(access(&anonymous, &caller).unwrap(), Access::CacheOnly);
        }
    }

    #[test]
    fn certificate_mode_answers_its_names_by_certificate_only() {
        let named = AdmissionCallers::ClientCertificates(vec!["kube-apiserver-admission".into()]);
        assert_eq!(
            access(
                &named,
                &user("kube-apiserver-admission", Via::ClientCertificate)
            )
            .unwrap(),
            Access::KubeApiserver
        );
        assert_eq!(
            access(&named, &Caller::Anonymous).unwrap_err().code(),
            http::StatusCode::UNAUTHORIZED
        );
        // The name by another way of authenticating (a bearer token) is not the certificate.
        for caller in [
            user("kube-apiserver-admission", Via::Delegated),
            user("mallory", Via::ClientCertificate),
        ] {
            assert_eq!(
                access(&named, &caller).unwrap_err().code(),
                http::StatusCode::FORBIDDEN
            );
        }
    }

    #[test]
    fn no_names_answers_no_one() {
        let nobody = AdmissionCallers::default();
        assert!(!nobody.anonymous());
        assert_eq!(
            access(&nobody, &Caller::Anonymous).unwrap_err().code(),
            http::StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            access(
                &nobody,
                &user("kube-apiserver-admission", Via::ClientCertificate)
            )
            .unwrap_err()
            .code(),
            http::StatusCode::FORBIDDEN
        );
    }
}
