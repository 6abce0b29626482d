//! The shapes of the values token injection's annotations hold (a role ARN, a UUID, a
//! tenant, a service account's email, a provider's resource name, a Go boolean), and the one
//! value it writes for a cloud's SDK to read (Google's credential configuration). Pure and
//! without messages: [`plan`](super::plan) says which annotation was wrong.

use serde_json::{Value, json};

/// Go's `strconv.ParseBool`, as EKS's webhook reads `sts-regional-endpoints`.
pub(crate) fn go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// An IAM role ARN: `arn:<partition>:iam::<12-digit account>:role/<path/name>`, the form EKS's
/// webhook checks.
pub(crate) fn is_role_arn(arn: &str) -> bool {
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
    valid.is_some()
}

/// A UUID in its 8-4-4-4-12 hexadecimal form, either case.
pub(crate) fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A tenant: its ID (a UUID), or a verified domain name (`contoso.onmicrosoft.com`), which the
/// Azure SDKs accept as well.
pub(crate) fn is_tenant(text: &str) -> bool {
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
pub(crate) fn is_email(text: &str) -> bool {
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
pub(crate) fn provider_name(value: &str) -> Option<&str> {
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
    valid.then_some(name)
}

/// Google's `external_account` credential configuration, with the fields and values
/// `gcloud iam workload-identity-pools create-cred-config --credential-source-file=…
/// --credential-source-type=text [--service-account=…]` writes.
pub(crate) fn google_credentials_json(
    provider: &str,
    email: Option<&str>,
    token_file: &str,
) -> String {
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
