//! warrant's audit trail: who got a token for what, when, and who asked.
//!
//! Every TokenRequest (issued or refused), every TokenReview and every external-signer Sign
//! becomes one [`Event`], a JSON line in `--audit-log-path` (docs/audit.md is the schema).
//! Requests hand their event to an [`Auditor`], which queues it for a writer thread of its own:
//! the disk is never written on a request's path, and a batch of events is one write.
//!
//! The queue is bounded (`--audit-log-batch-buffer-size`). What happens when it is full is the
//! operator's choice, in kube-apiserver's words (`--audit-log-mode`):
//! - `blocking` (the default): the request waits for room, so no event is ever lost; a disk
//!   slower than the request rate slows requests down (counted in
//!   `warrant_audit_queue_full_total`);
//! - `batch`: the event is dropped and counted (`warrant_audit_events_total{result="dropped"}`),
//!   so requests never wait on the disk.
//!
//! At shutdown, [`AuditWriter::finish`] writes out everything queued before the process exits.

mod event;
mod file;

use std::path::PathBuf;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::io::Write as _;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use warrant_clock::Clock;

pub use self::event::{
    BoundObject, Decision, Event, EventKind, Requester, ServiceAccount, TokenFacts,
};
use self::file::RotatingFile;
pub use self::file::Rotation;

/// Where events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard output (`--audit-log-path -`), never rotated.
    Stdout,
    /// A file, rotated as [`Rotation`] says.
    File(PathBuf, Rotation),
}

/// What a request does when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Wait for room: no event is lost.
    Blocking,
    /// Drop the event and count it: no request waits.
    Batch,
}

/// The audit log's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOptions {
    /// Where events go.
    pub destination: Destination,
    /// What a request does when the queue is full.
    pub mode: Mode,
    /// How many events may wait for the writer.
    pub buffer_size: usize,
}

/// The audit log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("--audit-log-path {path}: {source}")]
pub struct AuditError {
    path: String,
    #[source]
    source: std::io::Error,
}

enum Message {
    Event(Box<Event>),
    /// Write out what is queued, then stop.
    Finish,
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
}

impl AuditMetrics {
    fn count(&self, result: &'static str, n: u64) {
        self.events
            .get_or_create(&ResultLabels { result })
            .inc_by(n);
    }
}

/// Where requests hand their events. Cheap to clone; [`Auditor::disabled`] takes every event
/// and does nothing with it, at no cost.
#[derive(Clone, Debug, Default)]
pub struct Auditor {
    inner: Option<Arc<Queue>>,
}

#[derive(Debug)]
struct Queue {
    sender: mpsc::Sender<Message>,
    mode: Mode,
    metrics: AuditMetrics,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Message::Event(_) => "Event",
            Message::Finish => "Finish",
        })
    }
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

    /// Queues `event` for the writer; in blocking mode, waits for room if the queue is full, for
    /// at most [`MAX_QUEUE_WAIT`]. `Err` only in blocking mode, when that wait ran out (the disk
    /// is not keeping up): the event is dropped and counted, and the caller must not complete
    /// what the event records (the request is answered 503 instead).
    pub async fn record(&self, event: Event) -> Result<(), QueueStalled> {
        let Some(queue) = &self.inner else {
            return Ok(());
        };
        let message = Message::Event(Box::new(event));
        match queue.sender.try_send(message) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(message)) => match queue.mode {
                Mode::Blocking => {
                    queue.metrics.queue_full.inc();
                    match tokio::time::timeout(MAX_QUEUE_WAIT, queue.sender.send(message)).await {
                        Ok(Ok(())) => Ok(()),
                        // The writer stopped (shutdown): nothing more can be written.
                        Ok(Err(_)) => {
                            queue.metrics.count("dropped", 1);
                            Ok(())
                        }
                        Err(_) => {
                            queue.metrics.count("dropped", 1);
                            Err(QueueStalled)
                        }
                    }
                }
                Mode::Batch => {
                    queue.metrics.count("dropped", 1);
                    Ok(())
                }
            },
            Err(mpsc::error::TrySendError::Closed(_)) => {
                queue.metrics.count("dropped", 1);
                Ok(())
            }
        }
    }
}

