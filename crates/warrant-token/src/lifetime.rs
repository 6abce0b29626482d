//! How long a requested token lives: kube-apiserver's TokenRequest expiration rules.
//!
//! A request asks for `expirationSeconds` (default 3600, at least 600, at most 2^32). An operator
//! may cap it (`--service-account-max-token-expiration`); a capped request is shortened with a
//! warning, not refused. And a pod-bound token requested for exactly 3607 s for the API audiences
//! (what the kubelet asks for the default `kube-api-access` volume) is silently extended to a
//! year, with `warnafter` marking when it would otherwise have expired: the "safe transition"
//! that keeps old clients that never re-read their token working.

/// The shortest lifetime a client may request.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest lifetime a client may request: 2^32 seconds.
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// The lifetime when a request does not say.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The lifetime that marks a kubelet's default volume token, eligible for extension.
pub const WARN_ONLY_EXPIRATION_SECONDS: i64 = 3607;
/// How far an eligible token is extended: one year.
pub const EXTENDED_EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;

/// Checks a requested `expirationSeconds`; the error is kube-apiserver's field message.
pub fn validate_expiration_seconds(seconds: i64) -> Result<(), &'static str> {
    if seconds < MIN_EXPIRATION_SECONDS {
        Err("may not specify a duration less than 10 minutes")
    } else if seconds > MAX_EXPIRATION_SECONDS {
        Err("may not specify a duration larger than 2^32 seconds")
    } else {
        Ok(())
    }
}

/// The operator's expiration settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpirationPolicy {
    /// `--service-account-max-token-expiration` in seconds; `None` for no cap.
    pub max_seconds: Option<i64>,
    /// `--service-account-extend-token-expiration`.
    pub extend: bool,
    /// How long an extended token lives.
    pub extended_seconds: i64,
}

impl Default for ExpirationPolicy {
    fn default() -> Self {
        ExpirationPolicy {
            max_seconds: None,
            extend: true,
            extended_seconds: EXTENDED_EXPIRATION_SECONDS,
        }
    }
}

/// The lifetime decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    /// The effective `spec.expirationSeconds` reported back (after the cap, never extended).
    /// `status.expirationTimestamp` is now plus this.
    pub expiration_seconds: i64,
    /// The requested value, when the cap shortened it (the caller warns).
    pub shortened_from: Option<i64>,
    /// `exp - iat` of the token.
    pub token_seconds: i64,
    /// `warnafter - iat`, for an extended token.
    pub warn_after_seconds: Option<i64>,
}

impl ExpirationPolicy {
    /// Decides the lifetime of a token requested for `requested` seconds (already validated).
    /// `pod_bound` and `api_audiences_only` (every requested audience is an API audience) decide
    /// whether the 3607-second extension applies.
    pub fn lifetime(&self, requested: i64, pod_bound: bool, api_audiences_only: bool) -> Lifetime {
        let (expiration_seconds, shortened_from) = match self.max_seconds {
            Some(max) if max > 0 && requested > max => (max, Some(requested)),
            _ => (requested, None),
        };
        let extended = self.extend
            && pod_bound
            && expiration_seconds == WARN_ONLY_EXPIRATION_SECONDS
            && api_audiences_only;
        Lifetime {
            expiration_seconds,
            shortened_from,
            token_seconds: if extended {
                self.extended_seconds
            } else {
                expiration_seconds
            },
            warn_after_seconds: extended.then_some(expiration_seconds),
        }
    }

    /// The longest `exp - iat` of a token that is not extended: the cap, or 2^32 s without
    /// one. Only an extended token (one with `warnafter`) may live longer, up to
    /// [`longest_token_seconds`](Self::longest_token_seconds).
    pub fn longest_ordinary_token_seconds(&self) -> i64 {
        match self.max_seconds {
            Some(max) if max > 0 => max.min(MAX_EXPIRATION_SECONDS),
            _ => MAX_EXPIRATION_SECONDS,
        }
    }

