//! What can go wrong with keys in AWS KMS, each with a message an operator can act on: it names
//! the key (its ARN, and its kid where known), the KMS operation and what KMS answered. No
//! message carries credentials or key material.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_kms::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use crate::endpoint::source::EndpointSource;
use crate::uri::KmsUriError;

/// An error from the KMS key holder.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KmsError {
    /// `--key-kms-uri` does not parse.
    #[error(transparent)]
    Uri(#[from] KmsUriError),
    /// KMS's endpoint (`--kms-endpoint`, or one the AWS SDK reads elsewhere) is refused.
    #[error("the KMS endpoint {endpoint} (from {from}): {reason}")]
    Endpoint {
        /// The endpoint, as messages quote it (no password, at most 256 characters).
        endpoint: String,
        /// Where it came from.
        from: EndpointSource,
        /// Why.
        reason: String,
    },
    /// The HTTPS client could not be set up (the platform's roots).
    #[error("AWS KMS: the HTTPS client cannot be set up: {0}")]
    Tls(#[source] rustls::Error),
    /// KMS could not be reached, or did not answer in time, or answered with a server error.
    #[error("{kms} cannot be reached ({op}): {cause}")]
    Unreachable {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation.
        op: &'static str,
        /// What happened.
        cause: String,
    },
    /// KMS was still throttling the requests when the deadline passed.
    #[error(
        "{kms} throttled {op} {attempts} times within {waited:?} (ThrottlingException: the account's request quota for the region is exhausted; warrant retried with backoff until its deadline)"
    )]
    Throttled {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation.
        op: &'static str,
        /// How many attempts were made.
        attempts: u32,
        /// How long they took.
        waited: Duration,
    },
    /// No credentials could be had from AWS's chain, or KMS refused them (expired, unknown).
    #[error("{kms}: no usable AWS credentials ({op}): {cause}")]
    Credentials {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation.
        op: &'static str,
        /// What the credential chain or KMS said.
        cause: String,
    },
    /// KMS failed recently and is being probed: calls fail at once until it answers again.
    #[error("{kms} is unavailable: {cause}")]
    Unavailable {
        /// KMS, as messages name it.
        kms: String,
        /// What broke it (the same value readiness shows).
        #[source]
        cause: Arc<dyn std::error::Error + Send + Sync>,
    },
    /// The key exists but cannot be used now: disabled, pending deletion or import.
    #[error("AWS KMS key {key}{}: {state}: {advice}", kid_of(.kid))]
    KeyState {
        /// The key's ARN.
        key: String,
        /// The key's kid, where known.
        kid: Option<String>,
        /// KMS's key state (`Disabled`, `PendingDeletion`, …) or its error code.
        state: String,
        /// What to do about it.
        advice: &'static str,
    },
    /// The key does not exist (deleted, or never did).
    #[error("AWS KMS key {key}{}: no such key (NotFoundException): it was deleted, or never existed in this account and region", kid_of(.kid))]
    NotFound {
        /// The key's ARN.
        key: String,
        /// The key's kid, where known.
        kid: Option<String>,
    },
    /// KMS refused the operation to warrant's credentials.
    #[error("{kms}: {op} on {key} is not allowed to warrant's AWS identity ({code}): {message}")]
    AccessDenied {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation.
        op: &'static str,
        /// The key, or `-` for an operation on none.
        key: String,
        /// KMS's error code.
        code: String,
        /// KMS's message.
        message: String,
    },
    /// The key cannot sign warrant's tokens: another usage, spec, algorithm or public key.
    #[error("AWS KMS key {key}: the key cannot be used: {problem}")]
    Unsuitable {
        /// The key's ARN.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// KMS does not vouch for a key a key store says it holds for warrant (see `ownership.rs`).
    #[error("AWS KMS key {key}: it is not warrant's key {kid}: {reason}")]
    NotHeld {
        /// The key's ARN, as the store names it.
        key: String,
        /// The key the store claims.
        kid: String,
        /// Why not.
        reason: String,
    },
    /// A locator that is not a KMS key ARN in this holder's region.
    #[error("{locator:?} {reason}")]
    Locator {
        /// The locator as the store records it.
        locator: String,
        /// Why it is refused.
        reason: String,
    },
    /// KMS answered something warrant cannot use (a missing field, a malformed signature).
    #[error("{kms}: {op} answered something unusable: {what}")]
    Answer {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation.
        op: &'static str,
        /// What was wrong with it.
        what: String,
    },
    /// KMS's signature does not verify with the key's recorded public key: it is not used.
    #[error(
        "{kms}: the signature {op} answered for key {key} (key {kid}) does not verify with the recorded public key, and is not used: KMS's answer was altered on the way, or the key in KMS is not the recorded one"
    )]
    BadSignature {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation (`sign`).
        op: &'static str,
        /// The key's ARN.
        key: String,
        /// The key's kid.
        kid: String,
    },
    /// Any other error KMS answered.
    #[error("{kms}: {op} on {key} failed ({code}): {message}")]
    Service {
        /// KMS, as messages name it.
        kms: String,
        /// The KMS operation.
        op: &'static str,
        /// The key, or `-`.
        key: String,
        /// KMS's error code.
        code: String,
        /// KMS's message.
        message: String,
    },
    /// A key type KMS does not generate for warrant.
    #[error("{0:?} keys are not generated in AWS KMS (use RSA 2048/3072, P-256, P-384 or P-521)")]
    KeyType(warrant_token::KeyType),
    /// The key to import does not parse or cannot be imported.
    #[error("the key to import: {0}")]
    Import(String),
}

