//! Where KMS's endpoint came from, as messages name it (a refused endpoint's error says so).

use std::fmt;

/// The environment variable of the endpoint for every service (the SDK adds `_KMS` for KMS's).
pub(crate) const ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL";
/// The service-specific one.
pub(crate) const KMS_ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_KMS";

/// Where the endpoint came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointSource {
    /// `--kms-endpoint` ([`crate::KmsConfig::endpoint`]).
    Flag,
    /// `AWS_ENDPOINT_URL_KMS`.
    KmsEnvironment,
    /// `AWS_ENDPOINT_URL`.
    Environment,
    /// The shared config file: the profile's `endpoint_url`, or its `services` section's.
    ConfigFile,
    /// None configured: AWS's endpoint for the region.
    Aws,
}

impl fmt::Display for EndpointSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndpointSource::Flag => "--kms-endpoint",
            EndpointSource::KmsEnvironment => KMS_ENDPOINT_ENV,
            EndpointSource::Environment => ENDPOINT_ENV,
            EndpointSource::ConfigFile => {
                "the AWS config file (endpoint_url of the profile or of its services section)"
            }
            EndpointSource::Aws => "AWS's endpoint for the region",
        })
    }
}
