//! When to try a forge again: what an error answer asks of us ([`classify`]), the waits
//! forges ask for (`Retry-After`, GitHub's `x-ratelimit-*`, GitLab's `RateLimit-Reset`),
//! exponential backoff with jitter for passing failures, and the longer holds of a rate
//! limit that names no wait and of a refused token ([`RetryPolicy::hold`]).
//!
//! Pure: the clock and the headers are inputs.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

/// What a failed request asks of us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A passing failure (no answer, 5xx, 408, a token file not mounted yet): retried
    /// with backoff, then kept in the outbox.
    Transient,
    /// A rate limit (429, GitHub's 403 rate limits): nothing is sent to the forge until
    /// the wait is over ([`RetryPolicy::hold`]).
    RateLimited,
    /// The forge refused the token (401): nothing is sent to it for a long while, or
    /// until the token file changes ([`RetryPolicy::hold`]).
    Unauthorized,
    /// Any other refusal (an unknown repository, an invalid field, a configuration that
    /// cannot work): the same request fails the same way again.
    Permanent,
}

/// How a delivery is retried, and how long a forge is held.
///
/// One [`StatusWriter::post`](super::StatusWriter::post) makes at most `attempts` tries
/// of each status, sleeping [`RetryPolicy::delay`] between them. A rate limit or a
/// refused token holds every request to the forge ([`RetryPolicy::hold`]); a hold of up
/// to `max_wait` is slept in place, a longer one is not: the statuses stay in the outbox
/// and go out once it is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries per delivery, the first included (at least 1).
    pub attempts: u32,
    /// The backoff before the first retry (before jitter).
    pub initial: Duration,
    /// The backoff never grows beyond this (before jitter).
    pub max_delay: Duration,
    /// The longest wait slept inside one delivery.
    pub max_wait: Duration,
    /// A rate limit that names no wait (GitHub's secondary limits, a 429 without
    /// `Retry-After`) holds the forge this long, doubled for each further one in a row.
    pub rate_limit_wait: Duration,
    /// ... up to this.
    pub max_rate_limit_wait: Duration,
    /// A refused token (401) holds the forge this long, doubled for each further refusal
    /// in a row, unless the token file changes first.
    pub unauthorized_wait: Duration,
    /// ... up to this.
    pub max_unauthorized_wait: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, 500 ms doubling to at most 30 s, waits of up to 10 s slept in place;
    /// a rate limit that names no wait holds the forge 1 minute doubling to 30 minutes
    /// (GitHub asks for at least a minute, then exponential backoff), a refused token
    /// 5 minutes doubling to 1 hour.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            initial: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_wait: Duration::from_secs(10),
            rate_limit_wait: Duration::from_secs(60),
            max_rate_limit_wait: Duration::from_secs(30 * 60),
            unauthorized_wait: Duration::from_secs(5 * 60),
            max_unauthorized_wait: Duration::from_secs(60 * 60),
        }
    }
}

impl RetryPolicy {
    /// The backoff before retry number `retry` (1 for the first retry): the ceiling
    /// `initial * 2^(retry-1)`, capped at `max_delay`, with "equal jitter": half the
    /// ceiling plus a random share of the other half, so that replicas and pools that
    /// failed together do not retry in step, and no retry comes sooner than half the
    /// ceiling.
    pub fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self.ceiling(retry);
        let half = ceiling / 2;
        half + jitter(ceiling - half)
    }

    /// The wait before retry number `retry`: the backoff, or what the forge asked for
    /// when that is longer.
    pub fn delay(&self, retry: u32, asked: Option<Duration>) -> Duration {
        let backoff = self.backoff(retry);
        match asked {
            Some(asked) if asked > backoff => asked,
            _ => backoff,
        }
    }

    /// How long the `strike`th rate limit or refused token in a row (1 for the first)
    /// holds every request to the forge: the wait the forge asked for when it named one
    /// (`Retry-After`, a rate-limit reset), otherwise the kind's first wait doubled for
    /// each further strike, up to its maximum. `None` for the other kinds.
    pub fn hold(
        &self,
        kind: FailureKind,
        strike: u32,
        asked: Option<Duration>,
    ) -> Option<Duration> {
        let (first, max) = match kind {
            FailureKind::RateLimited => {
                if let Some(asked) = asked {
                    return Some(asked);
                }
                (self.rate_limit_wait, self.max_rate_limit_wait)
            }
            FailureKind::Unauthorized => (self.unauthorized_wait, self.max_unauthorized_wait),
            FailureKind::Transient | FailureKind::Permanent => return None,
        };
        let exp = strike.saturating_sub(1).min(20);
        Some(first.saturating_mul(1u32 << exp).min(max.max(first)))
    }

    fn ceiling(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(20);
        self.initial.saturating_mul(1u32 << exp).min(self.max_delay)
    }
}

