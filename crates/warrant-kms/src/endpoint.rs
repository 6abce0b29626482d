//! Where KMS's requests go, and the one rule for it.
//!
//! The AWS SDK takes KMS's endpoint from more places than `--kms-endpoint`:
//! `AWS_ENDPOINT_URL_KMS`, `AWS_ENDPOINT_URL`, and the shared config file's `endpoint_url` (the
//! profile's own, or the `kms` entry of the profile's `services` section), unless
//! `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` (or the profile's `ignore_configured_endpoint_urls`)
//! says not to. warrant resolves it the way the SDK does (the flag first, then the SDK's own
//! order), checks the result against the rule, gives the SDK exactly that URL, and says at
//! start which endpoint it is and where it came from. With none configured, the SDK's rules
//! give AWS's endpoint for the region (`https://kms.REGION.amazonaws.com`, or its FIPS or
//! dual-stack form).
//!
//! **The rule**: `https://`, or plain `http://` only to a loopback address (a test server such
//! as moto; [`warrant_http::Destination`], the rule publish's endpoints follow too):
//! every request carries the session token in a header, and a signed request can be
//! replayed. The KMS client's connector applies the same rule to each request it sends
//! (`http.rs`), so nothing the SDK might resolve differently sends one off the host in clear.

use aws_config::SdkConfig;
use aws_sdk_kms::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_types::service_config::ServiceConfigKey;
use warrant_http::Destination;

use crate::error::KmsError;

pub(crate) mod source;

pub use source::EndpointSource;
use source::{ENDPOINT_ENV, KMS_ENDPOINT_ENV};

/// The SDK's name for KMS, which its per-service settings are keyed by.
const SERVICE_ID: &str = "KMS";
/// The longest URL a message quotes.
const MAX_QUOTED: usize = 256;

/// The endpoint KMS's requests go to.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The URL, as the SDK resolves it.
    pub(crate) url: String,
    /// Where it came from.
    pub(crate) source: EndpointSource,
}

impl Endpoint {
    /// The URL to give the SDK: the configured one, or `None` for AWS's (the SDK resolves it).
    pub(crate) fn configured(&self) -> Option<&str> {
        (self.source != EndpointSource::Aws).then_some(self.url.as_str())
    }

    /// Resolves the endpoint of KMS in `region`: `flag`, else what `shared` (the SDK's loaded
    /// configuration) names, else AWS's; refused unless it obeys the rule.
    pub(crate) async fn resolve(
        flag: Option<&str>,
        shared: &SdkConfig,
        region: &str,
    ) -> Result<Endpoint, KmsError> {
        let configured = match flag {
            Some(url) => Some((url.to_owned(), EndpointSource::Flag)),
            None => configured_in_sdk(shared),
        };
        let source = configured
            .as_ref()
            .map_or(EndpointSource::Aws, |(_, source)| *source);
        let refused = |url: &str, reason: String| KmsError::Endpoint {
            endpoint: quoted(url),
            from: source,
            reason,
        };
        let params = Params::builder()
            .region(region)
            .use_fips(shared.use_fips().unwrap_or(false))
            .use_dual_stack(shared.use_dual_stack().unwrap_or(false))
            .set_endpoint(configured.as_ref().map(|(url, _)| url.clone()))
            .build()
            .map_err(|e| refused("-", e.to_string()))?;
        let url = ResolveEndpoint::resolve_endpoint(&DefaultResolver::new(), &params)
            .await
            .map_err(|e| {
                let url = configured.as_ref().map_or("-", |(url, _)| url.as_str());
                refused(url, e.to_string())
            })?
            .url()
            .to_owned();
        let parsed: http::Uri = url
            .parse()
            .map_err(|e| refused(&url, format!("not a URL: {e}")))?;
        endpoint_allowed(&parsed).map_err(|reason| refused(&url, reason.to_owned()))?;
        Ok(Endpoint { url, source })
    }
}

