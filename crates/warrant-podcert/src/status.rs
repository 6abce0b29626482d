//! A PCR's status, and a mirror of the rules kube-apiserver v1.36.2 applies when one is written
//! (`ValidatePodCertificateRequestStatusUpdate`; spec §4.3): every status the decision
//! produces is checked here first, so that a mistake in the signer fails a test instead of
//! drawing a `422` in production, where the PCR would sit pending until it is deleted.
//!
//! The steps run in kube's order and stop where kube stops: errors of the condition checks
//! (steps 1 and 2) are collected together, every later step ends the validation with its
//! first error. Field paths and messages are kube's, byte for byte where they were observed
//! (the vectors in `tests/vectors/`); a few never observed are marked so below, and are
//! written from the upstream source's meaning.
//!
//! What the mirror cannot know is kube-apiserver's clock: step 5h compares `notBefore` with
//! the `now` given, which for a locally produced status is warrant's own clock.

use std::fmt;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Deserializer, Serialize};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use crate::key::RequestedKey;
use crate::pem;

/// Condition type of an issued PCR.
pub const ISSUED: &str = "Issued";
/// Condition type of a denied PCR.
pub const DENIED: &str = "Denied";
/// Condition type of a failed PCR.
pub const FAILED: &str = "Failed";
/// kube-apiserver's `MaxCertificateChainSize`.
pub const MAX_CERTIFICATE_CHAIN_SIZE: usize = 102_400;
/// The largest condition reason (bytes).
const MAX_REASON_LEN: usize = 1024;
/// The largest condition message (bytes).
const MAX_MESSAGE_LEN: usize = 32 * 1024;

/// A PCR's `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCertificateRequestStatus {
    /// `conditions`: at most one of `Issued`, `Denied`, `Failed`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// `certificateChain`: PEM, leaf first. Empty and absent are the same (Go's `omitempty`).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub certificate_chain: String,
    /// `notBefore`: the leaf's.
    #[serde(default, with = "wire_time", skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    /// `beginRefreshAt`: when the kubelet should start asking again.
    #[serde(default, with = "wire_time", skip_serializing_if = "Option::is_none")]
    pub begin_refresh_at: Option<Timestamp>,
    /// `notAfter`: the leaf's.
    #[serde(default, with = "wire_time", skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Timestamp>,
}

/// A `metav1.Condition`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `type`.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// `status`: `True`, `False` or `Unknown`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: String,
    /// `observedGeneration` (0 is absent).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    /// `lastTransitionTime`; kube-apiserver requires it.
    #[serde(default, with = "wire_time", skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Timestamp>,
    /// `reason`: CamelCase, kube's regex.
    #[serde(default, deserialize_with = "null_as_default")]
    pub reason: String,
    /// `message`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub message: String,
}

impl Condition {
    /// A terminal condition (`status: "True"`) set at `now` (whole seconds).
    pub fn terminal(type_: &str, reason: &str, message: String, now: Timestamp) -> Self {
        Condition {
            type_: type_.to_owned(),
            status: "True".to_owned(),
            observed_generation: 0,
            last_transition_time: Some(whole_seconds(now)),
            reason: reason.to_owned(),
            message,
        }
    }
}

impl PodCertificateRequestStatus {
    /// The terminal condition's type (`Issued`, `Denied` or `Failed` with status `True`), if
    /// any: kube's `pcrIsIssued`/`pcrIsDenied`/`pcrIsFailed`.
    pub fn terminal_condition(&self) -> Option<&str> {
        [ISSUED, DENIED, FAILED]
            .into_iter()
            .find(|t| self.has_true(t))
    }

    fn has_true(&self, type_: &str) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    }

    /// The status as JSON (`{"conditions": …, …}`), as a status write sends it under `status`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// `t` without its sub-second part: what a `metav1.Time` keeps.
pub fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `metav1.Time` on the wire: RFC 3339 in whole seconds, `null` or absent for none.
mod wire_time {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::rfc3339(*t)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Timestamp>, D::Error> {
        match Option::<String>::deserialize(d)?.as_deref() {
            None | Some("") => Ok(None),
            Some(text) => text.parse().map(Some).map_err(serde::de::Error::custom),
        }
    }
}

