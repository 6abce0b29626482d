//! Refusals of callers that did not authenticate, summarized: anyone who can reach the port can
//! make them, as fast as the server answers, and one event each would let them rotate every
//! issued token's event out of the log in seconds.
//!
//! Time is cut into windows of [`WINDOW`] (tokio's clock, which tests pause). In a window, the
//! first refusal of each *kind of refusal* (client IP address, request kind, how the caller
//! failed to authenticate, code) is written in full, as any event; the others of that kind are
//! counted, and when the window ends they become one summary event with their `count`. So a
//! client refused now and then is audited as before, and one that floods costs at most two
//! events a second for each kind of refusal it makes.
//!
//! A window tracks at most [`MAX_KINDS`] kinds of refusal with an address: beyond that (many
//! source addresses), refusals are counted without their address, one summary for each of the
//! few remaining combinations. Memory and events per window are bounded whatever the callers do.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

use crate::event::{Event, EventKind};

/// How long a window lasts.
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// How many kinds of refusal with a client address a window tracks.
pub(crate) const MAX_KINDS: usize = 32;

/// A kind of refusal: refusals alike in all of these are summarized together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The client's IP address (without the port, which changes with each connection);
    /// `None` for the refusals beyond [`MAX_KINDS`].
    address: Option<String>,
    kind: EventKind,
    authenticated_by: &'static str,
    code: Option<u16>,
}

#[derive(Debug)]
struct Tally {
    /// When the kind was first seen in the window: summaries are written in that order.
    order: usize,
    /// The refusals counted (not written one by one).
    count: u64,
    /// The first of them, the model of the summary.
    first: Option<Event>,
}

/// A summary to write: the first refusal counted, standing for `count` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) event: Event,
    pub(crate) count: u64,
}

/// What to do with a refusal.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Write it: the first of its kind in the window.
    Write(Box<Event>),
    /// Counted in a summary; `due` when it is the window's first count (a summary is now owed
    /// at the window's end).
    Counted { due: bool },
}

/// The current window.
#[derive(Debug, Default)]
pub(crate) struct Summaries {
    started: Option<Instant>,
    kinds: HashMap<Key, Tally>,
    /// Kinds with an address in the window.
    addressed: usize,
    /// Refusals counted in the window.
    counted: u64,
}

impl Summaries {
    /// Takes a refusal arriving at `now`: the summaries of a window that has ended, and what
    /// to do with this one.
    pub(crate) fn refusal(&mut self, event: Event, now: Instant) -> (Vec<Summary>, Verdict) {
        let ended = self.close(now, false);
        let started = *self.started.get_or_insert(now);
        debug_assert!(now >= started);
        let mut key = Key {
            address: Some(ip(&event.requester.client_address)),
            kind: event.kind,
            authenticated_by: event.requester.authenticated_by,
            code: event.code,
        };
        if !self.kinds.contains_key(&key) {
            if self.addressed < MAX_KINDS {
                self.addressed += 1;
                let order = self.kinds.len();
                self.kinds.insert(
                    key,
                    Tally {
                        order,
                        count: 0,
                        first: None,
                    },
                );
                return (ended, Verdict::Write(Box::new(event)));
            }
            key.address = None;
        }
        let order = self.kinds.len();
        let tally = self.kinds.entry(key).or_insert(Tally {
            order,
            count: 0,
            first: None,
        });
        tally.count += 1;
        if tally.first.is_none() {
            tally.first = Some(event);
        }
        self.counted += 1;
        (
            ended,
            Verdict::Counted {
                due: self.counted == 1,
            },
        )
    }

    /// When the summaries of the current window are owed, if it counted any.
    pub(crate) fn due(&self) -> Option<Instant> {
        (self.counted > 0)
            .then_some(self.started)
            .flatten()
            .map(|started| started + WINDOW)
    }

    /// Ends the window if it has ended by `now` (or, with `all`, whenever it started: at
    /// shutdown), returning its summaries in the order their kinds were first seen.
    pub(crate) fn close(&mut self, now: Instant, all: bool) -> Vec<Summary> {
        match self.started {
            Some(started) if all || now >= started + WINDOW => {}
            _ => return Vec::new(),
        }
        self.started = None;
        self.addressed = 0;
        self.counted = 0;
        let mut tallies: Vec<(Key, Tally)> = self.kinds.drain().collect();
        tallies.sort_by_key(|(_, tally)| tally.order);
        tallies
            .into_iter()
            .filter_map(|(key, tally)| {
                let mut event = tally.first?;
                // What the refusals have in common; the rest was the first one's alone.
                event.requester.client_address = key.address.unwrap_or_default();
                event.request_id.clear();
                event.service_account = None;
                event.token = None;
                Some(Summary {
                    event,
                    count: tally.count,
                })
            })
            .collect()
    }
}

