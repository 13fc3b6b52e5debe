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

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use git2::{
    Commit, Cred, CredentialType, ErrorClass, ErrorCode, FetchOptions, Oid, PushOptions,
    RemoteCallbacks, Repository, Signature,
};
use tracing::{debug, info, warn};

use super::{CommitStatus, Secret, StatusError};

/// The notes ref our statuses live on.
pub const NOTES_REF: &str = "refs/notes/kubelet-gitops";
/// Where the remote's notes are fetched to before a push (not under `refs/notes/`, so
/// `git log --notes` does not show it).
pub const REMOTE_NOTES_REF: &str = "refs/kubelet-gitops/remote-notes";
/// Descriptions longer than this are cut (a note line should stay a line).
pub const DESCRIPTION_LIMIT: usize = 1024;
/// How many times one push goes fetch, write again, push when the remote's notes move
/// between our fetch and our push; after that the push waits for its backoff.
pub const PUSH_CONFLICT_ATTEMPTS: u32 = 3;
/// The message of a notes commit that carries several statuses (libgit2 writes one
/// commit per note; a round's are folded into one).
const ROUND_MESSAGE: &str = "Notes added by kubelet-gitops";

/// Builds the libgit2 callbacks (credentials, host key check) for one fetch or push.
pub type CallbacksFactory = Arc<dyn Fn() -> RemoteCallbacks<'static> + Send + Sync>;

/// The remote the notes are pushed to, and how to authenticate.
#[derive(Clone)]
pub struct NotesRemote {
    url: String,
    auth: &'static str,
    callbacks: CallbacksFactory,
}

impl fmt::Debug for NotesRemote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotesRemote")
            .field("url", &redact_url(&self.url))
            .field("auth", &self.auth)
            .finish()
    }
}

impl NotesRemote {
    /// A remote that needs no credentials (`file://`, a path, an open `git://` or https
    /// server).
    pub fn anonymous(url: impl Into<String>) -> NotesRemote {
        NotesRemote {
            url: url.into(),
            auth: "none",
            callbacks: Arc::new(RemoteCallbacks::new),
        }
    }

