//! Where records come from, and the handle that reads them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::record::{Kind, Record};

/// Why an object could not be looked up (as opposed to "it does not exist"). Its `Display` is
/// the one wording of each cause: TokenRequest's 503, TokenReview's message and the logs use it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Secret binding is off (`--disable-secret-binding`), so Secrets are never looked up.
    #[error("{}", SECRET_BINDING_DISABLED)]
    SecretBindingDisabled,
    /// The cluster cache does not watch this kind (warrant may not read it), so a GET after a
    /// miss would be refused too.
    #[error("{} are not watched: secret binding is disabled", .0.resource())]
    NotWatched(Kind),
    /// The GET to the API server after a cache miss failed.
    #[error("could not look up {}: {cause}", describe(*kind, namespace, name))]
    Live {
        /// The kind looked up.
        kind: Kind,
        /// Its namespace (empty for nodes).
        namespace: String,
        /// Its name.
        name: String,
        /// Why the GET failed.
        #[source]
        cause: LiveError,
    },
    /// The cache is too stale to stand in for the API server, and the GET failed as well.
    #[error(
        "the cache of {} is stale (nothing from the API server for {}s) and {live}",
        kind.resource(),
        staleness.as_secs()
    )]
    Stale {
        /// The kind whose cache is stale.
        kind: Kind,
        /// How long nothing has come from the API server for it.
        staleness: Duration,
        /// Why the GET failed.
        #[source]
        live: Box<LookupError>,
    },
}

/// Why a live GET after a cache miss failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    /// The cluster cache is shutting down: the GET was not sent, or was abandoned.
    #[error("the cluster cache is shutting down")]
    ShuttingDown,
    /// The GET (waiting for its turn included) took longer than the live-lookup timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The API server answered with an object warrant cannot use; the reason is a metric label.
    #[error("the API server returned it malformed ({0})")]
    Malformed(&'static str),
    /// The request failed: the API server's `Status` or a transport error.
    #[error(transparent)]
    Client(ClientError),
    /// The shared lookup could not be joined or ended without an answer.
    #[error("{0}")]
    Flight(#[source] warrant_flight::FlightError),
}

/// A failed request of the kube client, shared by every lookup that joined its GET. `kube::Error`
/// has no equality, so two are equal only when they are the same failure (clones of one).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", cause(.0))]
pub struct ClientError(#[source] pub Arc<::kube::Error>);

/// Why a request failed, in words an operator can act on. A `Status` from the API server is
/// given as its code, reason and message; anything else as its chain of causes.
fn cause(error: &::kube::Error) -> String {
    if let ::kube::Error::Api(status) = error {
        return format!(
            "the API server answered {} {}: {}",
            status.code, status.reason, status.message
        );
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(next) = source {
        let next_text = next.to_string();
        if !text.contains(&next_text) {
            text.push_str(": ");
            text.push_str(&next_text);
        }
        source = next.source();
    }
    text
}

impl PartialEq for ClientError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ClientError {}

/// `pods ns/name`, `nodes name`.
fn describe(kind: Kind, namespace: &str, name: &str) -> String {
    if kind.namespaced() {
        format!("{} {namespace}/{name}", kind.resource())
    } else {
        format!("{} {name}", kind.resource())
    }
}

/// A live lookup in flight.
pub type LiveLookup<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Arc<Record>>, LookupError>> + Send + 'a>>;

/// A store of records: a manifest file, or a cluster's watch cache.
///
/// `namespace` is empty for nodes.
pub trait ObjectSource: Send + Sync + 'static {
    /// The record in memory, without waiting. `None` is a miss, not necessarily "absent".
    fn cached(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Record>>;

    /// Asks the authority after a miss. A file source is its own authority, so the default
    /// answers "absent" at once; a cluster source does a GET.
    fn live<'a>(&'a self, _kind: Kind, _namespace: &'a str, _name: &'a str) -> LiveLookup<'a> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Why the source cannot be trusted to answer (not loaded yet, or no longer current), for
    /// readiness; `None` when it can.
    fn not_ready(&self) -> Option<String>;

    /// True while the source can be trusted to answer (see [`ObjectSource::not_ready`]).
    fn ready(&self) -> bool {
        self.not_ready().is_none()
    }

    /// How many records of `kind` are held (a metric).
    fn count(&self, kind: Kind) -> usize;
}

/// The handle the server uses to look objects up, and which kinds tokens may be bound to.
/// Cheap to clone.
#[derive(Clone)]
pub struct Objects {
    source: Arc<dyn ObjectSource>,
    secret_binding: bool,
}

/// What a lookup of a Secret says while secret binding is off (it never reaches the source).
pub const SECRET_BINDING_DISABLED: &str = "secret binding is disabled on this server";

impl Objects {
    /// Wraps a source; tokens may be bound to any kind it holds.
    pub fn new(source: Arc<dyn ObjectSource>) -> Self {
        Objects {
            source,
            secret_binding: true,
        }
    }

    /// The same source, with Secret-bound tokens refused (`--disable-secret-binding`): for a
    /// server that may not list Secrets, and so cannot tell whether a token's Secret still
    /// exists. Secrets are then never looked up, even where the source holds them.
    pub fn without_secret_binding(self) -> Self {
        Objects {
            secret_binding: false,
            ..self
        }
    }

    /// Whether tokens may be bound to (and reviewed against) objects of `kind`.
    pub fn binds(&self, kind: Kind) -> bool {
        kind != Kind::Secret || self.secret_binding
    }

    /// The object, from memory, or after a miss from a live lookup. `Ok(None)` means it does
    /// not exist. A kind tokens may not be bound to is not looked up: an error.
    pub async fn get(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<Record>>, LookupError> {
        if !self.binds(kind) {
            return Err(LookupError::SecretBindingDisabled);
        }
        match self.source.cached(kind, namespace, name) {
            Some(record) => Ok(Some(record)),
            None => self.source.live(kind, namespace, name).await,
        }
    }

    /// The object if it is in memory, without asking the authority: `None` is a miss, not
    /// "absent". For a caller that may not cost a live lookup (an anonymous admission review).
    pub fn cached(&self, kind: Kind, namespace: &str, name: &str) -> Option<Arc<Record>> {
        if !self.binds(kind) {
            return None;
        }
        self.source.cached(kind, namespace, name)
    }

    /// The authority's answer after a miss of [`Objects::cached`] (a live GET beside a
    /// cluster), for a caller that budgets its own lookups; [`Objects::get`] is both steps.
    pub fn live<'a>(&'a self, kind: Kind, namespace: &'a str, name: &'a str) -> LiveLookup<'a> {
        if !self.binds(kind) {
            return Box::pin(std::future::ready(Err(LookupError::SecretBindingDisabled)));
        }
        self.source.live(kind, namespace, name)
    }

    /// See [`ObjectSource::ready`].
    pub fn ready(&self) -> bool {
        self.source.ready()
    }

    /// See [`ObjectSource::not_ready`].
    pub fn not_ready(&self) -> Option<String> {
        self.source.not_ready()
    }

    /// See [`ObjectSource::count`].
    pub fn count(&self, kind: Kind) -> usize {
        self.source.count(kind)
    }
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("ready", &self.ready())
            .field("secret_binding", &self.secret_binding)
            .finish()
    }
}
