//! The state of the whole cache, kind by kind: each kind's records, whether its first list is
//! complete, when the API server last said anything about it, and whether that is longer ago
//! than the cache may be trusted (`max_staleness`).
//!
//! # Staleness
//!
//! A kind is heard from with every list page, watch event and bookmark. kube-apiserver sends a
//! bookmark to every watch that asks for them (warrant's do) about once a minute, even when
//! nothing changes, so on a healthy connection a kind is never much more than a minute stale;
//! more than that means the watch is cut off or cannot relist, and the records may miss deletions.
//! Past the bound, the kind's records are not trusted: lookups go to the API server as on a
//! miss (a live GET), so a review answers from the authority or, when it is unreachable, fails
//! with a reason, and the source reports itself not ready.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::store::KindStore;
use crate::record::Kind;

/// The monotonic clock the cache measures staleness with: tokio's (which a paused test runtime
/// controls), plus an offset that [`CacheClock::advance`] moves forward, so a test against a
/// real API server connection can put the cache past its staleness bound without waiting.
#[derive(Debug, Clone, Default)]
pub struct CacheClock {
    ahead: Arc<AtomicU64>,
}

impl CacheClock {
    /// The current instant.
    pub fn now(&self) -> Instant {
        Instant::now() + Duration::from_nanos(self.ahead.load(Ordering::Relaxed))
    }

    /// Moves this clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.ahead.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Per kind: the store, whether its first list is complete, and when it last heard from the
/// API server.
#[derive(Debug)]
pub(super) struct KindState {
    pub(super) kind: Kind,
    /// False for a kind the cache does not watch (Secrets with secret binding off): it is
    /// never listed, so it holds nothing, is always a miss, and readiness does not wait for it.
    pub(super) watched: bool,
    pub(super) store: KindStore,
    pub(super) synced: AtomicBool,
    /// Nanoseconds after [`Kinds::start`] of the last event, bookmark or list page.
    last_heard: AtomicU64,
    /// Whether the kind was last seen past the staleness bound (for logging the changes).
    past_bound: AtomicBool,
}

impl KindState {
    fn new(kind: Kind, watched: bool) -> Self {
        KindState {
            kind,
            watched,
            store: KindStore::default(),
            synced: AtomicBool::new(false),
            last_heard: AtomicU64::new(0),
            past_bound: AtomicBool::new(false),
        }
    }
}

/// The per-kind state of the whole cache, the clock staleness is measured with, and the bound.
#[derive(Debug)]
pub(super) struct Kinds {
    clock: CacheClock,
    start: Instant,
    max_staleness: Option<Duration>,
    pub(super) kinds: [KindState; 4],
    /// Moves on every change to the cache and every sign of life from the API server.
    pub(super) changes: tokio::sync::watch::Sender<u64>,
}

impl Kinds {
    /// `watched` says which kinds the cache watches.
    pub(super) fn new(
        clock: CacheClock,
        max_staleness: Option<Duration>,
        watched: impl Fn(Kind) -> bool,
    ) -> Self {
        Kinds {
            start: clock.now(),
            clock,
            max_staleness,
            kinds: Kind::ALL.map(|kind| KindState::new(kind, watched(kind))),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Wakes whoever waits on [`Kinds::changes`].
    pub(super) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(super) fn get(&self, kind: Kind) -> &KindState {
        match kind {
            Kind::ServiceAccount => &self.kinds[0],
            Kind::Pod => &self.kinds[1],
            Kind::Secret => &self.kinds[2],
            Kind::Node => &self.kinds[3],
        }
    }

    /// The API server said something about `kind` just now.
    pub(super) fn heard(&self, kind: Kind) {
        let state = self.get(kind);
        let elapsed = self.clock.now().saturating_duration_since(self.start);
        let elapsed = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        state.last_heard.store(elapsed, Ordering::Relaxed);
        if state.past_bound.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                resource = kind.resource(),
                "the API server is heard from again: the cached records are trusted again"
            );
        }
        self.changed();
    }

    /// When the API server last said anything about `kind` (when the cache started, if it
    /// never has).
    pub(super) fn last_heard(&self, kind: Kind) -> Instant {
        let nanos = self.get(kind).last_heard.load(Ordering::Relaxed);
        self.start + Duration::from_nanos(nanos)
    }

    /// Time since [`Kinds::last_heard`].
    pub(super) fn staleness(&self, kind: Kind) -> Duration {
        self.clock
            .now()
            .saturating_duration_since(self.last_heard(kind))
    }

    /// The kinds the cache watches, in [`Kind::ALL`]'s order.
    pub(super) fn watched(&self) -> impl Iterator<Item = &KindState> {
        self.kinds.iter().filter(|state| state.watched)
    }

    /// The staleness of `kind` when it is past the bound (so its records are not to be
    /// trusted), else `None`; never for a kind that is not watched (nothing is cached to
    /// distrust). Logs when a kind first goes past it.
    pub(super) fn past_bound(&self, kind: Kind) -> Option<Duration> {
        let bound = self.max_staleness?;
        if !self.get(kind).watched {
            return None;
        }
        let staleness = self.staleness(kind);
        if staleness <= bound {
            return None;
        }
        if !self.get(kind).past_bound.swap(true, Ordering::Relaxed) {
            tracing::error!(
                resource = kind.resource(),
                stale_seconds = staleness.as_secs(),
                bound_seconds = bound.as_secs(),
                "nothing from the API server for longer than the cache may be trusted: lookups go to the API server, and readiness fails, until the watch is heard from again"
            );
        }
        Some(staleness)
    }

    /// The configured bound.
    pub(super) fn max_staleness(&self) -> Option<Duration> {
        self.max_staleness
    }
}