    /// HTTPS with a token as the password, read from `token_file` at each push.
    pub fn with_token(
        url: impl Into<String>,
        username: impl Into<String>,
        token_file: impl Into<PathBuf>,
    ) -> NotesRemote {
        let username = username.into();
        let token_file = token_file.into();
        NotesRemote {
            url: url.into(),
            auth: "token",
            callbacks: Arc::new(move || {
                let (username, token_file) = (username.clone(), token_file.clone());
                let mut asked = 0u32;
                let mut callbacks = RemoteCallbacks::new();
                callbacks.credentials(move |_url, _user, allowed| {
                    asked += 1;
                    if asked > 1 {
                        return Err(git2::Error::from_str("the remote rejected the token"));
                    }
                    if !allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
                        return Err(git2::Error::from_str(
                            "the remote does not accept username and password authentication",
                        ));
                    }
                    let token = Secret::from_file(&token_file, "git")
                        .map_err(|e| git2::Error::from_str(&e.to_string()))?;
                    Cred::userpass_plaintext(&username, token.expose())
                });
                callbacks
            }),
        }
    }

    /// Any other authentication (SSH with a checked host key): `factory` builds the
    /// callbacks for each fetch and push, as the git source's fetches do.
    pub fn with_callbacks(
        url: impl Into<String>,
        factory: impl Fn() -> RemoteCallbacks<'static> + Send + Sync + 'static,
    ) -> NotesRemote {
        NotesRemote {
            url: url.into(),
            auth: "callbacks",
            callbacks: Arc::new(factory),
        }
    }

    /// The remote's URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

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
            match Line::of(&self.inner, status) {
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
        if !super::is_commit_id(sha) {
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

/// One status as the line it sets in its commit's note.
#[derive(Debug, Clone)]
struct Line {
    oid: Oid,
    sha: String,
    context: String,
    text: String,
}

impl Line {
    /// `status`'s line; fails if its commit id is not one.
    fn of(inner: &Inner, status: &CommitStatus) -> Result<Line, StatusError> {
        Ok(Line {
            oid: inner.oid(&status.sha)?,
            sha: status.sha.clone(),
            context: status.context.clone(),
            text: status_line(status),
        })
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

/// `<context>: <state>: <description>[ (<url>)]`, on one line.
pub fn status_line(status: &CommitStatus) -> String {
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    let mut line = format!(
        "{}: {}: {}",
        one_line(&status.context),
        status.state,
        one_line(&status.description)
    );
    if let Some(url) = &status.target_url {
        line.push_str(&format!(" ({})", one_line(url)));
    }
    line
}

/// `note` with the line of `context` replaced by `line` (where it was), or `line`
/// appended; later duplicates of that context are dropped, other lines kept.
pub fn replace_line(note: &str, context: &str, line: &str) -> String {
    let prefix = format!("{context}: ");
    let mut out: Vec<&str> = Vec::new();
    let mut placed = false;
    for existing in note.lines() {
        if existing.starts_with(&prefix) {
            if !placed {
                out.push(line);
                placed = true;
            }
        } else {
            out.push(existing);
        }
    }
    if !placed {
        out.push(line);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

fn read_note(repo: &Repository, oid: Oid) -> Result<Option<String>, git2::Error> {
    match repo.find_note(Some(NOTES_REF), oid) {
        Ok(note) => Ok(Some(note.message().unwrap_or_default().to_string())),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sets `context`'s line in `oid`'s note; returns whether the note changed.
fn write_line(
    repo: &Repository,
    signature: &Signature<'_>,
    oid: Oid,
    context: &str,
    line: &str,
) -> Result<bool, git2::Error> {
    let existing = read_note(repo, oid)?.unwrap_or_default();
    let updated = replace_line(&existing, context, line);
    if updated == existing {
        return Ok(false);
    }
    repo.note(signature, signature, Some(NOTES_REF), oid, &updated, true)?;
    Ok(true)
}

/// Sets every line in its commit's note as one notes commit on top of the notes ref;
/// returns how many notes changed (none: no commit is written).
fn write_lines(
    repo: &Repository,
    signature: &Signature<'_>,
    lines: &[Line],
) -> Result<usize, git2::Error> {
    let base = repo.refname_to_id(NOTES_REF).ok();
    let mut changed = 0;
    for line in lines {
        if write_line(repo, signature, line.oid, &line.context, &line.text)? {
            changed += 1;
        }
    }
    if changed > 1 {
        // libgit2 writes one notes commit per note: fold them into one on `base`, so
        // that a round is one commit in the notes' history.
        let head = repo.refname_to_id(NOTES_REF)?;
        let tree = repo.find_commit(head)?.tree()?;
        let parent = base.map(|b| repo.find_commit(b)).transpose()?;
        let parents: Vec<&Commit<'_>> = parent.iter().collect();
        let folded = repo.commit(
            None,
            signature,
            signature,
            &format!("{ROUND_MESSAGE} ({changed} statuses)"),
            &tree,
            &parents,
        )?;
        repo.reference_matching(
            NOTES_REF,
            folded,
            true,
            head,
            "kubelet-gitops: one notes commit per round",
        )?;
    }
    Ok(changed)
}

/// The URL without a `user:password@` part.
fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('/') {
            Some((authority, path)) if authority.contains('@') => {
                let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                format!("{scheme}://<redacted>@{host}/{path}")
            }
            None if rest.contains('@') => {
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                format!("{scheme}://<redacted>@{host}")
            }
            _ => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::StatusState;
    use super::*;

    #[test]
    fn lines_are_replaced_in_place() {
        let note = "kubelet-gitops/gpu: pending: rolling out: 3/10\nkubelet-gitops: pending: x\n";
        let updated = replace_line(
            note,
            "kubelet-gitops/gpu",
            "kubelet-gitops/gpu: success: 10/10",
        );
        assert_eq!(
            updated,
            "kubelet-gitops/gpu: success: 10/10\nkubelet-gitops: pending: x\n"
        );
        // The summary context is a prefix of the pool contexts' names but not of their
        // lines' prefixes.
        let updated = replace_line(&updated, "kubelet-gitops", "kubelet-gitops: success: y");
        assert_eq!(
            updated,
            "kubelet-gitops/gpu: success: 10/10\nkubelet-gitops: success: y\n"
        );
        let appended = replace_line("", "kubelet-gitops/cpu", "kubelet-gitops/cpu: success: 1/1");
        assert_eq!(appended, "kubelet-gitops/cpu: success: 1/1\n");
        let deduped = replace_line("a: x\nhand-written\na: y\n", "a", "a: z");
        assert_eq!(deduped, "a: z\nhand-written\n");
    }

    #[test]
    fn lines_stay_on_one_line() {
        let status = CommitStatus::new(
            "a".repeat(40),
            "kubelet-gitops/gpu",
            StatusState::Failure,
            "node-1 rolled back:\nkubelet crashed",
        )
        .with_target_url("https://example.com/x");
        assert_eq!(
            status_line(&status),
            "kubelet-gitops/gpu: failure: node-1 rolled back: kubelet crashed (https://example.com/x)"
        );
    }

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            redact_url("https://user:tok@git.example.com/a/b.git"),
            "https://<redacted>@git.example.com/a/b.git"
        );
        assert_eq!(
            redact_url("https://git.example.com/a"),
            "https://git.example.com/a"
        );
        assert_eq!(redact_url("/srv/git/config.git"), "/srv/git/config.git");
        let remote = NotesRemote::with_token("https://x:y@h/r", "git", "/tok");
        let debug = format!("{remote:?}");
        assert!(!debug.contains("x:y"), "{debug}");
    }
}
