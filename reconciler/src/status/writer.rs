//! [`StatusWriter`]: posts only what changed, retries what failed, and keeps the latest
//! wanted status per commit and context until its forge takes it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::{
    CommitStatus, GitHub, GitLab, Gitea, Notes, PLAN_MARKER, RetryPolicy, StatusError, StatusState,
    gitea, github, gitlab, notes, truncate_description,
};

/// How many (commit, context) pairs the writer remembers as posted. Older ones are
/// forgotten first; forgetting one costs at most one repeated post.
const REMEMBERED: usize = 10_000;

/// Where statuses go.
#[derive(Debug, Clone)]
pub enum Backend {
    GitHub(GitHub),
    GitLab(GitLab),
    Gitea(Gitea),
    Notes(Notes),
    Recorder(Recorder),
}

impl Backend {
    /// The backend's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::GitHub(_) => "GitHub",
            Backend::GitLab(_) => "GitLab",
            Backend::Gitea(_) => "Gitea",
            Backend::Notes(_) => "git notes",
            Backend::Recorder(_) => "recorder",
        }
    }

    /// The longest description the backend takes, in characters.
    pub fn description_limit(&self) -> usize {
        match self {
            Backend::GitHub(_) => github::DESCRIPTION_LIMIT,
            Backend::GitLab(_) => gitlab::DESCRIPTION_LIMIT,
            Backend::Gitea(_) => gitea::DESCRIPTION_LIMIT,
            Backend::Notes(_) => notes::DESCRIPTION_LIMIT,
            Backend::Recorder(r) => r.description_limit,
        }
    }

    fn comment_limit(&self) -> Result<usize, StatusError> {
        match self {
            Backend::GitHub(_) => Ok(github::COMMENT_LIMIT),
            Backend::GitLab(_) => Ok(gitlab::COMMENT_LIMIT),
            Backend::Gitea(_) => Ok(gitea::COMMENT_LIMIT),
            Backend::Recorder(_) => Ok(usize::MAX),
            Backend::Notes(_) => Err(StatusError::CommentsUnsupported {
                backend: self.name(),
            }),
        }
    }

    async fn send(&self, status: &CommitStatus) -> Result<(), StatusError> {
        match self {
            Backend::GitHub(b) => b.post_status(status).await,
            Backend::GitLab(b) => b.post_status(status).await,
            Backend::Gitea(b) => b.post_status(status).await,
            Backend::Notes(b) => b.post_status(status).await,
            Backend::Recorder(b) => b.post_status(status),
        }
    }

    /// Finds our comment on `pr` and creates or updates it to `body`. Listing first on
    /// every attempt means a retried create whose first try did land is an update, not
    /// a duplicate.
    async fn upsert_comment(&self, pr: u64, body: &str) -> Result<CommentOutcome, StatusError> {
        let existing = match self {
            Backend::GitHub(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::GitLab(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::Gitea(b) => b.find_comment(pr, PLAN_MARKER).await?,
            Backend::Recorder(b) => b.find_comment(pr),
            Backend::Notes(_) => {
                return Err(StatusError::CommentsUnsupported {
                    backend: self.name(),
                });
            }
        };
        match existing {
            Some((id, old)) if old == body => Ok(CommentOutcome::Unchanged(id)),
            Some((id, _)) => {
                match self {
                    Backend::GitHub(b) => b.update_comment(id, body).await?,
                    Backend::GitLab(b) => b.update_comment(pr, id, body).await?,
                    Backend::Gitea(b) => b.update_comment(id, body).await?,
                    Backend::Recorder(b) => b.update_comment(pr, id, body),
                    Backend::Notes(_) => {}
                }
                Ok(CommentOutcome::Updated(id))
            }
            None => {
                let id = match self {
                    Backend::GitHub(b) => b.create_comment(pr, body).await?,
                    Backend::GitLab(b) => b.create_comment(pr, body).await?,
                    Backend::Gitea(b) => b.create_comment(pr, body).await?,
                    Backend::Recorder(b) => b.create_comment(pr, body),
                    Backend::Notes(_) => 0,
                };
                Ok(CommentOutcome::Created(id))
            }
        }
    }

    async fn flush(&self) -> Result<(), StatusError> {
        match self {
            Backend::Notes(b) => b.flush().await,
            _ => Ok(()),
        }
    }
}

/// What [`StatusWriter::post`] did with a status.
#[derive(Debug)]
pub enum Delivery {
    /// The forge took it.
    Posted,
    /// It equals the last status posted for its commit and context: nothing was sent.
    Unchanged,
    /// The forge is down or rate limited: it waits in the outbox for
    /// [`StatusWriter::flush`] or the next post. `reason` says why (already logged).
    Queued { reason: String },
    /// The forge refused it for good (bad token, unknown repository, invalid field); it
    /// was logged and dropped from the outbox. Posting it again tries again.
    Rejected(StatusError),
}

/// What [`StatusWriter::flush`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FlushReport {
    pub delivered: usize,
    pub still_queued: usize,
    pub rejected: usize,
}

