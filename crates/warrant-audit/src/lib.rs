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
mod summary;

pub use loglimit::{JSON_FIELDS, JsonList, LOGGED_ITEM_CHARS, bounded};

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;
use warrant_clock::Clock;

pub use self::event::{
    BoundObject, Decision, Event, EventKind, MAX_EXTRAS, MAX_NAME_CHARS, MAX_REASON_CHARS,
    PodCertificateFacts, Requester, ServiceAccount, TokenFacts,
};
pub use self::file::Rotation;
use self::file::{RotatingFile, Written};
pub use self::kube::ISSUED_CREDENTIAL_ID;
use self::summary::{Summaries, Summary, Verdict};

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

/// One queued event, and in blocking mode where to say whether it was written.
struct Entry {
    event: Box<Event>,
    /// For a summary: how many refusals it stands for.
    count: Option<u64>,
    waiter: Option<oneshot::Sender<Result<(), NotRecorded>>>,
}

enum Message {
    Event(Entry),
    /// Write out what is queued and every summary owed, then stop.
    Finish,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Message::Event(_) => "Event",
            Message::Finish => "Finish",
        })
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Default)]
struct AuditMetrics {
    /// Events by what became of them: `written`, `dropped` (queue full in batch mode, or the
    /// writer stopped), `failed` (the write failed).
    events: Family<ResultLabels, Counter>,
    /// Times a request found the queue full and waited (blocking mode).
    queue_full: Counter,
    /// Refusals of unauthenticated callers counted in a summary instead of written.
    summarized: Counter,
}

impl AuditMetrics {
    fn count(&self, result: &'static str, n: u64) {
        self.events
            .get_or_create(&ResultLabels { result })
            .inc_by(n);
    }
}

/// Whether the audit log can be written, as the writer last found it.
#[derive(Debug, Default)]
struct Health {
    /// Set with `why`; read on every batch without taking the lock.
    failing: AtomicBool,
    why: Mutex<String>,
}

impl Health {
    fn fail(&self, why: String) {
        *self.why.lock().unwrap_or_else(PoisonError::into_inner) = why;
        self.failing.store(true, Ordering::Release);
    }

    /// Back to healthy; true if it was failing.
    fn recover(&self) -> bool {
        self.failing.swap(false, Ordering::AcqRel)
    }

    fn failing(&self) -> Option<String> {
        self.failing.load(Ordering::Acquire).then(|| {
            self.why
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }
}

/// What requests and the writer share.
#[derive(Debug)]
struct Shared {
    sender: mpsc::Sender<Message>,
    mode: Mode,
    metrics: AuditMetrics,
    health: Health,
    summaries: Mutex<Summaries>,
    /// Wakes the writer: a summary is owed (it then sleeps until the window ends), or a
    /// request found the log stalled (it then probes until a write succeeds).
    wake: Notify,
}

impl Shared {
    fn new(sender: mpsc::Sender<Message>, mode: Mode, metrics: AuditMetrics) -> Self {
        Shared {
            sender,
            mode,
            metrics,
            health: Health::default(),
            summaries: Mutex::new(Summaries::default()),
            wake: Notify::new(),
        }
    }

    fn summaries(&self) -> std::sync::MutexGuard<'_, Summaries> {
        self.summaries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `entry` if there is room; counts it dropped if not.
    fn offer(&self, entry: Entry) {
        if self.sender.try_send(Message::Event(entry)).is_err() {
            self.metrics.count("dropped", 1);
        }
    }

    /// A refusal of a caller that did not authenticate: written if it is the first of its kind
    /// in the window, else counted for the window's summary. Never waits.
    fn refusal(&self, event: Event) {
        let (ended, verdict) = self.summaries().refusal(event, Instant::now());
        for summary in ended {
            self.offer(summary_entry(summary));
        }
        match verdict {
            Verdict::Write(event) => self.offer(Entry {
                event,
                count: None,
                waiter: None,
            }),
            Verdict::Counted { due } => {
                self.metrics.summarized.inc();
                if due {
                    self.wake.notify_one();
                }
            }
        }
    }

    /// Blocking mode: queues the event and waits until the writer says it is written, for at
    /// most [`MAX_QUEUE_WAIT`] in all.
    async fn record_written(&self, event: Event) -> Result<(), NotRecorded> {
        let deadline = Instant::now() + MAX_QUEUE_WAIT;
        let (waiter, written) = oneshot::channel();
        let message = Message::Event(Entry {
            event: Box::new(event),
            count: None,
            waiter: Some(waiter),
        });
        match self.sender.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(message)) => {
                self.metrics.queue_full.inc();
                match tokio::time::timeout_at(deadline, self.sender.send(message)).await {
                    Ok(Ok(())) => {}
                    // The writer finished: the server is stopping, nothing more is written.
                    Ok(Err(_)) => {
                        self.metrics.count("dropped", 1);
                        return Ok(());
                    }
                    Err(_) => {
                        self.metrics.count("dropped", 1);
                        self.stalled();
                        return Err(NotRecorded::Stalled);
                    }
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.metrics.count("dropped", 1);
                return Ok(());
            }
        }
        match tokio::time::timeout_at(deadline, written).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(NotRecorded::WriterStopped),
            // The write is still under way. The writer skips an event whose request gave up
            // if it has not begun writing it.
            Err(_) => {
                self.stalled();
                Err(NotRecorded::Stalled)
            }
        }
    }

