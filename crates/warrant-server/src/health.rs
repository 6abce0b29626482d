//! Health as kube-apiserver reports it: `/livez` and `/readyz` (and `/healthz`, as `/readyz`),
//! each a list of named checks.
//!
//! - `GET /readyz`: `ok`, or 503 listing every check as kube-apiserver does on failure
//!   (`[+]name ok` / `[-]name failed: why`, then `readyz check failed`). `?verbose` lists them
//!   when all pass too, and informational lines as `[+]name text`; `?exclude=NAME` (repeatable)
//!   skips a check, listed as `[+]NAME excluded: ok`. `GET /readyz/NAME` runs that check
//!   alone: `ok`, or 503 `internal server error: why`; an unknown name is 404.
//! - Who sees why: these paths are public (probes carry no credentials), and a check's reason
//!   can carry what only operators should read (a bucket's error body with a role ARN or an
//!   account id, an HSM's locator, a key store's API error). So an anonymous caller gets the
//!   names only: `[-]name failed: reason withheld` (kube-apiserver's words, which it answers
//!   everyone on `/readyz`), `internal server error: reason withheld`, and no informational
//!   lines. A caller who authenticated (any valid credential) gets the reasons, and so does the
//!   log: each failed answer logs the failing checks with their reasons at info, as
//!   kube-apiserver logs them at `-v=2`.
//! - Readiness: `shutdown` (fails from SIGTERM on, so endpoints and kube-apiserver's webhook
//!   stop sending while requests are still served), `keys`, `objects` (loaded and, with
//!   `--max-cache-staleness`, current), `client-trust` (the cluster's front-proxy configuration,
//!   when followed), `audit-log` (with an audit log in blocking mode: fails while writes to it
//!   fail, as every audited request then does, until one succeeds), and the checks components
//!   add ([`AppState::add_check`]: `publish`, while a discovery target does not list the keys).
//!   Informational, never
//!   failing: `discovery`, `audit-log` in batch mode (whose requests go on when writes fail),
//!   and what components report (`key-store`, `key-lease`, …).
//! - Liveness: `ping` (the runtime answers) and `keys` (the key in force signs, and what it signs
//!   verifies with the published keys: the one thing warrant cannot serve without). A key held
//!   in an HSM is left to readiness's `keys`, which fails, naming the token, while the HSM
//!   cannot be reached.

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;
use warrant_auth::Caller;
use warrant_token::{Binding, Claims, NewToken, ObjectRef};

use crate::error::ApiError;
use crate::routes::Params;
use crate::state::AppState;

/// One check's outcome.
struct Check {
    name: &'static str,
    /// `None`: passed; else why, as `?verbose` and `/readyz/NAME` say it.
    failure: Option<String>,
}

fn check(name: &'static str, failure: Option<String>) -> Check {
    Check { name, failure }
}

/// The text that stands for a reason an anonymous caller may not read (kube-apiserver's).
const WITHHELD: &str = "reason withheld";

/// True if `caller` may read why a check fails: anyone who authenticated.
fn shows_reasons(caller: &Caller) -> bool {
    matches!(caller, Caller::User(_))
}

/// The readiness checks, in the order they are listed.
fn readiness(state: &AppState) -> Vec<Check> {
    let mut checks = vec![
        check(
            "shutdown",
            state
                .shutting_down()
                .then(|| "the server is shutting down".to_owned()),
        ),
        // Loaded before the server started, and kept (the last good set) if a reload fails. A
        // key held in an HSM is not ready while the HSM cannot be reached: its TokenRequests
        // and Signs fail, so traffic goes to replicas that can sign.
        // Keys whose signing stopped (a revoked signing key, no successor yet) stay ready: no
        // replica can sign then, and verification and discovery go on.
        check("keys", {
            let published = state.issuer().published();
            let key = published.keys().signing_at(state.issuer().clock().now());
            key.ok()
                .and_then(|key| key.remote_key())
                .and_then(|remote| remote.unavailable())
        }),
        check("objects", state.objects().not_ready()),
        check(
            "client-trust",
            (!state.authenticator().ready())
                .then(|| "front-proxy configuration not loaded yet".to_owned()),
        ),
    ];
    // Components that registered a check of their own (discovery publishing).
    for (name, failure) in state.checks() {
        checks.push(check(name, failure));
    }
    // Blocking mode: an event that cannot be written fails its request, so a server whose
    // audit log fails cannot issue or review; it is not ready until a write succeeds.
    if state.issuer().audit().mode() == Some(warrant_audit::Mode::Blocking) {
        checks.push(check("audit-log", state.issuer().audit().failing()));
    }
    checks
}

