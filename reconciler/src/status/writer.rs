//! [`StatusWriter`]: posts only what changed, retries what failed, and keeps the latest
//! wanted status per commit and context until its forge takes it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kubelet_gitops_core::message;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::backend::{Backend, CommentOutcome};
use super::commit::{CommitStatus, PLAN_MARKER, StatusState, truncate_description};
use super::error::StatusError;
use super::retry::RetryPolicy;

/// How many (commit, context) pairs the writer remembers as posted. Older ones are
/// forgotten first; forgetting one costs at most one repeated post.
const REMEMBERED: usize = 10_000;

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

    /// The status as it will be sent: description on one line (control characters of a
    /// path or a node's message shown escaped), cut to the backend's limit.
    pub fn normalize(&self, status: &CommitStatus) -> CommitStatus {
        let one_line = message::escape_line(&status.description);
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
        self.post_all(std::slice::from_ref(status))
            .await
            .pop()
            // Invariant: post_all answers exactly one delivery per status it is given.
            .expect("post_all answers one delivery per status")
    }

    /// Posts a round of statuses, each as [`post`](Self::post) would (only on change,
    /// retried, kept in the outbox if the forge is down, logged), and answers one
    /// [`Delivery`] per status, in order. The round goes to the backend as one unit when
    /// it can: git notes writes it as one notes commit and fetches and pushes once; the
    /// forges get one request per status, and a long rate limit met on one holds back the
    /// rest (queued). A status followed in `statuses` by another for the same commit and
    /// context is superseded by it: it is answered [`Delivery::Unchanged`] and not sent.
    pub async fn post_all(&self, statuses: &[CommitStatus]) -> Vec<Delivery> {
        let mut deliveries: Vec<Option<Delivery>> = statuses.iter().map(|_| None).collect();
        // The keys to deliver and the position of the status each one answers.
        let mut keys: Vec<Key> = Vec::new();
        let mut slots: Vec<usize> = Vec::new();
        {
            let normalized: Vec<CommitStatus> =
                statuses.iter().map(|s| self.normalize(s)).collect();
            let mut last: HashMap<Key, usize> = HashMap::new();
            for (i, status) in normalized.iter().enumerate() {
                last.insert((status.sha.clone(), status.context.clone()), i);
            }
            let mut state = self.lock();
            for (i, status) in normalized.into_iter().enumerate() {
                let key = (status.sha.clone(), status.context.clone());
                let superseded = last.get(&key) != Some(&i);
                if superseded
                    || (!state.outbox.contains_key(&key)
                        && state.posted.get(&key) == Some(&Posted::of(&status)))
                {
                    deliveries[i] = Some(Delivery::Unchanged);
                    continue;
                }
                state.outbox.insert(key.clone(), status);
                keys.push(key);
                slots.push(i);
            }
        }
        if !keys.is_empty() {
            let _send = self.send.lock().await;
            for (slot, delivery) in slots.into_iter().zip(self.deliver_all(&keys).await) {
                deliveries[slot] = Some(delivery);
            }
        }
        deliveries
            .into_iter()
            // Every slot was answered above: deliver_all answers one delivery per key.
            .map(|d| d.unwrap_or(Delivery::Unchanged))
            .collect()
    }

    /// Delivers everything in the outbox (git notes: as one round) and, for git notes,
    /// pushes what a failed push left behind. Call it periodically, or run
    /// [`redeliver`](Self::redeliver).
    pub async fn flush(&self) -> FlushReport {
        let _send = self.send.lock().await;
        let keys: Vec<Key> = self.lock().outbox.keys().cloned().collect();
        let mut report = FlushReport::default();
        for delivery in self.deliver_all(&keys).await {
            match delivery {
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

    /// Delivers the outbox entries for `keys`, one delivery per key, in order: as one
    /// batch if the backend takes batches, else one by one. Callers hold `self.send`.
    async fn deliver_all(&self, keys: &[Key]) -> Vec<Delivery> {
        if self.backend.batches() {
            return self.deliver_batch(keys).await;
        }
        let mut deliveries = Vec::with_capacity(keys.len());
        for key in keys {
            deliveries.push(self.deliver(key).await);
        }
        deliveries
    }

    /// Sends the outbox entry for `key`, if still wanted. Callers hold `self.send`.
    async fn deliver(&self, key: &Key) -> Delivery {
        let status = match self.due(&mut self.lock(), key) {
            Ok(status) => status,
            Err(delivery) => return delivery,
        };
        let result = self.retrying("status", || self.backend.send(&status)).await;
        self.settle(&mut self.lock(), key, &status, result)
    }

    /// Sends the still-wanted outbox entries for `keys` as one batch, retried as one
    /// (the statuses that failed for good drop out, the others are sent again).
    /// Callers hold `self.send`.
    async fn deliver_batch(&self, keys: &[Key]) -> Vec<Delivery> {
        let mut deliveries: Vec<Option<Delivery>> = keys.iter().map(|_| None).collect();
        let mut sending: Vec<(usize, CommitStatus)> = Vec::new();
        {
            let mut state = self.lock();
            for (i, key) in keys.iter().enumerate() {
                match self.due(&mut state, key) {
                    Ok(status) => sending.push((i, status)),
                    Err(delivery) => deliveries[i] = Some(delivery),
                }
            }
        }
        if !sending.is_empty() {
            let statuses: Vec<CommitStatus> = sending.iter().map(|(_, s)| s.clone()).collect();
            let results = self.retrying_batch(&statuses).await;
            let mut state = self.lock();
            for ((i, status), result) in sending.into_iter().zip(results) {
                deliveries[i] = Some(match result {
                    Some(result) => self.settle(&mut state, &keys[i], &status, result),
                    None => {
                        // Not expected: a backend answers every status of a batch. The
                        // status stays in the outbox for the next flush.
                        warn!(
                            backend = self.backend.name(),
                            sha = %status.sha,
                            context = %status.context,
                            "the status backend gave no answer for a status; kept in the outbox"
                        );
                        Delivery::Queued {
                            reason: format!("{} gave no answer", self.backend.name()),
                        }
                    }
                });
            }
        }
        deliveries
            .into_iter()
            .map(|d| d.unwrap_or(Delivery::Unchanged))
            .collect()
    }

    /// The outbox entry for `key` if it is to be sent now, or what became of it: gone or
    /// already posted (`Unchanged`), or held back by a rate limit (`Queued`).
    fn due(&self, state: &mut WriterState, key: &Key) -> Result<CommitStatus, Delivery> {
        let Some(status) = state.outbox.get(key).cloned() else {
            return Err(Delivery::Unchanged);
        };
        if state.posted.get(key) == Some(&Posted::of(&status)) {
            state.outbox.remove(key);
            return Err(Delivery::Unchanged);
        }
        if let Some(wait) = state.blocked(Instant::now()) {
            return Err(Delivery::Queued {
                reason: format!("{} asked to wait {wait:?} more", self.backend.name()),
            });
        }
        Ok(status)
    }

    /// Records and logs how sending `status` (the outbox entry for `key`) went.
    fn settle(
        &self,
        state: &mut WriterState,
        key: &Key,
        status: &CommitStatus,
        result: Result<(), StatusError>,
    ) -> Delivery {
        match result {
            Ok(()) => {
                debug!(
                    backend = self.backend.name(),
                    sha = %status.sha,
                    context = %status.context,
                    state = %status.state,
                    "commit status posted"
                );
                state.remember(key.clone(), Posted::of(status));
                if state.outbox.get(key) == Some(status) {
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
                if state.outbox.get(key) == Some(status) {
                    state.outbox.remove(key);
                }
                Delivery::Rejected(e)
            }
        }
    }

    /// Sends `statuses` as one batch until each is delivered or failed for good, or the
    /// policy's attempts run out; every retry sends again only those that failed and may
    /// succeed. One answer per status (`None`: the backend gave none).
    async fn retrying_batch(
        &self,
        statuses: &[CommitStatus],
    ) -> Vec<Option<Result<(), StatusError>>> {
        let mut results: Vec<Option<Result<(), StatusError>>> =
            statuses.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..statuses.len()).collect();
        let mut retry = 0u32;
        loop {
            let batch: Vec<CommitStatus> = pending.iter().map(|&i| statuses[i].clone()).collect();
            let answers = self.backend.send_batch(&batch).await;
            let mut again = Vec::new();
            for (&i, answer) in pending.iter().zip(answers) {
                if matches!(&answer, Err(e) if e.is_retryable()) {
                    again.push(i);
                }
                results[i] = Some(answer);
            }
            // The longest wait asked for speaks for the batch.
            let Some(worst) = again
                .iter()
                .filter_map(|&i| results[i].as_ref().and_then(|r| r.as_ref().err()))
                .max_by_key(|e| e.retry_after())
            else {
                return results;
            };
            retry += 1;
            let Some(delay) = self.next_try("statuses", retry, worst) else {
                return results;
            };
            tokio::time::sleep(delay).await;
            pending = again;
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
            match self.next_try(what, retry, &e) {
                Some(delay) => tokio::time::sleep(delay).await,
                None => return Err(e),
            }
        }
    }

    /// After the `retry`th retryable failure in a row, `e`: how long to wait before the
    /// next try, or `None` to stop (the policy's attempts are spent, or the forge asked
    /// for a wait longer than `max_wait`: it is recorded, and nothing is sent until then).
    fn next_try(&self, what: &'static str, retry: u32, e: &StatusError) -> Option<Duration> {
        let asked = e.retry_after();
        let exhausted = retry >= self.policy.attempts.max(1);
        if let Some(asked) = asked
            && (asked > self.policy.max_wait || exhausted)
        {
            self.lock().blocked_until = Some(Instant::now() + asked);
            return None;
        }
        if exhausted {
            return None;
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
        Some(delay)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Recorder;

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
    async fn a_node_message_with_newlines_and_terminal_escapes_is_sent_escaped() {
        let recorder = Recorder::new(140);
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        let failed = status(
            StatusState::Failure,
            "node-1 rolled back: boom\nkubelet-gitops: success: all good\r\u{1b}[32mok\u{1b}[0m",
        );
        writer.post(&failed).await;
        assert_eq!(
            recorder.statuses()[0].description,
            "node-1 rolled back: boom\\nkubelet-gitops: success: all good\\r\\u{1b}[32mok\\u{1b}[0m"
        );
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

    fn on(context: &str, state: StatusState, description: &str) -> CommitStatus {
        CommitStatus::new(SHA, context, state, description)
    }

    #[tokio::test]
    async fn a_round_is_one_send_of_what_changed() {
        let recorder = Recorder::default().batching();
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        let gpu = on("kubelet-gitops/gpu", StatusState::Pending, "1/3 nodes");
        let cpu = on("kubelet-gitops/cpu", StatusState::Success, "2/2 nodes");
        let summary = on("kubelet-gitops", StatusState::Pending, "2 pools");
        let round = [gpu.clone(), cpu.clone(), summary.clone()];
        let first = writer.post_all(&round).await;
        assert!(
            first.iter().all(|d| matches!(d, Delivery::Posted)),
            "{first:?}"
        );
        assert_eq!(recorder.sends(), [3]);
        // Only what changed goes out, still as one send.
        let gpu_done = on("kubelet-gitops/gpu", StatusState::Success, "3/3 nodes");
        let second = writer
            .post_all(&[gpu_done.clone(), cpu.clone(), summary.clone()])
            .await;
        assert!(
            matches!(
                second.as_slice(),
                [Delivery::Posted, Delivery::Unchanged, Delivery::Unchanged]
            ),
            "{second:?}"
        );
        assert_eq!(recorder.sends(), [3, 1]);
        // Nothing changed: nothing is sent at all.
        let third = writer.post_all(&[gpu_done.clone(), cpu.clone()]).await;
        assert!(third.iter().all(|d| matches!(d, Delivery::Unchanged)));
        assert_eq!(recorder.sends(), [3, 1]);
        // A later status for the same commit and context supersedes an earlier one.
        let summary_done = on("kubelet-gitops", StatusState::Success, "2 pools done");
        let fourth = writer
            .post_all(&[summary.clone(), summary_done.clone()])
            .await;
        assert!(
            matches!(fourth.as_slice(), [Delivery::Unchanged, Delivery::Posted]),
            "{fourth:?}"
        );
        assert_eq!(
            recorder.statuses(),
            [gpu, cpu, summary, gpu_done, summary_done]
        );
    }

    #[tokio::test]
    async fn a_failed_round_waits_in_the_outbox_and_is_delivered_as_one() {
        let recorder = Recorder::default().batching();
        let writer = StatusWriter::new(Backend::Recorder(recorder.clone()), fast());
        recorder.set_failing(true);
        let gpu = on("kubelet-gitops/gpu", StatusState::Pending, "1/3 nodes");
        let summary = on("kubelet-gitops", StatusState::Pending, "1 pool");
        let queued = writer.post_all(&[gpu.clone(), summary.clone()]).await;
        assert!(
            queued
                .iter()
                .all(|d| matches!(d, Delivery::Queued { reason } if reason.contains("outage"))),
            "{queued:?}"
        );
        // The next round replaces what it changes and leaves the rest waiting.
        let gpu_done = on("kubelet-gitops/gpu", StatusState::Success, "3/3 nodes");
        writer.post_all(std::slice::from_ref(&gpu_done)).await;
        assert_eq!(writer.queued(), [summary.clone(), gpu_done.clone()]);
        assert!(recorder.sends().is_empty());
        recorder.set_failing(false);
        assert_eq!(
            writer.flush().await,
            FlushReport {
                delivered: 2,
                still_queued: 0,
                rejected: 0
            }
        );
        assert_eq!(recorder.sends(), [2]);
        assert_eq!(recorder.statuses(), [summary, gpu_done]);
        assert!(writer.queued().is_empty());
    }

    #[test]
    fn long_comments_are_cut_with_a_note() {
        let body = comment_body(&"x".repeat(500), 200);
        assert_eq!(body.chars().count(), 200);
        assert!(body.starts_with(PLAN_MARKER));
        assert!(body.ends_with("allows in a comment)"));
    }
}