/// A uniformly random duration in `[0, max]`. Randomness comes from the standard
/// library's per-process random hasher keys (no cryptographic quality is needed).
fn jitter(max: Duration) -> Duration {
    let nanos = max.as_nanos();
    if nanos == 0 {
        return Duration::ZERO;
    }
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(nanos);
    let random = u128::from(hasher.finish());
    let picked = random % (nanos + 1);
    Duration::from_nanos(u64::try_from(picked).unwrap_or(u64::MAX))
}

/// What an error answer asks of us:
///
/// - 401: the token is refused;
/// - 429, and a 403 that is a rate limit: GitHub answers its primary limit with
///   `x-ratelimit-remaining: 0`, its secondary limits with a message saying so ("You have
///   exceeded a secondary rate limit"), sometimes with `Retry-After`;
/// - 408 and every 5xx: passing;
/// - any other 4xx fails the same way again.
pub fn classify(status: u16, headers: &HeaderMap, message: &str) -> FailureKind {
    match status {
        401 => FailureKind::Unauthorized,
        429 => FailureKind::RateLimited,
        403 if headers.contains_key("retry-after")
            || ratelimit_exhausted(headers)
            || says_rate_limit(message) =>
        {
            FailureKind::RateLimited
        }
        408 => FailureKind::Transient,
        s if s >= 500 => FailureKind::Transient,
        _ => FailureKind::Permanent,
    }
}

/// GitHub's messages for its rate limits ("API rate limit exceeded", "You have exceeded
/// a secondary rate limit", and the older "abuse detection mechanism").
fn says_rate_limit(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("rate limit") || m.contains("abuse detection")
}

/// How long the forge asks us to wait, from an error answer's headers:
///
/// 1. `Retry-After`, in seconds or as an HTTP date (RFC 9110 §10.2.3);
/// 2. GitHub: `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (Unix seconds);
/// 3. GitLab: on 429, `RateLimit-Reset` (Unix seconds).
///
/// A reset time already past (clock skew) still waits one second.
pub fn requested_wait(status: u16, headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(value) = header_str(headers, "retry-after") {
        return parse_retry_after(value, now);
    }
    if ratelimit_exhausted(headers)
        && let Some(reset) = header_str(headers, "x-ratelimit-reset")
    {
        return until_epoch(reset, now);
    }
    if status == 429
        && let Some(reset) = header_str(headers, "ratelimit-reset")
    {
        return until_epoch(reset, now);
    }
    None
}

/// `Retry-After: <seconds>` or `Retry-After: <HTTP-date>`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

fn ratelimit_exhausted(headers: &HeaderMap) -> bool {
    header_str(headers, "x-ratelimit-remaining").is_some_and(|v| v.trim() == "0")
}

