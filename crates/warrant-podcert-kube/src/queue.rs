//! The work queue between the watches and the workers: one entry per PCR (namespace/name), so a
//! PCR modified five times while it waited is handled once, with its newest state. A PCR being
//! handled is not handed to a second worker; a newer state that arrives meanwhile waits until
//! the first worker is done. Retries wait out a capped exponential backoff.
//!
//! Pure: every method takes `now` (tokio's monotonic clock in the controller, so a paused test
//! runtime controls it), and nothing here sleeps. Memory: one JSON PCR (about 2 KiB) per entry;
//! PCRs are deleted 15 minutes after creation, so the queue holds at most the PCRs of the last
//! 15 minutes.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// A PCR's identity: `(namespace, name)`.
pub(crate) type Key = (String, String);

/// How retries are spaced: `base` doubled per attempt, never more than `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub base: Duration,
    /// The longest wait between retries.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 1 s, doubling, at most 60 s: a CA back after a minute's outage is retried within a
    /// minute, and a PCR (deleted after 15 minutes) gets about twenty tries.
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The wait before retry number `attempt` (1 for the first), at least `floor` (what the
    /// decision asked for), at most the cap.
    pub fn delay(&self, attempt: u32, floor: Duration) -> Duration {
        let doubled = self
            .base
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        doubled.max(floor).min(self.cap)
    }
}

#[derive(Debug)]
struct Waiting {
    pcr: Value,
    ready_at: Instant,
}

/// The queue. Not synchronized: the controller holds it behind a mutex.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    waiting: HashMap<Key, Waiting>,
    /// Keys a worker is handling now.
    handling: HashSet<Key>,
    /// When each key (waiting or being handled) first entered the queue: its age.
    since: HashMap<Key, Instant>,
    /// Retries so far, for the backoff; cleared once a key is done.
    attempts: HashMap<Key, u32>,
}

impl Queue {
    /// A PCR's newest state from a watch: queued now, or, if it is already waiting, its state
    /// replaced (its place and any backoff kept).
    pub(crate) fn offer(&mut self, key: Key, pcr: Value, now: Instant) {
        self.since.entry(key.clone()).or_insert(now);
        match self.waiting.get_mut(&key) {
            Some(waiting) => waiting.pcr = pcr,
            None => {
                self.waiting.insert(key, Waiting { pcr, ready_at: now });
            }
        }
    }

    /// Forgets a PCR that was deleted or became terminal (a worker handling it finishes).
    pub(crate) fn remove(&mut self, key: &Key) {
        self.waiting.remove(key);
        self.attempts.remove(key);
        if !self.handling.contains(key) {
            self.since.remove(key);
        }
    }

    /// The PCR to handle next: the one ready longest, not being handled. It is marked as being
    /// handled until [`Queue::done`] or [`Queue::retry`]. Returns its retries so far too.
    pub(crate) fn pop(&mut self, now: Instant) -> Option<(Key, Value, u32)> {
        let key = self
            .waiting
            .iter()
            .filter(|(k, w)| w.ready_at <= now && !self.handling.contains(*k))
            .min_by_key(|(k, w)| (w.ready_at, self.since.get(*k).copied()))
            .map(|(k, _)| k.clone())?;
        let waiting = self.waiting.remove(&key)?;
        self.handling.insert(key.clone());
        let attempts = self.attempts.get(&key).copied().unwrap_or(0);
        Some((key, waiting.pcr, attempts))
    }

    /// A worker finished with `key` for good (written, ignored, lost race, or refused). A newer
    /// state offered meanwhile stays queued.
    pub(crate) fn done(&mut self, key: &Key) {
        self.handling.remove(key);
        self.attempts.remove(key);
        if !self.waiting.contains_key(key) {
            self.since.remove(key);
        }
    }

    /// A worker finished with `key` and the PCR is answered (written, lost to another writer,
    /// refused or gone): a state offered meanwhile predates the answer and is dropped too.
    pub(crate) fn forget(&mut self, key: &Key) {
        self.handling.remove(key);
        self.waiting.remove(key);
        self.attempts.remove(key);
        self.since.remove(key);
    }

    /// A worker will try `key` again after `delay`, with `pcr` (unless a newer state was offered
    /// meanwhile, which is kept). Returns the number of this retry.
    pub(crate) fn retry(&mut self, key: Key, pcr: Value, delay: Duration, now: Instant) -> u32 {
        self.handling.remove(&key);
        let attempts = self.attempts.entry(key.clone()).or_insert(0);
        *attempts = attempts.saturating_add(1);
        let attempt = *attempts;
        let ready_at = now + delay;
        self.since.entry(key.clone()).or_insert(now);
        match self.waiting.get_mut(&key) {
            Some(waiting) => waiting.ready_at = waiting.ready_at.max(ready_at),
            None => {
                self.waiting.insert(key, Waiting { pcr, ready_at });
            }
        }
        attempt
    }

