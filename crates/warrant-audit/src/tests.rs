//! The audit log end to end: events recorded through an [`Auditor`] and written by its
//! writer task to a target the tests make fail and work again.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use jiff::Timestamp;
use tokio::time::Instant;

use super::*;
use crate::file::Written;
use crate::queue::ResultLabels;

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