/// RFC 3339 in whole seconds, UTC (`2026-11-27T17:16:09Z`), as kube writes times.
pub fn rfc3339(t: Timestamp) -> String {
    whole_seconds(t).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// One field error, as kube-apiserver renders it: `path: body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path (`status.conditions.[1].type`).
    pub field: String,
    /// The rest (`Unsupported value: "X": supported values: "Issued", …`).
    pub body: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body)
    }
}

/// The errors of a refused status, in kube-apiserver's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct StatusRejected {
    /// The field errors (at least one).
    pub errors: Vec<FieldError>,
}

impl StatusRejected {
    /// The message of kube-apiserver's `422` for PCR `name`.
    pub fn message(&self, name: &str) -> String {
        format!(
            "PodCertificateRequest.certificates.k8s.io {} is invalid: {self}",
            warrant_token::go_quote(name)
        )
    }
}

impl fmt::Display for StatusRejected {
    /// One error as itself; several as `[a, b]` (Go's aggregate).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errors.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                let joined: Vec<String> = many.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", joined.join(", "))
            }
        }
    }
}

fn invalid(field: &str, value: &str, detail: &str) -> FieldError {
    FieldError {
        field: field.to_owned(),
        body: format!(
            "Invalid value: {}: {detail}",
            warrant_token::go_quote(value)
        ),
    }
}

fn invalid_raw(field: &str, value: impl fmt::Display, detail: &str) -> FieldError {
    FieldError {
        field: field.to_owned(),
        body: format!("Invalid value: {value}: {detail}"),
    }
}

fn invalid_omitted(field: &str, detail: &str) -> FieldError {
    FieldError {
        field: field.to_owned(),
        body: format!("Invalid value: {detail}"),
    }
}

fn required(field: &str, detail: &str) -> FieldError {
    let body = match detail {
        "" => "Required value".to_owned(),
        detail => format!("Required value: {detail}"),
    };
    FieldError {
        field: field.to_owned(),
        body,
    }
}

fn not_supported(field: &str, value: &str, supported: &[&str]) -> FieldError {
    let list: Vec<String> = supported
        .iter()
        .map(|s| warrant_token::go_quote(s))
        .collect();
    FieldError {
        field: field.to_owned(),
        body: format!(
            "Unsupported value: {}: supported values: {}",
            warrant_token::go_quote(value),
            list.join(", ")
        ),
    }
}

/// Not observed: the wording of apimachinery's TooLong for a string.
fn too_long(field: &str, max: usize) -> FieldError {
    FieldError {
        field: field.to_owned(),
        body: format!("Too long: may not be more than {max} bytes"),
    }
}

/// What the status rules need besides the two statuses.
#[derive(Debug, Clone, Copy)]
pub struct StatusContext<'a> {
    /// The PCR's requested key (whichever form it came in); `None` when the PCR has none
    /// that parses, which only an issuance is checked against (and then fails).
    pub key: Option<&'a RequestedKey>,
    /// The PCR's `spec.maxExpirationSeconds`.
    pub max_expiration_seconds: i64,
    /// kube-apiserver's clock (for a local check, warrant's own).
    pub now: Timestamp,
}

/// Checks a status update from `old` to `new` as kube-apiserver v1.36.2 does.
pub fn validate_status_update(
    old: &PodCertificateRequestStatus,
    new: &PodCertificateRequestStatus,
    context: StatusContext<'_>,
) -> Result<(), StatusRejected> {
    let errors = check(old, new, context);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(StatusRejected { errors })
    }
}

