//! Azure DevOps (Services and Server) commit statuses and pull-request threads.
//!
//! - Status: `POST {url}/{project}/_apis/git/repositories/{repo}/commits/{sha}/statuses?api-version=7.1`
//!   with `state` (`pending`, `succeeded`, `failed`, `error`; also `notSet` and
//!   `notApplicable`, which we do not use), `description`, `targetUrl` and
//!   `context: {name, genre}`. Azure shows a context as `genre/name`, so ours is split at
//!   its first `/`: `kubelet-gitops/gpu` is genre `kubelet-gitops`, name `gpu`, and the
//!   summary `kubelet-gitops` is the name alone, without a genre ([`context`]). Azure
//!   keeps every status posted; the newest of a context is the one shown.
//! - Comments: a pull request's comments live in threads. `GET
//!   .../pullRequests/{id}/threads`, all in one answer; ours is the thread whose first
//!   comment carries the marker (Azure's own `system` comments are skipped). It is
//!   created with `POST .../pullRequests/{id}/threads`
//!   (`{"comments": [{"parentCommentId": 0, "content", "commentType": 1}], "status": 1}`,
//!   a text comment in an active thread) and edited with
//!   `PATCH .../pullRequests/{id}/threads/{thread}/comments/1` `{"content"}`: comment ids
//!   count from 1 within a thread, and ours is its first.
//!
//! Auth: `Authorization: Basic` with a personal access token as the password (any user
//! or none), scopes "Code (status)" for statuses and "Code (read & write)" for comments.
//! A token file holding `user:token` is sent as it is. Azure DevOps answers a request
//! it does not authenticate either 401 or 203 with its HTML sign-in page; a 203 is taken
//! as the refused token it is, never as a delivered status.
//!
//! Microsoft documents no maximum for `description` or the context's `name` and
//! `genre`; we cut descriptions at 255 characters, as for Bitbucket and GitLab.

use std::path::PathBuf;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::commit::{CommitStatus, StatusState};
use super::error::StatusError;
use super::http::{Answer, Http, base_url, check_sha, encode_segment, method_name, non_empty};
use super::retry::FailureKind;
use super::token::TokenFile;

const FORGE: &str = "Azure DevOps";

/// The REST API version every request asks for.
pub const API_VERSION: &str = "7.1";
/// The limit we cut descriptions to.
pub const DESCRIPTION_LIMIT: usize = 255;
/// The limit we cut comments to (Microsoft documents none for a thread comment).
pub const COMMENT_LIMIT: usize = 65_536;
/// The id of a thread's first comment.
const FIRST_COMMENT: u64 = 1;

/// Azure DevOps' state name for ours.
pub fn state(state: StatusState) -> &'static str {
    match state {
        StatusState::Pending => "pending",
        StatusState::Success => "succeeded",
        StatusState::Failure => "failed",
        StatusState::Error => "error",
    }
}

/// The `context` object of a status: `genre/name` split at the first `/`, a context
/// without one as the name alone.
pub fn context(context: &str) -> serde_json::Value {
    match context.split_once('/') {
        Some((genre, name)) if !genre.is_empty() && !name.is_empty() => {
            json!({ "genre": genre, "name": name })
        }
        _ => json!({ "name": context }),
    }
}

/// Where to post on Azure DevOps and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureDevOpsConfig {
    /// The organization (`https://dev.azure.com/ORG`) or, for Azure DevOps Server, the
    /// collection (`https://HOST/tfs/DefaultCollection`).
    pub url: String,
    pub project: String,
    /// The repository's name or id.
    pub repo: String,
    /// A file holding a personal access token.
    pub token_file: PathBuf,
}

/// The Azure DevOps backend.
#[derive(Debug, Clone)]
pub struct AzureDevOps {
    repo_url: String,
    token: TokenFile,
    http: Http,
}

