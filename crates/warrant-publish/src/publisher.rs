//! The publisher: keeps every target holding exactly the documents this process serves, and
//! tells the key manager which kids every target lists (the activation gate's input).
//!
//! A round, per target: read the JWKS object and the discovery object; if their bytes and, for
//! buckets, the headers a relying party acts on are what this process serves, nothing is
//! written; otherwise the object is written and read back, and only what was read back counts.
//! The headers compared are every one the store reports except user metadata: `Content-Type`
//! and `Cache-Control` must be warrant's, and `Content-Encoding`, `Content-Disposition` and
//! `Content-Language` absent, as warrant writes them. Whoever else can write the bucket could
//! otherwise keep the bytes and set `Cache-Control: max-age=31536000`, and relying parties
//! would keep a retired or revoked key for a year. `Cache-Control` counts down to the next key
//! change in the hour before it (as at the HTTP endpoint), so in that hour each round rewrites
//! both documents: about 60 small PUTs per change per target. A replica that does not write the key store only reads and reports: it fails its
//! check while a target lacks a key it serves. Rounds run when the key set changes, and again
//! on a timer (someone may overwrite or delete the objects; they are restored), sooner while
//! a target fails. Cost: two small GETs per target per round (a PUT and a GET more for each
//! document that changed).
//!
//! What the gate hears: for each target, the keys its JWKS listed at its last successful round,
//! by kid and key material (warrant-keys' `ListedKeys`: a kid on another key's material lists
//! nothing); a target never read lists nothing. A failing target lists nothing new: one that
//! cannot be reached keeps what it listed (it still serves it to relying parties), and one read
//! in a failing round lists only what it listed before and still lists (a key read back without
//! it no longer counts, a key it lists anew waits for a round that succeeds).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jiff::Timestamp;
use object_store::{Attribute, Attributes};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;
use warrant_clock::Clock;
use warrant_issuer::{Published, SpiffeRoots};
use warrant_keys::{ActivationGate, ListedKeys, Writer};
use warrant_token::DocumentError;

use crate::metrics::PublishMetrics;
use crate::placement::Placement;
use crate::target::{ObjectError, Target, TargetError};

/// The content type of both documents, as warrant serves them.
pub const CONTENT_TYPE: &str = "application/json";

/// How often targets are re-read when all is well: an overwritten object is restored within
/// this.
pub const RECHECK: Duration = Duration::from_secs(60);
/// How soon a failed round is retried.
pub const RETRY: Duration = Duration::from_secs(10);
/// At most one error line per target this often while it fails.
const LOG_EVERY_SECONDS: i64 = 60;

/// The largest object read back. The documents warrant writes are a few KiB; whoever else can
/// write to the bucket could leave a far larger object at their paths, which is then rewritten
/// without being downloaded (every recheck would otherwise read it whole into memory).
const MAX_READ_BYTES: u64 = 1024 * 1024;

/// The two documents as this process serves them at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Documents {
    /// `/.well-known/openid-configuration`.
    pub discovery: Bytes,
    /// The JWKS.
    pub jwks: Bytes,
    /// `Cache-Control` for all of them, from the key schedule.
    pub cache_control: String,
    /// The SPIFFE trust bundle, while the pod certificate signer gives its roots.
    pub spiffe_bundle: Option<Bytes>,
    /// The keys the JWKS lists.
    pub keys: ListedKeys,
}

impl Documents {
    /// The documents `published` serves at `now`: the same bytes and `Cache-Control` as the
    /// HTTP endpoints.
    /// With `roots`, the SPIFFE bundle of those roots and the JWKS's keys too.
    pub fn of(
        published: &Published,
        now: Timestamp,
        roots: Option<&SpiffeRoots>,
    ) -> Result<Documents, PublishError> {
        let discovery = published
            .discovery()
            .map_err(|e| PublishError::Documents(e.clone()))?
            .clone();
        let jwks = published.jwks().clone();
        let cache_control = published
            .cache_control(now)
            .to_str()
            .unwrap_or("public, max-age=60")
            .to_owned();
        let spiffe_bundle = roots.and_then(|roots| roots.bundle(&jwks));
        Ok(Documents {
            keys: ListedKeys::of(published.keys().verifying()),
            discovery,
            jwks,
            cache_control,
            spiffe_bundle,
        })
    }
}

