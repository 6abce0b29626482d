//! Every name token injection reads or writes, in one file (as Azure Workload Identity's
//! `pkg/webhook/consts.go` keeps its webhook's): the ServiceAccount annotations, the
//! variables each SDK reads, the defaults, and the paths, volumes and container the patch
//! adds. [`plan`](super::plan) arranges the annotations and variables one cloud a row; the
//! patch and the tests read the rest from here.
//!
//! The annotations mirror the webhooks workloads move from, so moving changes one prefix:
//! `eks.amazonaws.com/…` (amazon-eks-pod-identity-webhook) becomes `aws.warrant.dev/…`,
//! `azure.workload.identity/…` (Azure Workload Identity) becomes `azure.warrant.dev/…`, and
//! `cloud.google.com/…` (pfnet-research's gcp-workload-identity-federation-webhook) becomes
//! `gcp.warrant.dev/…`. docs/injection.md has the table. The variables are the SDKs' own, as
//! EKS's and Azure's webhooks set them.

/// A generic token for this audience (`WARRANT_IDENTITY_TOKEN_FILE`).
pub(crate) const AUDIENCE: &str = "warrant.dev/audience";
/// The lifetime of the generic token.
pub(crate) const TOKEN_EXPIRATION: &str = "warrant.dev/token-expiration";
/// The IAM role (`eks.amazonaws.com/role-arn`): turns AWS on.
pub(crate) const AWS_ROLE_ARN: &str = "aws.warrant.dev/role-arn";
/// The AWS token's audience (`eks.amazonaws.com/audience`).
pub(crate) const AWS_AUDIENCE: &str = "aws.warrant.dev/audience";
/// `AWS_STS_REGIONAL_ENDPOINTS=regional` (`eks.amazonaws.com/sts-regional-endpoints`).
pub(crate) const AWS_STS_REGIONAL_ENDPOINTS: &str = "aws.warrant.dev/sts-regional-endpoints";
/// The AWS token's lifetime (`eks.amazonaws.com/token-expiration`).
pub(crate) const AWS_TOKEN_EXPIRATION: &str = "aws.warrant.dev/token-expiration";
/// The Entra application or managed identity (`azure.workload.identity/client-id`): turns
/// Azure on.
pub(crate) const AZURE_CLIENT_ID: &str = "azure.warrant.dev/client-id";
/// The Entra tenant (`azure.workload.identity/tenant-id`).
pub(crate) const AZURE_TENANT_ID: &str = "azure.warrant.dev/tenant-id";
/// The Azure token's audience (Azure Workload Identity sets it webhook-wide, not per account).
pub(crate) const AZURE_AUDIENCE: &str = "azure.warrant.dev/audience";
/// The Azure token's lifetime (`azure.workload.identity/service-account-token-expiration`).
pub(crate) const AZURE_TOKEN_EXPIRATION: &str =
    "azure.warrant.dev/service-account-token-expiration";
/// The workload identity pool provider (`cloud.google.com/workload-identity-provider`): turns
/// Google on.
pub(crate) const GCP_PROVIDER: &str = "gcp.warrant.dev/workload-identity-provider";
/// The Google service account to impersonate (`cloud.google.com/service-account-email`).
pub(crate) const GCP_SERVICE_ACCOUNT: &str = "gcp.warrant.dev/service-account-email";
/// The Google token's audience (`cloud.google.com/audience`).
pub(crate) const GCP_AUDIENCE: &str = "gcp.warrant.dev/audience";
/// The Google token's lifetime (`cloud.google.com/token-expiration`).
pub(crate) const GCP_TOKEN_EXPIRATION: &str = "gcp.warrant.dev/token-expiration";
/// The pod annotation that holds Google's credential configuration, which a downward API
/// volume makes the file `GOOGLE_APPLICATION_CREDENTIALS` names (as pfnet-research's webhook
/// does with `cloud.google.com/external-credentials-json`).
pub(crate) const GCP_CREDENTIALS: &str = "gcp.warrant.dev/external-credentials-json";

/// The per-cloud annotation domains, where a key token injection does not read is a typo.
pub(crate) const AWS_DOMAIN: &str = "aws.warrant.dev/";
/// Azure's annotation domain.
pub(crate) const AZURE_DOMAIN: &str = "azure.warrant.dev/";
/// Google's annotation domain.
pub(crate) const GCP_DOMAIN: &str = "gcp.warrant.dev/";