fn check(
    old: &PodCertificateRequestStatus,
    new: &PodCertificateRequestStatus,
    context: StatusContext<'_>,
) -> Vec<FieldError> {
    // Steps 1 and 2: the conditions, every error collected.
    let mut errors = pcr_conditions(&new.conditions);
    errors.extend(metav1_conditions(&new.conditions));
    if !errors.is_empty() {
        return errors;
    }
    // Step 3: a terminal status never changes.
    if old.terminal_condition().is_some() {
        if old != new {
            return vec![invalid_omitted(
                "status",
                "immutable after PodCertificateRequest is issued, denied, or failed",
            )];
        }
        return Vec::new();
    }
    // Step 4: Denied and Failed carry only their condition.
    if new.has_true(DENIED) || new.has_true(FAILED) {
        let only_conditions = PodCertificateRequestStatus {
            conditions: new.conditions.clone(),
            ..Default::default()
        };
        if *new != only_conditions {
            return vec![invalid_omitted(
                "status",
                "non-condition status fields must be empty when denying or failing the \
                 PodCertificateRequest",
            )];
        }
        return Vec::new();
    }
    // Step 5: issuance.
    if new.has_true(ISSUED) {
        return issued(new, context).err().unwrap_or_default();
    }
    // Step 6: nothing terminal, nothing changes.
    if old != new {
        return vec![invalid_omitted(
            "status",
            "status is immutable unless transitioning to \"Issued\", \"Denied\", or \"Failed\"",
        )];
    }
    Vec::new()
}

/// Step 1: the PCR's own condition rules (paths `status.conditions.[i]`, with kube's dot).
fn pcr_conditions(conditions: &[Condition]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut known = 0;
    for (i, c) in conditions.iter().enumerate() {
        if [ISSUED, DENIED, FAILED].contains(&c.type_.as_str()) {
            known += 1;
            if known > 1 {
                errors.push(invalid(
                    &format!("status.conditions.[{i}].type"),
                    &c.type_,
                    "There may be at most one condition with type \"Issued\", \"Denied\", or \
                     \"Failed\"",
                ));
            }
            if c.status != "True" {
                errors.push(not_supported(
                    &format!("status.conditions.[{i}].status"),
                    &c.status,
                    &["True"],
                ));
            }
        } else {
            errors.push(not_supported(
                &format!("status.conditions.[{i}].type"),
                &c.type_,
                &[ISSUED, DENIED, FAILED],
            ));
        }
    }
    errors
}

/// Step 2: metav1's rules for every condition (paths `status.conditions[i]`). The type's
/// qualified-name syntax is not mirrored: step 1 already admits only three names.
fn metav1_conditions(conditions: &[Condition]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let path = format!("status.conditions[{i}]");
        if conditions
            .iter()
            .take(i)
            .any(|earlier| earlier.type_ == c.type_)
        {
            errors.push(FieldError {
                field: format!("{path}.type"),
                body: format!("Duplicate value: {}", warrant_token::go_quote(&c.type_)),
            });
        }
        if !["True", "False", "Unknown"].contains(&c.status.as_str()) {
            errors.push(not_supported(
                &format!("{path}.status"),
                &c.status,
                &["False", "True", "Unknown"],
            ));
        }
        if c.observed_generation < 0 {
            errors.push(invalid_raw(
                &format!("{path}.observedGeneration"),
                c.observed_generation,
                "must be greater than or equal to zero",
            ));
        }
        if c.last_transition_time.is_none() {
            errors.push(required(&format!("{path}.lastTransitionTime"), ""));
        }
        if c.reason.is_empty() {
            errors.push(required(&format!("{path}.reason"), ""));
        } else {
            if !is_condition_reason(&c.reason) {
                errors.push(invalid(
                    &format!("{path}.reason"),
                    &c.reason,
                    "a condition reason must start with alphabetic character, optionally \
                     followed by a string of alphanumeric characters or '_,:', and must end \
                     with an alphanumeric character or '_'",
                ));
            }
            if c.reason.len() > MAX_REASON_LEN {
                errors.push(too_long(&format!("{path}.reason"), MAX_REASON_LEN));
            }
        }
        if c.message.len() > MAX_MESSAGE_LEN {
            errors.push(too_long(&format!("{path}.message"), MAX_MESSAGE_LEN));
        }
    }
    errors
}

/// kube's condition reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
pub fn is_condition_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    match bytes {
        [] => false,
        [first] => first.is_ascii_alphabetic(),
        [first, middle @ .., last] => {
            first.is_ascii_alphabetic()
                && middle.iter().all(inner)
                && (last.is_ascii_alphanumeric() || *last == b'_')
        }
    }
}