/// The endpoint the SDK's configuration names for KMS, and where it came from: what
/// `aws_sdk_kms::config::Builder::from` reads, in its order (the environment's service-specific
/// variable, its global one, the profile's `services` section, the profile).
fn configured_in_sdk(shared: &SdkConfig) -> Option<(String, EndpointSource)> {
    let key = ServiceConfigKey::builder()
        .service_id(SERVICE_ID)
        .env(ENDPOINT_ENV)
        .profile("endpoint_url")
        .build()
        .ok()?;
    let url = shared
        .service_config()
        .and_then(|config| config.load_config(key))
        .or_else(|| shared.endpoint_url().map(str::to_owned))?;
    let from_env = |name: &str| std::env::var(name).is_ok_and(|value| value == url);
    let source = if from_env(KMS_ENDPOINT_ENV) {
        EndpointSource::KmsEnvironment
    } else if from_env(ENDPOINT_ENV) {
        EndpointSource::Environment
    } else {
        EndpointSource::ConfigFile
    };
    Some((url, source))
}

/// `url` as a message quotes it: without a user or password, and cut to 256 characters.
pub(crate) fn quoted(url: &str) -> String {
    let shown = match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://…@{host}{path}"),
                None => url.to_owned(),
            }
        }
        None => url.to_owned(),
    };
    if shown.chars().count() <= MAX_QUOTED {
        return shown;
    }
    let mut cut: String = shown.chars().take(MAX_QUOTED).collect();
    cut.push('…');
    cut
}

/// True when `endpoint` may be sent requests: `https://`, or `http://` to a loopback address.
pub(crate) fn endpoint_allowed(endpoint: &http::Uri) -> Result<(), &'static str> {
    match Destination::of_uri(endpoint) {
        Destination::Https | Destination::LoopbackHttp => Ok(()),
        Destination::RemoteHttp => Err(
            "plain http:// is only sent to a loopback address (requests carry the session token in a header): use https://",
        ),
        Destination::NotHttp => Err("not an http:// or https:// URL"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_only_to_loopback() {
        for ok in [
            "https://kms.us-east-1.amazonaws.com",
            "http://127.0.0.1:4566",
            "http://[::1]:4566",
            "http://localhost:4566",
            "http://[::ffff:127.0.0.1]:4566",
        ] {
            assert!(endpoint_allowed(&ok.parse().unwrap()).is_ok(), "{ok}");
        }
        for refused in ["http://kms.internal:80", "http://10.0.0.1", "ftp://x"] {
            assert!(
                endpoint_allowed(&refused.parse().unwrap()).is_err(),
                "{refused}"
            );
        }
    }

    #[test]
    fn quoted_urls_carry_no_password_and_are_cut() {
        assert_eq!(
            quoted("http://user:secret@10.0.0.1:80/x"),
            "http://…@10.0.0.1:80/x"
        );
        assert_eq!(quoted("https://kms.example"), "https://kms.example");
        let long = format!("http://{}", "a".repeat(400));
        assert_eq!(quoted(&long).chars().count(), MAX_QUOTED + 1);
    }

    /// With nothing configured, the SDK's rules give AWS's endpoint, over HTTPS.
    #[tokio::test]
    async fn without_a_configured_endpoint_it_is_aws_s() {
        let shared = SdkConfig::builder().build();
        let endpoint = Endpoint::resolve(None, &shared, "eu-west-1").await.unwrap();
        assert_eq!(endpoint.url, "https://kms.eu-west-1.amazonaws.com");
        assert_eq!(endpoint.source, EndpointSource::Aws);
        assert_eq!(endpoint.configured(), None);
        let fips = SdkConfig::builder().use_fips(true).build();
        let endpoint = Endpoint::resolve(None, &fips, "us-east-1").await.unwrap();
        assert_eq!(endpoint.url, "https://kms-fips.us-east-1.amazonaws.com");
    }

    /// The SDK's global `endpoint_url` (what `AWS_ENDPOINT_URL` and a profile set) obeys the
    /// rule as the flag does; the flag wins over it.
    #[tokio::test]
    async fn a_configured_endpoint_obeys_the_rule_whatever_its_source() {
        let shared = SdkConfig::builder()
            .endpoint_url("http://10.1.2.3:4566")
            .build();
        let err = Endpoint::resolve(None, &shared, "us-east-1")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("http://10.1.2.3:4566") && err.contains("only sent to a loopback"),
            "{err}"
        );
        let flag = Endpoint::resolve(Some("http://127.0.0.1:4566"), &shared, "us-east-1")
            .await
            .unwrap();
        assert_eq!(flag.url, "http://127.0.0.1:4566");
        assert_eq!(flag.source, EndpointSource::Flag);
        let refused = Endpoint::resolve(Some("http://kms.internal"), &shared, "us-east-1")
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("--kms-endpoint"), "{refused}");
    }
}
