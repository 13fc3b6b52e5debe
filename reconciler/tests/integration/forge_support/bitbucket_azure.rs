//! Bitbucket Cloud, Bitbucket Data Center and Azure DevOps for the local forge, checked
//! against their documented APIs:
//!
//! - Bitbucket Cloud (`/2.0/repositories/{workspace}/{repo}/...`): build statuses with
//!   `key` (required, at most 40 characters: longer is the forge's "key: Ensure this
//!   value has at most 40 characters" 400), `state` among `INPROGRESS`, `SUCCESSFUL`,
//!   `FAILED`, `STOPPED`, `url` (required, http(s), at most 450), `name` and
//!   `description` (at most 255); a status replaces the one of its key. Comments
//!   `{"content": {"raw"}}`, listed `pagelen` (at most 100) a `page` with an absolute
//!   `next` link. Open pull requests listed with `state=OPEN` (required: we list no
//!   other), `pagelen` at most 50 a `page`, an absolute `next` link, and, as Bitbucket
//!   sends them, the source commit's hash cut to 12 hex digits. Auth `Bearer` or `Basic`.
//! - Bitbucket Data Center (`/bitbucket/rest/api/latest/projects/{key}/repos/{slug}/...`):
//!   builds with the documented fields, `key`, `state` and `url` required, every field
//!   at most 255 characters and `url` 450, states `INPROGRESS`, `SUCCESSFUL`, `FAILED`
//!   (and `CANCELLED`, `UNKNOWN`); comments through the activities (`start`, `limit`,
//!   newest first, `isLastPage`, `nextPageStart`), created `{"text"}`, edited
//!   `{"text", "version"}` at the current version only (409 otherwise). Auth `Bearer` or
//!   `Basic`.
//! - Azure DevOps (`/acme/{project}/_apis/git/repositories/{repo}/...`): every request
//!   with `api-version=7.1`; statuses with `state` among `notSet`, `pending`,
//!   `succeeded`, `failed`, `error`, `notApplicable`, `context: {name (required), genre}`,
//!   `description` (at most 255), `targetUrl`; pull-request threads, created with one
//!   first comment `{"parentCommentId": 0, "content", "commentType": 1}`, its comment 1
//!   edited `{"content"}`. Auth `Basic` with the token as the password.
//!
//! The limits the forges do not document (Bitbucket Cloud's description, Azure's
//! description, every comment) are the ones our backends promise, so a longer one is
//! our bug.

use base64::Engine;

use super::*;

/// The Azure DevOps organization, the last segment of the base URL.
pub const AZURE_ORG: &str = "acme";
/// The Azure DevOps project.
pub const AZURE_PROJECT: &str = "Platform";
/// The Bitbucket Data Center project key.
pub const DC_PROJECT: &str = "OPS";

const CLOUD_STATES: &[&str] = &["INPROGRESS", "SUCCESSFUL", "FAILED", "STOPPED"];
const DC_STATES: &[&str] = &["INPROGRESS", "SUCCESSFUL", "FAILED", "CANCELLED", "UNKNOWN"];
const AZURE_STATES: &[&str] = &[
    "notSet",
    "pending",
    "succeeded",
    "failed",
    "error",
    "notApplicable",
];
const CLOUD_STATUS_FIELDS: &[&str] = &["key", "state", "url", "name", "description", "refname"];
const DC_STATUS_FIELDS: &[&str] = &[
    "key",
    "state",
    "url",
    "name",
    "description",
    "buildNumber",
    "duration",
    "lastUpdated",
    "parent",
    "ref",
    "testResults",
];
const AZURE_STATUS_FIELDS: &[&str] = &["state", "description", "targetUrl", "context"];
const FIELD_LIMIT: usize = 255;
const URL_LIMIT: usize = 450;
const CLOUD_KEY_LIMIT: usize = 40;
const AZURE_DESCRIPTION_LIMIT: usize = 255;

