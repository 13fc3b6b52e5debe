//! Bitbucket Cloud's commit build statuses and pull-request comments, and what Bitbucket
//! Data Center ([`BitbucketDataCenter`](super::BitbucketDataCenter)) shares with it: the
//! build-status body, its states and its key.
//!
//! - Status: `POST {api}/repositories/{workspace}/{repo}/commit/{sha}/statuses/build`
//!   with `key`, `state` (`INPROGRESS`, `SUCCESSFUL`, `FAILED`, `STOPPED`), `name`, `url`
//!   and `description`. A status with the key of an existing one replaces it: a
//!   context's status is updated in place. `key` holds at most 40 characters ("key:
//!   Ensure this value has at most 40 characters", HTTP 400): a longer context is
//!   shortened with a hash ([`fit_key`]), and `name` carries it whole. `url` is required:
//!   without `--status-target-url`, the commit's page on bitbucket.org.
//! - Comments: `GET .../pullrequests/{id}/comments?pagelen=100`, following `next` (an
//!   absolute URL, followed only when it is under the API base, since it gets the
//!   token), `POST` to the same path and `PUT .../pullrequests/{id}/comments/{comment}`,
//!   each with `{"content": {"raw"}}`.
//! - Open pull requests, for review (Bitbucket Cloud publishes no pull-request refs):
//!   `GET .../pullrequests?state=OPEN&pagelen=50`, following `next` under the API base
//!   as for comments ([`Bitbucket::open_pull_requests`]). Each value's `id`,
//!   `source.commit.hash` (Bitbucket sends the 12-digit short hash there),
//!   `source.branch.name`, `source.repository.full_name` and `destination.branch.name`
//!   are read ([`PullRequest`]).
//!
//! Auth: `Authorization: Bearer <token>` for a repository, project or workspace access
//! token; a token file holding `user:secret` (an app password or API token with its
//! user) is sent as `Authorization: Basic` ([`bearer_or_basic`]).
//!
//! # State mapping
//!
//! Bitbucket has no `error` state: our `error` (the commit does not validate) is posted
//! as `FAILED`, the reason in the description; `pending` is `INPROGRESS`. `STOPPED` is
//! not used.
//!
//! Bitbucket Cloud documents no maximum for `description` or `name`; we cut both at 255
//! characters, the limit Bitbucket Data Center documents for every field but `url`.

use std::path::PathBuf;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::commit::{CommitStatus, StatusState, fit_key, truncate_description};
use super::error::StatusError;
use super::http::{Answer, Http, base_url, bearer_or_basic, check_sha, encode_segment, non_empty};
use super::token::TokenFile;

const FORGE: &str = "Bitbucket Cloud";

/// The public Bitbucket Cloud API.
pub const BITBUCKET_API: &str = "https://api.bitbucket.org/2.0";
/// The longest build-status key Bitbucket Cloud takes.
pub const KEY_LIMIT: usize = 40;
/// The longest `name` and `description` we send (Data Center's documented limit).
pub const FIELD_LIMIT: usize = 255;
/// The limit we cut descriptions to.
pub const DESCRIPTION_LIMIT: usize = FIELD_LIMIT;
/// The limit we cut comments to (Bitbucket documents none).
pub const COMMENT_LIMIT: usize = 65_536;
const PAGE_SIZE: usize = 100;
const MAX_PAGES: u32 = 100;
/// Pull requests per page of the listing (Bitbucket's maximum for pull requests is 50).
const PULL_REQUEST_PAGE_SIZE: usize = 50;
/// Pages of open pull requests read at most: 1000 open pull requests.
const MAX_PULL_REQUEST_PAGES: u32 = 20;

/// Bitbucket's state name for ours (Cloud and Data Center alike).
pub fn state(state: StatusState) -> &'static str {
    match state {
        StatusState::Pending => "INPROGRESS",
        StatusState::Success => "SUCCESSFUL",
        StatusState::Failure | StatusState::Error => "FAILED",
    }
}

