//! The writer task: takes everything queued at once, writes it as one batch on tokio's
//! blocking pool (a JSON line an event, in the schema chosen), tells each waiting request
//! whether its event was written, and keeps the log's health: a failed write makes it failing,
//! and the writer probes the target every [`PROBE_INTERVAL`] until a write succeeds.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use warrant_clock::Clock;

use crate::file::{RotatingFile, Written};
use crate::kube;
use crate::queue::{Entry, Message, Shared, summary_entry};
use crate::{Event, NotRecorded, PROBE_INTERVAL, Schema};

/// Where the writer writes.
pub(crate) enum Sink {
    Stdout(std::io::Stdout),
    File(RotatingFile),
    /// A target a test makes fail and work again.
    #[cfg(test)]
    Test(Arc<crate::tests::TestTarget>),
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
pub(crate) async fn write_events(
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
pub(crate) fn line(schema: Schema, event: &Event, count: Option<u64>) -> Vec<u8> {
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
