//! Delegated authentication: a bearer token that is neither a static token nor one of
//! warrant's own is sent to kube-apiserver's TokenReview (`--authentication-kubeconfig`), as an
//! aggregated API server does (spec §5.4). No audiences are sent, so kube-apiserver checks the
//! token against its own API audiences: a token for the cluster's API, of any kind the cluster
//! accepts (service-account tokens, OIDC, its webhook, …).
//!
//! One exception, the token agent's pod token: it names warrant's token agent audience
//! (`--token-agent-audience`), not kube-apiserver's, so that neither warrant nor anything warrant
//! receives holds a credential for kube-apiserver itself. Such a token is asked about for that
//! audience alone (`spec.audiences`), and authenticates only if kube-apiserver's answer lists it
//! in `status.audiences` (the TokenReview API's word that the server checked the audience: one
//! that ignores the question answers without it).
//!
//! What this trusts: kube-apiserver's word on who a token belongs to, and the connection to it
//! (the kubeconfig's CA and credentials). Whoever kube-apiserver authenticates, warrant
//! authenticates, with the same user, groups and extras.
//!
//! Answers, authenticated or not, are reused for 10 s (kube's delegating default), keyed by the
//! SHA-256 of the token: a token kube-apiserver stops accepting may keep working here that
//! long. Failures to get an answer are retried with kube's backoff, never cached, and refuse
//! the request (401): fail closed. When the most lookups are already in flight (a stalled
//! kube-apiserver, a flood of unknown tokens), a caller is answered 429 at once: neither
//! authenticated nor turned away as if its token were bad. A token longer than
//! [`MAX_DELEGATED_TOKEN_BYTES`] is refused unasked.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::Api;
use prometheus_client::registry::Registry;

use super::tokenfile::digest;
use super::{Failure, Outcome, User, Via};
use crate::delegation::{
    self, Create, DelegationError, DelegationOptions, Lookup, MAX_DELEGATED_TOKEN_BYTES,
};

/// kube-apiserver's word on a token.
#[derive(Debug, Clone)]
enum Answer {
    /// Authenticated, with the audiences kube-apiserver says the token is good for among
    /// those asked (`status.audiences`).
    User(Arc<User>, Vec<String>),
    /// Not authenticated, with kube-apiserver's error (or kube's `invalid bearer token`).
    Rejected(String),
}

impl delegation::Answer for Answer {
    fn allows(&self) -> bool {
        matches!(self, Answer::User(..))
    }
}

/// kube-apiserver's TokenReview, with kube's cache and retries.
pub struct DelegatedAuthentication {
    api: Api<TokenReview>,
    lookup: Lookup<[u8; 32], Answer>,
}

impl std::fmt::Debug for DelegatedAuthentication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthentication")
            .field("options", self.lookup.options())
            .finish_non_exhaustive()
    }
}

impl DelegatedAuthentication {
    /// Asks the kube-apiserver that `client` reaches.
    pub fn new(client: kube::Client, options: DelegationOptions) -> Self {
        DelegatedAuthentication {
            api: Api::all(client),
            lookup: Lookup::new("tokenreviews", "TokenReview", options),
        }
    }

    pub(crate) fn register_metrics(&self, registry: &mut Registry) {
        self.lookup.register_metrics(
            registry,
            "warrant_delegated_authentication",
            "delegated authentication (TokenReview)",
        );
    }

