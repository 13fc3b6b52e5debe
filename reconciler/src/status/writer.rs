//! [`StatusWriter`]: posts only what changed, retries what failed, keeps the latest
//! wanted status per commit and context (and the latest plan comment per pull request)
//! until its forge takes it, and holds every request to a forge that rate limits us or
//! refuses the token.
//!
//! **One forge, one hold.** A rate limit or a refused token is the forge's answer to us,
//! not to one status: GitHub counts its limits per token and asks clients to send nothing
//! until the wait is over. So such an answer holds every request to the forge (statuses
//! of every commit and context, and comments) for the wait it names, or for the policy's
//! hold (a rate limit that names none: at least a minute, doubling; a refused token: five
//! minutes doubling to an hour, or until the token file changes). Meanwhile nothing piles
//! up: the outbox keeps only the newest wanted status per commit and context, and the
//! newest comment per pull request, and they go out once the hold is over (a hold of up to
//! `max_wait` is slept in place, a longer one is left to [`StatusWriter::flush`], which
//! the reporter runs when it ends).
//!
//! **Nothing waits behind one status.** A round is tried status by status; those that
//! meet a passing failure (a 5xx, no answer) are retried together after one backoff,
//! once the others of the round were sent, and no lock is held while sleeping: another
//! post (the reviewer's plan status) goes out meanwhile.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kubelet_gitops_core::message::{self, error_chain};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::backend::{Backend, CommentOutcome};
use super::bitbucket::PullRequest;
use super::commit::{CommitStatus, PLAN_MARKER, StatusState, truncate_description};
use super::error::StatusError;
use super::retry::{FailureKind, RetryPolicy};
use crate::metrics::{ForgeRefusal, Metrics};

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
    /// The forge is down, rate limits us or refused the token: it waits in the outbox for
    /// [`StatusWriter::flush`] or the next post. `reason` says why (already logged).
    Queued { reason: String },
    /// The forge refused it for good (unknown repository, invalid field); it was logged
    /// and dropped from the outbox. Posting it again tries again.
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

/// Why every request to the forge is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HoldReason {
    RateLimited,
    Unauthorized,
}

/// The forge's hold on every request, and the strikes that make the next one longer.
#[derive(Debug, Default)]
struct Gate {
    /// Nothing is sent to the forge before then.
    until: Option<Instant>,
    reason: Option<HoldReason>,
    /// Rate limits in a row (no request went through in between).
    rate_limits: u32,
    /// Refused tokens in a row.
    refusals: u32,
    /// The fingerprint of the token refused last: a token file that holds another one
    /// lifts the hold at once.
    refused_token: Option<u64>,
}

#[derive(Debug, Default)]
struct WriterState {
    /// The last status each (commit, context) got, as sent.
    posted: HashMap<Key, Posted>,
    /// Insertion order of `posted`, to forget the oldest.
    order: VecDeque<Key>,
    /// The latest wanted status per (commit, context) not delivered yet.
    outbox: BTreeMap<Key, CommitStatus>,
    /// The latest plan comment body per pull request not delivered yet.
    comments: BTreeMap<u64, String>,
    /// Pull requests whose comment a [`StatusWriter::comment`] call is delivering (a
    /// flush leaves them to it).
    commenting: BTreeSet<u64>,
    gate: Gate,
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
}

/// Whether an outbox entry goes out now.
enum Due {
    /// Send this.
    Send(CommitStatus),
    /// Gone or already posted: nothing to send.
    Done,
    /// The forge is held.
    Held(String),
}

/// Posts commit statuses and plan comments to one [`Backend`]. Share it behind an
/// `Arc`.
#[derive(Debug)]
pub struct StatusWriter {
    backend: Backend,
    policy: RetryPolicy,
    metrics: Option<Arc<Metrics>>,
    state: Mutex<WriterState>,
    /// Held while a request (or, for a backend that batches, a round) is sent: whoever
    /// holds it reads the newest wanted status from the outbox and sends it, so a status
    /// never overtakes a newer one of its commit and context. Never held while sleeping.
    send: tokio::sync::Mutex<()>,
}

