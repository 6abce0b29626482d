//! The one HTTPS connector every outbound client of warrant's own is built on: hyper-util's
//! TCP connector under hyper-rustls, TLS from a [`Trust`], HTTP/1.1. What differs between
//! callers is said in [`Options`], not in a connector of their own.

use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;

use crate::Trust;

/// The connector: TCP, then TLS for `https://` (and, where [`Options::plain_http`] allows,
/// nothing more for `http://`). Cheap to clone; hyper-util's `Client` pools its connections.
pub type HttpsConnector = hyper_rustls::HttpsConnector<HttpConnector>;

/// How a caller's connections differ from the default: https only, no connect timeout of
/// its own, Nagle's algorithm left on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Also connect to `http://` URLs. The connector does not look at the host: a caller that
    /// allows plain HTTP checks each URL against the rule itself ([`crate::Destination`]).
    pub plain_http: bool,
    /// How long opening a TCP connection may take (the TLS handshake is the caller's
    /// request's to bound).
    pub connect_timeout: Option<Duration>,
    /// Send small writes at once (`TCP_NODELAY`): for request-and-answer traffic where each
    /// request is one small write.
    pub nodelay: bool,
}

/// The connector for `trust` and `options`. Fails only as [`Trust::client_config`] does.
pub fn https_connector(trust: &Trust, options: Options) -> Result<HttpsConnector, rustls::Error> {
    let tls = trust.client_config()?;
    let mut tcp = HttpConnector::new();
    // The TCP connector sees https URLs too: the TLS layer above decides which schemes go.
    tcp.enforce_http(false);
    tcp.set_connect_timeout(options.connect_timeout);
    tcp.set_nodelay(options.nodelay);
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls);
    let builder = if options.plain_http {
        builder.https_or_http()
    } else {
        builder.https_only()
    };
    Ok(builder.enable_http1().wrap_connector(tcp))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    use tower::ServiceExt as _;

    use super::*;

    /// A TLS server on loopback with a certificate for `localhost` from `ca`, accepting one
    /// handshake after another; its address.
    async fn tls_server(ca: &warrant_testkit::TestCa) -> std::net::SocketAddr {
        let issued = ca.issue_server(&["localhost"]);
        let key = PrivateKeyDer::from_pem_slice(issued.key_pem().as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![issued.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                // A failed handshake is the client's refusal, which the test reads there.
                let _ = acceptor.accept(tcp).await;
            }
        });
        address
    }

    fn root(ca: &warrant_testkit::TestCa) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap()
    }

    /// Whether `connector` completes a connection to `uri`, and the error's chain if not.
    async fn connect(connector: &HttpsConnector, uri: &str) -> Result<(), String> {
        let uri: http::Uri = uri.parse().unwrap();
        connector
            .clone()
            .oneshot(uri)
            .await
            .map(drop)
            .map_err(|err| {
                let mut said = err.to_string();
                let mut source = err.source();
                while let Some(cause) = source {
                    said = format!("{said}: {cause}");
                    source = cause.source();
                }
                said
            })
    }

    /// A CA trusted alone admits its own server and no other; a second CA beside it does not
    /// widen what it admits to the first's.
    #[tokio::test]
    async fn only_a_trusted_ca_s_server_is_reached() {
        let ours = warrant_testkit::TestCa::new("ours");
        let theirs = warrant_testkit::TestCa::new("theirs");
        let server = tls_server(&ours).await;
        let url = format!("https://localhost:{}/", server.port());

        let trusting_ours = https_connector(&Trust::Only(vec![root(&ours)]), Options::default());
        connect(&trusting_ours.unwrap(), &url).await.unwrap();
        let beside = Trust::SystemAnd(vec![root(&ours)]);
        connect(&https_connector(&beside, Options::default()).unwrap(), &url)
            .await
            .unwrap();

        for trust in [Trust::Only(vec![root(&theirs)]), Trust::System] {
            let connector = https_connector(&trust, Options::default()).unwrap();
            let err = connect(&connector, &url).await.unwrap_err();
            assert!(err.contains("UnknownIssuer"), "{trust:?}: {err}");
        }
    }

    /// Plain HTTP is refused before any connection unless the options allow it.
    #[tokio::test]
    async fn plain_http_only_when_the_options_allow_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://127.0.0.1:{}/",
            listener.local_addr().unwrap().port()
        );

        let https_only = https_connector(&Trust::System, Options::default()).unwrap();
        let err = connect(&https_only, &url).await.unwrap_err();
        assert!(err.contains("unsupported scheme http"), "{err}");

        let options = Options {
            plain_http: true,
            connect_timeout: Some(Duration::from_secs(5)),
            nodelay: true,
        };
        let either = https_connector(&Trust::System, options).unwrap();
        connect(&either, &url).await.unwrap();
    }
}
