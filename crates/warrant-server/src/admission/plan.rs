//! What a pod gets, read from its ServiceAccount's annotations: the tokens the agent keeps (a
//! file and an audience each), their lifetime, the variables each SDK reads, and Google's
//! credential configuration. Pure: the annotations and the server's settings in, a [`Plan`]
//! or a [`Refusal`] naming the annotation out.
//!
//! The annotations mirror the webhooks workloads move from, so moving changes one prefix:
//! `eks.amazonaws.com/…` (amazon-eks-pod-identity-webhook) becomes `aws.warrant.dev/…`,
//! `azure.workload.identity/…` (Azure Workload Identity) becomes `azure.warrant.dev/…`, and
//! `cloud.google.com/…` (pfnet-research's gcp-workload-identity-federation-webhook) becomes
//! `gcp.warrant.dev/…`. docs/injection.md has the table.

use serde_json::{Value, json};
// The agent's tokens live kube's default for a TokenRequest (also Azure Workload Identity's)
// unless an annotation asks for another.
use warrant_token::{
    DEFAULT_EXPIRATION_SECONDS, MAX_EXPIRATION_SECONDS, validate_expiration_seconds,
};

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

/// Every ServiceAccount annotation token injection reads, in its domains.
const KNOWN: [&str; 14] = [
    AUDIENCE,
    TOKEN_EXPIRATION,
    AWS_ROLE_ARN,
    AWS_AUDIENCE,
    AWS_STS_REGIONAL_ENDPOINTS,
    AWS_TOKEN_EXPIRATION,
    AZURE_CLIENT_ID,
    AZURE_TENANT_ID,
    AZURE_AUDIENCE,
    AZURE_TOKEN_EXPIRATION,
    GCP_PROVIDER,
    GCP_SERVICE_ACCOUNT,
    GCP_AUDIENCE,
    GCP_TOKEN_EXPIRATION,
];

/// The per-cloud domains, where a key token injection does not read is a typo, refused.
const CLOUD_DOMAINS: [&str; 3] = ["aws.warrant.dev/", "azure.warrant.dev/", "gcp.warrant.dev/"];

/// AWS's audience for `AssumeRoleWithWebIdentity`, as EKS's webhook defaults it.
pub(crate) const AWS_DEFAULT_AUDIENCE: &str = "sts.amazonaws.com";
/// Entra ID's token exchange audience, as Azure Workload Identity defaults it.
pub(crate) const AZURE_DEFAULT_AUDIENCE: &str = "api://AzureADTokenExchange";
/// Entra ID's public cloud authority (Azure Workload Identity's default `AZURE_AUTHORITY_HOST`).
pub const AZURE_DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com/";

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

/// What the server contributes to every pod's plan (`warrant serve --injection-…`).
#[derive(Debug, Clone, Default)]
pub struct InjectionSettings {
    /// The agent's image: warrant's own.
    pub agent_image: String,
    /// The URL the agent reaches warrant at (https).
    pub warrant_url: String,
    /// The CA bundle (PEM) the agent trusts warrant's serving certificate with, if not the
    /// system's roots.
    pub ca_pem: Option<String>,
    /// The audience of the pod token projected for the agent (`--token-agent-audience`), which
    /// warrant's authentication reviews that token for.
    pub agent_audience: String,
    /// `AZURE_AUTHORITY_HOST`.
    pub azure_authority_host: String,
    /// `AZURE_TENANT_ID` where a ServiceAccount names none.
    pub azure_tenant_id: Option<String>,
    /// `AWS_REGION` and `AWS_DEFAULT_REGION`, if set.
    pub aws_region: Option<String>,
    /// Who the webhook answers: kube-apiserver's client certificates by name, or anyone, from
    /// the cache only. The default answers no one.
    pub callers: super::AdmissionCallers,
    /// What one review may cost, and how many are answered at once.
    pub limits: super::limits::AdmissionLimits,
}

/// Why a pod is refused: the message names the annotation (or the conflict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// 400 for a malformed annotation or a conflicting pod, 403 for a token the policy does
    /// not allow.
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn bad(message: String) -> Self {
        Refusal {
            code: 400,
            reason: "BadRequest",
            message,
        }
    }

    pub(crate) fn forbidden(message: String) -> Self {
        Refusal {
            code: 403,
            reason: "Forbidden",
            message,
        }
    }
}

