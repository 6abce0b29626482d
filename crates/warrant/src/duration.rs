//! Go's duration syntax, as kube-apiserver's duration flags take it (`time.ParseDuration`):
//! `1h`, `90m`, `1h30m`, `1.5h`, `500ms`, `3600s`, `0`; units `ns`, `us` (`µs`), `ms`, `s`, `m`,
//! `h`; a decimal fraction on any number. One parser for every duration flag of warrant's, kept
//! in integer nanoseconds (as Go does) so nothing is rounded and nothing overflows into a panic:
//! the fuzz target `duration` and the proptests below hold it to that.

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// Why a duration flag's value is refused. The message is the whole of what clap shows after
/// the flag's name, so each variant says what was wrong and what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DurationError {
    /// Not Go's duration syntax.
    #[error("invalid duration {text:?}: {HOW}")]
    Invalid {
        /// The value given.
        text: String,
    },
    /// A number without a unit (Go accepts a bare `0` only).
    #[error("invalid duration {text:?}: {HOW}: a number has no unit")]
    NoUnit {
        /// The value given.
        text: String,
    },
    /// A unit Go does not know (`d`, say).
    #[error("invalid duration {text:?}: {HOW}: unknown unit {unit:?}")]
    UnknownUnit {
        /// The value given.
        text: String,
        /// The unit.
        unit: String,
    },
    /// More than Go's limit, an int64 of nanoseconds (about 292 years).
    #[error("invalid duration {text:?}: too long")]
    TooLong {
        /// The value given.
        text: String,
    },
    /// A negative duration, which no flag of warrant's takes.
    #[error("invalid duration {text:?}: may not be negative")]
    Negative {
        /// The value given.
        text: String,
    },
    /// A fraction of a second where the flag is kept in whole seconds.
    #[error("invalid duration {text:?}: must be a whole number of seconds")]
    NotWholeSeconds {
        /// The value given.
        text: String,
    },
    /// A `--max-cache-staleness` below [`MIN_STALENESS_BOUND`].
    #[error(
        "{text:?} is too short: the API server sends a bookmark only about once a minute, so a quiet, healthy cluster would look stale; use at least {}s",
        MIN_STALENESS_BOUND.as_secs()
    )]
    StalenessTooShort {
        /// The value given.
        text: String,
    },
}

/// What a duration looks like, for the messages.
const HOW: &str = "use a number with a unit, e.g. 24h, 1h30m, 1.5h, 90s, 500ms";

/// Parses a Go duration into nanoseconds. Negative durations (which Go allows) are refused:
/// no flag of warrant's takes one.
fn parse_nanos(text: &str) -> Result<u128, DurationError> {
    let invalid = || DurationError::Invalid {
        text: text.to_owned(),
    };
    let mut rest = text;
    let negative = rest.starts_with('-');
    rest = rest.strip_prefix(['-', '+']).unwrap_or(rest);
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (whole, tail) = rest.split_at(whole_len);
        let (fraction, tail) = match tail.strip_prefix('.') {
            Some(tail) => {
                let len = tail
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(tail.len());
                tail.split_at(len)
            }
            None => ("", tail),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = unit_nanos(text, unit)?;
        let too_long = || DurationError::TooLong {
            text: text.to_owned(),
        };
        let value = term_nanos(whole, fraction, scale).ok_or_else(too_long)?;
        total = total.checked_add(value).ok_or_else(too_long)?;
        // Go's limit: what an int64 of nanoseconds holds (about 292 years).
        if total > i64::MAX as u128 {
            return Err(too_long());
        }
        rest = tail;
    }
    if negative && total > 0 {
        return Err(DurationError::Negative {
            text: text.to_owned(),
        });
    }
    Ok(total)
}

/// The nanoseconds in one `unit` of `text`.
fn unit_nanos(text: &str, unit: &str) -> Result<u128, DurationError> {
    Ok(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SECOND,
        "m" => 60 * NANOS_PER_SECOND,
        "h" => 3_600 * NANOS_PER_SECOND,
        "" => {
            return Err(DurationError::NoUnit {
                text: text.to_owned(),
            });
        }
        _ => {
            return Err(DurationError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            });
        }
    })
}

/// The nanoseconds of one term, `whole.fraction` units of `scale` nanoseconds (digits only,
/// either may be empty); `None` if they do not fit.
fn term_nanos(whole: &str, fraction: &str, scale: u128) -> Option<u128> {
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(scale)?;
    // The fraction, digit by digit, as Go does: what falls below a nanosecond is dropped.
    let mut place = scale;
    for digit in fraction.bytes() {
        place /= 10;
        if place == 0 {
            break;
        }
        value = value.checked_add(u128::from(digit - b'0') * place)?;
    }
    Some(value)
}

/// Parses a Go duration into whole seconds, for flags kube-apiserver keeps in seconds (token
/// lifetimes, rotation periods): `1.5h` is 5400; a duration with a fraction of a second is
/// refused, saying so, rather than rounded.
pub(crate) fn parse_seconds(text: &str) -> Result<i64, DurationError> {
    let nanos = parse_nanos(text)?;
    if nanos % NANOS_PER_SECOND != 0 {
        return Err(DurationError::NotWholeSeconds {
            text: text.to_owned(),
        });
    }
    i64::try_from(nanos / NANOS_PER_SECOND).map_err(|_| DurationError::TooLong {
        text: text.to_owned(),
    })
}

