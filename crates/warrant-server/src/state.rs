//! Everything a request handler needs, shared by all of them.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use jiff::Timestamp;
use prometheus_client::registry::Registry;
use warrant_keys::KeySet;
use warrant_objects::Objects;

use crate::metrics::Metrics;
use crate::published::Published;
use crate::settings::Settings;
use warrant_audit::Auditor;
use warrant_auth::{Authenticator, Authorizer};
use warrant_clock::Clock;

/// The server's shared state. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    published: ArcSwap<Published>,
    objects: Objects,
    authenticator: Authenticator,
    authorizer: Authorizer,
    metrics: Metrics,
    registry: Registry,
    clock: Clock,
    audit: Auditor,
    reports: Mutex<Vec<(&'static str, Report)>>,
    /// When the published keys last changed (in whole seconds since the epoch).
    keys_changed_at: AtomicI64,
    /// [`Settings::issuer_path`], worked out once.
    issuer_path: String,
    /// Set when shutdown begins: readiness fails from then on.
    shutting_down: AtomicBool,
}

/// A line of `/readyz?verbose` that a component computes when asked (see
/// [`AppState::add_report`]).
type Report = Box<dyn Fn() -> String + Send + Sync>;

/// What it takes to build the state.
pub struct StateParts {
    /// Issuer settings.
    pub settings: Settings,
    /// The initial keys.
    pub keys: KeySet,
    /// Where objects come from.
    pub objects: Objects,
    /// Who may call.
    pub authenticator: Authenticator,
    /// What callers may do.
    pub authorizer: Authorizer,
    /// A registry other components have already registered their metrics in.
    pub registry: Registry,
    /// The clock.
    pub clock: Clock,
    /// Where audit events go ([`Auditor::disabled`] without an audit log).
    pub audit: Auditor,
}

impl AppState {
    /// Builds the state, registering the API's own metrics.
    pub fn new(parts: StateParts) -> AppState {
        let StateParts {
            settings,
            keys,
            objects,
            authenticator,
            authorizer,
            mut registry,
            clock,
            audit,
        } = parts;
        let metrics = Metrics::register(&mut registry);
        authenticator.register_metrics(&mut registry);
        authorizer.register_metrics(&mut registry);
        let published = ArcSwap::from_pointee(Published::new(&settings, keys));
        let keys_changed_at = AtomicI64::new(clock.now().as_second());
        let issuer_path = settings.issuer_path();
        AppState {
            inner: Arc::new(Inner {
                settings,
                published,
                objects,
                authenticator,
                authorizer,
                metrics,
                registry,
                clock,
                audit,
                reports: Mutex::new(Vec::new()),
                keys_changed_at,
                issuer_path,
                shutting_down: AtomicBool::new(false),
            }),
        }
    }

    /// Where audit events go.
    pub fn audit(&self) -> &Auditor {
        &self.inner.audit
    }

    /// Issuer settings.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The keys and documents in force. A handler loads this once and uses that snapshot
    /// throughout, so a key change never splits a request between two key sets.
    pub fn published(&self) -> Arc<Published> {
        self.inner.published.load_full()
    }

    /// Replaces the keys; documents are re-rendered once, here.
    pub fn set_keys(&self, keys: KeySet) {
        if !self.published().keys().same_keys(&keys) {
            self.inner
                .keys_changed_at
                .store(self.inner.clock.now().as_second(), Ordering::Relaxed);
        }
        self.inner
            .published
            .store(Arc::new(Published::new(&self.inner.settings, keys)));
    }

    /// When the published keys last changed (or the server started): what an external signer
    /// reports as the time its key data was taken.
    pub fn keys_changed_at(&self) -> Timestamp {
        Timestamp::from_second(self.inner.keys_changed_at.load(Ordering::Relaxed))
            .unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// The path of the issuer's URL (`/tenant-a`, or empty): discovery is served below it too.
    pub fn issuer_path(&self) -> &str {
        &self.inner.issuer_path
    }

    /// Marks the server as shutting down: `/readyz` fails from now on (so endpoints and
    /// kube-apiserver's webhook stop sending), while requests are still served.
    pub fn begin_shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::Relaxed);
    }

    /// True once [`begin_shutdown`](Self::begin_shutdown) was called.
    pub fn shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::Relaxed)
    }

    /// The objects tokens bind to.
    pub fn objects(&self) -> &Objects {
        &self.inner.objects
    }

    /// Caller authentication.
    pub fn authenticator(&self) -> &Authenticator {
        &self.inner.authenticator
    }

    /// Caller authorization.
    pub fn authorizer(&self) -> &Authorizer {
        &self.inner.authorizer
    }

    /// API metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The registry `/metrics` renders.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// Adds a line to `/readyz?verbose`: `[+]NAME TEXT`, with `report` computed at each request
    /// (`ok`, or what is degraded). It never fails readiness: it is for components that go on
    /// serving while degraded, such as a key store that cannot be read, whose last good keys
    /// still sign and verify.
    pub fn add_report(
        &self,
        name: &'static str,
        report: impl Fn() -> String + Send + Sync + 'static,
    ) {
        self.inner
            .reports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name, Box::new(report)));
    }

    /// The lines added with [`add_report`](Self::add_report), as (name, text), computed now.
    pub(crate) fn reports(&self) -> Vec<(&'static str, String)> {
        self.inner
            .reports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, report)| (*name, report()))
            .collect()
    }
}