    /// The longest `exp - iat` any token issued under this policy can have: the cap (2^32 s
    /// without one), or the extended lifetime when the extension can apply (it needs a cap of
    /// at least 3607 s). A key that signed under this policy must keep verifying for this long
    /// after it last signed.
    pub fn longest_token_seconds(&self) -> i64 {
        let cap = self.longest_ordinary_token_seconds();
        if self.extend && cap >= WARN_ONLY_EXPIRATION_SECONDS {
            cap.max(self.extended_seconds)
        } else {
            cap
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        assert!(validate_expiration_seconds(599).is_err());
        assert!(validate_expiration_seconds(600).is_ok());
        assert!(validate_expiration_seconds(1 << 32).is_ok());
        assert_eq!(
            validate_expiration_seconds((1 << 32) + 1),
            Err("may not specify a duration larger than 2^32 seconds")
        );
        assert_eq!(
            validate_expiration_seconds(60),
            Err("may not specify a duration less than 10 minutes")
        );
    }

    #[test]
    fn extension_applies_only_to_pod_bound_api_audience_3607() {
        let p = ExpirationPolicy::default();
        let l = p.lifetime(3607, true, true);
        assert_eq!(l.expiration_seconds, 3607);
        assert_eq!(l.token_seconds, EXTENDED_EXPIRATION_SECONDS);
        assert_eq!(l.warn_after_seconds, Some(3607));
        for (pod, api) in [(false, true), (true, false), (false, false)] {
            let l = p.lifetime(3607, pod, api);
            assert_eq!((l.token_seconds, l.warn_after_seconds), (3607, None));
        }
        assert_eq!(p.lifetime(3600, true, true).token_seconds, 3600);
        let off = ExpirationPolicy { extend: false, ..p };
        assert_eq!(off.lifetime(3607, true, true).token_seconds, 3607);
    }

    #[test]
    fn cap_shortens_and_disables_extension_below_3607() {
        let p = ExpirationPolicy {
            max_seconds: Some(3600),
            ..ExpirationPolicy::default()
        };
        let l = p.lifetime(3607, true, true);
        assert_eq!(l.expiration_seconds, 3600);
        assert_eq!(l.shortened_from, Some(3607));
        assert_eq!((l.token_seconds, l.warn_after_seconds), (3600, None));
        assert_eq!(p.lifetime(3600, false, false).shortened_from, None);
    }

    #[test]
    fn longest_token_is_the_cap_or_the_extension() {
        let p = ExpirationPolicy::default();
        assert_eq!(p.longest_token_seconds(), MAX_EXPIRATION_SECONDS);
        let day = ExpirationPolicy {
            max_seconds: Some(86400),
            ..p
        };
        assert_eq!(day.longest_token_seconds(), EXTENDED_EXPIRATION_SECONDS);
        assert_eq!(
            ExpirationPolicy {
                extend: false,
                ..day
            }
            .longest_token_seconds(),
            86400
        );
        // Below 3607 s the cap rules out the extension.
        let hour = ExpirationPolicy {
            max_seconds: Some(3600),
            ..p
        };
        assert_eq!(hour.longest_token_seconds(), 3600);
        // An extension bounded below the cap (managed keys) leaves the cap.
        let bounded = ExpirationPolicy {
            max_seconds: Some(86400),
            extended_seconds: 86400,
            ..p
        };
        assert_eq!(bounded.longest_token_seconds(), 86400);
        // Every lifetime the policy hands out is within it, and within the ordinary cap unless
        // extended.
        for policy in [p, day, hour, bounded] {
            for requested in [600, 3600, 3607, 86400, MAX_EXPIRATION_SECONDS] {
                for (pod, api) in [(true, true), (false, true), (true, false)] {
                    let lifetime = policy.lifetime(requested, pod, api);
                    assert!(lifetime.token_seconds <= policy.longest_token_seconds());
                    if lifetime.warn_after_seconds.is_none() {
                        assert!(lifetime.token_seconds <= policy.longest_ordinary_token_seconds());
                    }
                }
            }
        }
        assert_eq!(day.longest_ordinary_token_seconds(), 86400);
        assert_eq!(p.longest_ordinary_token_seconds(), MAX_EXPIRATION_SECONDS);
    }
}