/// One token the agent keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// Its file name in [`TOKENS_DIR`].
    pub(crate) file: &'static str,
    pub(crate) audience: String,
    /// The annotation the audience came from, or the one that turned the cloud on (for a
    /// default audience), for messages.
    pub(crate) from: &'static str,
}

impl Token {
    pub(crate) fn path(&self) -> String {
        format!("{TOKENS_DIR}/{}", self.file)
    }
}

/// Variables added together or not at all: a container that sets any of them itself keeps
/// its own and gets none of the group (its choice wins, and nothing mixes its identity with
/// warrant's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvGroup {
    /// `AWS`, `Azure`, `Google`, `warrant`: for warnings.
    pub(crate) cloud: &'static str,
    /// Whether skipping the group leaves the container without warrant's identity (worth a
    /// warning), rather than without a setting it chose itself (a region).
    pub(crate) identity: bool,
    pub(crate) vars: Vec<(&'static str, String)>,
}

/// Everything a pod gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) tokens: Vec<Token>,
    /// One lifetime for the agent's tokens: the shortest an annotation asks for.
    pub(crate) expiration_seconds: i64,
    pub(crate) groups: Vec<EnvGroup>,
    /// Google's credential configuration (JSON), when Google is on.
    pub(crate) google_credentials: Option<String>,
}

