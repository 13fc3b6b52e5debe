//! A local forge for tests: an axum server on 127.0.0.1 that plays GitHub (or GitHub
//! Enterprise Server under `/api/v3`), GitLab or Gitea, and checks every request
//! against the forge's documented API before answering:
//!
//! - method and path shape (`/repos/{owner}/{repo}/statuses/{sha}`,
//!   `/api/v4/projects/{id or url-encoded path}/statuses/{sha}`, ...);
//! - the auth header's form (`Authorization: Bearer`, `PRIVATE-TOKEN`,
//!   `Authorization: token`) and value; GitHub's `Accept`, `X-GitHub-Api-Version` and
//!   User-Agent;
//! - `Content-Type: application/json` on writes and a JSON object body with only the
//!   documented fields, required ones present, states among the allowed values and
//!   descriptions within the length limit.
//!
//! A request that breaks a rule is answered like the forge would (404, 400, 422) and
//! recorded in [`ForgeServer::violations`]; tests assert there are none. A wrong token
//! is answered 401 (that is the forge working, not a client bug). Accepted statuses are
//! recorded with their arrival time. The server can be told to be down (500s), or to
//! answer the next requests with 429 + `Retry-After`, GitHub's rate-limit 403, or
//! GitLab's rate-limit 429.
//!
//! GitLab's refusal to move a status to the state it already has ("Cannot transition
//! status via :run from :running", 400) is played too.

#![allow(dead_code)] // Each test binary uses part of the support module.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

pub const OWNER: &str = "acme";
pub const REPO: &str = "cluster-config";
pub const GITLAB_PROJECT_ID: u64 = 42;
pub const GITLAB_PROJECT_PATH: &str = "platform/k8s/cluster-config";

/// Which forge the server plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    GitHub,
    /// GitHub Enterprise Server: the same API under `/api/v3`.
    GitHubEnterprise,
    GitLab,
    Gitea,
}

/// How the next request is answered instead of normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 500.
    ServerError,
    /// 429 with `Retry-After: <secs>`.
    RetryAfter(u64),
    /// GitHub's primary rate limit: 403, `x-ratelimit-remaining: 0`, and
    /// `x-ratelimit-reset` this many seconds after the next whole second.
    GitHubRateLimit { reset_in: u64 },
    /// GitLab's rate limit: 429 with `RateLimit-Remaining: 0` and `RateLimit-Reset`
    /// (Unix seconds), no `Retry-After`.
    GitLabRateLimit { reset_in: u64 },
    /// The request is carried out, but the answer is lost (a 502 from a proxy).
    LostAnswer,
}

/// A status the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedStatus {
    pub sha: String,
    pub context: String,
    /// In the forge's terms (`running`, `failed`, ...).
    pub state: String,
    pub description: String,
    pub target_url: Option<String>,
    pub at: Instant,
}

/// Any request the server saw, and how it answered.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, as sent (percent-encoding kept).
    pub path: String,
    pub answer: u16,
    pub at: Instant,
    pub wall: SystemTime,
}

/// Answers for faults that carry a time: the reset instant they announced.
#[derive(Debug, Clone, Copy)]
pub struct AnnouncedReset {
    pub unix_secs: u64,
}

#[derive(Debug)]
struct Comment {
    id: u64,
    body: String,
    system: bool,
}

#[derive(Debug)]
struct ServerState {
    kind: Kind,
    token: String,
    down: bool,
    faults: VecDeque<Fault>,
    method_faults: VecDeque<(String, Fault)>,
    statuses: Vec<RecordedStatus>,
    requests: Vec<RecordedRequest>,
    violations: Vec<String>,
    comments: BTreeMap<u64, Vec<Comment>>,
    next_id: u64,
    resets: Vec<AnnouncedReset>,
}

