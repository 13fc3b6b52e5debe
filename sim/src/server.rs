//! The HTTP API server: kube-apiserver's REST paths over axum, plain HTTP on 127.0.0.1.
//!
//! Paths: `/api/v1/{plural}[/{name}[/status]]`,
//! `/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]` and the same under
//! `/apis/{group}/{version}`, for every resource of [`crate::resources::RESOURCES`];
//! discovery ([`crate::discovery`]); `/healthz`, `/readyz`, `/livez`. Every error is a
//! `metav1.Status` with the HTTP code of its `code`. Watches stream one JSON event per
//! line in a chunked response. docs/sim.md says what is served and how it differs from
//! kube-apiserver.

// `ApiError` (the store's error type, shared by every handler) is a plain struct of
// 136 bytes; errors are rare and short-lived, so boxing it buys nothing here.
#![allow(clippy::result_large_err)]

mod negotiate;
mod params;
mod protobuf;
mod read;
mod response;
mod route;
mod table;
mod watch;
mod write;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::{any, get};

use crate::discovery;
use crate::error::ApiError;
use crate::faults::{Fault, FaultConfig, Faults};
use crate::reqlog::{LogEntry, RequestLog};
use crate::store::Store;

use params::Params;
use read::{do_get, do_list};
use response::{error_response, json_response};
use route::{Route, Target, method_not_allowed_here, path_not_found, route, verb_of};
use watch::do_watch;
use write::{do_create, do_delete, do_evict, do_patch, do_update};

/// Largest request body accepted (kube-apiserver's limit is 3 MiB).
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How long `shutdown` waits for connections to finish before aborting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A running API server.
pub struct ApiServer {
    /// The address it listens on (127.0.0.1 and a free port).
    pub addr: SocketAddr,
    /// The object store it serves.
    pub store: Store,
    /// Every API request it served.
    pub log: RequestLog,
    faults: Faults,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct AppState {
    store: Store,
    log: RequestLog,
    faults: Faults,
    addr: SocketAddr,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl ApiServer {
    /// Starts a server on 127.0.0.1 and a free port, serving `store` with `faults`.
    pub async fn start(store: Store, faults: FaultConfig) -> std::io::Result<ApiServer> {
        Self::start_with(store, faults, Router::new()).await
    }

    /// Like [`ApiServer::start`], with `extra` routes merged in beside the Kubernetes
    /// API (for endpoints outside it, such as a stand-in kubelet's). `extra` must not use
    /// `/api`, `/apis`, `/version`, `/healthz`, `/readyz` or `/livez`: axum panics on
    /// overlapping routes.
    pub async fn start_with(
        store: Store,
        faults: FaultConfig,
        extra: Router,
    ) -> std::io::Result<ApiServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let log = RequestLog::new();
        let faults = Faults::new(faults);
        let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
        let state = AppState {
            store: store.clone(),
            log: log.clone(),
            faults: faults.clone(),
            addr,
            shutdown: shutdown_rx.clone(),
        };
        let app = router(state).merge(extra);
        let mut stop = shutdown_rx;
        let task = tokio::spawn(async move {
            let result = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|v| *v).await;
                })
                .await;
            if let Err(error) = result {
                tracing::error!(%error, "API server stopped");
            }
        });
        tracing::debug!(%addr, "API server listening");
        Ok(ApiServer {
            addr,
            store,
            log,
            faults,
            shutdown,
            task,
        })
    }

    /// Replaces the fault configuration (and reseeds the fault RNG) at run time.
    pub fn set_faults(&self, f: FaultConfig) {
        self.faults.set(f);
    }

    /// The current fault configuration.
    pub fn faults(&self) -> FaultConfig {
        self.faults.config()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a kubeconfig for this server to `path` (mode 0600).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        crate::kubeconfig::write(path, &self.url())
    }

    /// Stops accepting connections, ends every open watch, and waits (at most 5 s) for
    /// in-flight requests to finish.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let mut task = self.task;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/version/", get(version))
        .route("/healthz", get(ok))
        .route("/readyz", get(ok))
        .route("/livez", get(ok))
        .route("/openapi/v3", get(openapi_root))
        .route("/openapi/v3/{*rest}", get(openapi_group_version))
        .route("/api", any(api))
        .route("/api/", any(api))
        .route("/api/{*rest}", any(api))
        .route("/apis", any(api))
        .route("/apis/", any(api))
        .route("/apis/{*rest}", any(api))
        .fallback(not_found_path)
        .with_state(state)
}

async fn ok() -> &'static str {
    "ok"
}

async fn version() -> Response {
    json_response(StatusCode::OK, &discovery::version())
}