/// Parses a Go duration into a `Duration`, to the nanosecond (a flag's value parser).
pub(crate) fn parse_duration(text: &str) -> Result<std::time::Duration, DurationError> {
    let nanos = parse_nanos(text)?;
    let seconds = u64::try_from(nanos / NANOS_PER_SECOND).map_err(|_| DurationError::TooLong {
        text: text.to_owned(),
    })?;
    // Below a second: always fits.
    let below = u32::try_from(nanos % NANOS_PER_SECOND).unwrap_or(0);
    Ok(std::time::Duration::new(seconds, below))
}

/// The shortest `--max-cache-staleness`: kube-apiserver sends each watch a bookmark about once
/// a minute, so a quiet, healthy cluster is up to a minute stale; a bound much closer to that
/// would turn readiness off and on with no outage at all.
pub(crate) const MIN_STALENESS_BOUND: std::time::Duration = std::time::Duration::from_secs(90);

/// Parses `--max-cache-staleness`: a duration of at least [`MIN_STALENESS_BOUND`].
pub(crate) fn parse_staleness_bound(text: &str) -> Result<std::time::Duration, DurationError> {
    let bound = parse_duration(text)?;
    if bound < MIN_STALENESS_BOUND {
        return Err(DurationError::StalenessTooShort {
            text: text.to_owned(),
        });
    }
    Ok(bound)
}

/// Checks what must hold for any text: no panic; an accepted duration is not negative, and
/// its value written back in seconds and in hours, minutes and seconds parses to the same value;
/// the two parsers agree.
/// The fuzz target `duration` (which includes this file) and the corpus replay run it.
#[cfg(any(test, fuzzing))]
#[allow(clippy::panic)]
pub(crate) fn check(text: &str) {
    if let Ok(duration) = parse_duration(text)
        && let Ok(seconds) = parse_seconds(text)
    {
        assert_eq!(duration.as_secs(), seconds.unsigned_abs(), "{text:?}");
        assert_eq!(duration.subsec_nanos(), 0, "{text:?}");
    }
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

    /// What Go's time.ParseDuration accepts, kube-apiserver's flags included.
    #[test]
    fn go_durations() {
        assert_eq!(parse_seconds("24h"), Ok(86400));
        assert_eq!(parse_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_seconds("1.5h"), Ok(5400));
        assert_eq!(parse_seconds(".5m"), Ok(30));
        assert_eq!(parse_seconds("3600s"), Ok(3600));
        assert_eq!(parse_seconds("0"), Ok(0));
        assert_eq!(parse_seconds("+0"), Ok(0));
        assert_eq!(parse_seconds("2h0m5s"), Ok(7205));
        assert_eq!(
            parse_seconds("1500ms").unwrap_err().to_string(),
            r#"invalid duration "1500ms": must be a whole number of seconds"#
        );
        assert_eq!(parse_seconds("2000ms"), Ok(2));
        let ms = |n| std::time::Duration::from_millis(n);
        assert_eq!(parse_duration("500ms"), Ok(ms(500)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration("1m0.25s"), Ok(ms(60_250)));
        assert_eq!(
            parse_duration("10us"),
            Ok(std::time::Duration::from_micros(10))
        );
        assert_eq!(
            parse_duration("10\u{b5}s"),
            Ok(std::time::Duration::from_micros(10))
        );
        assert_eq!(
            parse_duration("1ns"),
            Ok(std::time::Duration::from_nanos(1))
        );
        assert_eq!(
            parse_duration("2540400h10m10.000000000s"),
            Ok(std::time::Duration::new(9_145_440_610, 0))
        );
        for bad in [
            "",
            "h",
            "10",
            ".",
            ".h",
            "1d",
            "-1h",
            "1h x",
            "1..5h",
            "99999999999999999999h",
            "2562048h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_seconds("-1h").unwrap_err().to_string(),
            r#"invalid duration "-1h": may not be negative"#
        );
        // The messages clap shows after the flag's name, word for word.
        for (bad, said) in [
            (
                "10",
                r#"invalid duration "10": use a number with a unit, e.g. 24h, 1h30m, 1.5h, 90s, 500ms: a number has no unit"#,
            ),
            (
                "1d",
                r#"invalid duration "1d": use a number with a unit, e.g. 24h, 1h30m, 1.5h, 90s, 500ms: unknown unit "d""#,
            ),
            (
                "h",
                r#"invalid duration "h": use a number with a unit, e.g. 24h, 1h30m, 1.5h, 90s, 500ms"#,
            ),
            (
                "99999999999999999999h",
                r#"invalid duration "99999999999999999999h": too long"#,
            ),
        ] {
            assert_eq!(parse_duration(bad).unwrap_err().to_string(), said);
        }
        assert_eq!(
            parse_staleness_bound("30s").unwrap_err(),
            DurationError::StalenessTooShort { text: "30s".into() }
        );
    }

    proptest::proptest! {
        #[test]
        fn any_text_keeps_the_invariants(text in "[0-9hmsnu.+-]{0,24}") {
            check(&text);
        }

        #[test]
        fn written_durations_read_back(h in 0i64..1_000_000, m in 0i64..60, s in 0i64..60) {
            proptest::prop_assert_eq!(parse_seconds(&format!("{h}h{m}m{s}s")), Ok(h * 3600 + m * 60 + s));
        }
    }
}