/// A running fake forge.
pub struct ForgeServer {
    addr: SocketAddr,
    kind: Kind,
    state: Arc<Mutex<ServerState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ForgeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ForgeServer {
    /// Starts a server playing `kind` that accepts `token`.
    pub async fn start(kind: Kind, token: &str) -> ForgeServer {
        let state = Arc::new(Mutex::new(ServerState {
            kind,
            token: token.to_string(),
            down: false,
            faults: VecDeque::new(),
            method_faults: VecDeque::new(),
            statuses: Vec::new(),
            requests: Vec::new(),
            violations: Vec::new(),
            comments: BTreeMap::new(),
            next_id: 1000,
            resets: Vec::new(),
        }));
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        ForgeServer {
            addr,
            kind,
            state,
            task,
        }
    }

    /// The base URL a client is configured with: the API base for GitHub
    /// (`http://127.0.0.1:PORT`, or `.../api/v3` for Enterprise), the instance URL for
    /// GitLab and Gitea.
    pub fn base_url(&self) -> String {
        match self.kind {
            Kind::GitHubEnterprise => format!("http://{}/api/v3", self.addr),
            _ => format!("http://{}", self.addr),
        }
    }

    /// The statuses accepted, in arrival order.
    pub fn statuses(&self) -> Vec<RecordedStatus> {
        self.lock().statuses.clone()
    }

    /// Every request seen, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// Requests that broke the documented API.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// The reset times announced by rate-limit faults.
    pub fn announced_resets(&self) -> Vec<AnnouncedReset> {
        self.lock().resets.clone()
    }

    /// While down, every request gets a 500.
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// The next requests are answered with these faults, one each, in order.
    pub fn inject(&self, faults: impl IntoIterator<Item = Fault>) {
        self.lock().faults.extend(faults);
    }

    /// The next request with this method is answered with `fault` (others pass).
    pub fn inject_on(&self, method: &str, fault: Fault) {
        self.lock()
            .method_faults
            .push_back((method.to_string(), fault));
    }

    /// Adds comments (by someone else) to pull request `pr`.
    pub fn seed_comments(&self, pr: u64, bodies: impl IntoIterator<Item = String>) {
        let mut state = self.lock();
        for body in bodies {
            state.next_id += 1;
            let id = state.next_id;
            state.comments.entry(pr).or_default().push(Comment {
                id,
                body,
                system: false,
            });
        }
    }

    /// Adds a GitLab system note ("added 1 commit") to merge request `pr`.
    pub fn seed_system_note(&self, pr: u64, body: &str) {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.comments.entry(pr).or_default().push(Comment {
            id,
            body: body.to_string(),
            system: true,
        });
    }

    /// The comments on pull request `pr`: (id, body), oldest first.
    pub fn comments(&self, pr: u64) -> Vec<(u64, String)> {
        self.lock()
            .comments
            .get(&pr)
            .map(|cs| cs.iter().map(|c| (c.id, c.body.clone())).collect())
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ServerState> {
        self.state.lock().expect("forge state")
    }
}

async fn handle(
    State(state): State<Arc<Mutex<ServerState>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut state = state.lock().expect("forge state");
    let (status, extra, payload) = state.answer(&method, &uri, &headers, &body);
    state.requests.push(RecordedRequest {
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        answer: status,
        at: Instant::now(),
        wall: SystemTime::now(),
    });
    let mut response = Response::builder()
        .status(StatusCode::from_u16(status).expect("status code"))
        .header("content-type", "application/json");
    for (name, value) in extra {
        response = response.header(name, value);
    }
    response
        .body(Body::from(payload.to_string()))
        .expect("response")
}

type Answer = (u16, Vec<(&'static str, String)>, Value);

fn plain(status: u16, payload: Value) -> Answer {
    (status, Vec::new(), payload)
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

impl ServerState {
    fn answer(&mut self, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Answer {
        if self.down {
            return plain(500, json!({"message": "Server Error"}));
        }
        let mut fault = self.faults.pop_front();
        if fault.is_none()
            && self
                .method_faults
                .front()
                .is_some_and(|(m, _)| m == method.as_str())
        {
            fault = self.method_faults.pop_front().map(|(_, f)| f);
        }
        match fault {
            Some(Fault::LostAnswer) => {
                let _ = self.serve(method, uri, headers, body);
                return plain(502, json!({"message": "Bad Gateway"}));
            }
            Some(fault) => return self.fault(fault),
            None => {}
        }
        self.serve(method, uri, headers, body)
    }

    fn serve(&mut self, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Answer {
        let mut problems = Vec::new();
        let auth = self.check_headers(method, headers, &mut problems);
        let json_body = self.check_body(method, headers, body, &mut problems);
        if !problems.is_empty() {
            return self.violation(method, uri, problems, 400);
        }
        if let Err(answer) = auth {
            return answer;
        }
        let path = uri.path().to_string();
        let query = uri.query().unwrap_or_default().to_string();
        match self.kind {
            Kind::GitHub | Kind::GitHubEnterprise => {
                let prefix = if self.kind == Kind::GitHubEnterprise {
                    "/api/v3"
                } else {
                    ""
                };
                match path.strip_prefix(prefix) {
                    Some(rest) => self.github(method, uri, rest, &query, json_body),
                    None => self.violation(method, uri, vec!["not under /api/v3".into()], 404),
                }
            }
            Kind::GitLab => self.gitlab(method, uri, &path, &query, json_body),
            Kind::Gitea => self.gitea(method, uri, &path, json_body),
        }
    }

    fn fault(&mut self, fault: Fault) -> Answer {
        match fault {
            Fault::ServerError => plain(500, json!({"message": "Server Error"})),
            Fault::LostAnswer => plain(502, json!({"message": "Bad Gateway"})),
            Fault::RetryAfter(secs) => (
                429,
                vec![("retry-after", secs.to_string())],
                json!({"message": "Too Many Requests"}),
            ),
            Fault::GitHubRateLimit { reset_in } => {
                let reset = now_unix() + 1 + reset_in;
                self.resets.push(AnnouncedReset { unix_secs: reset });
                (
                    403,
                    vec![
                        ("x-ratelimit-limit", "5000".to_string()),
                        ("x-ratelimit-remaining", "0".to_string()),
                        ("x-ratelimit-used", "5000".to_string()),
                        ("x-ratelimit-reset", reset.to_string()),
                        ("x-ratelimit-resource", "core".to_string()),
                    ],
                    json!({
                        "message": "API rate limit exceeded for user ID 1.",
                        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                    }),
                )
            }
            Fault::GitLabRateLimit { reset_in } => {
                let reset = now_unix() + 1 + reset_in;
                self.resets.push(AnnouncedReset { unix_secs: reset });
                (
                    429,
                    vec![
                        ("ratelimit-limit", "600".to_string()),
                        ("ratelimit-observed", "601".to_string()),
                        ("ratelimit-remaining", "0".to_string()),
                        ("ratelimit-reset", reset.to_string()),
                    ],
                    json!({"message": "Retry later"}),
                )
            }
        }
    }

    fn violation(
        &mut self,
        method: &Method,
        uri: &Uri,
        problems: Vec<String>,
        status: u16,
    ) -> Answer {
        let text = format!("{method} {uri}: {}", problems.join("; "));
        self.violations.push(text.clone());
        let payload = match self.kind {
            Kind::GitHub | Kind::GitHubEnterprise if status == 422 => {
                json!({"message": "Validation Failed", "errors": [{"message": text}]})
            }
            Kind::GitHub | Kind::GitHubEnterprise if status == 404 => {
                json!({"message": "Not Found"})
            }
            _ => json!({"message": text}),
        };
        plain(status, payload)
    }

    /// The auth header's form is checked (a wrong form is a violation); a well-formed
    /// header with the wrong token is a 401, as the forge would answer.
    fn check_headers(
        &self,
        method: &Method,
        headers: &HeaderMap,
        problems: &mut Vec<String>,
    ) -> Result<(), Answer> {
        let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let (name, prefix) = match self.kind {
            Kind::GitHub | Kind::GitHubEnterprise => ("authorization", "Bearer "),
            Kind::GitLab => ("private-token", ""),
            Kind::Gitea => ("authorization", "token "),
        };
        let presented = match get(name) {
            None => {
                problems.push(format!("missing {name} header"));
                return Ok(());
            }
            Some(value) => match value.strip_prefix(prefix) {
                Some(token) => token.to_string(),
                None => {
                    problems.push(format!("{name} header does not start with {prefix:?}"));
                    return Ok(());
                }
            },
        };
        if matches!(self.kind, Kind::GitLab) && headers.contains_key("authorization") {
            problems.push("GitLab request carries both PRIVATE-TOKEN and Authorization".into());
        }
        if matches!(self.kind, Kind::GitHub | Kind::GitHubEnterprise) {
            if get("accept") != Some("application/vnd.github+json") {
                problems.push(format!(
                    "Accept is {:?}, not application/vnd.github+json",
                    get("accept")
                ));
            }
            if get("x-github-api-version") != Some("2022-11-28") {
                problems.push(format!(
                    "X-GitHub-Api-Version is {:?}, not 2022-11-28",
                    get("x-github-api-version")
                ));
            }
            if get("user-agent").is_none_or(str::is_empty) {
                problems.push("no User-Agent (GitHub rejects such requests)".into());
            }
        }
        if headers.get_all(name).iter().count() > 1 {
            problems.push(format!("{name} sent more than once"));
        }
        let _ = method;
        if presented != self.token {
            let message = match self.kind {
                Kind::GitHub | Kind::GitHubEnterprise => "Bad credentials",
                Kind::GitLab => "401 Unauthorized",
                Kind::Gitea => "token is required",
            };
            return Err(plain(401, json!({"message": message})));
        }
        Ok(())
    }

    fn check_body(
        &self,
        method: &Method,
        headers: &HeaderMap,
        body: &Bytes,
        problems: &mut Vec<String>,
    ) -> Option<serde_json::Map<String, Value>> {
        if *method == Method::GET {
            if !body.is_empty() {
                problems.push("GET with a body".into());
            }
            return None;
        }
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !content_type.starts_with("application/json") {
            problems.push(format!(
                "Content-Type is {content_type:?}, not application/json"
            ));
        }
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => Some(map),
            Ok(other) => {
                problems.push(format!("body is not a JSON object: {other}"));
                None
            }
            Err(e) => {
                problems.push(format!("body is not JSON: {e}"));
                None
            }
        }
    }

    fn github(
        &mut self,
        method: &Method,
        uri: &Uri,
        path: &str,
        query: &str,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Answer {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (method.as_str(), segments.as_slice()) {
            ("POST", ["repos", owner, repo, "statuses", sha]) if self.is_repo(owner, repo) => {
                let problems = check_status_fields(
                    body.as_ref(),
                    &["state", "target_url", "description", "context"],
                    &["state"],
                    "state",
                    &["error", "failure", "pending", "success"],
                    "context",
                    140,
                    sha,
                );
                if !problems.is_empty() {
                    return self.violation(method, uri, problems, 422);
                }
                let body = body.unwrap_or_default();
                self.record_status(sha, &body, "context");
                plain(201, status_echo(&body, self.statuses.len() as u64))
            }
            ("GET", ["repos", owner, repo, "issues", pr, "comments"])
                if self.is_repo(owner, repo) =>
            {
                let Ok(pr) = pr.parse::<u64>() else {
                    return self.violation(
                        method,
                        uri,
                        vec!["pull number not numeric".into()],
                        404,
                    );
                };
                let params = parse_query(query);
                let per_page = params
                    .get("per_page")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(30);
                let page = params
                    .get("page")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(1);
                if per_page == 0 || per_page > 100 || page == 0 {
                    return self.violation(
                        method,
                        uri,
                        vec![format!("per_page {per_page} / page {page} out of range")],
                        422,
                    );
                }
                plain(200, self.comment_page(pr, per_page, page, false))
            }
            ("POST", ["repos", owner, repo, "issues", pr, "comments"])
                if self.is_repo(owner, repo) =>
            {
                let Ok(pr) = pr.parse::<u64>() else {
                    return self.violation(
                        method,
                        uri,
                        vec!["pull number not numeric".into()],
                        404,
                    );
                };
                match self.comment_body(body.as_ref(), 65_536) {
                    Ok(text) => plain(201, self.create_comment(pr, text)),
                    Err(problems) => self.violation(method, uri, problems, 422),
                }
            }
            ("PATCH", ["repos", owner, repo, "issues", "comments", id])
                if self.is_repo(owner, repo) =>
            {
                match self.comment_body(body.as_ref(), 65_536) {
                    Ok(text) => self.update_comment(id, text),
                    Err(problems) => self.violation(method, uri, problems, 422),
                }
            }
            _ => self.violation(method, uri, vec!["no such GitHub endpoint".into()], 404),
        }
    }

    fn gitlab(
        &mut self,
        method: &Method,
        uri: &Uri,
        path: &str,
        query: &str,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Answer {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (method.as_str(), segments.as_slice()) {
            ("POST", ["api", "v4", "projects", project, "statuses", sha]) => {
                if !is_gitlab_project(project) {
                    return self.violation(
                        method,
                        uri,
                        vec![format!(
                            "project {project:?} is neither the id nor the URL-encoded path"
                        )],
                        404,
                    );
                }
                let problems = check_status_fields(
                    body.as_ref(),
                    &[
                        "state",
                        "ref",
                        "name",
                        "context",
                        "target_url",
                        "description",
                        "coverage",
                        "pipeline_id",
                    ],
                    &["state"],
                    "state",
                    &[
                        "pending", "running", "success", "failed", "canceled", "skipped",
                    ],
                    "name",
                    255,
                    sha,
                );
                if !problems.is_empty() {
                    return self.violation(method, uri, problems, 400);
                }
                let body = body.unwrap_or_default();
                let name = body
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("default");
                let new = body
                    .get("state")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let current = self
                    .statuses
                    .iter()
                    .rev()
                    .find(|s| s.sha == *sha && s.context == name)
                    .map(|s| s.state.clone());
                // GitLab finds the running-or-pending status of that name and fires the
                // transition; firing `run` on running or `enqueue` on pending is refused.
                let refused = match (current.as_deref(), new) {
                    (Some("running"), "running") => Some(("run", "running")),
                    (Some("pending"), "pending") => Some(("enqueue", "pending")),
                    _ => None,
                };
                if let Some((event, from)) = refused {
                    return plain(
                        400,
                        json!({"message": format!("Cannot transition status via :{event} from :{from} (Reason(s): Status cannot transition via \"{event}\")")}),
                    );
                }
                self.record_status(sha, &body, "name");
                plain(201, status_echo(&body, self.statuses.len() as u64))
            }
            (
                "GET",
                [
                    "api",
                    "v4",
                    "projects",
                    project,
                    "merge_requests",
                    iid,
                    "notes",
                ],
            ) if is_gitlab_project(project) => {
                let Ok(iid) = iid.parse::<u64>() else {
                    return self.violation(
                        method,
                        uri,
                        vec!["merge request iid not numeric".into()],
                        404,
                    );
                };
                let params = parse_query(query);
                let per_page = params
                    .get("per_page")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(20);
                let page = params
                    .get("page")
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(1);
                if per_page == 0 || per_page > 100 || page == 0 {
                    return self.violation(
                        method,
                        uri,
                        vec![format!("per_page {per_page} / page {page} out of range")],
                        400,
                    );
                }
                if let Some(sort) = params.get("sort")
                    && sort != "asc"
                    && sort != "desc"
                {
                    return self.violation(method, uri, vec![format!("sort {sort:?}")], 400);
                }
                if let Some(order) = params.get("order_by")
                    && order != "created_at"
                    && order != "updated_at"
                {
                    return self.violation(method, uri, vec![format!("order_by {order:?}")], 400);
                }
                plain(200, self.comment_page(iid, per_page, page, true))
            }
            (
                "POST",
                [
                    "api",
                    "v4",
                    "projects",
                    project,
                    "merge_requests",
                    iid,
                    "notes",
                ],
            ) if is_gitlab_project(project) => {
                let Ok(iid) = iid.parse::<u64>() else {
                    return self.violation(
                        method,
                        uri,
                        vec!["merge request iid not numeric".into()],
                        404,
                    );
                };
                match self.comment_body(body.as_ref(), 1_000_000) {
                    Ok(text) => plain(201, self.create_comment(iid, text)),
                    Err(problems) => self.violation(method, uri, problems, 400),
                }
            }
            (
                "PUT",
                [
                    "api",
                    "v4",
                    "projects",
                    project,
                    "merge_requests",
                    _iid,
                    "notes",
                    id,
                ],
            ) if is_gitlab_project(project) => match self.comment_body(body.as_ref(), 1_000_000) {
                Ok(text) => self.update_comment(id, text),
                Err(problems) => self.violation(method, uri, problems, 400),
            },
            _ => self.violation(method, uri, vec!["no such GitLab endpoint".into()], 404),
        }
    }

    fn gitea(
        &mut self,
        method: &Method,
        uri: &Uri,
        path: &str,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Answer {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match (method.as_str(), segments.as_slice()) {
            ("POST", ["api", "v1", "repos", owner, repo, "statuses", sha])
                if self.is_repo(owner, repo) =>
            {
                let problems = check_status_fields(
                    body.as_ref(),
                    &["state", "target_url", "description", "context"],
                    &["state"],
                    "state",
                    &["pending", "success", "error", "failure", "warning"],
                    "context",
                    255,
                    sha,
                );
                if !problems.is_empty() {
                    return self.violation(method, uri, problems, 422);
                }
                let body = body.unwrap_or_default();
                self.record_status(sha, &body, "context");
                plain(201, status_echo(&body, self.statuses.len() as u64))
            }
            (
                "GET",
                [
                    "api",
                    "v1",
                    "repos",
                    owner,
                    repo,
                    "issues",
                    index,
                    "comments",
                ],
            ) if self.is_repo(owner, repo) => {
                let Ok(index) = index.parse::<u64>() else {
                    return self.violation(method, uri, vec!["index not numeric".into()], 404);
                };
                plain(200, self.comment_page(index, usize::MAX, 1, false))
            }
            (
                "POST",
                [
                    "api",
                    "v1",
                    "repos",
                    owner,
                    repo,
                    "issues",
                    index,
                    "comments",
                ],
            ) if self.is_repo(owner, repo) => {
                let Ok(index) = index.parse::<u64>() else {
                    return self.violation(method, uri, vec!["index not numeric".into()], 404);
                };
                match self.comment_body(body.as_ref(), usize::MAX) {
                    Ok(text) => plain(201, self.create_comment(index, text)),
                    Err(problems) => self.violation(method, uri, problems, 422),
                }
            }
            ("PATCH", ["api", "v1", "repos", owner, repo, "issues", "comments", id])
                if self.is_repo(owner, repo) =>
            {
                match self.comment_body(body.as_ref(), usize::MAX) {
                    Ok(text) => self.update_comment(id, text),
                    Err(problems) => self.violation(method, uri, problems, 422),
                }
            }
            _ => self.violation(method, uri, vec!["no such Gitea endpoint".into()], 404),
        }
    }

    fn is_repo(&self, owner: &str, repo: &str) -> bool {
        owner == OWNER && repo == REPO
    }

    fn record_status(
        &mut self,
        sha: &str,
        body: &serde_json::Map<String, Value>,
        context_field: &str,
    ) {
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        self.statuses.push(RecordedStatus {
            sha: sha.to_string(),
            context: text(context_field).unwrap_or_else(|| "default".to_string()),
            state: text("state").unwrap_or_default(),
            description: text("description").unwrap_or_default(),
            target_url: text("target_url"),
            at: Instant::now(),
        });
    }

    fn comment_body(
        &self,
        body: Option<&serde_json::Map<String, Value>>,
        limit: usize,
    ) -> Result<String, Vec<String>> {
        let Some(body) = body else {
            return Err(vec!["no JSON body".into()]);
        };
        let mut problems = Vec::new();
        for key in body.keys() {
            if key != "body" {
                problems.push(format!("unknown field {key:?}"));
            }
        }
        let text = match body.get("body") {
            Some(Value::String(text)) => text.clone(),
            other => {
                problems.push(format!("body must be a string, got {other:?}"));
                String::new()
            }
        };
        if text.chars().count() > limit {
            problems.push(format!(
                "body is {} characters, limit {limit}",
                text.chars().count()
            ));
        }
        if problems.is_empty() {
            Ok(text)
        } else {
            Err(problems)
        }
    }

    fn comment_page(&self, pr: u64, per_page: usize, page: usize, gitlab: bool) -> Value {
        let all = self
            .comments
            .get(&pr)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let page: Vec<Value> = all
            .iter()
            .skip(per_page.saturating_mul(page - 1))
            .take(per_page)
            .map(|c| {
                if gitlab {
                    json!({"id": c.id, "body": c.body, "system": c.system, "noteable_type": "MergeRequest"})
                } else {
                    json!({"id": c.id, "body": c.body, "user": {"login": "someone"}})
                }
            })
            .collect();
        Value::Array(page)
    }

    fn create_comment(&mut self, pr: u64, body: String) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.comments.entry(pr).or_default().push(Comment {
            id,
            body: body.clone(),
            system: false,
        });
        json!({"id": id, "body": body})
    }

    fn update_comment(&mut self, id: &str, body: String) -> Answer {
        let Ok(id) = id.parse::<u64>() else {
            return plain(404, json!({"message": "Not Found"}));
        };
        for comments in self.comments.values_mut() {
            if let Some(c) = comments.iter_mut().find(|c| c.id == id && !c.system) {
                c.body = body.clone();
                return plain(200, json!({"id": id, "body": body}));
            }
        }
        plain(404, json!({"message": "Not Found"}))
    }
}

fn is_gitlab_project(segment: &str) -> bool {
    segment == GITLAB_PROJECT_ID.to_string()
        || segment.eq_ignore_ascii_case(&GITLAB_PROJECT_PATH.replace('/', "%2F"))
}

#[allow(clippy::too_many_arguments)]
fn check_status_fields(
    body: Option<&serde_json::Map<String, Value>>,
    allowed: &[&str],
    required: &[&str],
    state_field: &str,
    states: &[&str],
    context_field: &str,
    description_limit: usize,
    sha: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    if !((sha.len() == 40 || sha.len() == 64) && sha.bytes().all(|b| b.is_ascii_hexdigit())) {
        problems.push(format!("sha {sha:?} is not a full commit id"));
    }
    let Some(body) = body else {
        problems.push("no JSON body".into());
        return problems;
    };
    for key in body.keys() {
        if !allowed.contains(&key.as_str()) {
            problems.push(format!("unknown field {key:?}"));
        }
    }
    for key in required {
        if !body.contains_key(*key) {
            problems.push(format!("missing required field {key:?}"));
        }
    }
    match body.get(state_field) {
        Some(Value::String(s)) if states.contains(&s.as_str()) => {}
        other => problems.push(format!("{state_field} {other:?} not one of {states:?}")),
    }
    match body.get(context_field) {
        Some(Value::String(s)) if !s.is_empty() => {}
        None => {}
        other => problems.push(format!(
            "{context_field} {other:?} is not a non-empty string"
        )),
    }
    match body.get("description") {
        None => {}
        Some(Value::String(d)) => {
            let n = d.chars().count();
            if n > description_limit {
                problems.push(format!(
                    "description is {n} characters, limit {description_limit}"
                ));
            }
        }
        Some(other) => problems.push(format!("description {other} is not a string")),
    }
    match body.get("target_url") {
        None => {}
        Some(Value::String(u)) if u.starts_with("https://") || u.starts_with("http://") => {}
        Some(other) => problems.push(format!("target_url {other} is not an http(s) URL")),
    }
    problems
}

fn status_echo(body: &serde_json::Map<String, Value>, id: u64) -> Value {
    let mut echo = Value::Object(body.clone());
    echo["id"] = json!(id);
    echo
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}
