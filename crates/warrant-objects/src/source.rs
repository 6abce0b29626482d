//! Where records come from, and the handle that reads them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::record::{Kind, Record};

/// Why an object could not be looked up (as opposed to "it does not exist").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The source that would know is unreachable or failed; the message says how.
    #[error("{0}")]
    Unavailable(String),
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
            return Err(LookupError::Unavailable(SECRET_BINDING_DISABLED.to_owned()));
        }
        match self.source.cached(kind, namespace, name) {
            Some(record) => Ok(Some(record)),
            None => self.source.live(kind, namespace, name).await,
        }
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
