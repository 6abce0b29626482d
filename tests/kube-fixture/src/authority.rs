//! kube-apiserver's answers to the questions a delegating server asks it: TokenReview ("who is
//! this bearer token?") and SubjectAccessReview ("may this user do this?"), on the paths and in
//! the JSON kube-apiserver uses.
//!
//! Tests decide the answers ([`Authority::token`], [`Authority::access`]), make the next requests
//! fail ([`Authority::fail_next`]) and read what was asked ([`Authority::token_reviews`],
//! [`Authority::access_reviews`]). Serve the routes with [`crate::Fixture::start_with`]:
//!
//! ```no_run
//! # async fn f() -> Result<(), warrant_kube_fixture::FixtureError> {
//! use warrant_kube_fixture::{Cluster, Fixture, authority::Authority};
//! let authority = Authority::new();
//! let fixture = Fixture::start_with(Cluster::new(), |_| authority.routes()).await?;
//! # Ok(()) }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::{
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};

use crate::responses::status;

/// The TokenReview path.
pub const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
/// The SubjectAccessReview path.
pub const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// What the TokenReview endpoint says about one token.
#[derive(Debug, Clone)]
pub enum TokenAnswer {
    /// `authenticated: true` with this user (kube-apiserver adds `system:authenticated` to the
    /// groups itself; so does this fixture, unless the groups already hold it).
    User {
        /// `status.user.username`.
        username: String,
        /// `status.user.uid`.
        uid: String,
        /// `status.user.groups`.
        groups: Vec<String>,
        /// `status.user.extra`.
        extra: BTreeMap<String, Vec<String>>,
    },
    /// `authenticated: false` with this `status.error` (empty: no error).
    Rejected(String),
}

impl TokenAnswer {
    /// A user with a name and groups, no uid or extra.
    pub fn user(username: &str, groups: &[&str]) -> TokenAnswer {
        TokenAnswer::User {
            username: username.to_owned(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: BTreeMap::new(),
        }
    }
}

/// What the SubjectAccessReview endpoint answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessAnswer {
    /// `allowed: true`, with a reason.
    Allow(String),
    /// `allowed: false, denied: true`, with a reason.
    Deny(String),
    /// `allowed: false` and not denied: no authorizer had an opinion.
    NoOpinion,
    /// No answer: this HTTP status with a `Status` body, as a failing kube-apiserver sends.
    Fail(u16),
}

type AccessRule = Arc<dyn Fn(&SubjectAccessReviewSpec) -> AccessAnswer + Send + Sync>;

struct Answers {
    tokens: HashMap<String, TokenAnswer>,
    access: AccessRule,
    /// The next this many requests (of either kind) fail with the status code.
    failures: Option<(usize, u16)>,
    /// Answer as a TokenReview server that ignores `spec.audiences` (no `status.audiences`).
    audience_unaware: bool,
    token_reviews: Vec<TokenReview>,
    access_reviews: Vec<SubjectAccessReview>,
}

/// The authentication and authorization side of a fixture cluster. Cheap to clone.
#[derive(Clone)]
pub struct Authority {
    state: Arc<Mutex<Answers>>,
}

impl Default for Authority {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Authority")
            .field("tokens", &state.tokens.len())
            .field("token_reviews", &state.token_reviews.len())
            .field("access_reviews", &state.access_reviews.len())
            .finish()
    }
}

