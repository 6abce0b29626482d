//! Who may hold a connection to the signing socket, and for how long.
//!
//! The socket's file mode decides who can connect; each accepted connection is checked again
//! against the kernel's word on the process at the other end (`SO_PEERCRED`, taken when it
//! connected): its user must be one of [`PeerPolicy::uids`] or its primary group one of
//! [`PeerPolicy::gids`], else the connection is closed before a byte is read. Supplementary
//! groups are not in `SO_PEERCRED`: a caller that has the socket's group only as a
//! supplementary group passes the file mode but not this check, and is named by its uid.
//!
//! Then, as on the HTTPS side: at most [`ServeOptions::max_connections`] at once (a new one
//! over the limit is closed at once), and a connection with no call in flight for
//! [`ServeOptions::idle_timeout`] is closed with an HTTP/2 GOAWAY, which gRPC clients answer by
//! reconnecting at their next call (kube-apiserver's does, transparently); one that never made a
//! call is simply closed. A call in flight is never cut short for idleness; after the GOAWAY,
//! calls get 10 s to finish.
//!
//! Every refusal and close is counted in `warrant_signer_connections_closed_total{reason}` and
//! logged with the peer's uid, gid and pid.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::metrics::SignerMetrics;
use crate::peer::{Peer, PeerPolicy};
use crate::service::Signer;

/// Bounds on the socket's connections; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a connection may stay open with no call in flight (default 90 s, as the HTTPS
    /// side).
    pub idle_timeout: Duration,
    /// The most connections open at once (default 64; kube-apiserver holds one).
    pub max_connections: usize,
    /// Whose connections are served.
    pub peers: PeerPolicy,
}

/// The default idle timeout.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// The default connection limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

impl ServeOptions {
    /// The defaults, with `peers`.
    pub fn new(peers: PeerPolicy) -> Self {
        ServeOptions {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            peers,
        }
    }
}

/// How long a connection closed with a GOAWAY may take to finish.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// What a connection is doing, for the idle watch.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    /// Whether a call ever started: before one, the HTTP/2 handshake may not even be done, and
    /// a GOAWAY would wait for it.
    started: AtomicBool,
    idle_since: Mutex<Instant>,
}