impl StatusWriter {
    /// A writer with an empty memory and outbox.
    pub fn new(backend: Backend, policy: RetryPolicy) -> StatusWriter {
        StatusWriter {
            backend,
            policy,
            metrics: None,
            state: Mutex::new(WriterState::default()),
            send: tokio::sync::Mutex::new(()),
        }
    }

    /// The same writer counting the forge's refusals in `metrics`
    /// (`status_forge_refusals_total`).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> StatusWriter {
        self.metrics = Some(metrics);
        self
    }

    /// The backend statuses go to.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The statuses waiting in the outbox, by commit then context.
    pub fn queued(&self) -> Vec<CommitStatus> {
        self.lock().outbox.values().cloned().collect()
    }

    /// The pull requests whose plan comment waits in the outbox.
    pub fn queued_comments(&self) -> Vec<u64> {
        self.lock().comments.keys().copied().collect()
    }

    /// Until when every request to the forge is held (a rate limit, a refused token), if
    /// it is: a [`flush`](Self::flush) after then delivers what waits.
    pub fn held_until(&self) -> Option<std::time::Instant> {
        let state = self.lock();
        state
            .gate
            .until
            .filter(|until| *until > Instant::now())
            .map(Instant::into_std)
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
    /// Passing failures are retried per the [`RetryPolicy`]; if they persist, or the
    /// forge is held, the status waits in the outbox (replacing an older one for the same
    /// commit and context) and is delivered by a later `post` or [`flush`](Self::flush).
    /// Every failure is logged here.
    pub async fn post(&self, status: &CommitStatus) -> Delivery {
        self.post_all(std::slice::from_ref(status))
            .await
            .pop()
            // Invariant: post_all answers exactly one delivery per status it is given.
            .expect("post_all answers one delivery per status")
    }

    /// Posts a round of statuses, each as [`post`](Self::post) would (only on change,
    /// retried, kept in the outbox if the forge is down or held, logged), and answers one
    /// [`Delivery`] per status, in order. The round goes to the backend as one unit when
    /// it can: git notes writes it as one notes commit and fetches and pushes once; the
    /// forges get one request per status, and a status that meets a passing failure is
    /// retried after the others were sent. A status followed in `statuses` by another for
    /// the same commit and context is superseded by it: it is answered
    /// [`Delivery::Unchanged`] and not sent.
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

    /// Delivers everything in the outbox (git notes: as one round), the plan comments
    /// waiting, and, for git notes, pushes what a failed push left behind. Call it
    /// periodically, or run [`redeliver`](Self::redeliver).
    pub async fn flush(&self) -> FlushReport {
        let keys: Vec<Key> = self.lock().outbox.keys().cloned().collect();
        let mut report = FlushReport::default();
        for delivery in self.deliver_all(&keys).await {
            match delivery {
                Delivery::Posted | Delivery::Unchanged => report.delivered += 1,
                Delivery::Queued { .. } => report.still_queued += 1,
                Delivery::Rejected(_) => report.rejected += 1,
            }
        }
        let prs: Vec<u64> = {
            let state = self.lock();
            state
                .comments
                .keys()
                .filter(|pr| !state.commenting.contains(pr))
                .copied()
                .collect()
        };
        for pr in prs {
            if let Err(e) = self.deliver_comment(pr).await {
                error!(
                    backend = self.backend.name(),
                    pr,
                    error = %error_chain(&e),
                    "cannot post the queued plan comment; it is posted again when the head moves"
                );
            }
        }
        let _send = self.send.lock().await;
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

    /// The forge's open pull requests, for review on a forge that publishes no
    /// pull-request refs ([`Backend::lists_pull_requests`]; an empty list from any
    /// other). Asked once, not retried: the reviewer asks again at its next round.
    /// `Ok(None)` while the forge is held (a rate limit, a refused token); a rate limit or
    /// a refused token in the answer holds the forge as a status's would.
    pub async fn open_pull_requests(&self) -> Result<Option<Vec<PullRequest>>, StatusError> {
        let held = {
            let mut state = self.lock();
            self.held(&mut state).is_some()
        };
        if held {
            return Ok(None);
        }
        match self.backend.open_pull_requests().await {
            Ok(prs) => {
                self.note_success();
                Ok(Some(prs))
            }
            Err(e) => {
                self.note_failure(&e);
                Err(e)
            }
        }
    }

    /// Creates the pull-request comment carrying [`PLAN_MARKER`] with `markdown` below
    /// it, or updates the existing one in place (never a second one). Retried like a
    /// status; while the forge is held, or after passing failures, it waits in the outbox
    /// ([`CommentOutcome::Queued`], the newest body per pull request) and
    /// [`flush`](Self::flush) delivers it. An error is a refusal for good.
    pub async fn comment(&self, pr: u64, markdown: &str) -> Result<CommentOutcome, StatusError> {
        let body = comment_body(markdown, self.backend.comment_limit()?);
        {
            let mut state = self.lock();
            state.comments.insert(pr, body);
            state.commenting.insert(pr);
        }
        let outcome = self.deliver_comment(pr).await;
        self.lock().commenting.remove(&pr);
        let outcome = outcome?;
        info!(backend = self.backend.name(), pr, outcome = ?outcome, "plan comment");
        Ok(outcome)
    }

    /// Delivers the outbox entries for `keys`, one delivery per key, in order: as one
    /// batch if the backend takes batches, else one by one.
    async fn deliver_all(&self, keys: &[Key]) -> Vec<Delivery> {
        if self.backend.batches() {
            let _send = self.send.lock().await;
            return self.deliver_batch(keys).await;
        }
        self.deliver_each(keys).await
    }

    /// Sends the outbox entries for `keys` one request each, in order; those that meet a
    /// passing failure are tried again together after one backoff, those the forge holds
    /// once the hold is over (if that comes within `max_wait`), up to the policy's
    /// attempts; what is left waits in the outbox.
    async fn deliver_each(&self, keys: &[Key]) -> Vec<Delivery> {
        let mut deliveries: Vec<Option<Delivery>> = keys.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..keys.len()).collect();
        let mut tries = 0u32;
        loop {
            tries += 1;
            // Not delivered in this try: the last error (`None`: held before sending).
            let mut left: Vec<(usize, Result<StatusError, String>)> = Vec::new();
            for i in pending {
                let send = self.send.lock().await;
                let status = match self.due(&keys[i]) {
                    Due::Send(status) => status,
                    Due::Done => {
                        deliveries[i] = Some(Delivery::Unchanged);
                        continue;
                    }
                    Due::Held(reason) => {
                        left.push((i, Err(reason)));
                        continue;
                    }
                };
                let result = self.backend.send(&status).await;
                let delivered = result.is_ok();
                match result {
                    Ok(()) => deliveries[i] = Some(self.settle(&keys[i], &status, Ok(()))),
                    Err(e) if e.kind() == FailureKind::Permanent => {
                        deliveries[i] = Some(self.settle(&keys[i], &status, Err(e)));
                    }
                    Err(e) => {
                        self.note_failure(&e);
                        left.push((i, Ok(e)));
                    }
                }
                if delivered {
                    self.note_success();
                }
                drop(send);
            }
            if left.is_empty() {
                break;
            }
            let wait =
                self.wait_before_retry(tries, left.iter().filter_map(|(_, e)| e.as_ref().ok()));
            match wait {
                Some(wait) if tries < self.policy.attempts.max(1) => {
                    debug!(
                        backend = self.backend.name(),
                        statuses = left.len(),
                        retry = tries,
                        delay = ?wait,
                        "retrying"
                    );
                    tokio::time::sleep(wait).await;
                    pending = left.into_iter().map(|(i, _)| i).collect();
                }
                _ => {
                    for (i, last) in left {
                        deliveries[i] = Some(self.queue(&keys[i], last));
                    }
                    break;
                }
            }
        }
        deliveries
            .into_iter()
            .map(|d| d.unwrap_or(Delivery::Unchanged))
            .collect()
    }

    /// How long to wait before the next try of what the last one left (`errors`: what
    /// the forge answered to those that were sent): the backoff of a passing failure, or
    /// the rest of the forge's hold; `None` not to try again now: the forge asked for a
    /// wait longer than `max_wait`, or refused the token (a person must act; the first
    /// flush after the hold tries again).
    fn wait_before_retry<'e>(
        &self,
        tries: u32,
        errors: impl Iterator<Item = &'e StatusError>,
    ) -> Option<Duration> {
        let max_wait = self.policy.max_wait;
        let mut wait = Duration::ZERO;
        for e in errors {
            if e.kind() == FailureKind::Transient {
                let asked = e.retry_after();
                if asked.is_some_and(|asked| asked > max_wait) {
                    return None;
                }
                wait = wait.max(self.policy.delay(tries, asked));
            }
        }
        let mut state = self.lock();
        match self.held(&mut state) {
            Some((_, HoldReason::Unauthorized)) => None,
            Some((left, _)) if left > max_wait => None,
            Some((left, _)) => Some(wait.max(left)),
            None => Some(wait),
        }
    }

    /// Sends the still-wanted outbox entries for `keys` as one batch, retried as one
    /// (the statuses that failed for good drop out, the others are sent again).
    /// Callers hold `self.send` (throughout: the batch is sent again as it was read).
    async fn deliver_batch(&self, keys: &[Key]) -> Vec<Delivery> {
        let mut deliveries: Vec<Option<Delivery>> = keys.iter().map(|_| None).collect();
        let mut sending: Vec<(usize, CommitStatus)> = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            match self.due(key) {
                Due::Send(status) => sending.push((i, status)),
                Due::Done => deliveries[i] = Some(Delivery::Unchanged),
                Due::Held(reason) => deliveries[i] = Some(Delivery::Queued { reason }),
            }
        }
        if !sending.is_empty() {
            let statuses: Vec<CommitStatus> = sending.iter().map(|(_, s)| s.clone()).collect();
            let results = self.retrying_batch(&statuses).await;
            for ((i, status), result) in sending.into_iter().zip(results) {
                deliveries[i] = Some(match result {
                    Some(Err(e)) if e.kind() != FailureKind::Permanent => {
                        self.queue(&keys[i], Ok(e))
                    }
                    Some(result) => self.settle(&keys[i], &status, result),
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
    /// already posted, or held back by the forge.
    fn due(&self, key: &Key) -> Due {
        let mut state = self.lock();
        let Some(status) = state.outbox.get(key).cloned() else {
            return Due::Done;
        };
        if state.posted.get(key) == Some(&Posted::of(&status)) {
            state.outbox.remove(key);
            return Due::Done;
        }
        if let Some((left, reason)) = self.held(&mut state) {
            return Due::Held(hold_text(self.backend.name(), reason, left));
        }
        Due::Send(status)
    }

    /// How much longer, and why, every request to the forge is held; `None` when it is
    /// not. A refused token is no longer held once its file holds another one.
    fn held(&self, state: &mut WriterState) -> Option<(Duration, HoldReason)> {
        let gate = &mut state.gate;
        let left = gate.until?.checked_duration_since(Instant::now())?;
        let reason = gate.reason?;
        if left.is_zero() {
            return None;
        }
        if reason == HoldReason::Unauthorized
            && let Some(refused) = gate.refused_token
            && self
                .backend
                .token_fingerprint()
                .is_some_and(|now| now != refused)
        {
            info!(
                backend = self.backend.name(),
                "the token file changed since the forge refused the token: trying again now"
            );
            gate.until = None;
            gate.reason = None;
            // The new token starts afresh (a hold of the first length if refused too).
            gate.refusals = 0;
            return None;
        }
        Some((left, reason))
    }

    /// A request went through: the forge holds nothing and the strikes start again.
    fn note_success(&self) {
        let mut state = self.lock();
        let gate = &mut state.gate;
        if gate.refused_token.is_some() {
            info!(
                backend = self.backend.name(),
                "the forge accepts the token again"
            );
        }
        gate.rate_limits = 0;
        gate.refusals = 0;
        gate.refused_token = None;
    }

    /// Holds every request to the forge after a rate limit or a refused token in `e`
    /// (other failures hold nothing). Said once per hold: a rate limit at warning level,
    /// a refused token at error level naming the token file (later refusals of the same
    /// token only at debug level); each is counted in the metrics.
    fn note_failure(&self, e: &StatusError) {
        let kind = e.kind();
        let forge = self.backend.name();
        let mut state = self.lock();
        let was_held = self.held(&mut state).is_some();
        let gate = &mut state.gate;
        let (reason, strike, refusal) = match kind {
            FailureKind::RateLimited => {
                gate.rate_limits += 1;
                (
                    HoldReason::RateLimited,
                    gate.rate_limits,
                    ForgeRefusal::RateLimited,
                )
            }
            FailureKind::Unauthorized => {
                gate.refusals += 1;
                (
                    HoldReason::Unauthorized,
                    gate.refusals,
                    ForgeRefusal::Unauthorized,
                )
            }
            FailureKind::Transient | FailureKind::Permanent => return,
        };
        let Some(hold) = self.policy.hold(kind, strike, e.retry_after()) else {
            return;
        };
        let until = Instant::now() + hold;
        gate.until = Some(gate.until.map_or(until, |u| u.max(until)));
        gate.reason = Some(reason);
        if let Some(m) = &self.metrics {
            m.forge_refused(refusal);
        }
        let wait = humantime::format_duration(round_up(hold));
        match reason {
            HoldReason::RateLimited if !was_held => warn!(
                backend = forge,
                wait = %wait,
                strike,
                error = %e,
                "the forge rate limits us: nothing is sent to it until the wait is over; statuses and comments wait in the outbox"
            ),
            HoldReason::RateLimited => {
                debug!(backend = forge, wait = %wait, error = %e, "rate limited again")
            }
            HoldReason::Unauthorized => {
                let token = self.backend.token_fingerprint();
                let new_token = gate.refused_token != token || strike == 1;
                gate.refused_token = token;
                let file = self
                    .backend
                    .token_file()
                    .map(|f| f.0.display().to_string())
                    .unwrap_or_else(|| "(no token file)".to_string());
                if new_token {
                    error!(
                        backend = forge,
                        token_file = %file,
                        wait = %wait,
                        "the forge refused the token in {file}: {}; nothing is sent to it for {wait} or until that file changes; statuses and comments wait in the outbox",
                        refusal_text(e)
                    );
                } else {
                    debug!(backend = forge, token_file = %file, wait = %wait, "the token is still refused");
                }
            }
        }
    }

    /// Records and logs how sending `status` (the outbox entry for `key`) went: posted,
    /// or refused for good.
    fn settle(
        &self,
        key: &Key,
        status: &CommitStatus,
        result: Result<(), StatusError>,
    ) -> Delivery {
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
                state.remember(key.clone(), Posted::of(status));
                if state.outbox.get(key) == Some(status) {
                    state.outbox.remove(key);
                }
                Delivery::Posted
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

    /// The outbox entry for `key` stays for a later flush: `last` is the forge's last
    /// answer (logged here, unless it held the forge, which was said once), or why it was
    /// not sent.
    fn queue(&self, key: &Key, last: Result<StatusError, String>) -> Delivery {
        let reason = match last {
            Ok(e) => {
                if e.kind() == FailureKind::Transient {
                    warn!(
                        backend = self.backend.name(),
                        sha = %key.0,
                        context = %key.1,
                        error = %e,
                        "commit status not delivered; kept in the outbox"
                    );
                }
                e.to_string()
            }
            Err(held) => held,
        };
        debug!(backend = self.backend.name(), sha = %key.0, context = %key.1, %reason, "commit status queued");
        Delivery::Queued { reason }
    }

    /// Delivers the plan comment waiting for `pr`, if any: tried like a status, kept
    /// while the forge is held or fails passingly ([`CommentOutcome::Queued`]), dropped
    /// once delivered or refused for good (the error).
    async fn deliver_comment(&self, pr: u64) -> Result<CommentOutcome, StatusError> {
        let mut tries = 0u32;
        loop {
            tries += 1;
            let last = {
                let _send = self.send.lock().await;
                let body = {
                    let mut state = self.lock();
                    let Some(body) = state.comments.get(&pr).cloned() else {
                        return Ok(CommentOutcome::Queued);
                    };
                    if let Some((left, reason)) = self.held(&mut state) {
                        debug!(backend = self.backend.name(), pr, reason = %hold_text(self.backend.name(), reason, left), "plan comment queued");
                        None
                    } else {
                        Some(body)
                    }
                };
                match body {
                    None => None,
                    Some(body) => match self.backend.upsert_comment(pr, &body).await {
                        Ok(outcome) => {
                            self.note_success();
                            let mut state = self.lock();
                            if state.comments.get(&pr) == Some(&body) {
                                state.comments.remove(&pr);
                            }
                            return Ok(outcome);
                        }
                        Err(e) if e.kind() == FailureKind::Permanent => {
                            let mut state = self.lock();
                            if state.comments.get(&pr) == Some(&body) {
                                state.comments.remove(&pr);
                            }
                            return Err(e);
                        }
                        Err(e) => {
                            self.note_failure(&e);
                            Some(e)
                        }
                    },
                }
            };
            let wait = self.wait_before_retry(tries, last.iter());
            match wait {
                Some(wait) if tries < self.policy.attempts.max(1) => {
                    tokio::time::sleep(wait).await;
                }
                _ => {
                    if let Some(e) = last
                        && e.kind() == FailureKind::Transient
                    {
                        warn!(backend = self.backend.name(), pr, error = %e, "plan comment not delivered; kept in the outbox");
                    }
                    return Ok(CommentOutcome::Queued);
                }
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
        let mut tries = 0u32;
        loop {
            tries += 1;
            let batch: Vec<CommitStatus> = pending.iter().map(|&i| statuses[i].clone()).collect();
            let answers = self.backend.send_batch(&batch).await;
            let mut again = Vec::new();
            for (&i, answer) in pending.iter().zip(answers) {
                match &answer {
                    Ok(()) => self.note_success(),
                    Err(e) if e.kind() == FailureKind::Permanent => {}
                    Err(e) => {
                        self.note_failure(e);
                        again.push(i);
                    }
                }
                results[i] = Some(answer);
            }
            if again.is_empty() || tries >= self.policy.attempts.max(1) {
                return results;
            }
            let errors = again
                .iter()
                .filter_map(|&i| results[i].as_ref().and_then(|r| r.as_ref().err()));
            let Some(delay) = self.wait_before_retry(tries, errors) else {
                return results;
            };
            tokio::time::sleep(delay).await;
            pending = again;
        }
    }

    fn lock(&self) -> MutexGuard<'_, WriterState> {
        // Every update of the state is a single insert or remove: a panic elsewhere
        // cannot leave it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why nothing is sent: `GitHub rate limits us: 59s more`.
fn hold_text(forge: &str, reason: HoldReason, left: Duration) -> String {
    let left = humantime::format_duration(round_up(left));
    match reason {
        HoldReason::RateLimited => format!("{forge} rate limits us: {left} more"),
        HoldReason::Unauthorized => {
            format!("{forge} refused the token: {left} more, or until the token file changes")
        }
    }
}

/// The forge's answer to a refused token: `401 Bad credentials`.
fn refusal_text(e: &StatusError) -> String {
    match e {
        StatusError::Rejected {
            status, message, ..
        } => format!("{status} {message}"),
        other => other.to_string(),
    }
}

/// `d` rounded up to whole seconds (whole milliseconds under a second), for people.
fn round_up(d: Duration) -> Duration {
    if d < Duration::from_secs(1) {
        Duration::from_millis(d.as_millis().try_into().unwrap_or(u64::MAX))
    } else {
        Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
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
    use crate::status::{Recorder, RecorderFault};

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    fn fast() -> RetryPolicy {
        RetryPolicy {
            attempts: 2,
            initial: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            max_wait: Duration::from_secs(1),
            ..RetryPolicy::default()
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

    /// The log lines written while `f` runs (a subscriber of this thread only).
    fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        let value = tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        (value, text)
    }

    /// Runs `f` to completion on a runtime whose clock is paused: sleeps and holds of
    /// minutes pass at once, and the writer's clock (tokio's) follows.
    fn paused<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Three hours of a forge refusing the token, with a round of statuses every 30 s
    /// (what the reporter does) and a flush every 30 s: a request after 5, 10, 20, 40
    /// minutes, then every hour; one error line naming the token file; each refusal
    /// counted. Before, every status of every round was sent (720 requests).
    #[test]
    fn a_refused_token_holds_the_forge_and_is_said_once() {
        let (requests, log) = logged(|| {
            paused(async {
                let recorder = Recorder::default();
                recorder.set_fault(Some(RecorderFault::Unauthorized));
                let metrics = Arc::new(Metrics::new());
                let writer =
                    StatusWriter::new(Backend::Recorder(recorder.clone()), RetryPolicy::default())
                        .with_metrics(metrics.clone());
                let start = Instant::now();
                let mut round = 0;
                while start.elapsed() < Duration::from_secs(3 * 3600) {
                    round += 1;
                    let deliveries = writer
                        .post_all(&[
                            status(StatusState::Pending, &format!("rolling out: {round}")),
                            on("kubelet-gitops", StatusState::Pending, "1 pool"),
                        ])
                        .await;
                    assert!(
                        deliveries
                            .iter()
                            .all(|d| matches!(d, Delivery::Queued { .. } | Delivery::Unchanged)),
                        "{deliveries:?}"
                    );
                    writer.flush().await;
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                // Nothing piled up: the newest status per context waits.
                assert_eq!(writer.queued().len(), 2);
                let refused = recorder.requests();
                let text = metrics.encode();
                assert!(
                    text.contains(&format!(
                        "kubelet_gitops_status_forge_refusals_total{{reason=\"unauthorized\"}} {refused}"
                    )),
                    "{text}"
                );
                // A new token in the file is tried at once; once accepted, what waits goes.
                recorder.set_fault(None);
                recorder.set_token("rotated");
                let report = writer.flush().await;
                assert_eq!(report.delivered, 2, "{report:?}");
                assert!(writer.queued().is_empty());
                refused
            })
        });
        // t = 0, 5, 15, 35, 75, 135 minutes.
        assert_eq!(requests, 6, "{log}");
        let said = log.matches("the forge refused the token in").count();
        assert_eq!(said, 1, "{log}");
        assert!(
            log.contains("(no token file): 401 Bad credentials"),
            "{log}"
        );
        assert!(log.contains("the forge accepts the token again"), "{log}");
    }

    /// A rate limit that names no wait holds every request to the forge a minute, then
    /// two, then four; what was posted meanwhile waits (the newest per context) and goes
    /// out as soon as the forge takes requests again.
    #[test]
    fn a_rate_limit_without_a_wait_holds_the_forge_a_minute_then_longer() {
        paused(async {
            let recorder = Recorder::default();
            recorder.set_fault(Some(RecorderFault::RateLimited { retry_after: None }));
            let writer =
                StatusWriter::new(Backend::Recorder(recorder.clone()), RetryPolicy::default());
            let start = Instant::now();
            let mut seen = Vec::new();
            let mut last = 0;
            let mut i = 0;
            while start.elapsed() < Duration::from_secs(600) {
                i += 1;
                writer
                    .post(&on(
                        "kubelet-gitops/a",
                        StatusState::Pending,
                        &format!("{i}/9 nodes"),
                    ))
                    .await;
                writer.flush().await;
                if recorder.requests() > last {
                    last = recorder.requests();
                    seen.push(start.elapsed().as_secs());
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            assert_eq!(
                seen,
                [0, 60, 180, 420],
                "one request per hold, at least a minute apart"
            );
            // Another context posted during the hold waits too, without a request.
            let other = writer
                .post(&on("kubelet-gitops/b", StatusState::Success, "1/1 nodes"))
                .await;
            assert!(
                matches!(other, Delivery::Queued { ref reason } if reason.contains("rate limits us")),
                "{other:?}"
            );
            assert_eq!(recorder.requests(), 4);
            recorder.set_fault(None);
            let until = writer.held_until().expect("held");
            tokio::time::sleep_until(until.into()).await;
            assert_eq!(writer.flush().await.delivered, 2);
            let sent: Vec<String> = recorder
                .statuses()
                .iter()
                .map(|s| s.description.clone())
                .collect();
            assert_eq!(sent, [format!("{i}/9 nodes"), "1/1 nodes".to_string()]);
        });
    }

    /// A wait the forge names (Retry-After) is short: every post sleeps it in place, and
    /// nothing is sent before it is over.
    #[test]
    fn a_short_named_wait_is_slept_in_place_by_every_post() {
        paused(async {
            let recorder = Recorder::default();
            recorder.set_fault(Some(RecorderFault::RateLimited {
                retry_after: Some(Duration::from_secs(7)),
            }));
            let writer = Arc::new(StatusWriter::new(
                Backend::Recorder(recorder.clone()),
                RetryPolicy::default(),
            ));
            let start = Instant::now();
            let first = tokio::spawn({
                let writer = writer.clone();
                async move {
                    writer
                        .post(&status(StatusState::Success, "3/3 nodes"))
                        .await
                }
            });
            while recorder.requests() == 0 {
                tokio::task::yield_now().await;
            }
            recorder.set_fault(None);
            let other = writer
                .post(&on("kubelet-gitops", StatusState::Success, "1 pool"))
                .await;
            assert!(matches!(other, Delivery::Posted), "{other:?}");
            assert!(start.elapsed() >= Duration::from_secs(7));
            assert!(matches!(first.await.unwrap(), Delivery::Posted));
            assert_eq!(
                recorder.requests(),
                3,
                "the 429, then one each after the wait"
            );
        });
    }

    /// A status in its backoff after a passing failure holds back no other: the writer
    /// sleeps without its send lock, and another post goes out at once.
    #[test]
    fn a_status_in_backoff_holds_back_no_other() {
        paused(async {
            let recorder = Recorder::default();
            recorder.set_failing(true);
            let policy = RetryPolicy {
                initial: Duration::from_secs(20),
                max_delay: Duration::from_secs(20),
                ..RetryPolicy::default()
            };
            let writer = Arc::new(StatusWriter::new(
                Backend::Recorder(recorder.clone()),
                policy,
            ));
            let first = tokio::spawn({
                let writer = writer.clone();
                async move {
                    writer
                        .post(&status(StatusState::Success, "3/3 nodes"))
                        .await
                }
            });
            while recorder.requests() == 0 {
                tokio::task::yield_now().await;
            }
            recorder.set_failing(false);
            let start = Instant::now();
            let other = writer
                .post(&on("kubelet-gitops", StatusState::Success, "1 pool"))
                .await;
            assert!(matches!(other, Delivery::Posted), "{other:?}");
            assert_eq!(
                start.elapsed(),
                Duration::ZERO,
                "not behind the other's backoff"
            );
            assert_eq!(recorder.statuses().len(), 1);
            let first = first.await.unwrap();
            assert!(matches!(first, Delivery::Posted), "{first:?}");
            assert!(
                start.elapsed() >= Duration::from_secs(10),
                "its own backoff"
            );
            let sent: Vec<String> = recorder
                .statuses()
                .iter()
                .map(|s| s.context.clone())
                .collect();
            assert_eq!(sent, ["kubelet-gitops", "kubelet-gitops/gpu"]);
        });
    }

    #[test]
    fn comments_wait_while_the_forge_is_held_and_go_out_with_a_flush() {
        paused(async {
            let recorder = Recorder::default();
            recorder.set_fault(Some(RecorderFault::RateLimited { retry_after: None }));
            let writer =
                StatusWriter::new(Backend::Recorder(recorder.clone()), RetryPolicy::default());
            assert_eq!(
                writer.comment(7, "plan 1").await.unwrap(),
                CommentOutcome::Queued
            );
            assert_eq!(
                writer.comment(7, "plan 2").await.unwrap(),
                CommentOutcome::Queued
            );
            assert_eq!(recorder.requests(), 1, "held after the first refusal");
            assert_eq!(writer.queued_comments(), [7]);
            recorder.set_fault(None);
            tokio::time::sleep(Duration::from_secs(61)).await;
            writer.flush().await;
            assert!(writer.queued_comments().is_empty());
            let comments = recorder.comments(7);
            assert_eq!(comments.len(), 1);
            assert_eq!(comments[0].1, format!("{PLAN_MARKER}\nplan 2"));
        });
    }

    #[test]
    fn long_comments_are_cut_with_a_note() {
        let body = comment_body(&"x".repeat(500), 200);
        assert_eq!(body.chars().count(), 200);
        assert!(body.starts_with(PLAN_MARKER));
        assert!(body.ends_with("allows in a comment)"));
    }
}