/// How long a request waits for room in a full queue in blocking mode: a request's own timeout.
/// A disk that hangs longer than that fails the requests it holds (503) rather than holding them,
/// and their connections, without end.
pub const MAX_QUEUE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The blocking-mode queue stayed full for [`MAX_QUEUE_WAIT`]: the event was not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the audit log is not keeping up: the event could not be queued within 60 s")]
pub struct QueueStalled;

/// How long [`AuditWriter::finish`] waits for the queue to be written out.
pub const FINISH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The writer thread. Keep it until the server has stopped answering, then
/// [`finish`](AuditWriter::finish) it.
#[derive(Debug)]
pub struct AuditWriter {
    sender: mpsc::Sender<Message>,
    done: oneshot::Receiver<()>,
}

impl AuditWriter {
    /// Writes out every event queued so far and stops the thread. Events recorded after this
    /// are dropped (and counted). Waits at most [`FINISH_TIMEOUT`]: a disk that stopped
    /// answering must not keep the process from exiting; what was left is then logged.
    pub async fn finish(self) {
        let queued = self.sender.max_capacity() - self.sender.capacity();
        let written = async {
            if self.sender.send(Message::Finish).await.is_ok() {
                let _ = self.done.await;
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
/// registers the metrics and starts the writer thread. `clock` dates rotated files.
pub fn start(
    options: &AuditOptions,
    clock: Clock,
    registry: &mut Registry,
) -> Result<(Auditor, AuditWriter), AuditError> {
    let sink = match &options.destination {
        Destination::Stdout => Sink::Stdout(std::io::BufWriter::new(std::io::stdout())),
        Destination::File(path, rotation) => Sink::File(
            RotatingFile::open(path, *rotation).map_err(|source| AuditError {
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
    for result in ["written", "dropped", "failed"] {
        metrics.count(result, 0);
    }
    let (sender, receiver) = mpsc::channel(options.buffer_size.max(1));
    let (done_tx, done) = oneshot::channel();
    let writer_metrics = metrics.clone();
    std::thread::Builder::new()
        .name("warrant-audit".to_owned())
        .spawn(move || {
            write_events(receiver, sink, &clock, &writer_metrics);
            let _ = done_tx.send(());
        })
        .map_err(|source| AuditError {
            path: "(the writer thread)".to_owned(),
            source,
        })?;
    let auditor = Auditor {
        inner: Some(Arc::new(Queue {
            sender: sender.clone(),
            mode: options.mode,
            metrics,
        })),
    };
    Ok((auditor, AuditWriter { sender, done }))
}

enum Sink {
    Stdout(std::io::BufWriter<std::io::Stdout>),
    File(RotatingFile),
}

impl Sink {
    fn write_line(&mut self, line: &[u8], clock: &Clock) -> std::io::Result<()> {
        match self {
            Sink::Stdout(out) => out.write_all(line),
            Sink::File(file) => file.write_line(line, clock.now()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::File(file) => file.flush(),
        }
    }
}

/// The writer thread: takes what is queued, writes it as one batch, flushes, and waits for
/// more, until [`Message::Finish`] (or every sender is gone).
fn write_events(
    mut receiver: mpsc::Receiver<Message>,
    mut sink: Sink,
    clock: &Clock,
    metrics: &AuditMetrics,
) {
    let mut line = Vec::with_capacity(2048);
    let mut failures: u64 = 0;
    while let Some(first) = receiver.blocking_recv() {
        let mut batch: u64 = 0;
        let mut failed: u64 = 0;
        let mut finishing = false;
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                Message::Event(event) => {
                    line.clear();
                    // An event is plain data: serializing it cannot fail.
                    let _ = serde_json::to_writer(&mut line, &event);
                    line.push(b'\n');
                    match sink.write_line(&line, clock) {
                        Ok(()) => batch += 1,
                        Err(e) => {
                            failed += 1;
                            report(&mut failures, &e);
                        }
                    }
                }
                Message::Finish => {
                    // Nothing new is accepted; what is queued is still written below.
                    finishing = true;
                    receiver.close();
                }
            }
            next = receiver.try_recv().ok();
        }
        match sink.flush() {
            Ok(()) => metrics.count("written", batch),
            Err(e) => {
                failed += batch;
                report(&mut failures, &e);
            }
        }
        if failed > 0 {
            metrics.count("failed", failed);
        }
        if finishing {
            break;
        }
    }
}

/// Logs a failed write: the first, then every 1,000th (the metric counts each).
fn report(failures: &mut u64, error: &std::io::Error) {
    if failures.is_multiple_of(1000) {
        tracing::error!(error = %error, failures = *failures + 1, "could not write the audit log: events are being lost (warrant_audit_events_total{{result=\"failed\"}})");
    }
    *failures += 1;
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    fn event(n: u32) -> Event {
        Event {
            kind: EventKind::TokenRequest,
            time: Timestamp::UNIX_EPOCH,
            request_id: format!("r{n}"),
            requester: Requester::anonymous(String::new()),
            decision: Decision::Refused,
            code: Some(401),
            reason: "Unauthorized".into(),
            service_account: None,
            token: None,
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
        };
        let mut registry = Registry::default();
        let (auditor, writer) = start(
            &options,
            Clock::manual(Timestamp::UNIX_EPOCH),
            &mut registry,
        )
        .unwrap();
        // More than the queue holds: blocking mode waits, and loses none.
        for n in 0..100 {
            assert_eq!(auditor.record(event(n)).await, Ok(()));
        }
        writer.finish().await;
        let text = std::fs::read_to_string(&path).unwrap();
        let ids: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["requestID"].to_string())
            .collect();
        let expected: Vec<String> = (0..100).map(|n| format!("\"r{n}\"")).collect();
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
        let metrics = AuditMetrics::default();
        let auditor = Auditor {
            inner: Some(Arc::new(Queue {
                sender,
                mode: Mode::Batch,
                metrics: metrics.clone(),
            })),
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

    /// In blocking mode a full queue holds the request until there is room, but not without
    /// end: after MAX_QUEUE_WAIT the event is dropped, counted, and the caller told.
    #[tokio::test(start_paused = true)]
    async fn blocking_mode_waits_for_room_then_gives_up() {
        let (sender, mut receiver) = mpsc::channel(1);
        let metrics = AuditMetrics::default();
        let auditor = Auditor {
            inner: Some(Arc::new(Queue {
                sender,
                mode: Mode::Blocking,
                metrics: metrics.clone(),
            })),
        };
        let dropped = || {
            metrics
                .events
                .get_or_create(&ResultLabels { result: "dropped" })
                .get()
        };
        assert_eq!(auditor.record(event(0)).await, Ok(()));
        // Full: the second waits, and gets in when the writer takes the first.
        let waiting = tokio::spawn({
            let auditor = auditor.clone();
            async move { auditor.record(event(1)).await }
        });
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        assert!(!waiting.is_finished());
        assert!(matches!(receiver.recv().await, Some(Message::Event(_))));
        assert_eq!(waiting.await.unwrap(), Ok(()));
        assert_eq!(dropped(), 0);
        // A writer that takes nothing more: the third gives up after MAX_QUEUE_WAIT.
        let started = tokio::time::Instant::now();
        assert_eq!(auditor.record(event(2)).await, Err(QueueStalled));
        assert_eq!(started.elapsed(), MAX_QUEUE_WAIT);
        assert_eq!(dropped(), 1);
        assert_eq!(metrics.queue_full.get(), 2);
    }

    /// A writer that never answers (a disk that hangs) does not hold shutdown forever.
    #[tokio::test(start_paused = true)]
    async fn finish_gives_up_on_a_writer_that_never_answers() {
        let (sender, mut receiver) = mpsc::channel(4);
        let (_never, done) = oneshot::channel();
        let writer = AuditWriter { sender, done };
        let started = tokio::time::Instant::now();
        writer.finish().await;
        assert_eq!(started.elapsed(), FINISH_TIMEOUT);
        // The request to finish was queued; nothing answered it.
        assert!(matches!(receiver.try_recv(), Ok(Message::Finish)));
    }

    /// A path that cannot be written is a startup error naming it.
    #[test]
    fn an_unwritable_path_fails_at_start() {
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
}
