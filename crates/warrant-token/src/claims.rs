//! The claims of a bound service-account token, exactly as kube-apiserver writes them.
//!
//! Field order in these structs is the wire order: kube-apiserver's JWT library sorts object keys
//! at every level, so the fields are declared alphabetically and serialised in that order. With
//! [`Claims::to_json`] the payload is byte-identical to kube-apiserver's for the same values.

use serde::{Deserialize, Deserializer, Serialize};

use crate::gojson;
use crate::numeric_date::numeric_date;

/// The registered and private claims of a service-account token.
///
/// Every field is optional on the way in, because a token is untrusted input and kube-apiserver
/// checks each claim only when it is present (warrant additionally requires `exp`, see
/// [`crate::Verifier`]). Tokens that warrant issues always carry all of them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences. Always written as a JSON array, even with one element; read from a string or
    /// an array, as go-jose accepts both.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "string_or_array"
    )]
    pub aud: Vec<String>,
    /// Confirmation (RFC 7800): the keys a key-bound token is bound to, read by the one parser
    /// of `cnf` ([`crate::Cnf`]; decide with [`crate::check_binding`]). warrant's addition;
    /// kube-apiserver never writes it, and it is written only when present, so unbound tokens
    /// stay byte-identical to kube's.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::cnf::present_cnf"
    )]
    pub cnf: Option<crate::Cnf>,
    /// Expiry, in seconds since the Unix epoch.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub exp: Option<i64>,
    /// Issued at, in seconds since the Unix epoch.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub iat: Option<i64>,
    /// Issuer: the first `--service-account-issuer`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iss: String,
    /// Token ID: a random UUIDv4, reported to reviewers as the credential ID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// The Kubernetes-specific private claim.
    #[serde(rename = "kubernetes.io", default)]
    pub kubernetes: KubernetesClaims,
    /// Not before, in seconds since the Unix epoch (equal to `iat` in issued tokens).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub nbf: Option<i64>,
    /// Subject: `system:serviceaccount:<namespace>:<name>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
    /// Claims beyond kube's that an authorization policy adds for the token's audiences
    /// ([`crate::ExtraClaims`]); `None` for every other token, which is then written exactly as
    /// before. Written by [`Claims::to_json`] in sorted place among the others; never read from
    /// a token (a review sees them in the payload, not here).
    #[serde(skip)]
    pub extra: Option<Box<crate::ExtraClaims>>,
}

/// The `kubernetes.io` claim: which service account the token is for and what it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The node: the bound object of a node-bound token, or, on a pod-bound token, the node the
    /// pod was scheduled to when the token was issued (its `uid` is absent if that node was not
    /// found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// The bound pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The bound secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The service account. Always written (Go cannot omit an embedded struct).
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    /// For tokens whose lifetime was extended (see [`crate::Lifetime`]): the time after which
    /// the token would have expired had it not been extended. Reviewers count tokens used after
    /// it as stale; it never causes rejection.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub warnafter: Option<i64>,
}

/// A reference to a Kubernetes object by name and UID.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's UID; empty when unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference with both name and UID.
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        ObjectRef {
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// The one object a token is bound to, if any. A token binds to at most one object; the
/// enum makes a Secret-and-Pod token (which kube-apiserver rejects as an internal error)
/// unrepresentable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// Not bound: valid while the service account exists.
    None,
    /// Bound to a pod; `node` is the pod's node when it is scheduled.
    Pod {
        /// The pod.
        pod: ObjectRef,
        /// The pod's node (`spec.nodeName`), with the node's UID if the node was found.
        node: Option<ObjectRef>,
    },
    /// Bound to a secret.
    Secret(ObjectRef),
    /// Bound to a node.
    Node(ObjectRef),
}

impl Binding {
    /// True for a pod binding, the only kind whose lifetime may be extended.
    pub fn is_pod(&self) -> bool {
        matches!(self, Binding::Pod { .. })
    }

    /// The bound object and its kind; `None` when not bound. A pod's node is not the bound
    /// object: it is informational.
    pub fn object(&self) -> Option<(BoundKind, &ObjectRef)> {
        match self {
            Binding::None => None,
            Binding::Pod { pod, .. } => Some((BoundKind::Pod, pod)),
            Binding::Secret(secret) => Some((BoundKind::Secret, secret)),
            Binding::Node(node) => Some((BoundKind::Node, node)),
        }
    }

