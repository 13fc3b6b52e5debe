//! GitHub's REST commit statuses and issue comments, which Gitea (and Forgejo) speak too:
//! one client, the differences between the two as data ([`Dialect`]).
//!
//! - Status: `POST {repo}/statuses/{sha}` with `state` (GitHub: `error`, `failure`,
//!   `pending`, `success`; Gitea also has `warning`, which we do not use),
//!   `target_url`, `description` and `context`.
//! - Comments: `GET {repo}/issues/{number}/comments`, `POST` to the same path, and
//!   `PATCH {repo}/issues/comments/{id}`, each with `{"body"}`.
//!
//! `{repo}` is `{api}/repos/{owner}/{repo}` on GitHub (the API base is
//! `https://api.github.com`, or `https://HOST/api/v3` for GitHub Enterprise Server) and
//! `{url}/api/v1/repos/{owner}/{repo}` on Gitea. GitHub wants `Authorization: Bearer`,
//! `Accept: application/vnd.github+json`, `X-GitHub-Api-Version` and a User-Agent (it
//! refuses requests without one), pages comments and cuts descriptions at 140
//! characters. Gitea wants `Authorization: token`, answers every comment at once, and
//! stores a description as `TEXT` with no maximum: we cut it to 255 characters all the
//! same, which keeps it readable in its UI.

use std::path::PathBuf;

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, HeaderName};
use serde::Deserialize;
use serde_json::json;

use super::commit::CommitStatus;
use super::error::StatusError;
use super::http::{Answer, Http, base_url, check_sha, encode_segment, non_empty, status_body};
use super::token::TokenFile;

/// The public GitHub API.
pub const GITHUB_API: &str = "https://api.github.com";

/// What sets one forge's API apart.
#[derive(Debug)]
pub(crate) struct Dialect {
    /// The forge's name, for logs and errors.
    pub name: &'static str,
    /// Between the configured URL and `/repos`.
    api_path: &'static str,
    /// Before the token in `Authorization`.
    auth_scheme: &'static str,
    /// Sent with every request (lowercase names).
    headers: &'static [(&'static str, &'static str)],
    /// Comments are listed this many a page (at most [`MAX_PAGES`] pages); `None`: all
    /// in one answer.
    comment_page: Option<usize>,
    /// The longest status description, in characters.
    pub description_limit: usize,
    /// The longest comment body, in characters.
    pub comment_limit: usize,
}

/// How many pages of comments are read before giving up on finding ours.
const MAX_PAGES: u32 = 100;

/// GitHub and GitHub Enterprise Server (REST API version 2022-11-28).
static GITHUB: Dialect = Dialect {
    name: "GitHub",
    api_path: "",
    auth_scheme: "Bearer ",
    headers: &[
        ("accept", "application/vnd.github+json"),
        ("x-github-api-version", "2022-11-28"),
    ],
    comment_page: Some(100),
    description_limit: 140,
    comment_limit: 65_536,
};

/// Gitea and Forgejo.
static GITEA: Dialect = Dialect {
    name: "Gitea",
    api_path: "/api/v1",
    auth_scheme: "token ",
    headers: &[],
    comment_page: None,
    description_limit: 255,
    // Gitea sets no limit.
    comment_limit: 65_536,
};

/// Where to post on GitHub and with which token.
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

/// Where to post on Gitea and with which token.
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

/// The GitHub backend.
#[derive(Debug, Clone)]
pub struct GitHub(pub(crate) ForgeClient);

impl GitHub {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: GitHubConfig) -> Result<GitHub, StatusError> {
        let GitHubConfig {
            api_url,
            owner,
            repo,
            token_file,
        } = config;
        ForgeClient::new(&GITHUB, &api_url, &owner, &repo, token_file).map(GitHub)
    }
}

/// The Gitea/Forgejo backend.
#[derive(Debug, Clone)]
pub struct Gitea(pub(crate) ForgeClient);

impl Gitea {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: GiteaConfig) -> Result<Gitea, StatusError> {
        let GiteaConfig {
            url,
            owner,
            repo,
            token_file,
        } = config;
        ForgeClient::new(&GITEA, &url, &owner, &repo, token_file).map(Gitea)
    }
}

/// One repository on a forge of some [`Dialect`].
#[derive(Debug, Clone)]
pub(crate) struct ForgeClient {
    pub dialect: &'static Dialect,
    repo_url: String,
    token: TokenFile,
    http: Http,
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    body: Option<String>,
}

impl ForgeClient {
    fn new(
        dialect: &'static Dialect,
        url: &str,
        owner: &str,
        repo: &str,
        token_file: PathBuf,
    ) -> Result<ForgeClient, StatusError> {
        let forge = dialect.name;
        let base = base_url(forge, url)?;
        non_empty(forge, "owner", owner)?;
        non_empty(forge, "repository", repo)?;
        Ok(ForgeClient {
            dialect,
            repo_url: format!(
                "{base}{}/repos/{}/{}",
                dialect.api_path,
                encode_segment(owner),
                encode_segment(repo)
            ),
            token: TokenFile(token_file),
            http: Http::new(forge)?,
        })
    }

    /// The file the token is read from.
    pub(crate) fn token_file(&self) -> &TokenFile {
        &self.token
    }

    /// Posts one status (already truncated by the writer). Both forges name our states
    /// as we do.
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        check_sha(self.dialect.name, &status.sha)?;
        let url = format!("{}/statuses/{}", self.repo_url, status.sha);
        let body = status_body(status.state.as_str(), "context", status);
        self.request(Method::POST, &url, Some(&body)).await?;
        Ok(())
    }

    /// The first comment on pull request `pr` whose body contains `marker`.
    pub(crate) async fn find_comment(
        &self,
        pr: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        let Some(page_size) = self.dialect.comment_page else {
            let url = format!("{}/issues/{pr}/comments", self.repo_url);
            return Ok(find_marked(self.comments(&url).await?, marker));
        };
        for page in 1..=MAX_PAGES {
            let url = format!(
                "{}/issues/{pr}/comments?per_page={page_size}&page={page}",
                self.repo_url
            );
            let comments = self.comments(&url).await?;
            let last = comments.len() < page_size;
            let found = find_marked(comments, marker);
            if found.is_some() {
                return Ok(found);
            }
            if last {
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

    async fn comments(&self, url: &str) -> Result<Vec<Comment>, StatusError> {
        let answer = self.request(Method::GET, url, None).await?;
        self.http.decode("GET", url, &answer)
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, StatusError> {
        let token = self.token.read(self.dialect.name)?;
        let headers: Vec<(HeaderName, &'static str)> = self
            .dialect
            .headers
            .iter()
            .map(|(name, value)| (HeaderName::from_static(name), *value))
            .collect();
        self.http
            .send(
                method,
                url,
                (AUTHORIZATION, self.dialect.auth_scheme.to_string(), &token),
                &headers,
                body,
            )
            .await
    }
}

/// The id and body of the first of `comments` that contains `marker`.
fn find_marked(comments: Vec<Comment>, marker: &str) -> Option<(u64, String)> {
    comments
        .into_iter()
        .find_map(|c| c.body.filter(|b| b.contains(marker)).map(|b| (c.id, b)))
}