    fn stalled(&self) {
        self.health.fail(format!(
            "the audit log is not keeping up: an event was not written within {} s",
            MAX_QUEUE_WAIT.as_secs()
        ));
        // However the writer's batch ends, the log stays failing until a write succeeds.
        self.wake.notify_one();
    }
}

fn summary_entry(summary: Summary) -> Entry {
    Entry {
        event: Box::new(summary.event),
        count: Some(summary.count),
        waiter: None,
    }
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

/// Where the writer writes.
enum Sink {
    Stdout(std::io::Stdout),
    File(RotatingFile),
    /// A target a test makes fail and work again.
    #[cfg(test)]
    Test(Arc<tests::TestTarget>),
}

impl Sink {
    fn write_batch(&mut self, lines: &[Vec<u8>], now: jiff::Timestamp) -> Written {
        match self {
            Sink::Stdout(out) => {
                // One write: standard output flushes at each newline otherwise.
                let batch = lines.concat();
                let mut out = out.lock();
                let result = out.write_all(&batch).and_then(|()| out.flush());
                match result {
                    Ok(()) => Written {
                        lines: lines.len(),
                        error: None,
                    },
                    Err(error) => Written {
                        lines: 0,
                        error: Some(error),
                    },
                }
            }
            Sink::File(file) => file.write_batch(lines, now),
            #[cfg(test)]
            Sink::Test(target) => target.write_batch(lines),
        }
    }

    /// Tries the target again without writing an event.
    fn probe(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::File(file) => file.probe(),
            #[cfg(test)]
            Sink::Test(target) => target.probe(),
        }
    }
}

/// A summary as written: the first refusal's fields, and how many it stands for.
#[derive(Serialize)]
struct SummaryLine<'a> {
    #[serde(flatten)]
    event: &'a Event,
    count: u64,
}

/// What a batch came to, for the writer.
struct Outcome {
    written: Written,
    /// The probe's result, when there was one.
    probe: Option<std::io::Result<()>>,
}