    /// A metric label: `none`, `pod`, `secret` or `node`.
    pub fn label(&self) -> &'static str {
        match self {
            Binding::None => "none",
            Binding::Pod { .. } => "pod",
            Binding::Secret(_) => "secret",
            Binding::Node(_) => "node",
        }
    }
}

/// The object a TokenRequest asks its token to be bound to, as the client wrote it (the
/// API's `BoundObjectReference`); once looked up, it becomes a [`Binding`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BoundObjectReference {
    /// `Pod`, `Secret` or `Node`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Only its group matters; the core group is `v1` or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's UID; if given it must match.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// The kinds of object a token may be bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoundKind {
    /// A pod.
    Pod,
    /// A secret.
    Secret,
    /// A node.
    Node,
}

impl BoundKind {
    /// The kind as the API names it: `Pod`, `Secret`, `Node`.
    pub fn as_str(self) -> &'static str {
        match self {
            BoundKind::Pod => "Pod",
            BoundKind::Secret => "Secret",
            BoundKind::Node => "Node",
        }
    }
}

/// Everything that goes into a new token's claims.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    /// The issuer written to `iss` (the first configured issuer).
    pub issuer: &'a str,
    /// The service account's namespace.
    pub namespace: &'a str,
    /// The service account, with its UID.
    pub service_account: ObjectRef,
    /// The audiences, already defaulted.
    pub audiences: Vec<String>,
    /// The bound object.
    pub binding: Binding,
    /// Issue time, expiry and warn-after, in seconds since the Unix epoch.
    pub issued_at: i64,
    /// `exp`.
    pub expires_at: i64,
    /// `warnafter`, for extended tokens only.
    pub warn_after: Option<i64>,
    /// The token ID, normally [`new_jti`].
    pub jti: String,
}

/// A fresh random token ID in canonical lowercase UUIDv4 form, as kube-apiserver uses.
pub fn new_jti() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// How every service account's username begins.
pub const SERVICE_ACCOUNT_USERNAME_PREFIX: &str = "system:serviceaccount:";

/// The username of a service account: `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{name}")
}

/// Whether `username` is the service account `namespace`/`name`'s, compared without building
/// it.
pub fn is_service_account_username(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix(SERVICE_ACCOUNT_USERNAME_PREFIX)
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

impl Claims {
    /// What the token is bound to, read in one order everywhere: a pod (with its node, which
    /// is informational), else a secret, else a node. Neither kube-apiserver nor warrant issues
    /// a token naming both a pod and a secret; [`Claims::names_two_bound_objects`] finds one.
    pub fn binding(&self) -> Binding {
        match self.bound_object() {
            None => Binding::None,
            Some((BoundKind::Pod, pod)) => Binding::Pod {
                pod: pod.clone(),
                node: self.kubernetes.node.clone(),
            },
            Some((BoundKind::Secret, secret)) => Binding::Secret(secret.clone()),
            Some((BoundKind::Node, node)) => Binding::Node(node.clone()),
        }
    }

    /// The bound object of [`Claims::binding`], borrowed: what a review looks up.
    pub fn bound_object(&self) -> Option<(BoundKind, &ObjectRef)> {
        let k = &self.kubernetes;
        match (&k.pod, &k.secret, &k.node) {
            (Some(pod), _, _) => Some((BoundKind::Pod, pod)),
            (None, Some(secret), _) => Some((BoundKind::Secret, secret)),
            (None, None, Some(node)) => Some((BoundKind::Node, node)),
            (None, None, None) => None,
        }
    }

    /// True if the claims name both a pod and a secret: no issuer makes such a token, and a
    /// review refuses it rather than choose which of the two decides.
    pub fn names_two_bound_objects(&self) -> bool {
        self.kubernetes.pod.is_some() && self.kubernetes.secret.is_some()
    }

    /// Builds the claims of a new token.
    pub fn new(token: NewToken<'_>) -> Claims {
        let (pod, secret, node) = match token.binding {
            Binding::None => (None, None, None),
            Binding::Pod { pod, node } => (Some(pod), None, node),
            Binding::Secret(secret) => (None, Some(secret), None),
            Binding::Node(node) => (None, None, Some(node)),
        };
        Claims {
            aud: token.audiences,
            cnf: None,
            exp: Some(token.expires_at),
            iat: Some(token.issued_at),
            iss: token.issuer.to_owned(),
            jti: token.jti,
            kubernetes: KubernetesClaims {
                namespace: token.namespace.to_owned(),
                node,
                pod,
                secret,
                serviceaccount: token.service_account.clone(),
                warnafter: token.warn_after,
            },
            nbf: Some(token.issued_at),
            sub: service_account_username(token.namespace, &token.service_account.name),
            extra: None,
        }
    }

    /// The payload JSON, byte-identical to kube-apiserver's for the same values.
    pub fn to_json(&self) -> Vec<u8> {
        // Serialising plain strings, integers and options into a Vec cannot fail.
        // Strings, integers and maps of them: serializing cannot fail, and an empty payload
        // must never be signed if it somehow did.
        #[allow(clippy::expect_used)]
        match &self.extra {
            None => gojson::to_vec(self).expect("claims always serialize"),
            Some(extra) => gojson::to_vec(&WithExtra {
                claims: self,
                extra,
            })
            .expect("claims always serialize"),
        }
    }

    /// The claims and `extra` as one JSON object through a `serde_json::Value`, keys sorted at
    /// every level: what [`WithExtra`] writes directly, kept as its tests' oracle.
    #[cfg(test)]
    fn with_extra(&self, extra: &crate::ExtraClaims) -> serde_json::Value {
        // Serialising plain strings, integers and options into a Value cannot fail.
        #[allow(clippy::expect_used)]
        let mut value = serde_json::to_value(self).expect("claims always serialize");
        if let serde_json::Value::Object(object) = &mut value {
            for (name, claim) in extra {
                if !object.contains_key(name) && !crate::is_reserved_claim(name) {
                    object.insert(name.clone(), claim.clone());
                }
            }
        }
        value
    }
}

/// The claims and their extra claims as one JSON object, its members in the order Go writes a
/// map's (sorted by name, byte by byte): kube's registered claims are already declared in that
/// order and their nested objects' members too, and the extra claims (a sorted map, their
/// nested maps sorted) are merged in between. Written directly, not through a
/// `serde_json::Value` of the whole payload, which cost a templated token about as much again
/// as the rest of its claims (docs/benchmarks.md, "Extra claims"). An extra claim with a
/// registered name is never written ([`crate::is_reserved_claim`]; the policy never makes one).
struct WithExtra<'a> {
    claims: &'a Claims,
    extra: &'a crate::ExtraClaims,
}