/// The body of a build status, the same on Cloud and Data Center: the context as `key`
/// (fitted to `key_limit`) and, whole up to [`FIELD_LIMIT`], as `name`; `url` is the
/// status's target URL, else `commit_page`.
pub(crate) fn build_status_body(
    status: &CommitStatus,
    key_limit: usize,
    commit_page: String,
) -> serde_json::Value {
    json!({
        "key": fit_key(&status.context, key_limit),
        "state": state(status.state),
        "name": truncate_description(&status.context, FIELD_LIMIT),
        "url": status.target_url.clone().unwrap_or(commit_page),
        "description": status.description,
    })
}

/// One Bitbucket repository, Cloud or Data Center: where its API and its web pages are,
/// and the token its requests carry ([`bearer_or_basic`]).
#[derive(Debug, Clone)]
pub(crate) struct BitbucketRepo {
    forge: &'static str,
    /// The repository's API resource.
    pub api: String,
    /// The repository's web page.
    web: String,
    token: TokenFile,
    pub http: Http,
}

impl BitbucketRepo {
    pub fn new(
        forge: &'static str,
        api: String,
        web: String,
        token_file: PathBuf,
    ) -> Result<BitbucketRepo, StatusError> {
        Ok(BitbucketRepo {
            forge,
            api,
            web,
            token: TokenFile(token_file),
            http: Http::new(forge)?,
        })
    }

    /// The file the token is read from.
    pub fn token_file(&self) -> &TokenFile {
        &self.token
    }

    /// Posts one status (already truncated by the writer) to `{api}/{path}`, where
    /// `path` names the commit (`commit/{sha}/statuses/build` on Cloud,
    /// `commits/{sha}/builds` on Data Center); it replaces the status of its key.
    pub async fn post_build_status(
        &self,
        status: &CommitStatus,
        path: &str,
        key_limit: usize,
    ) -> Result<(), StatusError> {
        check_sha(self.forge, &status.sha)?;
        let url = format!("{}/{path}", self.api);
        let page = format!("{}/commits/{}", self.web, status.sha);
        let body = build_status_body(status, key_limit, page);
        self.request(Method::POST, &url, Some(&body)).await?;
        Ok(())
    }

    pub async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, StatusError> {
        self.http
            .send_authorized(method, url, &self.token, bearer_or_basic, body)
            .await
    }
}

/// Where to post on Bitbucket Cloud and with which token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitbucketConfig {
    /// `https://api.bitbucket.org/2.0`.
    pub api_url: String,
    pub workspace: String,
    pub repo: String,
    /// A file holding an access token with the `repository:write` scope (and
    /// `pullrequest:write` for comments), or `user:app-password`.
    pub token_file: PathBuf,
}

impl BitbucketConfig {
    /// A repository on bitbucket.org.
    pub fn new(
        workspace: impl Into<String>,
        repo: impl Into<String>,
        token_file: impl Into<PathBuf>,
    ) -> BitbucketConfig {
        BitbucketConfig {
            api_url: BITBUCKET_API.to_string(),
            workspace: workspace.into(),
            repo: repo.into(),
            token_file: token_file.into(),
        }
    }
}

/// The Bitbucket Cloud backend.
#[derive(Debug, Clone)]
pub struct Bitbucket {
    api_base: String,
    repo: BitbucketRepo,
    /// `workspace/repo` as configured, to tell a fork's pull requests.
    full_name: String,
}

#[derive(Deserialize)]
struct Page<T> {
    #[serde(default = "Vec::new")]
    values: Vec<T>,
    next: Option<String>,
}

