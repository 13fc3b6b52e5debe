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
//! answer the next requests with 429 + `Retry-After`, a bare 429, GitHub's primary and
//! secondary rate-limit 403s, or GitLab's rate-limit 429.
//!
//! GitLab's refusal to move a status to the state it already has ("Cannot transition
//! status via :run from :running", 400) is played too.
//!
//! Bitbucket Cloud (under `/2.0`), Bitbucket Data Center (under a `/bitbucket` context
//! path) and Azure DevOps (under the organization `/acme`) are played by
//! [`bitbucket_azure`], with the same recording, faults and violations.

mod bitbucket_azure;
pub use bitbucket_azure::{AZURE_PROJECT, DC_PROJECT, OpenPullRequest};

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
    BitbucketCloud,
    BitbucketDataCenter,
    AzureDevOps,
}

impl Kind {
    /// Served by [`bitbucket_azure`].
    fn is_bitbucket_or_azure(self) -> bool {
        matches!(
            self,
            Kind::BitbucketCloud | Kind::BitbucketDataCenter | Kind::AzureDevOps
        )
    }
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
    /// GitHub's secondary rate limit: 403 with its message, calls left on the primary
    /// limit, and `Retry-After: <secs>` when given.
    GitHubSecondaryRateLimit { retry_after: Option<u64> },
    /// 429 without `Retry-After` or any rate-limit header.
    TooManyRequests,
    /// The request is carried out, but the answer is lost (a 502 from a proxy).
    LostAnswer,
    /// Azure DevOps' answer to a request it did not authenticate: 203 and its HTML
    /// sign-in page.
    AzureSignInPage,
}