impl Serialize for WithExtra<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let c = self.claims;
        let mut map = serializer.serialize_map(None)?;
        let mut extra = self
            .extra
            .iter()
            .filter(|(name, _)| !crate::is_reserved_claim(name))
            .peekable();
        let extra = &mut extra;
        if !c.aud.is_empty() {
            merged_member(&mut map, extra, "aud", &c.aud)?;
        }
        if let Some(cnf) = &c.cnf {
            merged_member(&mut map, extra, "cnf", cnf)?;
        }
        if let Some(exp) = &c.exp {
            merged_member(&mut map, extra, "exp", exp)?;
        }
        if let Some(iat) = &c.iat {
            merged_member(&mut map, extra, "iat", iat)?;
        }
        if !c.iss.is_empty() {
            merged_member(&mut map, extra, "iss", &c.iss)?;
        }
        if !c.jti.is_empty() {
            merged_member(&mut map, extra, "jti", &c.jti)?;
        }
        merged_member(&mut map, extra, "kubernetes.io", &c.kubernetes)?;
        if let Some(nbf) = &c.nbf {
            merged_member(&mut map, extra, "nbf", nbf)?;
        }
        if !c.sub.is_empty() {
            merged_member(&mut map, extra, "sub", &c.sub)?;
        }
        for (name, value) in extra {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// Writes the extra claims that sort before `name`, then the registered claim `name`.
fn merged_member<'a, M, I, V>(
    map: &mut M,
    extra: &mut std::iter::Peekable<I>,
    name: &str,
    value: &V,
) -> Result<(), M::Error>
where
    M: serde::ser::SerializeMap,
    I: Iterator<Item = (&'a String, &'a serde_json::Value)>,
    V: Serialize + ?Sized,
{
    while let Some((extra_name, extra_value)) = extra.next_if(|(n, _)| n.as_str() < name) {
        map.serialize_entry(extra_name, extra_value)?;
    }
    map.serialize_entry(name, value)
}