impl Activity {
    fn idle_since(&self) -> Instant {
        *self
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves once nothing has been in flight for `timeout`.
    async fn idled(&self, timeout: Duration) {
        loop {
            let now = Instant::now();
            let deadline = if self.in_flight.load(Ordering::Acquire) > 0 {
                now + timeout
            } else {
                self.idle_since() + timeout
            };
            if deadline <= now {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// A call in flight, until answered or abandoned.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        activity.started.store(true, Ordering::Release);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The idle time first, then the count: the watch never sees "none in flight" with the
        // idle time of an earlier call.
        *self
            .0
            .idle_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves `signer` on `listener` under `options` until `shutdown` completes; then the open
/// connections get a GOAWAY, and this returns once they have closed (the caller bounds that
/// wait; dropping this future closes them at once).
pub async fn serve(
    listener: UnixListener,
    signer: Signer,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) {
    let metrics = signer.metrics().clone();
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    // Cancelled once the listener is closed: every connection then finishes what it started.
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            // Reap finished connection tasks as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors and the like: say so, and let a connection end first.
                tracing::warn!(%error, "cannot accept a connection on the signing socket");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some((peer, slot)) = admit(&stream, &options, &slots, &metrics) else {
            continue;
        };
        let signer = signer.clone();
        let stopping = stop.clone();
        let idle_timeout = options.idle_timeout;
        connections.spawn(async move {
            let _slot = slot;
            let metrics = signer.metrics().clone();
            let _open = metrics.connection_opened();
            let reason = connection(stream, peer, signer, idle_timeout, &stopping).await;
            if let Some(reason) = reason {
                metrics.connection_closed(reason);
                tracing::debug!(
                    uid = peer.uid,
                    reason,
                    "closed a connection to the signing socket"
                );
            }
        });
    }
    drop(listener);
    stop.cancel();
    while connections.join_next().await.is_some() {}
}

/// Whether the process at the other end of `stream` may hold a connection: the kernel names
/// it, `options` allow its user or group, and a slot is free. `None` (counted and logged) when
/// it may not.
fn admit(
    stream: &UnixStream,
    options: &ServeOptions,
    slots: &Arc<Semaphore>,
    metrics: &SignerMetrics,
) -> Option<(Peer, OwnedSemaphorePermit)> {
    let peer = match stream.peer_cred() {
        Ok(cred) => Peer {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: cred.pid(),
        },
        Err(error) => {
            metrics.connection_closed("peer_unknown");
            tracing::warn!(%error, "refused a connection to the signing socket: the kernel did not say whose it is");
            return None;
        }
    };
    if !options.peers.allows(peer.uid, peer.gid) {
        metrics.connection_closed("peer_not_allowed");
        tracing::warn!(
            uid = peer.uid,
            gid = peer.gid,
            pid = peer.pid.unwrap_or(0),
            "refused a connection to the signing socket from a user and group not allowed (--signing-endpoint-allowed-uids, --signing-endpoint-allowed-gids)"
        );
        return None;
    }
    let Ok(slot) = slots.clone().try_acquire_owned() else {
        metrics.connection_closed("limit");
        tracing::warn!(
            uid = peer.uid,
            pid = peer.pid.unwrap_or(0),
            limit = options.max_connections,
            "refused a connection to the signing socket: at the limit (--signing-endpoint-max-connections)"
        );
        return None;
    };
    Some((peer, slot))
}

/// Serves one connection to its end; `Some(reason)` if warrant closed it.
async fn connection(
    stream: UnixStream,
    peer: Peer,
    signer: Signer,
    idle_timeout: Duration,
    stopping: &CancellationToken,
) -> Option<&'static str> {
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        started: AtomicBool::new(false),
        idle_since: Mutex::new(Instant::now()),
    });
    let calls = activity.clone();
    let service = signer.into_service();
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(peer);
        let in_flight = InFlight::begin(calls.clone());
        let response = service.clone().oneshot(request);
        async move {
            let response = response.await;
            drop(in_flight);
            response
        }
    });
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder.max_concurrent_streams(64);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let reason = tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "a signing socket connection ended with an error");
            }
            return None;
        }
        () = activity.idled(idle_timeout) => Some("idle"),
        () = stopping.cancelled() => None,
    };
    if activity.started.load(Ordering::Acquire) {
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
    }
    // Otherwise dropped: a peer that never called has nothing to finish.
    reason
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_peers_are_the_owner_root_and_the_sockets_group() {
        let owner_only = PeerPolicy::for_socket(1000, None);
        assert!(owner_only.allows(1000, 1000) && owner_only.allows(0, 0));
        assert!(
            !owner_only.allows(1001, 1000),
            "a group without --signing-endpoint-group"
        );
        let shared = PeerPolicy::for_socket(1000, Some(990));
        assert!(shared.allows(1234, 990));
        assert!(!shared.allows(1234, 991));
        // Root owning the socket is listed once.
        assert_eq!(PeerPolicy::for_socket(0, None).uids, [0]);
        // An explicit list replaces the default: root too can be left out.
        let only = PeerPolicy {
            uids: vec![4242],
            gids: vec![],
        };
        assert!(!only.allows(0, 0) && only.allows(4242, 7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_idles_only_with_nothing_in_flight() {
        let timeout = Duration::from_secs(90);
        let activity = Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            started: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
        });
        let call = InFlight::begin(activity.clone());
        // A call in flight longer than any timeout is never cut short.
        let waiting = tokio::time::timeout(Duration::from_secs(3600), activity.idled(timeout));
        assert!(waiting.await.is_err());
        drop(call);
        let ended = Instant::now();
        activity.idled(timeout).await;
        assert_eq!(Instant::now() - ended, timeout);
        assert!(activity.started.load(Ordering::Acquire));
    }
}
