//! The gRPC code of each kind of refusal, as the socket answers it: `UNAVAILABLE` when a later
//! attempt may succeed (the key's holder cannot be reached, the keys are past their signing
//! deadline), `INTERNAL` when the key failed. Claims warrant does not sign are
//! `INVALID_ARGUMENT` (each reason: `sign.rs`), and a Sign whose audit event cannot be written
//! `UNAVAILABLE` (tests/e2e/audit.rs).

use std::sync::Arc;

use jiff::Timestamp;
use tonic::Code;
use warrant_keys::KeySet;
use warrant_signer::proto::SignJwtRequest;
use warrant_token::{
    ExpirationPolicy, KeyType, RemoteKey, RemoteSignError, RemoteSignature, SigningKey,
};

use crate::support::*;

/// A key held elsewhere that never signs: its holder is unreachable (`unavailable`), or
/// refuses the signature.
struct Failing {
    unavailable: bool,
}

impl RemoteKey for Failing {
    fn sign(&self, _: Vec<u8>) -> RemoteSignature<'_> {
        let error = RemoteSignError {
            unavailable: self.unavailable,
            source: Arc::new(std::io::Error::other(if self.unavailable {
                "the device is gone"
            } else {
                "the key cannot sign"
            })),
        };
        Box::pin(async move { Err(error) })
    }

    fn describe(&self) -> String {
        "a failing test key".into()
    }

    fn locator(&self) -> String {
        "test:failing".into()
    }

    fn unavailable(&self) -> Option<String> {
        self.unavailable.then(|| "the device is gone".into())
    }
}

/// A key set whose only key signs through `Failing`.
fn failing(unavailable: bool) -> KeySet {
    let public = SigningKey::generate(KeyType::P256)
        .unwrap()
        .verifying_key()
        .clone();
    KeySet::new(
        SigningKey::remote(public, Arc::new(Failing { unavailable })),
        vec![],
    )
}

/// Signs good claims with `keys` and returns the refusal's code, message and metric label count.
async fn refusal(keys: KeySet, reason: &str) -> (Code, String, f64) {
    let mut env = start(keys, ExpirationPolicy::default()).await;
    let status = env
        .client
        .sign(SignJwtRequest {
            claims: encode_claims(&pod_claims(NOW, 3600)),
        })
        .await
        .unwrap_err();
    let counted = env.metric(&format!(
        r#"warrant_signer_requests_total{{rpc="Sign",result="{reason}"}}"#
    ));
    (status.code(), status.message().to_owned(), counted)
}

#[tokio::test]
async fn a_key_whose_holder_cannot_be_reached_is_unavailable() {
    let (code, message, counted) = refusal(failing(true), "key_unavailable").await;
    assert_eq!(code, Code::Unavailable, "{message}");
    assert!(
        message.starts_with("signing failed: the signing key ")
            && message.ends_with(" is unavailable: the device is gone"),
        "{message}"
    );
    assert_eq!(counted, 1.0);
}

#[tokio::test]
async fn keys_past_their_signing_deadline_are_unavailable() {
    let key = SigningKey::generate(KeyType::P256).unwrap();
    let deadline = Timestamp::from_second(NOW).unwrap();
    let keys = KeySet::new(key, vec![]).with_signing_deadline(Some(deadline));
    let (code, message, counted) = refusal(keys, "key_withheld").await;
    assert_eq!(code, Code::Unavailable, "{message}");
    assert!(
        message.starts_with("signing failed: the key store has not answered since before "),
        "{message}"
    );
    assert_eq!(counted, 1.0);
}

/// A key set that signs nothing because its signing key was revoked with no successor made (its
/// holder away): kube-apiserver is told to retry, and why.
#[tokio::test]
async fn a_key_set_whose_signing_key_was_revoked_without_a_successor_is_unavailable() {
    let since = Timestamp::from_second(NOW - 60).unwrap();
    let keys = KeySet::stopped(vec![], since, None);
    let (code, message, counted) = refusal(keys, "signing_stopped").await;
    assert_eq!(code, Code::Unavailable, "{message}");
    assert_eq!(
        message,
        format!(
            "signing failed: no key signs: the signing key was revoked at {since} and no key could be made to take over yet (its key holder cannot be reached); tokens are signed again once the key store's writer makes one"
        )
    );
    assert_eq!(counted, 1.0);
}

#[tokio::test]
async fn a_key_that_fails_to_sign_is_internal() {
    let (code, message, counted) = refusal(failing(false), "sign_failed").await;
    assert_eq!(code, Code::Internal, "{message}");
    assert!(
        message.starts_with("signing failed: the signing key ")
            && message.contains(" failed to sign: "),
        "{message}"
    );
    assert_eq!(counted, 1.0);
}
