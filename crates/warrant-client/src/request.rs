//! The one request both clients make: a TokenRequest to warrant for a service account,
//! authenticated with a service-account token of the caller's own (the pod's projected token)
//! or a kubeconfig's credential, over kube's HTTP stack without its request tracing, bounded by
//! [`REQUEST_TIMEOUT`], following no redirect. What the own token says of its holder (its
//! service account and binding) is read here too.

use std::error::Error;

use http_body_util::BodyExt as _;
use warrant_proto::wire::{TokenRequest, TokenRequestStatus};
use warrant_token::{BoundObjectReference, UnverifiedClaimsError};

use crate::ObjectName;

/// How long the TokenRequest to warrant may take, connecting included.
pub(crate) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why a TokenRequest to warrant fails: the own token, or warrant's answer. (The plugin's
/// further reasons are `credential::CredentialError`.)
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The own token's claims cannot be read.
    #[error("the own token is not a service-account JWT")]
    OwnTokenNotJwt(#[source] UnverifiedClaimsError),
    /// The own token names no service account.
    #[error(
        "the own token names no service account (kubernetes.io claims): give --service-account"
    )]
    OwnTokenNoServiceAccount,
    /// The own token cannot be sent in an `Authorization` header.
    #[error("the own token holds characters an HTTP header cannot carry")]
    OwnTokenNotHeader,
    /// The TokenRequest cannot be built (a service-account name that is no URI path).
    #[error("cannot build the TokenRequest to warrant at {warrant}")]
    Build {
        /// warrant's URL.
        warrant: String,
        /// http's reason.
        #[source]
        source: http::Error,
    },
    /// No answer: no connection, the TLS handshake, a timeout of kube's connector. The message
    /// names the innermost cause (refused, `UnknownIssuer`), which says what went wrong; the
    /// wrappers around it (kube's, hyper-util's) say nothing more, so the error is kept whole
    /// but not chained, or the one line would repeat them.
    #[error("cannot reach warrant at {warrant}: {}", innermost(.error))]
    Unreachable {
        /// warrant's URL.
        warrant: String,
        /// kube's error, with its causes.
        error: ::kube::Error,
    },
    /// warrant (or what answers at its URL) redirected: the plugin does not follow.
    #[error(
        "warrant at {warrant} answered {status} (a redirect to {}), which the plugin does not follow: give the URL warrant serves at",
        .location.as_deref().unwrap_or("nowhere")
    )]
    Redirect {
        /// warrant's URL.
        warrant: String,
        /// The status.
        status: http::StatusCode,
        /// Its `Location`, if any.
        location: Option<String>,
    },
    /// The answer's body broke off.
    #[error("warrant at {warrant} answered unreadably")]
    Unreadable {
        /// warrant's URL.
        warrant: String,
        /// kube's error.
        #[source]
        source: ::kube::Error,
    },
    /// A success whose body is not a TokenRequest.
    #[error("warrant at {warrant} answered with no TokenRequest")]
    NotTokenRequest {
        /// warrant's URL.
        warrant: String,
        /// serde's reason.
        #[source]
        source: serde_json::Error,
    },
    /// The DPoP proof cannot be sent in a header (it cannot happen: it is base64url and dots).
    #[error("the DPoP proof holds characters an HTTP header cannot carry")]
    ProofNotHeader,
    /// warrant refused, with its Status message.
    #[error("warrant at {warrant} refused a token for {account} ({code}): {message}")]
    Refused {
        /// warrant's URL.
        warrant: String,
        /// The service account asked for.
        account: ObjectName,
        /// The HTTP status code.
        code: u16,
        /// The Status's message, or `no message`.
        message: String,
    },
}

/// The innermost cause of `error`, which says what went wrong (refused, certificate).
fn innermost(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text = inner.to_string();
        source = inner.source();
    }
    text
}

/// What the own token says of its holder: service account and binding.
#[derive(Clone)]
pub(crate) struct Own {
    pub(crate) service_account: ObjectName,
    /// The object the own token is bound to (a pod's, not its node), passed on as the new
    /// token's binding.
    pub(crate) binding: Option<BoundObjectReference>,
}