/// The liveness checks.
fn liveness(state: &AppState) -> Vec<Check> {
    let now = state.issuer().clock().now();
    let published = state.issuer().published();
    let Ok(key) = published.keys().signing_at(now) else {
        // No key signs (a revoked signing key, no successor yet): a restart would not make one.
        return vec![check("ping", None), check("keys", None)];
    };
    if key.remote_key().is_some() {
        // A key held in an HSM is checked by readiness, not here: restarting warrant would not
        // bring the HSM back, and signing in it for every probe would spend its capacity.
        return vec![check("ping", None), check("keys", None)];
    }
    // A token of warrant's own, bound to nothing and for no one, signed by the key in force and
    // checked as every token is (pre-filter, key, signature, issuer). It is never sent anywhere.
    let issuer = state
        .issuer()
        .settings()
        .issuers
        .first()
        .map_or("", String::as_str);
    let claims = Claims::new(NewToken {
        issuer,
        namespace: "",
        service_account: ObjectRef::new("livez", ""),
        audiences: vec!["livez".to_owned()],
        binding: Binding::None,
        issued_at: now.as_second(),
        expires_at: now.as_second().saturating_add(60),
        warn_after: None,
        jti: String::new(),
    });
    let payload = URL_SAFE_NO_PAD.encode(claims.to_json());
    let usable = key
        .sign_detached(&payload)
        .map_err(|e| format!("the key in force cannot sign: {e}"))
        .and_then(|signed| {
            let token = format!("{}.{payload}.{}", signed.header, signed.signature);
            published
                .verifier()
                .verify_signature(&token)
                .map(drop)
                .map_err(|e| format!("a signature of the key in force does not verify: {e}"))
        });
    vec![check("ping", None), check("keys", usable.err())]
}

/// What the query asks: verbose, and the checks to skip.
struct Asked {
    verbose: bool,
    exclude: Vec<String>,
}

impl Asked {
    fn from(query: &[(String, String)]) -> Asked {
        Asked {
            verbose: query.iter().any(|(k, _)| k == "verbose"),
            exclude: query
                .iter()
                .filter(|(k, _)| k == "exclude")
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }
}

/// The answer to `/readyz` or `/livez` (`what`), with `informational` lines for `?verbose`;
/// reasons only if `reasons` (see the module documentation).
fn report(
    what: &str,
    checks: &[Check],
    informational: &[(String, String)],
    asked: &Asked,
    reasons: bool,
) -> Response {
    let mut lines = String::new();
    let mut failed = Vec::new();
    for check in checks {
        if asked.exclude.iter().any(|e| e == check.name) {
            lines.push_str(&format!("[+]{} excluded: ok\n", check.name));
            continue;
        }
        match &check.failure {
            None => lines.push_str(&format!("[+]{} ok\n", check.name)),
            Some(why) => {
                let shown = if reasons { why.as_str() } else { WITHHELD };
                lines.push_str(&format!("[-]{} failed: {shown}\n", check.name));
                failed.push(format!("[-]{} failed: {why}", check.name));
            }
        }
    }
    let ok = failed.is_empty();
    if !ok {
        tracing::info!(failed = %failed.join("; "), "{what} check failed");
    } else if !asked.verbose {
        return (StatusCode::OK, "ok").into_response();
    }
    // Verbose, or failed (always listed on failure, as kube-apiserver does).
    if reasons {
        for (name, text) in informational {
            lines.push_str(&format!("[+]{name} {text}\n"));
        }
    }
    let (code, verdict) = if ok {
        (StatusCode::OK, "passed")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "failed")
    };
    lines.push_str(&format!("{what} check {verdict}\n"));
    (code, lines).into_response()
}

