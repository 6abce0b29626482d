//! Kubernetes wire types for the APIs warrant serves, as kube-apiserver writes them: field order
//! is Go's struct order, empty optional fields are omitted where Go omits them.
//!
//! Why not k8s-openapi's types: they insist on an exact `apiVersion` (so a webhook's v1beta1
//! TokenReview would not parse), make fields required that kube-apiserver's own clients send as
//! `null` (`status.expirationTimestamp` in every kubectl TokenRequest), and serialise in a
//! different order. Requests are parsed leniently, as kube-apiserver parses them: unknown fields
//! are ignored and `null` is as good as absent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiVersion` of TokenRequest and of TokenReview v1.
pub const AUTHENTICATION_V1: &str = crate::groups::AUTHENTICATION_V1.api_version;
/// `apiVersion` of TokenReview v1beta1 (kube-apiserver's default webhook version).
pub const AUTHENTICATION_V1BETA1: &str = crate::groups::AUTHENTICATION_V1BETA1.api_version;
/// warrant's own API group, for serving behind kube-apiserver's aggregator.
pub const WARRANT_V1ALPHA1: &str = crate::groups::WARRANT_V1ALPHA1.api_version;

/// The parts of `metadata` that warrant reads or fills in; other fields are echoed back as sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `metadata.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `metadata.uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// `metadata.creationTimestamp` (RFC 3339, whole seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Everything else the client sent (labels, annotations, …), echoed unchanged.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `authentication.k8s.io/v1` TokenRequest: what warrant reads and answers, and what its own
/// clients (the credential plugin, the token agent) send ([`TokenRequest::new`]) and read back
/// ([`TokenRequest::answer_status`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    /// Always `TokenRequest` on the way out.
    #[serde(default)]
    pub kind: Option<String>,
    /// Always `authentication.k8s.io/v1` on the way out.
    #[serde(default)]
    pub api_version: Option<String>,
    /// Name and namespace must match the URL if given.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What is asked for.
    #[serde(default)]
    pub spec: TokenRequestSpec,
    /// The token, on the way out. A request's is not read (kubectl sends one with a `null`
    /// `expirationTimestamp`); a client reads an answer's with [`TokenRequest::answer_status`].
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub status: Option<TokenRequestStatus>,
}

impl TokenRequest {
    /// The kind, `TokenRequest`.
    pub const KIND: &str = "TokenRequest";

    /// The TokenRequest a client sends for `spec`: kind and `apiVersion` set, no metadata.
    pub fn new(spec: TokenRequestSpec) -> Self {
        TokenRequest {
            kind: Some(Self::KIND.to_owned()),
            api_version: Some(AUTHENTICATION_V1.to_owned()),
            spec,
            ..TokenRequest::default()
        }
    }

    /// The status of a TokenRequest answer (JSON), as a client reads it: the token and its
    /// expiry, empty where the answer has none.
    pub fn answer_status(answer: &[u8]) -> serde_json::Result<TokenRequestStatus> {
        /// An answer as a client reads it: its status only.
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            status: TokenRequestStatus,
        }
        serde_json::from_slice::<Answer>(answer).map(|answer| answer.status)
    }
}

/// What a TokenRequest asks for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequestSpec {
    /// Audiences; empty means the API audiences. Go writes `null` when nil, never omits it.
    #[serde(default)]
    pub audiences: Option<Vec<String>>,
    /// Lifetime in seconds; defaults to 3600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_seconds: Option<i64>,
    /// The object to bind the token to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_object_ref: Option<BoundObjectReference>,
}

/// The object a TokenRequest binds its token to (defined with the claims it becomes).
pub use warrant_token::BoundObjectReference;

/// The issued token.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequestStatus {
    /// The JWT.
    #[serde(default)]
    pub token: String,
    /// Now plus `spec.expirationSeconds` (not the extended `exp` of an extended token).
    #[serde(default)]
    pub expiration_timestamp: String,
}

/// TokenReview, v1 or v1beta1 (field-identical).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenReview {
    /// Always `TokenReview` on the way out.
    #[serde(default)]
    pub kind: Option<String>,
    /// The request's version, echoed.
    #[serde(default)]
    pub api_version: Option<String>,
    /// kube-apiserver sends `{}` or `{"creationTimestamp":null}`; both are accepted.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The token and audiences to review.
    #[serde(default)]
    pub spec: TokenReviewSpec,
    /// The verdict, on the way out. Requests carry `{"user":{}}`, which is ignored.
    #[serde(default, skip_deserializing)]
    pub status: TokenReviewStatus,
}

/// What to review.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenReviewSpec {
    /// The bearer token.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// The audiences the caller accepts; empty means the API audiences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// `warrant.dev` only: the DPoP proof (RFC 9449) that came with the token, for a token
    /// bound to a DPoP key (`cnf.jkt`). Not a field of kube's TokenReview: the
    /// `authentication.k8s.io` routes drop it unread, as kube-apiserver drops unknown fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop: Option<DpopProof>,
    /// `warrant.dev` only: the RFC 8705 thumbprint (`x5t#S256`: unpadded base64url of the
    /// SHA-256 of the DER) of the client certificate of the TLS connection the token came over,
    /// for a token bound to a certificate. Dropped by the `authentication.k8s.io` routes. Empty
    /// is as good as absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_thumbprint: Option<String>,
}

