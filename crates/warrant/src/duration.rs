//! Go's duration syntax (`1h`, `90m`, `1h30m`, `3600s`), which kube-apiserver's duration flags
//! use, reduced to whole seconds.

/// Parses a Go duration into whole seconds. Fractions of a second are refused rather than
/// rounded: every duration warrant takes is a whole number of seconds.
pub(crate) fn parse_seconds(text: &str) -> Result<i64, String> {
    let invalid =
        || format!("invalid duration {text:?}: use a number with a unit, e.g. 24h, 90m, 3600s");
    if text == "0" {
        return Ok(0);
    }
    let mut rest = text;
    let mut total: i64 = 0;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        if digits == 0 {
            return Err(invalid());
        }
        let (number, tail) = rest.split_at(digits);
        let number: i64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3600,
            "m" => 60,
            "s" => 1,
            _ => return Err(invalid()),
        };
        total = number
            .checked_mul(scale)
            .and_then(|n| total.checked_add(n))
            .ok_or_else(invalid)?;
        rest = tail;
    }
    Ok(total)
}

/// Parses a Go duration into a `Duration` (a flag's value parser).
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let seconds = parse_seconds(text)?;
    u64::try_from(seconds)
        .map(std::time::Duration::from_secs)
        .map_err(|_| format!("invalid duration {text:?}: may not be negative"))
}

/// The shortest `--max-cache-staleness`: kube-apiserver sends each watch a bookmark about once
/// a minute, so a quiet, healthy cluster is up to a minute stale; a bound much closer to that
/// would turn readiness off and on with no outage at all.
pub(crate) const MIN_STALENESS_BOUND: std::time::Duration = std::time::Duration::from_secs(90);

/// Parses `--max-cache-staleness`: a duration of at least [`MIN_STALENESS_BOUND`].
pub(crate) fn parse_staleness_bound(text: &str) -> Result<std::time::Duration, String> {
    let bound = parse_duration(text)?;
    if bound < MIN_STALENESS_BOUND {
        return Err(format!(
            "{text:?} is too short: the API server sends a bookmark only about once a minute, so a quiet, healthy cluster would look stale; use at least {}s",
            MIN_STALENESS_BOUND.as_secs()
        ));
    }
    Ok(bound)
}

/// Checks what must hold for any text: no panic; an accepted duration is not negative, and
/// its value written back in seconds and in hours, minutes and seconds parses to the same value.
/// The fuzz target `duration` (which includes this file) and the corpus replay run it.
#[cfg(any(test, fuzzing))]
#[allow(clippy::panic)]
pub(crate) fn check(text: &str) {
    let Ok(seconds) = parse_seconds(text) else {
        return;
    };
    assert!(seconds >= 0, "{text:?} parsed to {seconds}");
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    for again in [format!("{seconds}s"), format!("{h}h{m}m{s}s")] {
        assert_eq!(
            parse_seconds(&again),
            Ok(seconds),
            "{text:?} then {again:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_seconds("24h"), Ok(86400));
        assert_eq!(parse_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_seconds("3600s"), Ok(3600));
        assert_eq!(parse_seconds("0"), Ok(0));
        assert_eq!(parse_seconds("2h0m5s"), Ok(7205));
        for bad in [
            "",
            "h",
            "10",
            "1.5h",
            "1d",
            "-1h",
            "1h x",
            "99999999999999999999h",
        ] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_keeps_the_invariants(text in "[0-9hms.+-]{0,24}") {
            check(&text);
        }

        #[test]
        fn written_durations_read_back(h in 0i64..1_000_000, m in 0i64..60, s in 0i64..60) {
            proptest::prop_assert_eq!(parse_seconds(&format!("{h}h{m}m{s}s")), Ok(h * 3600 + m * 60 + s));
        }
    }
}
