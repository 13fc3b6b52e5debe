//! [`Poller`]: fetches the branch on an interval, at once when woken (the push webhook),
//! and backs off after failures while keeping the last good commit.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tracing::debug;

use super::{CommitSource, FetchOutcome, GitConfig, GitError, GitRepo};

/// Exponential backoff after failed polls: `initial`, doubling, never above `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub initial: Duration,
    /// The longest wait; also the wait after failures a person must fix.
    pub max: Duration,
}

impl Default for Backoff {
    /// 10 s, 20 s, 40 s ... up to 5 minutes.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The wait after the `attempt`-th consecutive failure (1-based; 0 is treated as 1).
    pub fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(32);
        self.initial
            .checked_mul(1u32 << doublings.min(31))
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The wait after a failure: doubling for a retryable one, the longest for one a person
    /// must fix (it is still retried, so the fix is picked up without a restart).
    pub fn delay_for(&self, error: &GitError, attempt: u32) -> Duration {
        if error.is_retryable() {
            self.delay(attempt)
        } else {
            self.max
        }
    }
}

/// What one poll found.
#[derive(Debug)]
pub enum PollEvent {
    /// The branch head is a commit this poller has not reported before (always so on the
    /// first successful poll). `forced`: it does not descend from the previous head.
    NewCommit { id: String, forced: bool },
    /// The branch head is the commit reported last.
    Unchanged,
    /// The fetch failed. The last good commit ([`Poller::last_good`]) stays in force; the
    /// next poll is in `retry_in` unless woken earlier.
    Unreachable {
        error: GitError,
        /// Consecutive failures, this one included.
        attempt: u32,
        retry_in: Duration,
    },
}

/// The outcome of a poll, as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PollResult {
    NewCommit,
    Unchanged,
    /// Failed, and retrying may fix it.
    Retryable,
    /// Failed, and a person must fix the configuration or the remote.
    Fatal,
}

impl PollResult {
    /// `new_commit`, `unchanged`, `error_retryable`, `error_fatal`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PollResult::NewCommit => "new_commit",
            PollResult::Unchanged => "unchanged",
            PollResult::Retryable => "error_retryable",
            PollResult::Fatal => "error_fatal",
        }
    }
}

/// One poll, for metrics: how long it took, how it ended, what it transferred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRecord {
    pub latency: Duration,
    pub result: PollResult,
    pub received_bytes: usize,
}

type Observer = Box<dyn Fn(&PollRecord) + Send + Sync>;

/// Polls one branch. Owns the [`GitRepo`] cache; the blocking libgit2 work runs on tokio's
/// blocking pool.
pub struct Poller {
    config: GitConfig,
    interval: Duration,
    backoff: Backoff,
    wake: Arc<Notify>,
    /// The cache, shared with the blocking task of the poll in flight: a poll whose future
    /// was dropped still finishes, and the next one waits for it. `None` before the first
    /// poll or after a failed open: (re)opened then.
    repo: Arc<Mutex<Option<GitRepo>>>,
    last_good: Option<String>,
    failures: u32,
    last_error_fatal: bool,
    extra_refs: BTreeMap<String, String>,
    observer: Option<Observer>,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("config", &self.config)
            .field("interval", &self.interval)
            .field("last_good", &self.last_good)
            .field("failures", &self.failures)
            .finish_non_exhaustive()
    }
}

impl Poller {
    /// A poller for `config`, polling every `interval` and at once whenever `wake` is
    /// notified (a notification during a poll is kept and starts the next one at once).
    pub fn new(config: GitConfig, interval: Duration, wake: Arc<Notify>) -> Poller {
        Poller {
            config,
            interval,
            backoff: Backoff::default(),
            wake,
            repo: Arc::new(Mutex::new(None)),
            last_good: None,
            failures: 0,
            last_error_fatal: false,
            extra_refs: BTreeMap::new(),
            observer: None,
        }
    }

    /// Uses this backoff instead of [`Backoff::default`].
    pub fn with_backoff(mut self, backoff: Backoff) -> Poller {
        self.backoff = backoff;
        self
    }

