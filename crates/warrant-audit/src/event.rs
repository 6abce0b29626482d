//! The audit event: what one line of the audit log says. docs/audit.md is its schema; a field
//! added here is added there. An event never holds a token, a signature or a key: only names,
//! UIDs, times, the credential ID (`JTI=…`) and the key ID.

use std::collections::BTreeMap;

use crate::loglimit::bounded;
use jiff::Timestamp;
use serde::{Serialize, Serializer};
use warrant_token::{Binding, Claims, MAX_AUDIENCE_BYTES, MAX_AUDIENCES, ObjectRef};

/// The longest name an event keeps (a namespace, a service account, a bound object, a UID, a
/// credential ID), in characters: kube's limit for an object name (a DNS subdomain), so a
/// name kube could hold is kept whole and one it could not is cut (ending in `…`).
pub const MAX_NAME_CHARS: usize = 253;

/// The longest reason an event keeps, in characters: a refusal may quote what the client sent.
pub const MAX_REASON_CHARS: usize = 1024;

/// The most extra keys, and values per key, an event keeps of its caller's.
pub const MAX_EXTRAS: usize = 32;

/// One audited request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// What was asked.
    pub kind: EventKind,
    /// When the request arrived, RFC 3339 in UTC with microseconds.
    #[serde(serialize_with = "micro_time")]
    pub time: Timestamp,
    /// The request's ID: the `Audit-ID` header kube-apiserver sent (so warrant's event and
    /// kube-apiserver's share it), else one warrant made; warrant answers with it in `Audit-ID`.
    /// Empty for Sign (gRPC has no such header).
    #[serde(rename = "requestID", skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    /// Who asked.
    pub requester: Requester,
    /// What warrant did.
    pub decision: Decision,
    /// The HTTP status of the answer (absent for Sign).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Why it refused (a request) or did not authenticate (a token): the message the client was
    /// given.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The service account the token is (or would have been) for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccount>,
    /// The token issued, reviewed or signed, when there is one whose claims are known.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenFacts>,
    /// For a PodCertificateRequest decided: the request, its pod and node, and the certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_certificate: Option<Box<PodCertificateFacts>>,
    /// When the answer was ready (the Kubernetes schema's `stageTimestamp`; not written in
    /// warrant's, whose `time` is the arrival). `None`: taken as `time`.
    #[serde(skip)]
    pub answered: Option<Timestamp>,
}

impl Event {
    /// Cuts what a client could make long to the limits: names to [`MAX_NAME_CHARS`], the
    /// reason to [`MAX_REASON_CHARS`], audiences to TokenRequest's own limits (at most
    /// `MAX_AUDIENCES`, each at most `MAX_AUDIENCE_BYTES`). Whoever built the event (the API,
    /// the external signer), neither the queue nor the file holds more per event than that.
    pub(crate) fn bound(&mut self) {
        cut(&mut self.reason, MAX_REASON_CHARS);
        if let Some(account) = &mut self.service_account {
            cut(&mut account.namespace, MAX_NAME_CHARS);
            cut(&mut account.name, MAX_NAME_CHARS);
            cut(&mut account.uid, MAX_NAME_CHARS);
        }
        if let Some(token) = &mut self.token {
            token.audiences.truncate(MAX_AUDIENCES);
            for audience in &mut token.audiences {
                if audience.len() > MAX_AUDIENCE_BYTES {
                    let mut end = MAX_AUDIENCE_BYTES;
                    while !audience.is_char_boundary(end) {
                        end -= 1;
                    }
                    audience.truncate(end);
                }
            }
            for object in [&mut token.bound_object, &mut token.node]
                .into_iter()
                .flatten()
            {
                cut(&mut object.name, MAX_NAME_CHARS);
                cut(&mut object.uid, MAX_NAME_CHARS);
            }
            cut(&mut token.credential_id, MAX_NAME_CHARS);
            if let Some(cnf) = &mut token.cnf {
                for thumbprint in [&mut cnf.jkt, &mut cnf.x5t_s256].into_iter().flatten() {
                    cut(thumbprint, MAX_NAME_CHARS);
                }
            }
        }
        if let Some(certificate) = &mut self.pod_certificate {
            certificate.bound();
        }
        cut(&mut self.requester.credential_id, MAX_NAME_CHARS);
        // A caller's extras come from its authenticator (a front proxy relays any it is given):
        // bounded as kube bounds a name, in number as TokenRequest bounds audiences.
        let extra = std::mem::take(&mut self.requester.extra);
        self.requester.extra = extra
            .into_iter()
            .take(MAX_EXTRAS)
            .map(|(mut key, values)| {
                cut(&mut key, MAX_NAME_CHARS);
                let values = values
                    .into_iter()
                    .take(MAX_EXTRAS)
                    .map(|mut value| {
                        cut(&mut value, MAX_NAME_CHARS);
                        value
                    })
                    .collect();
                (key, values)
            })
            .collect();
    }

