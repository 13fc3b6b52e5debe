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
//! With a [`NotesRemote`], every change is pushed to the same ref on the remote. Before
//! pushing, the remote's notes are fetched: if they moved on without us (another
//! replica, a restart with a fresh cache), our notes ref is reset to the remote's and the
//! lines not pushed yet are written again on top, so the push is a fast-forward and no
//! one's notes are lost. A push that fails (the remote is read-only, unreachable, or
//! rejects the credentials) is logged and tried again with backoff on the next status or
//! [`StatusWriter::flush`](super::StatusWriter::flush); the note is in the local
//! repository meanwhile. Unpushed lines are kept in memory only: after a restart the
//! controller posts every status again.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use git2::{
    Cred, CredentialType, ErrorCode, FetchOptions, Oid, PushOptions, RemoteCallbacks, Repository,
    Signature,
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
    /// Lines written locally and not pushed yet, by (commit, context).
    unpushed: BTreeMap<(String, String), String>,
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
        let inner = Arc::clone(&self.inner);
        let status = status.clone();
        self.blocking(move || inner.post(&status)).await
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

    fn post(&self, status: &CommitStatus) -> Result<(), StatusError> {
        let oid = self.oid(&status.sha)?;
        let line = status_line(status);
        let mut state = self.lock();
        let repo = self.open()?;
        let changed = write_line(&repo, &self.signature()?, oid, &status.context, &line)
            .map_err(|source| self.error("writing a note", source))?;
        debug!(sha = %status.sha, context = %status.context, changed, "git note written");
        if self.config.remote.is_some() {
            // Even an unchanged line is queued: it may be a status re-posted after a
            // restart whose push never happened. The sync pushes only what differs.
            state
                .unpushed
                .insert((status.sha.clone(), status.context.clone()), line);
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
        match self.sync(repo, remote, &state.unpushed) {
            Ok(pushed) => {
                if state.failures > 0 {
                    info!(remote = %redact_url(&remote.url), "notes push works again");
                }
                debug!(remote = %redact_url(&remote.url), pushed, "notes in sync with the remote");
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
        unpushed: &BTreeMap<(String, String), String>,
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
                for ((sha, context), line) in unpushed {
                    let oid = self.oid(sha)?;
                    write_line(repo, &signature, oid, context, line)
                        .map_err(|source| self.error("rewriting a note", source))?;
                }
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
        git_remote
            .push(&[format!("{NOTES_REF}:{NOTES_REF}")], Some(&mut push))
            .map_err(|source| self.error(&format!("pushing notes to {url}"), source))?;
        drop(git_remote);
        if let Some(message) = rejected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(self.error(
                &format!("pushing notes to {url}"),
                git2::Error::from_str(&format!("the remote rejected the update ({message})")),
            ));
        }
        repo.reference(REMOTE_NOTES_REF, ours, true, "kubelet-gitops: pushed notes")
            .map_err(|source| self.error("recording the pushed notes", source))?;
        Ok(true)
    }
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
