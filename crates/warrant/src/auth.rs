//! Who may call and what they may do: the flags (kube-apiserver's and kube's delegating
//! servers' names) and the wiring of the authenticators and authorizers they configure.

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use prometheus_client::registry::Registry;
use tokio_util::task::AbortOnDropHandle;
use warrant_auth::{
    Authenticator, Authorizer, CaBundle, ClientTrust, DEFAULT_ALWAYS_ALLOW_GROUPS,
    DEFAULT_ALWAYS_ALLOW_PATHS, DEFAULT_MAX_IN_FLIGHT, DelegatedAuthentication,
    DelegatedAuthorization, DelegationOptions, Follow, FrontProxy, PolicyFile, ProofChecker,
    RequestHeaders, TokenFile, follow_extension_authentication,
};
use warrant_objects::kube::cluster_client;

use crate::running::Running;

/// `warrant serve`'s authentication and authorization flags (docs/configuration.md).
#[derive(Debug, Args)]
pub(crate) struct AuthArgs {
    /// CA bundle of the front proxy (kube-apiserver's aggregator): a client certificate from
    /// it may name the user in the request headers below. Default: the cluster's
    /// kube-system/extension-apiserver-authentication, with --delegate-authentication.
    #[arg(
        long = "requestheader-client-ca-file",
        value_name = "PATH",
        help_heading = "Who may call"
    )]
    pub(crate) requestheader_client_ca_file: Option<PathBuf>,
    /// Common names the front proxy's certificate may have; empty allows any the CA signed.
    #[arg(
        long = "requestheader-allowed-names",
        value_delimiter = ',',
        value_name = "NAMES",
        help_heading = "Who may call"
    )]
    pub(crate) requestheader_allowed_names: Vec<String>,
    /// Headers the front proxy names the user in (the first present wins).
    #[arg(
        long = "requestheader-username-headers",
        value_delimiter = ',',
        default_value = "X-Remote-User",
        value_name = "HEADERS",
        help_heading = "Who may call"
    )]
    pub(crate) requestheader_username_headers: Vec<String>,
    /// Headers the front proxy gives the user's UID in.
    #[arg(
        long = "requestheader-uid-headers",
        value_delimiter = ',',
        default_value = "X-Remote-Uid",
        value_name = "HEADERS",
        help_heading = "Who may call"
    )]
    pub(crate) requestheader_uid_headers: Vec<String>,
    /// Headers the front proxy lists the user's groups in.
    #[arg(
        long = "requestheader-group-headers",
        value_delimiter = ',',
        default_value = "X-Remote-Group",
        value_name = "HEADERS",
        help_heading = "Who may call"
    )]
    pub(crate) requestheader_group_headers: Vec<String>,
    /// Prefixes of the headers the front proxy gives the user's extra attributes in.
    #[arg(
        long = "requestheader-extra-headers-prefix",
        value_delimiter = ',',
        default_value = "X-Remote-Extra-",
        value_name = "PREFIXES",
        help_heading = "Who may call"
    )]
    pub(crate) requestheader_extra_headers_prefix: Vec<String>,
    /// Send bearer tokens warrant does not know to kube-apiserver's TokenReview, and read the
    /// front proxy's configuration from the cluster. Implied by --authentication-kubeconfig.
    #[arg(long = "delegate-authentication", help_heading = "Who may call")]
    pub(crate) delegate_authentication: bool,
    /// Kubeconfig for delegated authentication; default: --kubeconfig, else in-cluster.
    #[arg(
        long = "authentication-kubeconfig",
        value_name = "PATH",
        help_heading = "Who may call"
    )]
    pub(crate) authentication_kubeconfig: Option<PathBuf>,
    /// How long kube-apiserver's answers about a token are reused.
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "10s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Who may call")]
    pub(crate) authentication_cache_ttl: Duration,
    /// How long one request to kube-apiserver for delegated authentication or authorization
    /// may take (kube: 10 s). Failures are retried with kube's backoff, 5 attempts in all, so a
    /// lookup ends within about 5 times this plus 6 s, whether its caller waits or not.
    #[arg(long = "delegation-timeout", default_value = "10s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Who may call")]
    pub(crate) delegation_timeout: Duration,
    /// The most TokenReviews (and, separately, SubjectAccessReviews) in flight to
    /// kube-apiserver at once; past it, callers are answered 429 (authentication) or 503
    /// (authorization) at once.
    #[arg(long = "delegation-max-in-flight", default_value_t = DEFAULT_MAX_IN_FLIGHT, value_name = "COUNT", help_heading = "Who may call")]
    pub(crate) delegation_max_in_flight: usize,
    /// Do not read kube-system/extension-apiserver-authentication.
    #[arg(long = "authentication-skip-lookup", help_heading = "Who may call")]
    pub(crate) authentication_skip_lookup: bool,

    /// Who may request which tokens, review tokens and read metrics (YAML; docs/security.md).
    #[arg(
        long = "authorization-policy-file",
        value_name = "PATH",
        help_heading = "Who may call"
    )]
    pub(crate) authorization_policy_file: Option<PathBuf>,
    /// This cluster's name, for relying parties that serve several: the fact `${cluster}` that
    /// the policy's extra claims may carry (docs/tokens.md). Without it, a claim made of it is
    /// missing.
    #[arg(
        long = "cluster-name",
        value_name = "NAME",
        value_parser = parse_cluster_name,
        help_heading = "Who may call"
    )]
    pub(crate) cluster_name: Option<String>,
    /// Ask kube-apiserver (SubjectAccessReview) whether a caller may do what it asks.
    /// Implied by --authorization-kubeconfig.
    #[arg(long = "delegate-authorization", help_heading = "Who may call")]
    pub(crate) delegate_authorization: bool,
    /// Kubeconfig for delegated authorization; default: --kubeconfig, else in-cluster.
    #[arg(
        long = "authorization-kubeconfig",
        value_name = "PATH",
        help_heading = "Who may call"
    )]
    pub(crate) authorization_kubeconfig: Option<PathBuf>,
    /// How long kube-apiserver's allowing answers are reused.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "10s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Who may call")]
    pub(crate) authorization_allowed_ttl: Duration,
    /// How long kube-apiserver's refusing answers are reused.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "10s", value_parser = crate::duration::parse_duration, value_name = "DURATION", help_heading = "Who may call")]
    pub(crate) authorization_denied_ttl: Duration,
    /// Paths anyone may read, without authentication (a trailing * matches a prefix).
    #[arg(long = "authorization-always-allow-paths", value_delimiter = ',', default_values_t = DEFAULT_ALWAYS_ALLOW_PATHS.map(str::to_owned), value_name = "PATHS", help_heading = "Who may call")]
    pub(crate) always_allow_paths: Vec<String>,
    /// Groups whose members may do anything.
    #[arg(long = "authorization-always-allow-groups", value_delimiter = ',', default_values_t = DEFAULT_ALWAYS_ALLOW_GROUPS.map(str::to_owned), value_name = "GROUPS", help_heading = "Who may call", action = ArgAction::Append)]
    pub(crate) always_allow_groups: Vec<String>,
    /// How many DPoP proofs to remember, each for its 60 s window, so a proof is accepted once
    /// (about 150 bytes each). When full, the oldest are forgotten early and could be replayed
    /// within their window, by someone who also holds the token they were made for.
    #[arg(long = "dpop-replay-cache-size", value_name = "ENTRIES", default_value_t = warrant_auth::authn::DEFAULT_REPLAY_CAPACITY, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Who may call")]
    pub(crate) dpop_replay_entries: u64,
    /// The origin (https://host[:port]) clients address warrant by, which every DPoP proof's
    /// htu must name; default: the host each request names (Host), which the caller chooses.
    /// Set it when a proxy rewrites Host (kube-apiserver's aggregator does) or to refuse proofs
    /// made for another server.
    #[arg(long = "dpop-htu-origin", value_name = "URL", value_parser = warrant_auth::authn::parse_origin, help_heading = "Who may call")]
    pub(crate) dpop_htu_origin: Option<String>,
}

