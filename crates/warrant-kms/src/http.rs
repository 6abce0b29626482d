//! The HTTP client the AWS SDK sends KMS's requests (and the credential providers' own) with:
//! hyper-util's pooled client over warrant's one connector (warrant-http: rustls on aws-lc-rs,
//! the system's roots through the platform's verifier), the one `warrant verify` and the
//! clients use. The SDK's own `default-https-client` would
//! bring the same rustls but turn on its `prefer-post-quantum` feature, which changes the key
//! exchange every TLS connection of the binary offers first, the server's included
//! (docs/decisions.md, "AWS KMS: the AWS SDK, with warrant's own HTTPS client").
//!
//! The KMS client's own copy ([`KmsHttp::for_kms`]) sends plain `http://` only to a loopback
//! address, whatever endpoint the SDK resolved (`endpoint.rs`): a request's session token
//! travels in a header, and signed requests can be replayed. The credential providers' copy
//! is not bound by it: the instance metadata service and the container credentials endpoint
//! are plain HTTP on link-local addresses, by AWS's design.

use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::retry::ErrorKind;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use warrant_http::{HttpsConnector, Options, Trust};

use crate::endpoint::{endpoint_allowed, quoted};
use crate::error::source;

/// How long a connection to KMS may take to open (TCP).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The SDK's HTTP client: one pool of connections, shared by every request. Cheap to clone.
#[derive(Clone)]
pub(crate) struct KmsHttp {
    client: Client<HttpsConnector, SdkBody>,
    /// Plain `http://` only to a loopback address (the KMS client's copy).
    loopback_rule: bool,
}

impl std::fmt::Debug for KmsHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KmsHttp")
    }
}

impl KmsHttp {
    /// A client that trusts the platform's roots. It connects to `http://` URLs too: the
    /// credential providers' endpoints are plain HTTP by AWS's design, and the KMS client's copy
    /// checks each URL itself ([`KmsHttp::for_kms`]).
    pub(crate) fn new() -> Result<KmsHttp, rustls::Error> {
        let options = Options {
            plain_http: true,
            connect_timeout: Some(CONNECT_TIMEOUT),
            nodelay: true,
        };
        let https = warrant_http::https_connector(&Trust::System, options)?;
        Ok(KmsHttp {
            client: Client::builder(TokioExecutor::new()).build(https),
            loopback_rule: false,
        })
    }

    /// The same pool, for KMS's requests: plain `http://` only to a loopback address.
    pub(crate) fn for_kms(&self) -> KmsHttp {
        KmsHttp {
            client: self.client.clone(),
            loopback_rule: true,
        }
    }
}

impl HttpClient for KmsHttp {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

impl HttpConnector for KmsHttp {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(err) => return HttpConnectorFuture::ready(Err(ConnectorError::user(err.into()))),
        };
        if self.loopback_rule
            && let Err(reason) = endpoint_allowed(request.uri())
        {
            let refused = format!(
                "not sent to {}: {reason}",
                quoted(&request.uri().to_string())
            );
            return HttpConnectorFuture::ready(Err(ConnectorError::user(refused.into())));
        }
        let sent = self.client.request(request);
        HttpConnectorFuture::new(async move {
            match sent.await {
                Ok(response) => Response::try_from(response.map(SdkBody::from_body_1_x))
                    .map_err(|err| ConnectorError::other(err.into(), None)),
                Err(err) => Err(connector_error(err)),
            }
        })
    }
}

/// What the SDK is told about a request that got no answer: an I/O error (a connection refused,
/// reset or timed out, a name that does not resolve) for anything that happened on the way,
/// which the SDK and warrant's retry take for transient.
fn connector_error(err: hyper_util::client::legacy::Error) -> ConnectorError {
    let io = err.is_connect() || source::<std::io::Error>(&err).is_some();
    let hyper = source::<hyper::Error>(&err);
    if io || hyper.is_some_and(|h| h.is_closed() || h.is_canceled() || h.is_incomplete_message()) {
        return ConnectorError::io(err.into());
    }
    ConnectorError::other(err.into(), Some(ErrorKind::TransientError))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The KMS client's connector sends nothing in clear off the host, whatever URL the SDK
    /// hands it: the request fails before a connection is tried.
    #[tokio::test]
    async fn the_kms_connector_refuses_plain_http_off_the_host() {
        let http = KmsHttp::new().unwrap().for_kms();
        let request = |uri: &str| {
            HttpRequest::try_from(
                http::Request::builder()
                    .uri(uri)
                    .body(SdkBody::empty())
                    .unwrap(),
            )
            .unwrap()
        };
        let err = HttpConnector::call(&http, request("http://192.0.2.1:4566/"))
            .await
            .unwrap_err();
        assert!(err.is_user(), "{err:?}");
        let said = aws_smithy_types::error::display::DisplayErrorContext(&err).to_string();
        assert!(said.contains("only sent to a loopback address"), "{said}");
    }
}
