//! Kubernetes' protobuf encoding of the two request bodies warrant reads. kubectl and the
//! kubelet send TokenRequests as protobuf (`application/vnd.kubernetes.protobuf`), as client-go
//! does for every core-group call; kube-apiserver accepts it, so warrant must too.
//!
//! The encoding: the four bytes `k8s\0`, then a `runtime.Unknown` message whose `raw` field is the
//! object's own message. Only the fields warrant reads are declared here; protobuf skips the
//! rest. Field numbers are those of `k8s.io/api` (`authentication/v1/generated.proto`) and
//! `k8s.io/apimachinery` (`runtime/generated.proto`, `meta/v1/generated.proto`). Responses are
//! always JSON, which every Kubernetes client also accepts.

use std::collections::BTreeMap;

use prost::Message;
use serde_json::Value;
use warrant_proto::wire;

use crate::error::ApiError;

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\x00";

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenRequest {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenRequestSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenRequestSpec {
    #[prost(string, repeated, tag = "1")]
    audiences: Vec<String>,
    #[prost(message, optional, tag = "3")]
    bound_object_ref: Option<BoundObjectReference>,
    #[prost(int64, optional, tag = "4")]
    expiration_seconds: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct BoundObjectReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenReview {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenReviewSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct TokenReviewSpec {
    #[prost(string, optional, tag = "1")]
    token: Option<String>,
    #[prost(string, repeated, tag = "2")]
    audiences: Vec<String>,
}

/// A request body type that can also arrive as Kubernetes protobuf.
pub(crate) trait FromProtobuf: Sized {
    /// Decodes the envelope and the object.
    fn from_protobuf(body: &[u8]) -> Result<Self, ApiError>;
}

fn malformed() -> ApiError {
    ApiError::bad_request("the request body is not a valid Kubernetes protobuf message")
}

/// Opens the envelope: the type and the object's bytes.
fn envelope(body: &[u8]) -> Result<(TypeMeta, Vec<u8>), ApiError> {
    let inner = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let unknown = Unknown::decode(inner).map_err(|_| malformed())?;
    if unknown
        .content_encoding
        .as_deref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(ApiError::bad_request(
            "compressed protobuf bodies are not supported",
        ));
    }
    Ok((
        unknown.type_meta.unwrap_or_default(),
        unknown.raw.unwrap_or_default(),
    ))
}

fn meta(m: Option<ObjectMeta>) -> wire::ObjectMeta {
    let m = m.unwrap_or_default();
    let mut other = BTreeMap::new();
    let as_json = |map: BTreeMap<String, String>| {
        Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        )
    };
    if !m.labels.is_empty() {
        other.insert("labels".to_owned(), as_json(m.labels));
    }
    if !m.annotations.is_empty() {
        other.insert("annotations".to_owned(), as_json(m.annotations));
    }
    wire::ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        creation_timestamp: None,
        other,
    }
}

impl FromProtobuf for wire::TokenRequest {
    fn from_protobuf(body: &[u8]) -> Result<Self, ApiError> {
        let (type_meta, raw) = envelope(body)?;
        let request = TokenRequest::decode(raw.as_slice()).map_err(|_| malformed())?;
        let spec = request.spec.unwrap_or_default();
        Ok(wire::TokenRequest {
            kind: type_meta.kind,
            api_version: type_meta.api_version,
            metadata: meta(request.metadata),
            spec: wire::TokenRequestSpec {
                audiences: (!spec.audiences.is_empty()).then_some(spec.audiences),
                expiration_seconds: spec.expiration_seconds,
                bound_object_ref: spec.bound_object_ref.map(|r| wire::BoundObjectReference {
                    kind: r.kind.unwrap_or_default(),
                    api_version: r.api_version.unwrap_or_default(),
                    name: r.name.unwrap_or_default(),
                    uid: r.uid.unwrap_or_default(),
                }),
            },
            status: None,
        })
    }
}

