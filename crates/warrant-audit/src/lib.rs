//! warrant's audit trail: who got a token for what, when, and who asked.
//!
//! Every TokenRequest (issued or refused), every TokenReview and every external-signer Sign
//! becomes one [`Event`], a JSON line in `--audit-log-path` (docs/audit.md is the schema).
//! Requests hand their event to an [`Auditor`], which queues it for a writer task of its own:
//! the disk is never written on a request's path, and a batch of events is one write, done on
//! tokio's blocking pool.
//!
//! What a request waits for is the operator's choice, in kube-apiserver's words
//! (`--audit-log-mode`):
//! - `blocking` (the default): the request waits until its event is in the file (handed to the
//!   operating system): its answer goes out only then, and if the write failed, or did not
//!   finish within [`MAX_QUEUE_WAIT`], the request fails instead ([`NotRecorded`]). A request
//!   waits for *its batch*, not for a write of its own: the writer takes everything queued at
//!   once, so under load many requests share one write, and one slow write delays the requests
//!   of one batch while the next batch gathers. A failed write makes the audit log not ready
//!   ([`Auditor::failing`]) until a write succeeds; the writer probes the file every
//!   [`PROBE_INTERVAL`] meanwhile, so it recovers even with no requests coming;
//! - `batch`: the event is queued (or dropped and counted, if the queue
//!   `--audit-log-batch-buffer-size` is full) and the request goes on: requests never wait on
//!   the disk, and events lost to it are counted.
//!
//! Refusals of callers that did not authenticate are summarized, whatever the mode (see
//! `summary.rs`): they never wait and never make a request fail.
//!
//! At shutdown, [`AuditWriter::finish`] writes out everything queued before the process exits.
//!
//! Beside the audit trail, [`loglimit`] bounds warrant's ordinary log lines the same way: what a
//! client sends is cut to a length, and a repeated refusal is logged once a second.

mod event;
mod file;
mod kube;
pub mod loglimit;
mod queue;
mod summary;
mod writer;

pub use loglimit::{JSON_FIELDS, JsonList, LOGGED_ITEM_CHARS, bounded};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};
use warrant_clock::Clock;

pub use self::event::{
    BoundObject, Decision, Event, EventKind, MAX_EXTRAS, MAX_NAME_CHARS, MAX_REASON_CHARS,
    PodCertificateFacts, Requester, ServiceAccount, TokenFacts,
};
use self::file::RotatingFile;
pub use self::file::Rotation;
pub use self::kube::ISSUED_CREDENTIAL_ID;
use self::queue::{AuditMetrics, Entry, Message, Shared};
use self::writer::{Sink, write_events};

/// Where events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard output (`--audit-log-path -`), never rotated.
    Stdout,
    /// A file, rotated as [`Rotation`] says.
    File(PathBuf, Rotation),
}

/// What a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For its event to be written: no request completes unrecorded.
    Blocking,
    /// For nothing: an event that cannot be queued or written is counted and lost.
    Batch,
}

/// What each line of the log is (`--audit-log-schema`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Schema {
    /// warrant's own event (docs/audit.md, "The event").
    #[default]
    Warrant,
    /// kube-apiserver's `audit.k8s.io/v1` `Event` at level `Metadata`, warrant's facts in
    /// `warrant.dev/` annotations.
    Kubernetes,
}

/// The audit log's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// Where events go.
    pub destination: Destination,
    /// What a request waits for.
    pub mode: Mode,
    /// How many events may wait for the writer.
    pub buffer_size: usize,
    /// What each line is.
    pub schema: Schema,
}

/// The audit log could not be started.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The file (or its directory) could not be opened or created.
    #[error("--audit-log-path {path}: {source}")]
    Open {
        /// The path, as given.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// [`start`] was called outside a tokio runtime, where its writer task runs.
    #[error("the audit log's writer needs a tokio runtime: {0}")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
}

/// Why a request's event was not recorded (blocking mode): the caller must not complete what
/// the event records, and answers 503 (HTTP) or `UNAVAILABLE` (gRPC) with this message instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotRecorded {
    /// The queue stayed full, or the write did not finish, for [`MAX_QUEUE_WAIT`].
    #[error(
        "the audit log is not keeping up: the request's audit event was not written within 60 s"
    )]
    Stalled,
    /// Writing the event failed (a full or failing disk).
    #[error(
        "the audit log cannot be written: the request was not completed, as its audit event could not be recorded"
    )]
    WriteFailed,
    /// The writer stopped before answering.
    #[error("the audit log's writer has stopped: the request's audit event could not be recorded")]
    WriterStopped,
}

/// Where requests hand their events. Cheap to clone; [`Auditor::disabled`] takes every event
/// and does nothing with it, at no cost.
#[derive(Clone, Debug, Default)]
pub struct Auditor {
    inner: Option<Arc<Shared>>,
}

impl Auditor {
    /// No audit log.
    pub fn disabled() -> Self {
        Auditor::default()
    }

    /// True if events are written somewhere: callers build an event only then.
    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The mode, if events are written.
    pub fn mode(&self) -> Option<Mode> {
        self.inner.as_ref().map(|shared| shared.mode)
    }

    /// Why the audit log cannot be written, if the last write failed (or an event waited
    /// [`MAX_QUEUE_WAIT`]): until a write succeeds. In blocking mode the server is then not
    /// ready, as every audited request fails.
    pub fn failing(&self) -> Option<String> {
        self.inner
            .as_ref()
            .and_then(|shared| shared.health.failing())
    }

