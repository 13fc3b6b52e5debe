//! Gitea's (and Forgejo's) commit status API and issue comments.
//!
//! - Status: `POST {url}/api/v1/repos/{owner}/{repo}/statuses/{sha}` with `state`
//!   (`pending`, `success`, `error`, `failure`, `warning`), `target_url`, `description`
//!   and `context` (`CreateStatusOption`).
//! - Comments: `GET {url}/api/v1/repos/{owner}/{repo}/issues/{index}/comments` (every
//!   comment, no paging), `POST` to the same path, and
//!   `PATCH {url}/api/v1/repos/{owner}/{repo}/issues/comments/{id}`, each with `{"body"}`.
//!
//! Header: `Authorization: token <token>`.
//!
//! Gitea stores a status description as `TEXT` and its API sets no maximum; we cut
//! descriptions to 255 characters all the same, which keeps them readable in its UI.

use std::path::PathBuf;

use reqwest::Method;
use reqwest::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::json;

use super::http::{Answer, Http, base_url, check_sha, encode_segment, non_empty, status_body};
use super::{CommitStatus, StatusError, StatusState, TokenFile};

const FORGE: &str = "Gitea";

/// The limit we cut status descriptions to, in characters.
pub const DESCRIPTION_LIMIT: usize = 255;
/// The limit we cut comment bodies to, in characters (Gitea sets none).
pub const COMMENT_LIMIT: usize = 65_536;

/// Where to post and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiteaConfig {
    /// The instance, such as `https://codeberg.org` (without `/api/v1`).
    pub url: String,
    pub owner: String,
    pub repo: String,
    /// A file holding an access token with `write:repository` (and `write:issue` for
    /// comments).
    pub token_file: PathBuf,
}

/// The Gitea/Forgejo backend.
#[derive(Debug, Clone)]
pub struct Gitea {
    repo_url: String,
    token: TokenFile,
    http: Http,
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    body: Option<String>,
}

impl Gitea {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: GiteaConfig) -> Result<Gitea, StatusError> {
        let GiteaConfig {
            url,
            owner,
            repo,
            token_file,
        } = config;
        let base = base_url(FORGE, &url)?;
        non_empty(FORGE, "owner", &owner)?;
        non_empty(FORGE, "repository", &repo)?;
        Ok(Gitea {
            repo_url: format!(
                "{base}/api/v1/repos/{}/{}",
                encode_segment(&owner),
                encode_segment(&repo)
            ),
            token: TokenFile(token_file),
            http: Http::new(FORGE)?,
        })
    }

    /// The forge's state name for ours (the same names; `warning` is not used).
    pub fn state(state: StatusState) -> &'static str {
        state.as_str()
    }

    /// Posts one status (already truncated by the writer).
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        check_sha(FORGE, &status.sha)?;
        let url = format!("{}/statuses/{}", self.repo_url, status.sha);
        let body = status_body(Self::state(status.state), "context", status);
        self.request(Method::POST, &url, Some(&body)).await?;
        Ok(())
    }

    /// The first comment on pull request `index` whose body contains `marker`.
    pub(crate) async fn find_comment(
        &self,
        index: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        let url = format!("{}/issues/{index}/comments", self.repo_url);
        let answer = self.request(Method::GET, &url, None).await?;
        let comments: Vec<Comment> = self.http.decode("GET", &url, &answer)?;
        Ok(comments
            .into_iter()
            .find_map(|c| c.body.filter(|b| b.contains(marker)).map(|b| (c.id, b))))
    }

    /// Creates a comment on pull request `index`; returns its id.
    pub(crate) async fn create_comment(&self, index: u64, body: &str) -> Result<u64, StatusError> {
        let url = format!("{}/issues/{index}/comments", self.repo_url);
        let answer = self
            .request(Method::POST, &url, Some(&json!({ "body": body })))
            .await?;
        let created: Comment = self.http.decode("POST", &url, &answer)?;
        Ok(created.id)
    }

    /// Replaces the body of comment `id`.
    pub(crate) async fn update_comment(&self, id: u64, body: &str) -> Result<(), StatusError> {
        let url = format!("{}/issues/comments/{id}", self.repo_url);
        self.request(Method::PATCH, &url, Some(&json!({ "body": body })))
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
                (AUTHORIZATION, "token ".to_string(), &token),
                &[],
                body,
            )
            .await
    }
}