/// An open pull request as Bitbucket Cloud lists it, with what review needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// The pull request's number (`id`).
    pub id: u64,
    /// `source.commit.hash`: the head commit, as Bitbucket sends it (12 hex digits, a
    /// short hash), or empty when it sent none.
    pub source_commit: String,
    /// `source.branch.name`.
    pub source_branch: String,
    /// `source.repository.full_name` (`workspace/repo`), empty when it sent none (a
    /// deleted fork).
    pub source_repository: String,
    /// Whether the source branch is in the repository the reconciler follows (not a
    /// fork): its `full_name` is ours, compared without case as Bitbucket does.
    pub same_repository: bool,
    /// `destination.branch.name`.
    pub destination_branch: String,
}

/// The fields of a listed pull request we read; everything else is ignored.
#[derive(Deserialize)]
struct RawPullRequest {
    id: u64,
    source: Option<RawEnd>,
    destination: Option<RawEnd>,
}

#[derive(Deserialize)]
struct RawEnd {
    commit: Option<RawCommit>,
    branch: Option<RawBranch>,
    repository: Option<RawRepository>,
}

#[derive(Deserialize)]
struct RawCommit {
    hash: Option<String>,
}

#[derive(Deserialize)]
struct RawBranch {
    name: Option<String>,
}

#[derive(Deserialize)]
struct RawRepository {
    full_name: Option<String>,
}

impl RawPullRequest {
    /// What review needs of it; `own` is our repository's `workspace/repo`.
    fn read(self, own: &str) -> PullRequest {
        let (source, destination) = (self.source, self.destination);
        let source_commit = source
            .as_ref()
            .and_then(|s| s.commit.as_ref()?.hash.clone())
            .unwrap_or_default();
        let source_branch = source
            .as_ref()
            .and_then(|s| s.branch.as_ref()?.name.clone())
            .unwrap_or_default();
        let source_repository = source
            .as_ref()
            .and_then(|s| s.repository.as_ref()?.full_name.clone())
            .unwrap_or_default();
        let destination_branch = destination
            .as_ref()
            .and_then(|d| d.branch.as_ref()?.name.clone())
            .unwrap_or_default();
        PullRequest {
            id: self.id,
            same_repository: source_repository.eq_ignore_ascii_case(own),
            source_commit,
            source_branch,
            source_repository,
            destination_branch,
        }
    }
}

/// One page of `GET .../pullrequests`: its pull requests and the `next` link. `own` is
/// our repository's `workspace/repo` (to tell forks).
pub(crate) fn parse_pull_requests(
    body: &[u8],
    own: &str,
) -> Result<(Vec<PullRequest>, Option<String>), serde_json::Error> {
    let page: Page<RawPullRequest> = serde_json::from_slice(body)?;
    let prs = page.values.into_iter().map(|p| p.read(own)).collect();
    Ok((prs, page.next))
}

#[derive(Deserialize)]
struct Comment {
    id: u64,
    content: Option<Content>,
    #[serde(default)]
    deleted: bool,
}

#[derive(Deserialize)]
struct Content {
    raw: Option<String>,
}

impl Bitbucket {
    /// Checks the configuration; touches neither the network nor the token file.
    pub fn new(config: BitbucketConfig) -> Result<Bitbucket, StatusError> {
        let BitbucketConfig {
            api_url,
            workspace,
            repo,
            token_file,
        } = config;
        let api_base = base_url(FORGE, &api_url)?;
        non_empty(FORGE, "workspace", &workspace)?;
        non_empty(FORGE, "repository", &repo)?;
        let full_name = format!("{workspace}/{repo}");
        let (workspace, repo) = (encode_segment(&workspace), encode_segment(&repo));
        let repo = BitbucketRepo::new(
            FORGE,
            format!("{api_base}/repositories/{workspace}/{repo}"),
            format!("https://bitbucket.org/{workspace}/{repo}"),
            token_file,
        )?;
        Ok(Bitbucket {
            api_base,
            repo,
            full_name,
        })
    }

    /// The file the token is read from.
    pub(crate) fn token_file(&self) -> &TokenFile {
        self.repo.token_file()
    }