    /// Asks kube-apiserver about `token`: for `audience` (the token agent's, which the token
    /// names), or for kube-apiserver's own API audiences when `None`. The question follows from
    /// the token alone, so the cache, keyed by the token, keeps one answer per question.
    pub(crate) async fn authenticate(
        &self,
        token: &str,
        audience: Option<&str>,
        now: Timestamp,
    ) -> Outcome {
        if token.len() > MAX_DELEGATED_TOKEN_BYTES {
            return Outcome::Failed(Failure::TokenTooLong { bytes: token.len() });
        }
        let question = || Create {
            api: self.api.clone(),
            review: TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_owned(),
                    audiences: audience.map(|a| vec![a.to_owned()]),
                },
                ..TokenReview::default()
            },
        };
        match self
            .lookup
            .answer(digest(token), now, question, interpret)
            .await
        {
            Ok(Answer::User(user, audiences)) => match audience {
                Some(asked) if !audiences.iter().any(|a| a == asked) => {
                    Outcome::Failed(Failure::Rejected(format!(
                        "kube-apiserver authenticated the token without confirming the audience {} asked for",
                        warrant_token::go_quote(asked)
                    )))
                }
                _ => Outcome::User(user),
            },
            Ok(Answer::Rejected(why)) => Outcome::Failed(Failure::Rejected(why)),
            Err(e) => {
                if !e.is_overload() {
                    tracing::warn!(error = %e, "delegated authentication failed; refusing the request");
                }
                Outcome::Failed(Failure::Delegation(e))
            }
        }
    }
}

/// kube's webhook authenticator's reading of a review.
fn interpret(review: TokenReview) -> Result<Answer, DelegationError> {
    let status = review.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        let error = status.error.unwrap_or_default();
        return Ok(Answer::Rejected(if error.is_empty() {
            "invalid bearer token".to_owned()
        } else {
            error
        }));
    }
    let audiences = status.audiences.unwrap_or_default();
    let info = status.user.unwrap_or_default();
    let mut user = User::new(
        info.username.unwrap_or_default(),
        info.uid.unwrap_or_default(),
        info.groups.unwrap_or_default(),
        Via::Delegated,
    );
    user.extra = info.extra.unwrap_or_default();
    Ok(Answer::User(Arc::new(user), audiences))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};

    use super::*;

    fn reviewed(status: TokenReviewStatus) -> TokenReview {
        TokenReview {
            status: Some(status),
            ..TokenReview::default()
        }
    }

    /// kube's webhook reading: not authenticated is kube-apiserver's error or `invalid bearer
    /// token`; authenticated is its user, with `system:authenticated`, as delegated.
    #[test]
    fn a_review_reads_as_kubes_webhook_reads_it() {
        let rejected = |error: Option<&str>| {
            interpret(reviewed(TokenReviewStatus {
                authenticated: Some(false),
                error: error.map(str::to_owned),
                ..TokenReviewStatus::default()
            }))
        };
        assert!(
            matches!(rejected(None), Ok(Answer::Rejected(why)) if why == "invalid bearer token")
        );
        assert!(
            matches!(rejected(Some("token expired")), Ok(Answer::Rejected(why)) if why == "token expired")
        );
        let user = interpret(reviewed(TokenReviewStatus {
            authenticated: Some(true),
            user: Some(UserInfo {
                username: Some("jane".into()),
                uid: Some("jane-uid".into()),
                groups: Some(vec!["devs".into()]),
                extra: Some([("scopes".to_owned(), vec!["a".to_owned()])].into()),
            }),
            ..TokenReviewStatus::default()
        }));
        let Ok(Answer::User(user, _)) = user else {
            panic!("{user:?}")
        };
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        assert_eq!(user.extra["scopes"], ["a"]);
        assert_eq!(user.via, Via::Delegated);
    }

    /// A token longer than any kube-apiserver is asked about is refused unasked (the client
    /// points nowhere: asking would fail differently, after retries).
    #[tokio::test(start_paused = true)]
    async fn an_overlong_token_is_refused_unasked() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let delegated = DelegatedAuthentication::new(client, DelegationOptions::default());
        let token = "x".repeat(MAX_DELEGATED_TOKEN_BYTES + 1);
        let outcome = delegated
            .authenticate(&token, None, Timestamp::UNIX_EPOCH)
            .await;
        assert!(
            matches!(outcome, Outcome::Failed(Failure::TokenTooLong { bytes }) if bytes == token.len()),
            "{outcome:?}"
        );
    }
}
