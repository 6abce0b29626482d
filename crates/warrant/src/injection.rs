//! `warrant serve`'s token injection flags: the mutating webhook for pods at `/mutate/pods`
//! (docs/injection.md). Off unless `--injection-agent-image` is given; then the agent's image,
//! the URL it reaches warrant at and the CA it trusts are the server's choice, and each pod's
//! audiences and clouds its ServiceAccount's.

use std::error::Error;
use std::path::PathBuf;

use clap::Args;
use clap::builder::TypedValueParser as _;
use warrant_server::{
    AZURE_DEFAULT_AUTHORITY_HOST, AdmissionCallers, AdmissionLimits, AppState, InjectionSettings,
    TOKEN_AGENT_DEFAULT_AUDIENCE,
};
use warrant_watch::FileWatch;

/// The flags.
#[derive(Debug, Args)]
#[command(next_help_heading = "Token injection")]
pub(crate) struct InjectionArgs {
    /// Turn on the mutating webhook for pods (`/mutate/pods`): pods whose ServiceAccount
    /// carries warrant's annotations get the token agent, run from this image (warrant's own,
    /// the same release as this server; deploy/components/injection sets it from the
    /// Deployment's image).
    #[arg(
        long = "injection-agent-image",
        env = "WARRANT_INJECTION_AGENT_IMAGE",
        value_name = "IMAGE"
    )]
    pub(crate) agent_image: Option<String>,
    /// The URL the agent reaches warrant at from a pod, https (its Service:
    /// https://warrant.warrant.svc).
    #[arg(
        long = "injection-warrant-url",
        value_name = "URL",
        requires = "agent_image"
    )]
    pub(crate) warrant_url: Option<String>,
    /// The CA bundle (PEM) the agent verifies warrant's serving certificate with, passed to it
    /// in the pod spec (the serving Secret's ca.crt); re-read when it changes. Default: the
    /// system's roots.
    #[arg(
        long = "injection-ca-file",
        value_name = "PATH",
        requires = "agent_image"
    )]
    pub(crate) ca_file: Option<PathBuf>,
    /// `AZURE_AUTHORITY_HOST` for Azure's SDKs (another cloud's Entra ID, e.g.
    /// https://login.microsoftonline.us/).
    #[arg(
        long = "injection-azure-authority-host",
        value_name = "URL",
        default_value = AZURE_DEFAULT_AUTHORITY_HOST,
        requires = "agent_image"
    )]
    pub(crate) azure_authority_host: String,
    /// The Entra tenant of ServiceAccounts that name none (`azure.warrant.dev/tenant-id`), as
    /// Azure Workload Identity's webhook-wide tenant.
    #[arg(
        long = "injection-azure-tenant-id",
        value_name = "TENANT",
        requires = "agent_image"
    )]
    pub(crate) azure_tenant_id: Option<String>,
    /// `AWS_REGION` and `AWS_DEFAULT_REGION` for AWS's SDKs, as EKS's webhook sets them
    /// (`--aws-default-region`); a container that sets either keeps its own.
    #[arg(
        long = "injection-aws-region",
        value_name = "REGION",
        requires = "agent_image"
    )]
    pub(crate) aws_region: Option<String>,
    /// The audience of the pod token the agent proves itself with: projected for the agent
    /// with this audience, and reviewed for it (by warrant, or by kube-apiserver with
    /// `spec.audiences`), so the token is warrant's and never one kube-apiserver accepts. Give
    /// each warrant of a cluster its own. Not one of kube-apiserver's `--api-audiences`.
    #[arg(
        long = "token-agent-audience",
        value_name = "AUDIENCE",
        default_value = TOKEN_AGENT_DEFAULT_AUDIENCE,
        value_parser = agent_audience
    )]
    pub(crate) agent_audience: String,
    /// Answer only these client certificates' names (CN, from --client-ca-file): the identity
    /// kube-apiserver's AdmissionConfiguration kubeconfig gives it for this webhook. Every
    /// other caller is refused (401, 403). Token injection needs this or
    /// --injection-allow-anonymous (docs/injection.md, "Who may call").
    #[arg(
        long = "injection-allowed-names",
        value_name = "NAMES",
        value_delimiter = ',',
        requires = "agent_image"
    )]
    pub(crate) allowed_names: Vec<String>,
    /// Answer callers without a client certificate: anyone who reaches the port, from
    /// warrant's cache only (never a lookup at kube-apiserver). They learn which
    /// ServiceAccounts exist and read their warrant annotations (role ARNs, client IDs) in the
    /// patch. For clusters whose kube-apiserver cannot present a client certificate to
    /// webhooks (EKS, GKE, AKS); elsewhere use --injection-allowed-names. The variable takes
    /// true or false (an overlay turns the injection component's true off with it).
    // No clap `conflicts_with` or `requires`: a variable set to false counts as given for
    // them; `callers` checks the combination instead.
    #[arg(
        long = "injection-allow-anonymous",
        env = "WARRANT_INJECTION_ALLOW_ANONYMOUS"
    )]
    pub(crate) allow_anonymous: bool,
    /// The largest AdmissionReview read, in bytes (past it: 413).
    #[arg(
        long = "injection-max-review-bytes",
        value_name = "BYTES",
        default_value_t = AdmissionLimits::default().max_review_bytes,
        value_parser = clap::value_parser!(u32).range(1024..).map(|n| n as usize),
        requires = "agent_image"
    )]
    pub(crate) max_review_bytes: usize,
    /// The most containers, and the most init containers, of a pod the webhook reads (each
    /// list alone; past it: 413).
    #[arg(
        long = "injection-max-containers",
        value_name = "N",
        default_value_t = AdmissionLimits::default().max_containers,
        value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize),
        requires = "agent_image"
    )]
    pub(crate) max_containers: usize,
    /// The largest patch answered, in bytes (past it: 413).
    #[arg(
        long = "injection-max-patch-bytes",
        value_name = "BYTES",
        default_value_t = AdmissionLimits::default().max_patch_bytes,
        value_parser = clap::value_parser!(u32).range(1024..).map(|n| n as usize),
        requires = "agent_image"
    )]
    pub(crate) max_patch_bytes: usize,
    /// The most reviews this replica answers at once (one more: 429 at once).
    #[arg(
        long = "injection-max-reviews-in-flight",
        value_name = "N",
        default_value_t = AdmissionLimits::default().max_in_flight,
        value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize),
        requires = "agent_image"
    )]
    pub(crate) max_in_flight: usize,
}

