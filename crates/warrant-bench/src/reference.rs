//! `warrant-bench --reference-server CERT KEY BODY`: the transport floor without warrant.
//!
//! A minimal HTTPS server with warrant's transport and nothing else: tokio's multi-threaded
//! runtime, tokio-rustls over rustls with the aws-lc-rs provider (TLS 1.3 and 1.2, as warrant
//! serves by default; loopback clients negotiate 1.3), ALPN `h2` then `http/1.1`, the protocol
//! chosen by ALPN as warrant chooses it, hyper 1 through hyper-util's auto builder (HTTP/2 with
//! warrant's limit of 250 concurrent streams), mimalloc as warrant's allocator (the bench's
//! binary uses it too, see main.rs). It answers `GET /version` with the bytes warrant answers
//! it with (the file BODY, fetched from warrant by the bench), and 404 to anything else: no
//! authentication, no routing table, no middleware, no metrics, no log.
//!
//! The bench runs it as a child process of its own (this same binary, re-executed), so its
//! CPU time is read from /proc exactly as warrant's is, and measures the floor scenario against
//! it: what warrant spends on a request beyond it is what warrant's own stack costs. It serves on
//! the listening socket the bench passes it, as warrant is passed its own (`LISTEN_FDS`).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::Error;

/// The rustls configuration: warrant's provider, versions and ALPN, with the serving pair.
fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, Error> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(cert)?.collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves until killed. Blocks.
pub(crate) fn serve(cert: &Path, key: &Path, body: &Path) -> Result<(), Error> {
    let listener = listenfd::ListenFd::from_env()
        .take_tcp_listener(0)?
        .ok_or("no listening socket passed in LISTEN_FDS")?;
    listener.set_nonblocking(true)?;
    let tls = tls_config(cert, key)?;
    let body = Bytes::from(std::fs::read(body)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(accept_loop(listener, tls, body))
}

async fn accept_loop(
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    body: Bytes,
) -> Result<(), Error> {
    let listener = TcpListener::from_std(listener)?;
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let body = body.clone();
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let body = body.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&request, body)) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder = if h2 {
                builder.http2_only()
            } else {
                builder.http1_only()
            };
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(250);
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(request: &Request<Incoming>, body: Bytes) -> Response<Full<Bytes>> {
    let (status, body) =
        if request.method() == hyper::Method::GET && request.uri().path() == "/version" {
            (StatusCode::OK, body)
        } else {
            (StatusCode::NOT_FOUND, Bytes::from_static(b"{}"))
        };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
