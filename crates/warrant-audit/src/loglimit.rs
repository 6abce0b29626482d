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
pub struct SharedThrottle(std::sync::Mutex<Throttle>);

impl Default for SharedThrottle {
    fn default() -> Self {
        SharedThrottle(std::sync::Mutex::new(Throttle::new(Duration::from_secs(1))))
    }
}

impl SharedThrottle {
    /// See [`Throttle::allow`].
    pub fn allow(&self, now: Instant) -> Option<u64> {
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
pub const LOGGED_ITEMS: usize = 5;
/// How many characters of one item a log line shows.
pub const LOGGED_ITEM_CHARS: usize = 128;

/// A list of a client's for a log line, written as a JSON array: the first [`LOGGED_ITEMS`],
/// each cut to [`LOGGED_ITEM_CHARS`] characters, then `"(+N more)"` if there were more. The
/// JSON log format writes a field holding one as the array itself, not as a string of it
/// (see [`JSON_FIELDS`]).
#[derive(Debug, Clone, Copy)]
pub struct JsonList<'a>(pub &'a [String]);

impl std::fmt::Display for JsonList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut shown: Vec<String> = self
            .0
            .iter()
            .take(LOGGED_ITEMS)
            .map(|item| bounded(item, LOGGED_ITEM_CHARS))
            .collect();
        let more = self.0.len().saturating_sub(LOGGED_ITEMS);
        if more > 0 {
            shown.push(format!("(+{more} more)"));
        }
        match serde_json::to_string(&shown) {
            Ok(text) => f.write_str(&text),
            Err(_) => Err(std::fmt::Error),
        }
    }
}

/// The log fields whose values are [`JsonList`]s: the JSON log format writes them as arrays.
pub const JSON_FIELDS: &[&str] = &["audiences", "groups"];

#[cfg(test)]
mod tests {
    use super::*;

    /// A list is valid JSON whatever its items hold, and says how many it left out.
    #[test]
    fn a_json_list_is_json_and_bounded() {
        let items: Vec<String> = ["a\"b", "c\nd", "e", "f", "g", "h", "i"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let text = JsonList(&items).to_string();
        let parsed: Vec<String> = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, ["a\"b", "c\nd", "e", "f", "g", "(+2 more)"]);
        let long = vec!["x".repeat(1000)];
        let parsed: Vec<String> = serde_json::from_str(&JsonList(&long).to_string()).unwrap();
        assert_eq!(parsed[0].chars().count(), LOGGED_ITEM_CHARS + 1);
        assert_eq!(JsonList(&[]).to_string(), "[]");
    }

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
        let line = JsonList(&items).to_string();
        assert!(line.len() < 1000, "{}", line.len());
        assert!(line.ends_with(r#""(+995 more)"]"#), "{line}");
        assert_eq!(JsonList(&["vault".to_owned()]).to_string(), r#"["vault"]"#);
    }
}