/// An open pull request on Bitbucket Cloud.
#[derive(Debug, Clone)]
pub struct OpenPullRequest {
    pub id: u64,
    pub source_branch: String,
    /// The full commit id; listed cut to 12 digits, as Bitbucket does.
    pub source_commit: String,
    /// `workspace/repo`: [`OWNER`]/[`REPO`] unless from a fork.
    pub source_repository: String,
    pub destination_branch: String,
}

impl OpenPullRequest {
    /// Pull request `id` from `source` (at `commit`) of this repository into `destination`.
    pub fn new(id: u64, source: &str, commit: &str, destination: &str) -> OpenPullRequest {
        OpenPullRequest {
            id,
            source_branch: source.to_string(),
            source_commit: commit.to_string(),
            source_repository: format!("{OWNER}/{REPO}"),
            destination_branch: destination.to_string(),
        }
    }

    /// The same from a fork, `repository`.
    pub fn in_fork(mut self, repository: &str) -> OpenPullRequest {
        self.source_repository = repository.to_string();
        self
    }

    /// As Bitbucket Cloud lists it (trimmed of links and users).
    fn listed(&self) -> Value {
        let end = |branch: &str, hash: &str, repository: &str| {
            json!({
                "branch": {"name": branch},
                "commit": {"type": "commit", "hash": hash},
                "repository": {"type": "repository", "full_name": repository,
                               "name": repository.rsplit('/').next().unwrap_or_default()},
            })
        };
        json!({
            "type": "pullrequest",
            "id": self.id,
            "title": format!("pull request {}", self.id),
            "state": "OPEN",
            "updated_on": "2026-11-28T10:00:00.000000+00:00",
            "source": end(
                &self.source_branch,
                self.source_commit.get(..12).unwrap_or(&self.source_commit),
                &self.source_repository,
            ),
            "destination": end(&self.destination_branch, "0123456789ab", &format!("{OWNER}/{REPO}")),
        })
    }
}

/// The error body each forge answers with.
pub fn error_body(kind: Kind, text: &str) -> Value {
    match kind {
        Kind::BitbucketCloud => json!({"type": "error", "error": {"message": text}}),
        Kind::BitbucketDataCenter => json!({"errors": [{
            "context": null,
            "message": text,
            "exceptionName": "com.atlassian.bitbucket.validation.ArgumentValidationException",
        }]}),
        _ => json!({
            "$id": "1",
            "innerException": null,
            "message": text,
            "typeName": "Microsoft.TeamFoundation.SourceControl.WebServer.InvalidArgumentValueException, Microsoft.TeamFoundation.SourceControl.WebServer",
            "typeKey": "InvalidArgumentValueException",
            "errorCode": 0,
            "eventId": 3000,
        }),
    }
}

