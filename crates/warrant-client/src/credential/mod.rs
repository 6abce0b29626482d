//! `warrant credential`: client-go's exec credential plugin (KEP-5339's external credential
//! provider). client-go runs it with `KUBERNETES_EXEC_INFO` in the environment (an
//! ExecCredential of `client.authentication.k8s.io/v1` or `v1beta1`; with `provideClusterInfo`,
//! `spec.cluster` holds the server, its CA and `config`, the cluster's
//! `client.authentication.k8s.io/exec` extension). The plugin reads this workload's own token,
//! asks warrant for a token for that cluster (a TokenRequest, authenticated with the own token)
//! and prints an ExecCredential of the same apiVersion with `status.token` and
//! `status.expirationTimestamp`. Nothing else goes to stdout; a failure is one line on stderr.
//!
//! warrant's URL (https only) and CA come from the plugin's flags and environment, the hub's;
//! the token's audience is the cluster's server URL unless the hub's flags say otherwise. What
//! the cluster's `config` (a member's profile) may say, and why it is no more, is in the
//! `anchors` module: `warrant` and `warrantCA` only as checks against the hub's, `audience`
//! only equal to the server URL (or with `--allow-profile-audience`), `serviceAccount`
//! (`NAMESPACE/NAME`) where no flag names one. The service account defaults to the own token's
//! (self-service), and the own token's binding (its pod, secret or node) is passed on, as
//! warrant requires of a bound caller.
//!
//! Tokens are cached on disk and reused until 80 % of their lifetime (see the `cache` module).
//! Text from warrant or a profile reaches stderr with its control characters escaped.
//!
//! With `--key-binding dpop` (the hub's flag, see [`KeyBinding`] for why there), the
//! TokenRequest carries a DPoP proof made with the plugin's key for this identity (the `dpop`
//! module), and a token that comes back not bound to that key is refused: a hub that ignored the
//! proof must not hand out bearer tokens where bound ones were asked for. client-go can only
//! send the token as a bearer token, so what binding buys in a fleet is in docs/fleet.md.

mod anchors;
mod cache;
mod dpop;

use std::error::Error;
use std::path::PathBuf;

use serde_json::{Value, json};
use warrant_proto::wire::{TokenRequest, TokenRequestSpec, TokenRequestStatus};

use crate::endpoint;
use crate::request::{
    Caller, REQUEST_TIMEOUT, issued_at, own_identity, own_token_client, quiet_client,
    token_request_path,
};
use crate::text::escape_controls;
use crate::{ObjectName, parse_object_name};

/// The plugin's configuration: its flags and their environment variables, which are the hub
/// operator's (the provider config's `execConfig`, the controller's pod), never a member's.
#[derive(Debug, Clone)]
pub struct Config {
    /// warrant's URL (`--warrant-url`, `WARRANT_URL`), https only. Required unless
    /// `kubeconfig`.
    pub warrant_url: Option<String>,
    /// warrant's CA bundle (`--warrant-ca-file`, `WARRANT_CA_FILE`), instead of the system's
    /// roots.
    pub warrant_ca_file: Option<PathBuf>,
    /// This workload's own token (`--token-file`), read on every run.
    pub token_file: PathBuf,
    /// The audience for every cluster (`--audience`); else the cluster's server URL.
    pub audience: Option<String>,
    /// Whether a cluster's exec extension may choose another audience than its server URL
    /// (`--allow-profile-audience`).
    pub allow_profile_audience: bool,
    /// The service account to mint for (`--service-account`); else the exec extension's
    /// `serviceAccount`, else the own token's.
    pub service_account: Option<ObjectName>,
    /// The lifetime asked for, in seconds (`--expiration`); else warrant's default.
    pub expiration_seconds: Option<i64>,
    /// Where tokens and the DPoP key are kept (`--cache-dir`, `WARRANT_CACHE_DIR`); else
    /// `$XDG_CACHE_HOME/warrant/credentials`, else `~/.cache/warrant/credentials`.
    pub cache_dir: Option<PathBuf>,
    /// Mint on every run instead of reusing a cached token (`--no-cache`).
    pub no_cache: bool,
    /// Call warrant with this kubeconfig (`--kubeconfig`) instead of the own token.
    pub kubeconfig: Option<PathBuf>,
    /// What the tokens are bound to (`--key-binding`, `WARRANT_KEY_BINDING`).
    pub key_binding: KeyBinding,
}