const CHAIN: &str = "status.certificateChain";
const NOT_BEFORE: &str = "status.notBefore";
const NOT_AFTER: &str = "status.notAfter";
const BEGIN_REFRESH_AT: &str = "status.beginRefreshAt";
const TEN_MINUTES: SignedDuration = SignedDuration::from_secs(600);
const FIVE_MINUTES: SignedDuration = SignedDuration::from_secs(300);

/// Step 5, every sub-step ending the validation with its first error.
fn issued(
    new: &PodCertificateRequestStatus,
    context: StatusContext<'_>,
) -> Result<(), Vec<FieldError>> {
    let chain = new.certificate_chain.as_str();
    let fail = |detail: &str| vec![invalid(CHAIN, chain, detail)];
    // 5a
    if chain.len() > MAX_CERTIFICATE_CHAIN_SIZE {
        return Err(vec![too_long(CHAIN, MAX_CERTIFICATE_CHAIN_SIZE)]);
    }
    // 5b
    let Some((leaf_block, mut rest)) = pem::next_block(chain) else {
        return Err(fail(
            "issued certificate chain must contain at least one certificate",
        ));
    };
    if leaf_block.label != "CERTIFICATE" {
        return Err(fail(
            "issued certificate chain must consist entirely of CERTIFICATE PEM blocks",
        ));
    }
    // 5c
    let leaf = match X509Certificate::from_der(&leaf_block.der) {
        Ok(([], leaf)) => leaf,
        _ => return Err(fail("leaf certificate does not parse as valid X.509")),
    };
    // 5d
    names_of_leaf(&leaf)?;
    // 5e
    if !context
        .key
        .is_some_and(|key| key.is_same_key_as(leaf.public_key().raw))
    {
        return Err(fail(
            "leaf certificate was not issued to the requested public key",
        ));
    }
    // 5f
    let (Some(not_before), Some(not_after), Some(begin_refresh_at)) =
        (new.not_before, new.not_after, new.begin_refresh_at)
    else {
        let mut errors = Vec::new();
        let consistent = "must be present and consistent with the issued certificate";
        if new.not_before.is_none() {
            errors.push(required(NOT_BEFORE, consistent));
        }
        if new.not_after.is_none() {
            errors.push(required(NOT_AFTER, consistent));
        }
        if new.begin_refresh_at.is_none() {
            errors.push(required(
                BEGIN_REFRESH_AT,
                "must be present and in the range [notbefore+10min, notafter-10min]",
            ));
        }
        return Err(errors);
    };
    times(&leaf, (not_before, not_after, begin_refresh_at), context)?;
    // 5n: what follows the leaf parses; nothing checks that it signed anything.
    while let Some((block, after)) = pem::next_block(rest) {
        if block.label != "CERTIFICATE" {
            // (sic) kube's message misspells CERTIFICATE here.
            return Err(fail(
                "issued certificate chain must consist entirely of CERTFICATE PEM blocks",
            ));
        }
        if !matches!(X509Certificate::from_der(&block.der), Ok((t, _)) if t.is_empty()) {
            return Err(fail(
                "intermediate certificate does not parse as valid X.509",
            ));
        }
        rest = after;
    }
    Ok(())
}