    /// Posts one status (already truncated by the writer), replacing the one of its key.
    pub(crate) async fn post_status(&self, status: &CommitStatus) -> Result<(), StatusError> {
        let path = format!("commit/{}/statuses/build", status.sha);
        self.repo.post_build_status(status, &path, KEY_LIMIT).await
    }

    /// The first comment on pull request `pr` whose body contains `marker`.
    pub(crate) async fn find_comment(
        &self,
        pr: u64,
        marker: &str,
    ) -> Result<Option<(u64, String)>, StatusError> {
        let mut url = format!(
            "{}/pullrequests/{pr}/comments?pagelen={PAGE_SIZE}",
            self.repo.api
        );
        for _ in 0..MAX_PAGES {
            let answer = self.repo.request(Method::GET, &url, None).await?;
            let page: Page<Comment> = self.repo.http.decode("GET", &url, &answer)?;
            let found = page
                .values
                .into_iter()
                .filter(|c| !c.deleted)
                .find_map(|c| {
                    let raw = c.content.and_then(|content| content.raw)?;
                    raw.contains(marker).then_some((c.id, raw))
                });
            if found.is_some() {
                return Ok(found);
            }
            match self.next_page(&url, page.next)? {
                None => break,
                Some(next) => url = next,
            }
        }
        Ok(None)
    }

    /// The `next` link of a page fetched from `url`, checked: the token goes with the
    /// request, so never to another host or outside the API.
    fn next_page(&self, url: &str, next: Option<String>) -> Result<Option<String>, StatusError> {
        match next {
            None => Ok(None),
            Some(next) if next.starts_with(&format!("{}/", self.api_base)) => Ok(Some(next)),
            Some(next) => Err(StatusError::BadResponse {
                forge: FORGE,
                method: "GET",
                url: url.to_string(),
                reason: format!("the next page {next:?} is not under the API base"),
            }),
        }
    }

    /// The repository's open pull requests, every page up to 1000 pull requests (the
    /// rest are left out, with a warning).
    pub(crate) async fn open_pull_requests(&self) -> Result<Vec<PullRequest>, StatusError> {
        let mut url = format!(
            "{}/pullrequests?state=OPEN&pagelen={PULL_REQUEST_PAGE_SIZE}",
            self.repo.api
        );
        let mut all = Vec::new();
        for _ in 0..MAX_PULL_REQUEST_PAGES {
            let answer = self.repo.request(Method::GET, &url, None).await?;
            let (prs, next) = parse_pull_requests(&answer.body, &self.full_name).map_err(|e| {
                StatusError::BadResponse {
                    forge: FORGE,
                    method: "GET",
                    url: url.clone(),
                    reason: format!("not the JSON expected: {e}"),
                }
            })?;
            all.extend(prs);
            match self.next_page(&url, next)? {
                None => return Ok(all),
                Some(next) => url = next,
            }
        }
        tracing::warn!(
            listed = all.len(),
            "more open pull requests than are listed for review; the rest are not reviewed"
        );
        Ok(all)
    }

    /// Creates a comment on pull request `pr`; returns its id.
    pub(crate) async fn create_comment(&self, pr: u64, body: &str) -> Result<u64, StatusError> {
        let url = format!("{}/pullrequests/{pr}/comments", self.repo.api);
        let answer = self
            .repo
            .request(Method::POST, &url, Some(&json!({"content": {"raw": body}})))
            .await?;
        let created: Comment = self.repo.http.decode("POST", &url, &answer)?;
        Ok(created.id)
    }

