//! The Kubernetes schema (`--audit-log-schema kubernetes`): each event as kube-apiserver's
//! `audit.k8s.io/v1` `Event` at level `Metadata`, so pipelines and rules built for
//! kube-apiserver's audit log read warrant's unchanged. What kube's Event has no field for
//! (audiences, expiration, the binding, the key…) goes in `annotations` under `warrant.dev/`.
//! docs/audit.md has the mapping; a field added here is added there. Never a token: `Metadata`
//! has no request or response bodies.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use jiff::Timestamp;
use serde::{Serialize, Serializer};

use crate::event::{
    Decision, Event, EventKind, PodCertificateFacts, TokenFacts, micro_time, seconds_text,
};

/// kube-apiserver's annotation naming the credential a TokenRequest issued.
pub const ISSUED_CREDENTIAL_ID: &str = "authentication.kubernetes.io/issued-credential-id";

/// The gRPC method of the external signer's Sign, as its `requestURI`.
const SIGN_URI: &str = "/v1.ExternalJWTSigner/Sign";
/// TokenReview's collection.
const TOKEN_REVIEW_URI: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// One `audit.k8s.io/v1` `Event`, the fields in kube's order and with its JSON names.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KubeEvent<'a> {
    kind: &'static str,
    api_version: &'static str,
    level: &'static str,
    #[serde(rename = "auditID")]
    audit_id: String,
    stage: &'static str,
    #[serde(rename = "requestURI")]
    request_uri: String,
    verb: &'static str,
    user: UserInfo<'a>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    source_ips: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object_ref: Option<ObjectReference<'a>>,
    response_status: ResponseStatus<'a>,
    #[serde(serialize_with = "micro")]
    request_received_timestamp: Timestamp,
    #[serde(serialize_with = "micro")]
    stage_timestamp: Timestamp,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<&'static str, String>,
}

/// kube's `authentication.k8s.io/v1` `UserInfo`.
#[derive(Debug, Serialize)]
struct UserInfo<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    username: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    groups: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra: &'a BTreeMap<String, Vec<String>>,
}

/// kube's audit `ObjectReference`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectReference<'a> {
    resource: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    api_group: &'static str,
    api_version: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subresource: &'static str,
}

/// The `metav1.Status` of the answer, as kube-apiserver writes it at `Metadata`.
#[derive(Debug, Serialize)]
struct ResponseStatus<'a> {
    metadata: Empty,
    #[serde(skip_serializing_if = "str::is_empty")]
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
}

#[derive(Debug, Serialize)]
struct Empty {}

fn micro<S: Serializer>(time: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    micro_time(time, serializer)
}

/// kube's `StatusReason` for an HTTP status.
fn status_reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        500..=599 => "InternalError",
        _ => "",
    }
}

impl<'a> KubeEvent<'a> {
    /// `event` in kube's schema; `count` for a summary of refusals. `audit_id` is the event's
    /// `requestID`, or (Sign has none) one made for it by the caller.
    pub(crate) fn new(event: &'a Event, count: Option<u64>, audit_id: String) -> Self {
        let (request_uri, object_ref) = request_target(event);
        KubeEvent {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: "Metadata",
            audit_id,
            stage: "ResponseComplete",
            request_uri,
            verb: if event.kind == EventKind::PodCertificate {
                "update"
            } else {
                "create"
            },
            user: UserInfo {
                username: &event.requester.user,
                uid: &event.requester.uid,
                groups: &event.requester.groups,
                extra: &event.requester.extra,
            },
            source_ips: source_ips(event),
            object_ref,
            response_status: response_status(event),
            request_received_timestamp: event.time,
            stage_timestamp: event.answered.unwrap_or(event.time),
            annotations: annotations(event, count),
        }
    }
}