impl AuthArgs {
    /// Whether delegation reaches the cluster through `serve --kubeconfig` (no kubeconfig of its
    /// own was given).
    pub(crate) fn uses_cluster_kubeconfig(&self) -> bool {
        (self.delegate_authentication && self.authentication_kubeconfig.is_none())
            || (self.delegate_authorization && self.authorization_kubeconfig.is_none())
    }
}

/// The authenticators and authorizers the flags ask for.
pub(crate) struct Setup {
    pub(crate) authenticator: Authenticator,
    pub(crate) authorizer: Authorizer,
    pub(crate) trust: ClientTrust,
    /// What keeps them current: the policy file's watch, and the follower of the cluster's
    /// front-proxy configuration.
    pub(crate) running: Running,
}

/// Builds the authenticators and authorizers from the flags.
pub(crate) async fn setup(
    auth: &AuthArgs,
    client_ca_file: Option<&PathBuf>,
    token_auth_file: Option<&PathBuf>,
    kubeconfig: Option<&PathBuf>,
    registry: &mut Registry,
) -> Result<Setup, Box<dyn Error>> {
    let trust = client_trust(auth, client_ca_file)?;
    let token_file = token_auth_file.map(|p| TokenFile::load(p)).transpose()?;

    let cluster = |explicit: &Option<PathBuf>| explicit.as_ref().or(kubeconfig).cloned();
    let (delegated_authn, follower) = delegated_authentication(
        auth,
        client_ca_file.is_none(),
        cluster(&auth.authentication_kubeconfig),
        &trust,
        registry,
    )
    .await?;
    let delegated_authz =
        delegated_authorization(auth, cluster(&auth.authorization_kubeconfig)).await?;
    let policy = auth
        .authorization_policy_file
        .as_ref()
        .map(|p| PolicyFile::load(p))
        .transpose()?;
    let policy_watch = match &policy {
        Some(policy) => {
            policy.register_metrics(registry);
            Some(policy.watch()?)
        }
        None => None,
    };

    if token_file.is_none()
        && client_ca_file.is_none()
        && auth.requestheader_client_ca_file.is_none()
        && delegated_authn.is_none()
    {
        tracing::warn!(
            "no --token-auth-file, --client-ca-file, --requestheader-client-ca-file or --delegate-authentication: only callers with warrant's own tokens can authenticate"
        );
    }
    let mut authorizer = Authorizer::default();
    authorizer.always_allow_paths = auth.always_allow_paths.clone();
    authorizer.always_allow_groups = auth.always_allow_groups.clone();
    authorizer.policy = policy;
    authorizer.delegated = delegated_authz;
    authorizer.cluster_name = auth.cluster_name.clone();
    if authorizer.only_groups() {
        tracing::warn!(
            groups = ?authorizer.always_allow_groups,
            "no --authorization-policy-file or --delegate-authorization: only members of the always-allowed groups may request or review tokens; everyone else gets 403"
        );
    }
    let mut authenticator = Authenticator::default();
    authenticator.trust = trust.clone();
    authenticator.token_file = token_file;
    authenticator.own_tokens = true;
    authenticator.delegated = delegated_authn;
    authenticator.proofs = proof_checker(auth)?;
    Ok(Setup {
        authenticator,
        authorizer,
        trust,
        running: Running::hold((policy_watch, follower)),
    })
}