fn kid_of(kid: &Option<String>) -> String {
    kid.as_ref()
        .map_or_else(String::new, |kid| format!(" (key {kid})"))
}

impl KmsError {
    /// True when KMS is not reachable now, or the key is not usable now but may be again (it
    /// is disabled or pending deletion): TokenRequest answers 503 and Sign `UNAVAILABLE`, and
    /// readiness fails. False when KMS refused for good (no such key, access denied, …).
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            KmsError::Unreachable { .. }
                | KmsError::Throttled { .. }
                | KmsError::Credentials { .. }
                | KmsError::Unavailable { .. }
                | KmsError::KeyState { .. }
        )
    }

    /// True when the failure is KMS's or the path to it, not the key's: what breaks the
    /// holder's health until a probe gets an answer again.
    pub(crate) fn breaks_health(&self) -> bool {
        matches!(
            self,
            KmsError::Unreachable { .. } | KmsError::Credentials { .. }
        )
    }

    /// A short, bounded name for metrics labels.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            KmsError::Uri(_) | KmsError::Endpoint { .. } | KmsError::Tls(_) => "config",
            KmsError::Unreachable { .. } => "unreachable",
            KmsError::Throttled { .. } => "throttled",
            KmsError::Credentials { .. } => "credentials",
            KmsError::Unavailable { .. } => "unavailable",
            KmsError::KeyState { .. } => "disabled",
            KmsError::NotFound { .. } => "not_found",
            KmsError::AccessDenied { .. } => "access_denied",
            KmsError::Unsuitable { .. } => "unsuitable",
            KmsError::NotHeld { .. } => "not_held",
            KmsError::Locator { .. } => "locator",
            KmsError::Answer { .. } => "bad_answer",
            KmsError::BadSignature { .. } => "bad_signature",
            KmsError::Service { .. } => "kms_error",
            KmsError::KeyType(_) | KmsError::Import(_) => "bad_key",
        }
    }
}

/// What one failed attempt of a KMS call was, for the retry loop to decide on.
#[derive(Debug)]
pub(crate) enum Attempt {
    /// Throttled, or a server error that KMS documents as retryable: try again after a wait.
    Retry(KmsError),
    /// No answer (connection refused, reset, timed out): worth at most a quick second try.
    NoAnswer(KmsError),
    /// Final: an answer about the key or the request.
    Final(KmsError),
}

/// Classifies a failed KMS call `op` on `key` (an ARN, `None` for calls on no key, `kid`
/// when known). `kms` is how messages name KMS.
pub(crate) fn classify<E>(
    err: SdkError<E, HttpResponse>,
    kms: &str,
    op: &'static str,
    key: Option<&str>,
    kid: Option<&str>,
) -> Attempt
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if let Some(attempt) = without_answer(&err, kms, op) {
        return attempt;
    }
    let answer = Answer {
        status: err.raw_response().map(|r| r.status().as_u16()),
        code: err.code().unwrap_or("Unknown").to_owned(),
        message: err.message().unwrap_or_default().to_owned(),
    };
    answer.attempt(
        kms.to_owned(),
        op,
        key.unwrap_or("-").to_owned(),
        kid.map(str::to_owned),
    )
}