impl FromProtobuf for wire::TokenReview {
    fn from_protobuf(body: &[u8]) -> Result<Self, ApiError> {
        let (type_meta, raw) = envelope(body)?;
        let review = TokenReview::decode(raw.as_slice()).map_err(|_| malformed())?;
        let spec = review.spec.unwrap_or_default();
        Ok(wire::TokenReview {
            kind: type_meta.kind,
            api_version: type_meta.api_version,
            metadata: meta(review.metadata),
            spec: wire::TokenReviewSpec {
                token: spec.token.unwrap_or_default(),
                audiences: spec.audiences,
                // kube's protobuf schema has no proof fields; warrant.dev's take JSON or YAML.
                ..Default::default()
            },
            status: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes built by hand, field by field, from the field numbers of
    /// `k8s.io/apimachinery/pkg/runtime/generated.proto` (Unknown: 1 typeMeta {1 apiVersion,
    /// 2 kind}, 2 raw, 4 contentType) and `k8s.io/api/authentication/v1/generated.proto`
    /// (TokenRequest: 2 spec; TokenRequestSpec: 1 audiences, 3 boundObjectRef {1 kind,
    /// 2 apiVersion, 3 name, 4 uid}, 4 expirationSeconds), after the `k8s\0` magic: not by
    /// this crate's encoder, whose mistakes it would share. The same file seeds the
    /// `request_body` fuzz target.
    const HAND_BUILT_TOKEN_REQUEST: &[u8] =
        include_bytes!("../../../fuzz/corpus/request_body/tokenrequest.pb");

    #[test]
    fn decodes_a_kubernetes_protobuf_token_request() {
        let request = wire::TokenRequest::from_protobuf(HAND_BUILT_TOKEN_REQUEST).unwrap();
        assert_eq!(request.kind.as_deref(), Some("TokenRequest"));
        assert_eq!(
            request.api_version.as_deref(),
            Some("authentication.k8s.io/v1")
        );
        assert_eq!(request.spec.audiences, Some(vec!["vault".to_owned()]));
        assert_eq!(request.spec.expiration_seconds, Some(3600));
        let bound = request.spec.bound_object_ref.unwrap();
        assert_eq!(
            (
                bound.kind.as_str(),
                bound.api_version.as_str(),
                bound.name.as_str(),
                bound.uid.as_str()
            ),
            ("Pod", "v1", "app-1", "0b5c5a4e-0000-4000-8000-000000000001")
        );
    }

    /// Bodies kubectl v1.32 sent (tests/vectors/kubectl-v1.32/README.md says how).
    fn kubectl(name: &str) -> wire::TokenRequest {
        let path = format!(
            "{}/tests/vectors/kubectl-v1.32/tokenrequest-{name}.pb",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap();
        wire::TokenRequest::from_protobuf(&bytes).unwrap()
    }

    #[test]
    fn decodes_what_kubectl_sends() {
        let bound = |request: &wire::TokenRequest| {
            request.spec.bound_object_ref.as_ref().map(|b| {
                (
                    b.kind.clone(),
                    b.api_version.clone(),
                    b.name.clone(),
                    b.uid.clone(),
                )
            })
        };
        let plain = kubectl("plain");
        assert_eq!(plain.kind.as_deref(), Some("TokenRequest"));
        assert_eq!(
            plain.api_version.as_deref(),
            Some("authentication.k8s.io/v1")
        );
        assert!(
            plain
                .spec
                .audiences
                .as_deref()
                .unwrap_or_default()
                .is_empty()
        );
        assert_eq!(plain.spec.expiration_seconds, None);
        assert_eq!(bound(&plain), None);

        let pod = kubectl("pod-bound");
        assert_eq!(
            pod.spec.audiences.clone().unwrap(),
            ["vault", "https://kubernetes.default.svc"]
        );
        assert_eq!(pod.spec.expiration_seconds, Some(600));
        assert_eq!(
            bound(&pod),
            Some((
                "Pod".into(),
                "v1".into(),
                "app-0".into(),
                "22222222-2222-2222-2222-222222222222".into()
            ))
        );

        let secret = kubectl("secret-bound");
        assert_eq!(
            bound(&secret),
            Some((
                "Secret".into(),
                "v1".into(),
                "app-token".into(),
                String::new()
            ))
        );
        let node = kubectl("node-bound");
        assert_eq!(node.spec.expiration_seconds, Some(3600));
        assert_eq!(
            bound(&node),
            Some(("Node".into(), "v1".into(), "node-1".into(), String::new()))
        );
    }

    #[test]
    fn refuses_what_is_not_protobuf() {
        for body in [&b""[..], b"{}", b"k8s\x00\xff\xff\xff", b"k8s"] {
            assert!(wire::TokenRequest::from_protobuf(body).is_err(), "{body:?}");
        }
    }
}