/// One check alone: `/readyz/NAME`, `/livez/NAME`; its reason only if `reasons`.
fn single(checks: Vec<Check>, name: &str, reasons: bool) -> Response {
    match checks.into_iter().find(|c| c.name == name) {
        None => ApiError::no_such_path().into_response(),
        Some(Check { failure: None, .. }) => "ok".into_response(),
        Some(Check {
            failure: Some(why), ..
        }) => {
            tracing::info!(failed = %format!("[-]{name} failed: {why}"), "{name} check failed");
            let shown = if reasons { why.as_str() } else { WITHHELD };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("internal server error: {shown}"),
            )
                .into_response()
        }
    }
}

/// `GET /readyz` and `/healthz`.
pub(crate) fn readyz(state: &AppState, caller: &Caller, query: &[(String, String)]) -> Response {
    let mut informational = Vec::new();
    match state.issuer().published().discovery() {
        Ok(_) => informational.push(("discovery".to_owned(), "ok".to_owned())),
        // A non-https issuer disables discovery, not readiness.
        Err(e) => informational.push(("discovery".to_owned(), format!("disabled: {e}"))),
    }
    // Batch mode serves on when the audit log fails, losing the events: said, not failed.
    if state.issuer().audit().mode() == Some(warrant_audit::Mode::Batch) {
        let text = state.issuer().audit().failing().map_or_else(
            || "ok".to_owned(),
            |why| format!("failing (batch mode: requests are served, their events lost): {why}"),
        );
        informational.push(("audit-log".to_owned(), text));
    }
    // Degraded components that keep serving (a key store that cannot be read).
    for (name, text) in state.reports() {
        informational.push((name.to_owned(), text));
    }
    report(
        "readyz",
        &readiness(state),
        &informational,
        &Asked::from(query),
        shows_reasons(caller),
    )
}

/// `GET /readyz/NAME`.
pub(crate) fn readyz_check(state: &AppState, caller: &Caller, params: &Params) -> Response {
    single(readiness(state), &params.name, shows_reasons(caller))
}

/// `GET /livez`.
pub(crate) fn livez(state: &AppState, caller: &Caller, query: &[(String, String)]) -> Response {
    report(
        "livez",
        &liveness(state),
        &[],
        &Asked::from(query),
        shows_reasons(caller),
    )
}

