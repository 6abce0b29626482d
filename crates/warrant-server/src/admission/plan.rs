//! What a pod gets, read from its ServiceAccount's annotations: the tokens the agent keeps (a
//! file and an audience each), their lifetime, the variables each SDK reads, and Google's
//! credential configuration. Pure: the annotations and the server's settings in, a [`Plan`]
//! or a [`Refusal`] naming the annotation out.
//!
//! Each cloud (and warrant's generic token) is one row of [`CLOUDS`]: the annotation that
//! turns it on, those it reads beside it, its token's file and the variable that names it; a
//! row's two functions check what is particular to the cloud (a role ARN, a tenant, a
//! provider) and give its other variables. [`plan`] reads the rows in order. The names are in
//! [`names`](super::names).

// The agent's tokens live kube's default for a TokenRequest (also Azure Workload Identity's)
// unless an annotation asks for another.
use warrant_token::{
    DEFAULT_EXPIRATION_SECONDS, MAX_EXPIRATION_SECONDS, validate_expiration_seconds,
};

use super::names::*;
use super::values::{self, google_credentials_json, is_email, is_tenant, is_uuid};

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
    pub callers: super::callers::AdmissionCallers,
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

/// A ServiceAccount's annotations (warrant's only, as the cache keeps them).
struct Annotations<'a>(&'a [(String, String)]);

