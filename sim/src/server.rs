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
mod protobuf;
mod table;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use crate::discovery;
use crate::error::{ApiError, Cause, success_status};
use crate::faults::{Fault, FaultConfig, Faults, WatchDropper};
use crate::reqlog::{LogEntry, RequestLog};
use crate::resources::{self, ResourceType};
use crate::store::{
    ListOptions, PatchType, SharedObject, Store, WatchEvent, WatchOptions, WriteOptions,
};

use negotiate::{BodyFormat, Output};
use table::IncludeObject;

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
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct AppState {
    store: Store,
    log: RequestLog,
    faults: Faults,
    addr: SocketAddr,
    shutdown: watch::Receiver<bool>,
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
        let (shutdown, shutdown_rx) = watch::channel(false);
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

fn path_not_found() -> ApiError {
    ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: Some(json!({})),
        retry_after_seconds: None,
    }
}

// ---------------------------------------------------------------------------------
// Responses

fn json_bytes(status: StatusCode, body: Vec<u8>) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    json_bytes(status, serde_json::to_vec(value).unwrap_or_default())
}

fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(status, &e.to_status());
    if let Some(secs) = e.retry_after_seconds {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// One object in the negotiated representation (Table output is built by the caller).
fn object_response(status: StatusCode, obj: &Value, output: Output) -> Response {
    match output {
        Output::Json | Output::Table(_) => json_response(status, obj),
        Output::Meta(v) => json_response(status, &table::partial_metadata(obj, v)),
        Output::Yaml => yaml_response(status, obj),
    }
}

fn yaml_response(status: StatusCode, value: &Value) -> Response {
    match serde_saphyr::to_string(value) {
        Ok(text) => {
            let mut resp = Response::new(Body::from(text));
            *resp.status_mut() = status;
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/yaml"),
            );
            resp
        }
        Err(e) => error_response(&ApiError::internal(format!("encoding YAML: {e}"))),
    }
}

// ---------------------------------------------------------------------------------
// Routing

/// What a path under `/api` or `/apis` names.
enum Route {
    Discovery(Value),
    Resource(Target),
}

/// A resource path: collection (no name), object, or object subresource.
struct Target {
    rt: &'static ResourceType,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn route(path: &str, addr: SocketAddr) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["api"] => Ok(Route::Discovery(discovery::api_versions(&addr.to_string()))),
        ["api", version] => discovery::resource_list("", version)
            .map(Route::Discovery)
            .ok_or_else(path_not_found),
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis"] => Ok(Route::Discovery(discovery::group_list())),
        ["apis", group] => discovery::group(group)
            .map(Route::Discovery)
            .ok_or_else(path_not_found),
        ["apis", group, version] => discovery::resource_list(group, version)
            .map(Route::Discovery)
            .ok_or_else(path_not_found),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Err(path_not_found()),
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Result<Route, ApiError> {
    let find = |plural: &str| resources::find(group, version, plural);
    let (rt, ns, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|rt| rt.namespaced) => (
            find(plural).ok_or_else(path_not_found)?,
            Some(ns.to_string()),
            tail,
        ),
        [plural, tail @ ..] => (find(plural).ok_or_else(path_not_found)?, None, tail),
        [] => return Err(path_not_found()),
    };
    let (name, sub) = match rest {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] if rt.subresources.contains(sub) => {
            (Some(name.to_string()), Some(sub.to_string()))
        }
        _ => return Err(path_not_found()),
    };
    // A namespaced object is only reachable under its namespace.
    if rt.namespaced && ns.is_none() && name.is_some() {
        return Err(path_not_found());
    }
    Ok(Route::Resource(Target { rt, ns, name, sub }))
}

// ---------------------------------------------------------------------------------
// The API handler

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

/// The query parameters the handlers read.
struct Params(HashMap<String, String>);

impl Params {
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|v| !v.is_empty())
    }

    fn owned(&self, k: &str) -> Option<String> {
        self.get(k).map(str::to_string)
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
}

