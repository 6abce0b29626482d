//! The connections warrant holds open, and the bounds that keep a client from holding them for
//! nothing: a TLS handshake in [`ServeOptions::handshake_timeout`], a first request within
//! [`ServeOptions::first_request_timeout`] of it, no more than [`ServeOptions::idle_timeout`]
//! between requests (HTTP/1.1 keep-alive and HTTP/2 alike), HTTP/2 pings to find peers that
//! went away, and at most [`ServeOptions::max_connections`] at once.
//!
//! At the limit a new connection is not turned away while another sits idle: the connection
//! idle the longest (no request in flight, handshakes and silent connections included) is
//! closed to make room (HTTP/2 gets a GOAWAY, HTTP/1.1 is closed between requests). Only when
//! every connection has a request in flight is the new one refused. So idle connections, however
//! many an attacker opens, cannot lock real clients out; busy ones are bounded by the request
//! timeout and the limits on delegated lookups.
//!
//! The defaults follow kube-apiserver (`secure_serving.go`): 32 s to read a request's headers,
//! 90 s idle for HTTP/1.1 and HTTP/2, 250 concurrent streams.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Bounds on connections; see the module docs. [`ServeOptions::default`] is kube-apiserver's,
/// with a connection limit for a 1024-descriptor process.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How long a TLS handshake may take (10 s).
    pub handshake_timeout: Duration,
    /// How long after the handshake the first request's headers must be in (32 s, kube's
    /// ReadHeaderTimeout); also the limit for reading any HTTP/1.1 request's headers.
    pub first_request_timeout: Duration,
    /// How long a connection may stay open with no request in flight (90 s, kube's
    /// IdleTimeout for HTTP/1.1 and HTTP/2).
    pub idle_timeout: Duration,
    /// How often an HTTP/2 connection is pinged (30 s), and how long the answer may take
    /// (`h2_ping_timeout`, 20 s) before the connection is closed.
    pub h2_ping_interval: Duration,
    /// See `h2_ping_interval`.
    pub h2_ping_timeout: Duration,
    /// The most connections open at once, handshakes included.
    pub max_connections: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            handshake_timeout: Duration::from_secs(10),
            first_request_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            h2_ping_interval: Duration::from_secs(30),
            h2_ping_timeout: Duration::from_secs(20),
            max_connections: max_connections_for(1024),
        }
    }
}

/// Descriptors kept for everything but client connections: files, watches, the connections to
/// kube-apiserver (delegated lookups among them), the log.
pub const RESERVED_DESCRIPTORS: u64 = 512;

/// The default connection limit for a process that may open `descriptors` files: three
/// quarters of what [`RESERVED_DESCRIPTORS`] leaves, at least 64 and at most 65,536.
pub fn max_connections_for(descriptors: u64) -> usize {
    let spare = descriptors.saturating_sub(RESERVED_DESCRIPTORS) / 4 * 3;
    usize::try_from(spare.clamp(64, 65_536)).unwrap_or(65_536)
}

/// Why a connection was closed by warrant (a `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// The handshake did not finish in time.
    HandshakeTimeout,
    /// The handshake failed (a bad certificate, not TLS at all).
    HandshakeFailed,
    /// No request arrived in time after the handshake.
    FirstRequestTimeout,
    /// No request for the idle timeout.
    Idle,
    /// Closed, idle, to make room for a new connection at the limit.
    Shed,
    /// A new connection refused at the limit: every open one had a request in flight.
    Refused,
}

