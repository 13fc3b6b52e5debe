//! Bitbucket Data Center's (formerly Server's) build statuses and pull-request comments.
//!
//! - Status: `POST {url}/rest/api/latest/projects/{key}/repos/{slug}/commits/{sha}/builds`
//!   (the repository-scoped builds resource of Bitbucket 7.14 and later; the older
//!   `/rest/build-status/1.0/commits/{sha}` is deprecated) with the same body as Cloud
//!   ([`build_status_body`]): `key`, `state` (`INPROGRESS`, `SUCCESSFUL`, `FAILED`),
//!   `name`, `url` and `description`. Every field holds at most 255 characters, `url`
//!   450; a status with the key of an existing one replaces it. `url` is required:
//!   without `--status-target-url`, the commit's page on the instance.
//! - Comments: general pull-request comments are listed through the activities
//!   (`GET .../pull-requests/{id}/activities?start=N&limit=100`, `COMMENTED` activities,
//!   paged with `isLastPage` and `nextPageStart`), created with
//!   `POST .../pull-requests/{id}/comments` `{"text"}` and edited with
//!   `PUT .../pull-requests/{id}/comments/{comment}` `{"text", "version"}`: Bitbucket
//!   refuses an edit without the comment's current version (409), so an update reads it
//!   first (`GET .../comments/{comment}`).
//!
//! Auth: `Authorization: Bearer <token>` (an HTTP access token with "Repository write";
//! a personal one also comments), or `Basic` for a `user:password` token file.
//! States map as on Cloud (`error` is `FAILED`).

use std::path::PathBuf;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::bitbucket::{BitbucketRepo, FIELD_LIMIT};
use super::commit::CommitStatus;
use super::error::StatusError;
use super::http::{base_url, encode_segment, non_empty};
use super::token::TokenFile;

const FORGE: &str = "Bitbucket Data Center";

/// The longest build-status key Data Center takes.
pub const KEY_LIMIT: usize = FIELD_LIMIT;
/// The limit we cut descriptions to (Data Center's documented limit).
pub const DESCRIPTION_LIMIT: usize = FIELD_LIMIT;
/// The limit we cut comments to (Data Center documents none in its REST reference).
pub const COMMENT_LIMIT: usize = 32_768;
const PAGE_SIZE: usize = 100;
const MAX_PAGES: u32 = 100;

/// Where to post on Bitbucket Data Center and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitbucketDataCenterConfig {
    /// The instance, with its context path if it has one (`https://git.example.com` or
    /// `https://example.com/bitbucket`), without `/rest/...`.
    pub url: String,
    /// The project key (`OPS`), or `~user` for a personal repository.
    pub project: String,
    /// The repository slug.
    pub repo: String,
    /// A file holding an HTTP access token with "Repository write", or `user:password`.
    pub token_file: PathBuf,
}

/// The Bitbucket Data Center backend.
#[derive(Debug, Clone)]
pub struct BitbucketDataCenter {
    repo: BitbucketRepo,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ActivityPage {
    #[serde(default)]
    values: Vec<Activity>,
    #[serde(default = "yes")]
    is_last_page: bool,
    next_page_start: Option<u64>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Activity {
    action: String,
    comment_action: Option<String>,
    comment: Option<Comment>,
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    #[serde(default)]
    version: u64,
    text: Option<String>,
}

impl BitbucketDataCenter {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: BitbucketDataCenterConfig) -> Result<BitbucketDataCenter, StatusError> {
        let BitbucketDataCenterConfig {
            url,
            project,
            repo,
            token_file,
        } = config;
        let base = base_url(FORGE, &url)?;
        non_empty(FORGE, "project key", &project)?;
        non_empty(FORGE, "repository", &repo)?;
        let (project, repo) = (encode_segment(&project), encode_segment(&repo));
        let repo = BitbucketRepo::new(
            FORGE,
            format!("{base}/rest/api/latest/projects/{project}/repos/{repo}"),
            format!("{base}/projects/{project}/repos/{repo}"),
            token_file,
        )?;
        Ok(BitbucketDataCenter { repo })
    }

    /// The file the token is read from.
    pub(crate) fn token_file(&self) -> &TokenFile {
        self.repo.token_file()
    }

    /// Posts one status (already truncated by the writer), replacing the one of its key.
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        let path = format!("commits/{}/builds", status.sha);
        self.repo.post_build_status(status, &path, KEY_LIMIT).await
    }

    /// The first general comment on pull request `pr` whose text contains `marker` (the
    /// activities come newest first; deleted comments are skipped).
    pub(crate) async fn find_comment(
        &self,
        pr: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        let mut added: Vec<(u64, String)> = Vec::new();
        let mut deleted: Vec<u64> = Vec::new();
        let mut start = 0;
        for _ in 0..MAX_PAGES {
            let url = format!(
                "{}/pull-requests/{pr}/activities?start={start}&limit={PAGE_SIZE}",
                self.repo.api
            );
            let answer = self.repo.request(Method::GET, &url, None).await?;
            let page: ActivityPage = self.repo.http.decode("GET", &url, &answer)?;
            for activity in page.values {
                let (Some(comment), "COMMENTED") = (activity.comment, activity.action.as_str())
                else {
                    continue;
                };
                match activity.comment_action.as_deref() {
                    Some("DELETED") => deleted.push(comment.id),
                    Some("ADDED") | None => {
                        if let Some(text) = comment.text.filter(|t| t.contains(marker)) {
                            added.push((comment.id, text));
                        }
                    }
                    Some(_) => {}
                }
            }
            match page.next_page_start {
                Some(next) if !page.is_last_page => start = next,
                _ => break,
            }
        }
        Ok(added
            .into_iter()
            .filter(|(id, _)| !deleted.contains(id))
            .min_by_key(|(id, _)| *id))
    }

    /// Creates a general comment on pull request `pr`; returns its id.
    pub(crate) async fn create_comment(&self, pr: u64, body: &str) -> Result<u64, StatusError> {
        let url = format!("{}/pull-requests/{pr}/comments", self.repo.api);
        let answer = self
            .repo
            .request(Method::POST, &url, Some(&json!({ "text": body })))
            .await?;
        let created: Comment = self.repo.http.decode("POST", &url, &answer)?;
        Ok(created.id)
    }

    /// Replaces the text of comment `id` on pull request `pr`, at its current version.
    pub(crate) async fn update_comment(
        &self,
        pr: u64,
        id: u64,
        body: &str,
    ) -> Result<(), StatusError> {
        let url = format!("{}/pull-requests/{pr}/comments/{id}", self.repo.api);
        let answer = self.repo.request(Method::GET, &url, None).await?;
        let current: Comment = self.repo.http.decode("GET", &url, &answer)?;
        let edit = json!({ "text": body, "version": current.version });
        self.repo.request(Method::PUT, &url, Some(&edit)).await?;
        Ok(())
    }
}