/// 405 for a method the path does not serve at all (no verb to name).
fn method_not_allowed_here() -> ApiError {
    ApiError {
        code: 405,
        reason: "MethodNotAllowed",
        message: "the server does not allow this method on the requested resource".into(),
        details: Some(json!({})),
        retry_after_seconds: None,
    }
}

/// The audit verb of a request, or 405.
fn verb_of(method: &Method, t: &Target, watch: bool) -> Result<&'static str, ApiError> {
    let named = t.name.is_some();
    let verb = match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", false) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return Err(method_not_allowed_here()),
    };
    let allowed = match &t.sub {
        Some(_) => matches!(verb, "get" | "update" | "patch"),
        // Writes to a namespaced resource need a namespace in the path.
        None if t.rt.namespaced && t.ns.is_none() => {
            matches!(verb, "list" | "watch") && t.rt.supports(verb)
        }
        None => t.rt.supports(verb),
    };
    if allowed {
        Ok(verb)
    } else {
        Err(ApiError::method_not_allowed(t.rt, verb))
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

/// 422 for invalid request options (`CreateOptions.meta.k8s.io "" is invalid: ...`).
fn invalid_options(kind: &str, causes: Vec<Cause>) -> ApiError {
    let texts: Vec<String> = causes.iter().map(ToString::to_string).collect();
    let message = match texts.as_slice() {
        [one] => format!("{kind}.meta.k8s.io \"\" is invalid: {one}"),
        many => format!("{kind}.meta.k8s.io \"\" is invalid: [{}]", many.join(", ")),
    };
    let causes: Vec<Value> = causes
        .iter()
        .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
        .collect();
    ApiError {
        code: 422,
        reason: "Invalid",
        message,
        details: Some(json!({ "group": "meta.k8s.io", "kind": kind, "causes": causes })),
        retry_after_seconds: None,
    }
}

/// Write options from the query, validated as upstream's `Validate{Create,Update,Patch}Options`.
fn write_options(
    params: &Params,
    kind: &str,
    patch_type: Option<PatchType>,
) -> Result<WriteOptions, ApiError> {
    let mut causes = Vec::new();
    let field_manager = params.owned("fieldManager");
    let force = params.get("force");
    if let Some(pt) = patch_type {
        if pt == PatchType::Apply {
            if field_manager.is_none() {
                causes.push(Cause {
                    field: "fieldManager".into(),
                    reason: "FieldValueRequired",
                    message: "Required value: is required for apply patch".into(),
                });
            }
        } else if force.is_some() {
            causes.push(Cause {
                field: "force".into(),
                reason: "FieldValueForbidden",
                message: "Forbidden: may not be specified for non-apply patch".into(),
            });
        }
    }
    if let Some(fm) = &field_manager {
        if fm.chars().count() > 128 {
            causes.push(Cause {
                field: "fieldManager".into(),
                reason: "FieldValueTooLong",
                message: "Too long: may not be more than 128 bytes".into(),
            });
        }
        if let Some((i, c)) = fm.chars().enumerate().find(|(_, c)| c.is_control()) {
            causes.push(Cause {
                field: "fieldManager".into(),
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {fm:?}: invalid character U+{:04X} (at position {i})",
                    u32::from(c)
                ),
            });
        }
    }
    let dry_run = match params.get("dryRun") {
        None => false,
        Some("All") => true,
        Some(other) => {
            causes.push(Cause {
                field: "dryRun".into(),
                reason: "FieldValueNotSupported",
                message: format!("Unsupported value: [\"{other}\"]: supported values: \"All\""),
            });
            false
        }
    };
    if !causes.is_empty() {
        return Err(invalid_options(kind, causes));
    }
    Ok(WriteOptions {
        dry_run,
        field_manager,
        force: force == Some("true"),
    })
}

