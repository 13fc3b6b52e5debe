//! Kubernetes API requests retried: which failures are worth another try, how long to
//! wait, and the loop. The reconciler and the node agent share it (feature `kube`).
//!
//! kube's client already retries 429, 503 and 504 (honouring `Retry-After`) inside its
//! tower stack; this layer adds what it leaves: 500s, optimistic-concurrency conflicts
//! (409 Conflict, not 409 AlreadyExists), dropped connections, and a 429 that outlasted
//! kube's own retries. What is not retried (403, 404, 422, AlreadyExists ...) is returned
//! at once for the caller to interpret.

use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// What to do after a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Transient: try again, after the server's `Retry-After` when it gave one.
    Retry(Option<Duration>),
    /// Permanent for this request.
    Fail,
}

/// The HTTP status of a failed request; 0 when there was no answer.
pub fn error_code(e: &kube::Error) -> u16 {
    match e {
        kube::Error::Api(status) => status.code,
        _ => 0,
    }
}

/// Whether `e` is worth retrying.
pub fn classify(e: &kube::Error) -> Disposition {
    match e {
        kube::Error::Api(status) => match status.code {
            429 => Disposition::Retry(
                status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s))),
            ),
            500 | 502 | 503 | 504 => Disposition::Retry(None),
            409 if !status.is_already_exists() => Disposition::Retry(None),
            _ => Disposition::Fail,
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Disposition::Retry(None)
        }
        _ => Disposition::Fail,
    }
}

/// How often and how patiently to retry one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The first backoff; it doubles per attempt, with jitter.
    pub initial: Duration,
    /// The longest backoff (a server's `Retry-After` may be longer).
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            initial: Duration::from_millis(50),
            max: Duration::from_secs(5),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (`attempt` from 1): exponential, capped,
    /// with "equal jitter" (half fixed, half random) so replicas and requests spread out.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .initial
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max);
        let half = exp / 2;
        half + half.mul_f64(jitter())
    }
}

/// A number in `[0, 1)`, from std's randomly seeded hasher (good enough for jitter).
pub fn jitter() -> f64 {
    let bits = RandomState::new().hash_one(std::time::Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A failed attempt, as [`retrying`] tells its caller (to count it, to log it).
#[derive(Debug)]
pub struct Failure<'a> {
    /// The error.
    pub error: &'a kube::Error,
    /// Which attempt failed, from 1.
    pub attempt: u32,
    /// The wait before the next attempt; `None` when this error is returned.
    pub retry_in: Option<Duration>,
}

/// Runs `f` until it succeeds, fails permanently, or runs out of attempts; `on_failure`
/// hears of every failed attempt. The last error is returned.
pub async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    mut on_failure: impl FnMut(Failure<'_>),
    mut f: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        let error = match f().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let retry_in = match classify(&error) {
            Disposition::Retry(after) if attempt < policy.attempts => {
                Some(after.unwrap_or_else(|| policy.backoff(attempt)))
            }
            _ => None,
        };
        on_failure(Failure {
            error: &error,
            attempt,
            retry_in,
        });
        let Some(wait) = retry_in else {
            return Err(error);
        };
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("x", reason).with_code(code).boxed())
    }

    #[test]
    fn classification() {
        assert_eq!(
            classify(&api(500, "InternalError")),
            Disposition::Retry(None)
        );
        assert_eq!(classify(&api(409, "Conflict")), Disposition::Retry(None));
        assert_eq!(classify(&api(409, "AlreadyExists")), Disposition::Fail);
        assert_eq!(classify(&api(404, "NotFound")), Disposition::Fail);
        assert_eq!(classify(&api(403, "Forbidden")), Disposition::Fail);
        let mut throttled = Status::failure("slow down", "TooManyRequests").with_code(429);
        throttled.details =
            Some(serde_json::from_value(serde_json::json!({"retryAfterSeconds": 3})).unwrap());
        assert_eq!(
            classify(&kube::Error::Api(throttled.boxed())),
            Disposition::Retry(Some(Duration::from_secs(3)))
        );
        assert_eq!(error_code(&api(422, "Invalid")), 422);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            attempts: 10,
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        for attempt in 1..12 {
            let d = p.backoff(attempt);
            let exp = Duration::from_millis(100 * (1 << (attempt - 1).min(10))).min(p.max);
            assert!(d >= exp / 2 && d <= exp, "attempt {attempt}: {d:?}");
        }
    }

    #[tokio::test]
    async fn retries_transient_errors_then_gives_up_on_permanent_ones() {
        let policy = RetryPolicy {
            attempts: 5,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(2),
        };
        let calls = AtomicU32::new(0);
        let mut heard = Vec::new();
        let r = retrying(
            &policy,
            |f| heard.push((error_code(f.error), f.attempt, f.retry_in.is_some())),
            || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(api(500, "InternalError")),
                    1 => Err(api(409, "Conflict")),
                    _ => Ok(7),
                }
            },
        )
        .await;
        assert_eq!(r.ok(), Some(7));
        assert_eq!(heard, [(500, 1, true), (409, 2, true)]);

        calls.store(0, Ordering::SeqCst);
        heard.clear();
        let r: Result<(), _> = retrying(
            &policy,
            |f| heard.push((error_code(f.error), f.attempt, f.retry_in.is_some())),
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(api(403, "Forbidden"))
            },
        )
        .await;
        assert!(r.is_err());
        assert_eq!(heard, [(403, 1, false)], "403 is not retried");

        calls.store(0, Ordering::SeqCst);
        let r: Result<(), _> = retrying(
            &policy,
            |_| {},
            || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(api(500, "InternalError"))
            },
        )
        .await;
        assert!(r.is_err());
        assert_eq!(
            calls.load(Ordering::SeqCst),
            5,
            "gives up after the attempts"
        );
    }
}