/// An audience a projected token can carry: not empty, no control characters.
fn agent_audience(value: &str) -> Result<String, String> {
    if value.is_empty()
        || value.len() > warrant_token::MAX_AUDIENCE_BYTES
        || value.chars().any(char::is_control)
    {
        return Err(format!(
            "an audience is 1 to {} bytes without control characters",
            warrant_token::MAX_AUDIENCE_BYTES
        ));
    }
    Ok(value.to_owned())
}

/// Who the webhook answers, if injection is on: an explicit choice, never a default
/// (docs/injection.md, "Who may call"), checked with the other flags before anything is read.
/// Anonymous callers are announced in the log, with what they can learn.
pub(crate) fn callers(args: &InjectionArgs) -> Result<Option<AdmissionCallers>, Box<dyn Error>> {
    if args.agent_image.is_none() {
        if args.allow_anonymous {
            return Err("--injection-allow-anonymous is about token injection's webhook, which is off without --injection-agent-image".into());
        }
        return Ok(None);
    }
    if !args.allowed_names.is_empty() {
        if args.allow_anonymous {
            return Err(BOTH_CALLERS.into());
        }
        return Ok(Some(AdmissionCallers::ClientCertificates(
            args.allowed_names.clone(),
        )));
    }
    if !args.allow_anonymous {
        return Err(NO_CALLERS.into());
    }
    tracing::warn!(
        "token injection answers anonymous callers (--injection-allow-anonymous): anyone who can reach /mutate/pods learns whether a ServiceAccount exists and reads its warrant annotations (role ARNs, client and tenant IDs, audiences) in the patch it is answered; it never makes warrant look anything up at kube-apiserver. To answer kube-apiserver alone, give it a client certificate for the webhook and use --injection-allowed-names (docs/injection.md, \"Who may call\")"
    );
    Ok(Some(AdmissionCallers::Anonymous))
}