/// Why a round failed for a target. Messages name the target's object, never its contents.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The discovery document cannot be rendered for this issuer (warrant does not serve it
    /// either).
    #[error("cannot publish discovery for this issuer: {0}")]
    Documents(#[source] DocumentError),
    /// An object could not be read.
    #[error("cannot read {object}: {source}")]
    Read {
        /// The object's URL.
        object: String,
        /// What the store said.
        #[source]
        source: ObjectError,
    },
    /// An object could not be written.
    #[error("cannot write {object}: {source}")]
    Write {
        /// The object's URL.
        object: String,
        /// What the store said.
        #[source]
        source: ObjectError,
    },
    /// An object read back after its write is not what was written (another writer, or a
    /// store that does not keep headers).
    #[error("{object} read back after writing is not what was written")]
    ReadBack {
        /// The object's URL.
        object: String,
    },
    /// (A replica that only checks.) The target does not list keys this replica serves.
    #[error(
        "{object} does not list key(s) {kids:?} that this replica serves; the replica that writes the key store publishes them"
    )]
    Missing {
        /// The object's URL.
        object: String,
        /// The kids missing.
        kids: Vec<String>,
    },
    /// The target cannot be used.
    #[error(transparent)]
    Target(#[from] TargetError),
}

impl PublishError {
    /// The metric label of the failure.
    pub fn reason(&self) -> &'static str {
        match self {
            PublishError::Documents(_) | PublishError::Target(_) => "documents",
            PublishError::Read { .. } => "read",
            PublishError::Write { .. } => "write",
            PublishError::ReadBack { .. } => "read_back",
            PublishError::Missing { .. } => "missing",
        }
    }
}

/// One target's state, for readiness and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetStatus {
    /// The target's URL.
    pub url: String,
    /// When its rounds began to fail; `None` while the last one succeeded.
    pub failing_since: Option<Timestamp>,
    /// The last failure.
    pub last_error: Option<String>,
    /// When it last held what this process serves.
    pub last_success: Option<Timestamp>,
    /// The keys its JWKS listed at the last successful round (see the module documentation).
    pub listed: ListedKeys,
}

/// Every target's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishHealth {
    /// Per target, in flag order.
    pub targets: Vec<TargetStatus>,
}

impl PublishHealth {
    /// Why publishing is not ready: the failing targets and their errors; `None` when every
    /// target holds what this process serves.
    pub fn failure(&self) -> Option<String> {
        let failing: Vec<String> = self
            .targets
            .iter()
            .filter_map(|t| {
                let since = t.failing_since?;
                Some(format!(
                    "{} failing since {since}: {}",
                    t.url,
                    t.last_error.as_deref().unwrap_or("unknown error")
                ))
            })
            .collect();
        (!failing.is_empty()).then(|| failing.join("; "))
    }

    /// One line for `/readyz?verbose`: `ok (N targets current)`, or `failed: …`.
    pub fn summary(&self) -> String {
        match self.failure() {
            None => format!("ok ({} target(s) current)", self.targets.len()),
            Some(why) => format!("failed: {why}"),
        }
    }
}

/// Publishes to a set of targets; see the module documentation.
#[derive(Debug)]
pub struct Publisher {
    targets: Vec<(Target, Placement)>,
    metrics: PublishMetrics,
    health: watch::Sender<PublishHealth>,
    listed: watch::Sender<ListedKeys>,
    last_logged: Vec<Option<Timestamp>>,
    /// The SPIFFE bundle's X.509 roots, when the pod certificate signer gives them.
    spiffe: Option<watch::Receiver<Option<Arc<SpiffeRoots>>>>,
}

