//! Health as kube-apiserver reports it: `/livez` and `/readyz` (and `/healthz`, as `/readyz`),
//! each a list of named checks.
//!
//! - `GET /readyz`: `ok`, or 503 naming what is not ready. `?verbose` lists every check as
//!   `[+]name ok` / `[-]name failed: why`, informational lines as `[+]name text`; `?exclude=NAME`
//!   (repeatable) skips a check, listed as `[+]NAME excluded: ok`. `GET /readyz/NAME` runs that
//!   check alone: `ok`, or 503 `internal server error: why`; an unknown name is 404.
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

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;
use warrant_token::{Binding, Claims, NewToken, ObjectRef};

use crate::error::ApiError;
use crate::routes::Params;
use crate::state::AppState;

/// One check's outcome.
struct Check {
    name: &'static str,
    /// `None`: passed; else why, as `?verbose` and `/readyz/NAME` say it.
    failure: Option<String>,
    /// How the plain answer says it failed (`objects …` where the reason alone would not say
    /// what it is about).
    summary: Option<String>,
}

fn check(name: &'static str, failure: Option<String>) -> Check {
    Check {
        name,
        summary: failure.clone(),
        failure,
    }
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
        check("keys", {
            let published = state.issuer().published();
            let key = published.keys().signing_at(state.issuer().clock().now());
            key.remote_key().and_then(|remote| remote.unavailable())
        }),
        {
            let why = state.objects().not_ready();
            Check {
                name: "objects",
                summary: why.as_ref().map(|why| format!("objects {why}")),
                failure: why,
            }
        },
        check(
            "client-trust",
            (!state.authenticator().ready())
                .then(|| "front-proxy configuration not loaded yet".to_owned()),
        ),
    ];
    // Components that registered a check of their own (discovery publishing).
    for (name, failure) in state.checks() {
        checks.push(Check {
            name,
            summary: failure.as_ref().map(|why| format!("{name}: {why}")),
            failure,
        });
    }
    // Blocking mode: an event that cannot be written fails its request, so a server whose
    // audit log fails cannot issue or review; it is not ready until a write succeeds.
    if state.issuer().audit().mode() == Some(warrant_audit::Mode::Blocking) {
        let why = state.issuer().audit().failing();
        checks.push(Check {
            name: "audit-log",
            summary: why.as_ref().map(|why| format!("audit-log: {why}")),
            failure: why,
        });
    }
    checks
}

/// The liveness checks.
fn liveness(state: &AppState) -> Vec<Check> {
    let now = state.issuer().clock().now();
    let published = state.issuer().published();
    let key = published.keys().signing_at(now);
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

/// The answer to `/readyz` or `/livez` (`what`), with `informational` lines for `?verbose`.
fn report(
    what: &str,
    checks: &[Check],
    informational: &[(String, String)],
    asked: &Asked,
) -> Response {
    let mut failed = Vec::new();
    let mut verbose = String::new();
    for check in checks {
        if asked.exclude.iter().any(|e| e == check.name) {
            verbose.push_str(&format!("[+]{} excluded: ok\n", check.name));
            continue;
        }
        match &check.failure {
            None => verbose.push_str(&format!("[+]{} ok\n", check.name)),
            Some(why) => {
                verbose.push_str(&format!("[-]{} failed: {why}\n", check.name));
                failed.push(check.summary.as_deref().unwrap_or(why.as_str()));
            }
        }
    }
    let ok = failed.is_empty();
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    if !asked.verbose {
        let text = if ok {
            "ok".to_owned()
        } else {
            format!("not ready: {}", failed.join("; "))
        };
        return (code, text).into_response();
    }
    for (name, text) in informational {
        verbose.push_str(&format!("[+]{name} {text}\n"));
    }
    verbose.push_str(&format!(
        "{what} check {}\n",
        if ok { "passed" } else { "failed" }
    ));
    (code, verbose).into_response()
}

/// One check alone: `/readyz/NAME`, `/livez/NAME`.
fn single(checks: Vec<Check>, name: &str) -> Response {
    match checks.into_iter().find(|c| c.name == name) {
        None => ApiError::no_such_path().into_response(),
        Some(Check { failure: None, .. }) => "ok".into_response(),
        Some(Check {
            failure: Some(why), ..
        }) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("internal server error: {why}"),
        )
            .into_response(),
    }
}

/// `GET /readyz` and `/healthz`.
pub(crate) async fn readyz(
    State(state): State<AppState>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
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
        &readiness(&state),
        &informational,
        &Asked::from(&query),
    )
}

/// `GET /readyz/NAME`.
pub(crate) async fn readyz_check(
    State(state): State<AppState>,
    axum::Extension(params): axum::Extension<Params>,
) -> Response {
    single(readiness(&state), &params.name)
}

/// `GET /livez`.
pub(crate) async fn livez(
    State(state): State<AppState>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    report("livez", &liveness(&state), &[], &Asked::from(&query))
}

/// `GET /livez/NAME`.
pub(crate) async fn livez_check(
    State(state): State<AppState>,
    axum::Extension(params): axum::Extension<Params>,
) -> Response {
    single(liveness(&state), &params.name)
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

    async fn get(state: &AppState, path: &str) -> (StatusCode, String) {
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = crate::router(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_key_whose_hsm_is_gone_fails_readiness_naming_it_but_not_liveness() {
        let state = AppState::for_tests(
            warrant_auth::Authenticator::default(),
            warrant_audit::Auditor::disabled(),
        );
        assert_eq!(get(&state, "/readyz/keys").await.0, StatusCode::OK);
        let public = SigningKey::generate(KeyType::P256)
            .unwrap()
            .verifying_key()
            .clone();
        state.issuer().set_keys(warrant_keys::KeySet::new(
            SigningKey::remote(public, Arc::new(Absent)),
            vec![],
        ));
        let (status, body) = get(&state, "/readyz/keys").await;
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
        let state = AppState::for_tests(
            warrant_auth::Authenticator::default(),
            warrant_audit::Auditor::disabled(),
        );
        let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = failing.clone();
        state.add_check("publish", move || {
            flag.load(std::sync::atomic::Ordering::Relaxed)
                .then(|| "s3://bucket: connection refused".to_owned())
        });
        assert_eq!(get(&state, "/readyz/publish").await.0, StatusCode::OK);
        assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
        failing.store(true, std::sync::atomic::Ordering::Relaxed);
        let (status, body) = get(&state, "/readyz/publish").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("s3://bucket: connection refused"), "{body}");
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("publish: s3://bucket"), "{body}");
        // Excluded by name, as the built-in checks are.
        assert_eq!(
            get(&state, "/readyz?exclude=publish").await.0,
            StatusCode::OK
        );
    }
}
