//! Commit statuses as git notes in the config repository itself: the embedded default,
//! which needs no forge and no token beyond the one used to fetch.
//!
//! Each commit gets one note on [`NOTES_REF`] (`refs/notes/kubelet-gitops`) holding one
//! line per context:
//!
//! ```text
//! kubelet-gitops/gpu: success: 10/10 nodes on kubelet-gpu-9mbkccg2cc
//! kubelet-gitops: pending: 2 pools: 1 in progress, 1 done
//! ```
//!
//! A new status for a context replaces that context's line in place; other lines (other
//! contexts, or anything a person wrote) are kept. `git log --notes=kubelet-gitops` shows
//! them under each commit, and `git fetch origin refs/notes/kubelet-gitops:refs/notes/kubelet-gitops`
//! brings them to a clone.
//!
//! # Pushing
//!
//! With a [`NotesRemote`], the notes are pushed to the same ref on the remote once per
//! round: [`StatusWriter::post_all`](super::StatusWriter::post_all) hands the backend
//! every status of a round at once, they are written as one notes commit, and then the
//! remote's notes are fetched once and ours pushed once, whatever the number of pools.
//! Before pushing, if the remote's notes moved on without us (another replica, a restart
//! with a fresh cache), our notes ref is reset to the remote's and the lines not pushed
//! yet are written again on top (one commit), so the push is a fast-forward and no one's
//! notes are lost. A push refused because the remote moved between our fetch and our
//! push (a writer in between) is taken as that: fetch, write again, push again, up to
//! [`PUSH_CONFLICT_ATTEMPTS`] times. A push that fails otherwise (the remote is
//! read-only, unreachable, or rejects the credentials) is logged and tried again with
//! backoff on the next round or [`StatusWriter::flush`](super::StatusWriter::flush); the
//! notes are in the local repository meanwhile. Unpushed lines are kept in memory only:
//! after a restart the controller posts every status again.

mod note;
mod remote;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use git2::{ErrorClass, ErrorCode, FetchOptions, Oid, PushOptions, Repository, Signature};
use tracing::{debug, info, warn};

use super::commit::{CommitStatus, is_commit_id};
use super::error::StatusError;

pub use note::{NOTES_REF, replace_line, status_line};
pub use remote::{CallbacksFactory, NotesRemote};

use note::{Line, read_note, write_lines};
use remote::redact_url;

/// Where the remote's notes are fetched to before a push (not under `refs/notes/`, so
/// `git log --notes` does not show it).
pub const REMOTE_NOTES_REF: &str = "refs/kubelet-gitops/remote-notes";
/// Descriptions longer than this are cut (a note line should stay a line).
pub const DESCRIPTION_LIMIT: usize = 1024;
/// How many times one push goes fetch, write again, push when the remote's notes move
/// between our fetch and our push; after that the push waits for its backoff.
pub const PUSH_CONFLICT_ATTEMPTS: u32 = 3;

/// Where the notes are written and pushed.
#[derive(Debug, Clone)]
pub struct NotesConfig {
    /// The config repository: the reconciler's bare cache, or any local clone.
    pub repo_path: PathBuf,
    /// Where to push the notes; `None` keeps them local.
    pub remote: Option<NotesRemote>,
    /// Author and committer of the notes commits.
    pub author_name: String,
    pub author_email: String,
    /// Backoff after a failed push: the first wait, doubling up to `push_retry_max`.
    pub push_retry_initial: Duration,
    pub push_retry_max: Duration,
}

impl NotesConfig {
    /// Local notes in `repo_path`, authored by `kubelet-gitops`.
    pub fn new(repo_path: impl Into<PathBuf>) -> NotesConfig {
        NotesConfig {
            repo_path: repo_path.into(),
            remote: None,
            author_name: "kubelet-gitops".to_string(),
            author_email: "kubelet-gitops@localhost".to_string(),
            push_retry_initial: Duration::from_secs(5),
            push_retry_max: Duration::from_secs(600),
        }
    }

    /// The same, pushed to `remote`.
    pub fn with_remote(mut self, remote: NotesRemote) -> NotesConfig {
        self.remote = Some(remote);
        self
    }
}

/// The git-notes backend. Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct Notes {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: NotesConfig,
    state: Mutex<PushState>,
}