fn do_get(
    st: &AppState,
    t: &Target,
    params: &Params,
    output: Output,
) -> Result<Response, ApiError> {
    let name = t.name.as_deref().unwrap_or("");
    let obj = st.store.get(t.rt, t.ns.as_deref(), name)?;
    match output {
        Output::Table(v) => {
            let include = include_object(params)?;
            let meta = json!({ "resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!("")) });
            Ok(json_response(
                StatusCode::OK,
                &table::table(t.rt, [&obj], meta, v, include, true),
            ))
        }
        _ => Ok(object_response(StatusCode::OK, &obj, output)),
    }
}

fn include_object(params: &Params) -> Result<IncludeObject, ApiError> {
    IncludeObject::parse(params.get("includeObject")).ok_or_else(|| {
        invalid_options(
            "TableOptions",
            vec![Cause {
                field: "includeObject".into(),
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {:?}: must be 'Metadata', 'Object', 'None', or empty",
                    params.get("includeObject").unwrap_or("")
                ),
            }],
        )
    })
}

fn parse_limit(params: &Params) -> Result<Option<usize>, ApiError> {
    match params.get("limit") {
        None => Ok(None),
        Some(v) => {
            let n: i64 = v.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid value for limit: {v:?} is not an integer"))
            })?;
            Ok(usize::try_from(n).ok().filter(|n| *n > 0))
        }
    }
}

fn field_selector(params: &Params) -> Option<String> {
    params.owned("fieldSelector")
}

fn do_list(
    st: &AppState,
    t: &Target,
    params: &Params,
    output: Output,
) -> Result<Response, ApiError> {
    let opts = ListOptions {
        label_selector: params.owned("labelSelector"),
        field_selector: field_selector(params),
        limit: parse_limit(params)?,
        continue_token: params.owned("continue"),
        resource_version: params.owned("resourceVersion"),
        resource_version_match: params.owned("resourceVersionMatch"),
    };
    let include = match output {
        Output::Table(_) => Some(include_object(params)?),
        _ => None,
    };
    // Items shared with the store: no deep copy, and each object's JSON encoding is
    // computed once per object version, so repeated lists of a large table are a copy.
    let list = st.store.list_shared(t.rt, t.ns.as_deref(), &opts)?;
    let objects = || list.items.iter().map(|o| &*o.object);
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(list.resource_version));
    if let Some(c) = &list.continue_token {
        meta.insert("continue".into(), json!(c));
    }
    if let Some(n) = list.remaining_item_count {
        meta.insert("remainingItemCount".into(), json!(n));
    }
    let meta = Value::Object(meta);
    Ok(match output {
        Output::Table(v) => {
            let include = include.unwrap_or(IncludeObject::Metadata);
            json_response(
                StatusCode::OK,
                &table::table(t.rt, objects(), meta, v, include, true),
            )
        }
        Output::Meta(v) => {
            let items: Vec<Value> = objects().map(|o| table::partial_metadata(o, v)).collect();
            json_response(
                StatusCode::OK,
                &json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": format!("meta.k8s.io/{v}"),
                    "metadata": meta,
                    "items": items,
                }),
            )
        }
        Output::Json => json_bytes(StatusCode::OK, encode_list(t.rt, &meta, &list.items)),
        Output::Yaml => {
            let items: Vec<Value> = objects().map(strip_type_meta).collect();
            yaml_response(
                StatusCode::OK,
                &json!({
                    "kind": format!("{}List", t.rt.kind),
                    "apiVersion": t.rt.api_version(),
                    "metadata": meta,
                    "items": items,
                }),
            )
        }
    })
}

/// An object without `kind` and `apiVersion`, as the real server encodes list items.
fn strip_type_meta(obj: &Value) -> Value {
    match obj {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "kind" && k.as_str() != "apiVersion")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Serializes `value` skipping the top-level `kind` and `apiVersion`, without copying it.
struct WithoutTypeMeta<'a>(&'a Value);

impl serde::Serialize for WithoutTypeMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0 {
            Value::Object(m) => {
                let mut map = s.serialize_map(None)?;
                for (k, v) in m {
                    if k != "kind" && k != "apiVersion" {
                        map.serialize_entry(k, v)?;
                    }
                }
                map.end()
            }
            other => other.serialize(s),
        }
    }
}