    /// Replaces the body of comment `id` on pull request `pr`.
    pub(crate) async fn update_comment(
        &self,
        pr: u64,
        id: u64,
        body: &str,
    ) -> Result<(), StatusError> {
        let url = format!("{}/pullrequests/{pr}/comments/{id}", self.repo.api);
        self.repo
            .request(Method::PUT, &url, Some(&json!({"content": {"raw": body}})))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_bitbucket() {
        assert_eq!(state(StatusState::Pending), "INPROGRESS");
        assert_eq!(state(StatusState::Success), "SUCCESSFUL");
        assert_eq!(state(StatusState::Failure), "FAILED");
        assert_eq!(state(StatusState::Error), "FAILED");
    }

    #[test]
    fn bodies_carry_a_fitted_key_and_the_whole_name() {
        let sha = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let context = format!("kubelet-gitops/{}", "x".repeat(40));
        let status = CommitStatus::new(sha, &context, StatusState::Pending, "1/3 nodes");
        let body = build_status_body(&status, KEY_LIMIT, "https://page".into());
        assert_eq!(body["key"].as_str().unwrap().chars().count(), 40);
        assert_eq!(body["name"], context.as_str());
        assert_eq!(body["url"], "https://page");
        assert_eq!(body["state"], "INPROGRESS");
        let linked = status.with_target_url("https://dash");
        let body = build_status_body(&linked, KEY_LIMIT, "https://page".into());
        assert_eq!(body["url"], "https://dash");
    }

    /// A page as Bitbucket Cloud sends it (trimmed of links and users): short hashes, a
    /// fork, a pull request to another branch, a deleted fork without a repository.
    #[test]
    fn pull_requests_are_read_from_a_listing_page() {
        let body = serde_json::json!({
            "pagelen": 50, "size": 4, "page": 1,
            "next": "https://api.bitbucket.org/2.0/repositories/acme/fleet/pullrequests?state=OPEN&pagelen=50&page=2",
            "values": [
                {"type": "pullrequest", "id": 7, "state": "OPEN", "title": "gpu: maxPods 90",
                 "updated_on": "2026-11-28T10:00:00.000000+00:00",
                 "source": {"branch": {"name": "feature/gpu"}, "commit": {"type": "commit", "hash": "4b825dc642cb"},
                            "repository": {"type": "repository", "full_name": "acme/fleet", "name": "fleet"}},
                 "destination": {"branch": {"name": "main"}, "commit": {"hash": "0123456789ab"},
                                 "repository": {"full_name": "acme/fleet"}}},
                {"type": "pullrequest", "id": 8, "state": "OPEN",
                 "source": {"branch": {"name": "main"}, "commit": {"hash": "aaaaaaaaaaaa"},
                            "repository": {"full_name": "someone/fleet"}},
                 "destination": {"branch": {"name": "main"}, "repository": {"full_name": "acme/fleet"}}},
                {"type": "pullrequest", "id": 9, "state": "OPEN",
                 "source": {"branch": {"name": "x"}, "commit": {"hash": "bbbbbbbbbbbb"},
                            "repository": {"full_name": "ACME/Fleet"}},
                 "destination": {"branch": {"name": "staging"}}},
                {"type": "pullrequest", "id": 10, "state": "OPEN",
                 "source": {"branch": {"name": "gone"}, "commit": null, "repository": null},
                 "destination": {"branch": {"name": "main"}}},
            ],
        });
        let (prs, next) = parse_pull_requests(body.to_string().as_bytes(), "acme/fleet").unwrap();
        assert!(next.unwrap().ends_with("&page=2"));
        assert_eq!(
            prs[0],
            PullRequest {
                id: 7,
                source_commit: "4b825dc642cb".into(),
                source_branch: "feature/gpu".into(),
                source_repository: "acme/fleet".into(),
                same_repository: true,
                destination_branch: "main".into(),
            }
        );
        assert!(!prs[1].same_repository, "a fork");
        assert!(prs[2].same_repository, "full names compare without case");
        assert_eq!(prs[2].destination_branch, "staging");
        assert!(!prs[3].same_repository && prs[3].source_commit.is_empty());
        let (prs, next) = parse_pull_requests(br#"{"values": []}"#, "acme/fleet").unwrap();
        assert!(prs.is_empty() && next.is_none());
        assert!(parse_pull_requests(b"<html>", "acme/fleet").is_err());
    }
}