/// What `warrant credential` binds its tokens to.
///
/// The switch is a plugin flag (or its environment variable), set by the hub's operator in the
/// provider config, never a key of a member's exec extension: a profile that could turn binding
/// off would hand the hub's controller bearer tokens where the hub asked for bound ones, and
/// one that could turn it on would decide which keys the hub's controller keeps. Who writes each
/// input is the rule of the `anchors` module; the binding follows it like warrant's URL and CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyBinding {
    /// Bearer tokens (bound to the own token's pod, if any, but to no key).
    None,
    /// Tokens bound to the plugin's DPoP key (`cnf.jkt`).
    Dpop,
}

impl KeyBinding {
    /// Every binding, in the order the command line lists them.
    pub const ALL: [KeyBinding; 2] = [KeyBinding::None, KeyBinding::Dpop];

    /// The value as given on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyBinding::None => "none",
            KeyBinding::Dpop => "dpop",
        }
    }

    /// What the value means, for the command line's help.
    pub fn help(self) -> &'static str {
        match self {
            KeyBinding::None => {
                "Bearer tokens (bound to the own token's pod, if any, but to no key)"
            }
            KeyBinding::Dpop => "Tokens bound to the plugin's DPoP key (`cnf.jkt`)",
        }
    }
}

/// A value that names no [`KeyBinding`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a key binding: none or dpop")]
pub struct UnknownKeyBinding(String);

impl std::str::FromStr for KeyBinding {
    type Err = UnknownKeyBinding;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        KeyBinding::ALL
            .into_iter()
            .find(|binding| binding.as_str() == text)
            .ok_or_else(|| UnknownKeyBinding(text.to_owned()))
    }
}

/// The apiVersions client-go speaks for exec plugins.
const API_VERSIONS: [&str; 2] = [
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
];

/// What client-go said about the call.
#[derive(Debug, Default)]
struct ExecInfo {
    api_version: String,
    server: Option<String>,
    config: serde_json::Map<String, Value>,
}

/// Why the plugin fails beyond the TokenRequest itself (`RequestError`): its inputs from
/// client-go, or a token not bound as asked. (The checks of who controls which input are
/// [`anchors::AnchorError`].)
#[derive(Debug, thiserror::Error)]
pub(crate) enum CredentialError {
    /// `KUBERNETES_EXEC_INFO` does not parse.
    #[error("KUBERNETES_EXEC_INFO is not JSON")]
    ExecInfoNotJson(#[source] serde_json::Error),
    /// `KUBERNETES_EXEC_INFO` is of an apiVersion the plugin does not speak.
    #[error(
        "KUBERNETES_EXEC_INFO has apiVersion {found:?}; warrant credential speaks {}",
        API_VERSIONS.join(" and ")
    )]
    ExecInfoVersion {
        /// The apiVersion given (empty if none).
        found: String,
    },
    /// `--key-binding dpop` and warrant answered a token that is not bound to the plugin's key.
    #[error(
        "warrant at {warrant} answered a token for {account} that is not bound to the plugin's DPoP key (its cnf.jkt is {}, the key's thumbprint {expected}): refusing it, since --key-binding dpop asks for bound tokens only",
        .found.as_deref().unwrap_or("absent")
    )]
    NotBound {
        /// warrant's URL.
        warrant: String,
        /// The service account asked for.
        account: ObjectName,
        /// The plugin key's thumbprint.
        expected: String,
        /// The token's `cnf.jkt`, if any.
        found: Option<String>,
    },
}