/// A status the server accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedStatus {
    pub sha: String,
    /// The context (Bitbucket: the key; Azure DevOps: `genre/name`, or the name alone).
    pub context: String,
    /// Bitbucket's `name`, shown instead of the key.
    pub name: Option<String>,
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
    /// Bitbucket Data Center's edit counter.
    version: u64,
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
    /// `http://127.0.0.1:PORT`, for Bitbucket Cloud's absolute `next` links.
    origin: String,
    /// Bitbucket Cloud's open pull requests, as `GET .../pullrequests` lists them.
    pull_requests: Vec<OpenPullRequest>,
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
            origin: String::new(),
            pull_requests: Vec::new(),
        }));
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        state.lock().expect("forge state").origin = format!("http://{addr}");
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
            Kind::BitbucketCloud => format!("http://{}/2.0", self.addr),
            Kind::BitbucketDataCenter => format!("http://{}/bitbucket", self.addr),
            Kind::AzureDevOps => format!("http://{}/{}", self.addr, bitbucket_azure::AZURE_ORG),
            _ => format!("http://{}", self.addr),
        }
    }

    /// The statuses accepted, in arrival order.
    pub fn statuses(&self) -> Vec<RecordedStatus> {
        self.lock().statuses.clone()
    }

    /// What the forge shows: the newest status per commit and context, in the order the
    /// contexts first appeared (Bitbucket replaces a key's status in place; Azure DevOps
    /// and the others keep every status and show the newest).
    pub fn shown(&self) -> Vec<RecordedStatus> {
        let mut shown: Vec<RecordedStatus> = Vec::new();
        for status in self.statuses() {
            match shown
                .iter_mut()
                .find(|s| s.sha == status.sha && s.context == status.context)
            {
                Some(old) => *old = status,
                None => shown.push(status),
            }
        }
        shown
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
            state.add_comment(pr, body, false);
        }
    }

    /// The open pull requests Bitbucket Cloud lists from now on (in this order).
    pub fn set_pull_requests(&self, prs: impl IntoIterator<Item = OpenPullRequest>) {
        self.lock().pull_requests = prs.into_iter().collect();
    }

    /// Adds a GitLab system note ("added 1 commit") to merge request `pr`.
    pub fn seed_system_note(&self, pr: u64, body: &str) {
        self.lock().add_comment(pr, body.to_string(), true);
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

fn headers(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
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
        if self.kind.is_bitbucket_or_azure() {
            return self.serve_bitbucket_azure(method, uri, json_body);
        }
        match route(self.kind, method.as_str(), uri.path()) {
            Ok(endpoint) => self.endpoint(method, uri, endpoint, json_body),
            Err(problem) => self.violation(method, uri, vec![problem], 404),
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
            Fault::GitHubRateLimit { reset_in } => (
                403,
                headers(&[
                    ("x-ratelimit-limit", "5000"),
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-used", "5000"),
                    ("x-ratelimit-reset", &self.announce_reset(reset_in)),
                    ("x-ratelimit-resource", "core"),
                ]),
                json!({
                    "message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                }),
            ),
            Fault::GitHubSecondaryRateLimit { retry_after } => {
                let mut extra = headers(&[
                    ("x-ratelimit-limit", "5000"),
                    ("x-ratelimit-remaining", "4990"),
                    ("x-ratelimit-used", "10"),
                    ("x-ratelimit-resource", "core"),
                ]);
                if let Some(secs) = retry_after {
                    extra.push(("retry-after", secs.to_string()));
                }
                (
                    403,
                    extra,
                    json!({
                        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID E198:4063:33BD6:375FF:652AAB04.",
                        "documentation_url": "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
                    }),
                )
            }
            Fault::TooManyRequests => plain(429, json!({"message": "Too Many Requests"})),
            Fault::AzureSignInPage => plain(
                203,
                json!("<html><head><title>Azure DevOps Services | Sign In</title></head></html>"),
            ),
            Fault::GitLabRateLimit { reset_in } => (
                429,
                headers(&[
                    ("ratelimit-limit", "600"),
                    ("ratelimit-observed", "601"),
                    ("ratelimit-remaining", "0"),
                    ("ratelimit-reset", &self.announce_reset(reset_in)),
                ]),
                json!({"message": "Retry later"}),
            ),
        }
    }

    /// Records a rate-limit reset `reset_in` seconds after the next whole second; its
    /// Unix time, as the header announces it.
    fn announce_reset(&mut self, reset_in: u64) -> String {
        let reset = now_unix() + 1 + reset_in;
        self.resets.push(AnnouncedReset { unix_secs: reset });
        reset.to_string()
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
            kind if kind.is_bitbucket_or_azure() => bitbucket_azure::error_body(kind, &text),
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
        if self.kind.is_bitbucket_or_azure() {
            return self.check_bitbucket_azure_auth(headers, problems);
        }
        let (name, prefix) = match self.kind {
            Kind::GitHub | Kind::GitHubEnterprise => ("authorization", "Bearer "),
            Kind::GitLab => ("private-token", ""),
            Kind::Gitea => ("authorization", "token "),
            Kind::BitbucketCloud | Kind::BitbucketDataCenter | Kind::AzureDevOps => {
                unreachable!("checked by bitbucket_azure")
            }
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
                Kind::BitbucketCloud | Kind::BitbucketDataCenter | Kind::AzureDevOps => {
                    unreachable!("checked by bitbucket_azure")
                }
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

    /// Serves `endpoint` as the forge does: the same steps on every forge, with the
    /// forge's [`Dialect`].
    fn endpoint(
        &mut self,
        method: &Method,
        uri: &Uri,
        endpoint: Endpoint<'_>,
        body: Option<serde_json::Map<String, Value>>,
    ) -> Answer {
        let dialect = Dialect::of(self.kind);
        let number = |n: &str| {
            n.parse::<u64>()
                .map_err(|_| format!("{} not numeric", dialect.number))
        };
        match endpoint {
            Endpoint::PostStatus { sha } => {
                let problems = check_status_fields(body.as_ref(), dialect, sha);
                if !problems.is_empty() {
                    return self.violation(method, uri, problems, dialect.invalid);
                }
                let body = body.unwrap_or_default();
                if dialect.refuses_same_state
                    && let Some(refusal) = self.refused_transition(sha, &body)
                {
                    return refusal;
                }
                self.record_status(sha, &body, dialect.context_field);
                plain(201, status_echo(&body, self.statuses.len() as u64))
            }
            Endpoint::ListComments { number: n } => {
                let n = match number(n) {
                    Ok(n) => n,
                    Err(problem) => return self.violation(method, uri, vec![problem], 404),
                };
                let Some(paging) = &dialect.paging else {
                    return plain(200, self.comment_page(n, usize::MAX, 1, false));
                };
                match paging.read(&parse_query(uri.query().unwrap_or_default())) {
                    Ok((per_page, page)) => plain(
                        200,
                        self.comment_page(n, per_page, page, self.kind == Kind::GitLab),
                    ),
                    Err(problem) => self.violation(method, uri, vec![problem], dialect.invalid),
                }
            }
            Endpoint::PostComment { number: n } => {
                let n = match number(n) {
                    Ok(n) => n,
                    Err(problem) => return self.violation(method, uri, vec![problem], 404),
                };
                match self.comment_body(body.as_ref(), dialect.comment_limit) {
                    Ok(text) => plain(201, self.create_comment(n, text)),
                    Err(problems) => self.violation(method, uri, problems, dialect.invalid),
                }
            }
            Endpoint::UpdateComment { id } => {
                match self.comment_body(body.as_ref(), dialect.comment_limit) {
                    Ok(text) => self.update_comment(id, text),
                    Err(problems) => self.violation(method, uri, problems, dialect.invalid),
                }
            }
        }
    }

    /// GitLab finds the running-or-pending status of that name and fires the
    /// transition; firing `run` on running or `enqueue` on pending is refused (400).
    fn refused_transition(
        &self,
        sha: &str,
        body: &serde_json::Map<String, Value>,
    ) -> Option<Answer> {
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
            .map(|s| s.state.as_str());
        let (event, from) = match (current, new) {
            (Some("running"), "running") => ("run", "running"),
            (Some("pending"), "pending") => ("enqueue", "pending"),
            _ => return None,
        };
        Some(plain(
            400,
            json!({"message": format!("Cannot transition status via :{event} from :{from} (Reason(s): Status cannot transition via \"{event}\")")}),
        ))
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
            name: None,
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

    /// Adds a comment to pull request `pr`; its id.
    fn add_comment(&mut self, pr: u64, body: String, system: bool) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.comments.entry(pr).or_default().push(Comment {
            id,
            body,
            system,
            version: 0,
        });
        id
    }

    fn create_comment(&mut self, pr: u64, body: String) -> Value {
        let id = self.add_comment(pr, body.clone(), false);
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

/// Every way a status body breaks the forge's documented API.
fn check_status_fields(
    body: Option<&serde_json::Map<String, Value>>,
    dialect: &Dialect,
    sha: &str,
) -> Vec<String> {
    let Dialect {
        status_fields: allowed,
        states,
        context_field,
        description_limit,
        ..
    } = *dialect;
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
    if !body.contains_key("state") {
        problems.push("missing required field \"state\"".to_string());
    }
    match body.get("state") {
        Some(Value::String(s)) if states.contains(&s.as_str()) => {}
        other => problems.push(format!("state {other:?} not one of {states:?}")),
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

// ------------------------------------------------------------------ the forges' dialects

/// What a request asks for, in any forge's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint<'a> {
    /// Create a commit status on `sha`.
    PostStatus { sha: &'a str },
    /// List the comments (GitLab: notes) of pull request (merge request, issue) `number`.
    ListComments { number: &'a str },
    /// Comment on pull request `number`.
    PostComment { number: &'a str },
    /// Edit comment `id`.
    UpdateComment { id: &'a str },
}

impl<'a> Endpoint<'a> {
    /// `GET` (list) or `POST` (create) on the comments of `number`.
    fn comments(method: &str, number: &'a str) -> Endpoint<'a> {
        if method == "GET" {
            Endpoint::ListComments { number }
        } else {
            Endpoint::PostComment { number }
        }
    }
}

/// Which endpoint `method path` is on the forge `kind`, or the problem (a 404).
fn route<'a>(kind: Kind, method: &str, path: &'a str) -> Result<Endpoint<'a>, String> {
    let not_found = || format!("no such {} endpoint", Dialect::of(kind).name);
    let ours = |owner: &str, name: &str| owner == OWNER && name == REPO;
    match kind {
        Kind::BitbucketCloud | Kind::BitbucketDataCenter | Kind::AzureDevOps => {
            unreachable!("routed by bitbucket_azure")
        }
        Kind::GitLab => {
            let rest = path
                .strip_prefix("/api/v4/projects/")
                .ok_or_else(not_found)?;
            let segments: Vec<&str> = rest.split('/').collect();
            match (method, segments.as_slice()) {
                ("POST", [project, "statuses", sha]) => {
                    if is_gitlab_project(project) {
                        Ok(Endpoint::PostStatus { sha })
                    } else {
                        Err(format!(
                            "project {project:?} is neither the id nor the URL-encoded path"
                        ))
                    }
                }
                (method @ ("GET" | "POST"), [project, "merge_requests", iid, "notes"])
                    if is_gitlab_project(project) =>
                {
                    Ok(Endpoint::comments(method, iid))
                }
                ("PUT", [project, "merge_requests", _, "notes", id])
                    if is_gitlab_project(project) =>
                {
                    Ok(Endpoint::UpdateComment { id })
                }
                _ => Err(not_found()),
            }
        }
        // Gitea's API is GitHub's paths under /api/v1; Enterprise's under /api/v3.
        Kind::GitHub | Kind::GitHubEnterprise | Kind::Gitea => {
            let rest = match kind {
                Kind::GitHubEnterprise => path
                    .strip_prefix("/api/v3")
                    .ok_or_else(|| "not under /api/v3".to_string())?,
                Kind::Gitea => path.strip_prefix("/api/v1").ok_or_else(not_found)?,
                _ => path,
            };
            let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
            match (method, segments.as_slice()) {
                ("POST", ["repos", owner, name, "statuses", sha]) if ours(owner, name) => {
                    Ok(Endpoint::PostStatus { sha })
                }
                (
                    method @ ("GET" | "POST"),
                    ["repos", owner, name, "issues", number, "comments"],
                ) if ours(owner, name) => Ok(Endpoint::comments(method, number)),
                ("PATCH", ["repos", owner, name, "issues", "comments", id])
                    if ours(owner, name) =>
                {
                    Ok(Endpoint::UpdateComment { id })
                }
                _ => Err(not_found()),
            }
        }
    }
}

/// How one forge's API differs from another's where the endpoints do the same.
#[derive(Debug)]
struct Dialect {
    /// For "no such ... endpoint".
    name: &'static str,
    /// The answer to an invalid body or query (GitHub and Gitea 422, GitLab 400).
    invalid: u16,
    /// The fields a status body may have.
    status_fields: &'static [&'static str],
    /// The values of its `state`.
    states: &'static [&'static str],
    /// The field naming the status's context.
    context_field: &'static str,
    /// The longest description, in characters.
    description_limit: usize,
    /// What the pull-request number in a path is called, for "... not numeric".
    number: &'static str,
    /// How comment lists page; `None`: one page with every comment.
    paging: Option<Paging>,
    /// The longest comment, in characters.
    comment_limit: usize,
    /// Setting a status to the state it already has is refused (GitLab).
    refuses_same_state: bool,
}

/// The query of a paged list: `per_page` and `page`, and parameters with a fixed set of
/// values.
#[derive(Debug)]
struct Paging {
    default_per_page: usize,
    /// (parameter, the values it may have).
    choices: &'static [(&'static str, &'static [&'static str])],
}

impl Paging {
    /// (per_page, page) of `params`, or the problem with them.
    fn read(&self, params: &BTreeMap<String, String>) -> Result<(usize, usize), String> {
        let number = |key: &str, default: usize| {
            params
                .get(key)
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(default)
        };
        let per_page = number("per_page", self.default_per_page);
        let page = number("page", 1);
        if per_page == 0 || per_page > 100 || page == 0 {
            return Err(format!("per_page {per_page} / page {page} out of range"));
        }
        for (key, allowed) in self.choices {
            if let Some(value) = params.get(*key)
                && !allowed.contains(&value.as_str())
            {
                return Err(format!("{key} {value:?}"));
            }
        }
        Ok((per_page, page))
    }
}

impl Dialect {
    fn of(kind: Kind) -> &'static Dialect {
        match kind {
            Kind::GitHub | Kind::GitHubEnterprise => &GITHUB,
            Kind::GitLab => &GITLAB,
            Kind::Gitea => &GITEA,
            Kind::BitbucketCloud | Kind::BitbucketDataCenter | Kind::AzureDevOps => {
                unreachable!("served by bitbucket_azure")
            }
        }
    }
}

static GITHUB: Dialect = Dialect {
    name: "GitHub",
    invalid: 422,
    status_fields: &["state", "target_url", "description", "context"],
    states: &["error", "failure", "pending", "success"],
    context_field: "context",
    description_limit: 140,
    number: "pull number",
    paging: Some(Paging {
        default_per_page: 30,
        choices: &[],
    }),
    comment_limit: 65_536,
    refuses_same_state: false,
};

static GITLAB: Dialect = Dialect {
    name: "GitLab",
    invalid: 400,
    status_fields: &[
        "state",
        "ref",
        "name",
        "context",
        "target_url",
        "description",
        "coverage",
        "pipeline_id",
    ],
    states: &[
        "pending", "running", "success", "failed", "canceled", "skipped",
    ],
    context_field: "name",
    description_limit: 255,
    number: "merge request iid",
    paging: Some(Paging {
        default_per_page: 20,
        choices: &[
            ("sort", &["asc", "desc"]),
            ("order_by", &["created_at", "updated_at"]),
        ],
    }),
    comment_limit: 1_000_000,
    refuses_same_state: true,
};

static GITEA: Dialect = Dialect {
    name: "Gitea",
    invalid: 422,
    status_fields: &["state", "target_url", "description", "context"],
    states: &["pending", "success", "error", "failure", "warning"],
    context_field: "context",
    description_limit: 255,
    number: "index",
    paging: None,
    comment_limit: usize::MAX,
    refuses_same_state: false,
};