/// What a request asks for.
#[derive(Debug, Clone, Copy)]
enum Call<'a> {
    Status { sha: &'a str },
    PullRequests,
    List { pr: &'a str },
    Create { pr: &'a str },
    Get { pr: &'a str, id: &'a str },
    Update { pr: &'a str, id: &'a str },
}

/// Which call `method path` is, or the problem (a 404).
fn route<'a>(kind: Kind, method: &str, path: &'a str) -> Result<Call<'a>, String> {
    let not_found = || format!("no such {kind:?} endpoint");
    let (prefix, pulls) = match kind {
        Kind::BitbucketCloud => (format!("/2.0/repositories/{OWNER}/{REPO}/"), "pullrequests"),
        Kind::BitbucketDataCenter => (
            format!("/bitbucket/rest/api/latest/projects/{DC_PROJECT}/repos/{REPO}/"),
            "pull-requests",
        ),
        _ => (
            format!("/{AZURE_ORG}/{AZURE_PROJECT}/_apis/git/repositories/{REPO}/"),
            "pullRequests",
        ),
    };
    let rest = path.strip_prefix(&prefix).ok_or_else(not_found)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let call = match (kind, method, segments.as_slice()) {
        (Kind::BitbucketCloud, "POST", ["commit", sha, "statuses", "build"])
        | (Kind::BitbucketDataCenter, "POST", ["commits", sha, "builds"])
        | (Kind::AzureDevOps, "POST", ["commits", sha, "statuses"]) => Call::Status { sha },
        (Kind::BitbucketCloud, "GET", [p]) if *p == pulls => Call::PullRequests,
        (Kind::BitbucketCloud, "GET", [p, pr, "comments"])
        | (Kind::BitbucketDataCenter, "GET", [p, pr, "activities"])
        | (Kind::AzureDevOps, "GET", [p, pr, "threads"])
            if *p == pulls =>
        {
            Call::List { pr }
        }
        (Kind::BitbucketCloud | Kind::BitbucketDataCenter, "POST", [p, pr, "comments"])
        | (Kind::AzureDevOps, "POST", [p, pr, "threads"])
            if *p == pulls =>
        {
            Call::Create { pr }
        }
        (Kind::BitbucketDataCenter, "GET", [p, pr, "comments", id]) if *p == pulls => {
            Call::Get { pr, id }
        }
        (Kind::BitbucketCloud, "PUT", [p, pr, "comments", id])
        | (Kind::BitbucketDataCenter, "PUT", [p, pr, "comments", id])
        | (Kind::AzureDevOps, "PATCH", [p, pr, "threads", id, "comments", "1"])
            if *p == pulls =>
        {
            Call::Update { pr, id }
        }
        _ => return Err(not_found()),
    };
    Ok(call)
}

/// A string field of at most `limit` characters, if present; the problems otherwise.
fn text_field(
    body: &serde_json::Map<String, Value>,
    key: &str,
    required: bool,
    limit: usize,
    problems: &mut Vec<String>,
) -> Option<String> {
    match body.get(key) {
        None if required => {
            problems.push(format!("missing required field {key:?}"));
            None
        }
        None => None,
        Some(Value::String(v)) if v.is_empty() && required => {
            problems.push(format!("{key} is empty"));
            None
        }
        Some(Value::String(v)) => {
            let n = v.chars().count();
            if n > limit {
                problems.push(format!(
                    "{key}: Ensure this value has at most {limit} characters (it has {n})."
                ));
            }
            Some(v.clone())
        }
        Some(other) => {
            problems.push(format!("{key} {other} is not a string"));
            None
        }
    }
}

fn only_fields(
    body: &serde_json::Map<String, Value>,
    allowed: &[&str],
    problems: &mut Vec<String>,
) {
    for key in body.keys() {
        if !allowed.contains(&key.as_str()) {
            problems.push(format!("unknown field {key:?}"));
        }
    }
}

fn is_http_url(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("http://")
}