/// The event's `requestURI` and `objectRef`: the object a TokenRequest or Sign is about, the
/// TokenReview collection, or a pod certificate request's status.
fn request_target(event: &Event) -> (String, Option<ObjectReference<'_>>) {
    let account = event.service_account.as_ref();
    let (namespace, name) = account.map_or(("", ""), |a| (a.namespace.as_str(), a.name.as_str()));
    let account_ref = || ObjectReference {
        resource: "serviceaccounts",
        namespace,
        name,
        api_group: "",
        api_version: "v1",
        subresource: "token",
    };
    match event.kind {
        EventKind::TokenRequest => (
            format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"),
            Some(account_ref()),
        ),
        EventKind::TokenReview => (
            TOKEN_REVIEW_URI.to_owned(),
            Some(ObjectReference {
                resource: "tokenreviews",
                namespace: "",
                name: "",
                api_group: "authentication.k8s.io",
                api_version: "v1",
                subresource: "",
            }),
        ),
        // The back half of a TokenRequest kube-apiserver answered: its object.
        EventKind::Sign => (SIGN_URI.to_owned(), account.map(|_| account_ref())),
        // warrant's status write on the PCR (written or not: the decision is the event).
        EventKind::PodCertificate => {
            let pcr = event.pod_certificate.as_deref();
            let (namespace, name) =
                pcr.map_or(("", ""), |p| (p.namespace.as_str(), p.name.as_str()));
            (
                format!(
                    "/apis/certificates.k8s.io/v1beta1/namespaces/{namespace}/podcertificaterequests/{name}/status"
                ),
                Some(ObjectReference {
                    resource: "podcertificaterequests",
                    namespace,
                    name,
                    api_group: "certificates.k8s.io",
                    api_version: "v1beta1",
                    subresource: "status",
                }),
            )
        }
    }
}

/// The answer's `metav1.Status`: a refusal's code, reason and message; a success's code only.
fn response_status(event: &Event) -> ResponseStatus<'_> {
    let failed = event.decision == Decision::Refused;
    let code = event.code.or(match event.decision {
        Decision::Signed => Some(200),
        _ => None,
    });
    ResponseStatus {
        metadata: Empty {},
        status: if failed { "Failure" } else { "" },
        message: if failed { &event.reason } else { "" },
        reason: if failed {
            code.map_or("", status_reason)
        } else {
            ""
        },
        code,
    }
}

/// `sourceIPs`: the client's address without its port, if it reads as one.
fn source_ips(event: &Event) -> Vec<String> {
    event
        .requester
        .client_address
        .parse::<SocketAddr>()
        .map(|a| a.ip().to_string())
        .or_else(|_| {
            // A summary's address has no port.
            event
                .requester
                .client_address
                .parse::<std::net::IpAddr>()
                .map(|ip| ip.to_string())
        })
        .into_iter()
        .collect()
}

/// What warrant knows beyond kube's fields, as `warrant.dev/` annotations (plus kube's own
/// `issued-credential-id` on what issued a token).
fn annotations(event: &Event, count: Option<u64>) -> BTreeMap<&'static str, String> {
    let mut notes = Notes::default();
    notes.put(
        "warrant.dev/decision",
        decision_name(event.decision).to_owned(),
    );
    notes.put(
        "warrant.dev/authenticated-by",
        event.requester.authenticated_by.to_owned(),
    );
    notes.put(
        "warrant.dev/client-address",
        event.requester.client_address.clone(),
    );
    // TokenReview's verdict on a token that did not authenticate (a refusal's message is
    // responseStatus.message).
    if event.decision == Decision::Unauthenticated {
        notes.put("warrant.dev/reason", event.reason.clone());
    }
    if let Some(account) = &event.service_account {
        notes.put(
            "warrant.dev/service-account",
            format!("{}/{}", account.namespace, account.name),
        );
        notes.put("warrant.dev/service-account-uid", account.uid.clone());
    }
    if let Some(token) = &event.token {
        notes.token(event.decision, token);
    }
    if let Some(certificate) = event.pod_certificate.as_deref() {
        // Denied, Failed, Requeued: why (Refused's is responseStatus.message).
        if event.decision != Decision::Refused {
            notes.put("warrant.dev/reason", event.reason.clone());
        }
        notes.pod_certificate(certificate);
    }
    if let Some(count) = count {
        notes.put("warrant.dev/count", count.to_string());
    }
    notes.0
}