/// The writer task: takes what is queued (and the summaries owed), writes it as one batch on
/// tokio's blocking pool, tells each waiting request whether its event was written, and waits
/// for more; until [`Message::Finish`] (or every sender is gone).
async fn write_events(
    mut receiver: mpsc::Receiver<Message>,
    sink: Sink,
    schema: Schema,
    clock: Clock,
    shared: Arc<Shared>,
    done: oneshot::Sender<()>,
) {
    let mut sink = Some(sink);
    let mut failures: u64 = 0;
    // When a write last failed, while the log is failing: the next probe is due after it.
    let mut failed_at: Option<Instant> = None;
    loop {
        // Failing, whoever found it (a request that gave up waiting, too): probe until a write
        // succeeds.
        if failed_at.is_none() && shared.health.failing.load(Ordering::Acquire) {
            failed_at = Some(Instant::now());
        }
        let probe_due = failed_at.map(|at| at + PROBE_INTERVAL);
        let Batch {
            entries,
            finishing,
            probe,
        } = next_batch(&mut receiver, &shared, probe_due).await;
        if entries.is_empty() && !probe {
            if finishing {
                break;
            }
            continue;
        }
        let Some(mut target) = sink.take() else {
            break;
        };
        let mut waiters = Vec::with_capacity(entries.len());
        let mut events = Vec::with_capacity(entries.len());
        for entry in entries {
            waiters.push(entry.waiter);
            events.push((entry.event, entry.count));
        }
        let now = clock.now();
        let job = tokio::task::spawn_blocking(move || {
            let outcome = write_or_probe(&mut target, &events, probe, schema, now);
            (target, outcome)
        });
        let outcome = match job.await {
            Ok((target, outcome)) => {
                sink = Some(target);
                outcome
            }
            Err(e) => {
                // The blocking pool is shutting down (or the write panicked): nothing more can
                // be written, and every request waiting is told so.
                tracing::error!(error = %e, "the audit log's writer stopped");
                shared
                    .health
                    .fail("the audit log's writer has stopped".to_owned());
                break;
            }
        };
        settle(&shared, &mut failures, &mut failed_at, waiters, outcome);
        if finishing {
            break;
        }
    }
    let _ = done.send(());
}

/// What the writer takes in one turn.
struct Batch {
    /// The events to write, summaries owed included.
    entries: Vec<Entry>,
    /// [`Message::Finish`] came, or every sender is gone: this is the last batch.
    finishing: bool,
    /// The failing log is due a probe, and there is nothing to write.
    probe: bool,
}

/// Waits for an event, a wake-up, a summary or a probe (due at `probe_due`), then takes
/// everything queued meanwhile and the summaries owed, less the events whose request gave up.
async fn next_batch(
    receiver: &mut mpsc::Receiver<Message>,
    shared: &Shared,
    probe_due: Option<Instant>,
) -> Batch {
    let far = || Instant::now() + Duration::from_secs(365 * 86_400);
    let summary_due = shared.summaries().due();
    let mut entries: Vec<Entry> = Vec::new();
    let mut finishing = false;
    let mut probe = false;
    tokio::select! {
        biased;
        message = receiver.recv() => match message {
            Some(Message::Event(entry)) => entries.push(entry),
            Some(Message::Finish) | None => finishing = true,
        },
        () = shared.wake.notified() => {}
        () = tokio::time::sleep_until(summary_due.unwrap_or_else(far)), if summary_due.is_some() => {}
        () = tokio::time::sleep_until(probe_due.unwrap_or_else(far)), if probe_due.is_some() => probe = true,
    }
    if finishing {
        receiver.close();
    }
    // Everything queued meanwhile is this batch (after Finish: everything queued before it).
    while let Ok(message) = receiver.try_recv() {
        match message {
            Message::Event(entry) => entries.push(entry),
            Message::Finish => {
                finishing = true;
                receiver.close();
            }
        }
    }
    for summary in shared.summaries().close(Instant::now(), finishing) {
        entries.push(summary_entry(summary));
    }
    // A request that gave up waiting was answered 503: its event must not say otherwise.
    let before = entries.len();
    entries.retain(|entry| entry.waiter.as_ref().is_none_or(|w| !w.is_closed()));
    shared
        .metrics
        .count("dropped", (before - entries.len()) as u64);
    // Probe only when there is nothing to write: a write tries the file anyway.
    probe &= entries.is_empty();
    Batch {
        entries,
        finishing,
        probe,
    }
}