/// The plan for a ServiceAccount's `annotations` (warrant's only, as the cache keeps them):
/// `None` when it carries none that turn injection on.
pub(crate) fn plan(
    annotations: &[(String, String)],
    settings: &InjectionSettings,
) -> Result<Option<Plan>, Refusal> {
    let get = |key: &str| {
        annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if let Some((key, _)) = annotations.iter().find(|(key, _)| {
        CLOUD_DOMAINS.iter().any(|d| key.starts_with(d)) && !KNOWN.contains(&key.as_str())
    }) {
        return Err(Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is not one warrant reads (a typo?): see docs/injection.md for the annotations"
        )));
    }
    let mut tokens = Vec::new();
    let mut groups = Vec::new();
    let mut expirations = Vec::new();
    let mut google_credentials = None;

    if let Some(audience) = get(AUDIENCE) {
        tokens.push(Token {
            file: "token",
            audience: audience_value(AUDIENCE, audience)?,
            from: AUDIENCE,
        });
        groups.push(EnvGroup {
            cloud: "warrant",
            identity: true,
            vars: vec![("WARRANT_IDENTITY_TOKEN_FILE", format!("{TOKENS_DIR}/token"))],
        });
        expirations.push(expiration(TOKEN_EXPIRATION, get(TOKEN_EXPIRATION))?);
    } else {
        stray(&get, TOKEN_EXPIRATION, AUDIENCE)?;
    }

    match get(AWS_ROLE_ARN) {
        Some(arn) => {
            check_role_arn(arn)?;
            let token = cloud_token(
                "aws-token",
                (AWS_AUDIENCE, get(AWS_AUDIENCE)),
                AWS_DEFAULT_AUDIENCE.to_owned(),
                AWS_ROLE_ARN,
            )?;
            groups.push(EnvGroup {
                cloud: "AWS",
                identity: true,
                vars: vec![
                    ("AWS_ROLE_ARN", arn.to_owned()),
                    ("AWS_WEB_IDENTITY_TOKEN_FILE", token.path()),
                ],
            });
            if let Some(region) = &settings.aws_region {
                groups.push(EnvGroup {
                    cloud: "AWS",
                    identity: false,
                    vars: vec![
                        ("AWS_REGION", region.clone()),
                        ("AWS_DEFAULT_REGION", region.clone()),
                    ],
                });
            }
            if let Some(value) = get(AWS_STS_REGIONAL_ENDPOINTS)
                && go_bool(AWS_STS_REGIONAL_ENDPOINTS, value)?
            {
                groups.push(EnvGroup {
                    cloud: "AWS",
                    identity: false,
                    vars: vec![("AWS_STS_REGIONAL_ENDPOINTS", "regional".to_owned())],
                });
            }
            expirations.push(expiration(AWS_TOKEN_EXPIRATION, get(AWS_TOKEN_EXPIRATION))?);
            tokens.push(token);
        }
        None => {
            for key in [
                AWS_AUDIENCE,
                AWS_STS_REGIONAL_ENDPOINTS,
                AWS_TOKEN_EXPIRATION,
            ] {
                stray(&get, key, AWS_ROLE_ARN)?;
            }
        }
    }

    match get(AZURE_CLIENT_ID) {
        Some(client_id) => {
            if !is_uuid(client_id) {
                return Err(Refusal::bad(format!(
                    "the ServiceAccount's annotation {AZURE_CLIENT_ID} is {}, not a UUID (an Entra application's or managed identity's client ID)",
                    warrant_token::quote_value(client_id)
                )));
            }
            let tenant = match (get(AZURE_TENANT_ID), &settings.azure_tenant_id) {
                (Some(tenant), _) => tenant.to_owned(),
                (None, Some(tenant)) => tenant.clone(),
                (None, None) => {
                    return Err(Refusal::bad(format!(
                        "the ServiceAccount has {AZURE_CLIENT_ID} but no {AZURE_TENANT_ID}, and this warrant has no default tenant (--injection-azure-tenant-id)"
                    )));
                }
            };
            if !is_tenant(&tenant) {
                return Err(Refusal::bad(format!(
                    "the ServiceAccount's annotation {AZURE_TENANT_ID} is {}, not a tenant ID (a UUID) or a tenant's domain name",
                    warrant_token::quote_value(&tenant)
                )));
            }
            let token = cloud_token(
                "azure-token",
                (AZURE_AUDIENCE, get(AZURE_AUDIENCE)),
                AZURE_DEFAULT_AUDIENCE.to_owned(),
                AZURE_CLIENT_ID,
            )?;
            groups.push(EnvGroup {
                cloud: "Azure",
                identity: true,
                vars: vec![
                    ("AZURE_CLIENT_ID", client_id.to_owned()),
                    ("AZURE_TENANT_ID", tenant),
                    ("AZURE_FEDERATED_TOKEN_FILE", token.path()),
                ],
            });
            groups.push(EnvGroup {
                cloud: "Azure",
                identity: false,
                vars: vec![(
                    "AZURE_AUTHORITY_HOST",
                    settings.azure_authority_host.clone(),
                )],
            });
            expirations.push(expiration(
                AZURE_TOKEN_EXPIRATION,
                get(AZURE_TOKEN_EXPIRATION),
            )?);
            tokens.push(token);
        }
        None => {
            for key in [AZURE_TENANT_ID, AZURE_AUDIENCE, AZURE_TOKEN_EXPIRATION] {
                stray(&get, key, AZURE_CLIENT_ID)?;
            }
        }
    }

    match get(GCP_PROVIDER) {
        Some(provider) => {
            let provider = provider_name(provider)?;
            let token = cloud_token(
                "google-token",
                (GCP_AUDIENCE, get(GCP_AUDIENCE)),
                // The provider's default allowed audience: its full name, with https.
                format!("https://iam.googleapis.com/{provider}"),
                GCP_PROVIDER,
            )?;
            let email = get(GCP_SERVICE_ACCOUNT)
                .map(|email| {
                    if is_email(email) {
                        Ok(email)
                    } else {
                        Err(Refusal::bad(format!(
                            "the ServiceAccount's annotation {GCP_SERVICE_ACCOUNT} is {}, not a service account's email address",
                            warrant_token::quote_value(email)
                        )))
                    }
                })
                .transpose()?;
            google_credentials = Some(google_credentials_json(provider, email, &token.path()));
            groups.push(EnvGroup {
                cloud: "Google",
                identity: true,
                vars: vec![(
                    "GOOGLE_APPLICATION_CREDENTIALS",
                    format!("{GOOGLE_DIR}/{GOOGLE_FILE}"),
                )],
            });
            expirations.push(expiration(GCP_TOKEN_EXPIRATION, get(GCP_TOKEN_EXPIRATION))?);
            tokens.push(token);
        }
        None => {
            for key in [GCP_SERVICE_ACCOUNT, GCP_AUDIENCE, GCP_TOKEN_EXPIRATION] {
                stray(&get, key, GCP_PROVIDER)?;
            }
        }
    }

    if tokens.is_empty() {
        return Ok(None);
    }
    Ok(Some(Plan {
        tokens,
        expiration_seconds: expirations
            .into_iter()
            .min()
            .unwrap_or(DEFAULT_EXPIRATION_SECONDS),
        groups,
        google_credentials,
    }))
}