#[derive(Deserialize)]
struct Threads {
    #[serde(default)]
    value: Vec<Thread>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Thread {
    id: u64,
    #[serde(default)]
    comments: Vec<ThreadComment>,
    #[serde(default)]
    is_deleted: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadComment {
    id: u64,
    content: Option<String>,
    /// `text`, or `system` for Azure's own ("updated the pull request status").
    comment_type: Option<serde_json::Value>,
    #[serde(default)]
    is_deleted: bool,
}

impl AzureDevOps {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: AzureDevOpsConfig) -> Result<AzureDevOps, StatusError> {
        let AzureDevOpsConfig {
            url,
            project,
            repo,
            token_file,
        } = config;
        let base = base_url(FORGE, &url)?;
        non_empty(FORGE, "project", &project)?;
        non_empty(FORGE, "repository", &repo)?;
        Ok(AzureDevOps {
            repo_url: format!(
                "{base}/{}/_apis/git/repositories/{}",
                encode_segment(&project),
                encode_segment(&repo)
            ),
            token: TokenFile(token_file),
            http: Http::new(FORGE)?,
        })
    }

    /// The file the token is read from.
    pub(crate) fn token_file(&self) -> &TokenFile {
        &self.token
    }

    /// Posts one status (already truncated by the writer).
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        check_sha(FORGE, &status.sha)?;
        let url = self.url(&format!("commits/{}/statuses", status.sha));
        let mut body = json!({
            "state": state(status.state),
            "description": status.description,
            "context": context(&status.context),
        });
        if let Some(target) = &status.target_url {
            body["targetUrl"] = json!(target);
        }
        self.request(Method::POST, &url, Some(&body)).await?;
        Ok(())
    }

    /// The thread on pull request `pr` whose first comment contains `marker`: its id and
    /// that comment.
    pub(crate) async fn find_comment(
        &self,
        pr: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        let url = self.url(&format!("pullRequests/{pr}/threads"));
        let answer = self.request(Method::GET, &url, None).await?;
        let threads: Threads = self.http.decode("GET", &url, &answer)?;
        Ok(threads
            .value
            .into_iter()
            .filter(|t| !t.is_deleted)
            .find_map(|t| {
                let first = t.comments.into_iter().find(|c| c.id == FIRST_COMMENT)?;
                let system = first.comment_type == Some(json!("system"));
                let content = first
                    .content
                    .filter(|c| !first.is_deleted && !system && c.contains(marker))?;
                Some((t.id, content))
            }))
    }

    /// Opens a thread on pull request `pr` with `body` as its first comment; returns the
    /// thread's id.
    pub(crate) async fn create_comment(&self, pr: u64, body: &str) -> Result<u64, StatusError> {
        let url = self.url(&format!("pullRequests/{pr}/threads"));
        let thread = json!({
            "comments": [{"parentCommentId": 0, "content": body, "commentType": 1}],
            "status": 1,
        });
        let answer = self.request(Method::POST, &url, Some(&thread)).await?;
        let created: Thread = self.http.decode("POST", &url, &answer)?;
        Ok(created.id)
    }

    /// Replaces the first comment of thread `thread` on pull request `pr`.
    pub(crate) async fn update_comment(
        &self,
        pr: u64,
        thread: u64,
        body: &str,
    ) -> Result<(), StatusError> {
        let url = self.url(&format!(
            "pullRequests/{pr}/threads/{thread}/comments/{FIRST_COMMENT}"
        ));
        self.request(Method::PATCH, &url, Some(&json!({ "content": body })))
            .await?;
        Ok(())
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{path}?api-version={API_VERSION}", self.repo_url)
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, StatusError> {
        let method_name = method_name(&method);
        let answer = self
            .http
            .send_authorized(
                method,
                url,
                &self.token,
                |s| ("Basic ".into(), s.basic("")),
                body,
            )
            .await?;
        if answer.status == 203 {
            return Err(StatusError::Rejected {
                forge: FORGE,
                method: method_name,
                url: url.to_string(),
                status: 203,
                message: "a sign-in page instead of an answer: the token was not accepted"
                    .to_string(),
                kind: FailureKind::Unauthorized,
                retry_after: None,
            });
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_azure() {
        assert_eq!(state(StatusState::Pending), "pending");
        assert_eq!(state(StatusState::Success), "succeeded");
        assert_eq!(state(StatusState::Failure), "failed");
        assert_eq!(state(StatusState::Error), "error");
    }

    #[test]
    fn contexts_split_into_genre_and_name() {
        assert_eq!(
            context("kubelet-gitops/gpu"),
            json!({"genre": "kubelet-gitops", "name": "gpu"})
        );
        assert_eq!(
            context("kubelet-gitops/plan"),
            json!({"genre": "kubelet-gitops", "name": "plan"})
        );
        assert_eq!(context("kubelet-gitops"), json!({"name": "kubelet-gitops"}));
    }
}