/// The annotations being written: an empty value is left out.
#[derive(Default)]
struct Notes(BTreeMap<&'static str, String>);

impl Notes {
    /// Sets `key` to `value`, unless `value` is empty.
    fn put(&mut self, key: &'static str, value: String) {
        if !value.is_empty() {
            self.0.insert(key, value);
        }
    }

    /// What the event says of the token issued, reviewed or signed (a `decision` that issued
    /// one names its credential with kube's annotation).
    fn token(&mut self, decision: Decision, token: &TokenFacts) {
        if !token.audiences.is_empty() {
            self.put(
                "warrant.dev/audiences",
                serde_json::to_string(&token.audiences).unwrap_or_default(),
            );
        }
        self.put("warrant.dev/issued-at", seconds_text(token.issued_at));
        self.put("warrant.dev/expiration", seconds_text(token.expires_at));
        self.put(
            "warrant.dev/extended-expiration",
            seconds_text(token.extended_expires_at),
        );
        if let Some(object) = &token.bound_object {
            self.put(
                "warrant.dev/bound-object",
                format!("{}/{}", object.kind, object.name),
            );
            self.put("warrant.dev/bound-object-uid", object.uid.clone());
        }
        if let Some(node) = &token.node {
            self.put("warrant.dev/node", node.name.clone());
            self.put("warrant.dev/node-uid", node.uid.clone());
        }
        let issued = matches!(decision, Decision::Issued | Decision::Signed);
        self.put(
            if issued {
                ISSUED_CREDENTIAL_ID
            } else {
                "warrant.dev/credential-id"
            },
            token.credential_id.clone(),
        );
        self.put("warrant.dev/key-id", token.key_id.clone());
        if let Some(cnf) = &token.cnf {
            self.put("warrant.dev/bound-key", cnf.jkt.clone().unwrap_or_default());
            self.put(
                "warrant.dev/bound-certificate",
                cnf.x5t_s256.clone().unwrap_or_default(),
            );
        }
    }

    /// What the event says of the pod certificate request decided.
    fn pod_certificate(&mut self, certificate: &PodCertificateFacts) {
        self.put("warrant.dev/signer-name", certificate.signer_name.clone());
        self.put("warrant.dev/request-uid", certificate.uid.clone());
        for (kind, object) in [("pod", &certificate.pod), ("node", &certificate.node)] {
            if let Some(object) = object {
                let (name_key, uid_key) = match kind {
                    "pod" => ("warrant.dev/pod", "warrant.dev/pod-uid"),
                    _ => ("warrant.dev/node", "warrant.dev/node-uid"),
                };
                self.put(name_key, object.name.clone());
                self.put(uid_key, object.uid.clone());
            }
        }
        self.put("warrant.dev/key-type", certificate.key_type.clone());
        self.put("warrant.dev/spki-sha256", certificate.spki_sha256.clone());
        self.put(
            "warrant.dev/serial-number",
            certificate.serial_number.clone(),
        );
        self.put("warrant.dev/spiffe-id", certificate.spiffe_id.clone());
        self.put("warrant.dev/dns-names", certificate.dns_names.join(","));
        self.put(
            "warrant.dev/not-before",
            seconds_text(certificate.not_before),
        );
        self.put(
            "warrant.dev/expiration",
            seconds_text(certificate.not_after),
        );
        self.put("warrant.dev/key-id", certificate.ca_key_id.clone());
    }
}

fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Issued => "issued",
        Decision::Signed => "signed",
        Decision::Authenticated => "authenticated",
        Decision::Unauthenticated => "unauthenticated",
        Decision::Refused => "refused",
        Decision::Denied => "denied",
        Decision::Failed => "failed",
        Decision::Requeued => "requeued",
        Decision::LostRace => "lostRace",
        Decision::Gone => "gone",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Value, json};
    use warrant_token::Claims;

    use super::*;
    use crate::event::{Requester, ServiceAccount, TokenFacts};

    /// kube-apiserver's `audit.k8s.io/v1` `Event` fields (staging/src/k8s.io/apiserver/pkg/apis/
    /// audit/v1/types.go), and those of its `ObjectReference`, `UserInfo` and `metav1.Status`.
    const EVENT_FIELDS: &[&str] = &[
        "kind",
        "apiVersion",
        "level",
        "auditID",
        "stage",
        "requestURI",
        "verb",
        "user",
        "impersonatedUser",
        "sourceIPs",
        "userAgent",
        "objectRef",
        "responseStatus",
        "requestObject",
        "responseObject",
        "requestReceivedTimestamp",
        "stageTimestamp",
        "annotations",
    ];
    const REQUIRED: &[&str] = &[
        "kind",
        "apiVersion",
        "level",
        "auditID",
        "stage",
        "requestURI",
        "verb",
        "user",
        "requestReceivedTimestamp",
        "stageTimestamp",
    ];
    const OBJECT_REF_FIELDS: &[&str] = &[
        "resource",
        "namespace",
        "name",
        "uid",
        "apiGroup",
        "apiVersion",
        "resourceVersion",
        "subresource",
    ];
    const USER_FIELDS: &[&str] = &["username", "uid", "groups", "extra"];
    const STATUS_FIELDS: &[&str] = &[
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ];

    fn keys(value: &Value) -> BTreeSet<&str> {
        value
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// `line` parses as a kube audit Event: only kube's fields, the required ones present,
    /// the constant ones right, and no token anywhere.
    fn assert_kube_event(line: &str) -> Value {
        assert!(!line.contains('\n'));
        let value: Value = serde_json::from_str(line).unwrap();
        let all: BTreeSet<&str> = EVENT_FIELDS.iter().copied().collect();
        assert!(keys(&value).is_subset(&all), "{value}");
        assert!(REQUIRED.iter().all(|k| keys(&value).contains(k)), "{value}");
        assert_eq!(value["kind"], "Event");
        assert_eq!(value["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(value["level"], "Metadata");
        assert_eq!(value["stage"], "ResponseComplete");
        // A pod certificate's event is kube's update of the PCR's status; the rest create.
        let verb = if value["objectRef"]["resource"] == "podcertificaterequests" {
            "update"
        } else {
            "create"
        };
        assert_eq!(value["verb"], verb);
        let fields = |f: &[&'static str]| f.iter().copied().collect::<BTreeSet<&str>>();
        assert!(keys(&value["user"]).is_subset(&fields(USER_FIELDS)));
        assert!(keys(&value["objectRef"]).is_subset(&fields(OBJECT_REF_FIELDS)));
        assert!(keys(&value["responseStatus"]).is_subset(&fields(STATUS_FIELDS)));
        for stamp in ["requestReceivedTimestamp", "stageTimestamp"] {
            let text = value[stamp].as_str().unwrap();
            // RFC 3339 with microseconds, as kube's MicroTime.
            assert_eq!(text.len(), "2026-11-25T13:00:40.123456Z".len(), "{text}");
            text.parse::<Timestamp>().unwrap();
        }
        assert!(
            value["annotations"]
                .as_object()
                .is_none_or(|a| a.values().all(Value::is_string))
        );
        assert!(!line.contains("eyJ"), "a token in {line}");
        value
    }

    fn claims() -> Claims {
        serde_json::from_value(json!({
            "aud": ["vault"],
            "iat": 1_795_611_640,
            "exp": 1_795_615_240,
            "nbf": 1_795_611_640,
            "iss": "https://warrant.example",
            "jti": "4f1e2d3c-9a8b-4c7d-8e6f-5a4b3c2d1e0f",
            "sub": "system:serviceaccount:shop:cart",
            "kubernetes.io": {
                "namespace": "shop",
                "serviceaccount": {"name": "cart", "uid": "b6a1"},
                "pod": {"name": "cart-7d9f", "uid": "0c2e"},
                "node": {"name": "node-1", "uid": "91f0"}
            }
        }))
        .unwrap()
    }

    /// A hub token's caller, as warrant's own-token authenticator leaves it.
    fn hub_caller() -> Requester {
        Requester {
            user: "system:serviceaccount:hub:agent".into(),
            uid: "a9d3".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:hub".into(),
                "system:authenticated".into(),
            ],
            authenticated_by: "service-account-token",
            client_address: "10.0.3.17:51724".into(),
            credential_id: "JTI=1c0ffee0-aaaa-4bbb-8ccc-000000000001".into(),
            extra: [(
                "authentication.kubernetes.io/credential-id".to_owned(),
                vec!["JTI=1c0ffee0-aaaa-4bbb-8ccc-000000000001".to_owned()],
            )]
            .into(),
        }
    }

    fn issued() -> Event {
        let claims = claims();
        Event {
            kind: EventKind::TokenRequest,
            time: Timestamp::from_microsecond(1_795_611_640_123_456).unwrap(),
            request_id: "5e7c7a0b-1f3e-4c55-9b8e-0d1f2a3b4c5d".into(),
            requester: hub_caller(),
            decision: Decision::Issued,
            code: Some(201),
            reason: String::new(),
            service_account: ServiceAccount::from_claims(&claims),
            token: Some(TokenFacts::from_claims(&claims, "Jx1v")),
            pod_certificate: None,
            answered: Some(Timestamp::from_microsecond(1_795_611_640_125_000).unwrap()),
        }
    }

    fn render(event: &Event) -> String {
        String::from_utf8(crate::writer::line(crate::Schema::Kubernetes, event, None))
            .unwrap()
            .trim_end()
            .to_owned()
    }

    /// An issued token: the TokenRequest's object and URI, the caller with its credential ID in
    /// `extra` as kube writes it, kube's issued-credential-id and warrant's facts annotated.
    #[test]
    fn an_issued_token_is_a_kube_event_of_its_token_request() {
        let value = assert_kube_event(&render(&issued()));
        assert_eq!(value["auditID"], "5e7c7a0b-1f3e-4c55-9b8e-0d1f2a3b4c5d");
        assert_eq!(
            value["requestURI"],
            "/api/v1/namespaces/shop/serviceaccounts/cart/token"
        );
        assert_eq!(
            value["objectRef"],
            json!({"resource": "serviceaccounts", "namespace": "shop", "name": "cart",
                   "apiVersion": "v1", "subresource": "token"})
        );
        assert_eq!(
            value["user"]["extra"]["authentication.kubernetes.io/credential-id"],
            json!(["JTI=1c0ffee0-aaaa-4bbb-8ccc-000000000001"])
        );
        assert_eq!(value["sourceIPs"], json!(["10.0.3.17"]));
        assert_eq!(
            value["responseStatus"],
            json!({"metadata": {}, "code": 201})
        );
        assert_eq!(
            value["requestReceivedTimestamp"],
            "2026-11-25T13:00:40.123456Z"
        );
        assert_eq!(value["stageTimestamp"], "2026-11-25T13:00:40.125000Z");
        let notes = &value["annotations"];
        assert_eq!(
            notes[ISSUED_CREDENTIAL_ID],
            "JTI=4f1e2d3c-9a8b-4c7d-8e6f-5a4b3c2d1e0f"
        );
        assert_eq!(notes["warrant.dev/audiences"], r#"["vault"]"#);
        assert_eq!(notes["warrant.dev/expiration"], "2026-11-25T14:00:40Z");
        assert_eq!(notes["warrant.dev/bound-object"], "Pod/cart-7d9f");
        assert_eq!(notes["warrant.dev/key-id"], "Jx1v");
        assert_eq!(notes["warrant.dev/decision"], "issued");
        assert!(notes.get("warrant.dev/bound-key").is_none(), "{notes}");
    }

    /// A key-bound token's event carries its key's thumbprint as an annotation.
    #[test]
    fn a_key_bound_token_is_annotated_with_its_thumbprint() {
        let mut event = issued();
        let mut claims = claims();
        claims.cnf = Some(
            warrant_token::Confirmation::dpop("NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs").into(),
        );
        event.token = Some(TokenFacts::from_claims(&claims, "Jx1v"));
        let value = assert_kube_event(&render(&event));
        let notes = &value["annotations"];
        assert_eq!(
            notes["warrant.dev/bound-key"],
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
        assert!(notes.get("warrant.dev/bound-certificate").is_none());
    }

    /// A refusal: kube's Failure status with its reason and the message the client was given.
    #[test]
    fn a_refusal_is_a_failure_status() {
        let event = Event {
            decision: Decision::Refused,
            code: Some(403),
            reason: "serviceaccounts \"cart\" is forbidden".into(),
            token: None,
            service_account: Some(ServiceAccount {
                namespace: "shop".into(),
                name: "cart".into(),
                uid: String::new(),
            }),
            requester: Requester::anonymous("[2001:db8::1]:443".into()),
            ..issued()
        };
        let value = assert_kube_event(&render(&event));
        assert_eq!(
            value["responseStatus"],
            json!({"metadata": {}, "status": "Failure", "reason": "Forbidden",
                   "message": "serviceaccounts \"cart\" is forbidden", "code": 403})
        );
        assert_eq!(value["sourceIPs"], json!(["2001:db8::1"]));
        assert!(value["user"].as_object().unwrap().is_empty());
        assert_eq!(
            value["annotations"]["warrant.dev/authenticated-by"],
            "anonymous"
        );
        assert!(value["annotations"].get(ISSUED_CREDENTIAL_ID).is_none());
    }

    /// A review: the tokenreviews collection, the reviewed token's credential ID (not an
    /// issued one), the verdict and its reason annotated; a summary's count too.
    #[test]
    fn a_review_names_the_reviewed_credential() {
        let event = Event {
            kind: EventKind::TokenReview,
            decision: Decision::Unauthenticated,
            reason: "service account token has been invalidated".into(),
            ..issued()
        };
        let value = assert_kube_event(&render(&event));
        assert_eq!(
            value["requestURI"],
            "/apis/authentication.k8s.io/v1/tokenreviews"
        );
        assert_eq!(
            value["objectRef"],
            json!({"resource": "tokenreviews", "apiGroup": "authentication.k8s.io", "apiVersion": "v1"})
        );
        let notes = &value["annotations"];
        assert_eq!(
            notes["warrant.dev/credential-id"],
            "JTI=4f1e2d3c-9a8b-4c7d-8e6f-5a4b3c2d1e0f"
        );
        assert!(notes.get(ISSUED_CREDENTIAL_ID).is_none());
        assert_eq!(notes["warrant.dev/decision"], "unauthenticated");
        assert_eq!(
            notes["warrant.dev/reason"],
            "service account token has been invalidated"
        );
        assert_eq!(notes["warrant.dev/service-account"], "shop/cart");

        let summary = String::from_utf8(crate::writer::line(
            crate::Schema::Kubernetes,
            &event,
            Some(7),
        ))
        .unwrap();
        assert_eq!(
            assert_kube_event(summary.trim_end())["annotations"]["warrant.dev/count"],
            "7"
        );
    }

    /// A Sign has no Audit-ID: it gets an ID of its own; its object is the service account's
    /// token subresource; the socket's peer is annotated (it has no IP).
    #[test]
    fn a_sign_gets_an_audit_id_and_its_account() {
        let event = Event {
            kind: EventKind::Sign,
            request_id: String::new(),
            code: None,
            decision: Decision::Signed,
            requester: Requester {
                authenticated_by: "unix-socket",
                client_address: "unix:pid=812,uid=0".into(),
                ..Requester::default()
            },
            pod_certificate: None,
            answered: None,
            ..issued()
        };
        let value = assert_kube_event(&render(&event));
        assert_eq!(value["auditID"].as_str().unwrap().len(), 36);
        assert_eq!(value["requestURI"], "/v1.ExternalJWTSigner/Sign");
        assert_eq!(value["objectRef"]["subresource"], "token");
        assert!(value.get("sourceIPs").is_none());
        assert_eq!(value["stageTimestamp"], value["requestReceivedTimestamp"]);
        assert_eq!(
            value["annotations"]["warrant.dev/client-address"],
            "unix:pid=812,uid=0"
        );
    }

    fn pod_certificate(decision: Decision, reason: &str) -> Event {
        Event {
            kind: EventKind::PodCertificate,
            requester: Requester {
                user: "system:serviceaccount:warrant:warrant".into(),
                authenticated_by: "self",
                ..Requester::default()
            },
            decision,
            code: None,
            reason: reason.into(),
            service_account: Some(ServiceAccount {
                namespace: "shop".into(),
                name: "cart".into(),
                uid: "b6a1".into(),
            }),
            token: None,
            pod_certificate: Some(Box::new(crate::PodCertificateFacts {
                signer_name: "warrant.example.com/spiffe".into(),
                namespace: "shop".into(),
                name: "cart-7d9f-pcr".into(),
                uid: "77aa".into(),
                pod: Some(crate::BoundObject {
                    kind: "Pod",
                    name: "cart-7d9f".into(),
                    uid: "0c2e".into(),
                }),
                node: Some(crate::BoundObject {
                    kind: "Node",
                    name: "node-1".into(),
                    uid: "91f0".into(),
                }),
                key_type: "ECDSAP256".into(),
                spki_sha256: "ab".repeat(32),
                serial_number: if decision == Decision::Issued {
                    "0badc0de".into()
                } else {
                    String::new()
                },
                spiffe_id: "spiffe://cluster.local/ns/shop/sa/cart".into(),
                dns_names: if decision == Decision::Issued {
                    vec!["cart.shop.svc".into(), "cart.shop.svc.cluster.local".into()]
                } else {
                    Vec::new()
                },
                not_before: (decision == Decision::Issued).then_some(1_795_611_580),
                not_after: (decision == Decision::Issued).then_some(1_795_697_980),
                ca_key_id: "ca-1".into(),
            })),
            ..issued()
        }
    }

    /// A pod certificate decision is kube's update of the PCR's status: its URI and object,
    /// with the pod, node, key (type and fingerprint, never the key) and certificate annotated;
    /// a denial says why.
    #[test]
    fn a_pod_certificate_is_an_update_of_the_pcr_status() {
        let value = assert_kube_event(&render(&pod_certificate(Decision::Issued, "")));
        assert_eq!(value["verb"], "update");
        assert_eq!(
            value["requestURI"],
            "/apis/certificates.k8s.io/v1beta1/namespaces/shop/podcertificaterequests/cart-7d9f-pcr/status"
        );
        assert_eq!(value["objectRef"]["resource"], "podcertificaterequests");
        assert_eq!(value["objectRef"]["subresource"], "status");
        let notes = &value["annotations"];
        assert_eq!(notes["warrant.dev/decision"], "issued");
        assert_eq!(notes["warrant.dev/pod-uid"], "0c2e");
        assert_eq!(notes["warrant.dev/node"], "node-1");
        assert_eq!(notes["warrant.dev/serial-number"], "0badc0de");
        assert_eq!(
            notes["warrant.dev/dns-names"],
            "cart.shop.svc,cart.shop.svc.cluster.local"
        );
        assert_eq!(notes["warrant.dev/expiration"], "2026-11-26T12:59:40Z");
        assert_eq!(notes["warrant.dev/service-account-uid"], "b6a1");
        assert!(notes.get("warrant.dev/reason").is_none());

        let denied = render(&pod_certificate(
            Decision::Denied,
            "the pod is on another node",
        ));
        let value = assert_kube_event(&denied);
        let notes = &value["annotations"];
        assert_eq!(notes["warrant.dev/decision"], "denied");
        assert_eq!(notes["warrant.dev/reason"], "the pod is on another node");
        assert!(notes.get("warrant.dev/serial-number").is_none());
        assert!(notes.get("warrant.dev/dns-names").is_none());
        assert_eq!(value["responseStatus"]["code"], Value::Null);

        let refused = Event {
            code: Some(422),
            ..pod_certificate(Decision::Refused, "status.certificateChain: Invalid value")
        };
        let value = assert_kube_event(&render(&refused));
        assert_eq!(value["responseStatus"]["reason"], "Invalid");
        assert_eq!(
            value["responseStatus"]["message"],
            "status.certificateChain: Invalid value"
        );
    }

    /// docs/audit.md's example of the Kubernetes schema is what the writer writes for it.
    #[test]
    fn the_documented_example_is_what_is_written() {
        let doc = include_str!("../../../docs/audit.md");
        let marker = "<!-- kubernetes-schema-example -->";
        let example = doc
            .split(marker)
            .nth(1)
            .and_then(|rest| rest.lines().find(|l| l.starts_with('{')))
            .expect("docs/audit.md has the example after its marker");
        assert_kube_event(example);
        assert_eq!(example, render(&issued()));
    }
}
