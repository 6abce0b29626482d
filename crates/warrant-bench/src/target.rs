//! Where the load goes: warrant's (or the reference server's) URL, the admin token and the
//! benchmark's directory, with a checked request of each scenario and the HTTPS client.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

use crate::Error;
use crate::wrk::Scenario;

/// Where the load goes.
pub(crate) struct Target {
    /// `https://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// The admin bearer token.
    pub(crate) admin: String,
    /// The benchmark's directory (CA, token files, scripts).
    pub(crate) dir: PathBuf,
}

impl Target {
    /// One request of the scenario, checked for the answer a correct server gives: the
    /// benchmark must not measure fast failures. Returns the answer's body.
    pub(crate) fn preflight(&self, scenario: Scenario) -> Result<String, Error> {
        let (path, body) = scenario.sample(&self.dir)?;
        let request = http::Request::builder()
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.admin));
        let request = match body {
            Some(body) => request
                .method("POST")
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))?,
            None => request.body(Full::new(Bytes::new()))?,
        };
        let client = https_client(&self.dir.join("ca.crt"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (status, text) = runtime.block_on(async {
            let response = client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, Error>((status, String::from_utf8_lossy(&body).into_owned()))
        })?;
        let ok = match scenario {
            Scenario::Floor => status.as_u16() == 200 && text.contains("\"gitVersion\""),
            Scenario::ReviewDistinct | Scenario::ReviewRepeated | Scenario::Mixed => {
                status.as_u16() == 201 && text.contains("\"authenticated\":true")
            }
            Scenario::RequestPlain | Scenario::RequestPod => {
                status.as_u16() == 201 && text.contains("\"token\":\"ey")
            }
        };
        if !ok {
            return Err(format!("{} preflight failed: {status} {text}", scenario.name()).into());
        }
        Ok(text)
    }
}

/// A client for the benchmark's server: HTTPS trusting only the benchmark's CA (`ca`), through
/// warrant's one connector (warrant-http).
pub(crate) fn https_client(
    ca: &Path,
) -> Result<hyper_util::client::legacy::Client<warrant_http::HttpsConnector, Full<Bytes>>, Error> {
    let trust = warrant_http::Trust::only_file(ca)?;
    let https = warrant_http::https_connector(&trust, warrant_http::Options::default())?;
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(https),
    )
}