/// 5d: the leaf's DNS names and e-mail addresses (every error of this step collected).
fn names_of_leaf(leaf: &X509Certificate<'_>) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    let Ok(Some(san)) = leaf.subject_alternative_name() else {
        return Ok(());
    };
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(dns) => {
                if dns.is_empty() {
                    errors.push(invalid(
                        CHAIN,
                        dns,
                        "leaf certificate should not contain empty DNSName",
                    ));
                }
                if dns.contains("..") {
                    errors.push(invalid(
                        CHAIN,
                        dns,
                        "leaf certificate's DNSName should not contain '..'",
                    ));
                }
                if dns.starts_with('.') || dns.ends_with('.') {
                    errors.push(invalid(
                        CHAIN,
                        dns,
                        "leaf certificate's DNSName should not start or end with '.'",
                    ));
                }
            }
            // Go's mail.ParseAddress, approximated: one `@` with text on both sides.
            GeneralName::RFC822Name(email) => {
                let ok = email
                    .split_once('@')
                    .is_some_and(|(l, d)| !l.is_empty() && !d.is_empty() && !d.contains('@'));
                if !ok {
                    errors.push(invalid(
                        CHAIN,
                        email,
                        "leaf certificate should not contain invalid EmailAddress",
                    ));
                }
            }
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// 5g–5m: the status's times against the leaf's, the clock and each other.
fn times(
    leaf: &X509Certificate<'_>,
    (not_before, not_after, begin_refresh_at): (Timestamp, Timestamp, Timestamp),
    context: StatusContext<'_>,
) -> Result<(), Vec<FieldError>> {
    let leaf_not_before = leaf.validity().not_before.timestamp();
    let leaf_not_after = leaf.validity().not_after.timestamp();
    // 5g (a status time is whole seconds on the wire; so is an X.509 time)
    if not_before.as_second() != leaf_not_before || not_before.subsec_nanosecond() != 0 {
        return Err(vec![invalid(
            NOT_BEFORE,
            &rfc3339(not_before),
            "must be set to the NotBefore time encoded in the leaf certificate",
        )]);
    }
    // 5h: strictly within ±5 min
    let near = not_before > context.now - FIVE_MINUTES && not_before < context.now + FIVE_MINUTES;
    if !near {
        return Err(vec![invalid(
            NOT_BEFORE,
            &rfc3339(not_before),
            "must be set to within 5 minutes of kube-apiserver's current time",
        )]);
    }
    // 5i
    if not_after.as_second() != leaf_not_after || not_after.subsec_nanosecond() != 0 {
        return Err(vec![invalid(
            NOT_AFTER,
            &rfc3339(not_after),
            "must be set to the NotAfter time encoded in the leaf certificate",
        )]);
    }
    // 5j, 5k: the leaf's lifetime, shown in nanoseconds as Go's Duration is
    let lifetime = i128::from(leaf_not_after) - i128::from(leaf_not_before);
    let nanos = lifetime * 1_000_000_000;
    if lifetime < 3600 {
        return Err(vec![invalid_raw(
            CHAIN,
            nanos,
            "leaf certificate lifetime must be >= 1 hour",
        )]);
    }
    if lifetime > i128::from(context.max_expiration_seconds) {
        return Err(vec![invalid_raw(
            CHAIN,
            nanos,
            &format!(
                "leaf certificate lifetime must be <= spec.maxExpirationSeconds ({})",
                context.max_expiration_seconds
            ),
        )]);
    }
    // 5l, 5m
    if begin_refresh_at < not_before + TEN_MINUTES {
        return Err(vec![invalid(
            BEGIN_REFRESH_AT,
            &rfc3339(begin_refresh_at),
            "must be at least 10 minutes after status.notBefore",
        )]);
    }
    if begin_refresh_at > not_after - TEN_MINUTES {
        return Err(vec![invalid(
            BEGIN_REFRESH_AT,
            &rfc3339(begin_refresh_at),
            "must be at least 10 minutes before status.notAfter",
        )]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_follow_kubes_regex() {
        for good in ["Issued", "UnsupportedKeyType", "A", "a_b", "A,B", "A:B_"] {
            assert!(is_condition_reason(good), "{good}");
        }
        for bad in ["", "1A", "A-B", "A,", "A:", "_A", "A B"] {
            assert!(!is_condition_reason(bad), "{bad}");
        }
    }

    #[test]
    fn the_vectors_issued_status_reads_and_writes_back_the_same() {
        let text = include_str!("../tests/vectors/status-issued-accepted.json");
        let wire: serde_json::Value = serde_json::from_str(text).unwrap();
        let status: PodCertificateRequestStatus = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(status.terminal_condition(), Some(ISSUED));
        assert_eq!(rfc3339(status.not_before.unwrap()), "2026-11-27T17:16:09Z");
        assert_eq!(status.to_json(), wire);
    }

    #[test]
    fn nulls_read_as_empty() {
        let status: PodCertificateRequestStatus = serde_json::from_str(
            r#"{"conditions": null, "certificateChain": null, "notBefore": null}"#,
        )
        .unwrap();
        assert_eq!(status, PodCertificateRequestStatus::default());
        assert_eq!(status.to_json(), serde_json::json!({}));
    }
}
