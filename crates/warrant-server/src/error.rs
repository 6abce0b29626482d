//! The one place errors become HTTP responses: a Kubernetes `Status` with kube-apiserver's code,
//! reason and message format (`k8s.io/apimachinery/pkg/api/errors`).

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use warrant_proto::wire::{Status, StatusCause, StatusDetails};
use warrant_token::go_quote;

/// An API error, rendered as a `Status` body. Boxed: errors are the rare path, and a small
/// `Result` keeps the common one cheap.
#[derive(Debug, Clone)]
pub struct ApiError(Box<Inner>);

#[derive(Debug, Clone)]
struct Inner {
    code: StatusCode,
    reason: &'static str,
    message: String,
    details: Option<StatusDetails>,
    /// A `WWW-Authenticate` challenge to send with a 401.
    challenge: Option<&'static str>,
}

impl ApiError {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError(Box::new(Inner {
            code,
            reason,
            message: message.into(),
            details: None,
            challenge: None,
        }))
    }

    fn with_details(mut self, details: StatusDetails) -> Self {
        self.0.details = Some(details);
        self
    }

    /// 400 BadRequest with `message` as given.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 400 BadRequest for one field of the body, in kube's field-error words:
    /// `<field>: <what>` (`spec.dpop.uri: Invalid value: …`), with the field in
    /// `details.causes` so a client can tell which. `cause` is kube's cause reason
    /// (`FieldValueRequired`, `FieldValueInvalid`, …); `what` never quotes the value.
    pub fn bad_field(field: &str, cause: &'static str, what: &str) -> Self {
        Self::bad_request(format!("{field}: {what}")).with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: cause,
                message: what.to_owned(),
                field: field.to_owned(),
            }],
            ..StatusDetails::default()
        })
    }

    /// 401 Unauthorized, as kube-apiserver answers an unauthenticated request.
    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// 401 for a key-bound token without a valid DPoP proof, with RFC 9449's challenge
    /// (`WWW-Authenticate: DPoP error="invalid_dpop_proof"`, and the algorithms a proof may use).
    pub fn invalid_dpop_proof() -> Self {
        let mut error = Self::unauthorized();
        error.0.challenge = Some(DPOP_CHALLENGE);
        error
    }

    /// 403 Forbidden, as kube words it: `<resource[.group]> "<name>" is forbidden: <why>`,
    /// `<resource[.group]> is forbidden: <why>` without a name, `forbidden: <why>` without a
    /// resource (a non-resource path).
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let message = if resource.is_empty() {
            format!("forbidden: {why}")
        } else if name.is_empty() {
            format!("{} is forbidden: {why}", qualified(resource, group))
        } else {
            format!(
                "{} {} is forbidden: {why}",
                qualified(resource, group),
                go_quote(name)
            )
        };
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message).with_details(StatusDetails {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: resource.to_owned(),
            ..StatusDetails::default()
        })
    }

    /// 404 NotFound for a named object: `pods "p1" not found`.
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{resource} {} not found", go_quote(name)),
        )
        .with_details(StatusDetails {
            name: name.to_owned(),
            kind: resource.to_owned(),
            ..StatusDetails::default()
        })
    }

    /// 404 for a path warrant does not serve.
    pub fn no_such_path() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405 for a method a path does not take.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <resource[.group]> "<name>": <why>`.
    pub fn conflict(group: &str, resource: &str, name: &str, why: impl std::fmt::Display) -> Self {
        let qualified = qualified(resource, group);
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} {}: {why}",
                go_quote(name)
            ),
        )
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: resource.to_owned(),
            ..StatusDetails::default()
        })
    }

    /// 422 Invalid for one field: `<Kind.group> "<name>" is invalid: <field>: Invalid value:
    /// <value>: <detail>`. `value` is already rendered as Go renders it (`60`, `"x"`).
    pub fn invalid(
        group: &str,
        kind: &str,
        name: &str,
        field: &str,
        value: &str,
        detail: &str,
    ) -> Self {
        let body = format!("Invalid value: {value}: {detail}");
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!(
                "{} {} is invalid: {field}: {body}",
                qualified(kind, group),
                go_quote(name)
            ),
        )
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: group.to_owned(),
            kind: kind.to_owned(),
            causes: vec![StatusCause {
                reason: "FieldValueInvalid",
                message: body,
                field: field.to_owned(),
            }],
            retry_after_seconds: None,
        })
    }

    /// 413 for a body over the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 413 for a request past one of a route's own bounds, saying which (the bound, never the
    /// client's input).
    pub fn too_large_saying(why: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge", why)
    }

    /// 415 for a body in a format warrant does not read.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            ),
        )
    }

    /// 415 saying which format the route reads.
    pub(crate) fn unsupported_media_type_saying(why: &'static str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            why,
        )
    }

    /// 406 for an `Accept` header that takes none of the media types a document is in.
    pub fn not_acceptable(offered: &[&str]) -> Self {
        Self::new(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: {}",
                offered.join(", ")
            ),
        )
    }

    /// 500 InternalError: `Internal error occurred: <why>`.
    pub fn internal(why: impl std::fmt::Display) -> Self {
        let why = why.to_string();
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            format!("Internal error occurred: {why}"),
        )
        .with_details(StatusDetails {
            causes: vec![StatusCause {
                reason: "",
                message: why,
                field: String::new(),
            }],
            ..StatusDetails::default()
        })
    }

    /// 429 TooManyRequests, as kube-apiserver's overload answer: retry after `seconds`
    /// (`details.retryAfterSeconds` and a `Retry-After` header).
    pub fn too_many_requests(seconds: u32) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(StatusDetails {
            retry_after_seconds: Some(seconds),
            ..StatusDetails::default()
        })
    }

    /// [`too_many_requests`](Self::too_many_requests) saying why (a state of the server, never
    /// the client's input).
    pub fn too_many_requests_saying(seconds: u32, why: impl Into<String>) -> Self {
        let mut error = Self::too_many_requests(seconds);
        error.0.message = why.into();
        error
    }

    /// 503: a source warrant depends on cannot answer right now; the client may retry.
    pub fn unavailable(why: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", why)
    }

    /// The HTTP status code.
    pub fn code(&self) -> StatusCode {
        self.0.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The `Status` body.
    pub fn status(&self) -> Status {
        Status {
            kind: "Status",
            api_version: "v1",
            metadata: Default::default(),
            status: "Failure",
            message: self.0.message.clone(),
            reason: self.0.reason,
            details: self.0.details.clone(),
            code: self.0.code.as_u16(),
        }
    }
}