async fn openapi_root() -> Response {
    json_response(StatusCode::OK, &discovery::openapi_v3_root())
}

async fn openapi_group_version(axum::extract::Path(rest): axum::extract::Path<String>) -> Response {
    match discovery::openapi_v3_group_version(rest.trim_matches('/')) {
        Some(doc) => json_response(StatusCode::OK, &doc),
        None => error_response(&path_not_found()),
    }
}

async fn not_found_path() -> Response {
    error_response(&path_not_found())
}

async fn api(State(st): State<AppState>, req: Request) -> Response {
    let route = match route(req.uri().path(), st.addr) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    match route {
        Route::Discovery(doc) => {
            if req.method() == Method::GET {
                json_response(StatusCode::OK, &doc)
            } else {
                error_response(&method_not_allowed_here())
            }
        }
        Route::Resource(target) => resource_request(st, target, req).await,
    }
}

fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

async fn resource_request(st: AppState, t: Target, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let params = Params(
        Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map(|q| q.0)
            .unwrap_or_default(),
    );
    let user_agent = header_str(&parts.headers, header::USER_AGENT).map(str::to_string);
    let resource = match &t.sub {
        Some(sub) => format!("{}/{}", t.rt.plural, sub),
        None => t.rt.plural.to_string(),
    };
    let watch = params.flag("watch");
    let verb = match verb_of(&parts.method, &t, watch) {
        Ok(v) => v,
        Err(e) => {
            let verb = parts.method.as_str().to_ascii_lowercase();
            return logged(&st, &t, &verb, &resource, user_agent, error_response(&e));
        }
    };
    let resp = serve(&st, &t, verb, &params, &parts.headers, body).await;
    // A create names its object in the body: the log takes the name from the created
    // object, as the API server's audit log fills objectRef.name.
    if verb == "create" && t.name.is_none() && resp.status() == StatusCode::CREATED {
        let (rparts, rbody) = resp.into_parts();
        let bytes = axum::body::to_bytes(rbody, usize::MAX)
            .await
            .unwrap_or_default();
        let name = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.pointer("/metadata/name")?.as_str().map(str::to_string));
        let resp = Response::from_parts(rparts, axum::body::Body::from(bytes));
        let t = Target {
            rt: t.rt,
            ns: t.ns,
            name,
            sub: t.sub,
        };
        return logged(&st, &t, verb, &resource, user_agent, resp);
    }
    logged(&st, &t, verb, &resource, user_agent, resp)
}

fn logged(
    st: &AppState,
    t: &Target,
    verb: &str,
    resource: &str,
    user_agent: Option<String>,
    resp: Response,
) -> Response {
    st.log.record_entry(LogEntry {
        seq: 0,
        verb: verb.to_string(),
        resource: resource.to_string(),
        group: t.rt.group.to_string(),
        status: resp.status().as_u16(),
        namespace: t.ns.clone(),
        name: t.name.clone(),
        user_agent,
    });
    resp
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn serve(
    st: &AppState,
    t: &Target,
    verb: &'static str,
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let output = match negotiate::negotiate(header_str(headers, header::ACCEPT), verb) {
        Ok(o) => o,
        Err(e) => return error_response(&e),
    };
    let decision = st.faults.decide(is_write(verb));
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if let Some(fault) = decision.fault {
        let e = match fault {
            Fault::Throttle {
                retry_after_seconds,
            } => ApiError::too_many_requests(retry_after_seconds),
            Fault::Internal => ApiError::internal("injected by kubelet-gitops-sim fault injection"),
            Fault::Conflict => ApiError::stale(t.rt, t.name.as_deref().unwrap_or("")),
        };
        return error_response(&e);
    }
    let result = match verb {
        "get" => do_get(st, t, params, output),
        "list" => do_list(st, t, params, output),
        "watch" => return do_watch(st, t, params, output),
        "create" | "update" | "patch" | "delete" => {
            let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
                Ok(b) => b,
                Err(_) => return error_response(&too_large()),
            };
            match verb {
                "create" if t.sub.is_some() => do_evict(st, t, params, headers, &bytes),
                "create" => do_create(st, t, params, headers, &bytes, output),
                "update" => do_update(st, t, params, headers, &bytes, output),
                "patch" => do_patch(st, t, params, headers, &bytes, output),
                _ => do_delete(st, t, params, &bytes, output),
            }
        }
        _ => Err(ApiError::method_not_allowed(t.rt, verb)),
    };
    result.unwrap_or_else(|e| error_response(&e))
}

fn too_large() -> ApiError {
    ApiError {
        code: 413,
        reason: "RequestEntityTooLarge",
        message: format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
        details: None,
        retry_after_seconds: None,
    }
}
