//! `--key-kms-uri`: the managed keys' private halves in AWS KMS. The client is built once at
//! startup (no call to KMS: credentials come from AWS's chain when a key is first asked about);
//! `serve` publishes its metrics.

use prometheus_client::registry::Registry;
use warrant_kms::{Kms, KmsConfig, KmsError, KmsHolder, KmsMetrics, KmsUri};

use crate::cli::KmsArgs;

/// Why KMS cannot hold the keys. Each names `--key-kms-uri` (never a credential: none is in
/// the URI, and KMS's errors name no secret).
#[derive(Debug, thiserror::Error)]
pub(crate) enum KmsSetupError {
    /// The URI, the endpoint or the HTTPS client.
    #[error("--key-kms-uri: {0}")]
    Open(#[source] KmsError),
}

/// KMS as the flags name it, or `None` without `--key-kms-uri`. `registry` gets the holder's
/// metrics (`serve`).
pub(crate) async fn open(
    args: &KmsArgs,
    registry: Option<&mut Registry>,
) -> Result<Option<KmsHolder>, KmsSetupError> {
    let Some(text) = &args.key_kms_uri else {
        return Ok(None);
    };
    let uri = KmsUri::parse(text).map_err(|e| KmsSetupError::Open(e.into()))?;
    let mut config = KmsConfig::new(uri).concurrency(usize::from(args.kms_concurrency));
    if let Some(endpoint) = &args.kms_endpoint {
        config = config.endpoint(endpoint);
    }
    let metrics = KmsMetrics::default();
    if let Some(registry) = registry {
        metrics.register(registry);
    }
    let kms = Kms::open(config, metrics)
        .await
        .map_err(KmsSetupError::Open)?;
    tracing::info!(
        kms = %kms.name(), keys = %kms.uri(), endpoint = %kms.endpoint(),
        endpoint_from = %kms.endpoint_source(), concurrency = args.kms_concurrency,
        "managed keys held in AWS KMS"
    );
    Ok(Some(KmsHolder::new(kms)))
}