/// Who may connect with a client certificate: `--client-ca-file`'s users and, with
/// `--requestheader-client-ca-file`, the front proxy and the headers it sets.
fn client_trust(
    auth: &AuthArgs,
    client_ca_file: Option<&PathBuf>,
) -> Result<ClientTrust, Box<dyn Error>> {
    let client_ca = client_ca_file.map(|p| CaBundle::from_file(p)).transpose()?;
    let front_proxy = match &auth.requestheader_client_ca_file {
        Some(path) => Some(FrontProxy {
            ca: CaBundle::from_file(path)?,
            allowed_names: auth.requestheader_allowed_names.clone(),
            headers: RequestHeaders {
                username: auth.requestheader_username_headers.clone(),
                uid: auth.requestheader_uid_headers.clone(),
                group: auth.requestheader_group_headers.clone(),
                extra_prefix: auth.requestheader_extra_headers_prefix.clone(),
            },
        }),
        None => None,
    };
    Ok(ClientTrust::new(client_ca, front_proxy))
}

/// `--delegate-authentication`'s TokenReviews to the cluster of `kubeconfig`, if asked for (or
/// implied by `--authentication-kubeconfig`), and the task that keeps `trust` in step with the
/// cluster's client CAs that no flag gives (`no_client_ca`: `--client-ca-file` is not set),
/// unless `--authentication-skip-lookup`.
async fn delegated_authentication(
    auth: &AuthArgs,
    no_client_ca: bool,
    kubeconfig: Option<PathBuf>,
    trust: &ClientTrust,
    registry: &mut Registry,
) -> Result<
    (
        Option<DelegatedAuthentication>,
        Option<AbortOnDropHandle<()>>,
    ),
    Box<dyn Error>,