/// `GET /livez/NAME`.
pub(crate) fn livez_check(state: &AppState, caller: &Caller, params: &Params) -> Response {
    single(liveness(state), &params.name, shows_reasons(caller))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    use warrant_token::{KeyType, RemoteKey, RemoteSignError, RemoteSignature, SigningKey};

    use super::*;

    /// A key whose HSM is gone: every signature is unavailable.
    struct Absent;

    #[derive(Debug, thiserror::Error)]
    #[error("token \"cluster\" is not present")]
    struct NotPresent;

    impl RemoteKey for Absent {
        fn sign(&self, _: Vec<u8>) -> RemoteSignature<'_> {
            Box::pin(async {
                Err(RemoteSignError {
                    unavailable: true,
                    source: Arc::new(NotPresent),
                })
            })
        }
        fn describe(&self) -> String {
            "PKCS#11 token \"cluster\"".into()
        }
        fn locator(&self) -> String {
            "pkcs11:token=cluster;id=%01;type=private".into()
        }
        fn unavailable(&self) -> Option<String> {
            Some("PKCS#11 token \"cluster\" is not present".into())
        }
    }

    const ADMIN: &str = "admin-token";

    /// A state whose static token file knows `ADMIN`.
    fn state() -> AppState {
        let mut authenticator = warrant_auth::Authenticator::default();
        authenticator.token_file = Some(
            warrant_auth::TokenFile::parse(
                format!("{ADMIN},admin,admin-uid,system:masters\n").as_bytes(),
                "tokens.csv",
            )
            .unwrap(),
        );
        AppState::for_tests(authenticator, warrant_audit::Auditor::disabled())
    }

    /// GET `path`, anonymously or with the bearer token `token`.
    async fn get_as(state: &AppState, path: &str, token: Option<&str>) -> (StatusCode, String) {
        let mut request = http::Request::get(path);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request.body(axum::body::Body::empty()).unwrap();
        let response = crate::router(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn get(state: &AppState, path: &str) -> (StatusCode, String) {
        get_as(state, path, None).await
    }

    async fn get_admin(state: &AppState, path: &str) -> (StatusCode, String) {
        get_as(state, path, Some(ADMIN)).await
    }

    #[tokio::test]
    async fn a_key_whose_hsm_is_gone_fails_readiness_naming_it_but_not_liveness() {
        let state = state();
        assert_eq!(get(&state, "/readyz/keys").await.0, StatusCode::OK);
        let public = SigningKey::generate(KeyType::P256)
            .unwrap()
            .verifying_key()
            .clone();
        state.issuer().set_keys(warrant_keys::KeySet::new(
            SigningKey::remote(public, Arc::new(Absent)),
            vec![],
        ));
        let (status, body) = get_admin(&state, "/readyz/keys").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("token \"cluster\" is not present"), "{body}");
        let (status, body) = get(&state, "/readyz?verbose").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("[-]keys failed"), "{body}");
        // Restarting would not bring the HSM back: liveness holds.
        assert_eq!(get(&state, "/livez").await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_component_check_fails_readiness_by_its_name() {
        let state = state();
        let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = failing.clone();
        state.add_check("publish", move || {
            flag.load(std::sync::atomic::Ordering::Relaxed)
                .then(|| "s3://bucket: connection refused".to_owned())
        });
        assert_eq!(get(&state, "/readyz/publish").await.0, StatusCode::OK);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
        failing.store(true, std::sync::atomic::Ordering::Relaxed);
        let (status, body) = get_admin(&state, "/readyz/publish").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("s3://bucket: connection refused"), "{body}");
        let (status, body) = get_admin(&state, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body.contains("[-]publish failed: s3://bucket: connection refused\n"),
            "{body}"
        );
        // Excluded by name, as the built-in checks are.
        assert_eq!(
            get(&state, "/readyz?exclude=publish").await.0,
            StatusCode::OK
        );
    }

    /// What an upstream said (a role ARN, an account id, an endpoint) is for operators: an
    /// anonymous caller (a probe, or anyone who can reach the port) learns which checks fail,
    /// in kube-apiserver's words, and not why; a caller who authenticated reads why.
    #[tokio::test]
    async fn an_anonymous_caller_learns_which_checks_fail_but_not_why() {
        const WHY: &str = "s3://bucket: AccessDenied: User arn:aws:iam::123456789012:role/warrant is not authorized";
        let state = state();
        state.add_check("publish", || Some(WHY.to_owned()));
        state.add_report("key-store", || {
            "stale since 2027-01-01: Forbidden".to_owned()
        });
        for path in ["/readyz", "/readyz?verbose"] {
            let (status, body) = get(&state, path).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(
                body,
                "[+]shutdown ok\n[+]keys ok\n[+]objects ok\n[+]client-trust ok\n\
                 [-]publish failed: reason withheld\nreadyz check failed\n",
                "{path}"
            );
        }
        let (status, body) = get(&state, "/readyz/publish").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "internal server error: reason withheld");

        let (_, body) = get_admin(&state, "/readyz").await;
        assert!(
            body.contains(&format!("[-]publish failed: {WHY}\n")),
            "{body}"
        );
        assert!(body.contains("[+]key-store stale since"), "{body}");
        assert!(body.ends_with("readyz check failed\n"), "{body}");
        let (_, body) = get_admin(&state, "/readyz/publish").await;
        assert_eq!(body, format!("internal server error: {WHY}"));
        // Credentials that do not authenticate are refused, not served as anonymous.
        assert_eq!(
            get_as(&state, "/readyz", Some("wrong")).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
}