/// On the blocking pool: writes `events` as lines of `schema`, or only probes the target.
fn write_or_probe(
    target: &mut Sink,
    events: &[(Box<Event>, Option<u64>)],
    probe: bool,
    schema: Schema,
    now: jiff::Timestamp,
) -> Outcome {
    if probe {
        return Outcome {
            written: Written {
                lines: 0,
                error: None,
            },
            probe: Some(target.probe()),
        };
    }
    let lines: Vec<Vec<u8>> = events
        .iter()
        .map(|(e, count)| line(schema, e, *count))
        .collect();
    Outcome {
        written: target.write_batch(&lines, now),
        probe: None,
    }
}

/// After a batch: counts it, sets the log's health (and when it failed), then tells each
/// waiting request whether its event was written (the first lines written are theirs, in order).
fn settle(
    shared: &Shared,
    failures: &mut u64,
    failed_at: &mut Option<Instant>,
    waiters: Vec<Option<oneshot::Sender<Result<(), NotRecorded>>>>,
    outcome: Outcome,
) {
    let Written { lines, error } = outcome.written;
    let total = waiters.len();
    shared.metrics.count("written", lines as u64);
    if total > lines {
        shared.metrics.count("failed", (total - lines) as u64);
    }
    let error = match (error, outcome.probe) {
        (Some(e), _) | (None, Some(Err(e))) => Some(e),
        _ => None,
    };
    // The health first: a request told its event failed finds the log failing.
    match error {
        Some(e) => {
            report(failures, &e, total - lines);
            shared
                .health
                .fail(format!("writes to the audit log fail: {e}"));
            *failed_at = Some(Instant::now());
        }
        None => {
            *failed_at = None;
            if shared.health.recover() {
                tracing::info!("the audit log can be written again");
            }
        }
    }
    for (index, waiter) in waiters.into_iter().enumerate() {
        if let Some(waiter) = waiter {
            let _ = waiter.send(if index < lines {
                Ok(())
            } else {
                Err(NotRecorded::WriteFailed)
            });
        }
    }
}

/// An event as one JSON line of `schema`.
fn line(schema: Schema, event: &Event, count: Option<u64>) -> Vec<u8> {
    let mut line = Vec::with_capacity(1024);
    // An event is plain data: serializing it cannot fail.
    let _ = match (schema, count) {
        (Schema::Warrant, None) => serde_json::to_writer(&mut line, event),
        (Schema::Warrant, Some(count)) => {
            serde_json::to_writer(&mut line, &SummaryLine { event, count })
        }
        (Schema::Kubernetes, _) => {
            // kube's auditID is never empty: a Sign (gRPC carries no Audit-ID) or a summary
            // gets one of its own.
            let audit_id = if event.request_id.is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                event.request_id.clone()
            };
            serde_json::to_writer(&mut line, &kube::KubeEvent::new(event, count, audit_id))
        }
    };
    line.push(b'\n');
    line
}

