//! GitHub's REST commit statuses and issue comments, on github.com or GitHub Enterprise
//! Server.
//!
//! - Status: `POST {api}/repos/{owner}/{repo}/statuses/{sha}` with `state` (`error`,
//!   `failure`, `pending`, `success`), `target_url`, `description` (at most 140
//!   characters) and `context`.
//! - Comments: `GET {api}/repos/{owner}/{repo}/issues/{number}/comments?per_page=100&page=N`,
//!   `POST {api}/repos/{owner}/{repo}/issues/{number}/comments`,
//!   `PATCH {api}/repos/{owner}/{repo}/issues/comments/{id}`, each with `{"body"}`
//!   (at most 65536 characters).
//!
//! Headers: `Authorization: Bearer <token>`, `Accept: application/vnd.github+json`,
//! `X-GitHub-Api-Version: 2022-11-28`, and a User-Agent (GitHub refuses requests
//! without one). The API base is `https://api.github.com`, or `https://HOST/api/v3` for
//! GitHub Enterprise Server.

use std::path::PathBuf;

use reqwest::Method;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderName};
use serde::Deserialize;
use serde_json::json;

use super::http::{Http, base_url, check_sha, encode_segment, non_empty, status_body};
use super::{CommitStatus, StatusError, StatusState, TokenFile};

const FORGE: &str = "GitHub";

/// The public GitHub API.
pub const GITHUB_API: &str = "https://api.github.com";
/// GitHub's limit on a status description, in characters.
pub const DESCRIPTION_LIMIT: usize = 140;
/// GitHub's limit on a comment body, in characters.
pub const COMMENT_LIMIT: usize = 65_536;
/// The REST API version we speak.
pub const API_VERSION: &str = "2022-11-28";
const PAGE_SIZE: usize = 100;
const MAX_PAGES: u32 = 100;

/// Where to post and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHubConfig {
    /// `https://api.github.com`, or `https://HOST/api/v3` for GitHub Enterprise Server.
    pub api_url: String,
    pub owner: String,
    pub repo: String,
    /// A file holding a token with `repo:status` (classic) or "Commit statuses: write"
    /// (fine-grained); comments also need "Pull requests: write".
    pub token_file: PathBuf,
}

impl GitHubConfig {
    /// A repository on github.com.
    pub fn new(
        owner: impl Into<String>,
        repo: impl Into<String>,
        token_file: impl Into<PathBuf>,
    ) -> GitHubConfig {
        GitHubConfig {
            api_url: GITHUB_API.to_string(),
            owner: owner.into(),
            repo: repo.into(),
            token_file: token_file.into(),
        }
    }

    /// The same repository behind another API base (GitHub Enterprise Server:
    /// `https://HOST/api/v3`).
    pub fn with_api_url(mut self, api_url: impl Into<String>) -> GitHubConfig {
        self.api_url = api_url.into();
        self
    }
}

/// The GitHub backend.
#[derive(Debug, Clone)]
pub struct GitHub {
    repo_url: String,
    token: TokenFile,
    http: Http,
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    body: Option<String>,
}

impl GitHub {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: GitHubConfig) -> Result<GitHub, StatusError> {
        let GitHubConfig {
            api_url,
            owner,
            repo,
            token_file,
        } = config;
        let base = base_url(FORGE, &api_url)?;
        non_empty(FORGE, "owner", &owner)?;
        non_empty(FORGE, "repository", &repo)?;
        Ok(GitHub {
            repo_url: format!(
                "{base}/repos/{}/{}",
                encode_segment(&owner),
                encode_segment(&repo)
            ),
            token: TokenFile(token_file),
            http: Http::new(FORGE)?,
        })
    }

    /// The forge's state name for ours.
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

    /// The first comment on pull request `pr` whose body contains `marker`.
    pub(crate) async fn find_comment(
        &self,
        pr: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        for page in 1..=MAX_PAGES {
            let url = format!(
                "{}/issues/{pr}/comments?per_page={PAGE_SIZE}&page={page}",
                self.repo_url
            );
            let answer = self.request(Method::GET, &url, None).await?;
            let comments: Vec<Comment> = self.http.decode("GET", &url, &answer)?;
            let found = comments.iter().find_map(|c| {
                c.body
                    .as_deref()
                    .filter(|b| b.contains(marker))
                    .map(|b| (c.id, b.to_string()))
            });
            if found.is_some() {
                return Ok(found);
            }
            if comments.len() < PAGE_SIZE {
                break;
            }
        }
        Ok(None)
    }

    /// Creates a comment on pull request `pr`; returns its id.
    pub(crate) async fn create_comment(&self, pr: u64, body: &str) -> Result<u64, StatusError> {
        let url = format!("{}/issues/{pr}/comments", self.repo_url);
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
    ) -> Result<super::http::Answer, StatusError> {
        let token = self.token.read(FORGE)?;
        self.http
            .send(
                method,
                url,
                (AUTHORIZATION, "Bearer ".to_string(), &token),
                &[
                    (ACCEPT, "application/vnd.github+json"),
                    (HeaderName::from_static("x-github-api-version"), API_VERSION),
                ],
                body,
            )
            .await
    }
}
