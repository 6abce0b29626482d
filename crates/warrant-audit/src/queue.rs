//! The queue between requests and the writer task, and what they share beside it: the
//! metrics, the log's health, the summaries of refusals owed. A request hands its event over
//! here: queued if there is room (batch mode drops and counts it if not), or, in blocking mode,
//! queued and then waited for until the writer says it is written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;

use crate::summary::{Summaries, Summary, Verdict};
use crate::{Event, MAX_QUEUE_WAIT, Mode, NotRecorded};

/// One queued event, and in blocking mode where to say whether it was written.
pub(crate) struct Entry {
    pub(crate) event: Box<Event>,
    /// For a summary: how many refusals it stands for.
    pub(crate) count: Option<u64>,
    pub(crate) waiter: Option<oneshot::Sender<Result<(), NotRecorded>>>,
}

/// What requests send the writer.
pub(crate) enum Message {
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
pub(crate) struct ResultLabels {
    pub(crate) result: &'static str,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct AuditMetrics {
    /// Events by what became of them: `written`, `dropped` (queue full in batch mode, or the
    /// writer stopped), `failed` (the write failed).
    pub(crate) events: Family<ResultLabels, Counter>,
    /// Times a request found the queue full and waited (blocking mode).
    pub(crate) queue_full: Counter,
    /// Refusals of unauthenticated callers counted in a summary instead of written.
    pub(crate) summarized: Counter,
}

impl AuditMetrics {
    pub(crate) fn count(&self, result: &'static str, n: u64) {
        self.events
            .get_or_create(&ResultLabels { result })
            .inc_by(n);
    }
}

/// Whether the audit log can be written, as the writer last found it.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Set with `why`; read on every batch without taking the lock.
    pub(crate) failing: AtomicBool,
    why: Mutex<String>,
}

impl Health {
    pub(crate) fn fail(&self, why: String) {
        *self.why.lock().unwrap_or_else(PoisonError::into_inner) = why;
        self.failing.store(true, Ordering::Release);
    }

    /// Back to healthy; true if it was failing.
    pub(crate) fn recover(&self) -> bool {
        self.failing.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn failing(&self) -> Option<String> {
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
pub(crate) struct Shared {
    sender: mpsc::Sender<Message>,
    pub(crate) mode: Mode,
    pub(crate) metrics: AuditMetrics,
    pub(crate) health: Health,
    summaries: Mutex<Summaries>,
    /// Wakes the writer: a summary is owed (it then sleeps until the window ends), or a
    /// request found the log stalled (it then probes until a write succeeds).
    pub(crate) wake: Notify,
}

impl Shared {
    pub(crate) fn new(sender: mpsc::Sender<Message>, mode: Mode, metrics: AuditMetrics) -> Self {
        Shared {
            sender,
            mode,
            metrics,
            health: Health::default(),
            summaries: Mutex::new(Summaries::default()),
            wake: Notify::new(),
        }
    }

    pub(crate) fn summaries(&self) -> std::sync::MutexGuard<'_, Summaries> {
        self.summaries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `entry` if there is room; counts it dropped if not.
    pub(crate) fn offer(&self, entry: Entry) {
        if self.sender.try_send(Message::Event(entry)).is_err() {
            self.metrics.count("dropped", 1);
        }
    }

    /// A refusal of a caller that did not authenticate: written if it is the first of its kind
    /// in the window, else counted for the window's summary. Never waits.
    pub(crate) fn refusal(&self, event: Event) {
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
    pub(crate) async fn record_written(&self, event: Event) -> Result<(), NotRecorded> {
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

    pub(crate) fn stalled(&self) {
        self.health.fail(format!(
            "the audit log is not keeping up: an event was not written within {} s",
            MAX_QUEUE_WAIT.as_secs()
        ));
        // However the writer's batch ends, the log stays failing until a write succeeds.
        self.wake.notify_one();
    }
}

/// A window's summary as the writer takes it.
pub(crate) fn summary_entry(summary: Summary) -> Entry {
    Entry {
        event: Box::new(summary.event),
        count: Some(summary.count),
        waiter: None,
    }
}
