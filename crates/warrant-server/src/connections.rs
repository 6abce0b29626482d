//! The connections warrant holds open, and the bounds that keep a client from holding them for
//! nothing: a TLS handshake in [`ServeOptions::handshake_timeout`], a first request within
//! [`ServeOptions::first_request_timeout`] of it, no more than [`ServeOptions::idle_timeout`]
//! between requests (HTTP/1.1 keep-alive and HTTP/2 alike), HTTP/2 pings to find peers that
//! went away, at most [`ServeOptions::max_connections`] at once, and at most
//! [`ServeOptions::max_connections_per_address`] from one client address.
//!
//! At a limit a new connection is not turned away while another could make room. The one
//! closed for it (HTTP/2 gets a GOAWAY, HTTP/1.1 is closed between requests) is never one with
//! a request in flight, and is chosen by what it has shown of itself, cheapest to lose first:
//!
//! 1. one still in its TLS handshake (bare TCP connects cost an attacker nothing), the oldest;
//! 2. one that finished its handshake but has had no request answered, the longest idle;
//! 3. one whose requests were all anonymous, the longest idle;
//! 4. one on which a request authenticated, the longest idle, and only once it is
//!    [`ServeOptions::established_min_age`] old.
//!
//! So a flood of connections that never speak sheds only its own kind, and a kept-alive client
//! (kube-apiserver's webhook connection) is not closed for it. Only when nothing may make room
//! is the new connection refused. At the per-address limit the choice is made among that
//! address's own connections: one address cannot take every slot. IPv6 addresses count by
//! their /64 (one host's usual allocation); IPv4-mapped ones as IPv4.
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
    /// The most connections open at once from one client address (an IPv6 /64), handshakes
    /// included; see [`default_per_address`].
    pub max_connections_per_address: usize,
    /// How long a connection on which a request authenticated is safe from being closed to
    /// make room (30 s): long enough that a client's new connection is not taken from it by
    /// the next newcomer.
    pub established_min_age: Duration,
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
            max_connections_per_address: default_per_address(max_connections_for(1024)),
            established_min_age: Duration::from_secs(30),
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

/// The default per-address limit for a limit of `max` connections: half of it (at least one),
/// so that one address, however many connections it opens, leaves the other half to everyone
/// else. Behind a proxy that hides client addresses (a load balancer that rewrites the source),
/// every client shares one address: raise it to `max` there.
pub fn default_per_address(max: usize) -> usize {
    (max / 2).max(1)
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
    /// A new connection refused at the limit: no open one could make room (each had a request
    /// in flight, or had authenticated and was younger than the minimum age).
    Refused,
    /// A new connection refused at the per-address limit: none of that address's connections
    /// could make room.
    AddressLimit,
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
            Closed::AddressLimit => "address_limit",
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
    /// Whether the TLS handshake has finished.
    handshaken: AtomicBool,
    /// Whether a request on it authenticated (a user, not anonymous).
    authenticated: AtomicBool,
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
            handshaken: AtomicBool::new(false),
            authenticated: AtomicBool::new(false),
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
        self.activity.handshaken.store(true, Ordering::Release);
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

    /// What a request on this connection carries, to say that it authenticated.
    pub(crate) fn mark(&self) -> ConnectionMark {
        ConnectionMark(self.activity.clone())
    }
}

/// A request's handle on its connection (a request extension): the authentication step marks
/// the connection as established by an authenticated client, the last kind closed to make
/// room (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct ConnectionMark(Arc<Activity>);

impl ConnectionMark {
    /// A request on this connection authenticated as a user.
    pub(crate) fn authenticated(&self) {
        self.0.authenticated.store(true, Ordering::Release);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let protocol = *self.protocol.lock().unwrap_or_else(PoisonError::into_inner);
        self.tracker.open(protocol).dec();
        // Gone already if it was shed.
        self.tracker
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(self.id);
    }
}

/// Handle on a tracked connection kept by the tracker: enough to choose and shed.
struct Tracked {
    activity: Arc<Activity>,
    shed: CancellationToken,
    address: Address,
    accepted: Instant,
}