impl Publisher {
    /// A publisher for `targets`, checking first that each can serve the documents of `issuer`
    /// with `jwks_uri` (see [`Target::placement`]).
    pub fn new(
        targets: Vec<Target>,
        issuer: &str,
        jwks_uri: &str,
        metrics: PublishMetrics,
    ) -> Result<Publisher, TargetError> {
        let targets = targets
            .into_iter()
            .map(|t| t.placement(issuer, jwks_uri).map(|p| (t, p)))
            .collect::<Result<Vec<_>, _>>()?;
        let health = PublishHealth {
            targets: targets
                .iter()
                .map(|(t, _)| TargetStatus {
                    url: t.url().to_owned(),
                    ..TargetStatus::default()
                })
                .collect(),
        };
        let last_logged = vec![None; targets.len()];
        Ok(Publisher {
            targets,
            metrics,
            health: watch::channel(health).0,
            listed: watch::channel(ListedKeys::none()).0,
            last_logged,
            spiffe: None,
        })
    }

    /// Publishes the SPIFFE trust bundle beside the discovery document, of the roots `roots`
    /// gives (none while it holds `None`), and publishes again whenever they change.
    pub fn follow_spiffe_roots(&mut self, roots: watch::Receiver<Option<Arc<SpiffeRoots>>>) {
        self.spiffe = Some(roots);
    }

    /// The activation gate's input: the keys every target lists.
    pub fn gate(&self) -> ActivationGate {
        self.listed.subscribe()
    }

    /// Follows every target's state.
    pub fn health(&self) -> watch::Receiver<PublishHealth> {
        self.health.subscribe()
    }

    /// The targets and where the documents go in each.
    pub fn targets(&self) -> impl Iterator<Item = (&Target, &Placement)> {
        self.targets.iter().map(|(t, p)| (t, p))
    }

    /// One round over every target at `now`: writes what differs if `write`, else only checks.
    /// Returns the first failure (every target is tried regardless).
    pub async fn round(
        &mut self,
        published: &Published,
        now: Timestamp,
        write: bool,
    ) -> Result<(), PublishError> {
        let roots = self.spiffe.as_ref().and_then(|r| r.borrow().clone());
        let documents = match Documents::of(published, now, roots.as_deref()) {
            Ok(documents) => documents,
            Err(error) => {
                for i in 0..self.targets.len() {
                    self.record(i, now, Err(&error));
                }
                return Err(error);
            }
        };
        let mut first = None;
        for i in 0..self.targets.len() {
            let Some((target, placement)) = self.targets.get(i) else {
                continue;
            };
            let outcome = sync(target, placement, &documents, write).await;
            match outcome {
                Ok((written, listed)) => {
                    if written > 0 {
                        self.metrics.written(target.url(), written);
                    }
                    self.record(i, now, Ok(listed));
                }
                Err((error, listed)) => {
                    // A failing target lists nothing new: only what it listed before and still
                    // lists, if it was read at all.
                    if let Some(listed) = listed {
                        self.health.send_modify(|h| {
                            if let Some(t) = h.targets.get_mut(i) {
                                t.listed = t.listed.intersection(&listed);
                            }
                        });
                    }
                    self.record(i, now, Err(&error));
                    first.get_or_insert(error);
                }
            }
        }
        self.update_gate();
        first.map_or(Ok(()), Err)
    }

