//! `warrant credential`'s command line: the exec credential plugin's flags, which the command
//! (`crate::credential`) turns into `warrant_client::credential::Config`.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use warrant_client::credential::KeyBinding;
use warrant_client::{ObjectName, parse_object_name};

/// `warrant credential --help`'s examples.
pub(super) const EXAMPLES: &str = r#"Who controls which input:
  the hub's operator (these flags and environment variables, from the provider config and the
  controller's pod): warrant's URL (https only) and CA, --audience, --allow-profile-audience.
  a member's ClusterProfile (KUBERNETES_EXEC_INFO's spec.cluster): the server URL, which is the
  token's audience, and its exec extension (client.authentication.k8s.io/exec). A `warrant` or
  `warrantCA` there must equal the flags' or the plugin refuses; an `audience` there other than
  the server URL is refused unless --allow-profile-audience is given.

A kubeconfig user that runs it (client-go caches the token until it expires):

  users:
  - name: fleet-controller
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1
        command: warrant
        args: [credential, --warrant-url, https://warrant.example, --warrant-ca-file, /etc/warrant-ca/ca.crt]
        provideClusterInfo: true
        interactiveMode: Never

A ClusterProfile's access provider for it (KEP-5339), on the hub; readers that predate the
rename (kubernetes/enhancements#5811) look for it under status.credentialProviders:

  status:
    accessProviders:
    - name: warrant
      cluster:
        server: https://member-1.example:6443
        certificate-authority-data: LS0t...

The profile's clusterprofiles.multicluster.x-k8s.io/exec/additional-args and .../additional-envs
extensions become this plugin's flags and environment, which it cannot tell from the hub's: keep
them off for warrant's provider (profileSourcedCLIArgsPolicy and profileSourcedEnvVarsPolicy:
Ignore, the default). A flag given twice, or a flag that differs from its environment variable,
is refused."#;

/// `warrant credential`.
#[derive(Debug, Args)]
pub(crate) struct CredentialArgs {
    /// warrant's URL, https only: the hub's choice (a cluster's exec extension that names
    /// another is refused). Required unless --kubeconfig.
    #[arg(long = "warrant-url", env = "WARRANT_URL", value_name = "URL")]
    pub(crate) warrant_url: Option<String>,
    /// CA bundle (PEM) for warrant's HTTPS, used instead of the system's roots: the hub's choice
    /// (a cluster's exec extension naming another `warrantCA` is refused).
    #[arg(long = "warrant-ca-file", env = "WARRANT_CA_FILE", value_name = "PATH")]
    pub(crate) warrant_ca_file: Option<PathBuf>,
    /// This workload's own token, read on every run (the kubelet rotates it).
    #[arg(
        long = "token-file",
        env = "WARRANT_TOKEN_FILE",
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount/token",
        value_name = "PATH"
    )]
    pub(crate) token_file: PathBuf,
    /// The audience of the token, for every cluster this plugin serves. Default: the cluster's
    /// server URL (provideClusterInfo: true).
    #[arg(
        long,
        value_name = "AUDIENCE",
        conflicts_with = "allow_profile_audience"
    )]
    pub(crate) audience: Option<String>,
    /// Take the audience from the cluster's exec extension (`audience`) where it differs from
    /// the server URL. Only where whoever writes the ClusterProfiles may name any audience:
    /// a profile could then ask for another member's token.
    #[arg(long = "allow-profile-audience")]
    pub(crate) allow_profile_audience: bool,
    /// The service account to mint for, NAMESPACE/NAME. Default: the cluster config's
    /// `serviceAccount`, else the one the own token names (self-service).
    #[arg(long = "service-account", value_name = "NAMESPACE/NAME", value_parser = parse_object_name)]
    pub(crate) service_account: Option<ObjectName>,
    /// The token's lifetime (warrant may shorten it). Default: warrant's (an hour).
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_seconds)]
    pub(crate) expiration: Option<i64>,
    /// Where tokens are cached (0700, owned by this user; one that is not, or is a symbolic
    /// link, is not used). Default: $XDG_CACHE_HOME/warrant/credentials, else
    /// ~/.cache/warrant/credentials.
    #[arg(long = "cache-dir", env = "WARRANT_CACHE_DIR", value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Mint a token on every run instead of reusing one until 80 % of its lifetime.
    #[arg(long = "no-cache")]
    pub(crate) no_cache: bool,
    /// Call warrant with this kubeconfig (its server, CA and user: CI, people) instead of a
    /// service-account token file; then name the service account to mint for.
    #[arg(
        long = "kubeconfig",
        env = "WARRANT_KUBECONFIG",
        value_name = "PATH",
        conflicts_with_all = ["warrant_url", "warrant_ca_file"]
    )]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Ask warrant for tokens bound to a key (`dpop`: a DPoP proof, RFC 9449, with a P-256 key
    /// the plugin keeps per warrant URL and service account in the cache directory, 0600), and
    /// refuse an answer that is not bound to it. client-go still sends the token as a bearer
    /// token and kube-apiserver does not check the binding (docs/fleet.md). The hub's choice,
    /// like warrant's URL: a member's profile has no say in it.
    #[arg(
        long = "key-binding",
        env = "WARRANT_KEY_BINDING",
        value_parser = key_binding(),
        default_value = "none",
        value_name = "BINDING"
    )]
    pub(crate) key_binding: KeyBinding,
}

/// `--key-binding`'s values, with their help: the client's [`KeyBinding`], each by its name.
fn key_binding() -> impl TypedValueParser<Value = KeyBinding> {
    PossibleValuesParser::new(
        KeyBinding::ALL.map(|binding| PossibleValue::new(binding.as_str()).help(binding.help())),
    )
    .try_map(|name| name.parse::<KeyBinding>())
}