/// A cloud's token, written to `file`: for the audience its annotation gives (`(key, value)`),
/// else for `default`; messages name the annotation it came from, or `switch` (the one that
/// turned the cloud on) for the default.
fn cloud_token(
    file: &'static str,
    (key, value): (&'static str, Option<&str>),
    default: String,
    switch: &'static str,
) -> Result<Token, Refusal> {
    Ok(match value {
        Some(audience) => Token {
            file,
            audience: audience_value(key, audience)?,
            from: key,
        },
        None => Token {
            file,
            audience: default,
            from: switch,
        },
    })
}

/// Refuses `key` set without the annotation `needs` that turns its cloud on: a half-written
/// ServiceAccount is said at once, not found out when the SDK fails.
fn stray<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    key: &str,
    needs: &str,
) -> Result<(), Refusal> {
    match get(key) {
        Some(_) => Err(Refusal::bad(format!(
            "the ServiceAccount has the annotation {key} but not {needs}, without which it does nothing"
        ))),
        None => Ok(()),
    }
}

/// An audience: what a TokenRequest takes (at most 1,024 bytes), without the agent's list
/// separator (`,`) or control characters.
fn audience_value(key: &str, value: &str) -> Result<String, Refusal> {
    if value.is_empty()
        || value.len() > warrant_token::MAX_AUDIENCE_BYTES
        || value.contains(',')
        || value.chars().any(char::is_control)
    {
        return Err(Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is {}: an audience is 1 to {} bytes, without commas or control characters",
            warrant_token::quote_value(value),
            warrant_token::MAX_AUDIENCE_BYTES
        )));
    }
    Ok(value.to_owned())
}

/// A token lifetime annotation: whole seconds within kube's bounds (600 to 2^32); the default
/// when absent.
fn expiration(key: &str, value: Option<&str>) -> Result<i64, Refusal> {
    let Some(value) = value else {
        return Ok(DEFAULT_EXPIRATION_SECONDS);
    };
    let seconds: i64 = value.trim().parse().map_err(|_| {
        Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is {}, not a number of seconds",
            warrant_token::quote_value(value)
        ))
    })?;
    validate_expiration_seconds(seconds).map_err(|why| {
        Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is {seconds}: a token {why} (600 to {MAX_EXPIRATION_SECONDS})"
        ))
    })?;
    Ok(seconds)
}

/// Go's `strconv.ParseBool`, as EKS's webhook reads `sts-regional-endpoints`.
fn go_bool(key: &str, value: &str) -> Result<bool, Refusal> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is {}, not true or false",
            warrant_token::quote_value(value)
        ))),
    }
}

/// An IAM role ARN: `arn:<partition>:iam::<12-digit account>:role/<path/name>`, the form EKS's
/// webhook checks (it only warns; warrant refuses, so the mistake is seen when the pod is
/// created rather than when STS refuses the SDK).
fn check_role_arn(arn: &str) -> Result<(), Refusal> {
    let valid = (|| {
        let rest = arn.strip_prefix("arn:")?;
        let (partition, rest) = rest.split_once(':')?;
        let partition_ok = partition.starts_with("aws")
            && partition
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let rest = rest.strip_prefix("iam::")?;
        let (account, resource) = rest.split_once(':')?;
        let name = resource.strip_prefix("role/")?;
        let name_ok = !name.is_empty()
            && !name.ends_with('/')
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@/-".contains(&b));
        let account_ok = account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit());
        (partition_ok && account_ok && name_ok && arn.len() <= 2048).then_some(())
    })();
    valid.ok_or_else(|| {
        Refusal::bad(format!(
            "the ServiceAccount's annotation {AWS_ROLE_ARN} is {}, not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
            warrant_token::quote_value(arn)
        ))
    })
}

/// A UUID in its 8-4-4-4-12 hexadecimal form, either case.
fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A tenant: its ID (a UUID), or a verified domain name (`contoso.onmicrosoft.com`), which the
/// Azure SDKs accept as well.
fn is_tenant(text: &str) -> bool {
    is_uuid(text)
        || (text.len() <= 253
            && text.contains('.')
            && text.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }))
}

/// An email address as Google names service accounts (`name@project.iam.gserviceaccount.com`):
/// one `@`, no spaces, slashes or colons (it goes into a URL path).
fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && text.len() <= 254
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@.-_+".contains(&b))
        && !domain.contains('@')
}