    /// The retries `key` had, before [`Queue::retry`] counts another one.
    pub(crate) fn attempts(&self, key: &Key) -> u32 {
        self.attempts.get(key).copied().unwrap_or(0)
    }

    /// When the next waiting PCR not being handled becomes ready (`None`: nothing waits).
    pub(crate) fn next_ready(&self) -> Option<Instant> {
        self.waiting
            .iter()
            .filter(|(k, _)| !self.handling.contains(*k))
            .map(|(_, w)| w.ready_at)
            .min()
    }

    /// PCRs waiting or being handled.
    pub(crate) fn depth(&self) -> usize {
        self.since.len()
    }

    /// How long the oldest PCR in the queue (waiting or being handled) has been in it.
    pub(crate) fn oldest_age(&self, now: Instant) -> Duration {
        self.since
            .values()
            .min()
            .map(|since| now.saturating_duration_since(*since))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> Key {
        ("ns".to_owned(), name.to_owned())
    }

    #[test]
    fn a_pcr_modified_while_it_waits_is_handled_once_with_its_newest_state() {
        let now = Instant::now();
        let mut queue = Queue::default();
        queue.offer(key("a"), json!({"v": 1}), now);
        queue.offer(key("a"), json!({"v": 2}), now + Duration::from_secs(1));
        assert_eq!(queue.depth(), 1);
        let (k, pcr, attempts) = queue.pop(now + Duration::from_secs(1)).unwrap();
        assert_eq!((k, pcr, attempts), (key("a"), json!({"v": 2}), 0));
        assert!(queue.pop(now + Duration::from_secs(1)).is_none());
    }

    #[test]
    fn a_pcr_being_handled_is_not_handed_out_again_until_done() {
        let now = Instant::now();
        let mut queue = Queue::default();
        queue.offer(key("a"), json!(1), now);
        let _ = queue.pop(now).unwrap();
        queue.offer(key("a"), json!(2), now);
        assert!(queue.pop(now).is_none(), "a second worker must not take it");
        queue.done(&key("a"));
        assert_eq!(queue.pop(now).unwrap().1, json!(2));
    }

    #[test]
    fn retries_wait_out_a_doubling_backoff_up_to_the_cap() {
        let backoff = Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(10),
        };
        let delays: Vec<u64> = (1..=6)
            .map(|n| backoff.delay(n, Duration::ZERO).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff.delay(1, Duration::from_secs(5)).as_secs(), 5);
        assert_eq!(backoff.delay(1, Duration::from_secs(500)).as_secs(), 10);

        let now = Instant::now();
        let mut queue = Queue::default();
        queue.offer(key("a"), json!(1), now);
        let (k, pcr, _) = queue.pop(now).unwrap();
        assert_eq!(queue.retry(k, pcr, Duration::from_secs(4), now), 1);
        assert!(queue.pop(now + Duration::from_secs(3)).is_none());
        assert_eq!(queue.next_ready(), Some(now + Duration::from_secs(4)));
        let (_, _, attempts) = queue.pop(now + Duration::from_secs(4)).unwrap();
        assert_eq!(attempts, 1);
    }

    #[test]
    fn depth_and_oldest_age_count_waiting_and_handled_pcrs_until_done() {
        let now = Instant::now();
        let mut queue = Queue::default();
        queue.offer(key("a"), json!(1), now);
        queue.offer(key("b"), json!(1), now + Duration::from_secs(5));
        let later = now + Duration::from_secs(30);
        let (a, pcr, _) = queue.pop(later).unwrap();
        assert_eq!(a, key("a"), "the oldest first");
        assert_eq!(queue.depth(), 2);
        assert_eq!(queue.oldest_age(later), Duration::from_secs(30));
        queue.retry(a.clone(), pcr, Duration::from_secs(1), later);
        assert_eq!(
            queue.oldest_age(later),
            Duration::from_secs(30),
            "a retry keeps its age"
        );
        queue.remove(&a);
        assert_eq!(queue.depth(), 1);
        assert_eq!(queue.oldest_age(later), Duration::from_secs(25));
        let (b, _, _) = queue.pop(later).unwrap();
        queue.done(&b);
        assert_eq!(
            (queue.depth(), queue.oldest_age(later)),
            (0, Duration::ZERO)
        );
    }

    #[test]
    fn an_answered_pcr_drops_the_state_offered_while_it_was_handled() {
        let now = Instant::now();
        let mut queue = Queue::default();
        queue.offer(key("a"), json!(1), now);
        let _ = queue.pop(now).unwrap();
        queue.offer(key("a"), json!(2), now);
        queue.forget(&key("a"));
        assert!(queue.pop(now).is_none());
        assert_eq!(queue.depth(), 0);
    }
}