impl<'a> Annotations<'a> {
    fn get(&self, key: &str) -> Option<&'a str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One cloud, or warrant's generic token: a row of [`CLOUDS`].
struct Cloud {
    /// How warnings name it.
    name: &'static str,
    /// Its annotations' domain, where a key it does not read is a typo, refused; `None` for
    /// `warrant.dev/`, which other annotations share.
    domain: Option<&'static str>,
    /// The annotation that turns it on.
    on: &'static str,
    /// The annotation naming its token's audience; `None` where `on`'s value is the audience.
    audience: Option<&'static str>,
    /// The annotation for its token's lifetime.
    expiration: &'static str,
    /// Its other annotations, read by `more_vars`.
    more: &'static [&'static str],
    /// Its token's file name in [`TOKENS_DIR`].
    file: &'static str,
    /// The variable that names the token's file, after the identity's own; `None` where the
    /// SDK reads the file through a configuration (Google).
    file_var: Option<&'static str>,
    /// Checks `on`'s value (and what goes with it): the identity's variables and the default
    /// audience.
    identity: fn(&str, &Annotations<'_>, &InjectionSettings) -> Result<Identity, Refusal>,
    /// Checks `more` and gives the variables beside the identity's (a region, an authority)
    /// and Google's configuration, for the identity and its token.
    more_vars: fn(&Identity, &Annotations<'_>, &InjectionSettings, &Token) -> Result<More, Refusal>,
}

impl Cloud {
    /// Whether `key` is an annotation of this cloud.
    fn reads(&self, key: &str) -> bool {
        key == self.on
            || self.audience == Some(key)
            || key == self.expiration
            || self.more.contains(&key)
    }

    /// The annotations that do nothing without `on`.
    fn need_on(&self) -> impl Iterator<Item = &'static str> {
        self.audience
            .into_iter()
            .chain(self.more.iter().copied())
            .chain([self.expiration])
    }
}

/// What a cloud's identity annotation says, checked.
struct Identity {
    /// What `on` names, checked: a role ARN, a client ID, a provider's resource name, an
    /// audience.
    name: String,
    /// The audience of the cloud's token where no annotation names one.
    default_audience: String,
    /// The identity's variables, before the token file's.
    vars: Vec<(&'static str, String)>,
}

/// A cloud's variables beside its identity's, and Google's configuration.
#[derive(Default)]
struct More {
    /// Groups of variables (each added together or not at all) that are not the identity:
    /// a container that sets one of them itself is not warned about it.
    groups: Vec<Vec<(&'static str, String)>>,
    google_credentials: Option<String>,
}

/// The clouds, in the order their tokens and variables are added.
const CLOUDS: [Cloud; 4] = [
    Cloud {
        name: "warrant",
        domain: None,
        on: AUDIENCE,
        audience: None,
        expiration: TOKEN_EXPIRATION,
        more: &[],
        file: "token",
        file_var: Some(var::WARRANT_IDENTITY_TOKEN_FILE),
        identity: warrant_identity,
        more_vars: |_, _, _, _| Ok(More::default()),
    },
    Cloud {
        name: "AWS",
        domain: Some(AWS_DOMAIN),
        on: AWS_ROLE_ARN,
        audience: Some(AWS_AUDIENCE),
        expiration: AWS_TOKEN_EXPIRATION,
        more: &[AWS_STS_REGIONAL_ENDPOINTS],
        file: "aws-token",
        file_var: Some(var::AWS_WEB_IDENTITY_TOKEN_FILE),
        identity: aws_identity,
        more_vars: aws_more,
    },
    Cloud {
        name: "Azure",
        domain: Some(AZURE_DOMAIN),
        on: AZURE_CLIENT_ID,
        audience: Some(AZURE_AUDIENCE),
        expiration: AZURE_TOKEN_EXPIRATION,
        more: &[AZURE_TENANT_ID],
        file: "azure-token",
        file_var: Some(var::AZURE_FEDERATED_TOKEN_FILE),
        identity: azure_identity,
        more_vars: azure_more,
    },
    Cloud {
        name: "Google",
        domain: Some(GCP_DOMAIN),
        on: GCP_PROVIDER,
        audience: Some(GCP_AUDIENCE),
        expiration: GCP_TOKEN_EXPIRATION,
        more: &[GCP_SERVICE_ACCOUNT],
        file: "google-token",
        file_var: None,
        identity: google_identity,
        more_vars: google_more,
    },
];

/// The plan for a ServiceAccount's `annotations` (warrant's only, as the cache keeps them):
/// `None` when it carries none that turn injection on.
pub(crate) fn plan(
    annotations: &[(String, String)],
    settings: &InjectionSettings,
) -> Result<Option<Plan>, Refusal> {
    let annotations = Annotations(annotations);
    if let Some((key, _)) = annotations.0.iter().find(|(key, _)| {
        let domain = |cloud: &Cloud| cloud.domain.is_some_and(|d| key.starts_with(d));
        CLOUDS.iter().any(domain) && !CLOUDS.iter().any(|cloud| cloud.reads(key))
    }) {
        return Err(Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is not one warrant reads (a typo?): see docs/injection.md for the annotations"
        )));
    }
    let mut tokens = Vec::new();
    let mut groups = Vec::new();
    let mut expirations = Vec::new();
    let mut google_credentials = None;
    for cloud in &CLOUDS {
        let Some(on) = annotations.get(cloud.on) else {
            for key in cloud.need_on() {
                stray(&annotations, key, cloud.on)?;
            }
            continue;
        };
        let mut identity = (cloud.identity)(on, &annotations, settings)?;
        let token = match cloud
            .audience
            .and_then(|key| Some((key, annotations.get(key)?)))
        {
            Some((key, audience)) => Token {
                file: cloud.file,
                audience: audience_value(key, audience)?,
                from: key,
            },
            None => Token {
                file: cloud.file,
                audience: identity.default_audience.clone(),
                from: cloud.on,
            },
        };
        let mut vars = std::mem::take(&mut identity.vars);
        vars.extend(cloud.file_var.map(|var| (var, token.path())));
        groups.push(EnvGroup {
            cloud: cloud.name,
            identity: true,
            vars,
        });
        let more = (cloud.more_vars)(&identity, &annotations, settings, &token)?;
        groups.extend(more.groups.into_iter().map(|vars| EnvGroup {
            cloud: cloud.name,
            identity: false,
            vars,
        }));
        google_credentials = google_credentials.or(more.google_credentials);
        expirations.push(expiration(
            cloud.expiration,
            annotations.get(cloud.expiration),
        )?);
        tokens.push(token);
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

/// warrant's generic token: the annotation is its audience.
fn warrant_identity(
    audience: &str,
    _: &Annotations<'_>,
    _: &InjectionSettings,
) -> Result<Identity, Refusal> {
    let audience = audience_value(AUDIENCE, audience)?;
    Ok(Identity {
        name: audience.clone(),
        default_audience: audience,
        vars: vec![],
    })
}

/// AWS: the role ARN, for STS's audience unless an annotation names another.
fn aws_identity(
    arn: &str,
    _: &Annotations<'_>,
    _: &InjectionSettings,
) -> Result<Identity, Refusal> {
    check_role_arn(arn)?;
    Ok(Identity {
        name: arn.to_owned(),
        default_audience: AWS_DEFAULT_AUDIENCE.to_owned(),
        vars: vec![(var::AWS_ROLE_ARN, arn.to_owned())],
    })
}

/// AWS: the server's region, and STS's regional endpoints if the annotation asks for them.
fn aws_more(
    _: &Identity,
    annotations: &Annotations<'_>,
    settings: &InjectionSettings,
    _: &Token,
) -> Result<More, Refusal> {
    let mut groups = Vec::new();
    if let Some(region) = &settings.aws_region {
        groups.push(vec![
            (var::AWS_REGION, region.clone()),
            (var::AWS_DEFAULT_REGION, region.clone()),
        ]);
    }
    if let Some(value) = annotations.get(AWS_STS_REGIONAL_ENDPOINTS)
        && go_bool(AWS_STS_REGIONAL_ENDPOINTS, value)?
    {
        groups.push(vec![(
            var::AWS_STS_REGIONAL_ENDPOINTS,
            AWS_STS_REGIONAL.to_owned(),
        )]);
    }
    Ok(More {
        groups,
        google_credentials: None,
    })
}

/// Azure: the client ID and the tenant (the annotation's, else the server's), for Entra ID's
/// token exchange audience unless an annotation names another.
fn azure_identity(
    client_id: &str,
    annotations: &Annotations<'_>,
    settings: &InjectionSettings,
) -> Result<Identity, Refusal> {
    if !is_uuid(client_id) {
        return Err(Refusal::bad(format!(
            "the ServiceAccount's annotation {AZURE_CLIENT_ID} is {}, not a UUID (an Entra application's or managed identity's client ID)",
            warrant_token::quote_value(client_id)
        )));
    }
    let tenant = match (annotations.get(AZURE_TENANT_ID), &settings.azure_tenant_id) {
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
    Ok(Identity {
        name: client_id.to_owned(),
        default_audience: AZURE_DEFAULT_AUDIENCE.to_owned(),
        vars: vec![
            (var::AZURE_CLIENT_ID, client_id.to_owned()),
            (var::AZURE_TENANT_ID, tenant),
        ],
    })
}

/// Azure: the server's authority host.
fn azure_more(
    _: &Identity,
    _: &Annotations<'_>,
    settings: &InjectionSettings,
    _: &Token,
) -> Result<More, Refusal> {
    Ok(More {
        groups: vec![vec![(
            var::AZURE_AUTHORITY_HOST,
            settings.azure_authority_host.clone(),
        )]],
        google_credentials: None,
    })
}

/// Google: the workload identity pool provider, for its default allowed audience (its full
/// name, with https) unless an annotation names another; the SDK finds the token through the
/// credential configuration.
fn google_identity(
    provider: &str,
    _: &Annotations<'_>,
    _: &InjectionSettings,
) -> Result<Identity, Refusal> {
    let provider = provider_name(provider)?;
    Ok(Identity {
        name: provider.to_owned(),
        default_audience: format!("https://iam.googleapis.com/{provider}"),
        vars: vec![(
            var::GOOGLE_APPLICATION_CREDENTIALS,
            format!("{GOOGLE_DIR}/{GOOGLE_FILE}"),
        )],
    })
}

/// Google: the credential configuration, impersonating the service account an annotation
/// names, if one does.
fn google_more(
    provider: &Identity,
    annotations: &Annotations<'_>,
    _: &InjectionSettings,
    token: &Token,
) -> Result<More, Refusal> {
    let email = annotations
        .get(GCP_SERVICE_ACCOUNT)
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
    Ok(More {
        groups: vec![],
        google_credentials: Some(google_credentials_json(
            &provider.name,
            email,
            &token.path(),
        )),
    })
}

/// Refuses `key` set without the annotation `needs` that turns its cloud on: a half-written
/// ServiceAccount is said at once, not found out when the SDK fails.
fn stray(annotations: &Annotations<'_>, key: &str, needs: &str) -> Result<(), Refusal> {
    match annotations.get(key) {
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
        || value.contains(warrant_proto::agent_contract::TOKENS_DELIMITER)
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
    values::go_bool(value).ok_or_else(|| {
        Refusal::bad(format!(
            "the ServiceAccount's annotation {key} is {}, not true or false",
            warrant_token::quote_value(value)
        ))
    })
}

/// An IAM role ARN ([`values::is_role_arn`]): EKS's webhook only warns; warrant refuses, so
/// the mistake is seen when the pod is created rather than when STS refuses the SDK.
fn check_role_arn(arn: &str) -> Result<(), Refusal> {
    if values::is_role_arn(arn) {
        return Ok(());
    }
    Err(Refusal::bad(format!(
        "the ServiceAccount's annotation {AWS_ROLE_ARN} is {}, not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
        warrant_token::quote_value(arn)
    )))
}

/// The provider's resource name ([`values::provider_name`]).
fn provider_name(value: &str) -> Result<&str, Refusal> {
    values::provider_name(value).ok_or_else(|| {
        Refusal::bad(format!(
            "the ServiceAccount's annotation {GCP_PROVIDER} is {}, not a workload identity pool provider (projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>)",
            warrant_token::quote_value(value)
        ))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::{Value, json};

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