    /// A refusal of a caller that did not authenticate (no credentials, credentials that
    /// failed, or not decided on): anyone can make these, as fast as they like, so they are
    /// summarized rather than written one by one (docs/audit.md).
    pub(crate) fn is_unauthenticated_refusal(&self) -> bool {
        self.decision == Decision::Refused
            && matches!(
                self.requester.authenticated_by,
                ANONYMOUS | FAILED | UNDECIDED
            )
    }
}

/// `text` cut to `max` characters, in place, only if it is longer.
fn cut(text: &mut String, max: usize) {
    // A byte length within the limit is a character count within it too.
    if text.len() > max && text.chars().nth(max).is_some() {
        *text = bounded(text, max);
    }
}

const ANONYMOUS: &str = "anonymous";
const FAILED: &str = "failed";
const UNDECIDED: &str = "undecided";

/// The audited requests and decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventKind {
    /// `POST …/serviceaccounts/NAME/token`.
    TokenRequest,
    /// `POST …/tokenreviews`.
    TokenReview,
    /// The external signer's `Sign`, for kube-apiserver.
    Sign,
    /// A PodCertificateRequest decided by the pod certificate signer (no caller: warrant
    /// acts on a PCR it watched; the requester is warrant's own identity).
    PodCertificate,
}

/// What warrant did with the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    /// TokenRequest: a token was issued.
    Issued,
    /// Sign: the claims were signed.
    Signed,
    /// TokenReview: the token is valid; `serviceAccount` and the token's fields say whose.
    Authenticated,
    /// TokenReview: the token is not valid (the review itself succeeded); `reason` says why.
    Unauthenticated,
    /// The request itself was refused or failed (unauthenticated caller, forbidden, invalid,
    /// not found, unavailable, a timeout…); `code` and `reason` say how. For a pod
    /// certificate: kube-apiserver refused the status warrant wrote (`code` 422).
    Refused,
    /// PodCertificate: denied for good (`reason`); the status says so.
    Denied,
    /// PodCertificate: cannot be issued and retrying would not help (`reason`).
    Failed,
    /// PodCertificate: nothing written, tried again later (`reason`: the CA, the audit log or
    /// a fact unreadable now).
    Requeued,
    /// PodCertificate: another replica's status was stored first; ours was not.
    LostRace,
    /// PodCertificate: the request was deleted before its status could be written.
    Gone,
}

/// The caller.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requester {
    /// The user name, as authorization saw it; empty for an anonymous caller.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// The user's UID, when its authenticator knows one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The user's groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// How the caller proved who it is: `client-certificate`, `front-proxy` (relayed by
    /// kube-apiserver's aggregator), `token-file`, `service-account-token` (one of warrant's
    /// own), `delegated` (kube-apiserver's TokenReview), `anonymous` (no credentials),
    /// `failed` (credentials that did not authenticate), `undecided` (answered before
    /// authentication ended: 429 or a timeout), or `unix-socket` (Sign).
    pub authenticated_by: &'static str,
    /// Where the request came from: `IP:PORT` of the TCP peer (for a relayed request, the
    /// aggregator's), or `unix:pid=…,uid=…` for the signing socket.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_address: String,
    /// The credential the caller used, when its authenticator names one: `JTI=<jti>` of one
    /// of warrant's own tokens (its `authentication.kubernetes.io/credential-id`), so the
    /// token it presented can be joined to the event that issued it.
    #[serde(rename = "credentialID", skip_serializing_if = "String::is_empty")]
    pub credential_id: String,
    /// The caller's extras, as its authenticator gave them (written in the Kubernetes schema's
    /// `user.extra`; warrant's schema writes only `credentialID` of them).
    #[serde(skip)]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Requester {
    /// A caller that presented no credentials.
    pub fn anonymous(client_address: String) -> Self {
        Requester {
            authenticated_by: ANONYMOUS,
            client_address,
            ..Requester::default()
        }
    }

    /// A caller whose credentials were refused.
    pub fn refused(client_address: String) -> Self {
        Requester {
            authenticated_by: FAILED,
            client_address,
            ..Requester::default()
        }
    }

    /// A caller whose credentials were not decided on: the request was answered before
    /// authentication ended (too many lookups in flight, or the request timed out).
    pub fn undecided(client_address: String) -> Self {
        Requester {
            authenticated_by: UNDECIDED,
            client_address,
            ..Requester::default()
        }
    }
}