    fn record(&mut self, i: usize, now: Timestamp, outcome: Result<ListedKeys, &PublishError>) {
        let url = self
            .targets
            .get(i)
            .map(|(t, _)| t.url().to_owned())
            .unwrap_or_default();
        match outcome {
            Ok(listed) => {
                self.metrics.succeeded(&url, now);
                let mut recovered = None;
                self.health.send_modify(|h| {
                    if let Some(t) = h.targets.get_mut(i) {
                        recovered = t.failing_since.take();
                        t.last_error = None;
                        t.last_success = Some(now);
                        t.listed = listed;
                    }
                });
                if let Some(since) = recovered {
                    tracing::info!(target = %url, failing_since = %since, "publish target holds the documents again");
                }
                if let Some(logged) = self.last_logged.get_mut(i) {
                    *logged = None;
                }
            }
            Err(error) => {
                self.metrics.failed(&url, error.reason());
                self.health.send_modify(|h| {
                    if let Some(t) = h.targets.get_mut(i) {
                        t.failing_since.get_or_insert(now);
                        t.last_error = Some(error.to_string());
                    }
                });
                let due = self
                    .last_logged
                    .get(i)
                    .copied()
                    .flatten()
                    .is_none_or(|t| now.as_second() - t.as_second() >= LOG_EVERY_SECONDS);
                if due {
                    tracing::error!(target = %url, reason = error.reason(), %error, "cannot publish the discovery documents; a key the target does not list will not start signing (see /readyz?verbose, publish)");
                    if let Some(logged) = self.last_logged.get_mut(i) {
                        *logged = Some(now);
                    }
                }
            }
        }
    }

    /// The gate hears the keys every target lists.
    fn update_gate(&self) {
        let health = self.health.borrow();
        let mut targets = health.targets.iter();
        let mut listed = targets.next().map(|t| t.listed.clone()).unwrap_or_default();
        for t in targets {
            listed = listed.intersection(&t.listed);
        }
        drop(health);
        self.listed.send_if_modified(|current| {
            let changed = *current != listed;
            *current = listed;
            changed
        });
    }

    /// Keeps the targets current in a task: a round whenever `feed` changes, every [`RECHECK`]
    /// (every [`RETRY`] while a round fails); writing while `writer` may write the key store,
    /// else only checking. The task stops when the handle is dropped.
    pub fn spawn(
        self,
        feed: watch::Receiver<Arc<Published>>,
        writer: Writer,
        clock: Clock,
    ) -> PublisherTask {
        PublisherTask {
            _task: AbortOnDropHandle::new(tokio::spawn(self.run(feed, writer, clock))),
        }
    }

    async fn run(
        mut self,
        mut feed: watch::Receiver<Arc<Published>>,
        mut writer: Writer,
        clock: Clock,
    ) {
        let mut feed_open = true;
        let mut spiffe = self.spiffe.clone();
        loop {
            let published = feed.borrow_and_update().clone();
            let failed = self
                .round(&published, clock.now(), writer.may_write())
                .await
                .is_err();
            let wait = if failed { RETRY } else { RECHECK };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                changed = feed.changed(), if feed_open => feed_open = changed.is_ok(),
                () = writer.changed() => {}
                Some(()) = roots_changed(&mut spiffe) => {}
            }
        }
    }
}

/// Completes when the SPIFFE roots change; `None` (never pending again) once they cannot.
async fn roots_changed(
    roots: &mut Option<watch::Receiver<Option<Arc<SpiffeRoots>>>>,
) -> Option<()> {
    match roots {
        Some(receiver) => {
            if receiver.changed().await.is_ok() {
                Some(())
            } else {
                *roots = None;
                None
            }
        }
        None => std::future::pending().await,
    }
}

/// The running publisher; dropping it stops it.
#[derive(Debug)]
pub struct PublisherTask {
    _task: AbortOnDropHandle<()>,
}

/// An object's bytes and attributes, or `None` if it does not exist.
async fn read(
    target: &Target,
    path: &object_store::path::Path,
) -> Result<Option<(Bytes, Attributes)>, PublishError> {
    target
        .get(path, MAX_READ_BYTES)
        .await
        .map_err(|source| PublishError::Read {
            object: format!("{}/{path}", target.url().trim_end_matches('/')),
            source,
        })
}

