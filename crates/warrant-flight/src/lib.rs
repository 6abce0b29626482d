//! Single flight for lookups warrant makes on its callers' behalf: the TokenReviews and
//! SubjectAccessReviews it sends kube-apiserver (delegation), and the live GET after a cache
//! miss.
//!
//! The first caller that needs a key starts its lookup; every caller that needs the same key
//! while it runs joins it. The lookup runs as a task of its own, owned by no caller:
//! - a caller that goes away (a client that hangs up) neither cancels it for the others nor
//!   keeps it alive: it runs to its end, and its entry leaves the map when it ends, whether
//!   anyone still waits or not, so an abandoned lookup holds its key (which may be a token) and
//!   its connection only as long as the lookup itself;
//! - its end is its own bound: the future given to [`SingleFlight::join`] must end in bounded
//!   time (the callers wrap their calls in timeouts and bound their retries);
//! - at most `limit` lookups run at once: a caller that would start one more is refused at once
//!   with [`FlightError::Overloaded`], not queued, so a burst of distinct keys costs refusals,
//!   never memory. Joining a lookup already running is never refused.
//!
//! An answer is handed only to the callers that joined while the lookup ran: once it ends, the
//! next caller for the key starts afresh (remembering answers is a cache's job, with its TTL).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::metrics::gauge::Gauge;
use tokio::runtime::Handle;
use tokio::sync::watch;

/// Why a caller got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlightError {
    /// `limit` lookups were already running; the caller may retry shortly.
    #[error("{limit} lookups are already in flight")]
    Overloaded {
        /// The limit.
        limit: usize,
    },
    /// The lookup's task ended without an answer: it panicked, or its runtime shut down.
    #[error("the lookup ended without an answer")]
    Lost,
    /// There was no Tokio runtime to run the lookup on.
    #[error("no Tokio runtime to run the lookup on")]
    NoRuntime,
}

/// Lookups in flight by key. Cheap to share behind an `Arc`; see the crate docs.
pub struct SingleFlight<K, V> {
    shared: Arc<Shared<K, V>>,
    runtime: Option<Handle>,
}

struct Shared<K, V> {
    in_flight: Mutex<HashMap<K, watch::Receiver<Option<V>>>>,
    limit: usize,
    gauge: Gauge,
}

impl<K, V> std::fmt::Debug for SingleFlight<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleFlight")
            .field("limit", &self.shared.limit)
            .field("in_flight", &self.shared.gauge.get())
            .finish_non_exhaustive()
    }
}

impl<K, V> SingleFlight<K, V>
where
    K: Eq + Hash + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// At most `limit` lookups at once (at least one), run on the runtime of whoever starts
    /// them.
    pub fn new(limit: usize) -> Self {
        SingleFlight {
            shared: Arc::new(Shared {
                in_flight: Mutex::new(HashMap::new()),
                limit: limit.max(1),
                gauge: Gauge::default(),
            }),
            runtime: None,
        }
    }

    /// Runs lookups on `runtime`, whoever starts them.
    pub fn on_runtime(mut self, runtime: Handle) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// The number of lookups running, as a gauge to register in a metrics registry.
    pub fn gauge(&self) -> Gauge {
        self.shared.gauge.clone()
    }

    /// How many lookups are running.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().len()
    }

    /// The most lookups that may run at once.
    pub fn limit(&self) -> usize {
        self.shared.limit
    }

    /// Joins the lookup running for `key`, or starts `start()` as one. The returned
    /// [`Flight`] gives the answer; dropping it leaves the lookup running for the others.
    pub fn join<F>(&self, key: K, start: impl FnOnce() -> F) -> Result<Flight<V>, FlightError>
    where
        F: Future<Output = V> + Send + 'static,
    {
        let mut in_flight = self.shared.lock();
        if let Some(answer) = in_flight.get(&key) {
            return Ok(Flight {
                answer: answer.clone(),
                joined: true,
            });
        }
        if in_flight.len() >= self.shared.limit {
            return Err(FlightError::Overloaded {
                limit: self.shared.limit,
            });
        }
        let runtime = match &self.runtime {
            Some(runtime) => runtime.clone(),
            None => Handle::try_current().map_err(|_| FlightError::NoRuntime)?,
        };
        let (publish, answer) = watch::channel(None);
        in_flight.insert(key.clone(), answer.clone());
        self.shared.gauge.inc();
        let entry = Entry {
            shared: self.shared.clone(),
            key: Some(key),
        };
        let lookup = start();
        drop(in_flight);
        runtime.spawn(async move {
            let value = lookup.await;
            // Out of the map before the answer is out: a caller that comes now starts afresh.
            drop(entry);
            // Nobody may be waiting any more; the answer is then simply dropped.
            let _ = publish.send(Some(value));
        });
        Ok(Flight {
            answer,
            joined: false,
        })
    }
}