> {
    if !auth.delegate_authentication && auth.authentication_kubeconfig.is_none() {
        return Ok((None, None));
    }
    let client = cluster_client(kubeconfig.as_deref()).await?;
    let follow = Follow {
        client_ca: no_client_ca,
        front_proxy: auth.requestheader_client_ca_file.is_none(),
    };
    let follower = (!auth.authentication_skip_lookup && (follow.client_ca || follow.front_proxy))
        .then(|| follow_extension_authentication(client.clone(), trust.clone(), follow, registry));
    let delegated = DelegatedAuthentication::new(
        client,
        DelegationOptions {
            allow_ttl: auth.authentication_cache_ttl,
            deny_ttl: auth.authentication_cache_ttl,
            timeout: auth.delegation_timeout,
            max_in_flight: auth.delegation_max_in_flight,
            ..DelegationOptions::default()
        },
    );
    Ok((Some(delegated), follower))
}

/// `--delegate-authorization`'s SubjectAccessReviews to the cluster of `kubeconfig`, if asked
/// for (or implied by `--authorization-kubeconfig`).
async fn delegated_authorization(
    auth: &AuthArgs,
    kubeconfig: Option<PathBuf>,
) -> Result<Option<DelegatedAuthorization>, Box<dyn Error>> {
    if !auth.delegate_authorization && auth.authorization_kubeconfig.is_none() {
        return Ok(None);
    }
    let client = cluster_client(kubeconfig.as_deref()).await?;
    Ok(Some(DelegatedAuthorization::new(
        client,
        DelegationOptions {
            allow_ttl: auth.authorization_allowed_ttl,
            deny_ttl: auth.authorization_denied_ttl,
            timeout: auth.delegation_timeout,
            max_in_flight: auth.delegation_max_in_flight,
            ..DelegationOptions::default()
        },
    )))
}

/// The DPoP proof checker: the proof window, `--dpop-replay-cache-size` entries, and the
/// `htu` origin of `--dpop-htu-origin` if given.
fn proof_checker(auth: &AuthArgs) -> Result<ProofChecker, Box<dyn Error>> {
    let proofs = ProofChecker::new(
        warrant_token::DEFAULT_PROOF_WINDOW_SECONDS,
        auth.dpop_replay_entries,
    );
    Ok(match &auth.dpop_htu_origin {
        Some(origin) => proofs
            .with_origin(origin)
            .map_err(|why| format!("--dpop-htu-origin {origin:?}: {why}"))?,
        None => proofs,
    })
}

/// `--cluster-name`: not empty, at most 253 characters, and printable (it goes into tokens).
fn parse_cluster_name(name: &str) -> Result<String, String> {
    if name.is_empty() || name.chars().count() > 253 || name.chars().any(char::is_control) {
        return Err(
            "a cluster name is 1 to 253 characters, none of them a control character".to_owned(),
        );
    }
    Ok(name.to_owned())
}
