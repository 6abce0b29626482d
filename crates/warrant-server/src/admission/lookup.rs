//! The webhook's ServiceAccount lookups, on a budget of their own.
//!
//! A review names its pod's ServiceAccount, and whoever sends the review chooses the name. The
//! account is read from memory (the watch cache, or the manifest file); after a miss:
//! - a caller the webhook does not know as kube-apiserver (every caller, with
//!   `--injection-allow-anonymous`) gets the answer of the cache alone: its reviews never cost a GET to kube-apiserver, and never see one's error;
//! - kube-apiserver's reviews (the allowed names) look the account up live, at most
//!   [`LOOKUPS_IN_FLIGHT`] at once and sharing one lookup per account, inside the live-GET
//!   limits every lookup of warrant's obeys (`warrant_objects`): so admission can never take
//!   more than these few of the places TokenRequest's and TokenReview's lookups wait in, and a
//!   flood of reviews leaves them theirs. One more is refused at once (a 429 to its review);
//! - an account the live lookup did not find is remembered as absent for
//!   [`REMEMBER_ABSENT`] on warrant's clock (at most [`REMEMBERED_ABSENT`] of them), so a
//!   flood naming accounts that do not exist costs one GET per name and period. An account
//!   created since is found in memory first, where the watch puts it, however recently it
//!   was remembered absent.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use warrant_cache::ExpiringCache;
use warrant_flight::{FlightError, SingleFlight};
use warrant_objects::{Kind, LookupError, Objects, Record};

use super::metrics::AdmissionMetrics;

/// The most live ServiceAccount lookups admission has in flight at once.
pub const LOOKUPS_IN_FLIGHT: usize = 4;
/// How long a ServiceAccount the API server did not find is remembered as absent.
pub const REMEMBER_ABSENT: Duration = Duration::from_secs(5);
/// The most ServiceAccounts remembered as absent at once.
pub(crate) const REMEMBERED_ABSENT: u64 = 10_000;

type Key = (String, String);
type Answer = Result<Option<Arc<Record>>, LookupError>;

/// What the lookup found.
#[derive(Debug)]
pub(crate) enum Found {
    /// The account.
    Account(Arc<Record>),
    /// It does not exist (the API server said so, a moment ago at most).
    Absent,
    /// Not in memory, and the caller may not cost a live lookup.
    NotInCache,
}

/// Why no answer: said to the caller in generic words, the cause only in warrant's log.
#[derive(Debug)]
pub(crate) enum Failure {
    /// [`LOOKUPS_IN_FLIGHT`] lookups are running.
    Overloaded,
    /// The lookup failed.
    Failed(LookupError),
}

/// The lookups, shared by every review.
pub(crate) struct AccountLookups {
    flights: SingleFlight<Key, Answer>,
    absent: ExpiringCache<Key, ()>,
}

impl std::fmt::Debug for AccountLookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountLookups")
            .field("flights", &self.flights)
            .field("absent", &self.absent)
            .finish()
    }
}

impl AccountLookups {
    pub(crate) fn new() -> Self {
        AccountLookups {
            flights: SingleFlight::new(LOOKUPS_IN_FLIGHT),
            absent: ExpiringCache::new(REMEMBERED_ABSENT),
        }
    }

    /// The gauge of lookups in flight, to register.
    pub(crate) fn in_flight_gauge(&self) -> prometheus_client::metrics::gauge::Gauge {
        self.flights.gauge()
    }

    /// The ServiceAccount `namespace/name`, from memory, or (when `live`) from the API server.
    pub(crate) async fn find(
        &self,
        objects: &Objects,
        namespace: &str,
        name: &str,
        live: bool,
        now: Timestamp,
        metrics: &AdmissionMetrics,
    ) -> Result<Found, Failure> {
        if let Some(account) = objects.cached(Kind::ServiceAccount, namespace, name) {
            metrics.lookup("cached");
            return Ok(Found::Account(account));
        }
        if !live {
            metrics.lookup("not_in_cache");
            return Ok(Found::NotInCache);
        }
        let key = (namespace.to_owned(), name.to_owned());
        if self.absent.get(&key, now).is_some() {
            metrics.lookup("remembered_absent");
            return Ok(Found::Absent);
        }
        let objects = objects.clone();
        let (ns, n) = key.clone();
        let flight = match self.flights.join(key.clone(), move || async move {
            objects.live(Kind::ServiceAccount, &ns, &n).await
        }) {
            Ok(flight) => flight,
            Err(FlightError::Overloaded { .. }) => {
                metrics.lookup("overloaded");
                return Err(Failure::Overloaded);
            }
            Err(other) => {
                metrics.lookup("error");
                return Err(Failure::Failed(lookup_lost(namespace, name, other)));
            }
        };
        match flight.answer().await {
            Ok(Ok(Some(account))) => {
                metrics.lookup("found");
                Ok(Found::Account(account))
            }
            Ok(Ok(None)) => {
                metrics.lookup("not_found");
                self.absent.insert_for(key, (), now, REMEMBER_ABSENT);
                Ok(Found::Absent)
            }
            Ok(Err(error)) => {
                metrics.lookup("error");
                Err(Failure::Failed(error))
            }
            Err(lost) => {
                metrics.lookup("error");
                Err(Failure::Failed(lookup_lost(namespace, name, lost)))
            }
        }
    }
}