fn exec_info(text: &str) -> Result<ExecInfo, CredentialError> {
    let value: Value = serde_json::from_str(text).map_err(CredentialError::ExecInfoNotJson)?;
    let api_version = value
        .pointer("/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !API_VERSIONS.contains(&api_version.as_str()) {
        return Err(CredentialError::ExecInfoVersion { found: api_version });
    }
    Ok(ExecInfo {
        api_version,
        server: value
            .pointer("/spec/cluster/server")
            .and_then(Value::as_str)
            .map(str::to_owned),
        config: value
            .pointer("/spec/cluster/config")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

/// The `cnf.jkt` of a token just received from warrant (read, not verified); `None` for a
/// `cnf` warrant-token does not understand, as for none.
fn bound_key_of(token: &str) -> Option<String> {
    warrant_token::unverified_claims(token)
        .ok()?
        .cnf?
        .binding()
        .ok()?
        .jkt
        .clone()
}

/// Refuses `minted` unless it is bound to `key` (`--key-binding dpop`).
fn check_bound(
    minted: &str,
    key: &dpop::ProofKey,
    warrant: &str,
    account: &ObjectName,
) -> Result<(), CredentialError> {
    let found = bound_key_of(minted);
    if found.as_deref() == Some(key.jkt()) {
        return Ok(());
    }
    Err(CredentialError::NotBound {
        warrant: warrant.to_owned(),
        account: account.clone(),
        expected: key.jkt().to_owned(),
        found,
    })
}

/// The caller of `--kubeconfig`: its server is warrant, and the kubeconfig is its trust
/// setting and credential.
async fn kubeconfig_caller(
    path: &std::path::Path,
    config: &dyn Fn(&str) -> Option<String>,
) -> Result<Caller, Box<dyn Error>> {
    let file = ::kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
    let kube_config =
        ::kube::Config::from_custom_kubeconfig(file, &::kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
    let from = format!("the server of kubeconfig {}", path.display());
    let warrant = endpoint::warrant_url(&kube_config.cluster_url.to_string(), &from)?;
    anchors::profile_warrant(config("warrant").as_deref(), &warrant, &from)?;
    let mut roots = kube_config.root_cert.clone();
    if let Some(roots) = roots.as_mut() {
        roots.sort();
    }
    let ca_from = format!("certificate authority of kubeconfig {}", path.display());
    anchors::profile_ca(
        config("warrantCA").as_deref(),
        roots.as_deref().map(|certs| (certs, ca_from.as_str())),
    )?;
    // The kubeconfig is this caller's trust setting (its CA, client certificate, TLS server
    // name), which kube's connector reads whole (docs/decisions.md).
    let client = {
        use ::kube::client::ConfigExt as _;
        kube_config
            .rustls_https_connector()
            .and_then(|https| quiet_client(kube_config, https))
    }
    .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
    Ok(Caller::Kubeconfig { client, warrant })
}

/// Who calls warrant, from the hub's flags: a kubeconfig, else the own token file. The
/// cluster's `config` (a member's profile) is only checked against them.
async fn caller(
    settings: &Config,
    config: &dyn Fn(&str) -> Option<String>,
) -> Result<Caller, Box<dyn Error>> {
    if let Some(path) = &settings.kubeconfig {
        return kubeconfig_caller(path, config).await;
    }
    anchors::agree_with_environment(
        "--warrant-url",
        settings.warrant_url.as_deref(),
        "WARRANT_URL",
    )?;
    let warrant =
        settings
            .warrant_url
            .as_deref()
            .ok_or_else(|| anchors::AnchorError::NoWarrantUrl {
                profile: config("warrant"),
            })?;
    let from = "--warrant-url, WARRANT_URL";
    let warrant = endpoint::warrant_url(warrant, from)?;
    anchors::profile_warrant(config("warrant").as_deref(), &warrant, from)?;
    let ca_file = settings.warrant_ca_file.as_deref();
    anchors::agree_with_environment(
        "--warrant-ca-file",
        ca_file.and_then(std::path::Path::to_str),
        "WARRANT_CA_FILE",
    )?;
    let ca = ca_file.map(endpoint::ca_file).transpose()?;
    let ca_from = ca_file.map(|path| path.display().to_string());
    anchors::profile_ca(
        config("warrantCA").as_deref(),
        ca.as_deref().zip(ca_from.as_deref()),
    )?;
    let token = std::fs::read_to_string(&settings.token_file).map_err(|e| {
        format!(
            "cannot read the own token {}: {e}",
            settings.token_file.display()
        )
    })?;
    let token = token.trim().to_owned();
    let own = own_identity(&token)?;
    // https (checked above) to warrant's URL only, trusting the hub's CA alone where it gives
    // one, the system's otherwise; one POST, not retried.
    let client = own_token_client(&warrant, ca.as_deref())
        .map_err(|e| format!("cannot set up the client for warrant at {warrant}: {e}"))?;
    Ok(Caller::Token {
        token,
        own,
        client,
        warrant,
    })
}

/// Runs the plugin as `config` says, for the call client-go describes in
/// `KUBERNETES_EXEC_INFO`: prints the ExecCredential on stdout. A failure's text (which may
/// quote warrant's answer or a member's profile) comes back with its control characters
/// escaped, so it stays the one line client-go shows.
pub async fn run(config: &Config) -> Result<(), Box<dyn Error>> {
    run_unescaped(config)
        .await
        .map_err(|e| escape_controls(&crate::causes(e.as_ref())).into())
}

/// The plugin's steps: what kubectl asked for, the audience, who asks and for which service
/// account, the proof key, then the cached token or a new one, printed for client-go.
async fn run_unescaped(settings: &Config) -> Result<(), Box<dyn Error>> {
    // 1. What client-go passed: the cluster and its exec extension.
    let info = match std::env::var("KUBERNETES_EXEC_INFO") {
        Ok(text) => exec_info(&text)?,
        Err(_) => {
            return Err("KUBERNETES_EXEC_INFO is not set: warrant credential is run by client-go (kubectl, a controller) from a kubeconfig's exec section; see warrant credential --help".into());
        }
    };
    let config = |key: &str| {
        info.config
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    // 2. The audience, anchored to the cluster (see `anchors`).
    let audience = anchors::audience(
        settings.audience.as_deref(),
        settings.allow_profile_audience,
        info.server.as_deref(),
        config("audience").as_deref(),
    )?;
    // 3. Who asks warrant, and for which service account.
    let caller = caller(settings, &config).await?;
    let warrant = caller.warrant().to_owned();
    let service_account = service_account(settings, config("serviceAccount"), &caller)?;
    let binding = caller.own().and_then(|own| own.binding.clone());
    // 4. The key the token is bound to, if any.
    let proof_key = proof_key(settings, &warrant, &service_account)?;
    // 5. A cached token that is still good.
    let key = cache::Key {
        warrant: warrant.clone(),
        service_account: service_account.to_string(),
        audience: audience.clone(),
        binding: binding
            .as_ref()
            .map(|b| b.uid.clone())
            .filter(|uid| !uid.is_empty()),
        expiration_seconds: settings.expiration_seconds,
        bound_key: proof_key.as_ref().map(|key| key.jkt().to_owned()),
    };
    let slot = cache_slot(settings, key).await;
    let now = warrant_clock::Clock::System.now();
    if let Some(entry) = slot.as_ref().and_then(|slot| slot.get(now)) {
        return print(&info.api_version, &entry.token, entry.expiration_timestamp);
    }
    // 6. A new one from warrant, kept for the next run.
    let spec = TokenRequestSpec {
        audiences: Some(vec![audience]),
        expiration_seconds: settings.expiration_seconds,
        bound_object_ref: binding,
    };
    let (minted, expires) = mint(&caller, &service_account, spec, proof_key.as_ref(), now).await?;
    if let Some(slot) = slot {
        let issued_at = issued_at(&minted).unwrap_or(now);
        slot.put(minted.clone(), issued_at, expires);
    }
    print(&info.api_version, &minted, expires)
}

/// The service account to mint for: `--service-account`, else the cluster's exec extension's
/// `serviceAccount`, else the caller's own (a warrant token's).
fn service_account(
    settings: &Config,
    configured: Option<String>,
    caller: &Caller,
) -> Result<ObjectName, Box<dyn Error>> {
    match (&settings.service_account, configured, caller.own()) {
        (Some(named), _, _) => Ok(named.clone()),
        (None, Some(text), _) => Ok(parse_object_name(&text)
            .map_err(|e| format!("serviceAccount in the cluster's exec extension: {e}"))?),
        (None, None, Some(own)) => Ok(own.service_account.clone()),
        (None, None, None) => Err("with --kubeconfig, name the service account to mint for: --service-account NAMESPACE/NAME, or serviceAccount in the cluster's exec extension".into()),
    }
}

/// The DPoP key the token is bound to (`--key-binding dpop`), made the first time. It lives
/// in the cache directory, also with --no-cache (which is about tokens): a key made anew on
/// every run would bind each token to a key nobody keeps.
fn proof_key(
    settings: &Config,
    warrant: &str,
    service_account: &ObjectName,
) -> Result<Option<dpop::ProofKey>, Box<dyn Error>> {
    // A ClusterProfile's additional-envs could set WARRANT_KEY_BINDING beside the hub's flag.
    anchors::agree_with_environment(
        "--key-binding",
        Some(settings.key_binding.as_str()),
        "WARRANT_KEY_BINDING",
    )?;
    match settings.key_binding {
        KeyBinding::None => Ok(None),
        KeyBinding::Dpop => {
            let dir = settings
                .cache_dir
                .clone()
                .or_else(cache::default_dir)
                .ok_or(dpop::ProofKeyError::NoDirectory)?;
            Ok(Some(dpop::ProofKey::load_or_create(
                &dir,
                warrant,
                &service_account.to_string(),
            )?))
        }
    }
}

/// The token cache's slot for `key`, locked for this run; none with `--no-cache`, without a
/// cache directory, or when the cache is refused (said once: a refused cache is only slower).
async fn cache_slot(settings: &Config, key: cache::Key) -> Option<cache::Slot> {
    if settings.no_cache {
        return None;
    }
    let dir = settings.cache_dir.clone().or_else(cache::default_dir)?;
    match cache::Slot::lock(&dir, key).await {
        Ok(slot) => Some(slot),
        Err(refused) => {
            if refused.is_suspicious() {
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                        "warrant: not using the token cache: {}; minting without it",
                        escape_controls(&refused.to_string())
                    );
                }
            }
            None
        }
    }
}

/// Asks warrant for a token (with a DPoP proof when bound to a key), within one bound on the
/// whole call (client-go waits for the plugin), and checks what came back: a token, an
/// expiry, and the binding asked for.
async fn mint(
    caller: &Caller,
    service_account: &ObjectName,
    spec: TokenRequestSpec,
    proof_key: Option<&dpop::ProofKey>,
    now: jiff::Timestamp,
) -> Result<(String, jiff::Timestamp), Box<dyn Error>> {
    let warrant = caller.warrant();
    let body = TokenRequest::new(spec);
    let proof = proof_key
        .map(|key| {
            let htu = format!("{warrant}{}", token_request_path(service_account));
            key.proof("POST", &htu, now)
        })
        .transpose()?;
    let answer = tokio::time::timeout(
        REQUEST_TIMEOUT,
        caller.request(service_account, &body, proof.as_deref()),
    )
    .await
    .map_err(|_| {
        format!(
            "warrant at {warrant} did not answer within {}s",
            REQUEST_TIMEOUT.as_secs()
        )
    })??;
    let TokenRequestStatus {
        token: minted,
        expiration_timestamp: expires,
    } = answer;
    if minted.is_empty() || expires.is_empty() {
        return Err(format!("warrant at {warrant} answered without a token").into());
    }
    if let Some(key) = proof_key {
        check_bound(&minted, key, warrant, service_account)?;
    }
    let expires: jiff::Timestamp = expires.parse().map_err(|e| {
        format!("warrant at {warrant} answered an unreadable expirationTimestamp: {e}")
    })?;
    Ok((minted, expires))
}

/// Prints the ExecCredential client-go reads.
fn print(api_version: &str, token: &str, expires: jiff::Timestamp) -> Result<(), Box<dyn Error>> {
    let credential = json!({
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "status": { "token": token, "expirationTimestamp": expires.to_string() },
    });
    #[allow(clippy::print_stdout)]
    {
        println!("{credential}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    /// A token (unsigned: the plugin reads, not verifies, what warrant just answered) with
    /// `cnf`.
    fn token_with(cnf: Option<Value>) -> String {
        let mut claims = json!({"iss": "https://w", "sub": "system:serviceaccount:demo:app",
                                "aud": ["member-1"], "iat": 1000, "exp": 4600});
        if let Some(cnf) = cnf {
            claims["cnf"] = cnf;
        }
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        format!("eyJhbGciOiJFUzI1NiJ9.{payload}.c2ln")
    }

    /// With binding on, only a token bound to the plugin's own key is taken: not one without
    /// cnf (a hub that ignored the proof), not one bound to another key.
    #[test]
    fn a_token_not_bound_to_the_plugins_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = dpop::ProofKey::load_or_create(dir.path(), "https://w", "demo/app").unwrap();
        let other = dpop::ProofKey::load_or_create(dir.path(), "https://w", "demo/web").unwrap();
        let account = ObjectName {
            namespace: "demo".into(),
            name: "app".into(),
        };
        let mine = token_with(Some(json!({"jkt": key.jkt()})));
        assert!(check_bound(&mine, &key, "https://w", &account).is_ok());

        for (token, found) in [
            (token_with(None), "absent".to_owned()),
            (
                token_with(Some(json!({"jkt": other.jkt()}))),
                other.jkt().to_owned(),
            ),
            (
                token_with(Some(json!({"x5t#S256": key.jkt()}))),
                "absent".to_owned(),
            ),
        ] {
            let error = check_bound(&token, &key, "https://w", &account).unwrap_err();
            assert!(matches!(error, CredentialError::NotBound { .. }), "{error}");
            let message = error.to_string();
            assert!(
                message.contains(&format!("its cnf.jkt is {found}")) && message.contains(key.jkt()),
                "{message}"
            );
            assert!(!message.contains(&token), "never the token: {message}");
        }
    }

    #[test]
    fn reads_what_kubectl_sends_in_both_versions() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/exec-credential"
        );
        for (file, version) in [
            (
                "kubernetes-exec-info-v1.json",
                "client.authentication.k8s.io/v1",
            ),
            (
                "kubernetes-exec-info-v1beta1.json",
                "client.authentication.k8s.io/v1beta1",
            ),
        ] {
            let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
            let info = exec_info(&text).unwrap();
            assert_eq!(info.api_version, version);
            assert_eq!(info.server.as_deref(), Some("https://127.0.0.1:6443"));
            assert_eq!(info.config["audience"], "member-1");
            assert_eq!(info.config["warrant"], "https://warrant.example:8443");
        }
        assert_eq!(
            exec_info(r#"{"apiVersion":"client.authentication.k8s.io/v2"}"#)
                .unwrap_err()
                .to_string(),
            "KUBERNETES_EXEC_INFO has apiVersion \"client.authentication.k8s.io/v2\"; warrant credential speaks client.authentication.k8s.io/v1 and client.authentication.k8s.io/v1beta1"
        );
    }
}