impl ServerState {
    /// `Authorization: Bearer` or `Basic` (Bitbucket), `Basic` with the token as the
    /// password (Azure DevOps); a well-formed header with the wrong token is a 401.
    pub(super) fn check_bitbucket_azure_auth(
        &self,
        headers: &HeaderMap,
        problems: &mut Vec<String>,
    ) -> Result<(), Answer> {
        let values: Vec<&str> = headers
            .get_all("authorization")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let [value] = values.as_slice() else {
            problems.push(format!("{} Authorization headers", values.len()));
            return Ok(());
        };
        let basic = |encoded: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
        };
        let presented = match (self.kind, value.split_once(' ')) {
            (Kind::BitbucketCloud | Kind::BitbucketDataCenter, Some(("Bearer", token))) => {
                Some(token.to_string())
            }
            (Kind::BitbucketCloud | Kind::BitbucketDataCenter, Some(("Basic", encoded))) => {
                basic(encoded)
            }
            // Any user, the token as the password.
            (Kind::AzureDevOps, Some(("Basic", encoded))) => basic(encoded)
                .and_then(|pair| pair.split_once(':').map(|(_, token)| token.to_string())),
            _ => None,
        };
        let Some(presented) = presented else {
            problems.push(format!(
                "Authorization is not of the form {kind:?} takes",
                kind = self.kind
            ));
            return Ok(());
        };
        if presented == self.token {
            return Ok(());
        }
        let message = match self.kind {
            Kind::BitbucketCloud => {
                "Token is invalid, expired, or not supported for this endpoint."
            }
            Kind::BitbucketDataCenter => {
                "Authentication failed. Please check your credentials and try again."
            }
            _ => "TF400813: The user '' is not authorized to access this resource.",
        };
        Err(plain(401, error_body(self.kind, message)))
    }

    pub(super) fn serve_bitbucket_azure(
        &mut self,
        method: &Method,
        uri: &Uri,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Answer {
        let params = parse_query(uri.query().unwrap_or_default());
        if self.kind == Kind::AzureDevOps
            && params.get("api-version").map(String::as_str) != Some("7.1")
        {
            let problem = format!("api-version {:?}, not 7.1", params.get("api-version"));
            return self.violation(method, uri, vec![problem], 400);
        }
        let call = match route(self.kind, method.as_str(), uri.path()) {
            Ok(call) => call,
            Err(problem) => return self.violation(method, uri, vec![problem], 404),
        };
        let number = |n: &str| {
            n.parse::<u64>()
                .map_err(|_| format!("{n:?} is not a number"))
        };
        let result = match call {
            Call::Status { sha } => self.post_status(sha, body),
            Call::PullRequests => self.list_pull_requests(&params),
            Call::List { pr } => number(pr)
                .map_err(|p| vec![p])
                .and_then(|pr| self.list(pr, &params)),
            Call::Create { pr } => number(pr)
                .map_err(|p| vec![p])
                .and_then(|pr| self.create(pr, body)),
            Call::Get { pr, id } => match (number(pr), number(id)) {
                (Ok(pr), Ok(id)) => Ok(match self.find(pr, id) {
                    Some(c) => plain(
                        200,
                        json!({"id": c.id, "version": c.version, "text": c.body}),
                    ),
                    None => plain(
                        404,
                        error_body(self.kind, &format!("no comment {id} on {pr}")),
                    ),
                }),
                (pr, id) => Err([pr.err(), id.err()].into_iter().flatten().collect()),
            },
            Call::Update { pr, id } => match (number(pr), number(id)) {
                (Ok(pr), Ok(id)) => self.update(pr, id, body),
                (pr, id) => Err([pr.err(), id.err()].into_iter().flatten().collect()),
            },
        };
        match result {
            Ok(answer) => answer,
            Err(problems) => self.violation(method, uri, problems, 400),
        }
    }

    fn post_status(
        &mut self,
        sha: &str,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Result<Answer, Vec<String>> {
        let mut problems = Vec::new();
        if !((sha.len() == 40 || sha.len() == 64) && sha.bytes().all(|b| b.is_ascii_hexdigit())) {
            problems.push(format!("sha {sha:?} is not a full commit id"));
        }
        let body = body.ok_or_else(|| vec!["no JSON body".to_string()])?;
        let p = &mut problems;
        let (context, name, state, description, target_url) = match self.kind {
            Kind::AzureDevOps => {
                only_fields(&body, AZURE_STATUS_FIELDS, p);
                let state = text_field(&body, "state", true, FIELD_LIMIT, p);
                let description =
                    text_field(&body, "description", false, AZURE_DESCRIPTION_LIMIT, p);
                let target = text_field(&body, "targetUrl", false, usize::MAX, p);
                let context = match body.get("context") {
                    Some(Value::Object(c)) => {
                        only_fields(c, &["name", "genre"], p);
                        let name = text_field(c, "name", true, usize::MAX, p);
                        let genre = text_field(c, "genre", false, usize::MAX, p);
                        name.map(|n| match genre {
                            Some(g) => format!("{g}/{n}"),
                            None => n,
                        })
                    }
                    other => {
                        p.push(format!("context {other:?} is not an object with a name"));
                        None
                    }
                };
                (context, None, state, description, target)
            }
            kind => {
                let (fields, key_limit) = if kind == Kind::BitbucketCloud {
                    (CLOUD_STATUS_FIELDS, CLOUD_KEY_LIMIT)
                } else {
                    (DC_STATUS_FIELDS, FIELD_LIMIT)
                };
                only_fields(&body, fields, p);
                let key = text_field(&body, "key", true, key_limit, p);
                let state = text_field(&body, "state", true, FIELD_LIMIT, p);
                let url = text_field(&body, "url", true, URL_LIMIT, p);
                let name = text_field(&body, "name", false, FIELD_LIMIT, p);
                let description = text_field(&body, "description", false, FIELD_LIMIT, p);
                (key, name, state, description, url)
            }
        };
        let states = match self.kind {
            Kind::BitbucketCloud => CLOUD_STATES,
            Kind::BitbucketDataCenter => DC_STATES,
            _ => AZURE_STATES,
        };
        if let Some(state) = &state
            && !states.contains(&state.as_str())
        {
            problems.push(format!("state {state:?} not one of {states:?}"));
        }
        if let Some(url) = target_url.as_deref().filter(|u| !is_http_url(u)) {
            problems.push(format!("url {url:?} is not an http(s) URL"));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        self.statuses.push(RecordedStatus {
            sha: sha.to_string(),
            context: context.unwrap_or_default(),
            name,
            state: state.unwrap_or_default(),
            description: description.unwrap_or_default(),
            target_url,
            at: Instant::now(),
        });
        let id = self.statuses.len() as u64;
        Ok(match self.kind {
            // Data Center answers 204 No Content.
            Kind::BitbucketDataCenter => plain(204, Value::Null),
            Kind::BitbucketCloud => {
                let mut echo = Value::Object(body);
                echo["type"] = json!("build");
                plain(201, echo)
            }
            _ => {
                let mut echo = Value::Object(body);
                echo["id"] = json!(id);
                plain(201, echo)
            }
        })
    }

    /// Bitbucket Cloud's open pull requests, `pagelen` (at most 50) a `page`.
    fn list_pull_requests(&self, params: &BTreeMap<String, String>) -> Result<Answer, Vec<String>> {
        let mut problems = Vec::new();
        if params.get("state").map(String::as_str) != Some("OPEN") {
            problems.push(format!("state {:?}, not OPEN", params.get("state")));
        }
        let number = |key: &str, default: usize, problems: &mut Vec<String>| match params.get(key) {
            None => default,
            Some(v) => v.parse().unwrap_or_else(|_| {
                problems.push(format!("{key} {v:?} is not a number"));
                default
            }),
        };
        let (pagelen, page) = (
            number("pagelen", 10, &mut problems),
            number("page", 1, &mut problems),
        );
        if !(1..=50).contains(&pagelen) || page == 0 {
            problems.push(format!("pagelen {pagelen} / page {page} out of range"));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let all = &self.pull_requests;
        let values: Vec<Value> = all
            .iter()
            .skip(pagelen * (page - 1))
            .take(pagelen)
            .map(OpenPullRequest::listed)
            .collect();
        let mut answer = json!({
            "pagelen": pagelen, "page": page, "size": all.len(), "values": values,
        });
        if pagelen * page < all.len() {
            answer["next"] = json!(format!(
                "{}/2.0/repositories/{OWNER}/{REPO}/pullrequests?state=OPEN&pagelen={pagelen}&page={}",
                self.origin,
                page + 1
            ));
        }
        Ok(plain(200, answer))
    }

    /// The comments (Cloud), activities (Data Center) or threads (Azure) of `pr`.
    fn list(&self, pr: u64, params: &BTreeMap<String, String>) -> Result<Answer, Vec<String>> {
        let all: Vec<&Comment> = self
            .comments
            .get(&pr)
            .map(|cs| cs.iter().collect())
            .unwrap_or_default();
        let number = |key: &str, default: usize| -> Result<usize, Vec<String>> {
            match params.get(key) {
                None => Ok(default),
                Some(v) => v
                    .parse()
                    .map_err(|_| vec![format!("{key} {v:?} is not a number")]),
            }
        };
        match self.kind {
            Kind::BitbucketCloud => {
                let (pagelen, page) = (number("pagelen", 10)?, number("page", 1)?);
                if !(1..=100).contains(&pagelen) || page == 0 {
                    return Err(vec![format!(
                        "pagelen {pagelen} / page {page} out of range"
                    )]);
                }
                let values: Vec<Value> = all
                    .iter()
                    .skip(pagelen * (page - 1))
                    .take(pagelen)
                    .map(|c| {
                        json!({
                            "type": "pullrequest_comment",
                            "id": c.id,
                            "content": {"raw": c.body, "markup": "markdown", "html": ""},
                            "deleted": false,
                        })
                    })
                    .collect();
                let mut answer = json!({
                    "pagelen": pagelen, "page": page, "size": all.len(), "values": values,
                });
                if pagelen * page < all.len() {
                    answer["next"] = json!(format!(
                        "{}/2.0/repositories/{OWNER}/{REPO}/pullrequests/{pr}/comments?pagelen={pagelen}&page={}",
                        self.origin,
                        page + 1
                    ));
                }
                Ok(plain(200, answer))
            }
            Kind::BitbucketDataCenter => {
                let (start, limit) = (number("start", 0)?, number("limit", 25)?);
                if limit == 0 || limit > 1000 {
                    return Err(vec![format!("limit {limit} out of range")]);
                }
                // Newest first, as Data Center lists activities.
                let values: Vec<Value> = all
                    .iter()
                    .rev()
                    .skip(start)
                    .take(limit)
                    .map(|c| {
                        json!({
                            "id": c.id + 500_000,
                            "action": "COMMENTED",
                            "commentAction": "ADDED",
                            "comment": {"id": c.id, "version": c.version, "text": c.body},
                        })
                    })
                    .collect();
                let last = start + limit >= all.len();
                let mut answer = json!({
                    "size": values.len(), "limit": limit, "start": start,
                    "isLastPage": last, "values": values,
                });
                if !last {
                    answer["nextPageStart"] = json!(start + limit);
                }
                Ok(plain(200, answer))
            }
            _ => {
                let threads: Vec<Value> = all
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "status": if c.system { "unknown" } else { "active" },
                            "isDeleted": false,
                            "comments": [{
                                "id": 1,
                                "parentCommentId": 0,
                                "content": c.body,
                                "commentType": if c.system { "system" } else { "text" },
                                "isDeleted": false,
                            }],
                        })
                    })
                    .collect();
                Ok(plain(200, json!({"value": threads, "count": all.len()})))
            }
        }
    }

    /// The text of a new comment or thread, checked.
    fn create(
        &mut self,
        pr: u64,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Result<Answer, Vec<String>> {
        let body = body.ok_or_else(|| vec!["no JSON body".to_string()])?;
        let text = self.comment_text(&body, false)?;
        let id = self.add_comment(pr, text.clone(), false);
        Ok(match self.kind {
            Kind::BitbucketCloud => plain(201, json!({"id": id, "content": {"raw": text}})),
            Kind::BitbucketDataCenter => plain(201, json!({"id": id, "version": 0, "text": text})),
            _ => plain(
                200,
                json!({"id": id, "status": "active", "comments": [{"id": 1, "parentCommentId": 0, "content": text, "commentType": "text"}]}),
            ),
        })
    }

    fn update(
        &mut self,
        pr: u64,
        id: u64,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Result<Answer, Vec<String>> {
        let body = body.ok_or_else(|| vec!["no JSON body".to_string()])?;
        let text = self.comment_text(&body, true)?;
        let kind = self.kind;
        let version = body.get("version").and_then(Value::as_u64);
        let Some(comment) = self
            .comments
            .get_mut(&pr)
            .and_then(|cs| cs.iter_mut().find(|c| c.id == id && !c.system))
        else {
            return Ok(plain(
                404,
                error_body(kind, &format!("no comment {id} on {pr}")),
            ));
        };
        if kind == Kind::BitbucketDataCenter && version != Some(comment.version) {
            return Ok(plain(
                409,
                json!({"errors": [{
                    "context": null,
                    "message": "You are attempting to modify a comment based on out-of-date information.",
                    "exceptionName": "com.atlassian.bitbucket.comment.CommentOutOfDateException",
                    "currentVersion": comment.version,
                }]}),
            ));
        }
        comment.body = text.clone();
        comment.version += 1;
        Ok(plain(
            200,
            json!({"id": id, "version": comment.version, "text": text}),
        ))
    }

    /// The comment's text from a create (`update` false) or edit body, in the forge's
    /// shape, within our limit.
    fn comment_text(
        &self,
        body: &serde_json::Map<String, Value>,
        update: bool,
    ) -> Result<String, Vec<String>> {
        let mut problems = Vec::new();
        let p = &mut problems;
        let (text, limit) = match (self.kind, update) {
            (Kind::BitbucketCloud, _) => {
                only_fields(body, &["content"], p);
                let text = match body.get("content") {
                    Some(Value::Object(c)) => {
                        only_fields(c, &["raw"], p);
                        text_field(c, "raw", true, usize::MAX, p)
                    }
                    other => {
                        p.push(format!("content {other:?} is not an object"));
                        None
                    }
                };
                (text, 65_536)
            }
            (Kind::BitbucketDataCenter, update) => {
                let fields: &[&str] = if update {
                    &["text", "version"]
                } else {
                    &["text"]
                };
                only_fields(body, fields, p);
                if update && !body.get("version").is_some_and(Value::is_u64) {
                    p.push("an edit needs the comment's version".into());
                }
                (text_field(body, "text", true, usize::MAX, p), 32_768)
            }
            (_, true) => {
                only_fields(body, &["content"], p);
                (text_field(body, "content", true, usize::MAX, p), 65_536)
            }
            (_, false) => {
                only_fields(body, &["comments", "status"], p);
                if !matches!(body.get("status"), Some(v) if *v == json!(1) || *v == json!("active"))
                {
                    p.push(format!("status {:?} is not active", body.get("status")));
                }
                let text = match body.get("comments") {
                    Some(Value::Array(comments)) if comments.len() == 1 => match &comments[0] {
                        Value::Object(c) => {
                            only_fields(c, &["parentCommentId", "content", "commentType"], p);
                            if c.get("parentCommentId") != Some(&json!(0)) {
                                p.push("the first comment's parentCommentId is not 0".into());
                            }
                            if !matches!(c.get("commentType"), Some(v) if *v == json!(1) || *v == json!("text"))
                            {
                                p.push("commentType is not text".into());
                            }
                            text_field(c, "content", true, usize::MAX, p)
                        }
                        other => {
                            p.push(format!("comment {other} is not an object"));
                            None
                        }
                    },
                    other => {
                        p.push(format!("comments {other:?} is not one comment"));
                        None
                    }
                };
                (text, 65_536)
            }
        };
        if let Some(text) = &text
            && text.chars().count() > limit
        {
            problems.push(format!(
                "comment of {} characters, limit {limit}",
                text.chars().count()
            ));
        }
        match text {
            Some(text) if problems.is_empty() => Ok(text),
            _ => Err(problems),
        }
    }

    fn find(&self, pr: u64, id: u64) -> Option<&Comment> {
        self.comments.get(&pr)?.iter().find(|c| c.id == id)
    }
}