/// What `token` (a service-account JWT, read, not verified: warrant checks it) says of its
/// holder.
pub(crate) fn own_identity(token: &str) -> Result<Own, RequestError> {
    let claims = warrant_token::unverified_claims(token).map_err(RequestError::OwnTokenNotJwt)?;
    let k = &claims.kubernetes;
    if k.namespace.is_empty() || k.serviceaccount.name.is_empty() {
        return Err(RequestError::OwnTokenNoServiceAccount);
    }
    // A pod-bound token names its node too: the pod is the binding.
    let binding = claims
        .bound_object()
        .map(|(kind, object)| BoundObjectReference {
            kind: kind.as_str().to_owned(),
            api_version: "v1".to_owned(),
            name: object.name.clone(),
            uid: object.uid.clone(),
        });
    Ok(Own {
        service_account: ObjectName {
            namespace: k.namespace.clone(),
            name: k.serviceaccount.name.clone(),
        },
        binding,
    })
}

/// What a client reads of a refusal (a Kubernetes Status).
#[derive(Debug, serde::Deserialize)]
struct Refusal {
    message: Option<String>,
}

/// How a client proves who it is to warrant (the plugin as its workload, the agent as its pod),
/// and the kube client that calls it.
pub(crate) enum Caller {
    /// A service-account token (the pod's projected token), sent as a bearer token to
    /// `warrant` (https), with a client that trusts only the hub's CA (else the system's
    /// roots).
    Token {
        token: String,
        own: Own,
        client: ::kube::Client,
        warrant: String,
    },
    /// A kubeconfig for warrant (CI, people): its server, CA and user, whatever the user's
    /// credential (token, client certificate, another exec plugin).
    Kubeconfig {
        client: ::kube::Client,
        warrant: String,
    },
}

impl Caller {
    /// warrant's URL.
    pub(crate) fn warrant(&self) -> &str {
        match self {
            Caller::Token { warrant, .. } | Caller::Kubeconfig { warrant, .. } => warrant,
        }
    }

    /// What the own token says, when the caller proves itself with one.
    pub(crate) fn own(&self) -> Option<&Own> {
        match self {
            Caller::Token { own, .. } => Some(own),
            Caller::Kubeconfig { .. } => None,
        }
    }

    /// Sends the TokenRequest for `account`, with the DPoP proof `proof` if any; the status of
    /// warrant's answer (the token and its expiry), or why there is none.
    pub(crate) async fn request(
        &self,
        account: &ObjectName,
        body: &TokenRequest,
        proof: Option<&str>,
    ) -> Result<TokenRequestStatus, RequestError> {
        let warrant = self.warrant();
        let (client, request) = self.build(account, body, proof)?;
        let response = client
            .send(request)
            .await
            .map_err(|error| RequestError::Unreachable {
                warrant: warrant.to_owned(),
                error,
            })?;
        let status = response.status();
        // kube's client follows no redirect; nor do the clients: the token goes to the hub's
        // warrant and nowhere else.
        if status.is_redirection() {
            return Err(RequestError::Redirect {
                warrant: warrant.to_owned(),
                status,
                location: response
                    .headers()
                    .get(http::header::LOCATION)
                    .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
            });
        }
        let answer = response
            .into_body()
            .collect()
            .await
            .map_err(|source| RequestError::Unreadable {
                warrant: warrant.to_owned(),
                source,
            })?
            .to_bytes();
        if status.is_success() {
            return TokenRequest::answer_status(&answer).map_err(|source| {
                RequestError::NotTokenRequest {
                    warrant: warrant.to_owned(),
                    source,
                }
            });
        }
        let message = serde_json::from_slice::<Refusal>(&answer)
            .ok()
            .and_then(|refusal| refusal.message)
            .unwrap_or_else(|| "no message".to_owned());
        Err(RequestError::Refused {
            warrant: warrant.to_owned(),
            account: account.clone(),
            code: status.as_u16(),
            message,
        })
    }

