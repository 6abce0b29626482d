//! What one log line may carry, and how often: warrant logs what clients do, and a client
//! controls how much it does and what it sends. A repeated failure is logged at most once per
//! interval, with a count of those left out ([`Throttle`]); a list a client chose is logged as
//! its first few items and a count, each cut at a length ([`bounded_list`]). Metrics count
//! every event; the log only samples them.

use std::time::Duration;

use tokio::time::Instant;

/// At most one log line per `interval` for a repeated event, then a count of those left out:
/// a flood of failures (refused accepts, bad tokens) costs one line a second, not one each.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttle {
    /// Lets one line through per `interval`.
    pub fn new(interval: Duration) -> Self {
        Throttle {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(n)` if a line may be written at `now`, `n` being how many were left out since the
    /// last one; `None` if this one is to be left out (and counted).
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now < last + self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// A [`Throttle`] shared by the requests that may log through it (one second apart).
#[derive(Debug)]
pub(crate) struct SharedThrottle(std::sync::Mutex<Throttle>);

impl Default for SharedThrottle {
    fn default() -> Self {
        SharedThrottle(std::sync::Mutex::new(Throttle::new(Duration::from_secs(1))))
    }
}

impl SharedThrottle {
    /// See [`Throttle::allow`].
    pub(crate) fn allow(&self, now: Instant) -> Option<u64> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .allow(now)
    }
}

/// `text` cut to `max` characters for a log line.
pub fn bounded(text: &str, max: usize) -> String {
    let mut cut: String = text.chars().take(max).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// How many items of a client's list a log line shows.
pub(crate) const LOGGED_ITEMS: usize = 5;
/// How many characters of one item a log line shows.
pub const LOGGED_ITEM_CHARS: usize = 128;

/// `items` for a log line: the first [`LOGGED_ITEMS`], each cut to [`LOGGED_ITEM_CHARS`]
/// characters, and how many more there were.
pub fn bounded_list(items: &[String]) -> String {
    let shown: Vec<String> = items
        .iter()
        .take(LOGGED_ITEMS)
        .map(|item| format!("{:?}", bounded(item, LOGGED_ITEM_CHARS)))
        .collect();
    let more = items.len().saturating_sub(LOGGED_ITEMS);
    if more > 0 {
        format!("[{}] (+{more} more)", shown.join(", "))
    } else {
        format!("[{}]", shown.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_throttle_lets_one_line_through_per_interval_and_counts_the_rest() {
        let mut throttle = Throttle::new(Duration::from_secs(1));
        let t0 = Instant::now();
        assert_eq!(throttle.allow(t0), Some(0));
        for ms in [1, 50, 999] {
            assert_eq!(throttle.allow(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(throttle.allow(t0 + Duration::from_secs(1)), Some(3));
        assert_eq!(throttle.allow(t0 + Duration::from_secs(5)), Some(0));
    }

    #[test]
    fn a_long_list_is_cut_to_a_few_short_items() {
        let items: Vec<String> = (0..1000)
            .map(|i| format!("{i}{}", "a".repeat(500)))
            .collect();
        let line = bounded_list(&items);
        assert!(line.len() < 1000, "{}", line.len());
        assert!(line.ends_with("(+995 more)"), "{line}");
        assert_eq!(bounded_list(&["vault".to_owned()]), r#"["vault"]"#);
    }
}
