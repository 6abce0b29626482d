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

mod anchors;
mod cache;

use std::error::Error;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use crate::cli::{CredentialArgs, ObjectName, parse_object_name};

/// How long the TokenRequest to warrant may take, connecting included.
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

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

fn exec_info(text: &str) -> Result<ExecInfo, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("KUBERNETES_EXEC_INFO is not JSON: {e}"))?;
    let api_version = value
        .pointer("/apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !API_VERSIONS.contains(&api_version.as_str()) {
        return Err(format!(
            "KUBERNETES_EXEC_INFO has apiVersion {api_version:?}; warrant credential speaks {}",
            API_VERSIONS.join(" and ")
        ));
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

/// What the own token says of its holder: service account and binding.
#[derive(Clone)]
struct Own {
    service_account: ObjectName,
    binding: Option<Value>,
}

/// A JWT's claims, read, not verified (the own token is warrant's or kube-apiserver's to
/// verify; a minted one was just received from warrant).
fn claims_of(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    let json = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&json).ok()
}

fn own_identity(token: &str) -> Result<Own, String> {
    let claims =
        claims_of(token).ok_or_else(|| "the own token is not a service-account JWT".to_owned())?;
    let k = claims.get("kubernetes.io").cloned().unwrap_or_default();
    let (Some(namespace), Some(name)) = (
        k.pointer("/namespace").and_then(Value::as_str),
        k.pointer("/serviceaccount/name").and_then(Value::as_str),
    ) else {
        return Err(
            "the own token names no service account (kubernetes.io claims): give --service-account"
                .into(),
        );
    };
    let binding = [("pod", "Pod"), ("secret", "Secret"), ("node", "Node")]
        .into_iter()
        .find_map(|(claim, kind)| {
            let bound = k.get(claim)?.as_object()?;
            // A pod-bound token names its node too: the pod is the binding.
            Some(json!({
                "kind": kind,
                "apiVersion": "v1",
                "name": bound.get("name")?,
                "uid": bound.get("uid")?,
            }))
        });
    Ok(Own {
        service_account: ObjectName {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        binding,
    })
}

/// How the plugin proves who it is to warrant, and the client that calls it.
enum Caller {
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
    fn warrant(&self) -> &str {
        match self {
            Caller::Token { warrant, .. } | Caller::Kubeconfig { warrant, .. } => warrant,
        }
    }

    fn own(&self) -> Option<&Own> {
        match self {
            Caller::Token { own, .. } => Some(own),
            Caller::Kubeconfig { .. } => None,
        }
    }

    /// Sends the TokenRequest for `account`; the answer's body, or the failure as one
    /// sentence.
    async fn request(&self, account: &ObjectName, body: &Value) -> Result<Value, String> {
        let warrant = self.warrant();
        let path = format!(
            "/api/v1/namespaces/{}/serviceaccounts/{}/token",
            account.namespace, account.name
        );
        let mut request = http::Request::post(&path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json");
        let client = match self {
            Caller::Token { token, client, .. } => {
                // kube's client holds no credential of its own here: the own token goes in
                // this one request, marked sensitive so no debug output shows it.
                let mut bearer = http::HeaderValue::try_from(format!("Bearer {token}"))
                    .map_err(|_| "the own token holds characters a header cannot carry")?;
                bearer.set_sensitive(true);
                request = request.header(http::header::AUTHORIZATION, bearer);
                client
            }
            Caller::Kubeconfig { client, .. } => client,
        };
        let request = request
            .body(::kube::client::Body::from(body.to_string().into_bytes()))
            .map_err(|e| e.to_string())?;
        let response = client
            .send(request)
            .await
            .map_err(|e| format!("cannot reach warrant at {warrant}: {}", cause(&e)))?;
        let status = response.status();
        // kube's client follows no redirect; nor does the plugin: the token goes to the hub's
        // warrant and nowhere else.
        if status.is_redirection() {
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
            return Err(format!(
                "warrant at {warrant} answered {status} (a redirect to {}), which the plugin does not follow: give the URL warrant serves at",
                location.as_deref().unwrap_or("nowhere")
            ));
        }
        let answer = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("warrant at {warrant} answered unreadably: {}", cause(&e)))?
            .to_bytes();
        if status.is_success() {
            return serde_json::from_slice(&answer)
                .map_err(|e| format!("warrant at {warrant} answered with no JSON object: {e}"));
        }
        let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        let message = answer
            .pointer("/message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        Err(refused(warrant, account, status.as_u16(), message))
    }
}

/// kube's client for `config`, without the request tracing of `kube::Client::try_from`, which
/// logs each failed request at ERROR: a second line beside the plugin's own on the stderr
/// client-go shows. The layers are kube's own (`ConfigExt`): the base URI (every request goes
/// to `config`'s URL, whatever its path), the credential (a kubeconfig's token, exec plugin or
/// refresh), extra headers; TLS is kube's connector (the CA alone where `config` names one, a
/// client certificate). Like kube's, it follows no redirect; unlike kube's, it retries nothing:
/// one POST, bounded by [`REQUEST_TIMEOUT`].
fn quiet_client(config: ::kube::Config) -> Result<::kube::Client, ::kube::Error> {
    use ::kube::client::ConfigExt as _;

    let https = config.rustls_https_connector()?;
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

/// warrant's refusal of a TokenRequest, as the line the plugin prints.
fn refused(warrant: &str, account: &ObjectName, code: u16, message: &str) -> String {
    format!("warrant at {warrant} refused a token for {account} ({code}): {message}")
}

/// Who calls warrant, from the hub's flags: a kubeconfig, else the own token file. The
/// cluster's `config` (a member's profile) is only checked against them.
async fn caller(
    args: &CredentialArgs,
    config: &dyn Fn(&str) -> Option<String>,
) -> Result<Caller, Box<dyn Error>> {
    if let Some(path) = &args.kubeconfig {
        let file = ::kube::config::Kubeconfig::read_from(path)
            .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
        let kube_config = ::kube::Config::from_custom_kubeconfig(
            file,
            &::kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
        let from = format!("the server of kubeconfig {}", path.display());
        let warrant = anchors::warrant_url(&kube_config.cluster_url.to_string(), &from)?;
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
        let client = quiet_client(kube_config)
            .map_err(|e| format!("cannot use kubeconfig {}: {e}", path.display()))?;
        return Ok(Caller::Kubeconfig { client, warrant });
    }
    anchors::agree_with_environment("--warrant-url", args.warrant_url.as_deref(), "WARRANT_URL")?;
    let warrant =
        args.warrant_url
            .as_deref()
            .ok_or_else(|| anchors::AnchorError::NoWarrantUrl {
                profile: config("warrant"),
            })?;
    let from = "--warrant-url, WARRANT_URL";
    let warrant = anchors::warrant_url(warrant, from)?;
    anchors::profile_warrant(config("warrant").as_deref(), &warrant, from)?;
    let ca_file = args.warrant_ca_file.as_deref();
    anchors::agree_with_environment(
        "--warrant-ca-file",
        ca_file.and_then(std::path::Path::to_str),
        "WARRANT_CA_FILE",
    )?;
    let ca = ca_file.map(anchors::hub_ca).transpose()?;
    let ca_from = ca_file.map(|path| path.display().to_string());
    anchors::profile_ca(
        config("warrantCA").as_deref(),
        ca.as_deref().zip(ca_from.as_deref()),
    )?;
    let token = std::fs::read_to_string(&args.token_file).map_err(|e| {
        format!(
            "cannot read the own token {}: {e}",
            args.token_file.display()
        )
    })?;
    let token = token.trim().to_owned();
    let own = own_identity(&token)?;
    // https (checked above) to warrant's URL only, trusting the hub's CA alone where it gives
    // one (kube's client then builds its roots from these certificates and nothing else), the
    // system's otherwise; one POST, not retried.
    let mut kube_config = ::kube::Config::new(warrant.parse()?);
    kube_config.root_cert = ca;
    let client = quiet_client(kube_config)
        .map_err(|e| format!("cannot set up the client for warrant at {warrant}: {e}"))?;
    Ok(Caller::Token {
        token,
        own,
        client,
        warrant,
    })
}

/// Runs the plugin: prints the ExecCredential on stdout. A failure's text (which may quote
/// warrant's answer or a member's profile) comes back with its control characters escaped, so
/// it stays the one line client-go shows.
pub(crate) async fn run(args: &CredentialArgs) -> Result<(), Box<dyn Error>> {
    run_unescaped(args)
        .await
        .map_err(|e| escape_controls(&crate::causes(e.as_ref())).into())
}

/// `text` with control characters (and the bidirectional overrides, which reorder what a
/// terminal shows) written as escapes: text from warrant or a profile cannot move the cursor,
/// colour the terminal or start a line that looks like the plugin's own.
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

async fn run_unescaped(args: &CredentialArgs) -> Result<(), Box<dyn Error>> {
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
    let audience = anchors::audience(
        args.audience.as_deref(),
        args.allow_profile_audience,
        info.server.as_deref(),
        config("audience").as_deref(),
    )?;
    let caller = caller(args, &config).await?;
    let warrant = caller.warrant().to_owned();
    let service_account = match (
        &args.service_account,
        config("serviceAccount"),
        caller.own(),
    ) {
        (Some(named), _, _) => named.clone(),
        (None, Some(text), _) => parse_object_name(&text)
            .map_err(|e| format!("serviceAccount in the cluster's exec extension: {e}"))?,
        (None, None, Some(own)) => own.service_account.clone(),
        (None, None, None) => {
            return Err("with --kubeconfig, name the service account to mint for: --service-account NAMESPACE/NAME, or serviceAccount in the cluster's exec extension".into());
        }
    };
    let binding = caller.own().and_then(|own| own.binding.clone());

    let key = cache::Key {
        warrant: warrant.clone(),
        service_account: service_account.to_string(),
        audience: audience.clone(),
        binding: binding
            .as_ref()
            .and_then(|b| b.get("uid"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        expiration_seconds: args.expiration,
    };
    let slot = if args.no_cache {
        None
    } else {
        args.cache_dir.clone().or_else(cache::default_dir)
    };
    let slot = match slot {
        Some(dir) => match cache::Slot::lock(&dir, key).await {
            Ok(slot) => Some(slot),
            Err(refused) => {
                if refused.is_suspicious() {
                    // Said once per run, and the run goes on: a refused cache is only slower.
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
        },
        None => None,
    };
    let now = warrant_clock::Clock::System.now();
    if let Some(entry) = slot.as_ref().and_then(|slot| slot.get(now)) {
        return print(&info.api_version, &entry.token, entry.expiration_timestamp);
    }

    let mut spec = serde_json::Map::new();
    spec.insert("audiences".into(), json!([audience]));
    if let Some(seconds) = args.expiration {
        spec.insert("expirationSeconds".into(), json!(seconds));
    }
    if let Some(binding) = binding {
        spec.insert("boundObjectRef".into(), binding);
    }
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": spec,
    });
    // One bound on the whole call, whichever way it goes: client-go waits for the plugin.
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, caller.request(&service_account, &body))
        .await
        .map_err(|_| {
            format!(
                "warrant at {warrant} did not answer within {}s",
                REQUEST_TIMEOUT.as_secs()
            )
        })??;
    let (Some(minted), Some(expires)) = (
        answer.pointer("/status/token").and_then(Value::as_str),
        answer
            .pointer("/status/expirationTimestamp")
            .and_then(Value::as_str),
    ) else {
        return Err(format!("warrant at {warrant} answered without a token").into());
    };
    let expires: jiff::Timestamp = expires.parse().map_err(|e| {
        format!("warrant at {warrant} answered an unreadable expirationTimestamp: {e}")
    })?;
    if let Some(slot) = slot {
        let issued_at = issued_at(minted).unwrap_or(now);
        slot.put(minted.to_owned(), issued_at, expires);
    }
    print(&info.api_version, minted, expires)
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

/// A token's `iat` (it is warrant's own, just received: read, not verified).
fn issued_at(token: &str) -> Option<jiff::Timestamp> {
    jiff::Timestamp::from_second(claims_of(token)?.get("iat")?.as_i64()?).ok()
}

/// The innermost cause of a request failure, which says what went wrong (refused, certificate).
fn cause(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text = inner.to_string();
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(
            exec_info(r#"{"apiVersion":"client.authentication.k8s.io/v2"}"#)
                .unwrap_err()
                .contains("warrant credential speaks")
        );
    }
}