impl TokenReviewSpec {
    /// True if the spec carries proof of a key (a DPoP proof or a certificate thumbprint).
    pub fn has_proof_of_key(&self) -> bool {
        self.dpop.is_some() || self.certificate_thumbprint.is_some()
    }
}

/// A DPoP proof as a relying party received it, with the request it came with: the proof's
/// `htm` and `htu` must name that request, not the review.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DpopProof {
    /// The `DPoP` header's value: the proof JWT.
    #[serde(default)]
    pub proof: String,
    /// The method of the request the proof came with, e.g. `GET` (compared exactly).
    #[serde(default)]
    pub method: String,
    /// The absolute `https` URI of the request the proof came with, as its client addressed it
    /// (query and fragment are ignored).
    #[serde(default)]
    pub uri: String,
}

/// The verdict. `user` is always written (Go cannot omit a struct), the rest only when set.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenReviewStatus {
    /// True when the token is valid.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub authenticated: bool,
    /// Who the token stands for.
    pub user: warrant_token::UserInfo,
    /// The audiences the token was accepted for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// Why the token is not valid.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// `warrant.dev` only: the key binding that was checked, when a key-bound token passed
    /// with its proof. Never set on the `authentication.k8s.io` routes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_binding: Option<KeyBinding>,
}

/// The key binding a review checked: how the key was proven, and its thumbprint (the
/// token's `cnf` member), so a relying party can tie the token to the client it talks to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyBinding {
    /// `DPoP` (a proof of the key `cnf.jkt` names) or `ClientCertificate` (the certificate
    /// `cnf.x5t#S256` names).
    pub method: &'static str,
    /// The token's `cnf.jkt` or `cnf.x5t#S256`.
    pub thumbprint: String,
}

/// `metav1.Status`, the body of every error.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `Status`.
    pub kind: &'static str,
    /// `v1`.
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    /// Always `{}`.
    pub metadata: BTreeMap<String, Value>,
    /// `Failure`.
    pub status: &'static str,
    /// Human-readable, and exactly kube-apiserver's where it has one.
    pub message: String,
    /// Machine-readable reason (`NotFound`, `Invalid`, …).
    pub reason: &'static str,
    /// Which object and which fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    pub code: u16,
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The object's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The kind or resource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Field-level causes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// How long the client should wait before it retries (429, 503).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// `metav1.StatusCause`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusCause {
    /// e.g. `FieldValueInvalid`.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
    /// Which field.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What warrant's own clients (the credential plugin, the token agent) send: kubectl's
    /// TokenRequest without its empty parts, which the server reads back as sent.
    #[test]
    fn a_clients_token_request_is_what_the_server_reads() {
        let request = TokenRequest::new(TokenRequestSpec {
            audiences: Some(vec!["vault".into()]),
            expiration_seconds: Some(600),
            bound_object_ref: Some(BoundObjectReference {
                kind: "Pod".into(),
                api_version: "v1".into(),
                name: "app-0".into(),
                uid: "5b".into(),
            }),
        });
        let sent = serde_json::to_string(&request).unwrap();
        assert_eq!(
            sent,
            r#"{"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{},"spec":{"audiences":["vault"],"expirationSeconds":600,"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"app-0","uid":"5b"}}}"#
        );
        let read: TokenRequest = serde_json::from_str(&sent).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), sent);
    }

    /// A request's status is not read, whatever it holds; an answer's is, by its client.
    #[test]
    fn a_status_is_read_from_answers_only() {
        for status in [
            r#"{"token":"","expirationTimestamp":null}"#,
            r#"{"token":5}"#,
            r#""issued""#,
        ] {
            let request: TokenRequest =
                serde_json::from_str(&format!(r#"{{"spec":{{}},"status":{status}}}"#)).unwrap();
            assert!(request.status.is_none(), "{status}");
        }
        let answer = br#"{"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"name":"app","namespace":"demo","creationTimestamp":null},"spec":{"audiences":["vault"],"expirationSeconds":3600,"boundObjectRef":null},"status":{"token":"eyJ.x.y","expirationTimestamp":"2026-11-28T02:00:00Z"}}"#;
        let status = TokenRequest::answer_status(answer).unwrap();
        assert_eq!(status.token, "eyJ.x.y");
        assert_eq!(status.expiration_timestamp, "2026-11-28T02:00:00Z");
        let empty = TokenRequest::answer_status(br#"{"kind":"TokenRequest"}"#).unwrap();
        assert_eq!(
            (empty.token.as_str(), empty.expiration_timestamp.as_str()),
            ("", "")
        );
        assert!(TokenRequest::answer_status(br#"{"status":{"token":5}}"#).is_err());
        assert!(TokenRequest::answer_status(b"not json").is_err());
    }
}