/// A service account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceAccount {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID, when known (it is not when the request failed before the lookup).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// What an event says about a token. Flattened into the event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenFacts {
    /// The token's audiences.
    pub audiences: Vec<String>,
    /// `iat`, RFC 3339.
    #[serde(
        serialize_with = "seconds_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub issued_at: Option<i64>,
    /// When the token expires as far as its requester was told (`status.expirationTimestamp`):
    /// `exp`, or for an extended token the time it would have expired unextended
    /// (`warnafter`).
    #[serde(
        serialize_with = "seconds_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<i64>,
    /// For an extended token (a kubelet's pod token for the API audiences): `exp`, when it
    /// really stops being valid.
    #[serde(
        serialize_with = "seconds_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub extended_expires_at: Option<i64>,
    /// The object the token is bound to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_object: Option<BoundObject>,
    /// For a pod-bound token, the pod's node when the token was issued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<BoundObject>,
    /// `JTI=<jti>`, as TokenReview reports it in `authentication.kubernetes.io/credential-id`.
    #[serde(rename = "credentialID", skip_serializing_if = "String::is_empty")]
    pub credential_id: String,
    /// The key that signed it.
    #[serde(rename = "keyID", skip_serializing_if = "String::is_empty")]
    pub key_id: String,
    /// For a key-bound token (`cnf`, RFC 7800): the thumbprint of the key it is bound to
    /// (`jkt`, a DPoP key) or of the certificate (`x5t#S256`); never the key itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cnf: Option<warrant_token::Confirmation>,
    /// The claims beyond kube's that the authorization policy added (names and values: they are
    /// made of object names, labels and annotations, which are no secret, and an auditor needs
    /// the values to tell why a relying party allowed what it did). Bounded by the token's own
    /// size limit, which TokenRequest enforces.
    #[serde(rename = "extraClaims", skip_serializing_if = "Option::is_none")]
    pub extra_claims: Option<Box<warrant_token::ExtraClaims>>,
    /// The token's `sub` when the policy made it other than kube's
    /// `system:serviceaccount:<namespace>:<name>`: a JWT-SVID's SPIFFE ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl TokenFacts {
    /// The facts of `claims`, signed by `key_id`.
    pub fn from_claims(claims: &Claims, key_id: &str) -> Self {
        let warnafter = claims.kubernetes.warnafter.filter(|w| *w != 0);
        let binding = claims.binding();
        let node = match &binding {
            Binding::Pod { node, .. } => node.as_ref().map(|n| BoundObject::new("Node", n)),
            _ => None,
        };
        TokenFacts {
            audiences: claims.aud.clone(),
            issued_at: claims.iat,
            expires_at: warnafter.or(claims.exp),
            extended_expires_at: warnafter.and(claims.exp),
            bound_object: binding
                .object()
                .map(|(kind, object)| BoundObject::new(kind.as_str(), object)),
            node,
            credential_id: if claims.jti.is_empty() {
                String::new()
            } else {
                format!("JTI={}", claims.jti)
            },
            key_id: key_id.to_owned(),
            cnf: claims
                .cnf
                .as_ref()
                .and_then(|cnf| cnf.binding().ok())
                .filter(|bound| bound.binds())
                .cloned(),
            extra_claims: claims.extra.clone(),
            subject: (!claims.sub.is_empty()
                && claims.sub
                    != warrant_token::service_account_username(
                        &claims.kubernetes.namespace,
                        &claims.kubernetes.serviceaccount.name,
                    ))
            .then(|| claims.sub.clone()),
        }
    }
}