impl Authority {
    /// An authority that knows no token (each is rejected without an error) and has no opinion
    /// on any access.
    pub fn new() -> Self {
        Authority {
            state: Arc::new(Mutex::new(Answers {
                tokens: HashMap::new(),
                access: Arc::new(|_| AccessAnswer::NoOpinion),
                failures: None,
                audience_unaware: false,
                token_reviews: Vec::new(),
                access_reviews: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Answers> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The two routes, to serve with [`crate::Fixture::start_with`].
    pub fn routes(&self) -> Router {
        Router::new()
            .route(TOKEN_REVIEWS, post(token_review))
            .route(ACCESS_REVIEWS, post(access_review))
            .with_state(self.clone())
    }

    /// Sets the answer for `token`.
    pub fn token(&self, token: &str, answer: TokenAnswer) {
        self.lock().tokens.insert(token.to_owned(), answer);
    }

    /// Answers every SubjectAccessReview with `rule` applied to its spec.
    pub fn access(
        &self,
        rule: impl Fn(&SubjectAccessReviewSpec) -> AccessAnswer + Send + Sync + 'static,
    ) {
        self.lock().access = Arc::new(rule);
    }

    /// The next `count` requests to either endpoint answer `code` with a `Status` body, as an
    /// overloaded or failing kube-apiserver does.
    pub fn fail_next(&self, count: usize, code: u16) {
        self.lock().failures = (count > 0).then_some((count, code));
    }

    /// Answers from now on as a TokenReview server that does not check audiences: it
    /// authenticates as before and leaves `status.audiences` out, whatever was asked.
    pub fn ignore_audiences(&self) {
        self.lock().audience_unaware = true;
    }

    /// Every TokenReview received, oldest first.
    pub fn token_reviews(&self) -> Vec<TokenReview> {
        self.lock().token_reviews.clone()
    }

    /// Every SubjectAccessReview received, oldest first.
    pub fn access_reviews(&self) -> Vec<SubjectAccessReview> {
        self.lock().access_reviews.clone()
    }

    /// Takes one planned failure, if any is left.
    fn failure(&self) -> Option<Response> {
        let mut state = self.lock();
        let (left, code) = state.failures?;
        state.failures = (left > 1).then_some((left - 1, code));
        drop(state);
        Some(failure(code))
    }
}

/// A failure status, as kube-apiserver reasons it.
fn failure(code: u16) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let reason = match code.as_u16() {
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        403 => "Forbidden",
        _ => "Unknown",
    };
    status(code, reason, "fixture: made to fail")
}

async fn token_review(
    State(authority): State<Authority>,
    axum::Json(mut review): axum::Json<TokenReview>,
) -> Response {
    authority.lock().token_reviews.push(review.clone());
    if let Some(failure) = authority.failure() {
        return failure;
    }
    let (answer, audience_unaware) = {
        let state = authority.lock();
        let answer = state
            .tokens
            .get(&review.spec.token)
            .cloned()
            .unwrap_or(TokenAnswer::Rejected(String::new()));
        (answer, state.audience_unaware)
    };
    review.status = Some(match answer {
        TokenAnswer::User {
            username,
            uid,
            mut groups,
            extra,
        } => {
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".to_owned());
            }
            TokenReviewStatus {
                authenticated: Some(true),
                user: Some(UserInfo {
                    username: Some(username),
                    uid: (!uid.is_empty()).then_some(uid),
                    groups: Some(groups),
                    extra: (!extra.is_empty()).then_some(extra),
                }),
                audiences: review
                    .spec
                    .audiences
                    .clone()
                    .filter(|a| !a.is_empty() && !audience_unaware),
                error: None,
            }
        }
        TokenAnswer::Rejected(error) => TokenReviewStatus {
            authenticated: Some(false),
            error: (!error.is_empty()).then_some(error),
            ..TokenReviewStatus::default()
        },
    });
    (StatusCode::CREATED, axum::Json(review)).into_response()
}

async fn access_review(
    State(authority): State<Authority>,
    axum::Json(mut review): axum::Json<SubjectAccessReview>,
) -> Response {
    authority.lock().access_reviews.push(review.clone());
    if let Some(failure) = authority.failure() {
        return failure;
    }
    let rule = authority.lock().access.clone();
    review.status = Some(match rule(&review.spec) {
        AccessAnswer::Fail(code) => return failure(code),
        AccessAnswer::Allow(reason) => SubjectAccessReviewStatus {
            allowed: true,
            reason: Some(reason),
            ..SubjectAccessReviewStatus::default()
        },
        AccessAnswer::Deny(reason) => SubjectAccessReviewStatus {
            allowed: false,
            denied: Some(true),
            reason: Some(reason),
            ..SubjectAccessReviewStatus::default()
        },
        AccessAnswer::NoOpinion => SubjectAccessReviewStatus::default(),
    });
    (StatusCode::CREATED, axum::Json(review)).into_response()
}