impl<K, V> Shared<K, V> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, watch::Receiver<Option<V>>>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A lookup's place in the map, held by its task: removed when the task ends, however it ends
/// (an answer, a panic, the runtime shutting down).
struct Entry<K: Eq + Hash, V> {
    shared: Arc<Shared<K, V>>,
    key: Option<K>,
}

impl<K: Eq + Hash, V> Drop for Entry<K, V> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.shared.lock().remove(&key);
            self.shared.gauge.dec();
        }
    }
}

/// A caller's share of a lookup.
#[derive(Debug)]
pub struct Flight<V> {
    answer: watch::Receiver<Option<V>>,
    joined: bool,
}

impl<V: Clone> Flight<V> {
    /// True if the lookup was already running for another caller.
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// Waits for the lookup's answer.
    pub async fn answer(mut self) -> Result<V, FlightError> {
        match self.answer.wait_for(Option::is_some).await {
            Ok(value) => value.clone().ok_or(FlightError::Lost),
            Err(_) => Err(FlightError::Lost),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A lookup that counts its calls and answers with the count after `delay`.
    fn counted(
        calls: &Arc<AtomicUsize>,
        delay: Duration,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = usize> + Send>> {
        let calls = calls.clone();
        move || {
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                calls.fetch_add(1, Ordering::SeqCst) + 1
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn callers_of_one_key_share_one_call_and_a_finished_one_is_not_reused() {
        let flight = SingleFlight::<&str, usize>::new(8);
        let calls = Arc::new(AtomicUsize::new(0));
        let second = Duration::from_secs(1);
        let a = flight.join("k", counted(&calls, second)).unwrap();
        let b = flight.join("k", counted(&calls, second)).unwrap();
        let other = flight.join("other", counted(&calls, second)).unwrap();
        assert!(!a.joined() && b.joined() && !other.joined());
        assert_eq!(flight.in_flight(), 2);
        let (a, b, other) = tokio::join!(a.answer(), b.answer(), other.answer());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(a, b);
        assert_ne!(a, other);
        // Finished: the next caller of "k" starts a new call.
        assert_eq!(flight.in_flight(), 0);
        let again = flight.join("k", counted(&calls, second)).unwrap();
        assert!(!again.joined());
        assert_eq!(again.answer().await, Ok(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lookup_whose_callers_all_left_still_ends_and_leaves() {
        let flight = SingleFlight::<u32, usize>::new(8);
        let calls = Arc::new(AtomicUsize::new(0));
        for key in 0..5 {
            // Every caller gives up at once.
            drop(
                flight
                    .join(key, counted(&calls, Duration::from_secs(10)))
                    .unwrap(),
            );
        }
        assert_eq!(flight.in_flight(), 5);
        assert_eq!(flight.gauge().get(), 5);
        tokio::time::sleep(Duration::from_secs(11)).await;
        // Each ran to its end with nobody waiting, and its entry went with it.
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        assert_eq!(flight.in_flight(), 0);
        assert_eq!(flight.gauge().get(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_limit_new_keys_are_refused_and_running_ones_joined() {
        let flight = SingleFlight::<u32, usize>::new(2);
        let calls = Arc::new(AtomicUsize::new(0));
        let hour = Duration::from_secs(3600);
        let first = flight.join(1, counted(&calls, hour)).unwrap();
        let _second = flight.join(2, counted(&calls, hour)).unwrap();
        assert_eq!(
            flight.join(3, counted(&calls, hour)).unwrap_err(),
            FlightError::Overloaded { limit: 2 }
        );
        // A key already running is shared, limit or not.
        let joined = flight.join(1, counted(&calls, hour)).unwrap();
        assert!(joined.joined());
        drop(first);
        assert_eq!(joined.answer().await, Ok(1));
        // One finished: room for another.
        assert!(flight.join(3, counted(&calls, hour)).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lookup_that_panics_answers_lost_and_leaves() {
        let flight = SingleFlight::<&str, usize>::new(2);
        let waiting = flight
            .join("k", || async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                panic!("the lookup failed badly")
            })
            .unwrap();
        assert_eq!(waiting.answer().await, Err(FlightError::Lost));
        assert_eq!(flight.in_flight(), 0);
        assert_eq!(flight.gauge().get(), 0);
    }

    #[test]
    fn outside_a_runtime_nothing_starts() {
        let flight = SingleFlight::<&str, usize>::new(2);
        assert_eq!(
            flight.join("k", || async { 1 }).unwrap_err(),
            FlightError::NoRuntime
        );
        assert_eq!(flight.in_flight(), 0);
        assert_eq!(flight.gauge().get(), 0);
    }
}