/// A call that got no answer from KMS itself: the credential chain failed, or the network
/// (timed out, not sent, an unreadable response). `None` when KMS answered with an error.
fn without_answer<E>(
    err: &SdkError<E, HttpResponse>,
    kms: &str,
    op: &'static str,
) -> Option<Attempt>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let kms = kms.to_owned();
    let cause = || aws_smithy_types::error::display::DisplayErrorContext(err).to_string();
    if credentials_failure(err) {
        return Some(Attempt::Final(KmsError::Credentials {
            kms,
            op,
            cause: cause(),
        }));
    }
    match err {
        SdkError::ServiceError(_) => None,
        SdkError::TimeoutError(_) => Some(Attempt::NoAnswer(KmsError::Unreachable {
            kms,
            op,
            cause: "no answer in time".into(),
        })),
        SdkError::DispatchFailure(failure) => {
            let unreachable = KmsError::Unreachable {
                kms,
                op,
                cause: cause(),
            };
            if failure.is_io() || failure.is_timeout() || failure.is_other() {
                return Some(Attempt::NoAnswer(unreachable));
            }
            Some(Attempt::Final(unreachable))
        }
        SdkError::ResponseError(_) => Some(Attempt::NoAnswer(KmsError::Unreachable {
            kms,
            op,
            cause: cause(),
        })),
        _ => Some(Attempt::Final(KmsError::Unreachable {
            kms,
            op,
            cause: cause(),
        })),
    }
}

/// KMS's own answer to a failed call: its HTTP status, error code and message.
struct Answer {
    status: Option<u16>,
    code: String,
    message: String,
}

impl Answer {
    /// What KMS's error code means for the call `op` on `key` (`kid` when known): retry,
    /// or a final word about the key, the credentials or the request.
    fn attempt(self, kms: String, op: &'static str, key: String, kid: Option<String>) -> Attempt {
        let Answer {
            status,
            code,
            message,
        } = self;
        match code.as_str() {
            "ThrottlingException" | "ThrottledException" | "TooManyRequestsException" => {
                Attempt::Retry(KmsError::Throttled {
                    kms,
                    op,
                    attempts: 1,
                    waited: Duration::ZERO,
                })
            }
            "KMSInternalException" | "DependencyTimeoutException" | "KeyUnavailableException" => {
                Attempt::Retry(KmsError::Unreachable {
                    kms,
                    op,
                    cause: format!("{code}: {message}"),
                })
            }
            "DisabledException" => Attempt::Final(KmsError::KeyState {
                key,
                kid,
                state: "Disabled (DisabledException)".into(),
                advice: DISABLED_ADVICE,
            }),
            "KMSInvalidStateException" => Attempt::Final(KmsError::KeyState {
                key,
                kid,
                state: format!(
                    "not in a state that allows {op} (KMSInvalidStateException: {message})"
                ),
                advice: DISABLED_ADVICE,
            }),
            "NotFoundException" => Attempt::Final(KmsError::NotFound { key, kid }),
            "AccessDeniedException" => Attempt::Final(KmsError::AccessDenied {
                kms,
                op,
                key,
                code,
                message,
            }),
            "UnrecognizedClientException"
            | "ExpiredTokenException"
            | "InvalidSignatureException"
            | "IncompleteSignature"
            | "InvalidClientTokenId"
            | "MissingAuthenticationToken" => Attempt::Final(KmsError::Credentials {
                kms,
                op,
                cause: format!("{code}: {message}"),
            }),
            _ if status.is_some_and(|s| s >= 500) => Attempt::Retry(KmsError::Unreachable {
                kms,
                op,
                cause: format!("{code}: {message}"),
            }),
            _ => Attempt::Final(KmsError::Service {
                kms,
                op,
                key,
                code,
                message,
            }),
        }
    }
}

/// What an operator can do about a key KMS will not sign with now.
pub(crate) const DISABLED_ADVICE: &str = "it signs nothing until it is enabled again (`aws kms enable-key`, after `aws kms cancel-key-deletion` if its deletion is scheduled); to replace it at once, `warrant keys revoke KID`";

/// True when the credential chain, not the network, failed.
fn credentials_failure<E, R>(err: &SdkError<E, R>) -> bool
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    source::<aws_credential_types::provider::error::CredentialsError>(err).is_some()
}

/// The first error of type `E` in `err`'s chain.
pub(crate) fn source<'a, E: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<E>() {
            return Some(found);
        }
        next = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_or_not() {
        let disabled = KmsError::KeyState {
            key: "arn:aws:kms:us-east-1:111122223333:key/k".into(),
            kid: Some("KID".into()),
            state: "Disabled".into(),
            advice: DISABLED_ADVICE,
        };
        assert!(disabled.is_unavailable());
        assert!(!disabled.breaks_health());
        let text = disabled.to_string();
        assert!(
            text.starts_with(
                "AWS KMS key arn:aws:kms:us-east-1:111122223333:key/k (key KID): Disabled: "
            ),
            "{text}"
        );
        let gone = KmsError::NotFound {
            key: "arn:aws:kms:us-east-1:111122223333:key/k".into(),
            kid: None,
        };
        assert!(!gone.is_unavailable());
        assert_eq!(gone.kind(), "not_found");
    }
}
