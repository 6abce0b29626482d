//! The accept loop: TLS handshakes, HTTP/1.1 or HTTP/2 by ALPN, the verified client
//! certificate attached to every request on its connection, the connection limits and
//! timeouts, and graceful shutdown.
//!
//! A small loop over tokio-rustls and hyper-util rather than axum-server: it is where the peer
//! certificate of a connection is at hand, to hand to the authenticator.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use warrant_audit::loglimit::Throttle;
use warrant_auth::PeerCertificate;

use super::LOG_TARGET;
use crate::Api;
use crate::connections::{Closed, Connection, Connections, ServeOptions};

/// How long in-flight requests get to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` over TLS until `shutdown` completes, then lets in-flight requests
/// finish (up to a grace period). `connections` holds the limit and counts (see
/// [`crate::connections`]); `options` the timeouts.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Api,
    options: ServeOptions,
    connections: Connections,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    // Not owned task handles: at shutdown the connections are drained (each told to stop, then
    // waited for), which aborting them would not allow.
    let stopping = CancellationToken::new();
    let tasks = TaskTracker::new();
    let options = Arc::new(options);
    let mut accept_errors = Throttle::new(Duration::from_secs(1));
    let mut backoff = ACCEPT_BACKOFF_MIN;
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    conn
                }
                Err(e) => {
                    // Out of descriptors and the like: free one if an idle connection holds it,
                    // wait a growing while, and say so once a second, with a count.
                    connections.accept_error();
                    let shed = connections.shed_one(Instant::now());
                    if let Some(left_out) = accept_errors.allow(Instant::now()) {
                        tracing::warn!(target: LOG_TARGET, error = %e, failures_not_logged = left_out, shed_an_idle_connection = shed, "accepting a connection failed");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(connection) = connections.admit(peer.ip(), Instant::now()) else {
            tracing::debug!(target: LOG_TARGET, %peer, "connection refused: at a connection limit with none that may make room");
            continue;
        };
        // Each answer goes out when written, as Go's servers (kube-apiserver's) send theirs:
        // with Nagle's algorithm, an HTTP/2 frame written after another still unacknowledged
        // waited for the client's delayed ACK, 40 ms (seen as the p99 of the h2 bench rows).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(target: LOG_TARGET, %peer, error = %e, "could not set TCP_NODELAY");
        }
        let acceptor = acceptor.clone();
        let app = app.clone();
        let options = options.clone();
        let stopping = stopping.clone();
        tasks.spawn(async move {
            serve_connection(tcp, peer, acceptor, app, &options, connection, stopping).await;
        });
    }
    drop(listener);
    stopping.cancel();
    tasks.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!(target: LOG_TARGET, "shutdown grace period over; closing the remaining connections");
    }
}

/// The shortest and longest waits after a failed accept.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// One connection, from the handshake to its close.
async fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    acceptor: TlsAcceptor,
    app: Api,
    options: &ServeOptions,
    connection: Arc<Connection>,
    stopping: CancellationToken,
) {
    let Some(stream) = handshake(tcp, peer, acceptor, options, &connection).await else {
        return;
    };
    let tls = stream.get_ref().1;
    // Verified by the handshake against one of the client CAs; the authenticators decide which.
    let certificate = tls
        .peer_certificates()
        .map(|chain| PeerCertificate::new(chain.to_vec()))
        .unwrap_or_default();
    // ALPN decides the protocol; a client that offers none speaks HTTP/1.1 (as with Go's
    // server). No bytes are read to guess it, so nothing waits unbounded for them.
    let h2 = tls.alpn_protocol() == Some(b"h2".as_slice());
    connection.handshaken(if h2 { "h2" } else { "http1" }, Instant::now());
    let requests = connection.clone();
    let mark = connection.mark();
    let service = tower::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(certificate.clone());
        request.extensions_mut().insert(mark.clone());
        request
            .extensions_mut()
            .insert(crate::audit::ClientAddress(peer));
        let in_flight = InFlight::begin(requests.clone());
        let response = app.clone().oneshot(request);
        async move {
            let response = response.await;
            drop(in_flight);
            response
        }
    });
    let service = TowerToHyperService::new(service);
    let io = TokioIo::new(stream);
    let ended = if h2 {
        let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(250)
            .keep_alive_interval(Some(options.h2_ping_interval))
            .keep_alive_timeout(options.h2_ping_timeout);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        drive(
            conn,
            |c| c.graceful_shutdown(),
            &connection,
            options,
            &stopping,
        )
        .await
    } else {
        let mut builder = hyper::server::conn::http1::Builder::new();
        // The first request's wait is the watchdog's (it counts the close); hyper's own timer,
        // a grace later, bounds the headers of the requests after it.
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(options.first_request_timeout + CLOSE_GRACE);
        let conn = builder.serve_connection(io, service).with_upgrades();
        tokio::pin!(conn);
        drive(
            conn,
            |c| c.graceful_shutdown(),
            &connection,
            options,
            &stopping,
        )
        .await
    };
    if let Err(e) = ended {
        tracing::debug!(target: LOG_TARGET, %peer, error = %e, "connection ended with an error");
    }
}

/// A request in flight on its connection, until answered or abandoned (an HTTP/2 stream reset
/// drops it unanswered).
struct InFlight(Arc<Connection>);

impl InFlight {
    fn begin(connection: Arc<Connection>) -> Self {
        connection.begin();
        InFlight(connection)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end(Instant::now());
    }
}

/// The TLS handshake, within the options' timeout unless the connection is shed first; the
/// stream, or `None` once the connection's end is counted (and a failure logged).
async fn handshake(
    tcp: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    acceptor: TlsAcceptor,
    options: &ServeOptions,
    connection: &Connection,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    let handshake = tokio::select! {
        result = tokio::time::timeout(options.handshake_timeout, acceptor.accept(tcp)) => result,
        () = connection.shed() => {
            connection.closed(Closed::Shed);
            return None;
        }
    };
    match handshake {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            connection.closed(Closed::HandshakeFailed);
            tracing::debug!(target: LOG_TARGET, %peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            connection.closed(Closed::HandshakeTimeout);
            tracing::debug!(target: LOG_TARGET, %peer, "TLS handshake timed out");
            None
        }
    }
}

/// Runs a connection to its end, shutting it down gracefully (HTTP/2: GOAWAY; HTTP/1.1: closed
/// once the request in flight is answered) when it idles out, is shed, or the server stops.
async fn drive<C>(
    mut conn: std::pin::Pin<&mut C>,
    graceful: impl Fn(std::pin::Pin<&mut C>),
    connection: &Connection,
    options: &ServeOptions,
    stopping: &CancellationToken,
) -> Result<(), hyper::Error>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    tokio::select! {
        result = conn.as_mut() => return result,
        reason = connection.close_reason(options) => connection.closed(reason),
        () = stopping.cancelled() => {
            // The server's shutdown grace bounds what is left.
            graceful(conn.as_mut());
            return conn.await;
        }
    }
    // Nothing is in flight: a peer that does not take the hint (an HTTP/2 client that never
    // sent its preface, say) is dropped shortly after.
    graceful(conn.as_mut());
    tokio::time::timeout(CLOSE_GRACE, conn)
        .await
        .unwrap_or(Ok(()))
}

/// How long an idle or shed connection gets to close after being told to.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