    /// The TokenRequest for `account` with its headers (the own token, the proof), and the
    /// client to send it with.
    fn build(
        &self,
        account: &ObjectName,
        body: &TokenRequest,
        proof: Option<&str>,
    ) -> Result<(&::kube::Client, http::Request<::kube::client::Body>), RequestError> {
        let path = token_request_path(account);
        let mut request = http::Request::post(&path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        if let Some(proof) = proof {
            // A credential for this request's window: kept out of debug output like the token.
            let mut value =
                http::HeaderValue::try_from(proof).map_err(|_| RequestError::ProofNotHeader)?;
            value.set_sensitive(true);
            request = request.header("DPoP", value);
        }
        let client = match self {
            Caller::Token { token, client, .. } => {
                // kube's client holds no credential of its own here: the own token goes in
                // this one request, marked sensitive so no debug output shows it.
                let mut bearer = http::HeaderValue::try_from(format!("Bearer {token}"))
                    .map_err(|_| RequestError::OwnTokenNotHeader)?;
                bearer.set_sensitive(true);
                request = request.header(http::header::AUTHORIZATION, bearer);
                client
            }
            Caller::Kubeconfig { client, .. } => client,
        };
        // Strings, an integer and optional fields: serialising cannot fail.
        #[allow(clippy::expect_used)]
        let body = serde_json::to_vec(body).expect("a TokenRequest serialises");
        let request = request
            .body(::kube::client::Body::from(body))
            .map_err(|source| RequestError::Build {
                warrant: self.warrant().to_owned(),
                source,
            })?;
        Ok((client, request))
    }
}

/// The path of the TokenRequest for `account`, below warrant's URL.
pub(crate) fn token_request_path(account: &ObjectName) -> String {
    format!(
        "/api/v1/namespaces/{}/serviceaccounts/{}/token",
        account.namespace, account.name
    )
}

/// kube's client for the TokenRequest a caller authenticates with its own token: to `warrant`
/// (https, checked by [`crate::endpoint::warrant_url`]), over warrant's one connector
/// (warrant-http), https only, trusting the hub's CA `ca` alone where it gives one (so no public
/// CA can vouch for warrant), the system's roots otherwise. The client itself holds no
/// credential: the own token goes in each request ([`Caller::Token`]).
pub(crate) fn own_token_client(
    warrant: &str,
    ca: Option<&[Vec<u8>]>,
) -> Result<::kube::Client, Box<dyn Error + Send + Sync>> {
    let trust = match ca {
        Some(ca) => warrant_http::Trust::Only(
            ca.iter()
                .map(|der| rustls_pki_types::CertificateDer::from(der.clone()))
                .collect(),
        ),
        None => warrant_http::Trust::System,
    };
    let https = warrant_http::https_connector(&trust, warrant_http::Options::default())?;
    Ok(quiet_client(::kube::Config::new(warrant.parse()?), https)?)
}

/// kube's client for `config` over `https`, without the request tracing of
/// `kube::Client::try_from`, which logs each failed request at ERROR: a second line beside the
/// plugin's own on the stderr client-go shows. The layers are kube's own (`ConfigExt`): the base
/// URI (every request goes to `config`'s URL, whatever its path), the credential (a
/// kubeconfig's token, exec plugin or refresh), extra headers. The connector is warrant's
/// ([`own_token_client`]) or, for a kubeconfig, kube's from the kubeconfig
/// (`ConfigExt::rustls_https_connector`: its CA alone, its client certificate, its TLS server
/// name). Like kube's, the client follows no redirect; unlike kube's, it retries nothing: one
/// POST, bounded by [`REQUEST_TIMEOUT`].
pub(crate) fn quiet_client(
    config: ::kube::Config,
    https: warrant_http::HttpsConnector,
) -> Result<::kube::Client, ::kube::Error> {
    use ::kube::client::ConfigExt as _;

    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(tower::BoxError::from)
        .service(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https),
        );
    Ok(::kube::Client::new(service, config.default_namespace))
}

/// A token's `iat` (it is warrant's own, just received: read, not verified).
pub(crate) fn issued_at(token: &str) -> Option<jiff::Timestamp> {
    jiff::Timestamp::from_second(warrant_token::unverified_claims(token).ok()?.iat?).ok()
}