impl Closed {
    fn label(self) -> &'static str {
        match self {
            Closed::HandshakeTimeout => "handshake_timeout",
            Closed::HandshakeFailed => "handshake_failed",
            Closed::FirstRequestTimeout => "first_request_timeout",
            Closed::Idle => "idle",
            Closed::Shed => "shed",
            Closed::Refused => "refused",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabels {
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// What a connection is doing, for the idle watch and the choice of whom to shed. Atomics,
/// written by requests and read by the watch when its timer fires: a request's start and end
/// wake nobody (a watch channel here cost each request two task wake-ups and a timer
/// re-registration: docs/benchmarks.md).
#[derive(Debug)]
struct Activity {
    /// Requests being answered.
    in_flight: AtomicUsize,
    /// Whether any request has started.
    started: AtomicBool,
    /// Since when nothing has been in flight (the accept, or the last request's end), in
    /// nanoseconds after `base`.
    idle_since: AtomicU64,
    base: Instant,
}

impl Activity {
    fn new(now: Instant) -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            started: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            base: now,
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    fn idle_since(&self) -> Instant {
        self.base + Duration::from_nanos(self.idle_since.load(Ordering::Acquire))
    }

    fn set_idle_since(&self, now: Instant) {
        let nanos =
            u64::try_from(now.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX);
        self.idle_since.fetch_max(nanos, Ordering::AcqRel);
    }
}

/// One open connection, as the tracker and its own task see it.
pub(crate) struct Connection {
    id: u64,
    activity: Arc<Activity>,
    shed: CancellationToken,
    protocol: Mutex<&'static str>,
    tracker: Arc<Inner>,
}

impl Connection {
    /// A request starts.
    pub(crate) fn begin(&self) {
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        self.activity.started.store(true, Ordering::Release);
    }

    /// A request ended at `now`.
    pub(crate) fn end(&self, now: Instant) {
        // The idle time first, then the count: a watch that looks between the two sees a
        // request still in flight, never "none in flight" with the idle time of an earlier one
        // (which closed a connection whose request had just ended). Moving the idle time on
        // while other requests run is harmless: the watch ignores it until none do.
        self.activity.set_idle_since(now);
        self.activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// The handshake ended at `now` and chose `protocol` (`http1`, `h2`): the wait for the
    /// first request starts.
    pub(crate) fn handshaken(&self, protocol: &'static str, now: Instant) {
        self.activity.set_idle_since(now);
        let mut current = self.protocol.lock().unwrap_or_else(PoisonError::into_inner);
        self.tracker.open(*current).dec();
        *current = protocol;
        self.tracker.open(protocol).inc();
    }

    /// Resolves when this connection should close, and why: it stayed idle too long, or the
    /// tracker shed it. Never while a request is in flight, unless shed.
    ///
    /// It wakes only when its timer fires, and then looks: with a request in flight it looks
    /// again a whole limit later; otherwise at the limit after the last request ended, which is
    /// when it closes if nothing started since.
    pub(crate) async fn close_reason(&self, options: &ServeOptions) -> Closed {
        let activity = &self.activity;
        loop {
            let (limit, reason) = if activity.started.load(Ordering::Acquire) {
                (options.idle_timeout, Closed::Idle)
            } else {
                (options.first_request_timeout, Closed::FirstRequestTimeout)
            };
            let now = Instant::now();
            let deadline = if activity.in_flight() > 0 {
                now + limit
            } else {
                activity.idle_since() + limit
            };
            if deadline <= now {
                return reason;
            }
            tokio::select! {
                () = self.shed.cancelled() => return Closed::Shed,
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Resolves when the tracker sheds this connection to make room (during the handshake, the
    /// only reason to close it besides the handshake timeout).
    pub(crate) async fn shed(&self) {
        self.shed.cancelled().await;
    }

    /// Counts a close by warrant.
    pub(crate) fn closed(&self, reason: Closed) {
        self.tracker.closed(reason);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let protocol = *self.protocol.lock().unwrap_or_else(PoisonError::into_inner);
        self.tracker.open(protocol).dec();
        self.tracker
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// Handle on a tracked connection kept by the tracker: enough to choose and shed.
struct Tracked {
    activity: Arc<Activity>,
    shed: CancellationToken,
}

struct Inner {
    connections: Mutex<HashMap<u64, Tracked>>,
    next_id: AtomicU64,
    max: usize,
    open: Family<ProtocolLabels, Gauge>,
    closed: Family<ReasonLabels, Counter>,
    accept_errors: Counter,
}

impl Inner {
    fn open(&self, protocol: &'static str) -> Gauge {
        self.open
            .get_or_create(&ProtocolLabels { protocol })
            .clone()
    }

    fn closed(&self, reason: Closed) {
        self.closed
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc();
    }
}

/// The connection idle the longest (nothing in flight), if any: the one to close for room.
fn idlest(connections: &HashMap<u64, Tracked>) -> Option<u64> {
    connections
        .iter()
        .filter(|(_, c)| c.activity.in_flight() == 0)
        .min_by_key(|(_, c)| c.activity.idle_since())
        .map(|(id, _)| *id)
}

/// The open connections, their limit and their metrics.
#[derive(Clone)]
pub struct Connections {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("max", &self.inner.max)
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// At most `max` open at once.
    pub fn new(max: usize) -> Self {
        Connections {
            inner: Arc::new(Inner {
                connections: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
                max: max.max(1),
                open: Family::default(),
                closed: Family::default(),
                accept_errors: Counter::default(),
            }),
        }
    }

    /// Registers `warrant_connections_open{protocol}`, `warrant_connections_closed_total{reason}`
    /// and `warrant_accept_errors_total`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "warrant_connections_open",
            "Client connections open, by protocol (tls while the handshake runs, http1, h2)",
            self.inner.open.clone(),
        );
        registry.register(
            "warrant_connections_closed",
            "Client connections warrant closed or refused, by reason (handshake_timeout, handshake_failed, first_request_timeout, idle, shed, refused)",
            self.inner.closed.clone(),
        );
        registry.register(
            "warrant_accept_errors",
            "Failures to accept a connection (out of descriptors, and the like)",
            self.inner.accept_errors.clone(),
        );
    }

    /// Takes a new connection accepted at `now`: `None` (counted as refused) if the limit is
    /// reached and no open connection is idle; otherwise the longest-idle one is shed first.
    pub(crate) fn admit(&self, now: Instant) -> Option<Arc<Connection>> {
        let mut connections = self
            .inner
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if connections.len() >= self.inner.max {
            match idlest(&connections).and_then(|id| connections.remove(&id)) {
                Some(victim) => {
                    victim.shed.cancel();
                    // Its task counts the close once it has closed.
                }
                None => {
                    drop(connections);
                    self.inner.closed(Closed::Refused);
                    return None;
                }
            }
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(now));
        let shed = CancellationToken::new();
        connections.insert(
            id,
            Tracked {
                activity: activity.clone(),
                shed: shed.clone(),
            },
        );
        drop(connections);
        self.inner.open("tls").inc();
        Some(Arc::new(Connection {
            id,
            activity,
            shed,
            protocol: Mutex::new("tls"),
            tracker: self.inner.clone(),
        }))
    }

    /// Sheds the longest-idle connection, if any: after a failed accept (out of descriptors),
    /// one comes free for the next client.
    pub(crate) fn shed_one(&self) -> bool {
        let mut connections = self
            .inner
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match idlest(&connections).and_then(|id| connections.remove(&id)) {
            Some(victim) => {
                victim.shed.cancel();
                true
            }
            None => false,
        }
    }

    /// Counts a failed accept.
    pub(crate) fn accept_error(&self) {
        self.inner.accept_errors.inc();
    }

    /// How many are open.
    pub fn open(&self) -> usize {
        self.inner
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_limit_leaves_room_for_everything_else() {
        assert_eq!(max_connections_for(256), 64);
        assert_eq!(max_connections_for(1024), 384);
        assert_eq!(max_connections_for(65_536), 48_768);
        assert_eq!(max_connections_for(u64::MAX), 65_536);
    }

    #[tokio::test(start_paused = true)]
    async fn connections_close_when_idle_and_never_mid_request() {
        let options = ServeOptions::default();
        let connections = Connections::new(8);
        let conn = connections.admit(Instant::now()).unwrap();
        // Nothing after the handshake: closed at the first-request timeout.
        let started = Instant::now();
        assert_eq!(
            conn.close_reason(&options).await,
            Closed::FirstRequestTimeout
        );
        assert_eq!(Instant::now() - started, options.first_request_timeout);

        let conn = connections.admit(Instant::now()).unwrap();
        conn.begin();
        // A request in flight for longer than any timeout: not closed for idleness.
        let waiting = tokio::time::timeout(Duration::from_secs(3600), conn.close_reason(&options));
        assert!(waiting.await.is_err());
        conn.end(Instant::now());
        let ended = Instant::now();
        assert_eq!(conn.close_reason(&options).await, Closed::Idle);
        assert_eq!(Instant::now() - ended, options.idle_timeout);
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_limit_the_longest_idle_is_shed_and_busy_ones_are_kept() {
        let options = ServeOptions::default();
        let connections = Connections::new(2);
        let t0 = Instant::now();
        let old = connections.admit(t0).unwrap();
        let busy = connections.admit(t0 + Duration::from_secs(1)).unwrap();
        busy.begin();
        // Full: the new one gets in, the idle one goes.
        let new = connections.admit(t0 + Duration::from_secs(2)).unwrap();
        assert_eq!(old.close_reason(&options).await, Closed::Shed);
        assert_eq!(connections.open(), 2);
        // Full of busy ones: refused.
        new.begin();
        assert!(connections.admit(t0 + Duration::from_secs(3)).is_none());
        drop((old, busy, new));
        assert_eq!(connections.open(), 0);
    }
}