/// The headers warrant writes with both documents: none for a directory (its web server sets
/// them), else `Content-Type` and the key schedule's `Cache-Control`.
fn headers(target: &Target, documents: &Documents) -> Attributes {
    let mut attributes = Attributes::new();
    if !target.is_file() {
        attributes.insert(Attribute::ContentType, CONTENT_TYPE.into());
        attributes.insert(
            Attribute::CacheControl,
            documents.cache_control.clone().into(),
        );
    }
    attributes
}

/// True if an object read is the document as served: its bytes, and exactly the headers
/// warrant writes (see the module documentation). User metadata (`x-amz-meta-*` and the like)
/// changes nothing a relying party does and is not compared.
fn current(read: Option<&(Bytes, Attributes)>, body: &Bytes, headers: &Attributes) -> bool {
    let Some((bytes, attributes)) = read else {
        return false;
    };
    let acted_on = attributes
        .iter()
        .filter(|(name, _)| !matches!(name, Attribute::Metadata(_) | Attribute::StorageClass))
        .count();
    bytes == body
        && acted_on == headers.len()
        && headers
            .iter()
            .all(|(name, value)| attributes.get(name) == Some(value))
}

/// The keys a JWKS object as read lists (none when there is no object).
fn listed_keys(read: Option<&(Bytes, Attributes)>) -> ListedKeys {
    read.map(|(b, _)| ListedKeys::from_jwks(b))
        .unwrap_or_default()
}

/// In a round that does not write: what a relying party would miss in `object`, which is not
/// current. A JWKS misses the keys it does not list (`listed`); another document only when it
/// is `absent`.
fn missing(
    object: String,
    is_jwks: bool,
    absent: bool,
    documents: &Documents,
    listed: Option<&ListedKeys>,
) -> Option<PublishError> {
    if is_jwks {
        let have = listed.cloned().unwrap_or_default();
        let kids = documents.keys.missing_from(&have);
        if !kids.is_empty() {
            return Some(PublishError::Missing { object, kids });
        }
    } else if absent {
        return Some(PublishError::Missing {
            object,
            kids: Vec::new(),
        });
    }
    None
}

/// One target's round: returns the bytes written and the keys its JWKS lists; on failure, the
/// error and what the JWKS was read to list, if it was read.
async fn sync(
    target: &Target,
    placement: &Placement,
    documents: &Documents,
    write: bool,
) -> Result<(usize, ListedKeys), (PublishError, Option<ListedKeys>)> {
    let mut written = 0;
    let mut listed = None;
    let headers = headers(target, documents);
    let mut objects = vec![
        (&placement.jwks, &documents.jwks, true),
        (&placement.discovery, &documents.discovery, false),
    ];
    if let Some(bundle) = &documents.spiffe_bundle {
        objects.push((&placement.spiffe_bundle, bundle, false));
    }
    for (path, body, is_jwks) in objects {
        let object = format!("{}/{path}", target.url().trim_end_matches('/'));
        let found = read(target, path).await.map_err(|e| (e, listed.clone()))?;
        if is_jwks {
            listed = Some(listed_keys(found.as_ref()));
        }
        if current(found.as_ref(), body, &headers) {
            continue;
        }
        if !write {
            if let Some(missing) =
                missing(object, is_jwks, found.is_none(), documents, listed.as_ref())
            {
                return Err((missing, listed));
            }
            continue;
        }
        target
            .put(path, body.clone(), headers.clone())
            .await
            .map_err(|source| {
                (
                    PublishError::Write {
                        object: object.clone(),
                        source,
                    },
                    listed.clone(),
                )
            })?;
        written += body.len();
        let back = read(target, path).await.map_err(|e| (e, listed.clone()))?;
        if is_jwks {
            listed = Some(listed_keys(back.as_ref()));
        }
        if !current(back.as_ref(), body, &headers) {
            return Err((PublishError::ReadBack { object }, listed));
        }
    }
    Ok((written, listed.unwrap_or_default()))
}
