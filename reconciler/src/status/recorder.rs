//! [`Recorder`]: a backend that keeps what it is given, for tests of the code that posts.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::commit::{CommitStatus, PLAN_MARKER};
use super::error::StatusError;
use super::retry::FailureKind;

/// How a [`Recorder`] answers every request while told to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecorderFault {
    /// A forge outage: 503.
    Outage,
    /// A rate limit: 429, with `Retry-After` when `retry_after` is set.
    RateLimited { retry_after: Option<Duration> },
    /// A refused token: 401.
    Unauthorized,
}

/// A backend that keeps what it is given: statuses in order, and comments per pull
/// request. For tests of the code that posts; it can be told to fail like a forge
/// ([`RecorderFault`]), and counts every request it gets.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderState>>,
    pub(super) description_limit: usize,
    pub(super) batching: bool,
}

#[derive(Debug, Default)]
struct RecorderState {
    statuses: Vec<CommitStatus>,
    /// How many statuses each send carried.
    sends: Vec<usize>,
    comments: BTreeMap<u64, Vec<(u64, String)>>,
    next_comment: u64,
    fault: Option<RecorderFault>,
    /// Every request, failed ones included (a batch is one).
    requests: usize,
    /// The token it is configured with, for the writer's fingerprint.
    token: String,
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
            batching: false,
        }
    }

    /// The same recorder taking a round of statuses as one unit, like git notes does
    /// (the writer then retries the round as one).
    pub fn batching(mut self) -> Recorder {
        self.batching = true;
        self
    }

    /// Every status received, in order.
    pub fn statuses(&self) -> Vec<CommitStatus> {
        self.lock().statuses.clone()
    }

    /// How many statuses each send carried, in order (a failed send is not counted).
    pub fn sends(&self) -> Vec<usize> {
        self.lock().sends.clone()
    }

    /// The comments on pull request `pr`: (id, body), oldest first.
    pub fn comments(&self, pr: u64) -> Vec<(u64, String)> {
        self.lock().comments.get(&pr).cloned().unwrap_or_default()
    }

    /// While `failing`, every status is answered like a forge outage (503).
    pub fn set_failing(&self, failing: bool) {
        self.set_fault(failing.then_some(RecorderFault::Outage));
    }

    /// Every request is answered with `fault` until it is `None` again.
    pub fn set_fault(&self, fault: Option<RecorderFault>) {
        self.lock().fault = fault;
    }

    /// Every request made so far, failed ones included.
    pub fn requests(&self) -> usize {
        self.lock().requests
    }

    /// Plays a changed token file (the writer compares fingerprints after a 401).
    pub fn set_token(&self, token: &str) {
        self.lock().token = token.to_string();
    }

    pub(super) fn token_fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        self.lock().token.hash(&mut hasher);
        hasher.finish()
    }

    fn lock(&self) -> MutexGuard<'_, RecorderState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        let mut state = self.answer()?;
        state.statuses.push(status.clone());
        state.sends.push(1);
        Ok(())
    }

    pub(super) fn post_batch(&self, statuses: &[CommitStatus]) -> Vec<Result<(), StatusError>> {
        let mut state = match self.answer() {
            Ok(state) => state,
            Err(_) => {
                let fault = self.lock().fault;
                return statuses.iter().map(|_| Err(refusal(fault))).collect();
            }
        };
        state.statuses.extend_from_slice(statuses);
        state.sends.push(statuses.len());
        statuses.iter().map(|_| Ok(())).collect()
    }

    /// Counts a request and answers it: the state to record it in, or the fault.
    fn answer(&self) -> Result<MutexGuard<'_, RecorderState>, StatusError> {
        let mut state = self.lock();
        state.requests += 1;
        match state.fault {
            None => Ok(state),
            fault => Err(refusal(fault)),
        }
    }

    pub(super) fn find_comment(&self, pr: u64) -> Result<Option<(u64, String)>, StatusError> {
        let state = self.answer()?;
        Ok(state
            .comments
            .get(&pr)
            .and_then(|cs| cs.iter().find(|(_, body)| body.contains(PLAN_MARKER)))
            .cloned())
    }

    pub(super) fn create_comment(&self, pr: u64, body: &str) -> Result<u64, StatusError> {
        let mut state = self.answer()?;
        state.next_comment += 1;
        let id = state.next_comment;
        state
            .comments
            .entry(pr)
            .or_default()
            .push((id, body.to_string()));
        Ok(id)
    }

    pub(super) fn update_comment(&self, pr: u64, id: u64, body: &str) -> Result<(), StatusError> {
        let mut state = self.answer()?;
        if let Some(comment) = state
            .comments
            .get_mut(&pr)
            .and_then(|cs| cs.iter_mut().find(|(cid, _)| *cid == id))
        {
            comment.1 = body.to_string();
        }
        Ok(())
    }
}

/// What a recorder answers while told to fail, as a forge would.
fn refusal(fault: Option<RecorderFault>) -> StatusError {
    let (status, message, kind, retry_after) = match fault {
        Some(RecorderFault::RateLimited { retry_after }) => (
            429,
            "Too Many Requests",
            FailureKind::RateLimited,
            retry_after,
        ),
        Some(RecorderFault::Unauthorized) => {
            (401, "Bad credentials", FailureKind::Unauthorized, None)
        }
        Some(RecorderFault::Outage) | None => (503, "outage", FailureKind::Transient, None),
    };
    StatusError::Rejected {
        forge: "recorder",
        method: "POST",
        url: "recorder://statuses".to_string(),
        status,
        message: message.to_string(),
        kind,
        retry_after,
    }
}