fn until_epoch(value: &str, now: SystemTime) -> Option<Duration> {
    let secs = value.trim().parse::<u64>().ok()?;
    let at = UNIX_EPOCH + Duration::from_secs(secs);
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    Some(wait.max(Duration::from_secs(1)))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            attempts: 5,
            initial: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_wait: Duration::from_secs(60),
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn backoff_doubles_within_jitter_bounds_and_caps() {
        let p = policy();
        for _ in 0..200 {
            for (retry, ceiling_ms) in [
                (1, 100),
                (2, 200),
                (3, 400),
                (4, 800),
                (5, 1000),
                (30, 1000),
            ] {
                let d = p.backoff(retry);
                let ceiling = Duration::from_millis(ceiling_ms);
                assert!(d >= ceiling / 2 && d <= ceiling, "retry {retry}: {d:?}");
            }
        }
    }

    #[test]
    fn jitter_spreads_delays() {
        let p = policy();
        let distinct: std::collections::HashSet<Duration> = (0..50).map(|_| p.backoff(3)).collect();
        assert!(distinct.len() > 10, "{distinct:?}");
    }

    #[test]
    fn a_longer_requested_wait_wins() {
        let p = policy();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
        assert!(p.delay(1, Some(Duration::from_millis(1))) >= Duration::from_millis(50));
    }

    #[test]
    fn retry_after_in_seconds_and_as_a_date() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(90)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn github_rate_limit_headers() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000030"),
        ]);
        assert_eq!(classify(403, &h, ""), FailureKind::RateLimited);
        assert_eq!(requested_wait(403, &h, now), Some(Duration::from_secs(30)));
        // Remaining calls left: a 403 is a permission problem, not a rate limit.
        let h = headers(&[
            ("x-ratelimit-remaining", "4999"),
            ("x-ratelimit-reset", "1700000030"),
        ]);
        assert_eq!(classify(403, &h, ""), FailureKind::Permanent);
        assert_eq!(requested_wait(403, &h, now), None);
        // A reset already past still waits a second.
        let h = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1")]);
        assert_eq!(requested_wait(403, &h, now), Some(Duration::from_secs(1)));
    }

    #[test]
    fn gitlab_rate_limit_headers() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = headers(&[("ratelimit-reset", "1700000012")]);
        assert_eq!(requested_wait(429, &h, now), Some(Duration::from_secs(12)));
        assert_eq!(requested_wait(500, &h, now), None);
        let h = headers(&[("ratelimit-reset", "1700000012"), ("retry-after", "3")]);
        assert_eq!(requested_wait(429, &h, now), Some(Duration::from_secs(3)));
    }

    #[test]
    fn what_error_answers_ask_of_us() {
        let none = HeaderMap::new();
        for s in [408, 500, 502, 503, 504] {
            assert_eq!(classify(s, &none, ""), FailureKind::Transient, "{s}");
        }
        for s in [400, 403, 404, 409, 422] {
            assert_eq!(
                classify(s, &none, "Not Found"),
                FailureKind::Permanent,
                "{s}"
            );
        }
        assert_eq!(
            classify(401, &none, "Bad credentials"),
            FailureKind::Unauthorized
        );
        // A 429 with or without Retry-After.
        assert_eq!(classify(429, &none, ""), FailureKind::RateLimited);
        // GitHub's 403 rate limits: by header, or by message alone.
        assert_eq!(
            classify(403, &headers(&[("retry-after", "60")]), ""),
            FailureKind::RateLimited
        );
        assert_eq!(
            classify(
                403,
                &headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "1")]),
                "API rate limit exceeded for user ID 1."
            ),
            FailureKind::RateLimited
        );
        assert_eq!(
            classify(
                403,
                &headers(&[("x-ratelimit-remaining", "4990")]),
                "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
            ),
            FailureKind::RateLimited
        );
        assert_eq!(
            classify(
                403,
                &none,
                "You have triggered an abuse detection mechanism."
            ),
            FailureKind::RateLimited
        );
        assert_eq!(
            classify(
                403,
                &headers(&[("x-ratelimit-remaining", "4999")]),
                "Resource not accessible by integration"
            ),
            FailureKind::Permanent
        );
    }

    #[test]
    fn holds_wait_at_least_a_minute_then_double() {
        let p = RetryPolicy::default();
        let rate = |strike, asked| p.hold(FailureKind::RateLimited, strike, asked);
        assert_eq!(rate(1, None), Some(Duration::from_secs(60)));
        assert_eq!(rate(2, None), Some(Duration::from_secs(120)));
        assert_eq!(rate(3, None), Some(Duration::from_secs(240)));
        assert_eq!(rate(40, None), Some(Duration::from_secs(30 * 60)));
        // A wait the forge names is what it gets.
        assert_eq!(
            rate(3, Some(Duration::from_secs(7))),
            Some(Duration::from_secs(7))
        );
        let auth = |strike| p.hold(FailureKind::Unauthorized, strike, None);
        assert_eq!(auth(1), Some(Duration::from_secs(300)));
        assert_eq!(auth(2), Some(Duration::from_secs(600)));
        assert_eq!(auth(5), Some(Duration::from_secs(3600)));
        assert_eq!(auth(9), Some(Duration::from_secs(3600)));
        assert_eq!(p.hold(FailureKind::Transient, 1, None), None);
        assert_eq!(p.hold(FailureKind::Permanent, 1, None), None);
    }
}