/// `{"kind":"NodeList","apiVersion":"v1","metadata":{..},"items":[..]}` with items
/// encoded as the real server does (no kind/apiVersion on items).
///
/// Each item is taken from its cached encoding ([`SharedObject::encoded`]): the store
/// keeps `kind` and `apiVersion` as an object's first two keys, so dropping them is
/// dropping that exact prefix. An item without that prefix is encoded afresh.
fn encode_list(rt: &ResourceType, meta: &Value, items: &[SharedObject]) -> Vec<u8> {
    let prefix = type_meta_prefix(rt);
    let encoded: Vec<&str> = items.iter().map(SharedObject::encoded).collect();
    let total: usize = encoded.iter().map(|e| e.len() + 1).sum();
    let mut out = Vec::with_capacity(256 + total);
    out.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut out, &format!("{}List", rt.kind));
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, &rt.api_version());
    out.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut out, meta);
    out.extend_from_slice(b",\"items\":[");
    for (i, (item, enc)) in items.iter().zip(&encoded).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match enc.strip_prefix(prefix.as_str()) {
            Some(rest) => {
                out.push(b'{');
                out.extend_from_slice(rest.as_bytes());
            }
            None => {
                let _ = serde_json::to_writer(&mut out, &WithoutTypeMeta(&item.object));
            }
        }
    }
    out.extend_from_slice(b"]}");
    out
}

/// `{"kind":"<Kind>","apiVersion":"<apiVersion>",`: how a stored object's encoding
/// starts when it has more than its type meta.
fn type_meta_prefix(rt: &ResourceType) -> String {
    format!(
        "{{\"kind\":{},\"apiVersion\":{},",
        Value::String(rt.kind.to_string()),
        Value::String(rt.api_version())
    )
}

fn decode_body(rt: &ResourceType, headers: &HeaderMap, bytes: &[u8]) -> Result<Value, ApiError> {
    let format = negotiate::body_format(header_str(headers, header::CONTENT_TYPE))?;
    let parsed: Result<Value, String> = match format {
        BodyFormat::Json => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
        BodyFormat::Yaml => std::str::from_utf8(bytes)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_saphyr::from_str::<Value>(s).map_err(|e| e.to_string())),
        BodyFormat::Protobuf => protobuf::decode(bytes),
    };
    match parsed {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): the body is not a JSON object",
            rt.kind
        ))),
        Err(e) if format == BodyFormat::Protobuf => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {e}",
            rt.kind
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {e}",
            rt.kind
        ))),
    }
}

fn do_create(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let opts = write_options(params, "CreateOptions", None)?;
    let obj = decode_body(t.rt, headers, bytes)?;
    let created = st.store.create(t.rt, t.ns.as_deref(), obj, &opts)?;
    Ok(object_response(StatusCode::CREATED, &created, output))
}

fn do_update(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let opts = write_options(params, "UpdateOptions", None)?;
    let obj = decode_body(t.rt, headers, bytes)?;
    let name = t.name.as_deref().unwrap_or("");
    let updated = st
        .store
        .update(t.rt, t.ns.as_deref(), name, t.sub.as_deref(), obj, &opts)?;
    Ok(object_response(StatusCode::OK, &updated, output))
}

fn do_patch(
    st: &AppState,
    t: &Target,
    params: &Params,
    headers: &HeaderMap,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let patch_type = negotiate::patch_type(header_str(headers, header::CONTENT_TYPE))?;
    let opts = write_options(params, "PatchOptions", Some(patch_type))?;
    let name = t.name.as_deref().unwrap_or("");
    // An apply body may be YAML: hand the store JSON either way.
    let json_body;
    let body: &[u8] = if patch_type == PatchType::Apply {
        json_body = apply_body_to_json(bytes)?;
        &json_body
    } else {
        bytes
    };
    let existed = patch_type != PatchType::Apply
        || t.sub.is_some()
        || st.store.get(t.rt, t.ns.as_deref(), name).is_ok();
    let patched = st.store.patch(
        t.rt,
        t.ns.as_deref(),
        name,
        t.sub.as_deref(),
        patch_type,
        body,
        &opts,
    )?;
    let status = if existed || opts.dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(object_response(status, &patched, output))
}

