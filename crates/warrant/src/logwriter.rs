//! The log's writer thread, bounded in bytes.
//!
//! Events are formatted where they happen and handed, one line each, to a thread that writes
//! them to stderr in batches: a request never waits on stderr (writing in place cost a third
//! of ES256 issuing's throughput, docs/benchmarks.md). What waits in between is bounded in
//! bytes, not lines: with a reader that falls behind (a stalled log shipper, a full pipe), a
//! queue counted in lines held whatever those lines weighed, and a caller whose values reach
//! the log could make it grow by gigabytes. Past [`QUEUE_BYTES`] a line is dropped and counted,
//! and once the writer catches up it logs how many it dropped, at warn level, in the log's own
//! format; nothing waits and nothing grows. A line is the event as formatted, so a long value
//! counts with its length (values from clients are cut to 256 characters where they are
//! quoted, so a line is a few kilobytes at most).

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;

use tracing::Dispatch;

/// The most bytes of formatted lines waiting for the writer thread.
pub(crate) const QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// Every line dropped since the process started (the writer reports each batch of them).
static DROPPED_TOTAL: AtomicU64 = AtomicU64::new(0);

/// Lines dropped since the process started because the log's reader fell behind.
pub(crate) fn dropped_total() -> u64 {
    DROPPED_TOTAL.load(Ordering::Relaxed)
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    /// Bytes of `lines` and of the batch being written: the bound.
    bytes: usize,
    /// Lines dropped since the writer last said so.
    dropped: u64,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    limit: usize,
    /// The subscriber the drop notice goes through; the global one if unset.
    dispatch: OnceLock<Dispatch>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where the subscriber writes each formatted event (tracing's fmt layer writes an event with
/// one `write_all`): queued whole, or dropped whole past the bound.
#[derive(Clone)]
pub(crate) struct LogSink(Arc<Shared>);

impl LogSink {
    /// Sends the writer's drop notices through `dispatch` instead of the global subscriber
    /// (a test's own).
    #[cfg(test)]
    fn report_through(&self, dispatch: Dispatch) {
        let _ = self.0.dispatch.set(dispatch);
    }
}

impl Write for LogSink {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut queue = self.0.lock();
        if queue.bytes.saturating_add(line.len()) > self.0.limit {
            queue.dropped += 1;
            DROPPED_TOTAL.fetch_add(1, Ordering::Relaxed);
        } else {
            queue.bytes += line.len();
            queue.lines.push_back(line.to_vec());
            self.0.ready.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Keeps the writer thread; dropping it writes what is queued and stops the thread.
pub(crate) struct LogGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Starts the writer thread over `out`, holding at most `limit` bytes of lines.
pub(crate) fn spawn<W: Write + Send + 'static>(
    out: W,
    limit: usize,
) -> std::io::Result<(LogSink, LogGuard)> {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
        ready: Condvar::new(),
        limit,
        dispatch: OnceLock::new(),
    });
    let worker = shared.clone();
    let thread = std::thread::Builder::new()
        .name("warrant-log".into())
        .spawn(move || write_lines(&worker, out))?;
    Ok((
        LogSink(shared.clone()),
        LogGuard {
            shared,
            thread: Some(thread),
        },
    ))
}

fn write_lines<W: Write>(shared: &Shared, out: W) {
    // Buffered: flushed after each batch taken off the queue, so a burst is one write.
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    loop {
        let (batch, dropped) = {
            let mut queue = shared.lock();
            while queue.lines.is_empty() && queue.dropped == 0 && !queue.closed {
                queue = shared
                    .ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if queue.lines.is_empty() && queue.dropped == 0 {
                return;
            }
            (
                std::mem::take(&mut queue.lines),
                std::mem::take(&mut queue.dropped),
            )
        };
        let mut bytes = 0;
        for line in &batch {
            bytes += line.len();
            // stderr gone: nothing to tell; the lines still leave the queue.
            let _ = out.write_all(line);
        }
        let _ = out.flush();
        drop(batch);
        shared.lock().bytes -= bytes;
        if dropped > 0 {
            // Through the subscriber, so it has the log's format; it joins the queue.
            let notice = || {
                tracing::warn!(
                    dropped,
                    dropped_total = dropped_total(),
                    limit_bytes = shared.limit,
                    "log lines were dropped: the log's reader fell behind by more than the writer holds"
                );
            };
            match shared.dispatch.get() {
                Some(dispatch) => tracing::dispatcher::with_default(dispatch, notice),
                None => notice(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that takes nothing until let go, then records what it gets.
    #[derive(Clone, Default)]
    struct Stalled {
        open: Arc<(Mutex<bool>, Condvar)>,
        got: Arc<Mutex<Vec<u8>>>,
    }

    impl Stalled {
        fn let_go(&self) {
            *self.open.0.lock().unwrap() = true;
            self.open.1.notify_all();
        }
        fn text(&self) -> String {
            String::from_utf8(self.got.lock().unwrap().clone()).unwrap()
        }
    }

    impl Write for Stalled {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut open = self.open.0.lock().unwrap();
            while !*open {
                open = self.open.1.wait(open).unwrap();
            }
            self.got.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Lines past the bound, with the reader stalled, are dropped (nothing waits, nothing
    /// grows), the rest written in order, and the drop is reported with its count once the
    /// reader takes lines again.
    #[test]
    fn a_stalled_reader_costs_lines_counted_never_memory() {
        let reader = Stalled::default();
        let (mut sink, guard) = spawn(reader.clone(), 1000).unwrap();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_writer({
                let sink = sink.clone();
                move || sink.clone()
            })
            .finish();
        let dispatch = Dispatch::new(subscriber);
        sink.report_through(dispatch.clone());
        let _default = tracing::dispatcher::set_default(&dispatch);
        let line = |n: usize| format!("line {n:04} {}\n", "x".repeat(90));
        let before = dropped_total();
        // 100 lines of 100 bytes into 1000: the writer may take the first batch (then stall
        // writing it), so at most 20 fit between the batch held and the queue.
        for n in 0..100 {
            sink.write_all(line(n).as_bytes()).unwrap();
        }
        let queued = sink.0.lock().bytes;
        assert!(queued <= 1000, "{queued} bytes held past the bound");
        let dropped = dropped_total() - before;
        assert!(dropped >= 80, "only {dropped} of 100 lines dropped");
        reader.let_go();
        drop(guard);
        let text = reader.text();
        let written: Vec<&str> = text.lines().filter(|l| l.starts_with("line ")).collect();
        assert_eq!(written.len() as u64, 100 - dropped);
        assert!(written.is_sorted(), "{written:?}");
        assert!(written[0].starts_with("line 0000"), "{written:?}");
        // One notice, or two when the writer took its first batch while lines were still
        // being dropped (the drops until then, then the rest): together they count them all.
        let notices: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("log lines were dropped"))
            .collect();
        assert!(!notices.is_empty(), "no drop notice in {text}");
        let mut reported = 0;
        for notice in &notices {
            assert!(notice.contains("WARN"), "{notice}");
            assert!(notice.contains("limit_bytes=1000"), "{notice}");
            let count = notice
                .split_whitespace()
                .find_map(|field| field.strip_prefix("dropped="))
                .unwrap_or_else(|| panic!("no count in {notice}"));
            reported += count.parse::<u64>().unwrap();
        }
        assert_eq!(reported, dropped, "{notices:?}");
    }

    /// Everything queued is written before the guard returns, in order, and without a drop
    /// nothing else is said.
    #[test]
    fn dropping_the_guard_writes_what_is_queued() {
        let reader = Stalled::default();
        reader.let_go();
        let (mut sink, guard) = spawn(reader.clone(), QUEUE_BYTES).unwrap();
        for n in 0..1000 {
            sink.write_all(format!("{n}\n").as_bytes()).unwrap();
        }
        drop(guard);
        let text = reader.text();
        let expected: Vec<String> = (0..1000).map(|n| n.to_string()).collect();
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    }
}
