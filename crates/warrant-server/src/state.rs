//! Everything a request handler needs, shared by all of them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwapOption;
use prometheus_client::registry::Registry;
use warrant_objects::Objects;

use crate::admission::plan::InjectionSettings;
use crate::admission::webhook::Webhook;

use crate::metrics::Metrics;
use crate::spiffe::roots::ServedRoots;
use warrant_auth::{Authenticator, Authorizer};
use warrant_issuer::Issuer;

/// The server's shared state. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    issuer: Issuer,
    objects: Objects,
    authenticator: Authenticator,
    authorizer: Authorizer,
    metrics: Metrics,
    registry: Registry,
    reports: Mutex<Vec<(&'static str, Report)>>,
    checks: Mutex<Vec<(&'static str, ReadinessCheck)>>,
    /// Set when shutdown begins: readiness fails from then on.
    shutting_down: AtomicBool,
    /// Token injection's settings; `None` until [`AppState::set_injection`] (the webhook
    /// route then answers that it is not configured).
    injection: ArcSwapOption<InjectionSettings>,
    /// Token injection's webhook: its metrics, reviews in flight and lookups.
    admission: Webhook,
    /// The X.509 roots of the SPIFFE bundle; `None` (no bundle served) until
    /// [`AppState::set_spiffe_roots`].
    spiffe: ArcSwapOption<ServedRoots>,
}

/// A line of `/readyz?verbose` that a component computes when asked (see
/// [`AppState::add_report`]).
type Report = Box<dyn Fn() -> String + Send + Sync>;

/// A readiness check that a component computes when asked (see [`AppState::add_check`]):
/// `None` when ready, else why not.
type ReadinessCheck = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// What it takes to build the state.
pub struct StateParts {
    /// The issuer: settings, keys, clock and auditor, shared with the signer socket.
    pub issuer: Issuer,
    /// Where objects come from.
    pub objects: Objects,
    /// Who may call.
    pub authenticator: Authenticator,
    /// What callers may do.
    pub authorizer: Authorizer,
    /// A registry other components have already registered their metrics in.
    pub registry: Registry,
}

impl AppState {
    /// Builds the state, registering the API's own metrics.
    pub fn new(parts: StateParts) -> AppState {
        let StateParts {
            issuer,
            objects,
            authenticator,
            authorizer,
            mut registry,
        } = parts;
        let metrics = Metrics::register(&mut registry);
        let admission = Webhook::register(&mut registry);
        authenticator.register_metrics(&mut registry);
        authorizer.register_metrics(&mut registry);
        AppState {
            inner: Arc::new(Inner {
                issuer,
                objects,
                authenticator,
                authorizer,
                metrics,
                registry,
                reports: Mutex::new(Vec::new()),
                checks: Mutex::new(Vec::new()),
                shutting_down: AtomicBool::new(false),
                injection: ArcSwapOption::empty(),
                admission,
                spiffe: ArcSwapOption::empty(),
            }),
        }
    }

    /// The issuer this API serves (shared with the signer socket).
    pub fn issuer(&self) -> &Issuer {
        &self.inner.issuer
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

    /// Turns token injection on, or replaces its settings (a renewed CA bundle): reviews
    /// from now on use these.
    pub fn set_injection(&self, settings: InjectionSettings) {
        self.inner
            .admission
            .metrics
            .anonymous_allowed(settings.callers.anonymous());
        self.inner.injection.store(Some(Arc::new(settings)));
    }

    /// Serves the SPIFFE bundle (`/.well-known/spiffe-bundle`) with these X.509 roots (DER,
    /// the pod certificate CA's) beside the JWKS's keys, or replaces them after a CA rotation.
    pub fn set_spiffe_roots(&self, roots: warrant_issuer::SpiffeRoots) {
        let roots = ServedRoots::new(roots);
        self.inner.spiffe.store(Some(Arc::new(roots)));
    }

    /// The SPIFFE bundle's roots, if it is served.
    pub(crate) fn spiffe_roots(&self) -> Option<Arc<ServedRoots>> {
        self.inner.spiffe.load_full()
    }

    /// Token injection's settings, if it is on.
    pub(crate) fn injection(&self) -> Option<Arc<InjectionSettings>> {
        self.inner.injection.load_full()
    }

    pub(crate) fn admission(&self) -> &Webhook {
        &self.inner.admission
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

    /// Adds a readiness check `NAME` (`/readyz/NAME`, and a line of `/readyz`): `check` says,
    /// at each request, why the component is not ready, or `None`. For components without
    /// which requests fail, such as discovery publishing that holds a key back.
    pub fn add_check(
        &self,
        name: &'static str,
        check: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) {
        self.inner
            .checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name, Box::new(check)));
    }

    /// The checks added with [`add_check`](Self::add_check), as (name, failure), computed now.
    pub(crate) fn checks(&self) -> Vec<(&'static str, Option<String>)> {
        self.inner
            .checks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, check)| (*name, check()))
            .collect()
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

#[cfg(test)]
impl AppState {
    /// A state for the crate's unit tests: an issuer at `https://warrant.test` with a fresh
    /// P-256 key on a manual clock, no objects, `authenticator`, kube's default authorizer
    /// (`system:masters` may do anything) and `audit`.
    pub(crate) fn for_tests(
        authenticator: Authenticator,
        audit: warrant_audit::Auditor,
    ) -> AppState {
        use warrant_token::{ExpirationPolicy, KeyType, SigningKey};
        let issuer = Issuer::new(
            warrant_issuer::Settings {
                issuers: vec!["https://warrant.test".into()],
                api_audiences: vec!["https://warrant.test".into()],
                jwks_uri: "https://warrant.test/openid/v1/jwks".into(),
                expiration: ExpirationPolicy::default(),
                signature_cache_entries: 0,
                jwks_x5c: false,
            },
            warrant_keys::KeySet::new(SigningKey::generate(KeyType::P256).unwrap(), vec![]),
            warrant_clock::Clock::manual(jiff::Timestamp::from_second(1_800_000_000).unwrap()),
            audit,
        );
        AppState::new(StateParts {
            issuer,
            objects: Objects::new(std::sync::Arc::new(warrant_objects::MemorySource::new())),
            authenticator,
            authorizer: Authorizer::default(),
            registry: Registry::default(),
        })
    }
}
