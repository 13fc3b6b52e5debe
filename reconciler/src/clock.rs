//! The reconciler's clock: what time it is for maintenance windows, wave soaks and
//! jitter, and waiting until a time. [`SystemClock`] in production; [`ManualClock`] for
//! tests, which set the time and wake whatever waits on it.
//!
//! Planning never reads a clock: the controller reads this one and passes `now` in.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use jiff::Timestamp;
use tokio::sync::Notify;

/// A source of the current time that can also be waited on.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
    /// Resolves once [`Clock::now`] is at or after `at`.
    fn sleep_until(&self, at: Timestamp) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn sleep_until(&self, at: Timestamp) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                let left = at.duration_since(Timestamp::now());
                let Ok(left) = std::time::Duration::try_from(left) else {
                    return;
                };
                if left.is_zero() {
                    return;
                }
                // Wall time may jump: look again at least every minute.
                tokio::time::sleep(left.min(std::time::Duration::from_secs(60))).await;
            }
        })
    }
}

/// A clock that stands still until a test sets or advances it.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Timestamp>,
    changed: Notify,
}

impl ManualClock {
    pub fn new(now: Timestamp) -> ManualClock {
        ManualClock {
            now: Mutex::new(now),
            changed: Notify::new(),
        }
    }

    /// Sets the time; wakes every [`Clock::sleep_until`] that is due.
    pub fn set(&self, now: Timestamp) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = now;
        self.changed.notify_waiters();
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let now = self.now();
        let by = jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX);
        self.set(now.checked_add(by).unwrap_or(Timestamp::MAX));
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sleep_until(&self, at: Timestamp) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                let changed = self.changed.notified();
                if self.now() >= at {
                    return;
                }
                changed.await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_manual_clock_wakes_sleepers_when_set_past_their_time() {
        let t0: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let clock = std::sync::Arc::new(ManualClock::new(t0));
        let at = t0
            .checked_add(jiff::SignedDuration::from_secs(3600))
            .unwrap();
        let c = clock.clone();
        let sleeper = tokio::spawn(async move { c.sleep_until(at).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(1800));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished(), "half way");
        clock.advance(Duration::from_secs(1800));
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(clock.now(), at);
    }

    #[tokio::test]
    async fn the_system_clock_returns_at_once_for_a_past_time() {
        let past: Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
        tokio::time::timeout(Duration::from_secs(1), SystemClock.sleep_until(past))
            .await
            .expect("at once");
    }
}