/// The variables the containers get: each SDK's own names.
pub(crate) mod var {
    /// The generic token's file.
    pub(crate) const WARRANT_IDENTITY_TOKEN_FILE: &str = "WARRANT_IDENTITY_TOKEN_FILE";
    /// The IAM role AWS's SDKs assume with the token.
    pub(crate) const AWS_ROLE_ARN: &str = "AWS_ROLE_ARN";
    /// The AWS token's file.
    pub(crate) const AWS_WEB_IDENTITY_TOKEN_FILE: &str = "AWS_WEB_IDENTITY_TOKEN_FILE";
    /// The region, from the server's settings.
    pub(crate) const AWS_REGION: &str = "AWS_REGION";
    /// The region again, as older SDKs read it.
    pub(crate) const AWS_DEFAULT_REGION: &str = "AWS_DEFAULT_REGION";
    /// `regional`: STS's regional endpoints.
    pub(crate) const AWS_STS_REGIONAL_ENDPOINTS: &str = "AWS_STS_REGIONAL_ENDPOINTS";
    /// The Entra application or managed identity.
    pub(crate) const AZURE_CLIENT_ID: &str = "AZURE_CLIENT_ID";
    /// The Entra tenant.
    pub(crate) const AZURE_TENANT_ID: &str = "AZURE_TENANT_ID";
    /// The Azure token's file.
    pub(crate) const AZURE_FEDERATED_TOKEN_FILE: &str = "AZURE_FEDERATED_TOKEN_FILE";
    /// Entra ID's authority, from the server's settings.
    pub(crate) const AZURE_AUTHORITY_HOST: &str = "AZURE_AUTHORITY_HOST";
    /// Google's credential configuration file.
    pub(crate) const GOOGLE_APPLICATION_CREDENTIALS: &str = "GOOGLE_APPLICATION_CREDENTIALS";
}

/// AWS's audience for `AssumeRoleWithWebIdentity`, as EKS's webhook defaults it.
pub(crate) const AWS_DEFAULT_AUDIENCE: &str = "sts.amazonaws.com";
/// Entra ID's token exchange audience, as Azure Workload Identity defaults it.
pub(crate) const AZURE_DEFAULT_AUDIENCE: &str = "api://AzureADTokenExchange";
/// Entra ID's public cloud authority (Azure Workload Identity's default `AZURE_AUTHORITY_HOST`).
pub const AZURE_DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com/";
/// The value of `AWS_STS_REGIONAL_ENDPOINTS` that [`AWS_STS_REGIONAL_ENDPOINTS`] turns on.
pub(crate) const AWS_STS_REGIONAL: &str = "regional";

/// The audience of the pod token the agent proves itself to warrant with (the default of
/// `--token-agent-audience`): warrant's, and none kube-apiserver accepts, so the token is
/// useless against the cluster's API.
pub const TOKEN_AGENT_DEFAULT_AUDIENCE: &str = "warrant.dev/token-agent";

/// Where the agent writes the tokens; each consumer container mounts it read-only.
pub(crate) const TOKENS_DIR: &str = "/var/run/secrets/warrant.dev/tokens";
/// Where the agent reads the pod's own kube token.
pub(crate) const KUBE_TOKEN_DIR: &str = "/var/run/secrets/warrant.dev/kube";
/// Where Google's credential configuration is mounted.
pub(crate) const GOOGLE_DIR: &str = "/var/run/secrets/warrant.dev/google";
/// Its file name there.
pub(crate) const GOOGLE_FILE: &str = "credentials.json";

/// The agent's container name: reserved.
pub(crate) const AGENT: &str = "warrant-token-agent";
/// The volume the agent writes the tokens to (memory-backed, the pod's own).
pub(crate) const TOKENS_VOLUME: &str = "warrant-tokens";
/// The pod's own kube token, for the agent alone.
pub(crate) const KUBE_TOKEN_VOLUME: &str = "warrant-kube-token";
/// Google's credential configuration, from the pod's annotation.
pub(crate) const GOOGLE_VOLUME: &str = "warrant-google-credentials";