fn apply_body_to_json(bytes: &[u8]) -> Result<Vec<u8>, ApiError> {
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return Ok(bytes.to_vec());
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_json::to_vec(&value).map_err(|e| ApiError::internal(e.to_string()))
}

fn do_delete(
    st: &AppState,
    t: &Target,
    params: &Params,
    bytes: &[u8],
    output: Output,
) -> Result<Response, ApiError> {
    let options: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type DeleteOptions): {e}"
            ))
        })?
    };
    let body_dry_run = options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == "All"));
    let opts = write_options(params, "DeleteOptions", None)?;
    let name = t.name.as_deref().unwrap_or("");
    if opts.dry_run || body_dry_run {
        let obj = st.store.get(t.rt, t.ns.as_deref(), name)?;
        return Ok(object_response(StatusCode::OK, &obj, output));
    }
    let preconditions = options
        .get("preconditions")
        .filter(|p| !p.is_null())
        .cloned();
    let deleted = st
        .store
        .delete(t.rt, t.ns.as_deref(), name, preconditions)?;
    // Still there (finalizers, graceful deletion): the object; gone: a Success Status,
    // as the real server answers an immediate delete.
    if deleted
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        return Ok(object_response(StatusCode::OK, &deleted, output));
    }
    let uid = deleted.pointer("/metadata/uid").and_then(Value::as_str);
    Ok(json_response(
        StatusCode::OK,
        &success_status(t.rt, name, uid),
    ))
}

// ---------------------------------------------------------------------------------
// Watch

/// A random server-side watch timeout between 30 and 60 minutes, as kube-apiserver's
/// `--min-request-timeout` (1800 s) times a factor in [1, 2).
fn default_watch_timeout() -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Duration::from_secs(1800 + u64::from(nanos % 1800))
}

fn do_watch(st: &AppState, t: &Target, params: &Params, output: Output) -> Response {
    match start_watch(st, t, params, output) {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

fn start_watch(
    st: &AppState,
    t: &Target,
    params: &Params,
    output: Output,
) -> Result<Response, ApiError> {
    let timeout = match params.get("timeoutSeconds") {
        None => default_watch_timeout(),
        Some(v) => {
            let secs: i64 = v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for timeoutSeconds: {v:?} is not an integer"
                ))
            })?;
            // Upstream: 0 or less means the server default.
            u64::try_from(secs)
                .ok()
                .filter(|s| *s > 0)
                .map_or_else(default_watch_timeout, Duration::from_secs)
        }
    };
    let include = match output {
        Output::Table(_) => include_object(params)?,
        _ => IncludeObject::Metadata,
    };
    // A watch on one object's path watches that name.
    let mut field_selector = field_selector(params);
    if let Some(name) = &t.name {
        let by_name = format!("metadata.name={name}");
        field_selector = Some(match field_selector {
            Some(f) => format!("{f},{by_name}"),
            None => by_name,
        });
    }
    let opts = WatchOptions {
        resource_version: params.owned("resourceVersion"),
        label_selector: params.owned("labelSelector"),
        field_selector,
        allow_bookmarks: params.flag("allowWatchBookmarks"),
        send_initial_events: params.flag("sendInitialEvents"),
        timeout: Some(timeout),
    };
    let events = st.store.watch(t.rt, t.ns.as_deref(), &opts)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let stream = WatchStream {
        rt: t.rt,
        events,
        tx,
        output,
        include,
        dropper: st.faults.watch_dropper(),
        shutdown: st.shutdown.clone(),
        timeout,
    };
    tokio::spawn(stream.run());
    let mut resp = Body::from_stream(ReceiverStream::new(rx)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}

