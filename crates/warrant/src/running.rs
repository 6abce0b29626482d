//! What `warrant serve` keeps running beside the API, behind one kind of handle: a task it owns
//! (tokio_util's `AbortOnDropHandle`, the handle every task of the core is owned by), told to
//! stop through a `CancellationToken` (the API listener's idiom too) and waited for.
//!
//! Dropping a [`Running`] aborts its task at once: whatever the task holds (watches, the
//! signer's socket, a Lease) is dropped with it. [`Running::stop`] is the graceful way: the
//! task hears the token, finishes what it does on stopping (drains calls, releases a Lease),
//! and is waited for.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// A task `serve` started and owns; see the module documentation.
#[derive(Debug)]
pub(crate) struct Running {
    stop: CancellationToken,
    task: AbortOnDropHandle<()>,
}

impl Running {
    /// Spawns `work`, given the token that tells it to stop.
    pub(crate) fn spawn<W, F>(work: W) -> Running
    where
        W: FnOnce(CancellationToken) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let task = AbortOnDropHandle::new(tokio::spawn(work(stop.clone())));
        Running { stop, task }
    }

    /// Keeps `held` (watches and tasks that stop when dropped) until stopped or dropped.
    pub(crate) fn hold<T: Send + 'static>(held: T) -> Running {
        Running::spawn(|stop| async move {
            stop.cancelled().await;
            drop(held);
        })
    }

    /// Tells the task to stop and waits until it has.
    pub(crate) async fn stop(mut self) {
        self.stop.cancel();
        let _ = (&mut self.task).await;
    }

    /// Tells the task to stop and waits at most `grace` for it; then aborts it.
    pub(crate) async fn stop_within(mut self, grace: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(grace, &mut self.task).await.is_err() {
            self.task.abort();
            let _ = (&mut self.task).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Set when dropped: whether a task's holdings are gone.
    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Dropping the handle ends the task and what it holds, without a stop.
    #[tokio::test]
    async fn dropping_it_ends_the_task_and_what_it_holds() {
        let dropped = Arc::new(AtomicBool::new(false));
        let running = Running::hold(Flag(dropped.clone()));
        tokio::task::yield_now().await;
        assert!(!dropped.load(Ordering::SeqCst));
        drop(running);
        // The aborted task is dropped at the runtime's next turns.
        for _ in 0..1000 {
            if dropped.load(Ordering::SeqCst) {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "the task outlived its handle"
        );
    }

    /// A stop lets the task finish what it does on stopping, and returns once it has.
    #[tokio::test]
    async fn a_stop_waits_for_the_task_to_finish_stopping() {
        let finished = Arc::new(AtomicBool::new(false));
        let running = Running::spawn(|stop| {
            let finished = finished.clone();
            async move {
                stop.cancelled().await;
                tokio::task::yield_now().await;
                finished.store(true, Ordering::SeqCst);
            }
        });
        running.stop().await;
        assert!(finished.load(Ordering::SeqCst));
    }

    /// A task that does not stop within the grace is aborted, and the stop returns.
    #[tokio::test(start_paused = true)]
    async fn a_task_that_ignores_the_stop_is_aborted_after_the_grace() {
        let dropped = Arc::new(AtomicBool::new(false));
        let held = Flag(dropped.clone());
        let running = Running::spawn(|_stop| async move {
            let _held = held;
            std::future::pending::<()>().await;
        });
        running.stop_within(Duration::from_secs(5)).await;
        assert!(dropped.load(Ordering::SeqCst));
    }
}