/// Logs a failed write: the first, then every 1,000th (the metric counts each event).
fn report(failures: &mut u64, error: &std::io::Error, lost: usize) {
    if failures.is_multiple_of(1000) {
        tracing::error!(
            error = %error,
            failures = *failures + 1,
            lost,
            "could not write the audit log: events are being lost (warrant_audit_events_total{{result=\"failed\"}}); in blocking mode their requests fail"
        );
    }
    *failures += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    /// A target that fails while `failing` is set, and keeps what it was given otherwise.
    #[derive(Debug, Default)]
    pub(crate) struct TestTarget {
        pub(crate) failing: AtomicBool,
        pub(crate) lines: Mutex<Vec<String>>,
        pub(crate) probes: Mutex<u32>,
    }

    impl TestTarget {
        pub(crate) fn write_batch(&self, lines: &[Vec<u8>]) -> Written {
            if self.failing.load(Ordering::SeqCst) {
                return Written {
                    lines: 0,
                    error: Some(std::io::ErrorKind::StorageFull.into()),
                };
            }
            let mut kept = self.lines.lock().unwrap();
            kept.extend(lines.iter().map(|l| String::from_utf8(l.clone()).unwrap()));
            Written {
                lines: lines.len(),
                error: None,
            }
        }

        pub(crate) fn probe(&self) -> std::io::Result<()> {
            *self.probes.lock().unwrap() += 1;
            if self.failing.load(Ordering::SeqCst) {
                Err(std::io::ErrorKind::StorageFull.into())
            } else {
                Ok(())
            }
        }

        fn events(&self) -> Vec<serde_json::Value> {
            self.lines
                .lock()
                .unwrap()
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        }
    }

    /// An issued token's event (authenticated: never summarized).
    fn event(n: u32) -> Event {
        Event {
            kind: EventKind::TokenRequest,
            time: Timestamp::UNIX_EPOCH,
            request_id: format!("r{n}"),
            requester: Requester {
                user: "admin".into(),
                authenticated_by: "token-file",
                ..Requester::default()
            },
            decision: Decision::Issued,
            code: Some(201),
            reason: String::new(),
            service_account: None,
            token: None,
            pod_certificate: None,
            answered: None,
        }
    }

    /// An anonymous caller's refusal, from `address`.
    fn anonymous(n: u32, address: &str) -> Event {
        Event {
            requester: Requester::anonymous(address.into()),
            decision: Decision::Refused,
            code: Some(401),
            reason: "Unauthorized".into(),
            ..event(n)
        }
    }

    fn metric(registry: &Registry, line_start: &str) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        text.lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_default()
            .to_owned()
    }

    fn registered() -> (AuditMetrics, Registry) {
        let metrics = AuditMetrics::default();
        let mut registry = Registry::default();
        registry.register("events", "", metrics.events.clone());
        registry.register("summarized", "", metrics.summarized.clone());
        (metrics, registry)
    }

    /// A writer over a test target.
    fn test_writer(mode: Mode) -> (Auditor, AuditWriter, Arc<TestTarget>, Registry) {
        let target = Arc::new(TestTarget::default());
        let (metrics, registry) = registered();
        let (auditor, writer) = start_writer(
            Sink::Test(target.clone()),
            Schema::Warrant,
            mode,
            16,
            Clock::manual(Timestamp::UNIX_EPOCH),
            metrics,
            &tokio::runtime::Handle::current(),
        );
        (auditor, writer, target, registry)
    }

    /// Everything recorded before finish is in the file, in order, one JSON object a line.
    #[tokio::test]
    async fn finish_writes_out_everything_queued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let options = AuditOptions {
            destination: Destination::File(
                path.clone(),
                Rotation {
                    max_size_bytes: 0,
                    max_backups: 0,
                    max_age_days: 0,
                },
            ),
            mode: Mode::Blocking,
            buffer_size: 4,
            schema: Schema::Warrant,
        };
        let mut registry = Registry::default();
        let (auditor, writer) = start(
            &options,
            Clock::manual(Timestamp::UNIX_EPOCH),
            &mut registry,
        )
        .unwrap();
        // More at once than the queue holds: blocking mode waits, and loses none.
        let tasks: Vec<_> = (0..100)
            .map(|n| {
                let auditor = auditor.clone();
                tokio::spawn(async move { auditor.record(event(n)).await })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ok(()));
        }
        writer.finish().await;
        let text = std::fs::read_to_string(&path).unwrap();
        let mut ids: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["requestID"].to_string())
            .collect();
        ids.sort();
        let mut expected: Vec<String> = (0..100).map(|n| format!("\"r{n}\"")).collect();
        expected.sort();
        assert_eq!(ids, expected);
        assert_eq!(
            metric(&registry, "warrant_audit_events_total{result=\"written\"}"),
            "warrant_audit_events_total{result=\"written\"} 100"
        );
        // After finish, an event is dropped and counted, not lost silently (and the request
        // is not failed: the server is stopping).
        assert_eq!(auditor.record(event(100)).await, Ok(()));
        assert_eq!(
            metric(&registry, "warrant_audit_events_total{result=\"dropped\"}"),
            "warrant_audit_events_total{result=\"dropped\"} 1"
        );
    }

    /// In batch mode a full queue drops the event, counts it, and the request goes on.
    #[tokio::test]
    async fn batch_mode_drops_when_full_and_counts() {
        let (sender, _receiver) = mpsc::channel(2);
        let (metrics, _registry) = registered();
        let auditor = Auditor {
            inner: Some(Arc::new(Shared::new(sender, Mode::Batch, metrics.clone()))),
        };
        // Nobody reads: two fit, three are dropped.
        for n in 0..5 {
            assert_eq!(auditor.record(event(n)).await, Ok(()));
        }
        let dropped = metrics
            .events
            .get_or_create(&ResultLabels { result: "dropped" })
            .get();
        assert_eq!(dropped, 3);
    }

    /// In blocking mode a request waits until the writer says its event is written, and fails
    /// if the writer says it was not.
    #[tokio::test]
    async fn blocking_mode_waits_for_the_write() {
        let (sender, mut receiver) = mpsc::channel(4);
        let (metrics, _registry) = registered();
        let auditor = Auditor {
            inner: Some(Arc::new(Shared::new(sender, Mode::Blocking, metrics))),
        };
        for (answer, expected) in [
            (Ok(()), Ok(())),
            (Err(NotRecorded::WriteFailed), Err(NotRecorded::WriteFailed)),
        ] {
            let waiting = tokio::spawn({
                let auditor = auditor.clone();
                async move { auditor.record(event(0)).await }
            });
            let Some(Message::Event(entry)) = receiver.recv().await else {
                panic!("no event queued");
            };
            tokio::task::yield_now().await;
            assert!(
                !waiting.is_finished(),
                "answered before its event was written"
            );
            entry.waiter.unwrap().send(answer).unwrap();
            assert_eq!(waiting.await.unwrap(), expected);
        }
        // A writer that stops without answering: the request is not completed either.
        let waiting = tokio::spawn({
            let auditor = auditor.clone();
            async move { auditor.record(event(0)).await }
        });
        drop(receiver.recv().await);
        assert_eq!(waiting.await.unwrap(), Err(NotRecorded::WriterStopped));
    }

    /// In blocking mode a full queue holds the request until there is room, but not without
    /// end: after MAX_QUEUE_WAIT the event is dropped, counted, the caller told, and the log
    /// reported failing.
    #[tokio::test(start_paused = true)]
    async fn blocking_mode_waits_for_room_then_gives_up() {
        let (sender, mut receiver) = mpsc::channel(1);
        let (metrics, _registry) = registered();
        let auditor = Auditor {
            inner: Some(Arc::new(Shared::new(
                sender,
                Mode::Blocking,
                metrics.clone(),
            ))),
        };
        let dropped = || {
            metrics
                .events
                .get_or_create(&ResultLabels { result: "dropped" })
                .get()
        };
        let spawn = |n| {
            let auditor = auditor.clone();
            tokio::spawn(async move { auditor.record(event(n)).await })
        };
        let first = spawn(0);
        tokio::task::yield_now().await;
        // Full: the second waits, and gets in when the writer takes the first.
        let second = spawn(1);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!second.is_finished());
        let Some(Message::Event(entry)) = receiver.recv().await else {
            panic!("no event");
        };
        entry.waiter.unwrap().send(Ok(())).unwrap();
        assert_eq!(first.await.unwrap(), Ok(()));
        let Some(Message::Event(entry)) = receiver.recv().await else {
            panic!("no event");
        };
        entry.waiter.unwrap().send(Ok(())).unwrap();
        assert_eq!(second.await.unwrap(), Ok(()));
        assert_eq!(dropped(), 0);
        assert_eq!(auditor.failing(), None);
        // A writer that takes the next and then nothing more: the one after gives up after
        // MAX_QUEUE_WAIT waiting for room; the one queued gives up waiting for its write.
        let queued = spawn(2);
        tokio::task::yield_now().await;
        let started = Instant::now();
        assert_eq!(spawn(3).await.unwrap(), Err(NotRecorded::Stalled));
        assert_eq!(started.elapsed(), MAX_QUEUE_WAIT);
        assert_eq!(queued.await.unwrap(), Err(NotRecorded::Stalled));
        assert_eq!(dropped(), 1);
        assert_eq!(metrics.queue_full.get(), 2);
        assert!(auditor.failing().unwrap().contains("not keeping up"));
    }

    /// A writer that never answers (a disk that hangs) does not hold shutdown forever.
    #[tokio::test(start_paused = true)]
    async fn finish_gives_up_on_a_writer_that_never_answers() {
        let (sender, mut receiver) = mpsc::channel(4);
        let (_never, done) = oneshot::channel();
        let writer = AuditWriter {
            sender,
            done: Some(done),
            _task: tokio_util::task::AbortOnDropHandle::new(tokio::spawn(std::future::pending())),
        };
        let started = Instant::now();
        writer.finish().await;
        assert_eq!(started.elapsed(), FINISH_TIMEOUT);
        // The request to finish was queued; nothing answered it.
        assert!(matches!(receiver.try_recv(), Ok(Message::Finish)));
    }

    /// Dropping the writer stops its task: what the task holds is dropped with it.
    #[tokio::test(start_paused = true)]
    async fn dropping_the_writer_stops_its_task() {
        let (sender, _receiver) = mpsc::channel(4);
        let (_never, done) = oneshot::channel();
        let (held, mut released) = oneshot::channel::<()>();
        let writer = AuditWriter {
            sender,
            done: Some(done),
            _task: tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                let _held = held;
                std::future::pending::<()>().await;
            })),
        };
        drop(writer);
        // The paused clock moves only when every task is idle: a task still running would
        // hold the sender and make this time out.
        let closed = tokio::time::timeout(Duration::from_secs(3600), &mut released).await;
        assert!(matches!(closed, Ok(Err(_))), "the task outlived its owner");
    }

    /// A path that cannot be written is a startup error naming it.
    #[tokio::test]
    async fn an_unwritable_path_fails_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"").unwrap();
        let options = AuditOptions {
            destination: Destination::File(
                blocker.join("audit.log"),
                Rotation {
                    max_size_bytes: 0,
                    max_backups: 0,
                    max_age_days: 0,
                },
            ),
            mode: Mode::Blocking,
            buffer_size: 1,
            schema: Schema::Warrant,
        };
        let err = start(
            &options,
            Clock::manual(Timestamp::UNIX_EPOCH),
            &mut Registry::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "--audit-log-path {}: ",
                blocker.join("audit.log").display()
            )),
            "{err}"
        );
    }

    /// Blocking mode over a target whose writes fail: the request is told its event was not
    /// recorded, the log reports failing (and why) until a write succeeds, then recovers.
    #[tokio::test]
    async fn a_failed_write_fails_the_request_until_a_write_succeeds() {
        let (auditor, writer, target, registry) = test_writer(Mode::Blocking);
        target.failing.store(true, Ordering::SeqCst);
        assert_eq!(
            auditor.record(event(1)).await,
            Err(NotRecorded::WriteFailed)
        );
        let why = auditor.failing().unwrap();
        assert!(why.starts_with("writes to the audit log fail: "), "{why}");
        assert_eq!(
            metric(&registry, "events_total{result=\"failed\"}"),
            "events_total{result=\"failed\"} 1"
        );
        // Refusals of anonymous callers never wait, so never fail.
        assert_eq!(auditor.record(anonymous(2, "10.0.0.1:1")).await, Ok(()));

        target.failing.store(false, Ordering::SeqCst);
        assert_eq!(auditor.record(event(3)).await, Ok(()));
        assert_eq!(auditor.failing(), None);
        writer.finish().await;
        let ids: Vec<String> = target
            .events()
            .iter()
            .map(|e| e["requestID"].as_str().unwrap().to_owned())
            .collect();
        // The failed event is never written later; the refusal, queued while failing, fell
        // into the failed batch or the next.
        assert!(!ids.contains(&"r1".to_owned()), "{ids:?}");
        assert!(ids.contains(&"r3".to_owned()), "{ids:?}");
    }

    /// With no requests coming (a server not ready gets none), the writer tries the target
    /// again every PROBE_INTERVAL, and the log recovers once it can be written; a probe writes
    /// no event.
    #[tokio::test(start_paused = true)]
    async fn a_failing_log_recovers_without_requests() {
        let (auditor, writer, target, _registry) = test_writer(Mode::Blocking);
        target.failing.store(true, Ordering::SeqCst);
        assert!(auditor.record(event(1)).await.is_err());
        tokio::time::sleep(PROBE_INTERVAL * 3 + Duration::from_millis(1)).await;
        assert_eq!(*target.probes.lock().unwrap(), 3);
        assert!(auditor.failing().is_some());
        target.failing.store(false, Ordering::SeqCst);
        tokio::time::sleep(PROBE_INTERVAL).await;
        assert_eq!(auditor.failing(), None);
        // Healthy: no more probes.
        tokio::time::sleep(PROBE_INTERVAL * 3).await;
        assert_eq!(*target.probes.lock().unwrap(), 4);
        writer.finish().await;
        assert!(target.events().is_empty());
    }

    /// A request that gave up waiting marks the log failing whatever its batch came to; with
    /// no requests after it, the writer's probe clears that once the target answers.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_log_recovers_by_probing() {
        let (auditor, writer, target, _registry) = test_writer(Mode::Blocking);
        auditor.inner.as_ref().unwrap().stalled();
        assert!(auditor.failing().unwrap().contains("not keeping up"));
        tokio::time::sleep(PROBE_INTERVAL + Duration::from_millis(1)).await;
        assert_eq!(*target.probes.lock().unwrap(), 1);
        assert_eq!(auditor.failing(), None);
        writer.finish().await;
    }

    /// Batch mode over a failing target: requests go on, the events are counted as failed,
    /// and the log reports failing.
    #[tokio::test]
    async fn batch_mode_goes_on_when_writes_fail() {
        let (auditor, writer, target, registry) = test_writer(Mode::Batch);
        target.failing.store(true, Ordering::SeqCst);
        assert_eq!(auditor.record(event(1)).await, Ok(()));
        writer.finish().await;
        assert_eq!(
            metric(&registry, "events_total{result=\"failed\"}"),
            "events_total{result=\"failed\"} 1"
        );
        assert!(auditor.failing().is_some());
    }

    /// A flood of anonymous refusals from one address: the first is written, the rest make
    /// one summary with their count, written by the writer when the window ends (here without
    /// any request after it); the issued token's event before the flood stays.
    #[tokio::test(start_paused = true)]
    async fn anonymous_refusals_are_summarized() {
        let (auditor, writer, target, registry) = test_writer(Mode::Blocking);
        assert_eq!(auditor.record(event(0)).await, Ok(()));
        for n in 1..=1000 {
            let address = format!("192.0.2.7:{}", 40_000 + n);
            assert_eq!(auditor.record(anonymous(n, &address)).await, Ok(()));
        }
        assert_eq!(
            metric(&registry, "summarized_total"),
            "summarized_total 999"
        );
        tokio::time::sleep(summary::WINDOW + Duration::from_millis(1)).await;
        let events = target.events();
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(events[0]["decision"], "issued");
        assert_eq!(events[1]["requestID"], "r1");
        assert_eq!(events[1]["requester"]["clientAddress"], "192.0.2.7:40001");
        assert_eq!(events[1].get("count"), None);
        let summary = &events[2];
        assert_eq!(summary["count"], 999);
        assert_eq!(summary["requester"]["clientAddress"], "192.0.2.7");
        assert_eq!(summary["requester"]["authenticatedBy"], "anonymous");
        assert_eq!(summary["code"], 401);
        assert_eq!(summary.get("requestID"), None);
        // The next second: the first is written again; finish writes what is owed.
        assert_eq!(auditor.record(anonymous(1001, "192.0.2.7:1")).await, Ok(()));
        assert_eq!(auditor.record(anonymous(1002, "192.0.2.7:2")).await, Ok(()));
        writer.finish().await;
        let events = target.events();
        assert_eq!(events.len(), 5, "{events:?}");
        assert_eq!(events[3]["requestID"], "r1001");
        assert_eq!(events[4]["count"], 1);
    }
}