/// What [`StatusWriter::comment`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentOutcome {
    /// No comment carried the marker: one was created (its id).
    Created(u64),
    /// Our comment was updated in place.
    Updated(u64),
    /// Our comment already said exactly this.
    Unchanged(u64),
}

type Key = (String, String);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Posted {
    state: StatusState,
    description: String,
    target_url: Option<String>,
}

impl Posted {
    fn of(status: &CommitStatus) -> Posted {
        Posted {
            state: status.state,
            description: status.description.clone(),
            target_url: status.target_url.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct WriterState {
    /// The last status each (commit, context) got, as sent.
    posted: HashMap<Key, Posted>,
    /// Insertion order of `posted`, to forget the oldest.
    order: VecDeque<Key>,
    /// The latest wanted status per (commit, context) not delivered yet.
    outbox: BTreeMap<Key, CommitStatus>,
    /// The forge asked for a pause (rate limit) until then.
    blocked_until: Option<Instant>,
}

impl WriterState {
    fn remember(&mut self, key: Key, posted: Posted) {
        if self.posted.insert(key.clone(), posted).is_none() {
            self.order.push_back(key);
            while self.order.len() > REMEMBERED {
                if let Some(old) = self.order.pop_front() {
                    self.posted.remove(&old);
                }
            }
        }
    }

    fn blocked(&self, now: Instant) -> Option<Duration> {
        self.blocked_until
            .and_then(|until| until.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }
}

/// Posts commit statuses and plan comments to one [`Backend`]. Share it behind an
/// `Arc`; posts are sent one at a time, in order.
#[derive(Debug)]
pub struct StatusWriter {
    backend: Backend,
    policy: RetryPolicy,
    state: Mutex<WriterState>,
    send: tokio::sync::Mutex<()>,
}

impl StatusWriter {
    /// A writer with an empty memory and outbox.
    pub fn new(backend: Backend, policy: RetryPolicy) -> StatusWriter {
        StatusWriter {
            backend,
            policy,
            state: Mutex::new(WriterState::default()),
            send: tokio::sync::Mutex::new(()),
        }
    }

    /// The backend statuses go to.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The statuses waiting in the outbox, by commit then context.
    pub fn queued(&self) -> Vec<CommitStatus> {
        self.lock().outbox.values().cloned().collect()
    }

    /// The status as it will be sent: description on one line, cut to the backend's
    /// limit.
    pub fn normalize(&self, status: &CommitStatus) -> CommitStatus {
        let one_line = status.description.replace(['\n', '\r'], " ");
        CommitStatus {
            description: truncate_description(&one_line, self.backend.description_limit()),
            ..status.clone()
        }
    }

    /// Posts `status` unless it equals the last one posted for its commit and context.
    /// Transient failures are retried per the [`RetryPolicy`]; if they persist, the
    /// status waits in the outbox (replacing an older one for the same commit and
    /// context) and is delivered by a later `post` or [`flush`](Self::flush). Every
    /// failure is logged here.
    pub async fn post(&self, status: &CommitStatus) -> Delivery {
        let status = self.normalize(status);
        let key = (status.sha.clone(), status.context.clone());
        {
            let mut state = self.lock();
            if !state.outbox.contains_key(&key)
                && state.posted.get(&key) == Some(&Posted::of(&status))
            {
                return Delivery::Unchanged;
            }
            state.outbox.insert(key.clone(), status);
        }
        let _send = self.send.lock().await;
        self.deliver(&key).await
    }

    /// Delivers everything in the outbox (and, for git notes, pushes what a failed push
    /// left behind). Call it periodically, or run [`redeliver`](Self::redeliver).
    pub async fn flush(&self) -> FlushReport {
        let _send = self.send.lock().await;
        let keys: Vec<Key> = self.lock().outbox.keys().cloned().collect();
        let mut report = FlushReport::default();
        for key in keys {
            match self.deliver(&key).await {
                Delivery::Posted | Delivery::Unchanged => report.delivered += 1,
                Delivery::Queued { .. } => report.still_queued += 1,
                Delivery::Rejected(_) => report.rejected += 1,
            }
        }
        if let Err(e) = self.backend.flush().await {
            warn!(backend = self.backend.name(), error = %e, "flushing the status backend failed");
        }
        report
    }

    /// Flushes every `every` until `cancel` fires: a status queued during an outage is
    /// delivered when the forge returns even if nothing new is posted.
    pub async fn redeliver(&self, every: Duration, cancel: CancellationToken) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let report = self.flush().await;
            if report.delivered > 0 || report.still_queued > 0 {
                debug!(
                    backend = self.backend.name(),
                    delivered = report.delivered,
                    still_queued = report.still_queued,
                    rejected = report.rejected,
                    "outbox flushed"
                );
            }
        }
    }

    /// Creates the pull-request comment carrying [`PLAN_MARKER`] with `markdown` below
    /// it, or updates the existing one in place (never a second one). Retried like a
    /// status; not queued (the next push of the pull request plans again).
    pub async fn comment(&self, pr: u64, markdown: &str) -> Result<CommentOutcome, StatusError> {
        let body = comment_body(markdown, self.backend.comment_limit()?);
        let _send = self.send.lock().await;
        let outcome = self
            .retrying("comment", || self.backend.upsert_comment(pr, &body))
            .await?;
        info!(backend = self.backend.name(), pr, outcome = ?outcome, "plan comment");
        Ok(outcome)
    }

    /// Sends the outbox entry for `key`, if still wanted. Callers hold `self.send`.
    async fn deliver(&self, key: &Key) -> Delivery {
        let status = {
            let mut state = self.lock();
            let Some(status) = state.outbox.get(key).cloned() else {
                return Delivery::Unchanged;
            };
            if state.posted.get(key) == Some(&Posted::of(&status)) {
                state.outbox.remove(key);
                return Delivery::Unchanged;
            }
            if let Some(wait) = state.blocked(Instant::now()) {
                return Delivery::Queued {
                    reason: format!("{} asked to wait {wait:?} more", self.backend.name()),
                };
            }
            status
        };
        let result = self.retrying("status", || self.backend.send(&status)).await;
        let mut state = self.lock();
        match result {
            Ok(()) => {
                debug!(
                    backend = self.backend.name(),
                    sha = %status.sha,
                    context = %status.context,
                    state = %status.state,
                    "commit status posted"
                );
                state.remember(key.clone(), Posted::of(&status));
                if state.outbox.get(key) == Some(&status) {
                    state.outbox.remove(key);
                }
                Delivery::Posted
            }
            Err(e) if e.is_retryable() => {
                warn!(
                    backend = self.backend.name(),
                    sha = %status.sha,
                    context = %status.context,
                    state = %status.state,
                    error = %e,
                    "commit status not delivered; kept in the outbox"
                );
                Delivery::Queued {
                    reason: e.to_string(),
                }
            }
            Err(e) => {
                error!(
                    backend = self.backend.name(),
                    sha = %status.sha,
                    context = %status.context,
                    state = %status.state,
                    error = %e,
                    "commit status rejected"
                );
                if state.outbox.get(key) == Some(&status) {
                    state.outbox.remove(key);
                }
                Delivery::Rejected(e)
            }
        }
    }

    /// Runs `op` until it succeeds, fails for good, or the policy's attempts run out.
    /// A forge-requested wait longer than `max_wait` is not slept: the writer records
    /// it and sends nothing until then.
    ///
    /// `op` is a closure returning a future, not an async closure: the future of an
    /// `AsyncFnMut` borrows the closure, and the compiler then cannot prove the writer's
    /// futures `Send` for every lifetime (rust-lang/rust#102211), so they could not run
    /// in a spawned task.
    async fn retrying<T, F>(
        &self,
        what: &'static str,
        mut op: impl FnMut() -> F,
    ) -> Result<T, StatusError>
    where
        F: Future<Output = Result<T, StatusError>>,
    {
        let mut retry = 0u32;
        loop {
            let e = match op().await {
                Ok(value) => return Ok(value),
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => e,
            };
            retry += 1;
            let asked = e.retry_after();
            let exhausted = retry >= self.policy.attempts.max(1);
            if let Some(asked) = asked
                && (asked > self.policy.max_wait || exhausted)
            {
                self.lock().blocked_until = Some(Instant::now() + asked);
                return Err(e);
            }
            if exhausted {
                return Err(e);
            }
            let delay = self.policy.delay(retry, asked);
            debug!(
                backend = self.backend.name(),
                what,
                retry,
                delay = ?delay,
                error = %e,
                "retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, WriterState> {
        // Every update of the state is a single insert or remove: a panic elsewhere
        // cannot leave it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The marker, then the plan; cut (with a note saying so) to fit `limit` characters.
fn comment_body(markdown: &str, limit: usize) -> String {
    let body = format!("{PLAN_MARKER}\n{markdown}");
    if body.chars().count() <= limit {
        return body;
    }
    let tail = "\n\n… (truncated: the plan is longer than the forge allows in a comment)";
    let keep = limit.saturating_sub(tail.chars().count());
    let mut cut: String = body.chars().take(keep).collect();
    cut.push_str(tail);
    cut
}

/// A backend that keeps what it is given: statuses in order, and comments per pull
/// request. For tests of the code that posts; it can be told to fail like a forge
/// outage.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderState>>,
    description_limit: usize,
}

#[derive(Debug, Default)]
struct RecorderState {
    statuses: Vec<CommitStatus>,
    comments: BTreeMap<u64, Vec<(u64, String)>>,
    next_comment: u64,
    failing: bool,
}

impl Default for Recorder {
    fn default() -> Recorder {
        Recorder::new(usize::MAX)
    }
}

impl Recorder {
    /// A recorder that cuts descriptions to `description_limit` like a forge would.
    pub fn new(description_limit: usize) -> Recorder {
        Recorder {
            inner: Arc::new(Mutex::new(RecorderState::default())),
            description_limit,
        }
    }

    /// Every status received, in order.
    pub fn statuses(&self) -> Vec<CommitStatus> {
        self.lock().statuses.clone()
    }

    /// The comments on pull request `pr`: (id, body), oldest first.
    pub fn comments(&self, pr: u64) -> Vec<(u64, String)> {
        self.lock().comments.get(&pr).cloned().unwrap_or_default()
    }

    /// While `failing`, every status is answered like a forge outage (503).
    pub fn set_failing(&self, failing: bool) {
        self.lock().failing = failing;
    }

    fn lock(&self) -> MutexGuard<'_, RecorderState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        let mut state = self.lock();
        if state.failing {
            return Err(StatusError::Rejected {
                forge: "recorder",
                method: "POST",
                url: "recorder://statuses".to_string(),
                status: 503,
                message: "outage".to_string(),
                retryable: true,
                retry_after: None,
            });
        }
        state.statuses.push(status.clone());
        Ok(())
    }

    fn find_comment(&self, pr: u64) -> Option<(u64, String)> {
        self.lock()
            .comments
            .get(&pr)?
            .iter()
            .find(|(_, body)| body.contains(PLAN_MARKER))
            .cloned()
    }

    fn create_comment(&self, pr: u64, body: &str) -> u64 {
        let mut state = self.lock();
        state.next_comment += 1;
        let id = state.next_comment;
        state
            .comments
            .entry(pr)
            .or_default()
            .push((id, body.to_string()));
        id
    }

    fn update_comment(&self, pr: u64, id: u64, body: &str) {
        if let Some(comment) = self
            .lock()
            .comments
            .get_mut(&pr)
            .and_then(|cs| cs.iter_mut().find(|(cid, _)| *cid == id))
        {
            comment.1 = body.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn fast() -> RetryPolicy {
        RetryPolicy {
            attempts: 2,
            initial: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            max_wait: Duration::from_secs(1),
        }
    }

    fn status(state: StatusState, description: &str) -> CommitStatus {
        CommitStatus::new(SHA, "kubelet-gitops/gpu", state, description)
    }

    #[tokio::test]
    async fn identical_statuses_are_posted_once() {
        let recorder = Recorder::default();
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        let pending = status(
            StatusState::Pending,
            "rolling out: 1/3 nodes on kubelet-gpu-x",
        );
        assert!(matches!(writer.post(&pending).await, Delivery::Posted));
        assert!(matches!(writer.post(&pending).await, Delivery::Unchanged));
        let success = status(StatusState::Success, "3/3 nodes on kubelet-gpu-x");
        assert!(matches!(writer.post(&success).await, Delivery::Posted));
        // Another context on the same commit is its own status.
        let other = CommitStatus {
            context: "kubelet-gitops/cpu".to_string(),
            ..success.clone()
        };
        assert!(matches!(writer.post(&other).await, Delivery::Posted));
        assert_eq!(recorder.statuses(), vec![pending, success, other]);
    }

    #[tokio::test]
    async fn an_outage_keeps_only_the_latest_status_and_delivers_it_later() {
        let recorder = Recorder::default();
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        recorder.set_failing(true);
        let pending = status(StatusState::Pending, "rolling out: 1/3 nodes");
        let success = status(StatusState::Success, "3/3 nodes");
        assert!(matches!(
            writer.post(&pending).await,
            Delivery::Queued { .. }
        ));
        assert!(matches!(
            writer.post(&success).await,
            Delivery::Queued { .. }
        ));
        assert_eq!(writer.queued(), vec![success.clone()]);
        assert_eq!(
            writer.flush().await,
            FlushReport {
                delivered: 0,
                still_queued: 1,
                rejected: 0
            }
        );
        recorder.set_failing(false);
        assert_eq!(writer.flush().await.delivered, 1);
        assert!(writer.queued().is_empty());
        assert_eq!(recorder.statuses(), vec![success.clone()]);
        assert!(matches!(writer.post(&success).await, Delivery::Unchanged));
    }

    #[tokio::test]
    async fn descriptions_are_normalized_before_comparing() {
        let recorder = Recorder::new(10);
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        let long = status(StatusState::Pending, "rolling out:\n3/10 nodes");
        assert!(matches!(writer.post(&long).await, Delivery::Posted));
        assert_eq!(recorder.statuses()[0].description, "rolling o…");
        // A different tail that truncates to the same text is not a change.
        let same_prefix = status(StatusState::Pending, "rolling out: 4/10 nodes");
        assert!(matches!(
            writer.post(&same_prefix).await,
            Delivery::Unchanged
        ));
    }

    #[tokio::test]
    async fn comments_are_created_once_then_updated_in_place() {
        let recorder = Recorder::default();
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        let first = writer.comment(7, "## plan\n1 pool changes").await.unwrap();
        let again = writer.comment(7, "## plan\n1 pool changes").await.unwrap();
        let second = writer.comment(7, "## plan\n2 pools change").await.unwrap();
        let CommentOutcome::Created(id) = first else {
            panic!("{first:?}")
        };
        assert_eq!(again, CommentOutcome::Unchanged(id));
        assert_eq!(second, CommentOutcome::Updated(id));
        let comments = recorder.comments(7);
        assert_eq!(comments.len(), 1);
        assert_eq!(
            comments[0].1,
            format!("{PLAN_MARKER}\n## plan\n2 pools change")
        );
    }

    #[test]
    fn long_comments_are_cut_with_a_note() {
        let body = comment_body(&"x".repeat(500), 200);
        assert_eq!(body.chars().count(), 200);
        assert!(body.starts_with(PLAN_MARKER));
        assert!(body.ends_with("allows in a comment)"));
    }
}