/// go-jose reads `aud` from a string or an array of strings.
fn string_or_array<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Audience {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Audience>::deserialize(d)? {
        None => Vec::new(),
        Some(Audience::One(s)) => vec![s],
        Some(Audience::Many(v)) => v,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The extra claims written directly, merged among kube's, are byte for byte what writing
    /// the whole payload through a sorted `serde_json::Value` gives: names before, between and
    /// after the registered ones, nested values, a registered name (never written), and claims
    /// with and without their optional members.
    #[test]
    fn extra_claims_are_merged_in_gos_map_order() {
        use serde_json::json;
        let extra: crate::ExtraClaims = [
            ("a", json!("first")),
            ("https://aws.amazon.com/tags", json!({"principal_tags": {"team": ["blue"], "env": ["prod"]}, "transitive_tag_keys": ["env"]})),
            ("ist", json!(1)),
            ("kubernetes.io.extra", json!({"z": 1, "a": [true, null]})),
            ("kubernetes.iz", json!("after kubernetes.io")),
            ("nbg", json!("between nbf and sub")),
            ("sub", json!("never written")),
            ("Sub", json!("nor this")),
            ("zzz", json!("<&> \u{2028}")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let full = Claims::new(NewToken {
            issuer: "https://issuer",
            namespace: "demo",
            service_account: ObjectRef::new("app", "sa-uid"),
            audiences: vec!["sts.amazonaws.com".into()],
            binding: Binding::Pod {
                pod: ObjectRef::new("app-0", "pod-uid"),
                node: Some(ObjectRef::new("node-1", "node-uid")),
            },
            issued_at: 1_800_000_000,
            expires_at: 1_800_003_600,
            warn_after: Some(1_800_000_607),
            jti: "jti".into(),
        });
        let mut sparse = full.clone();
        sparse.aud.clear();
        sparse.exp = None;
        sparse.iat = None;
        sparse.iss.clear();
        sparse.jti.clear();
        sparse.nbf = None;
        sparse.sub.clear();
        for claims in [full, sparse] {
            let oracle = gojson::to_vec(&claims.with_extra(&extra)).unwrap();
            let mut with = claims.clone();
            with.extra = Some(Box::new(extra.clone()));
            assert_eq!(
                String::from_utf8(with.to_json()).unwrap(),
                String::from_utf8(oracle).unwrap()
            );
        }
    }

    /// A username is a service account's exactly when it is the one built for it.
    #[test]
    fn a_service_account_username_is_recognised_as_built() {
        for (username, namespace, name) in [
            ("system:serviceaccount:ns:app", "ns", "app"),
            ("system:serviceaccount:ns:app", "ns", "ap"),
            ("system:serviceaccount:ns:app", "n", "s:app"),
            ("system:serviceaccount:ns:app", "ns:app", ""),
            ("system:serviceaccounts:ns:app", "ns", "app"),
            ("system:serviceaccount:ns", "ns", ""),
            ("system:node:n1", "ns", "app"),
        ] {
            assert_eq!(
                is_service_account_username(username, namespace, name),
                username == service_account_username(namespace, name),
                "{username} {namespace}/{name}"
            );
        }
        assert!(is_service_account_username(
            &service_account_username("ns", "app"),
            "ns",
            "app"
        ));
    }

    #[test]
    fn aud_is_always_an_array_and_keys_are_sorted() {
        let claims = Claims::new(NewToken {
            issuer: "https://example.com",
            namespace: "ns",
            service_account: ObjectRef::new("sa", "u1"),
            audiences: vec!["one".into()],
            binding: Binding::None,
            issued_at: 100,
            expires_at: 200,
            warn_after: None,
            jti: "j".into(),
        });
        assert_eq!(
            String::from_utf8(claims.to_json()).unwrap(),
            r#"{"aud":["one"],"exp":200,"iat":100,"iss":"https://example.com","jti":"j","kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"sa","uid":"u1"}},"nbf":100,"sub":"system:serviceaccount:ns:sa"}"#
        );
    }

    /// Extra claims are written in sorted place among kube's (as Go sorts a map), escaped as Go
    /// escapes, and never replace a registered claim; without them the payload is unchanged.
    #[test]
    fn extra_claims_are_written_in_sorted_place() {
        let mut claims = Claims::new(NewToken {
            issuer: "https://example.com",
            namespace: "ns",
            service_account: ObjectRef::new("sa", "u1"),
            audiences: vec!["one".into()],
            binding: Binding::None,
            issued_at: 100,
            expires_at: 200,
            warn_after: None,
            jti: "j".into(),
        });
        let plain = claims.to_json();
        let mut extra = crate::ExtraClaims::new();
        extra.insert("team".into(), serde_json::json!("a&b"));
        extra.insert("cluster".into(), serde_json::json!("c1"));
        extra.insert(
            "https://aws.amazon.com/tags".into(),
            serde_json::json!({"principal_tags": {"b": ["2"], "a": ["1"]}}),
        );
        extra.insert("sub".into(), serde_json::json!("forged"));
        claims.extra = Some(Box::new(extra));
        assert_eq!(
            String::from_utf8(claims.to_json()).unwrap(),
            r#"{"aud":["one"],"cluster":"c1","exp":200,"https://aws.amazon.com/tags":{"principal_tags":{"a":["1"],"b":["2"]}},"iat":100,"iss":"https://example.com","jti":"j","kubernetes.io":{"namespace":"ns","serviceaccount":{"name":"sa","uid":"u1"}},"nbf":100,"sub":"system:serviceaccount:ns:sa","team":"a\u0026b"}"#
        );
        claims.extra = None;
        assert_eq!(claims.to_json(), plain);
    }

    #[test]
    fn pod_binding_carries_node_without_uid_when_unknown() {
        let claims = Claims::new(NewToken {
            issuer: "i",
            namespace: "ns",
            service_account: ObjectRef::new("sa", "u1"),
            audiences: vec!["a".into(), "b".into()],
            binding: Binding::Pod {
                pod: ObjectRef::new("p", "pu"),
                node: Some(ObjectRef::new("n1", "")),
            },
            issued_at: 1,
            expires_at: 2,
            warn_after: Some(3),
            jti: "j".into(),
        });
        let json = String::from_utf8(claims.to_json()).unwrap();
        assert!(
            json.contains(r#""kubernetes.io":{"namespace":"ns","node":{"name":"n1"},"pod":{"name":"p","uid":"pu"},"serviceaccount":{"name":"sa","uid":"u1"},"warnafter":3}"#),
            "{json}"
        );
    }

    #[test]
    fn reads_string_audience_and_float_dates() {
        let c: Claims =
            serde_json::from_str(r#"{"aud":"x","exp":12.9,"iat":-1.5,"iss":"i"}"#).unwrap();
        assert_eq!(c.aud, vec!["x"]);
        assert_eq!(c.exp, Some(12));
        assert_eq!(c.iat, Some(-1));
        assert_eq!(c.nbf, None);
        assert_eq!(c.kubernetes, KubernetesClaims::default());
    }

    #[test]
    fn rejects_wrong_types() {
        assert!(serde_json::from_str::<Claims>(r#"{"exp":"soon"}"#).is_err());
        assert!(serde_json::from_str::<Claims>(r#"{"aud":[1]}"#).is_err());
        assert!(serde_json::from_str::<Claims>(r#"{"iss":5}"#).is_err());
        assert!(serde_json::from_str::<Claims>(r#"{"kubernetes.io":"x"}"#).is_err());
    }

    /// Every binding reads back from its claims as itself: the one order (pod, secret, node)
    /// that issuing writes and every reader uses.
    #[test]
    fn a_binding_reads_back_from_its_claims() {
        let pod = ObjectRef::new("p", "pod-1");
        let node = ObjectRef::new("n", "node-1");
        for binding in [
            Binding::None,
            Binding::Pod {
                pod: pod.clone(),
                node: Some(node.clone()),
            },
            Binding::Pod {
                pod: pod.clone(),
                node: None,
            },
            Binding::Secret(ObjectRef::new("s", "sec-1")),
            Binding::Node(node.clone()),
        ] {
            let claims = Claims::new(NewToken {
                issuer: "i",
                namespace: "ns",
                service_account: ObjectRef::new("sa", "u1"),
                audiences: vec!["a".into()],
                binding: binding.clone(),
                issued_at: 100,
                expires_at: 200,
                warn_after: None,
                jti: "j".into(),
            });
            assert_eq!(claims.binding(), binding);
            assert_eq!(claims.bound_object(), binding.object());
            assert!(!claims.names_two_bound_objects());
        }
        // A pod-bound token's node is not its bound object.
        let on_node = Binding::Pod {
            pod: pod.clone(),
            node: Some(node),
        };
        assert_eq!(on_node.object(), Some((BoundKind::Pod, &pod)));
        assert_eq!(on_node.label(), "pod");
    }
}