/// RFC 9449 §7.1's challenge for a key-bound token without a valid proof; `algs` lists the
/// proof algorithms warrant accepts (`warrant_token::DPOP_ALGORITHMS`).
const DPOP_CHALLENGE: &str = r#"DPoP error="invalid_dpop_proof", algs="RS256 ES256 ES384""#;

/// Go's `GroupResource.String()` / `GroupKind.String()`: `name` or `name.group`.
fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() {
        name.to_owned()
    } else {
        format!("{name}.{group}")
    }
}

/// The message of an error response (its `Status.message`), carried in the response's
/// extensions for the audit event, which the audit layer reads from there.
#[derive(Debug, Clone)]
pub(crate) struct ErrorMessage(pub(crate) String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        #[allow(clippy::expect_used)]
        let body = serde_json::to_vec(&self.status()).expect("a Status always serializes");
        let mut response = (self.0.code, body).into_response();
        response
            .extensions_mut()
            .insert(ErrorMessage(self.0.message));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(seconds) = self.0.details.as_ref().and_then(|d| d.retry_after_seconds) {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(challenge) = self.0.challenge {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

/// A refusal of warrant-auth's, as kube's `Status`: the one place its causes become words.
impl From<warrant_auth::Refusal> for ApiError {
    fn from(refusal: warrant_auth::Refusal) -> Self {
        use warrant_auth::Refusal;
        match refusal {
            Refusal::Unauthorized => ApiError::unauthorized(),
            Refusal::InvalidDpopProof => ApiError::invalid_dpop_proof(),
            Refusal::TooManyRequests {
                retry_after_seconds,
            } => ApiError::too_many_requests(retry_after_seconds),
            Refusal::Forbidden {
                group,
                resource,
                name,
                reason,
            } => ApiError::forbidden(&group, &resource, &name, &reason),
            Refusal::NotFound { resource, name } => ApiError::not_found(&resource, &name),
            Refusal::Undecided(why) => {
                ApiError::unavailable(format!("authorization could not be decided: {why}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(e: &ApiError) -> String {
        serde_json::to_string(&e.status()).unwrap()
    }

    #[test]
    fn bodies_match_kube_apiserver() {
        assert_eq!(
            json(&ApiError::not_found("serviceaccounts", "app")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"serviceaccounts \"app\" not found","reason":"NotFound","details":{"name":"app","kind":"serviceaccounts"},"code":404}"#
        );
        assert_eq!(
            json(&ApiError::invalid(
                "authentication.k8s.io",
                "TokenRequest",
                "",
                "spec.expirationSeconds",
                "60",
                "may not specify a duration less than 10 minutes"
            )),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes","reason":"Invalid","details":{"group":"authentication.k8s.io","kind":"TokenRequest","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 60: may not specify a duration less than 10 minutes","field":"spec.expirationSeconds"}]},"code":422}"#
        );
        assert_eq!(
            ApiError::conflict("", "Pod", "p1", "the UID differs").message(),
            r#"Operation cannot be fulfilled on Pod "p1": the UID differs"#
        );
        assert_eq!(
            json(&ApiError::unauthorized()),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        assert_eq!(
            json(&ApiError::forbidden(
                "",
                "serviceaccounts",
                "app",
                "node requested token not bound to a pod"
            )),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"serviceaccounts \"app\" is forbidden: node requested token not bound to a pod","reason":"Forbidden","details":{"name":"app","kind":"serviceaccounts"},"code":403}"#
        );
        assert_eq!(
            ApiError::forbidden("authentication.k8s.io", "tokenreviews", "", "x").message(),
            "tokenreviews.authentication.k8s.io is forbidden: x"
        );
        assert_eq!(
            ApiError::forbidden("", "", "", "x").message(),
            "forbidden: x"
        );
        assert_eq!(
            json(&ApiError::internal("boom")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: boom","reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500}"#
        );
    }
}