/// The refusal to start injection without saying who may call it.
const NO_CALLERS: &str = "--injection-agent-image needs to know who may call the webhook: --injection-allowed-names=NAME answers kube-apiserver's client certificate alone (given it by an AdmissionConfiguration kubeconfig), --injection-allow-anonymous (WARRANT_INJECTION_ALLOW_ANONYMOUS=true) answers anyone who reaches the port, from warrant's cache, and lets them read the warrant annotations of any ServiceAccount they name (docs/injection.md, \"Who may call\")";

/// The refusal of both ways at once.
const BOTH_CALLERS: &str = "--injection-allowed-names and --injection-allow-anonymous (or WARRANT_INJECTION_ALLOW_ANONYMOUS=true) contradict each other: the first answers kube-apiserver's client certificate alone, the second anyone; keep one (docs/injection.md, \"Who may call\")";

/// Turns token injection on in `state` if the flags ask for it; the returned watch (if any)
/// keeps the agent's CA bundle current and must be held while serving.
/// `callers` is what [`callers`] answered.
pub(crate) fn setup(
    args: &InjectionArgs,
    callers: Option<AdmissionCallers>,
    state: &AppState,
) -> Result<Option<FileWatch>, Box<dyn Error>> {
    let (Some(agent_image), Some(callers)) = (&args.agent_image, callers) else {
        return Ok(None);
    };
    let warrant_url = args
        .warrant_url
        .as_deref()
        .ok_or("--injection-agent-image needs --injection-warrant-url: the URL the agent reaches warrant at from a pod")?;
    let warrant_url =
        warrant_client::endpoint::warrant_url(warrant_url, "--injection-warrant-url")?;
    let settings = InjectionSettings {
        agent_image: agent_image.clone(),
        warrant_url,
        ca_pem: None,
        agent_audience: args.agent_audience.clone(),
        azure_authority_host: args.azure_authority_host.clone(),
        azure_tenant_id: args.azure_tenant_id.clone(),
        aws_region: args.aws_region.clone(),
        callers,
        limits: AdmissionLimits {
            max_review_bytes: args.max_review_bytes,
            max_containers: args.max_containers,
            max_patch_bytes: args.max_patch_bytes,
            max_in_flight: args.max_in_flight,
        },
    };
    let Some(ca_file) = args.ca_file.clone() else {
        state.set_injection(settings);
        return Ok(None);
    };
    // At start a bundle that does not load is a configuration error; later, a bad write is
    // logged and the last good bundle stays.
    let load = move |ca_file: &std::path::Path| -> Result<String, Box<dyn Error>> {
        let pem = std::fs::read_to_string(ca_file)
            .map_err(|e| format!("--injection-ca-file {}: {e}", ca_file.display()))?;
        warrant_client::endpoint::ca_bundle(pem.as_bytes(), &ca_file.display().to_string())?;
        Ok(pem)
    };
    state.set_injection(InjectionSettings {
        ca_pem: Some(load(&ca_file)?),
        ..settings.clone()
    });
    let watched = state.clone();
    let path = ca_file.clone();
    let watch = warrant_watch::watch_files(&[ca_file], move || match load(&path) {
        Ok(pem) => {
            watched.set_injection(InjectionSettings {
                ca_pem: Some(pem),
                ..settings.clone()
            });
            tracing::info!(file = %path.display(), "reloaded the token agent's CA bundle");
        }
        Err(error) => {
            tracing::error!(%error, "the token agent's CA bundle did not load; pods get the last good one");
        }
    })?;
    Ok(Some(watch))
}