/// The provider's resource name, `projects/<number>/locations/global/workloadIdentityPools/
/// <pool>/providers/<provider>`, given as that or in its `//iam.googleapis.com/…` form.
fn provider_name(value: &str) -> Result<&str, Refusal> {
    let name = value.strip_prefix("//iam.googleapis.com/").unwrap_or(value);
    let id = |s: &str| {
        (4..=32).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let parts: Vec<&str> = name.split('/').collect();
    let valid = matches!(
        parts.as_slice(),
        ["projects", number, "locations", "global", "workloadIdentityPools", pool, "providers", provider]
            if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && id(pool) && id(provider)
    );
    if valid {
        Ok(name)
    } else {
        Err(Refusal::bad(format!(
            "the ServiceAccount's annotation {GCP_PROVIDER} is {}, not a workload identity pool provider (projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>)",
            warrant_token::quote_value(value)
        )))
    }
}

/// Google's `external_account` credential configuration, with the fields and values
/// `gcloud iam workload-identity-pools create-cred-config --credential-source-file=…
/// --credential-source-type=text [--service-account=…]` writes.
fn google_credentials_json(provider: &str, email: Option<&str>, token_file: &str) -> String {
    let mut config = json!({
        "type": "external_account",
        "audience": format!("//iam.googleapis.com/{provider}"),
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": "https://sts.googleapis.com/v1/token",
        "credential_source": {"file": token_file, "format": {"type": "text"}},
    });
    if let Some(email) = email
        && let Value::Object(map) = &mut config
    {
        map.insert(
            "service_account_impersonation_url".to_owned(),
            Value::from(format!(
                "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/{email}:generateAccessToken"
            )),
        );
    }
    config.to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The server's settings the unit tests use.
    pub(crate) fn settings() -> InjectionSettings {
        InjectionSettings {
            agent_image: "warrant".into(),
            warrant_url: "https://warrant.warrant.svc".into(),
            ca_pem: None,
            agent_audience: TOKEN_AGENT_DEFAULT_AUDIENCE.into(),
            azure_authority_host: AZURE_DEFAULT_AUTHORITY_HOST.into(),
            azure_tenant_id: None,
            aws_region: None,
            callers: crate::admission::AdmissionCallers::Anonymous,
            limits: Default::default(),
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        plan(&annotations(pairs), &settings()).unwrap_err().message
    }

    #[test]
    fn no_annotations_no_plan() {
        assert_eq!(plan(&[], &settings()), Ok(None));
        // Another warrant.dev annotation does not turn injection on.
        assert_eq!(
            plan(&annotations(&[("warrant.dev/other", "x")]), &settings()),
            Ok(None)
        );
    }

    #[test]
    fn each_cloud_with_its_defaults() {
        let plan = plan(
            &annotations(&[
                (AWS_ROLE_ARN, "arn:aws:iam::111122223333:role/s3-reader"),
                (AZURE_CLIENT_ID, "00000000-1111-2222-3333-444444444444"),
                (AZURE_TENANT_ID, "55555555-6666-7777-8888-999999999999"),
                (
                    GCP_PROVIDER,
                    "projects/123456789012/locations/global/workloadIdentityPools/warrant/providers/cluster-a",
                ),
            ]),
            &settings(),
        )
        .unwrap()
        .unwrap();
        let audiences: Vec<&str> = plan.tokens.iter().map(|t| t.audience.as_str()).collect();
        assert_eq!(
            audiences,
            [
                "sts.amazonaws.com",
                "api://AzureADTokenExchange",
                "https://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/warrant/providers/cluster-a"
            ]
        );
        assert_eq!(plan.expiration_seconds, 3600);
        let credentials: Value =
            serde_json::from_str(plan.google_credentials.as_deref().unwrap()).unwrap();
        assert_eq!(
            credentials,
            json!({
                "type": "external_account",
                "audience": "//iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/warrant/providers/cluster-a",
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": "https://sts.googleapis.com/v1/token",
                "credential_source": {"file": "/var/run/secrets/warrant.dev/tokens/google-token", "format": {"type": "text"}},
            })
        );
    }

    #[test]
    fn the_shortest_lifetime_asked_wins() {
        let plan = plan(
            &annotations(&[
                (AUDIENCE, "vault"),
                (TOKEN_EXPIRATION, "7200"),
                (AWS_ROLE_ARN, "arn:aws-cn:iam::111122223333:role/path/to/r"),
                (AWS_TOKEN_EXPIRATION, "1800"),
            ]),
            &settings(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(plan.expiration_seconds, 1800);
    }

    /// Every malformed value is refused with a message naming its annotation and quoting the
    /// value (cut short), never a panic.
    #[test]
    fn malformed_annotations_are_refused_by_name() {
        let arn = "arn:aws:iam::111122223333:role/r";
        let client = "00000000-1111-2222-3333-444444444444";
        for (pairs, names) in [
            (
                vec![(AWS_ROLE_ARN, "arn:aws:iam::1111:role/r")],
                AWS_ROLE_ARN,
            ),
            (vec![(AWS_ROLE_ARN, "arn:aws:s3:::bucket")], AWS_ROLE_ARN),
            (vec![(AWS_ROLE_ARN, "")], AWS_ROLE_ARN),
            (
                vec![(AWS_ROLE_ARN, "arn:aws:iam::111122223333:user/u")],
                AWS_ROLE_ARN,
            ),
            (
                vec![(AWS_ROLE_ARN, arn), (AWS_TOKEN_EXPIRATION, "599")],
                AWS_TOKEN_EXPIRATION,
            ),
            (
                vec![(AWS_ROLE_ARN, arn), (AWS_TOKEN_EXPIRATION, "1h")],
                AWS_TOKEN_EXPIRATION,
            ),
            (
                vec![(AWS_ROLE_ARN, arn), (AWS_STS_REGIONAL_ENDPOINTS, "yes")],
                AWS_STS_REGIONAL_ENDPOINTS,
            ),
            (
                vec![(AWS_ROLE_ARN, arn), (AWS_AUDIENCE, "a,b")],
                AWS_AUDIENCE,
            ),
            (
                vec![(AWS_ROLE_ARN, arn), ("aws.warrant.dev/rolearn", "x")],
                "aws.warrant.dev/rolearn",
            ),
            (vec![(AWS_AUDIENCE, "sts.amazonaws.com")], AWS_AUDIENCE),
            (
                vec![(AZURE_CLIENT_ID, "not-a-uuid"), (AZURE_TENANT_ID, client)],
                AZURE_CLIENT_ID,
            ),
            (vec![(AZURE_CLIENT_ID, client)], AZURE_TENANT_ID),
            (
                vec![(AZURE_CLIENT_ID, client), (AZURE_TENANT_ID, "bad tenant")],
                AZURE_TENANT_ID,
            ),
            (
                vec![(
                    GCP_PROVIDER,
                    "projects/x/locations/global/workloadIdentityPools/pool/providers/prov",
                )],
                GCP_PROVIDER,
            ),
            (
                vec![
                    (
                        GCP_PROVIDER,
                        "projects/1/locations/global/workloadIdentityPools/pool/providers/prov",
                    ),
                    (GCP_SERVICE_ACCOUNT, "x/y"),
                ],
                GCP_SERVICE_ACCOUNT,
            ),
            (vec![(AUDIENCE, "")], AUDIENCE),
            (vec![(TOKEN_EXPIRATION, "3600")], TOKEN_EXPIRATION),
        ] {
            let message = refused(&pairs);
            assert!(message.contains(names), "{pairs:?}: {message}");
        }
        let long = "x".repeat(5000);
        let message = refused(&[(AWS_ROLE_ARN, &long)]);
        assert!(message.len() < 600, "{message}");
    }

    #[test]
    fn a_default_tenant_and_region_come_from_the_server() {
        let settings = InjectionSettings {
            azure_tenant_id: Some("contoso.onmicrosoft.com".into()),
            aws_region: Some("eu-west-1".into()),
            ..settings()
        };
        let plan = plan(
            &annotations(&[
                (AZURE_CLIENT_ID, "00000000-1111-2222-3333-444444444444"),
                (AWS_ROLE_ARN, "arn:aws:iam::111122223333:role/r"),
                (AWS_STS_REGIONAL_ENDPOINTS, "true"),
            ]),
            &settings,
        )
        .unwrap()
        .unwrap();
        let vars: Vec<(&str, &str)> = plan
            .groups
            .iter()
            .flat_map(|g| g.vars.iter().map(|(k, v)| (*k, v.as_str())))
            .collect();
        assert!(vars.contains(&("AZURE_TENANT_ID", "contoso.onmicrosoft.com")));
        assert!(vars.contains(&("AWS_REGION", "eu-west-1")));
        assert!(vars.contains(&("AWS_STS_REGIONAL_ENDPOINTS", "regional")));
    }
}