fn lookup_lost(namespace: &str, name: &str, cause: FlightError) -> LookupError {
    LookupError::Live {
        kind: Kind::ServiceAccount,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        cause: warrant_objects::LiveError::Flight(cause),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warrant_objects::{LiveLookup, ObjectSource};

    /// A source whose cache holds `apps/known`, and whose authority counts the lookups it is
    /// asked and answers each after `release` is notified.
    struct Counting {
        known: Arc<Record>,
        asked: std::sync::atomic::AtomicUsize,
        release: tokio::sync::Notify,
    }

    impl ObjectSource for Counting {
        fn cached(&self, _: Kind, namespace: &str, name: &str) -> Option<Arc<Record>> {
            (namespace == "apps" && name == "known").then(|| self.known.clone())
        }

        fn live<'a>(&'a self, _: Kind, _: &'a str, _: &'a str) -> LiveLookup<'a> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                self.release.notified().await;
                Ok(None)
            })
        }

        fn not_ready(&self) -> Option<String> {
            None
        }

        fn count(&self, _: Kind) -> usize {
            1
        }
    }

    fn setup() -> (Arc<Counting>, Objects) {
        let source = Arc::new(Counting {
            known: Arc::new(Record {
                uid: "known-uid".into(),
                deletion_timestamp: None,
                pod: None,
                annotations: vec![],
            }),
            asked: Default::default(),
            release: tokio::sync::Notify::new(),
        });
        (source.clone(), Objects::new(source))
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    /// A caller that may not cost a lookup is answered from memory: the known account, and
    /// for any other name no lookup at all.
    #[tokio::test]
    async fn a_cache_only_caller_costs_no_lookup() {
        let (source, objects) = setup();
        let lookups = AccountLookups::new();
        let metrics = AdmissionMetrics::default();
        let found = lookups
            .find(&objects, "apps", "known", false, at(0), &metrics)
            .await;
        assert!(matches!(found, Ok(Found::Account(_))));
        let found = lookups
            .find(&objects, "apps", "nobody", false, at(0), &metrics)
            .await;
        assert!(matches!(found, Ok(Found::NotInCache)));
        assert_eq!(source.asked.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    /// Live lookups have their own few places: past them a lookup is refused at once, while
    /// the account in memory is still found; an absent account is remembered for
    /// `REMEMBER_ABSENT` on the clock given, then asked again.
    #[tokio::test]
    async fn live_lookups_are_bounded_and_absent_accounts_remembered() {
        let (source, objects) = setup();
        let lookups = Arc::new(AccountLookups::new());
        let metrics = Arc::new(AdmissionMetrics::default());
        let mut running = Vec::new();
        for i in 0..LOOKUPS_IN_FLIGHT {
            let (lookups, objects, metrics) = (lookups.clone(), objects.clone(), metrics.clone());
            running.push(tokio::spawn(async move {
                let name = format!("unknown-{i}");
                lookups
                    .find(&objects, "apps", &name, true, at(0), &metrics)
                    .await
            }));
        }
        while source.asked.load(std::sync::atomic::Ordering::SeqCst) < LOOKUPS_IN_FLIGHT {
            tokio::task::yield_now().await;
        }
        let refused = lookups
            .find(&objects, "apps", "one-more", true, at(0), &metrics)
            .await;
        assert!(matches!(refused, Err(Failure::Overloaded)));
        let known = lookups
            .find(&objects, "apps", "known", true, at(0), &metrics)
            .await;
        assert!(matches!(known, Ok(Found::Account(_))));

        source.release.notify_waiters();
        for lookup in running {
            assert!(matches!(lookup.await.unwrap(), Ok(Found::Absent)));
        }
        let asked = source.asked.load(std::sync::atomic::Ordering::SeqCst);
        let again = lookups
            .find(&objects, "apps", "unknown-0", true, at(4), &metrics)
            .await;
        assert!(matches!(again, Ok(Found::Absent)));
        assert_eq!(
            source.asked.load(std::sync::atomic::Ordering::SeqCst),
            asked,
            "remembered, not asked again"
        );
        // Past the period it is asked again.
        let lookups2 = lookups.clone();
        let objects2 = objects.clone();
        let metrics2 = metrics.clone();
        let later = tokio::spawn(async move {
            lookups2
                .find(&objects2, "apps", "unknown-0", true, at(5), &metrics2)
                .await
        });
        while source.asked.load(std::sync::atomic::Ordering::SeqCst) == asked {
            tokio::task::yield_now().await;
        }
        source.release.notify_waiters();
        assert!(matches!(later.await.unwrap(), Ok(Found::Absent)));
    }
}
