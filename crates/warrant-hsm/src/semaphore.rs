//! Blocking device calls from async code, without blocking the runtime.
//!
//! A PKCS#11 call blocks (a network HSM takes milliseconds). [`BlockingSemaphore`] is a semaphore
//! whose permits are places for such calls: it runs each on tokio's blocking threads once it
//! holds a permit, at most `limit` at once (for a token, one per session), so a
//! slow HSM never stalls the runtime's workers and a burst waits for a free session in an
//! async queue instead of piling up threads. It is the device layer's half of signing; the key
//! layer's half is [`crate::Pkcs11Key`], warrant-token's `RemoteKey` for a key in a token.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::HsmError;

/// A semaphore for blocking device calls: at most `limit` run at once, each on one of tokio's
/// blocking threads. Cheap to clone; clones share the permits.
#[derive(Debug, Clone)]
pub struct BlockingSemaphore {
    permits: Arc<Semaphore>,
}

impl BlockingSemaphore {
    /// At most `limit` (at least 1) calls in progress at once.
    pub fn new(limit: usize) -> Self {
        BlockingSemaphore {
            permits: Arc::new(Semaphore::new(limit.max(1))),
        }
    }

    /// Runs `call` on a blocking thread once one of the `limit` places is free. A caller that
    /// stops waiting does not free the place early: the call in progress keeps it until done.
    pub async fn run<T: Send + 'static>(
        &self,
        call: impl FnOnce() -> Result<T, HsmError> + Send + 'static,
    ) -> Result<T, HsmError> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(HsmError::ThreadsClosed)?;
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            call()
        });
        job.await.map_err(HsmError::Thread)?
    }

    /// How many more calls could start now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Records which thread runs each call and how many run at once, and holds each call until
    /// the test lets it go.
    struct Recording {
        threads: Mutex<Vec<std::thread::ThreadId>>,
        current: AtomicUsize,
        most: AtomicUsize,
        entered: std::sync::mpsc::SyncSender<()>,
        release: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Recording {
        fn call(&self, input: Vec<u8>) -> Result<Vec<u8>, HsmError> {
            self.threads
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.entered.send(()).unwrap();
            self.release.lock().unwrap().recv().unwrap();
            self.current.fetch_sub(1, Ordering::SeqCst);
            Ok(input)
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn calls_run_off_the_runtime_thread_and_within_the_bound() {
        let (entered_tx, entered_rx) = std::sync::mpsc::sync_channel(16);
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let recording = Arc::new(Recording {
            threads: Mutex::default(),
            current: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            entered: entered_tx,
            release: Mutex::new(release_rx),
        });
        let threads = BlockingSemaphore::new(2);
        let calls: Vec<_> = (0..5u8)
            .map(|i| {
                let threads = threads.clone();
                let recording = recording.clone();
                tokio::spawn(async move { threads.run(move || recording.call(vec![i])).await })
            })
            .collect();
        // Two calls get in; the others wait for a place (asynchronously: this runtime has one
        // thread, and it is free to run this test).
        let blocking = tokio::task::spawn_blocking(move || {
            entered_rx.recv().unwrap();
            entered_rx.recv().unwrap();
            entered_rx
        });
        let entered_rx = blocking.await.unwrap();
        assert_eq!(threads.available(), 0);
        for _ in 0..5 {
            release_tx.send(()).unwrap();
        }
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await.unwrap().unwrap(), vec![i as u8]);
        }
        drop(entered_rx);
        assert_eq!(
            recording.most.load(Ordering::SeqCst),
            2,
            "more than the bound ran at once"
        );
        let runtime_thread = std::thread::current().id();
        assert!(
            recording
                .threads
                .lock()
                .unwrap()
                .iter()
                .all(|&t| t != runtime_thread)
        );
        assert_eq!(threads.available(), 2);
    }
}