impl ServiceAccount {
    /// The service account `claims` name (`None` if they name none).
    pub fn from_claims(claims: &Claims) -> Option<Self> {
        let account = &claims.kubernetes.serviceaccount;
        (!claims.kubernetes.namespace.is_empty() || !account.name.is_empty()).then(|| {
            ServiceAccount {
                namespace: claims.kubernetes.namespace.clone(),
                name: account.name.clone(),
                uid: account.uid.clone(),
            }
        })
    }
}

/// A bound object (or a pod's node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BoundObject {
    /// `Pod`, `Secret` or `Node`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// Its UID (absent for a pod's node that was not found).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl BoundObject {
    fn new(kind: &'static str, object: &ObjectRef) -> Self {
        BoundObject {
            kind,
            name: object.name.clone(),
            uid: object.uid.clone(),
        }
    }
}

/// What an event says about a pod certificate: the PodCertificateRequest, the pod, node and
/// (in the event's `serviceAccount`) service account it names, and, when one was issued, the
/// certificate. Never the key: its type and the SHA-256 of its SubjectPublicKeyInfo.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCertificateFacts {
    /// `spec.signerName`.
    pub signer_name: String,
    /// The PCR's namespace.
    pub namespace: String,
    /// The PCR's name.
    pub name: String,
    /// The PCR's UID (it is deleted 15 minutes after creation: this is the one record).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The pod it is for (`spec.podName`, `spec.podUID`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<BoundObject>,
    /// The node it names (`spec.nodeName`, `spec.nodeUID`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<BoundObject>,
    /// The requested key's type (`ECDSAP256`, `ED25519`…), when it parsed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key_type: String,
    /// SHA-256 of the requested key's SubjectPublicKeyInfo, hex.
    #[serde(rename = "spkiSHA256", skip_serializing_if = "String::is_empty")]
    pub spki_sha256: String,
    /// The certificate's serial number, hex.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub serial_number: String,
    /// The certificate's SPIFFE ID.
    #[serde(rename = "spiffeID", skip_serializing_if = "String::is_empty")]
    pub spiffe_id: String,
    /// The certificate's DNS names (from the Services that select the pod; at most 100).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// `notBefore`, RFC 3339.
    #[serde(
        serialize_with = "seconds_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_before: Option<i64>,
    /// `notAfter`, RFC 3339.
    #[serde(
        serialize_with = "seconds_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_after: Option<i64>,
    /// The key ID of the CA that signed it.
    #[serde(rename = "caKeyID", skip_serializing_if = "String::is_empty")]
    pub ca_key_id: String,
}

impl PodCertificateFacts {
    /// Cuts what a PCR's author could make long (names, UIDs) to [`MAX_NAME_CHARS`].
    fn bound(&mut self) {
        for text in [
            &mut self.signer_name,
            &mut self.namespace,
            &mut self.name,
            &mut self.uid,
            &mut self.key_type,
        ] {
            cut(text, MAX_NAME_CHARS);
        }
        for object in [&mut self.pod, &mut self.node].into_iter().flatten() {
            cut(&mut object.name, MAX_NAME_CHARS);
            cut(&mut object.uid, MAX_NAME_CHARS);
        }
    }
}