#[derive(Debug, Default)]
struct PushState {
    /// Lines written locally and not pushed yet, by (commit, context): the order they
    /// were first written in (to write them again in that order), and the line.
    unpushed: BTreeMap<(String, String), (u64, Line)>,
    /// The order number of the next line first written.
    next_line: u64,
    failures: u32,
    next_push: Option<Instant>,
}

impl Notes {
    /// Checks that `repo_path` is a git repository.
    pub fn new(config: NotesConfig) -> Result<Notes, StatusError> {
        Repository::open(&config.repo_path).map_err(|source| StatusError::Notes {
            repo: config.repo_path.clone(),
            what: "opening the repository".to_string(),
            source,
        })?;
        Ok(Notes {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(PushState::default()),
            }),
        })
    }

    /// The repository the notes are written to.
    pub fn repo_path(&self) -> &Path {
        &self.inner.config.repo_path
    }

    /// How many lines are written locally but not pushed yet.
    pub fn unpushed(&self) -> usize {
        self.inner.lock().unpushed.len()
    }

    /// The note on commit `sha`, if any.
    pub async fn read(&self, sha: &str) -> Result<Option<String>, StatusError> {
        let inner = Arc::clone(&self.inner);
        let sha = sha.to_string();
        self.blocking(move || {
            let repo = inner.open()?;
            let oid = inner.oid(&sha)?;
            read_note(&repo, oid).map_err(|source| inner.error("reading a note", source))
        })
        .await
    }

    /// Writes `status` as its context's line in the commit's note, then pushes if a
    /// remote is configured and a push is due. A failed push is logged, not returned.
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        self.post_statuses(std::slice::from_ref(status))
            .await
            .pop()
            // Invariant: post_statuses answers one result per status it is given.
            .expect("post_statuses answers one result per status")
    }

    /// Writes every status of a round as its context's line in its commit's note, all in
    /// one notes commit, then pushes once if a remote is configured and a push is due
    /// (one fetch and one push for the whole round). Answers one result per status, in
    /// order: a status that is not one (a bad commit id) fails alone; a write that fails
    /// fails every other status of the round with the same error. A failed push is
    /// logged, not returned.
    pub(crate) async fn post_statuses(
        &self,
        statuses: &[CommitStatus],
    ) -> Vec<Result<(), StatusError>> {
        let mut results: Vec<Result<(), StatusError>> = Vec::with_capacity(statuses.len());
        let mut lines = Vec::with_capacity(statuses.len());
        for status in statuses {
            match self
                .inner
                .oid(&status.sha)
                .map(|oid| Line::new(oid, status))
            {
                Ok(line) => {
                    lines.push(line);
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if lines.is_empty() {
            return results;
        }
        let inner = Arc::clone(&self.inner);
        let failure = match tokio::task::spawn_blocking(move || inner.write_round(&lines)).await {
            Ok(Ok(())) => return results,
            Ok(Err(failure)) => failure,
            Err(e) => RoundFailure::Task(e.to_string()),
        };
        for result in results.iter_mut().filter(|r| r.is_ok()) {
            *result = Err(failure.error(&self.inner.config.repo_path));
        }
        results
    }

    /// Pushes lines a failed push left behind, if a push is due.
    pub(crate) async fn flush(&self) -> Result<(), StatusError> {
        let inner = Arc::clone(&self.inner);
        self.blocking(move || {
            let mut state = inner.lock();
            if !state.unpushed.is_empty() {
                let repo = inner.open()?;
                inner.push_if_due(&repo, &mut state);
            }
            Ok(())
        })
        .await
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, StatusError> + Send + 'static,
    ) -> Result<T, StatusError> {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| StatusError::NotesTask {
                repo: self.inner.config.repo_path.clone(),
                reason: e.to_string(),
            })?
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, PushState> {
        // The state stays consistent across a panic (plain inserts and counters).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, what: &str, source: git2::Error) -> StatusError {
        StatusError::Notes {
            repo: self.config.repo_path.clone(),
            what: what.to_string(),
            source,
        }
    }

    fn open(&self) -> Result<Repository, StatusError> {
        Repository::open(&self.config.repo_path)
            .map_err(|source| self.error("opening the repository", source))
    }

    fn oid(&self, sha: &str) -> Result<Oid, StatusError> {
        if !is_commit_id(sha) {
            return Err(StatusError::Config {
                forge: "git notes",
                reason: format!("{sha:?} is not a full commit id"),
            });
        }
        Oid::from_str(sha).map_err(|source| self.error("parsing a commit id", source))
    }

    fn signature(&self) -> Result<Signature<'static>, StatusError> {
        Signature::now(&self.config.author_name, &self.config.author_email)
            .map_err(|source| self.error("building the notes author", source))
    }

    /// Writes `lines` as one notes commit and, with a remote, pushes once if due.
    fn write_round(&self, lines: &[Line]) -> Result<(), RoundFailure> {
        let git = |what: &str| {
            let what = what.to_string();
            move |source| RoundFailure::Git { what, source }
        };
        let mut state = self.lock();
        let repo =
            Repository::open(&self.config.repo_path).map_err(git("opening the repository"))?;
        let signature = Signature::now(&self.config.author_name, &self.config.author_email)
            .map_err(git("building the notes author"))?;
        let changed = write_lines(&repo, &signature, lines).map_err(git("writing notes"))?;
        debug!(statuses = lines.len(), changed, "git notes written");
        if self.config.remote.is_some() {
            // Even an unchanged line is queued: it may be a status re-posted after a
            // restart whose push never happened. The sync pushes only what differs.
            for line in lines {
                let order = state.next_line;
                state.next_line += 1;
                state
                    .unpushed
                    .entry((line.sha.clone(), line.context.clone()))
                    .and_modify(|(_, queued)| queued.clone_from(line))
                    .or_insert_with(|| (order, line.clone()));
            }
            self.push_if_due(&repo, &mut state);
        }
        Ok(())
    }

    /// Pushes unless a failed push asked to wait; logs a failure and schedules the
    /// next attempt.
    fn push_if_due(&self, repo: &Repository, state: &mut PushState) {
        let Some(remote) = &self.config.remote else {
            return;
        };
        if state.next_push.is_some_and(|at| Instant::now() < at) {
            debug!(remote = %redact_url(&remote.url), "notes push not due yet");
            return;
        }
        let mut attempt = 1;
        let synced = loop {
            match self.sync(repo, remote, &state.unpushed) {
                Err(e) if is_conflict(&e) && attempt < PUSH_CONFLICT_ATTEMPTS => {
                    debug!(
                        remote = %redact_url(&remote.url),
                        attempt,
                        error = %e,
                        "the remote's notes moved during the push: fetching again"
                    );
                    attempt += 1;
                }
                other => break other,
            }
        };
        match synced {
            Ok(pushed) => {
                if state.failures > 0 {
                    info!(remote = %redact_url(&remote.url), "notes push works again");
                }
                debug!(
                    remote = %redact_url(&remote.url),
                    pushed,
                    statuses = state.unpushed.len(),
                    attempts = attempt,
                    "notes in sync with the remote"
                );
                state.unpushed.clear();
                state.failures = 0;
                state.next_push = None;
            }
            Err(e) => {
                state.failures += 1;
                let exp = state.failures.saturating_sub(1).min(20);
                let wait = self
                    .config
                    .push_retry_initial
                    .saturating_mul(1u32 << exp)
                    .min(self.config.push_retry_max);
                state.next_push = Some(Instant::now() + wait);
                warn!(
                    remote = %redact_url(&remote.url),
                    error = %e,
                    unpushed = state.unpushed.len(),
                    retry_in = ?wait,
                    "cannot push commit statuses (git notes); they stay local until a push works"
                );
            }
        }
    }

    /// Fetches the remote's notes, rebases ours on them if they moved on, and pushes.
    /// Returns whether anything was pushed.
    fn sync(
        &self,
        repo: &Repository,
        remote: &NotesRemote,
        unpushed: &BTreeMap<(String, String), (u64, Line)>,
    ) -> Result<bool, StatusError> {
        let url = redact_url(&remote.url);
        let mut git_remote = repo
            .remote_anonymous(&remote.url)
            .map_err(|source| self.error(&format!("using remote {url}"), source))?;

        let mut fetch = FetchOptions::new();
        fetch.remote_callbacks((remote.callbacks)());
        git_remote
            .fetch(
                &[format!("+{NOTES_REF}:{REMOTE_NOTES_REF}")],
                Some(&mut fetch),
                None,
            )
            .map_err(|source| self.error(&format!("fetching notes from {url}"), source))?;
        let remote_has_notes = git_remote
            .list()
            .map(|heads| heads.iter().any(|h| h.name() == NOTES_REF))
            .unwrap_or(false);
        drop(git_remote);
        if !remote_has_notes && let Ok(mut stale) = repo.find_reference(REMOTE_NOTES_REF) {
            stale
                .delete()
                .map_err(|source| self.error("forgetting the remote's notes", source))?;
        }

        let theirs = repo.refname_to_id(REMOTE_NOTES_REF).ok();
        let ours = repo.refname_to_id(NOTES_REF).ok();
        if let Some(theirs) = theirs {
            let contains_theirs = ours.is_some_and(|ours| {
                ours == theirs || repo.graph_descendant_of(ours, theirs).unwrap_or(false)
            });
            if !contains_theirs {
                debug!(remote = %url, rewritten = unpushed.len(), "remote notes moved on: rebasing ours");
                repo.reference(
                    NOTES_REF,
                    theirs,
                    true,
                    "kubelet-gitops: notes from the remote",
                )
                .map_err(|source| self.error("taking the remote's notes", source))?;
                let signature = self.signature()?;
                // In the order first written, so a context's line lands where it
                // would have without the rebase.
                let mut ordered: Vec<&(u64, Line)> = unpushed.values().collect();
                ordered.sort_by_key(|(order, _)| *order);
                let lines: Vec<Line> = ordered.into_iter().map(|(_, l)| l.clone()).collect();
                write_lines(repo, &signature, &lines)
                    .map_err(|source| self.error("rewriting notes", source))?;
            }
        }
        let Ok(ours) = repo.refname_to_id(NOTES_REF) else {
            return Ok(false);
        };
        if Some(ours) == theirs {
            return Ok(false);
        }

        let rejected: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let mut callbacks = (remote.callbacks)();
        let rejected_ref = Arc::clone(&rejected);
        callbacks.push_update_reference(move |refname, status| {
            if let Some(message) = status {
                *rejected_ref.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some(format!("{refname}: {message}"));
            }
            Ok(())
        });
        let mut push = PushOptions::new();
        push.remote_callbacks(callbacks);
        let mut git_remote = repo
            .remote_anonymous(&remote.url)
            .map_err(|source| self.error(&format!("using remote {url}"), source))?;
        // libgit2 refuses a push that is not a fast-forward of the remote ref as the
        // push found it (NotFastForward): the remote moved after our fetch.
        git_remote
            .push(&[format!("{NOTES_REF}:{NOTES_REF}")], Some(&mut push))
            .map_err(|source| self.error(&format!("pushing notes to {url}"), source))?;
        drop(git_remote);
        if let Some(message) = rejected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            // The server's own refusal after the ref advertisement: a writer that got in
            // between reads as one of these (receive-pack's and forges' wording).
            let moved = [
                "non-fast-forward",
                "fetch first",
                "stale info",
                "failed to lock",
                "cannot lock ref",
            ]
            .iter()
            .any(|m| message.contains(m));
            let code = if moved {
                ErrorCode::NotFastForward
            } else {
                ErrorCode::GenericError
            };
            return Err(self.error(
                &format!("pushing notes to {url}"),
                git2::Error::new(
                    code,
                    ErrorClass::Reference,
                    format!("the remote rejected the update ({message})"),
                ),
            ));
        }
        repo.reference(REMOTE_NOTES_REF, ours, true, "kubelet-gitops: pushed notes")
            .map_err(|source| self.error("recording the pushed notes", source))?;
        Ok(true)
    }
}

/// Why a round of notes could not be written; each of its statuses gets it as its error.
#[derive(Debug)]
enum RoundFailure {
    Git {
        what: String,
        source: git2::Error,
    },
    /// The blocking task did not finish.
    Task(String),
}

impl RoundFailure {
    fn error(&self, repo: &Path) -> StatusError {
        match self {
            RoundFailure::Git { what, source } => StatusError::Notes {
                repo: repo.to_path_buf(),
                what: what.clone(),
                // git2::Error is not Clone: each status gets a copy of its parts.
                source: git2::Error::new(source.code(), source.class(), source.message()),
            },
            RoundFailure::Task(reason) => StatusError::NotesTask {
                repo: repo.to_path_buf(),
                reason: reason.clone(),
            },
        }
    }
}

/// Whether a sync failed because the remote's notes moved between our fetch and our
/// push (fetching again and pushing again resolves it).
fn is_conflict(error: &StatusError) -> bool {
    matches!(error, StatusError::Notes { source, .. } if source.code() == ErrorCode::NotFastForward)
}