/// A client address as the per-address limit counts it: an IPv4 address, or an IPv6 /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Address {
    V4(std::net::Ipv4Addr),
    V6Prefix(u64),
}

impl Address {
    fn of(ip: std::net::IpAddr) -> Address {
        match ip {
            std::net::IpAddr::V4(v4) => Address::V4(v4),
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Address::V4(v4),
                None => Address::V6Prefix(u64::try_from(v6.to_bits() >> 64).unwrap_or(u64::MAX)),
            },
        }
    }
}

/// The open connections and how many each address holds, under one lock.
#[derive(Default)]
struct Table {
    connections: HashMap<u64, Tracked>,
    per_address: HashMap<Address, usize>,
}

impl Table {
    fn insert(&mut self, id: u64, tracked: Tracked) {
        *self.per_address.entry(tracked.address).or_insert(0) += 1;
        self.connections.insert(id, tracked);
    }

    fn remove(&mut self, id: u64) -> Option<Tracked> {
        let tracked = self.connections.remove(&id)?;
        if let std::collections::hash_map::Entry::Occupied(mut count) =
            self.per_address.entry(tracked.address)
        {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
        Some(tracked)
    }

    fn count_from(&self, address: Address) -> usize {
        self.per_address.get(&address).copied().unwrap_or(0)
    }

    /// Closes the connection that should make room (from `address` only, if given): see the
    /// module docs for the order. False if none may.
    fn shed(&mut self, address: Option<Address>, now: Instant, min_age: Duration) -> bool {
        let victim = self
            .connections
            .iter()
            .filter(|(_, c)| address.is_none_or(|a| a == c.address))
            .filter_map(|(id, c)| Some((shed_rank(c, now, min_age)?, *id)))
            .min()
            .map(|(_, id)| id);
        match victim.and_then(|id| self.remove(id)) {
            Some(victim) => {
                // Its task counts the close once it has closed.
                victim.shed.cancel();
                true
            }
            None => false,
        }
    }
}

/// Where a connection stands in the order of whom to close for room (lowest first; see the
/// module docs), or `None` if it may not be closed: a request is in flight, or it
/// authenticated less than `min_age` ago.
fn shed_rank(c: &Tracked, now: Instant, min_age: Duration) -> Option<(u8, Instant)> {
    let activity = &c.activity;
    if activity.in_flight() > 0 {
        return None;
    }
    let class = if !activity.handshaken.load(Ordering::Acquire) {
        0
    } else if !activity.started.load(Ordering::Acquire) {
        1
    } else if !activity.authenticated.load(Ordering::Acquire) {
        2
    } else if now.saturating_duration_since(c.accepted) >= min_age {
        3
    } else {
        return None;
    };
    Some((class, activity.idle_since()))
}

struct Inner {
    table: Mutex<Table>,
    next_id: AtomicU64,
    max: usize,
    max_per_address: usize,
    min_age: Duration,
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

/// The open connections, their limit and their metrics.
#[derive(Clone)]
pub struct Connections {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("max", &self.inner.max)
            .field("max_per_address", &self.inner.max_per_address)
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// At most `options.max_connections` open at once, and
    /// `options.max_connections_per_address` from one address; connections that authenticated
    /// are kept for `options.established_min_age` at least.
    pub fn new(options: &ServeOptions) -> Self {
        let max = options.max_connections.max(1);
        Connections {
            inner: Arc::new(Inner {
                table: Mutex::new(Table::default()),
                next_id: AtomicU64::new(0),
                max,
                max_per_address: options.max_connections_per_address.clamp(1, max),
                min_age: options.established_min_age,
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
            "Client connections warrant closed or refused, by reason (handshake_timeout, handshake_failed, first_request_timeout, idle, shed, refused, address_limit)",
            self.inner.closed.clone(),
        );
        registry.register(
            "warrant_accept_errors",
            "Failures to accept a connection (out of descriptors, and the like)",
            self.inner.accept_errors.clone(),
        );
    }

    /// Takes a new connection from `peer` accepted at `now`: `None` (counted as refused) if a
    /// limit is reached and nothing may make room; otherwise a connection is shed first if
    /// needed (see the module docs).
    pub(crate) fn admit(&self, peer: std::net::IpAddr, now: Instant) -> Option<Arc<Connection>> {
        let address = Address::of(peer);
        let inner = &self.inner;
        let mut table = inner.table.lock().unwrap_or_else(PoisonError::into_inner);
        if table.count_from(address) >= inner.max_per_address
            && !table.shed(Some(address), now, inner.min_age)
        {
            drop(table);
            inner.closed(Closed::AddressLimit);
            return None;
        }
        if table.connections.len() >= inner.max && !table.shed(None, now, inner.min_age) {
            drop(table);
            inner.closed(Closed::Refused);
            return None;
        }
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(now));
        let shed = CancellationToken::new();
        table.insert(
            id,
            Tracked {
                activity: activity.clone(),
                shed: shed.clone(),
                address,
                accepted: now,
            },
        );
        drop(table);
        inner.open("tls").inc();
        Some(Arc::new(Connection {
            id,
            activity,
            shed,
            protocol: Mutex::new("tls"),
            tracker: inner.clone(),
        }))
    }

    /// Sheds one connection, in the same order as at the limit, if one may go: after a failed
    /// accept (out of descriptors) at `now`, one comes free for the next client.
    pub(crate) fn shed_one(&self, now: Instant) -> bool {
        self.inner
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shed(None, now, self.inner.min_age)
    }

    /// Counts a failed accept.
    pub(crate) fn accept_error(&self) {
        self.inner.accept_errors.inc();
    }

    /// How many are open.
    pub fn open(&self) -> usize {
        self.inner
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .connections
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

    const HERE: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn limits(max: usize, per_address: usize) -> ServeOptions {
        ServeOptions {
            max_connections: max,
            max_connections_per_address: per_address,
            ..ServeOptions::default()
        }
    }

    /// A connection from `peer`, handshaken and answered once (and authenticated, if
    /// `authenticated`), idle since `at`.
    fn used(
        connections: &Connections,
        peer: std::net::IpAddr,
        at: Instant,
        authenticated: bool,
    ) -> Arc<Connection> {
        let conn = connections.admit(peer, at).unwrap();
        conn.handshaken("http1", at);
        conn.begin();
        if authenticated {
            conn.mark().authenticated();
        }
        conn.end(at);
        conn
    }

    fn is_shed(conn: &Connection) -> bool {
        conn.shed.is_cancelled()
    }

    #[tokio::test(start_paused = true)]
    async fn connections_close_when_idle_and_never_mid_request() {
        let options = ServeOptions::default();
        let connections = Connections::new(&limits(8, 8));
        let conn = connections.admit(HERE, Instant::now()).unwrap();
        // Nothing after the handshake: closed at the first-request timeout.
        let started = Instant::now();
        assert_eq!(
            conn.close_reason(&options).await,
            Closed::FirstRequestTimeout
        );
        assert_eq!(Instant::now() - started, options.first_request_timeout);

        let conn = connections.admit(HERE, Instant::now()).unwrap();
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
    async fn at_the_limit_an_idle_one_is_shed_and_busy_ones_are_kept() {
        let options = ServeOptions::default();
        let connections = Connections::new(&limits(2, 2));
        let t0 = Instant::now();
        let old = used(&connections, HERE, t0, false);
        let busy = connections
            .admit(HERE, t0 + Duration::from_secs(1))
            .unwrap();
        busy.begin();
        // Full: the new one gets in, the idle one goes.
        let new = connections
            .admit(HERE, t0 + Duration::from_secs(2))
            .unwrap();
        assert_eq!(old.close_reason(&options).await, Closed::Shed);
        assert_eq!(connections.open(), 2);
        // Full of busy ones: refused.
        new.begin();
        assert!(
            connections
                .admit(HERE, t0 + Duration::from_secs(3))
                .is_none()
        );
        drop((old, busy, new));
        assert_eq!(connections.open(), 0);
    }

    /// A flood of connections that never handshake sheds only its own kind, oldest first,
    /// however long the clients that spoke have been idle; then the silent, then the
    /// anonymous, then (past the minimum age) the authenticated, longest idle first.
    #[test]
    fn the_cheapest_to_lose_goes_first() {
        let connections = Connections::new(&limits(4, 4));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let kept_alive = used(&connections, HERE, at(0), true);
        let anonymous = used(&connections, HERE, at(1), false);
        let silent = connections.admit(HERE, at(2)).unwrap();
        silent.handshaken("h2", at(2));
        let mut flood = vec![connections.admit(HERE, at(3)).unwrap()];
        for s in 4..100 {
            flood.push(connections.admit(HERE, at(s)).unwrap());
            // The one shed is the flood's previous (oldest) connection.
            assert!(flood.iter().rev().skip(1).all(|c| is_shed(c)), "at {s}");
            assert!(!is_shed(flood.last().unwrap()));
            assert!(!is_shed(&kept_alive) && !is_shed(&anonymous) && !is_shed(&silent));
        }
        // Without bare connections to shed: the silent one, then the anonymous one.
        let latest = flood.pop().unwrap();
        latest.handshaken("h2", at(100));
        latest.begin();
        let a = used(&connections, HERE, at(101), true);
        assert!(is_shed(&silent) && !is_shed(&anonymous));
        let b = used(&connections, HERE, at(102), true);
        assert!(is_shed(&anonymous) && !is_shed(&kept_alive));
        // Then the authenticated one idle the longest, old enough by now.
        let _c = connections.admit(HERE, at(103)).unwrap();
        assert!(is_shed(&kept_alive));
        assert!(!is_shed(&a) && !is_shed(&b) && !is_shed(&latest));
    }

    /// An authenticated connection younger than the minimum age is not closed for a
    /// newcomer: the newcomer is refused, and is let in once the minimum age has passed.
    #[test]
    fn authenticated_connections_have_a_minimum_age() {
        let options = limits(2, 2);
        let connections = Connections::new(&options);
        let t0 = Instant::now();
        let a = used(&connections, HERE, t0, true);
        let b = used(&connections, HERE, t0, true);
        let young = t0 + options.established_min_age - Duration::from_secs(1);
        assert!(connections.admit(HERE, young).is_none());
        assert!(!is_shed(&a) && !is_shed(&b));
        let old_enough = t0 + options.established_min_age;
        let _c = connections.admit(HERE, old_enough).unwrap();
        assert!(is_shed(&a) ^ is_shed(&b));
    }

    /// One address holds at most its share: its own connections make room for its
    /// newcomers, others' are untouched, and an IPv6 /64 counts as one address.
    #[test]
    fn one_address_holds_at_most_its_share() {
        let connections = Connections::new(&limits(8, 2));
        let t0 = Instant::now();
        let other: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        let kept = connections.admit(other, t0).unwrap();
        let mut flood = Vec::new();
        for s in 1..50 {
            flood.push(
                connections
                    .admit(HERE, t0 + Duration::from_secs(s))
                    .unwrap(),
            );
            assert!(connections.open() <= 3, "at {s}");
        }
        assert!(!is_shed(&kept));
        assert_eq!(flood.iter().filter(|c| !is_shed(c)).count(), 2);
        // An address whose connections may not make room is refused, not let past its share.
        for c in flood.iter().filter(|c| !is_shed(c)) {
            c.begin();
        }
        assert!(
            connections
                .admit(HERE, t0 + Duration::from_secs(60))
                .is_none()
        );
        assert!(
            connections
                .admit(other, t0 + Duration::from_secs(60))
                .is_some()
        );

        let v6 = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(
            Address::of(v6("2001:db8:1:2::1")),
            Address::of(v6("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            Address::of(v6("2001:db8:1:2::1")),
            Address::of(v6("2001:db8:1:3::1"))
        );
        assert_eq!(Address::of(v6("::ffff:127.0.0.1")), Address::of(HERE));
    }
}
