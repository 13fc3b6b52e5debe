//! GitLab's commit status API and merge-request notes.
//!
//! - Status: `POST {url}/api/v4/projects/{id}/statuses/{sha}` with `state` (`pending`,
//!   `running`, `success`, `failed`, `canceled`), `name` (our context), `description`
//!   (cut to 255 characters) and `target_url`. `{id}` is the numeric project id or the
//!   URL-encoded path (`group%2Fsubgroup%2Fproject`).
//! - Notes: `GET {url}/api/v4/projects/{id}/merge_requests/{iid}/notes?per_page=100&page=N`,
//!   `POST .../merge_requests/{iid}/notes`, `PUT .../merge_requests/{iid}/notes/{note_id}`,
//!   each with `{"body"}`.
//!
//! Header: `PRIVATE-TOKEN: <token>` (a personal, project or group access token with the
//! `api` scope).
//!
//! # State mapping
//!
//! GitLab has no `error` state: our `error` (the commit does not validate) is posted as
//! `failed`, and the description carries the reason (`pools/gpu.yaml:12: ...`). Our
//! `pending` (rolling out) is posted as `running`.
//!
//! GitLab refuses to move a status to the state it is already in ("Cannot transition
//! status via :run from :running", HTTP 400), so progress updates within `running`
//! (3/10, then 5/10 nodes) cannot change the description shown on GitLab: such an answer
//! is taken as delivered, and the next change of state (success or failed) goes through.

use std::path::PathBuf;

use reqwest::Method;
use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::json;
use tracing::debug;

use super::commit::{CommitStatus, StatusState};
use super::error::StatusError;
use super::http::{Answer, Http, base_url, check_sha, encode_segment, non_empty, status_body};
use super::token::TokenFile;

const FORGE: &str = "GitLab";

/// The limit we cut status descriptions to, in characters.
pub const DESCRIPTION_LIMIT: usize = 255;
/// GitLab's limit on a note body, in characters.
pub const COMMENT_LIMIT: usize = 1_000_000;
const PAGE_SIZE: usize = 100;
const MAX_PAGES: u32 = 100;

/// A GitLab project: its numeric id or its full path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitLabProject {
    Id(u64),
    /// `group/subgroup/project`.
    Path(String),
}

impl GitLabProject {
    /// Digits are an id; anything else a path (leading and trailing `/` dropped).
    pub fn parse(text: &str) -> GitLabProject {
        let text = text.trim();
        match text.parse::<u64>() {
            Ok(id) => GitLabProject::Id(id),
            Err(_) => GitLabProject::Path(text.trim_matches('/').to_string()),
        }
    }

    /// The `:id` path segment: the id, or the URL-encoded path.
    pub fn segment(&self) -> String {
        match self {
            GitLabProject::Id(id) => id.to_string(),
            GitLabProject::Path(path) => encode_segment(path),
        }
    }
}

/// Where to post and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLabConfig {
    /// The GitLab instance, such as `https://gitlab.com` (without `/api/v4`).
    pub url: String,
    pub project: GitLabProject,
    /// A file holding an access token with the `api` scope.
    pub token_file: PathBuf,
}

/// The GitLab backend.
#[derive(Debug, Clone)]
pub struct GitLab {
    project_url: String,
    token: TokenFile,
    http: Http,
}

#[derive(Deserialize)]
struct Note {
    id: u64,
    body: Option<String>,
    #[serde(default)]
    system: bool,
}

impl GitLab {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: GitLabConfig) -> Result<GitLab, StatusError> {
        let GitLabConfig {
            url,
            project,
            token_file,
        } = config;
        let base = base_url(FORGE, &url)?;
        if let GitLabProject::Path(path) = &project {
            non_empty(FORGE, "project path", path)?;
        }
        Ok(GitLab {
            project_url: format!("{base}/api/v4/projects/{}", project.segment()),
            token: TokenFile(token_file),
            http: Http::new(FORGE)?,
        })
    }

    /// The file the token is read from.
    pub(crate) fn token_file(&self) -> &TokenFile {
        &self.token
    }

    /// The forge's state name for ours (see the module docs).
    pub fn state(state: StatusState) -> &'static str {
        match state {
            StatusState::Pending => "running",
            StatusState::Success => "success",
            StatusState::Failure | StatusState::Error => "failed",
        }
    }

    /// Posts one status (already truncated by the writer).
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        check_sha(FORGE, &status.sha)?;
        let url = format!("{}/statuses/{}", self.project_url, status.sha);
        let body = status_body(Self::state(status.state), "name", status);
        match self.request(Method::POST, &url, Some(&body)).await {
            Ok(_) => Ok(()),
            Err(StatusError::Rejected {
                status: 400,
                message,
                ..
            }) if message.contains("Cannot transition status") => {
                debug!(
                    forge = FORGE,
                    sha = %status.sha,
                    context = %status.context,
                    forge_message = %message,
                    "GitLab keeps the status it has until the state changes"
                );
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The first user note on merge request `iid` whose body contains `marker`.
    pub(crate) async fn find_comment(
        &self,
        iid: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        for page in 1..=MAX_PAGES {
            let url = format!(
                "{}/merge_requests/{iid}/notes?sort=asc&order_by=created_at&per_page={PAGE_SIZE}&page={page}",
                self.project_url
            );
            let answer = self.request(Method::GET, &url, None).await?;
            let notes: Vec<Note> = self.http.decode("GET", &url, &answer)?;
            let found = notes.iter().filter(|n| !n.system).find_map(|n| {
                n.body
                    .as_deref()
                    .filter(|b| b.contains(marker))
                    .map(|b| (n.id, b.to_string()))
            });
            if found.is_some() {
                return Ok(found);
            }
            if notes.len() < PAGE_SIZE {
                break;
            }
        }
        Ok(None)
    }

    /// Creates a note on merge request `iid`; returns its id.
    pub(crate) async fn create_comment(&self, iid: u64, body: &str) -> Result<u64, StatusError> {
        let url = format!("{}/merge_requests/{iid}/notes", self.project_url);
        let answer = self
            .request(Method::POST, &url, Some(&json!({ "body": body })))
            .await?;
        let created: Note = self.http.decode("POST", &url, &answer)?;
        Ok(created.id)
    }

    /// Replaces the body of note `id` on merge request `iid`.
    pub(crate) async fn update_comment(
        &self,
        iid: u64,
        id: u64,
        body: &str,
    ) -> Result<(), StatusError> {
        let url = format!("{}/merge_requests/{iid}/notes/{id}", self.project_url);
        self.request(Method::PUT, &url, Some(&json!({ "body": body })))
            .await?;
        Ok(())
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, StatusError> {
        let token = self.token.read(FORGE)?;
        self.http
            .send(
                method,
                url,
                (
                    HeaderName::from_static("private-token"),
                    String::new(),
                    &token,
                ),
                &[],
                body,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_parse_and_encode() {
        assert_eq!(GitLabProject::parse("42"), GitLabProject::Id(42));
        assert_eq!(GitLabProject::parse("42").segment(), "42");
        let path = GitLabProject::parse("/group/sub/project/");
        assert_eq!(path, GitLabProject::Path("group/sub/project".to_string()));
        assert_eq!(path.segment(), "group%2Fsub%2Fproject");
    }

    #[test]
    fn states_map_to_gitlab() {
        assert_eq!(GitLab::state(StatusState::Pending), "running");
        assert_eq!(GitLab::state(StatusState::Success), "success");
        assert_eq!(GitLab::state(StatusState::Failure), "failed");
        assert_eq!(GitLab::state(StatusState::Error), "failed");
    }
}