/// Forwards store events to one client's chunked response until the timeout, the
/// store closing the channel, the client going away, shutdown, or an injected drop.
struct WatchStream {
    rt: &'static ResourceType,
    events: mpsc::Receiver<WatchEvent>,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    output: Output,
    include: IncludeObject,
    dropper: WatchDropper,
    shutdown: watch::Receiver<bool>,
    timeout: Duration,
}

impl WatchStream {
    async fn run(mut self) {
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut first = true;
        if *self.shutdown.borrow() {
            return;
        }
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = self.shutdown.changed() => break,
                _ = self.tx.closed() => break,
                ev = self.events.recv() => {
                    let Some(ev) = ev else { break };
                    let line = encode_event(self.rt, &ev, self.output, self.include, first);
                    first = false;
                    if self.tx.send(Ok(line)).await.is_err() {
                        break;
                    }
                    if self.dropper.drop_now() {
                        tracing::debug!(resource = self.rt.plural, "dropping watch stream (fault injection)");
                        break;
                    }
                }
            }
        }
    }
}

fn encode_event(
    rt: &ResourceType,
    ev: &WatchEvent,
    output: Output,
    include: IncludeObject,
    first: bool,
) -> Bytes {
    let object = match output {
        _ if ev.kind == "ERROR" => return Bytes::from(ev.to_line()),
        Output::Json | Output::Yaml => return Bytes::from(ev.to_line()),
        Output::Meta(v) => table::partial_metadata(&ev.object, v),
        Output::Table(_) if ev.kind == "BOOKMARK" => return Bytes::from(ev.to_line()),
        Output::Table(v) => {
            let meta = json!({ "resourceVersion": ev.object.pointer("/metadata/resourceVersion").cloned().unwrap_or(json!("")) });
            table::table(rt, [&*ev.object], meta, v, include, first)
        }
    };
    let mut line =
        serde_json::to_vec(&json!({ "type": ev.kind, "object": object })).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds;

    /// The list as encoded from scratch: every item without its kind and apiVersion.
    fn reference(rt: &ResourceType, meta: &Value, items: &[SharedObject]) -> Vec<u8> {
        let items: Vec<Value> = items.iter().map(|o| strip_type_meta(&o.object)).collect();
        serde_json::to_vec(&json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": meta,
            "items": items,
        }))
        .unwrap()
    }

    #[test]
    fn encode_list_from_cached_encodings_matches_a_fresh_encoding() {
        let store = Store::new();
        let opts = WriteOptions::default();
        for name in ["b", "a"] {
            let node = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"k": "v"}}, "status": {"capacity": {"cpu": "2"}}});
            store.create(kinds::nodes(), None, node, &opts).unwrap();
        }
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "c",
            "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal",
            "regarding": {"kind": "Node", "name": "a"}, "note": "n"});
        store
            .create(kinds::events(), Some("default"), event, &opts)
            .unwrap();
        let meta = json!({"resourceVersion": "7"});
        for rt in [kinds::nodes(), kinds::events(), kinds::namespaces()] {
            let list = store
                .list_shared(rt, None, &ListOptions::default())
                .unwrap();
            assert!(!list.items.is_empty(), "{}", rt.plural);
            // Twice: once encoding the items, once from their cached encodings.
            for _ in 0..2 {
                let got = encode_list(rt, &meta, &list.items);
                assert_eq!(
                    String::from_utf8(got).unwrap(),
                    String::from_utf8(reference(rt, &meta, &list.items)).unwrap(),
                    "{}",
                    rt.plural
                );
            }
            let first = &list.items[0].object;
            assert!(
                first.get("kind").is_some(),
                "stored objects keep their kind"
            );
        }
    }

    #[test]
    fn type_meta_prefix_is_how_a_stored_object_encoding_starts() {
        assert_eq!(
            type_meta_prefix(kinds::events()),
            r#"{"kind":"Event","apiVersion":"events.k8s.io/v1","#
        );
    }
}