pub(crate) fn micro_time<S: Serializer>(
    time: &Timestamp,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&time.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

fn seconds_time<S: Serializer>(seconds: &Option<i64>, serializer: S) -> Result<S::Ok, S::Error> {
    match seconds.and_then(|s| Timestamp::from_second(s).ok()) {
        Some(time) => serializer.collect_str(&time.strftime("%Y-%m-%dT%H:%M:%SZ")),
        None => serializer.serialize_none(),
    }
}

/// `seconds` as RFC 3339 text, empty for none.
pub(crate) fn seconds_text(seconds: Option<i64>) -> String {
    seconds
        .and_then(|s| Timestamp::from_second(s).ok())
        .map(|time| time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_token() -> Claims {
        serde_json::from_value(serde_json::json!({
            "aud": ["vault"],
            "iat": 1_700_000_000,
            "exp": 1_731_536_000,
            "nbf": 1_700_000_000,
            "iss": "https://warrant.example",
            "jti": "4f1e2d3c-0000-4000-8000-000000000001",
            "sub": "system:serviceaccount:shop:cart",
            "kubernetes.io": {
                "namespace": "shop",
                "serviceaccount": {"name": "cart", "uid": "sa-uid"},
                "pod": {"name": "cart-7d9", "uid": "pod-uid"},
                "node": {"name": "n1", "uid": "node-uid"},
                "warnafter": 1_700_003_607
            }
        }))
        .unwrap()
    }

    /// An extended pod token says when its requester was told it expires and when it really
    /// does, what it is bound to, and how to find its issuance: and never more than that.
    #[test]
    fn an_event_is_one_line_of_the_documented_fields() {
        let claims = pod_token();
        let event = Event {
            kind: EventKind::TokenReview,
            time: Timestamp::from_microsecond(1_700_000_100_123_456).unwrap(),
            request_id: "b1f0".into(),
            requester: Requester {
                user: "system:kube-apiserver".into(),
                uid: String::new(),
                groups: vec!["system:authenticated".into()],
                authenticated_by: "client-certificate",
                client_address: "10.0.0.1:40000".into(),
                ..Requester::default()
            },
            decision: Decision::Authenticated,
            code: Some(201),
            reason: String::new(),
            service_account: ServiceAccount::from_claims(&claims),
            token: Some(TokenFacts::from_claims(&claims, "kid-1")),
            pod_certificate: None,
            answered: None,
        };
        let line = serde_json::to_string(&event).unwrap();
        assert!(!line.contains('\n'));
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "kind": "TokenReview",
                "time": "2023-11-14T22:15:00.123456Z",
                "requestID": "b1f0",
                "requester": {
                    "user": "system:kube-apiserver",
                    "groups": ["system:authenticated"],
                    "authenticatedBy": "client-certificate",
                    "clientAddress": "10.0.0.1:40000"
                },
                "decision": "authenticated",
                "code": 201,
                "serviceAccount": {"namespace": "shop", "name": "cart", "uid": "sa-uid"},
                "audiences": ["vault"],
                "issuedAt": "2023-11-14T22:13:20Z",
                "expiresAt": "2023-11-14T23:13:27Z",
                "extendedExpiresAt": "2024-11-13T22:13:20Z",
                "boundObject": {"kind": "Pod", "name": "cart-7d9", "uid": "pod-uid"},
                "node": {"kind": "Node", "name": "n1", "uid": "node-uid"},
                "credentialID": "JTI=4f1e2d3c-0000-4000-8000-000000000001",
                "keyID": "kid-1"
            })
        );
    }

    /// A key-bound token's event names the key by its thumbprint, and an unbound one has no
    /// `cnf` at all (so existing events keep their shape).
    #[test]
    fn a_key_bound_token_records_the_thumbprint_only() {
        let mut claims = pod_token();
        assert_eq!(TokenFacts::from_claims(&claims, "k").cnf, None);
        claims.cnf = Some(warrant_token::Confirmation::dpop("NzbLsXh8uDCcd").into());
        let facts = TokenFacts::from_claims(&claims, "k");
        let value = serde_json::to_value(&facts).unwrap();
        assert_eq!(value["cnf"], serde_json::json!({"jkt": "NzbLsXh8uDCcd"}));
        // An empty cnf binds nothing and is not recorded as a binding; nor is one warrant does
        // not understand (the refusal's reason says what it was).
        claims.cnf = Some(warrant_token::Confirmation::default().into());
        assert_eq!(TokenFacts::from_claims(&claims, "k").cnf, None);
        claims.cnf = Some(warrant_token::Cnf::Unusable(
            warrant_token::CnfError::NotAnObject,
        ));
        assert_eq!(TokenFacts::from_claims(&claims, "k").cnf, None);
    }

    /// A refusal before any token is known says only who asked, what and why.
    #[test]
    fn a_refusal_has_no_token_fields() {
        let event = Event {
            kind: EventKind::TokenRequest,
            time: Timestamp::UNIX_EPOCH,
            request_id: "r".into(),
            requester: Requester::anonymous("127.0.0.1:1".into()),
            decision: Decision::Refused,
            code: Some(401),
            reason: "Unauthorized".into(),
            service_account: Some(ServiceAccount {
                namespace: "shop".into(),
                name: "cart".into(),
                uid: String::new(),
            }),
            token: None,
            pod_certificate: None,
            answered: None,
        };
        let value = serde_json::to_value(&event).unwrap();
        let keys: std::collections::BTreeSet<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            std::collections::BTreeSet::from([
                "kind",
                "time",
                "requestID",
                "requester",
                "decision",
                "code",
                "reason",
                "serviceAccount"
            ])
        );
        assert_eq!(value["requester"]["authenticatedBy"], "anonymous");
    }

    /// What a client could make long is cut to kube's limits: names to 253 characters,
    /// audiences to TokenRequest's caps (100, of 1,024 bytes each), the reason to 1,024; what
    /// is within them is kept whole.
    #[test]
    fn client_text_is_cut_to_kubes_limits() {
        let long = "é".repeat(2000);
        let mut event = Event {
            kind: EventKind::Sign,
            time: Timestamp::UNIX_EPOCH,
            request_id: String::new(),
            requester: Requester::default(),
            decision: Decision::Signed,
            code: None,
            reason: long.clone(),
            service_account: Some(ServiceAccount {
                namespace: long.clone(),
                name: "cart".into(),
                uid: long.clone(),
            }),
            token: Some(TokenFacts {
                audiences: std::iter::repeat_n(long.clone(), 150).collect(),
                bound_object: Some(BoundObject {
                    kind: "Pod",
                    name: long.clone(),
                    uid: "u".into(),
                }),
                credential_id: long.clone(),
                ..TokenFacts::default()
            }),
            pod_certificate: None,
            answered: None,
        };
        event.bound();
        let chars = |s: &str| s.chars().count();
        assert_eq!(chars(&event.reason), MAX_REASON_CHARS + 1);
        assert!(event.reason.ends_with('…'));
        let account = event.service_account.as_ref().unwrap();
        assert_eq!(chars(&account.namespace), MAX_NAME_CHARS + 1);
        assert_eq!(chars(&account.uid), MAX_NAME_CHARS + 1);
        assert_eq!(account.name, "cart");
        let token = event.token.as_ref().unwrap();
        assert_eq!(token.audiences.len(), MAX_AUDIENCES);
        assert!(
            token
                .audiences
                .iter()
                .all(|a| a.len() == MAX_AUDIENCE_BYTES)
        );
        let object = token.bound_object.as_ref().unwrap();
        assert_eq!(chars(&object.name), MAX_NAME_CHARS + 1);
        assert_eq!(chars(&token.credential_id), MAX_NAME_CHARS + 1);
        // The whole event is bounded: 100 audiences of 1 KiB are the bulk of it.
        let len = serde_json::to_string(&event).unwrap().len();
        assert!(len < 110 * 1024, "{len}");

        // Within the limits: untouched.
        let name = "n".repeat(MAX_NAME_CHARS);
        let mut event = Event {
            service_account: Some(ServiceAccount {
                namespace: name.clone(),
                name: name.clone(),
                uid: String::new(),
            }),
            token: None,
            reason: "r".into(),
            ..event
        };
        event.bound();
        assert_eq!(event.service_account.unwrap().namespace, name);
    }

    /// A pod certificate's event names the request, pod, node and certificate, and only a
    /// fingerprint of the key; what a PCR's author wrote is cut to a name's length.
    #[test]
    fn a_pod_certificate_event_names_its_request_and_certificate() {
        let mut event = Event {
            kind: EventKind::PodCertificate,
            time: Timestamp::from_second(1_800_000_000).unwrap(),
            request_id: String::new(),
            requester: Requester::default(),
            decision: Decision::Issued,
            code: None,
            reason: String::new(),
            service_account: None,
            token: None,
            pod_certificate: Some(Box::new(PodCertificateFacts {
                signer_name: "warrant.example.com/spiffe".into(),
                namespace: "shop".into(),
                name: "p".repeat(400),
                spki_sha256: "ab".repeat(32),
                serial_number: "01".into(),
                not_after: Some(1_800_086_400),
                ..PodCertificateFacts::default()
            })),
            answered: None,
        };
        event.bound();
        let value: serde_json::Value = serde_json::to_value(&event).unwrap();
        let pcr = &value["podCertificate"];
        assert_eq!(value["kind"], "PodCertificate");
        assert_eq!(value["decision"], "issued");
        assert_eq!(pcr["signerName"], "warrant.example.com/spiffe");
        assert_eq!(pcr["spkiSHA256"], "ab".repeat(32));
        assert_eq!(pcr["notAfter"], "2027-01-16T08:00:00Z");
        let name = pcr["name"].as_str().unwrap();
        assert!(name.ends_with('…') && name.chars().count() <= MAX_NAME_CHARS + 1);
        assert!(pcr.get("uid").is_none() && pcr.get("notBefore").is_none());
    }
}