    /// Calls `observer` after every poll (metrics: latency, result, bytes).
    pub fn with_observer(
        mut self,
        observer: impl Fn(&PollRecord) + Send + Sync + 'static,
    ) -> Poller {
        self.observer = Some(Box::new(observer));
        self
    }

    /// The last commit a poll reported as the branch head; it stays in force while the
    /// remote is unreachable.
    pub fn last_good(&self) -> Option<&str> {
        self.last_good.as_deref()
    }

    /// Refs fetched through the extra refspecs at the last successful poll.
    pub fn extra_refs(&self) -> &BTreeMap<String, String> {
        &self.extra_refs
    }

    /// Consecutive failed polls (0 after a success).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long [`Poller::next`] waits before polling, unless woken: nothing before the
    /// first poll, the backoff after a failure, the interval otherwise.
    pub fn next_delay(&self) -> Option<Duration> {
        if self.last_good.is_none() && self.failures == 0 {
            None
        } else if self.failures > 0 {
            Some(if self.last_error_fatal {
                self.backoff.max
            } else {
                self.backoff.delay(self.failures)
            })
        } else {
            Some(self.interval)
        }
    }

    /// Waits for the next poll (interval, backoff, or a wake-up) and polls.
    pub async fn next(&mut self) -> PollEvent {
        if let Some(delay) = self.next_delay() {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.wake.notified() => debug!("poll woken early"),
            }
        }
        self.poll_now().await
    }

    /// Polls at once. Cancel-safe: if this future is dropped, the fetch still completes on
    /// the blocking pool and the next poll waits for it.
    pub async fn poll_now(&mut self) -> PollEvent {
        let started = Instant::now();
        let slot = Arc::clone(&self.repo);
        let config = self.config.clone();
        let joined = tokio::task::spawn_blocking(move || {
            // A panic inside a previous fetch poisons the lock; the cache is reopened.
            let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
            let repo = match guard.take() {
                Some(repo) => repo,
                None => GitRepo::open(config)?,
            };
            guard.insert(repo).fetch()
        })
        .await;
        let outcome = joined.unwrap_or_else(|e| Err(GitError::Task(e.to_string())));
        let latency = started.elapsed();
        let (event, record) = self.absorb(outcome, latency);
        if let Some(observer) = &self.observer {
            observer(&record);
        }
        event
    }

    /// Updates the state from a fetch outcome: the pure part of a poll.
    fn absorb(
        &mut self,
        outcome: Result<FetchOutcome, GitError>,
        latency: Duration,
    ) -> (PollEvent, PollRecord) {
        match outcome {
            Ok(fetched) => {
                self.failures = 0;
                self.last_error_fatal = false;
                self.extra_refs = fetched.extra_refs;
                let new = self.last_good.as_deref() != Some(fetched.head.as_str());
                let record = PollRecord {
                    latency,
                    result: if new {
                        PollResult::NewCommit
                    } else {
                        PollResult::Unchanged
                    },
                    received_bytes: fetched.received_bytes,
                };
                if new {
                    // `forced` compares with the cache's previous head, which is the last
                    // reported commit except on the first poll after a restart.
                    self.last_good = Some(fetched.head.clone());
                    (
                        PollEvent::NewCommit {
                            id: fetched.head,
                            forced: fetched.forced,
                        },
                        record,
                    )
                } else {
                    (PollEvent::Unchanged, record)
                }
            }
            Err(error) => {
                self.failures = self.failures.saturating_add(1);
                self.last_error_fatal = !error.is_retryable();
                let retry_in = self.backoff.delay_for(&error, self.failures);
                let record = PollRecord {
                    latency,
                    result: if self.last_error_fatal {
                        PollResult::Fatal
                    } else {
                        PollResult::Retryable
                    },
                    received_bytes: 0,
                };
                (
                    PollEvent::Unreachable {
                        error,
                        attempt: self.failures,
                        retry_in,
                    },
                    record,
                )
            }
        }
    }

    /// The files of commit `id` from the cache. Blocking (it opens the cache repository)
    /// but brief; safe while a fetch runs, since git objects are never rewritten.
    pub fn commit_source(&self, id: &str) -> Result<CommitSource, GitError> {
        CommitSource::open(&self.config.cache_dir, id, &self.config.url)
    }
}