    /// Records `event`. Text a client could make long is cut first ([`MAX_NAME_CHARS`],
    /// [`MAX_REASON_CHARS`], TokenRequest's audience limits). A refusal of a caller that did
    /// not authenticate is summarized, never waits, and is always `Ok`. Otherwise, in blocking
    /// mode, waits until the event is written, and is `Err` if it was not: the caller must not
    /// complete what the event records (the request is answered 503 instead). In batch mode,
    /// queues it and is always `Ok`.
    pub async fn record(&self, mut event: Event) -> Result<(), NotRecorded> {
        let Some(shared) = &self.inner else {
            return Ok(());
        };
        event.bound();
        if event.is_unauthenticated_refusal() {
            shared.refusal(event);
            return Ok(());
        }
        match shared.mode {
            Mode::Blocking => shared.record_written(event).await,
            Mode::Batch => {
                shared.offer(Entry {
                    event: Box::new(event),
                    count: None,
                    waiter: None,
                });
                Ok(())
            }
        }
    }
}

/// The longest a request waits for its event in blocking mode (for room in the queue, then for
/// the write): a request's own timeout. A disk that hangs longer than that fails the requests it
/// holds (503) rather than holding them, and their connections, without end.
pub const MAX_QUEUE_WAIT: Duration = Duration::from_secs(60);

/// How often the writer tries the file again while writes fail and no event comes to try it.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// How long [`AuditWriter::finish`] waits for the queue to be written out.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// The writer task. Keep it until the server has stopped answering, then
/// [`finish`](AuditWriter::finish) it; dropping it stops the task, and what was queued is lost.
#[derive(Debug)]
pub struct AuditWriter {
    sender: mpsc::Sender<Message>,
    done: Option<oneshot::Receiver<()>>,
    _task: tokio_util::task::AbortOnDropHandle<()>,
}

impl AuditWriter {
    /// Writes out every event queued so far and every summary owed, and stops the writer.
    /// Events recorded after this are dropped (and counted). Waits at most [`FINISH_TIMEOUT`]:
    /// a disk that stopped answering must not keep the process from exiting; what was left is
    /// then logged.
    pub async fn finish(mut self) {
        let queued = self.sender.max_capacity() - self.sender.capacity();
        let done = self.done.take();
        let sender = self.sender.clone();
        let written = async move {
            if sender.send(Message::Finish).await.is_ok()
                && let Some(done) = done
            {
                let _ = done.await;
            }
        };
        if tokio::time::timeout(FINISH_TIMEOUT, written).await.is_err() {
            tracing::error!(
                queued_at_shutdown = queued,
                "the audit log was not written out within {}s of shutdown: the events still queued are lost",
                FINISH_TIMEOUT.as_secs()
            );
        }
    }
}

/// Opens the audit log (so a path that cannot be written fails at startup, saying why),
/// registers the metrics and starts the writer task on the current tokio runtime. `clock`
/// dates rotated files.
pub fn start(
    options: &AuditOptions,
    clock: Clock,
    registry: &mut Registry,
) -> Result<(Auditor, AuditWriter), AuditError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(AuditError::NoRuntime)?;
    let sink = match &options.destination {
        Destination::Stdout => Sink::Stdout(std::io::stdout()),
        Destination::File(path, rotation) => Sink::File(
            RotatingFile::open(path, *rotation).map_err(|source| AuditError::Open {
                path: path.display().to_string(),
                source,
            })?,
        ),
    };
    let metrics = AuditMetrics::default();
    registry.register(
        "warrant_audit_events",
        "Audit events, by what became of them: written, dropped (the queue was full in batch mode, or the writer had stopped) or failed (the write failed)",
        metrics.events.clone(),
    );
    registry.register(
        "warrant_audit_queue_full",
        "Times a request found the audit queue full and waited for room (blocking mode): the audit log's disk is slower than the requests",
        metrics.queue_full.clone(),
    );
    registry.register(
        "warrant_audit_refusals_summarized",
        "Refusals of callers that did not authenticate counted in a summary event (one a second for each client address and kind of refusal) instead of written one by one",
        metrics.summarized.clone(),
    );
    for result in ["written", "dropped", "failed"] {
        metrics.count(result, 0);
    }
    Ok(start_writer(
        sink,
        options.schema,
        options.mode,
        options.buffer_size,
        clock,
        metrics,
        &runtime,
    ))
}

fn start_writer(
    sink: Sink,
    schema: Schema,
    mode: Mode,
    buffer_size: usize,
    clock: Clock,
    metrics: AuditMetrics,
    runtime: &tokio::runtime::Handle,
) -> (Auditor, AuditWriter) {
    let (sender, receiver) = mpsc::channel(buffer_size.max(1));
    let shared = Arc::new(Shared::new(sender.clone(), mode, metrics));
    let (done_tx, done) = oneshot::channel();
    let task = runtime.spawn(write_events(
        receiver,
        sink,
        schema,
        clock,
        shared.clone(),
        done_tx,
    ));
    (
        Auditor {
            inner: Some(shared),
        },
        AuditWriter {
            sender,
            done: Some(done),
            _task: tokio_util::task::AbortOnDropHandle::new(task),
        },
    )
}

#[cfg(test)]
mod tests;
