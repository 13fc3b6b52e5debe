//! [`Recorder`]: a backend that keeps what it is given, for tests of the code that posts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::commit::{CommitStatus, PLAN_MARKER};
use super::error::StatusError;

/// A backend that keeps what it is given: statuses in order, and comments per pull
/// request. For tests of the code that posts; it can be told to fail like a forge
/// outage.
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
        self.lock().failing = failing;
    }

    fn lock(&self) -> MutexGuard<'_, RecorderState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        let mut state = self.lock();
        if state.failing {
            return Err(Recorder::outage());
        }
        state.statuses.push(status.clone());
        state.sends.push(1);
        Ok(())
    }

    pub(super) fn post_batch(&self, statuses: &[CommitStatus]) -> Vec<Result<(), StatusError>> {
        let mut state = self.lock();
        if state.failing {
            return statuses.iter().map(|_| Err(Recorder::outage())).collect();
        }
        state.statuses.extend_from_slice(statuses);
        state.sends.push(statuses.len());
        statuses.iter().map(|_| Ok(())).collect()
    }

    /// What a failing recorder answers: a forge outage (503).
    fn outage() -> StatusError {
        StatusError::Rejected {
            forge: "recorder",
            method: "POST",
            url: "recorder://statuses".to_string(),
            status: 503,
            message: "outage".to_string(),
            retryable: true,
            retry_after: None,
        }
    }

    pub(super) fn find_comment(&self, pr: u64) -> Option<(u64, String)> {
        self.lock()
            .comments
            .get(&pr)?
            .iter()
            .find(|(_, body)| body.contains(PLAN_MARKER))
            .cloned()
    }

    pub(super) fn create_comment(&self, pr: u64, body: &str) -> u64 {
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

    pub(super) fn update_comment(&self, pr: u64, id: u64, body: &str) {
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
