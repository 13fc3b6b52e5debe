//! When to try a forge again: exponential backoff with jitter, and the waits forges ask
//! for (`Retry-After`, GitHub's `x-ratelimit-*`, GitLab's `RateLimit-Reset`).
//!
//! Pure: the clock and the headers are inputs.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

/// How a delivery is retried. One [`StatusWriter::post`](super::StatusWriter::post)
/// makes at most `attempts` requests, sleeping [`RetryPolicy::delay`] between them; a
/// wait the forge asks for that is longer than `max_wait` is not slept in place: the
/// status stays in the outbox and the writer sends nothing to that forge until then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests per delivery, the first included (at least 1).
    pub attempts: u32,
    /// The backoff before the first retry (before jitter).
    pub initial: Duration,
    /// The backoff never grows beyond this (before jitter).
    pub max_delay: Duration,
    /// The longest forge-requested wait slept inside one delivery.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// 4 attempts, 500 ms doubling to at most 30 s, waits of up to 60 s slept in place.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 4,
            initial: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_wait: Duration::from_secs(60),
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

/// Whether an error answer is worth retrying: 408, 429, every 5xx, and a 403 that is a
/// rate limit (GitHub answers its primary limit with `x-ratelimit-remaining: 0` and its
/// secondary limits with `Retry-After`). Any other 4xx will fail the same way again.
pub fn is_retryable_status(status: u16, headers: &HeaderMap) -> bool {
    match status {
        408 | 429 => true,
        403 => headers.contains_key("retry-after") || ratelimit_exhausted(headers),
        s => s >= 500,
    }
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
        assert!(is_retryable_status(403, &h));
        assert_eq!(requested_wait(403, &h, now), Some(Duration::from_secs(30)));
        // Remaining calls left: a 403 is a permission problem, not a rate limit.
        let h = headers(&[
            ("x-ratelimit-remaining", "4999"),
            ("x-ratelimit-reset", "1700000030"),
        ]);
        assert!(!is_retryable_status(403, &h));
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
    fn which_statuses_are_retried() {
        let none = HeaderMap::new();
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(is_retryable_status(s, &none), "{s}");
        }
        for s in [400, 401, 403, 404, 409, 422] {
            assert!(!is_retryable_status(s, &none), "{s}");
        }
        assert!(is_retryable_status(403, &headers(&[("retry-after", "60")])));
    }
}