/// The IP address of `IP:PORT`; anything else as it is.
fn ip(client_address: &str) -> String {
    client_address
        .parse::<SocketAddr>()
        .map_or_else(|_| client_address.to_owned(), |a| a.ip().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Decision, Requester, ServiceAccount};
    use jiff::Timestamp;

    fn refusal(address: &str, code: u16) -> Event {
        Event {
            kind: EventKind::TokenRequest,
            time: Timestamp::UNIX_EPOCH,
            request_id: "r".into(),
            requester: Requester::anonymous(address.into()),
            decision: Decision::Refused,
            code: Some(code),
            reason: "Unauthorized".into(),
            service_account: Some(ServiceAccount {
                namespace: "ns".into(),
                name: "sa".into(),
                uid: String::new(),
            }),
            token: None,
            pod_certificate: None,
            answered: None,
        }
    }

    /// The first of a kind is written, the rest of the window counted; whatever the port; the
    /// summary is owed a window after the first refusal and says how many it stands for.
    #[tokio::test(start_paused = true)]
    async fn one_written_the_rest_counted_until_the_window_ends() {
        let mut summaries = Summaries::default();
        let t0 = Instant::now();
        let (ended, verdict) = summaries.refusal(refusal("10.0.0.9:1000", 401), t0);
        assert!(ended.is_empty());
        assert!(matches!(verdict, Verdict::Write(_)));
        assert_eq!(summaries.due(), None);
        for (n, port) in (1001..1101).enumerate() {
            let at = t0 + Duration::from_millis(n as u64);
            let (ended, verdict) = summaries.refusal(refusal(&format!("10.0.0.9:{port}"), 401), at);
            assert!(ended.is_empty());
            assert!(matches!(verdict, Verdict::Counted { due } if due == (n == 0)));
        }
        assert_eq!(summaries.due(), Some(t0 + WINDOW));
        assert!(
            summaries
                .close(t0 + WINDOW - Duration::from_millis(1), false)
                .is_empty()
        );
        let ended = summaries.close(t0 + WINDOW, false);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].count, 100);
        assert_eq!(ended[0].event.requester.client_address, "10.0.0.9");
        assert_eq!(ended[0].event.service_account, None);
        assert_eq!(ended[0].event.request_id, "");
        // A new window: the first is written again.
        let (_, verdict) = summaries.refusal(refusal("10.0.0.9:1", 401), t0 + WINDOW);
        assert!(matches!(verdict, Verdict::Write(_)));
    }

    /// A refusal after the window ended closes it: its summary comes back with the new
    /// refusal's verdict.
    #[tokio::test(start_paused = true)]
    async fn the_next_refusal_closes_an_ended_window() {
        let mut summaries = Summaries::default();
        let t0 = Instant::now();
        summaries.refusal(refusal("10.0.0.9:1", 401), t0);
        summaries.refusal(refusal("10.0.0.9:1", 401), t0);
        let (ended, verdict) = summaries.refusal(refusal("10.0.0.9:1", 401), t0 + 2 * WINDOW);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].count, 1);
        assert!(matches!(verdict, Verdict::Write(_)));
    }

    /// Different codes and addresses are different kinds; beyond MAX_KINDS addresses in a
    /// window, refusals are counted without an address, none written one by one.
    #[tokio::test(start_paused = true)]
    async fn kinds_beyond_the_limit_are_counted_without_an_address() {
        let mut summaries = Summaries::default();
        let t0 = Instant::now();
        let mut written = 0;
        for n in 0..MAX_KINDS + 10 {
            let (_, verdict) =
                summaries.refusal(refusal(&format!("10.0.{}.{}:1", n / 256, n % 256), 401), t0);
            if matches!(verdict, Verdict::Write(_)) {
                written += 1;
            }
        }
        assert_eq!(written, MAX_KINDS);
        let ended = summaries.close(t0, true);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].count, 10);
        assert_eq!(ended[0].event.requester.client_address, "");
        assert_eq!(ended[0].event.code, Some(401));
    }
}
