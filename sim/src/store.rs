//! The object store: tables of objects per resource type, a global resourceVersion
//! counter, a bounded history of watch events per resource type, and watchers.
//!
//! Objects are kept as `Arc<serde_json::Value>` with a lazily computed, shared JSON
//! encoding, so a list ([`Store::list_shared`], what the server uses) copies no object
//! and encodes each at most once per version, and a watch event is serialized once no
//! matter how many watchers receive it. Writers hold the lock for the whole write and
//! hand events to watchers with `try_send`: they never wait; a watcher whose bounded
//! channel is full is closed, as the real server terminates slow watchers.

// `ApiError` (the interface's error type, with its `details` JSON) is larger than
// clippy's threshold; errors are the rare path here.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::error::{ApiError, Cause};
use crate::patch::{self, FieldSet, PatchError};
use crate::resources::{RESOURCES, ResourceType, kinds};
use crate::rules;
use crate::selector::{FieldSelector, LabelSelector};

/// The store. Thread-safe and cheap to clone (an `Arc` inside); all methods are sync
/// and never block on watchers.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

/// Options of a list request.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector` query parameter.
    pub label_selector: Option<String>,
    /// `fieldSelector` query parameter.
    pub field_selector: Option<String>,
    /// `limit` query parameter.
    pub limit: Option<usize>,
    /// `continue` query parameter.
    pub continue_token: Option<String>,
    /// `resourceVersion` query parameter.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` query parameter (`Exact`, `NotOlderThan`).
    pub resource_version_match: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, Default)]
pub struct ListResult {
    /// Items, sorted by namespace then name, with kind and apiVersion filled in.
    pub items: Vec<Value>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`, when more items remain.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when more items remain and no selector was given.
    pub remaining_item_count: Option<u64>,
}

/// One page of a list whose items are shared with the store (no deep copy): see
/// [`Store::list_shared`].
#[derive(Debug, Clone, Default)]
pub struct SharedList {
    /// Items, sorted by namespace then name.
    pub items: Vec<SharedObject>,
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`, when more items remain.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when more items remain and no selector was given.
    pub remaining_item_count: Option<u64>,
}

/// A stored object shared with the store, with its JSON encoding computed at most once.
#[derive(Debug, Clone)]
pub struct SharedObject {
    /// The object.
    pub object: Arc<Value>,
    encoded: Arc<OnceLock<String>>,
}

impl SharedObject {
    fn new(v: Value) -> Self {
        SharedObject {
            object: Arc::new(v),
            encoded: Arc::new(OnceLock::new()),
        }
    }

    /// The object serialized as JSON, computed once and shared by every clone.
    pub fn encoded(&self) -> &str {
        self.encoded
            .get_or_init(|| serde_json::to_string(&*self.object).unwrap_or_default())
    }

    fn event(&self, kind: &'static str) -> WatchEvent {
        WatchEvent {
            kind,
            object: self.object.clone(),
            encoded: self.encoded.clone(),
        }
    }
}

/// Options of a write (create, update, patch).
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and return the result without storing it.
    pub dry_run: bool,
    /// `fieldManager` query parameter.
    pub field_manager: Option<String>,
    /// `force` query parameter (server-side apply).
    pub force: bool,
}

/// Patch type, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

/// Options of a watch request.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    /// `resourceVersion` query parameter.
    pub resource_version: Option<String>,
    /// `labelSelector` query parameter.
    pub label_selector: Option<String>,
    /// `fieldSelector` query parameter.
    pub field_selector: Option<String>,
    /// `allowWatchBookmarks=true`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents=true`.
    pub send_initial_events: bool,
    /// `timeoutSeconds`: the channel closes after it.
    pub timeout: Option<Duration>,
}

/// One watch event. Cloning is cheap: the object is shared by every watcher that
/// receives the event, and so is its JSON encoding (see [`WatchEvent::encoded_object`]).
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub kind: &'static str,
    /// The object (a `metav1.Status` for ERROR).
    pub object: Arc<Value>,
    encoded: Arc<OnceLock<String>>,
}

impl WatchEvent {
    /// A new event for `object`.
    pub fn new(kind: &'static str, object: Value) -> Self {
        WatchEvent {
            kind,
            object: Arc::new(object),
            encoded: Arc::new(OnceLock::new()),
        }
    }

    /// The object serialized as JSON, computed once and shared by every clone.
    pub fn encoded_object(&self) -> &str {
        self.encoded
            .get_or_init(|| serde_json::to_string(&*self.object).unwrap_or_default())
    }

    /// One line of a watch stream: `{"type":"ADDED","object":{...}}\n`.
    pub fn to_line(&self) -> String {
        let obj = self.encoded_object();
        let mut s = String::with_capacity(obj.len() + 32);
        s.push_str("{\"type\":\"");
        s.push_str(self.kind);
        s.push_str("\",\"object\":");
        s.push_str(obj);
        s.push_str("}\n");
        s
    }
}

/// Namespaces that exist when the store starts.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];
/// Namespaces the real server refuses to delete.
const UNDELETABLE_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];
/// Live events a watcher may have queued before it is closed as too slow.
pub const DEFAULT_WATCH_BUFFER: usize = 4096;
/// Default interval between BOOKMARK events for watchers that allow them.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";
const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";

type Key = (String, String);

struct HistEvent {
    rv: u64,
    kind: &'static str,
    key: Key,
    obj: SharedObject,
    prev: Option<SharedObject>,
    /// The previous object with this event's resourceVersion: what a watcher receives
    /// as DELETED when the object stops matching its selector.
    deleted_view: OnceLock<SharedObject>,
}

impl HistEvent {
    fn deleted_view(&self) -> &SharedObject {
        self.deleted_view.get_or_init(|| match &self.prev {
            Some(p) => {
                let mut v = (*p.object).clone();
                set_meta(
                    &mut v,
                    "resourceVersion",
                    Value::String(self.rv.to_string()),
                );
                SharedObject::new(v)
            }
            None => self.obj.clone(),
        })
    }
}

struct Watcher {
    tx: mpsc::Sender<WatchEvent>,
    ns: Option<String>,
    label: LabelSelector,
    field: FieldSelector,
    /// Events are shown as events.k8s.io/v1 (stored as core/v1).
    to_events_v1: bool,
}

impl Watcher {
    fn matches(&self, key: &Key, obj: &Value) -> bool {
        if let Some(ns) = &self.ns
            && key.0 != *ns
        {
            return false;
        }
        self.label.matches_object(obj) && self.field.matches_object(obj)
    }

    /// The event this watcher receives for `ev`, with upstream's selector transitions.
    fn convert(&self, ev: &HistEvent) -> Option<WatchEvent> {
        let cur = ev.kind != "DELETED" && self.matches(&ev.key, &ev.obj.object);
        let old = ev
            .prev
            .as_ref()
            .is_some_and(|p| self.matches(&ev.key, &p.object));
        let e = match (cur, old) {
            (true, false) => ev.obj.event("ADDED"),
            (true, true) => ev.obj.event("MODIFIED"),
            (false, true) if ev.kind == "DELETED" => ev.obj.event("DELETED"),
            (false, true) => ev.deleted_view().event("DELETED"),
            (false, false) => return None,
        };
        Some(self.wrap(e))
    }

    /// The event as this watcher's API version shows it.
    fn wrap(&self, e: WatchEvent) -> WatchEvent {
        if self.to_events_v1 {
            WatchEvent::new(e.kind, view(kinds::events(), true, (*e.object).clone()))
        } else {
            e
        }
    }
}

#[derive(Default)]
struct Table {
    objects: BTreeMap<Key, SharedObject>,
    history: VecDeque<HistEvent>,
    /// resourceVersion of the newest event dropped from `history` (0: none yet).
    evicted_upto: u64,
    watchers: BTreeMap<u64, Watcher>,
}

impl Table {
    fn oldest_rv(&self) -> Option<u64> {
        self.history.front().map(|e| e.rv)
    }

    /// Whether events after `rv` are all still in the history window.
    fn too_old(&self, rv: u64) -> bool {
        self.evicted_upto > 0 && rv < self.evicted_upto
    }

    fn too_old_message(&self, rv: u64) -> String {
        let oldest = self.oldest_rv().unwrap_or(self.evicted_upto + 1);
        format!(
            "too old resource version: {rv} ({})",
            oldest.saturating_sub(1)
        )
    }
}

struct State {
    rv: u64,
    tables: HashMap<String, Table>,
}

struct Inner {
    state: RwLock<State>,
    history_limit: usize,
    watch_buffer: AtomicUsize,
    bookmark_interval_ms: AtomicU64,
    next_watcher: AtomicU64,
    rng: Mutex<rand_chacha::ChaCha8Rng>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------
// Small helpers

/// Now as RFC 3339 UTC with seconds (`2024-01-02T03:04:05Z`).
pub fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// A Unix time in seconds as RFC 3339 UTC.
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn set_meta(obj: &mut Value, field: &str, v: Value) {
    if let Value::Object(o) = obj {
        let m = o
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if !m.is_object() {
            *m = Value::Object(Map::new());
        }
        if let Value::Object(m) = m {
            m.insert(field.to_string(), v);
        }
    }
}

fn remove_meta(obj: &mut Value, field: &str) {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        m.shift_remove(field);
    }
}

fn obj_rv(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion").parse().unwrap_or(0)
}

/// Put `apiVersion` and `kind` first, as the real server's encoding does.
fn with_type_meta(rt: &ResourceType, obj: Value) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::with_capacity(m.len() + 2);
    out.insert("kind".into(), Value::String(rt.kind.to_string()));
    out.insert("apiVersion".into(), Value::String(rt.api_version()));
    for (k, v) in m {
        if k != "kind" && k != "apiVersion" {
            out.insert(k, v);
        }
    }
    Value::Object(out)
}

fn key_string(key: &Key) -> String {
    if key.0.is_empty() {
        key.1.clone()
    } else {
        format!("{}/{}", key.0, key.1)
    }
}

fn parse_key_string(s: &str) -> Key {
    match s.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (String::new(), s.to_string()),
    }
}

fn encode_continue(rv: u64, start: &str) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = |e: String| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {e}"
        ))
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_slice(&raw).map_err(|e| bad(e.to_string()))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("server does not recognize this encoded version".into()));
    }
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(|| {
        bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into())
    })?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("encoded start key must not be empty".into()))?
        .to_string();
    Ok((rv, start))
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

fn parse_label_selector(s: Option<&str>) -> Result<LabelSelector, ApiError> {
    match s {
        None => Ok(LabelSelector::default()),
        Some(s) => LabelSelector::parse(s).map_err(ApiError::bad_request),
    }
}

fn parse_field_selector(rt: &ResourceType, s: Option<&str>) -> Result<FieldSelector, ApiError> {
    match s {
        None => Ok(FieldSelector::default()),
        Some(s) => FieldSelector::parse_for(rt, s).map_err(ApiError::bad_request),
    }
}

/// 422 for invalid patch options: `PatchOptions.meta.k8s.io "" is invalid: ...`.
fn patch_options_invalid(causes: Vec<Cause>) -> ApiError {
    let agg: Vec<String> = causes.iter().map(ToString::to_string).collect();
    let causes_json: Vec<Value> = causes
        .iter()
        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
        .collect();
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!(
            "PatchOptions.meta.k8s.io \"\" is invalid: {}",
            if agg.len() == 1 {
                agg[0].clone()
            } else {
                format!("[{}]", agg.join(", "))
            }
        ),
        details: Some(
            json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": causes_json}),
        ),
        retry_after_seconds: None,
    }
}

fn map_patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::bad_request(m),
        PatchError::Unprocessable(_) => ApiError {
            code: 422,
            reason: "Invalid",
            message: "the server rejected our request due to an error in our request".into(),
            details: Some(json!({})),
            retry_after_seconds: None,
        },
        PatchError::Internal(m) => ApiError::internal(m),
    }
}

/// Whether `rt` has a status subresource whose fields the main resource ignores.
fn has_status_subresource(rt: &ResourceType) -> bool {
    rt.subresources.contains(&"status")
}

/// Whether an update of a missing object creates it (upstream `AllowCreateOnUpdate`).
fn allow_create_on_update(rt: &ResourceType) -> bool {
    matches!(rt.kind, "Lease" | "Event")
}

// ---------------------------------------------------------------------------------
// events.k8s.io/v1 Events share storage with core/v1 Events, as upstream.

/// Field renames between core/v1 Event (first) and events.k8s.io/v1 Event (second).
const EVENT_RENAMES: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The resource whose table holds `rt`'s objects, and whether objects convert between
/// the two (events.k8s.io/v1 Events live in the core/v1 Events table).
fn storage(rt: &ResourceType) -> (&ResourceType, bool) {
    if rt.group == "events.k8s.io" && rt.plural == "events" {
        (kinds::core_events(), true)
    } else {
        (rt, false)
    }
}

fn rename_fields(obj: Value, from_core: bool) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::with_capacity(m.len());
    for (k, v) in m {
        let renamed = EVENT_RENAMES.iter().find_map(|(core, v1)| {
            if from_core && k == *core {
                Some(*v1)
            } else if !from_core && k == *v1 {
                Some(*core)
            } else {
                None
            }
        });
        out.insert(renamed.map_or(k, str::to_string), v);
    }
    Value::Object(out)
}

/// A stored core/v1 Event as events.k8s.io/v1 shows it.
fn event_view(core: &Value) -> Value {
    let mut v = rename_fields(core.clone(), true);
    if let Value::Object(m) = &mut v
        && m.contains_key("apiVersion")
    {
        m.insert("apiVersion".into(), json!(kinds::events().api_version()));
    }
    v
}

/// The core/v1 form of a body sent as events.k8s.io/v1 (unchanged when `conv` is false).
fn stored_form(conv: bool, obj: Value) -> Value {
    if !conv {
        return obj;
    }
    let mut v = rename_fields(obj, false);
    if let Value::Object(m) = &mut v
        && m.get("apiVersion").and_then(Value::as_str) == Some("events.k8s.io/v1")
    {
        m.insert("apiVersion".into(), json!("v1"));
    }
    v
}

/// A stored object as `rt` shows it.
fn view(rt: &ResourceType, conv: bool, obj: Value) -> Value {
    if conv {
        with_type_meta(rt, event_view(&obj))
    } else {
        obj
    }
}

/// Errors name the resource the client asked for.
fn user_error(rt: &ResourceType, conv: bool, mut e: ApiError) -> ApiError {
    if !conv {
        return e;
    }
    let q = rt.qualified_resource();
    for (from, to) in [
        ("events \"".to_string(), format!("{q} \"")),
        (
            "Event \"".to_string(),
            format!("{} \"", rt.qualified_kind()),
        ),
    ] {
        if let Some(rest) = e.message.strip_prefix(&from) {
            e.message = format!("{to}{rest}");
        }
        e.message = e
            .message
            .replace(&format!("on {from}"), &format!("on {to}"));
    }
    if let Some(Value::Object(d)) = &mut e.details
        && (d.contains_key("kind") || d.contains_key("name"))
    {
        d.insert("group".into(), json!(rt.group));
    }
    e
}

fn parse_field_selector_for(
    rt: &ResourceType,
    conv: bool,
    s: Option<&str>,
) -> Result<FieldSelector, ApiError> {
    let Some(s) = s else {
        return Ok(FieldSelector::default());
    };
    if !conv {
        return parse_field_selector(rt, Some(s));
    }
    // events.k8s.io/v1 field labels name the v1 fields; the table is core/v1.
    let mut fs = FieldSelector::parse(s).map_err(ApiError::bad_request)?;
    for r in fs.requirements.iter_mut() {
        if let Some(rest) = r.field.strip_prefix("regarding.") {
            r.field = format!("involvedObject.{rest}");
        } else if r.field == "reportingController" {
            r.field = "reportingComponent".into();
        } else if r.field == "deprecatedSource" {
            r.field = "source".into();
        }
        if !crate::selector::supported_fields(rt).contains(&r.field.as_str()) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.field
            )));
        }
    }
    Ok(fs)
}

// ---------------------------------------------------------------------------------
// managedFields

#[derive(Debug, Clone)]
struct ManagedEntry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    fields: FieldSet,
}

impl ManagedEntry {
    fn same_owner(&self, manager: &str, operation: &str, sub: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == sub
    }

    /// Upstream's `printManager`.
    fn printed(&self) -> String {
        let mut s = rules::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                " with subresource {}",
                rules::go_quote(&self.subresource)
            ));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

fn parse_managed(obj: &Value) -> Vec<ManagedEntry> {
    let Some(list) = meta(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            ManagedEntry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields: e
                    .get("fieldsV1")
                    .map(FieldSet::from_fields_v1)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn render_managed(entries: &[ManagedEntry]) -> Value {
    Value::Array(
        entries
            .iter()
            .filter(|e| !e.fields.is_empty())
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.manager));
                m.insert("operation".into(), json!(e.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                m.insert("time".into(), json!(e.time));
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.fields.to_fields_v1());
                if !e.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.subresource));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

/// Record an Update-operation write by `manager`: it takes the changed fields from
/// every other manager; removed fields leave every manager.
fn track_update(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    sub: &str,
) -> Vec<ManagedEntry> {
    let mut entries = old.map(parse_managed).unwrap_or_default();
    let empty = Value::Object(Map::new());
    let old_v = old.unwrap_or(&empty);
    let changed = patch::changed_fields(old_v, new, rt.kind);
    let removed = patch::removed_fields(old_v, new, rt.kind);
    for e in entries.iter_mut() {
        if !e.same_owner(manager, "Update", sub) {
            e.fields.paths.retain(|p| !changed.paths.contains(p));
        }
        e.fields.paths.retain(|p| !removed.paths.contains(p));
    }
    if !changed.is_empty() {
        let now = now_rfc3339();
        match entries
            .iter_mut()
            .find(|e| e.same_owner(manager, "Update", sub))
        {
            Some(e) => {
                e.fields.paths.extend(changed.paths);
                e.time = now;
                e.api_version = rt.api_version();
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: rt.api_version(),
                time: now,
                subresource: sub.to_string(),
                fields: changed,
            }),
        }
    }
    entries.retain(|e| !e.fields.is_empty());
    entries
}

/// Only the fields a write to `sub` may touch: `status` for the status subresource,
/// everything but `status` for the main resource of a kind with a status subresource.
fn restrict_fields(rt: &ResourceType, sub: &str, fs: &mut FieldSet) {
    if sub == "status" {
        fs.paths
            .retain(|p| p.first().is_some_and(|e| e == "f:status"));
    } else if has_status_subresource(rt) {
        fs.paths
            .retain(|p| p.first().is_none_or(|e| e != "f:status"));
    }
}

// ---------------------------------------------------------------------------------

impl Store {
    /// A store with a history window of 10,000 watch events per resource type.
    pub fn new() -> Store {
        Self::with_history(10_000)
    }

    /// A store keeping `events` watch events per resource type (at least 1).
    pub fn with_history(events: usize) -> Store {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id()).rotate_left(32);
        let mut tables = HashMap::new();
        for rt in RESOURCES {
            tables.insert(rt.key(), Table::default());
        }
        let store = Store {
            inner: Arc::new(Inner {
                state: RwLock::new(State { rv: 0, tables }),
                history_limit: events.max(1),
                watch_buffer: AtomicUsize::new(DEFAULT_WATCH_BUFFER),
                bookmark_interval_ms: AtomicU64::new(DEFAULT_BOOKMARK_INTERVAL.as_millis() as u64),
                next_watcher: AtomicU64::new(1),
                rng: Mutex::new(rand_chacha::ChaCha8Rng::seed_from_u64(seed)),
            }),
        };
        for ns in INITIAL_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let _ = store.create(
                kinds::namespaces(),
                None,
                obj,
                &WriteOptions {
                    field_manager: Some("kube-apiserver".into()),
                    ..WriteOptions::default()
                },
            );
        }
        store
    }

    /// Set how many live events a watcher may have queued before it is closed as too
    /// slow (default [`DEFAULT_WATCH_BUFFER`]); applies to watches started afterwards.
    pub fn set_watch_buffer(&self, events: usize) {
        self.inner
            .watch_buffer
            .store(events.max(1), Ordering::Relaxed);
    }

    /// Set the interval between BOOKMARK events (default [`DEFAULT_BOOKMARK_INTERVAL`]);
    /// applies to watches started afterwards.
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.inner
            .bookmark_interval_ms
            .store((interval.as_millis() as u64).max(1), Ordering::Relaxed);
    }

    /// Number of open watches on `rt` (those not yet closed by timeout, slowness or the
    /// receiver going away and being noticed).
    pub fn watcher_count(&self, rt: &ResourceType) -> usize {
        let (rt, _) = storage(rt);
        let st = self.read();
        st.tables.get(&rt.key()).map_or(0, |t| t.watchers.len())
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.inner.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn uuid(&self) -> String {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        let hi = rng.next_u64();
        let lo = rng.next_u64();
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }

    fn generate_suffix(&self) -> String {
        const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        (0..5)
            .map(|_| ALPHANUMS[(rng.next_u32() as usize) % ALPHANUMS.len()] as char)
            .collect()
    }

    /// The store's current resourceVersion.
    pub fn current_resource_version(&self) -> u64 {
        self.read().rv
    }

    // ------------------------------------------------------------------ reads

    /// The object `name` (in `ns`).
    pub fn get(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        self.get_impl(srt, ns, name)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    fn get_impl(&self, rt: &ResourceType, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        let key = (ns.to_string(), name.to_string());
        let found = {
            let st = self.read();
            st.tables
                .get(&rt.key())
                .and_then(|t| t.objects.get(&key))
                .map(|o| o.object.clone())
        };
        match found {
            Some(o) => Ok((*o).clone()),
            None => Err(ApiError::not_found(rt, name)),
        }
    }

    /// A page of objects (deep copies).
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let shared = self.list_shared(rt, ns, opts)?;
        Ok(ListResult {
            items: shared.items.iter().map(|o| (*o.object).clone()).collect(),
            resource_version: shared.resource_version,
            continue_token: shared.continue_token,
            remaining_item_count: shared.remaining_item_count,
        })
    }

    /// A page of objects shared with the store: no deep copy, and each item's JSON
    /// encoding ([`SharedObject::encoded`]) is computed at most once per object version.
    pub fn list_shared(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<SharedList, ApiError> {
        let (srt, conv) = storage(rt);
        let mut list = self
            .list_impl(srt, conv, ns, opts)
            .map_err(|e| user_error(rt, conv, e))?;
        if conv {
            for item in list.items.iter_mut() {
                *item = SharedObject::new(view(rt, conv, (*item.object).clone()));
            }
        }
        Ok(list)
    }

    fn list_impl(
        &self,
        rt: &ResourceType,
        conv: bool,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<SharedList, ApiError> {
        let label = parse_label_selector(opts.label_selector.as_deref())?;
        let field = parse_field_selector_for(rt, conv, opts.field_selector.as_deref())?;
        let ns = ns.filter(|n| rt.namespaced && !n.is_empty());
        let limit = opts.limit.filter(|l| *l > 0);
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let token = opts.continue_token.as_deref().filter(|s| !s.is_empty());
        if token.is_some() && rv_param.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let st = self.read();
        let current = st.rv;
        let table = st
            .tables
            .get(&rt.key())
            .ok_or_else(|| ApiError::not_found(rt, ""))?;

        // Which resourceVersion the list shows, and where it starts.
        let (snapshot, start) = match token {
            Some(t) => {
                let (rv, start) = decode_continue(t)?;
                if table.too_old(rv) {
                    return Err(ApiError::gone(CONTINUE_EXPIRED));
                }
                (rv, Some(parse_key_string(start.trim_end_matches('\0'))))
            }
            None => match rv_param {
                None | Some("0") => (current, None),
                Some(r) => {
                    let rv = parse_rv(r)?;
                    if rv > current {
                        return Err(ApiError::too_large_resource_version(rv, current));
                    }
                    let exact = match opts.resource_version_match.as_deref() {
                        Some("Exact") => true,
                        Some("NotOlderThan") => false,
                        // Legacy semantics: a resourceVersion with a limit is exact.
                        _ => limit.is_some(),
                    };
                    if exact {
                        if table.too_old(rv) {
                            return Err(ApiError::gone(LIST_EXPIRED));
                        }
                        (rv, None)
                    } else {
                        (current, None)
                    }
                }
            },
        };
        let inclusive_start = token.is_none();

        // Objects as they were at `snapshot`: undo every later change.
        let mut overrides: BTreeMap<&Key, Option<&SharedObject>> = BTreeMap::new();
        if snapshot < current {
            for ev in table.history.iter().rev() {
                if ev.rv <= snapshot {
                    break;
                }
                overrides.insert(&ev.key, ev.prev.as_ref());
            }
        }
        let in_scope = |k: &Key| -> bool {
            if let Some(n) = ns
                && k.0 != n
            {
                return false;
            }
            match &start {
                None => true,
                Some(s) => {
                    if inclusive_start {
                        k >= s
                    } else {
                        k > s
                    }
                }
            }
        };
        let selects = |o: &SharedObject| -> bool {
            label.matches_object(&o.object) && field.matches_object(&o.object)
        };
        let no_selector = label.is_empty() && field.is_empty();

        let mut items: Vec<SharedObject> = Vec::new();
        let mut last_key: Option<Key> = None;
        let mut more = false;
        let mut remaining: u64 = 0;
        let range_start: Key = match (&start, ns) {
            (Some(s), _) => s.clone(),
            (None, Some(n)) => (n.to_string(), String::new()),
            (None, None) => (String::new(), String::new()),
        };
        let mut visit = |k: &Key, o: &SharedObject| -> bool {
            // Returns false to stop.
            if !in_scope(k) {
                return ns.is_none_or(|n| k.0.as_str() <= n);
            }
            if !selects(o) {
                return true;
            }
            if limit.is_some_and(|l| items.len() >= l) {
                more = true;
                remaining += 1;
                return no_selector;
            }
            items.push(o.clone());
            last_key = Some(k.clone());
            true
        };
        if overrides.is_empty() {
            for (k, o) in table.objects.range(range_start..) {
                if !visit(k, o) {
                    break;
                }
            }
        } else {
            let mut merged: BTreeMap<&Key, &SharedObject> = BTreeMap::new();
            for (k, o) in table.objects.range(range_start.clone()..) {
                if !overrides.contains_key(k) {
                    merged.insert(k, o);
                }
            }
            for (k, o) in &overrides {
                if let Some(o) = o
                    && **k >= range_start
                {
                    merged.insert(k, o);
                }
            }
            for (k, o) in merged {
                if !visit(k, o) {
                    break;
                }
            }
        }
        drop(st);
        let continue_token = if more {
            last_key.map(|k| encode_continue(snapshot, &format!("{}\0", key_string(&k))))
        } else {
            None
        };
        Ok(SharedList {
            items,
            resource_version: snapshot.to_string(),
            remaining_item_count: (more && no_selector).then_some(remaining),
            continue_token,
        })
    }

    // ------------------------------------------------------------------ writes

    /// Create an object.
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        let obj = stored_form(conv, obj);
        let mut st = self.write();
        self.create_locked(&mut st, srt, ns, obj, opts, None)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    #[allow(clippy::too_many_arguments)]
    fn create_locked(
        &self,
        st: &mut State,
        rt: &ResourceType,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
        managed: Option<Vec<ManagedEntry>>,
    ) -> Result<Value, ApiError> {
        let mut obj = check_body(rt, obj)?;
        let req_ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
        // Namespace of the object against the request's.
        let obj_ns = meta_str(&obj, "namespace").to_string();
        if rt.namespaced {
            if obj_ns.is_empty() {
                set_meta(&mut obj, "namespace", Value::String(req_ns.to_string()));
            } else if obj_ns != req_ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        } else {
            remove_meta(&mut obj, "namespace");
        }
        if !meta_str(&obj, "resourceVersion").is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        // generateName.
        if meta_str(&obj, "name").is_empty() {
            let gen_name = meta_str(&obj, "generateName").to_string();
            if !gen_name.is_empty() {
                let base: String = gen_name.chars().take(58).collect();
                let name = format!("{base}{}", self.generate_suffix());
                set_meta(&mut obj, "name", Value::String(name));
            }
        }
        let name = meta_str(&obj, "name").to_string();
        // System fields.
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            remove_meta(&mut obj, f);
        }
        prepare_for_create(rt, &mut obj);
        let errs = rules::validate(rt, &obj, None);
        if !errs.is_empty() {
            return Err(ApiError::invalid(rt, &name, errs));
        }
        if rt.namespaced
            && !st
                .tables
                .get(&kinds::namespaces().key())
                .is_some_and(|t| t.objects.contains_key(&(String::new(), req_ns.to_string())))
        {
            return Err(ApiError::namespace_not_found(req_ns));
        }
        let key = (req_ns.to_string(), name.clone());
        let table = st
            .tables
            .get(&rt.key())
            .ok_or_else(|| ApiError::not_found(rt, &name))?;
        if table.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        set_meta(&mut obj, "uid", Value::String(self.uuid()));
        set_meta(&mut obj, "creationTimestamp", Value::String(now_rfc3339()));
        set_meta(&mut obj, "generation", json!(1));
        let entries = match managed {
            Some(m) => m,
            None => {
                let manager = opts.field_manager.as_deref().unwrap_or("unknown");
                track_update(rt, None, &obj, manager, "")
            }
        };
        if !entries.is_empty() {
            set_meta(&mut obj, "managedFields", render_managed(&entries));
        }
        let obj = with_type_meta(rt, obj);
        if opts.dry_run {
            return Ok(obj);
        }
        Ok(self.commit(st, rt, key, "ADDED", obj, None))
    }

    /// Store `obj` under `key` with the next resourceVersion, record the event and hand
    /// it to watchers. `prev` is the object it replaces.
    fn commit(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: Key,
        kind: &'static str,
        mut obj: Value,
        prev: Option<SharedObject>,
    ) -> Value {
        st.rv += 1;
        let rv = st.rv;
        set_meta(&mut obj, "resourceVersion", Value::String(rv.to_string()));
        let shared = SharedObject::new(obj);
        let out = (*shared.object).clone();
        let limit = self.inner.history_limit;
        let Some(table) = st.tables.get_mut(&rt.key()) else {
            return out;
        };
        if kind == "DELETED" {
            table.objects.remove(&key);
        } else {
            table.objects.insert(key.clone(), shared.clone());
        }
        table.history.push_back(HistEvent {
            rv,
            kind,
            key,
            obj: shared,
            prev,
            deleted_view: OnceLock::new(),
        });
        while table.history.len() > limit {
            if let Some(e) = table.history.pop_front() {
                table.evicted_upto = e.rv;
            }
        }
        let Table {
            history, watchers, ..
        } = table;
        if let Some(ev) = history.back()
            && !watchers.is_empty()
        {
            let mut dead = Vec::new();
            for (id, w) in watchers.iter() {
                if let Some(e) = w.convert(ev)
                    && w.tx.try_send(e).is_err()
                {
                    dead.push(*id);
                }
            }
            for id in dead {
                watchers.remove(&id);
            }
        }
        out
    }

    /// Replace an object (or its status with `subresource = Some("status")`).
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        let obj = stored_form(conv, obj);
        self.update_impl(srt, ns, name, subresource, obj, opts)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    fn update_impl(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut obj = check_body(rt, obj)?;
        check_name(rt, ns, name, &mut obj)?;
        let mut st = self.write();
        let key = (
            if rt.namespaced { ns.unwrap_or("") } else { "" }.to_string(),
            name.to_string(),
        );
        let existing = st
            .tables
            .get(&rt.key())
            .and_then(|t| t.objects.get(&key))
            .cloned();
        let Some(existing) = existing else {
            if allow_create_on_update(rt) && subresource.is_none() {
                remove_meta(&mut obj, "resourceVersion");
                return self.create_locked(&mut st, rt, ns, obj, opts, None);
            }
            return Err(ApiError::not_found(rt, name));
        };
        let body_rv = meta_str(&obj, "resourceVersion").to_string();
        if !body_rv.is_empty() {
            let rv = parse_rv(&body_rv)?;
            if rv != obj_rv(&existing.object) {
                return Err(ApiError::stale(rt, name));
            }
        }
        let new = shape_update(rt, subresource, &existing.object, obj);
        let manager = opts.field_manager.as_deref().unwrap_or("unknown");
        self.finish_update(
            &mut st,
            rt,
            key,
            existing,
            new,
            opts,
            ManagedUpdate::Track(manager, subresource.unwrap_or("")),
        )
    }

    /// Validate, bump generation, record managedFields and commit an update of
    /// `existing` to `new` (which already has the shape the subresource allows).
    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: Key,
        existing: SharedObject,
        mut new: Value,
        opts: &WriteOptions,
        managed: ManagedUpdate<'_>,
    ) -> Result<Value, ApiError> {
        let old = &*existing.object;
        // Server-owned metadata stays as stored.
        for f in ["generation", "resourceVersion", "deletionTimestamp"] {
            match meta(old).and_then(|m| m.get(f)) {
                Some(v) => set_meta(&mut new, f, v.clone()),
                None => remove_meta(&mut new, f),
            }
        }
        // uid and creationTimestamp may be omitted (kept) but not changed.
        for f in ["uid", "creationTimestamp"] {
            if meta_str(&new, f).is_empty()
                && let Some(v) = meta(old).and_then(|m| m.get(f))
            {
                set_meta(&mut new, f, v.clone());
            }
        }
        prepare_secret(rt, &mut new);
        let errs = rules::validate(rt, &new, Some(old));
        if !errs.is_empty() {
            return Err(ApiError::invalid(rt, &key.1, errs));
        }
        // Generation: +1 when anything but metadata and status changes.
        let spec_changed = {
            let strip = |v: &Value| -> Map<String, Value> {
                v.as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| {
                                !matches!(k.as_str(), "metadata" | "status" | "kind" | "apiVersion")
                            })
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            strip(&new) != strip(old)
        };
        if spec_changed {
            let g = meta(old)
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_meta(&mut new, "generation", json!(g + 1));
        }
        let entries = match managed {
            ManagedUpdate::Track(manager, sub) => track_update(rt, Some(old), &new, manager, sub),
            ManagedUpdate::Given(entries) => entries,
        };
        if entries.is_empty() {
            remove_meta(&mut new, "managedFields");
        } else {
            set_meta(&mut new, "managedFields", render_managed(&entries));
        }
        let new = with_type_meta(rt, new);
        // A write that changes nothing is not a write: same resourceVersion, no event.
        if new == *old {
            return Ok(new);
        }
        if opts.dry_run {
            return Ok(new);
        }
        Ok(self.commit(st, rt, key, "MODIFIED", new, Some(existing)))
    }

    /// Patch an object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        self.patch_impl(srt, conv, ns, name, subresource, patch_type, body, opts)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    #[allow(clippy::too_many_arguments)]
    fn patch_impl(
        &self,
        rt: &ResourceType,
        conv: bool,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if patch_type == PatchType::Apply {
            if opts.field_manager.as_deref().unwrap_or("").is_empty() {
                return Err(patch_options_invalid(vec![rules::required(
                    "fieldManager",
                    "is required for apply patch",
                )]));
            }
        } else if opts.force {
            return Err(patch_options_invalid(vec![rules::forbidden(
                "force",
                "may not be specified for non-apply patch",
            )]));
        }
        let sub = subresource.unwrap_or("");
        let parsed = match patch_type {
            PatchType::Apply => patch::parse_apply(body),
            _ => patch::parse_json(body),
        }
        .map_err(map_patch_error)?;
        let parsed = if patch_type == PatchType::Apply {
            stored_form(conv, parsed)
        } else {
            parsed
        };
        let mut st = self.write();
        let key = (
            if rt.namespaced { ns.unwrap_or("") } else { "" }.to_string(),
            name.to_string(),
        );
        let existing = st
            .tables
            .get(&rt.key())
            .and_then(|t| t.objects.get(&key))
            .cloned();
        let Some(existing) = existing else {
            if patch_type == PatchType::Apply && sub.is_empty() {
                return self.apply_create(&mut st, rt, ns, name, parsed, opts);
            }
            return Err(ApiError::not_found(rt, name));
        };
        let old = &*existing.object;
        if patch_type == PatchType::Apply {
            let (new, entries) = apply_to(rt, old, parsed, name, ns, opts, sub)?;
            let new = shape_update(rt, subresource, old, new);
            return self.finish_update(
                &mut st,
                rt,
                key,
                existing.clone(),
                new,
                opts,
                ManagedUpdate::Given(entries),
            );
        }
        // The patch applies to the object as the client's version shows it.
        let old_view = if conv { event_view(old) } else { old.clone() };
        let patched = match patch_type {
            PatchType::Merge => {
                if !parsed.is_object() {
                    return Err(ApiError::bad_request("Invalid JSON Patch"));
                }
                let mut v = old_view;
                patch::merge_patch(&mut v, &parsed);
                v
            }
            PatchType::Json => {
                let mut v = old_view;
                patch::json_patch(&mut v, &parsed).map_err(map_patch_error)?;
                v
            }
            PatchType::StrategicMerge => {
                patch::strategic_merge(&old_view, &parsed, rt.kind).map_err(map_patch_error)?
            }
            PatchType::Apply => old_view,
        };
        if !patched.is_object() {
            return Err(ApiError::bad_request(
                "the patched object is not a JSON object",
            ));
        }
        let mut patched = stored_form(conv, patched);
        check_name(rt, ns, name, &mut patched)?;
        // A resourceVersion in the patch is a precondition.
        let prv = meta_str(&patched, "resourceVersion").to_string();
        if !prv.is_empty() && prv != meta_str(old, "resourceVersion") {
            return Err(ApiError::stale(rt, name));
        }
        let new = shape_update(rt, subresource, old, patched);
        let manager = opts.field_manager.as_deref().unwrap_or("unknown");
        self.finish_update(
            &mut st,
            rt,
            key,
            existing.clone(),
            new,
            opts,
            ManagedUpdate::Track(manager, sub),
        )
    }

    fn apply_create(
        &self,
        st: &mut State,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        applied: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let empty = json!({});
        let (mut new, entries) = apply_to(rt, &empty, applied, name, ns, opts, "")?;
        set_meta(&mut new, "name", Value::String(name.to_string()));
        remove_meta(&mut new, "resourceVersion");
        self.create_locked(st, rt, ns, new, opts, Some(entries))
    }

    /// Delete an object; returns the deleted object (for a namespace: with
    /// `deletionTimestamp` and phase `Terminating`, as the real server answers).
    /// Deleting a namespace deletes every object in it first.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<Value>,
    ) -> Result<Value, ApiError> {
        let (srt, conv) = storage(rt);
        self.delete_impl(srt, ns, name, preconditions)
            .map(|v| view(rt, conv, v))
            .map_err(|e| user_error(rt, conv, e))
    }

    fn delete_impl(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<Value>,
    ) -> Result<Value, ApiError> {
        let mut st = self.write();
        let key = (
            if rt.namespaced { ns.unwrap_or("") } else { "" }.to_string(),
            name.to_string(),
        );
        let existing = st
            .tables
            .get(&rt.key())
            .and_then(|t| t.objects.get(&key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        if let Some(p) = preconditions.as_ref().and_then(Value::as_object) {
            if let Some(uid) = p.get("uid").and_then(Value::as_str) {
                let have = meta_str(&existing.object, "uid");
                if uid != have {
                    return Err(ApiError::conflict(
                        rt,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                        ),
                    ));
                }
            }
            if let Some(rv) = p.get("resourceVersion").and_then(Value::as_str) {
                let have = meta_str(&existing.object, "resourceVersion");
                if rv != have {
                    return Err(ApiError::conflict(
                        rt,
                        name,
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
                        ),
                    ));
                }
            }
        }
        let is_namespace = rt.group.is_empty() && rt.plural == "namespaces";
        if is_namespace {
            if UNDELETABLE_NAMESPACES.contains(&name) {
                return Err(ApiError {
                    code: 403,
                    reason: "Forbidden",
                    message: format!(
                        "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                    ),
                    details: Some(json!({"name": name, "kind": "namespaces"})),
                    retry_after_seconds: None,
                });
            }
            // Delete the namespace's content, type by type.
            for crt in RESOURCES.iter().filter(|r| r.namespaced) {
                let keys: Vec<Key> = st
                    .tables
                    .get(&crt.key())
                    .map(|t| {
                        t.objects
                            .range((name.to_string(), String::new())..)
                            .take_while(|(k, _)| k.0 == name)
                            .map(|(k, _)| k.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                for k in keys {
                    let prev = st
                        .tables
                        .get(&crt.key())
                        .and_then(|t| t.objects.get(&k))
                        .cloned();
                    if let Some(prev) = prev {
                        let obj = (*prev.object).clone();
                        self.commit(&mut st, crt, k, "DELETED", obj, Some(prev));
                    }
                }
            }
        }
        let obj = (*existing.object).clone();
        self.commit(&mut st, rt, key, "DELETED", obj, Some(existing.clone()));
        let mut out = (*existing.object).clone();
        if is_namespace {
            set_meta(&mut out, "deletionTimestamp", Value::String(now_rfc3339()));
            if let Value::Object(m) = &mut out {
                m.insert("status".into(), json!({"phase": "Terminating"}));
            }
        }
        Ok(out)
    }

    // ------------------------------------------------------------------ watch

    /// Events after `opts.resource_version` (or, without one / "0", synthetic ADDED for
    /// the current state first), then live ones; ERROR event with 410 status when too old.
    pub fn watch(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        opts: &WatchOptions,
    ) -> Result<mpsc::Receiver<WatchEvent>, ApiError> {
        let (srt, conv) = storage(rt);
        self.watch_impl(rt, srt, conv, ns, opts)
            .map_err(|e| user_error(rt, conv, e))
    }

    fn watch_impl(
        &self,
        user_rt: &ResourceType,
        rt: &ResourceType,
        conv: bool,
        ns: Option<&str>,
        opts: &WatchOptions,
    ) -> Result<mpsc::Receiver<WatchEvent>, ApiError> {
        let label = parse_label_selector(opts.label_selector.as_deref())?;
        let field = parse_field_selector_for(rt, conv, opts.field_selector.as_deref())?;
        let ns = ns
            .filter(|n| rt.namespaced && !n.is_empty())
            .map(str::to_string);
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let from: Option<u64> = match rv_param {
            None | Some("0") => None,
            Some(r) => Some(parse_rv(r)?),
        };
        let watcher_tmp = Watcher {
            // Placeholder sender, replaced below.
            tx: mpsc::channel(1).0,
            ns,
            label,
            field,
            to_events_v1: conv,
        };
        let mut st = self.write();
        let current = st.rv;
        if let Some(rv) = from
            && rv > current
        {
            return Err(ApiError::too_large_resource_version(rv, current));
        }
        let Some(table) = st.tables.get_mut(&rt.key()) else {
            return Err(ApiError::not_found(rt, ""));
        };
        let mut initial: Vec<WatchEvent> = Vec::new();
        let initial_state = from.is_none() || opts.send_initial_events;
        if let Some(rv) = from
            && !opts.send_initial_events
        {
            if table.too_old(rv) {
                let status = ApiError::gone(table.too_old_message(rv)).to_status();
                let (tx, rx) = mpsc::channel(1);
                let _ = tx.try_send(WatchEvent::new("ERROR", status));
                return Ok(rx);
            }
            for ev in table.history.iter().filter(|e| e.rv > rv) {
                if let Some(e) = watcher_tmp.convert(ev) {
                    initial.push(e);
                }
            }
        }
        if initial_state {
            let range_start: Key = match &watcher_tmp.ns {
                Some(n) => (n.clone(), String::new()),
                None => (String::new(), String::new()),
            };
            for (k, o) in table.objects.range(range_start..) {
                if let Some(n) = &watcher_tmp.ns
                    && k.0 != *n
                {
                    break;
                }
                if watcher_tmp.matches(k, &o.object) {
                    initial.push(watcher_tmp.wrap(o.event("ADDED")));
                }
            }
            if opts.send_initial_events && opts.allow_bookmarks {
                initial.push(WatchEvent::new(
                    "BOOKMARK",
                    json!({
                        "kind": user_rt.kind,
                        "apiVersion": user_rt.api_version(),
                        "metadata": {
                            "resourceVersion": current.to_string(),
                            "annotations": {"k8s.io/initial-events-end": "true"}
                        }
                    }),
                ));
            }
        }
        let buffer = self.inner.watch_buffer.load(Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(initial.len() + buffer);
        for e in initial {
            // Capacity covers every initial event.
            let _ = tx.try_send(e);
        }
        let id = self.inner.next_watcher.fetch_add(1, Ordering::Relaxed);
        table.watchers.insert(id, Watcher { tx, ..watcher_tmp });
        drop(st);
        self.spawn_watch_timer(user_rt, rt.key(), id, opts);
        Ok(rx)
    }

    /// Bookmarks and the timeout of watch `id`, on the tokio runtime (if there is one).
    fn spawn_watch_timer(
        &self,
        rt: &ResourceType,
        table_key: String,
        id: u64,
        opts: &WatchOptions,
    ) {
        if !opts.allow_bookmarks && opts.timeout.is_none() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let kind = rt.kind;
        let api_version = rt.api_version();
        let bookmarks = opts.allow_bookmarks;
        let interval =
            Duration::from_millis(self.inner.bookmark_interval_ms.load(Ordering::Relaxed));
        let deadline = opts.timeout.map(|t| tokio::time::Instant::now() + t);
        handle.spawn(async move {
            let mut next_bookmark = tokio::time::Instant::now() + interval;
            loop {
                let wake = match deadline {
                    Some(d) if !bookmarks || d <= next_bookmark => d,
                    _ => next_bookmark,
                };
                tokio::time::sleep_until(wake).await;
                let Some(inner) = weak.upgrade() else { return };
                let store = Store { inner };
                if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    let mut st = store.write();
                    if let Some(t) = st.tables.get_mut(&table_key) {
                        t.watchers.remove(&id);
                    }
                    return;
                }
                next_bookmark += interval;
                let failed = {
                    let st = store.read();
                    let Some(w) = st.tables.get(&table_key).and_then(|t| t.watchers.get(&id)) else {
                        return;
                    };
                    let bm = WatchEvent::new(
                        "BOOKMARK",
                        json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": st.rv.to_string()}}),
                    );
                    w.tx.try_send(bm).is_err()
                };
                if failed {
                    let mut st = store.write();
                    if let Some(t) = st.tables.get_mut(&table_key) {
                        t.watchers.remove(&id);
                    }
                    return;
                }
            }
        });
    }
}

enum ManagedUpdate<'a> {
    /// Track an Update operation by (manager, subresource).
    Track(&'a str, &'a str),
    /// Entries already computed (server-side apply).
    Given(Vec<ManagedEntry>),
}

/// The request body must be an object of this resource's kind and version.
fn check_body(rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {})",
            rt.kind
        )));
    }
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str)
        && av != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): kind {k}",
            rt.kind
        )));
    }
    Ok(obj)
}

/// upstream `checkName`: the body's name and namespace must match the URL's.
fn check_name(
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let req_ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
    let obj_ns = meta_str(obj, "namespace").to_string();
    if rt.namespaced {
        if obj_ns.is_empty() {
            set_meta(obj, "namespace", Value::String(req_ns.to_string()));
        } else if obj_ns != req_ns {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({obj_ns}) does not match the namespace on the request ({req_ns})"
            )));
        }
    } else if !obj_ns.is_empty() {
        remove_meta(obj, "namespace");
    }
    let obj_name = meta_str(obj, "name").to_string();
    if obj_name.is_empty() {
        set_meta(obj, "name", Value::String(name.to_string()));
    } else if obj_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({obj_name}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// The object an update leaves: the main resource of a kind with a status subresource
/// keeps the stored status; the status subresource changes only the status.
fn shape_update(rt: &ResourceType, sub: Option<&str>, old: &Value, mut new: Value) -> Value {
    match sub {
        Some("status") => {
            let mut out = old.clone();
            if let Value::Object(m) = &mut out {
                match new.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.shift_remove("status");
                    }
                }
            }
            // The body's resourceVersion was already checked; keep the stored metadata.
            out
        }
        _ => {
            if has_status_subresource(rt)
                && let Value::Object(m) = &mut new
            {
                match old.get("status") {
                    Some(s) => {
                        m.insert("status".into(), s.clone());
                    }
                    None => {
                        m.shift_remove("status");
                    }
                }
                if rt.kind == "Namespace" {
                    let fins = old.pointer("/spec/finalizers").cloned();
                    if let Some(spec) = m.entry("spec").or_insert_with(|| json!({})).as_object_mut()
                    {
                        match fins {
                            Some(f) => {
                                spec.insert("finalizers".into(), f);
                            }
                            None => {
                                spec.shift_remove("finalizers");
                            }
                        }
                    }
                }
            }
            new
        }
    }
}

/// Per-kind defaults and strategy on create.
fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    if rt.group.is_empty() && rt.kind == "Namespace" {
        if let Value::Object(m) = obj {
            m.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            m.insert("status".into(), json!({"phase": "Active"}));
        }
        let name = meta_str(obj, "name").to_string();
        if !name.is_empty() {
            let labels = obj
                .pointer_mut("/metadata/labels")
                .filter(|l| l.is_object())
                .map(|l| l.take())
                .unwrap_or_else(|| json!({}));
            let mut labels = labels;
            if let Value::Object(l) = &mut labels {
                l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            }
            set_meta(obj, "labels", labels);
        }
    }
    prepare_secret(rt, obj);
}

/// Secrets: `stringData` is folded into `data` (base64), `type` defaults to Opaque.
fn prepare_secret(rt: &ResourceType, obj: &mut Value) {
    if !(rt.group.is_empty() && rt.kind == "Secret") {
        return;
    }
    let Value::Object(m) = obj else { return };
    if let Some(Value::Object(sd)) = m.shift_remove("stringData") {
        let data = m.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        if let Value::Object(d) = data {
            for (k, v) in sd {
                let s = v.as_str().unwrap_or("");
                d.insert(
                    k,
                    Value::String(base64::engine::general_purpose::STANDARD.encode(s)),
                );
            }
        }
    }
    if m.get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        m.insert("type".into(), json!("Opaque"));
    }
}

/// Server-side apply of `applied` by `opts.field_manager` over `live` (`{}` when the
/// object does not exist): conflicts, merge, removal of fields the manager no longer
/// applies, and the new managedFields.
fn apply_to(
    rt: &ResourceType,
    live: &Value,
    applied: Value,
    name: &str,
    ns: Option<&str>,
    opts: &WriteOptions,
    sub: &str,
) -> Result<(Value, Vec<ManagedEntry>), ApiError> {
    let manager = opts.field_manager.as_deref().unwrap_or("");
    let mut applied = applied;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    let av = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if av != rt.api_version() {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {av}, expected: {}",
            rt.api_version()
        )));
    }
    if let Some(k) = applied.get("kind").and_then(Value::as_str)
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "Incorrect kind specified in apply patch. Specified patch kind: {k}, expected: {}",
            rt.kind
        )));
    }
    check_name(rt, ns, name, &mut applied)?;
    for f in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        if f != "resourceVersion" {
            remove_meta(&mut applied, f);
        }
    }
    // A resourceVersion in the applied configuration is a precondition.
    let arv = meta_str(&applied, "resourceVersion").to_string();
    if !arv.is_empty() && arv != meta_str(live, "resourceVersion") {
        return Err(ApiError::stale(rt, name));
    }
    remove_meta(&mut applied, "resourceVersion");
    let mut applied_fields = FieldSet::of(&applied, rt.kind);
    restrict_fields(rt, sub, &mut applied_fields);

    let mut entries = parse_managed(live);
    // Conflicts with every other manager that owns an applied field with another value.
    let mut conflicts: Vec<(usize, patch::FieldPath)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.same_owner(manager, "Apply", sub) {
            continue;
        }
        for p in applied_fields.paths.intersection(&e.fields.paths) {
            if p.last()
                .is_some_and(|x| x.starts_with("k:") || x.starts_with("v:"))
            {
                continue;
            }
            let a = patch::value_at(&applied, p);
            let l = patch::value_at(live, p);
            if a != l {
                conflicts.push((i, p.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !opts.force {
            return Err(apply_conflict_error(&entries, &conflicts));
        }
        for (i, p) in &conflicts {
            if let Some(e) = entries.get_mut(*i) {
                e.fields.paths.remove(p);
            }
        }
    }
    let mut new = live.clone();
    patch::apply_merge(&mut new, &applied, rt.kind, "");
    // Fields this manager applied before and no longer does, owned by nobody else.
    let previous: FieldSet = entries
        .iter()
        .find(|e| e.same_owner(manager, "Apply", sub))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let dropped: Vec<&patch::FieldPath> = previous
        .paths
        .iter()
        .filter(|p| !applied_fields.paths.contains(*p))
        .filter(|p| {
            !entries
                .iter()
                .any(|e| !e.same_owner(manager, "Apply", sub) && e.fields.paths.contains(*p))
        })
        .collect();
    for p in dropped.into_iter().rev() {
        patch::remove_at(&mut new, p);
    }
    let now = now_rfc3339();
    match entries
        .iter_mut()
        .find(|e| e.same_owner(manager, "Apply", sub))
    {
        Some(e) => {
            if e.fields != applied_fields {
                e.time = now;
            }
            e.fields = applied_fields;
            e.api_version = rt.api_version();
        }
        None => entries.push(ManagedEntry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: rt.api_version(),
            time: now,
            subresource: sub.to_string(),
            fields: applied_fields,
        }),
    }
    entries.retain(|e| !e.fields.is_empty());
    remove_meta(&mut new, "managedFields");
    Ok((new, entries))
}

/// Upstream's apply conflict: `Apply failed with 1 conflict: conflict with "m" using v1: .data.k`.
fn apply_conflict_error(
    entries: &[ManagedEntry],
    conflicts: &[(usize, patch::FieldPath)],
) -> ApiError {
    let printed = |i: usize| {
        entries
            .get(i)
            .map(ManagedEntry::printed)
            .unwrap_or_default()
    };
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(i, p)| Cause {
            field: patch::path_string(p),
            reason: "FieldManagerConflict",
            message: format!("conflict with {}", printed(*i)),
        })
        .collect();
    let message = if conflicts.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            printed(conflicts[0].0),
            patch::path_string(&conflicts[0].1)
        )
    } else {
        // Grouped by manager, in the order of upstream's encoded manager identifiers.
        let mut by_manager: BTreeMap<(String, String, String), (usize, Vec<String>)> =
            BTreeMap::new();
        for (i, p) in conflicts {
            let Some(e) = entries.get(*i) else { continue };
            by_manager
                .entry((
                    e.manager.clone(),
                    e.operation.clone(),
                    e.subresource.clone(),
                ))
                .or_insert_with(|| (*i, Vec::new()))
                .1
                .push(patch::path_string(p));
        }
        let mut lines = Vec::new();
        for (i, paths) in by_manager.values() {
            lines.push(format!("conflicts with {}:", printed(*i)));
            for p in paths {
                lines.push(format!("- {p}"));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    ApiError::apply_conflict(causes, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds::{configmaps, leases, namespaces, nodes, secrets};

    fn cm(name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
    }

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "a"}},
               "spec": {"podCIDR": "10.0.0.0/24"},
               "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn wo(manager: &str) -> WriteOptions {
        WriteOptions {
            field_manager: Some(manager.into()),
            ..WriteOptions::default()
        }
    }

    fn rv(v: &Value) -> u64 {
        obj_rv(v)
    }

    fn drain(rx: &mut mpsc::Receiver<WatchEvent>) -> Vec<(String, String, u64)> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push((
                e.kind.to_string(),
                meta_str(&e.object, "name").to_string(),
                obj_rv(&e.object),
            ));
        }
        out
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        let now = now_rfc3339();
        assert_eq!(now.len(), 20);
        assert!(now.ends_with('Z'));
    }

    #[test]
    fn create_sets_server_fields() {
        let s = Store::new();
        let start = s.current_resource_version();
        assert_eq!(start, 4, "four initial namespaces");
        let c = s
            .create(
                configmaps(),
                Some("default"),
                cm("a", json!({"k": "v"})),
                &wo("me"),
            )
            .unwrap();
        assert_eq!(c["kind"], "ConfigMap");
        assert_eq!(c["apiVersion"], "v1");
        let uid = meta_str(&c, "uid");
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4", "UUID version 4: {uid}");
        assert!(
            matches!(&uid[19..20], "8" | "9" | "a" | "b"),
            "RFC 4122 variant: {uid}"
        );
        assert_eq!(meta_str(&c, "creationTimestamp").len(), 20);
        assert_eq!(rv(&c), start + 1);
        assert_eq!(c["metadata"]["generation"], 1);
        assert_eq!(c["metadata"]["namespace"], "default");
        assert_eq!(c["metadata"]["managedFields"][0]["manager"], "me");
        assert_eq!(c["metadata"]["managedFields"][0]["operation"], "Update");
        assert_eq!(
            c["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:k": {}}})
        );
        assert_eq!(s.get(configmaps(), Some("default"), "a").unwrap(), c);
        let c2 = s
            .create(configmaps(), Some("default"), cm("b", json!({})), &wo("me"))
            .unwrap();
        assert_ne!(meta_str(&c2, "uid"), uid);
        assert_eq!(s.current_resource_version(), start + 2);
    }

    #[test]
    fn create_errors() {
        let s = Store::new();
        let e = s
            .create(configmaps(), Some("nope"), cm("a", json!({})), &wo("m"))
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (404, "namespaces \"nope\" not found")
        );
        s.create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap();
        let e = s
            .create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (409, "AlreadyExists", "configmaps \"a\" already exists")
        );
        let e = s
            .create(
                configmaps(),
                Some("default"),
                cm("Bad", json!({})),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert!(
            e.message
                .starts_with("ConfigMap \"Bad\" is invalid: metadata.name: Invalid value: \"Bad\""),
            "{}",
            e.message
        );
        let mut other_ns = cm("b", json!({}));
        other_ns["metadata"]["namespace"] = json!("kube-system");
        let e = s
            .create(configmaps(), Some("default"), other_ns, &wo("m"))
            .unwrap_err();
        assert_eq!(e.code, 400);
        let big = "x".repeat(rules::MAX_DATA_SIZE + 1);
        let e = s
            .create(
                configmaps(),
                Some("default"),
                cm("big", json!({"k": big})),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "ConfigMap \"big\" is invalid: []: Too long: must have at most 1048576 bytes"
        );
        let e = s
            .create(configmaps(), Some("default"), json!([1]), &wo("m"))
            .unwrap_err();
        assert_eq!(e.code, 400);
        let mut with_rv = cm("c", json!({}));
        with_rv["metadata"]["resourceVersion"] = json!("5");
        assert_eq!(
            s.create(configmaps(), Some("default"), with_rv, &wo("m"))
                .unwrap_err()
                .code,
            400
        );
        // Dry run validates but stores nothing.
        let before = s.current_resource_version();
        let d = s
            .create(
                configmaps(),
                Some("default"),
                cm("dry", json!({})),
                &WriteOptions {
                    dry_run: true,
                    ..wo("m")
                },
            )
            .unwrap();
        assert_eq!(d["metadata"]["name"], "dry");
        assert_eq!(s.current_resource_version(), before);
        assert_eq!(
            s.get(configmaps(), Some("default"), "dry")
                .unwrap_err()
                .code,
            404
        );
    }

    #[test]
    fn generate_name_and_cluster_scope() {
        let s = Store::new();
        let obj = json!({"metadata": {"generateName": "cfg-"}});
        let c = s
            .create(configmaps(), Some("default"), obj, &wo("m"))
            .unwrap();
        let name = meta_str(&c, "name");
        assert!(name.starts_with("cfg-") && name.len() == 9, "{name}");
        let mut n = node("n1");
        n["metadata"]["namespace"] = json!("default");
        let n = s.create(nodes(), None, n, &wo("m")).unwrap();
        assert!(
            n["metadata"].get("namespace").is_none(),
            "cluster-scoped objects have no namespace"
        );
        assert_eq!(
            n["status"]["conditions"][0]["type"], "Ready",
            "create keeps a node's status"
        );
        let ns = s
            .create(
                namespaces(),
                None,
                json!({"metadata": {"name": "team"}}),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
    }

    #[test]
    fn update_rules() {
        let s = Store::new();
        let c = s
            .create(
                configmaps(),
                Some("default"),
                cm("a", json!({"k": "1"})),
                &wo("m"),
            )
            .unwrap();
        let mut stale = c.clone();
        stale["data"]["k"] = json!("2");
        let u = s
            .update(
                configmaps(),
                Some("default"),
                "a",
                None,
                stale.clone(),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(rv(&u), rv(&c) + 1);
        assert_eq!(
            u["metadata"]["generation"], 2,
            "data change bumps generation"
        );
        let e = s
            .update(configmaps(), Some("default"), "a", None, stale, &wo("m"))
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        // Empty resourceVersion: unconditional.
        let mut unconditional = cm("a", json!({"k": "3"}));
        unconditional["metadata"]["labels"] = json!({"x": "y"});
        let u2 = s
            .update(
                configmaps(),
                Some("default"),
                "a",
                None,
                unconditional,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(u2["data"]["k"], "3");
        assert_eq!(meta_str(&u2, "uid"), meta_str(&c, "uid"));
        assert_eq!(
            meta_str(&u2, "creationTimestamp"),
            meta_str(&c, "creationTimestamp")
        );
        // Labels only: generation stays.
        let mut labels = u2.clone();
        labels["metadata"]["labels"] = json!({"x": "z"});
        let u3 = s
            .update(configmaps(), Some("default"), "a", None, labels, &wo("m"))
            .unwrap();
        assert_eq!(u3["metadata"]["generation"], u2["metadata"]["generation"]);
        // A no-op update does not write.
        let same = s
            .update(
                configmaps(),
                Some("default"),
                "a",
                None,
                u3.clone(),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(rv(&same), rv(&u3));
        assert_eq!(s.current_resource_version(), rv(&u3));
        // Name and namespace must match the URL.
        let e = s
            .update(
                configmaps(),
                Some("default"),
                "b",
                None,
                u3.clone(),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "the name of the object (a) does not match the name on the URL (b)"
            )
        );
        let e = s
            .update(
                configmaps(),
                Some("kube-system"),
                "a",
                None,
                u3.clone(),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("does not match the namespace"),
            "{}",
            e.message
        );
        let e = s
            .update(
                configmaps(),
                Some("default"),
                "zz",
                None,
                cm("zz", json!({})),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.message, "configmaps \"zz\" not found");
        // Leases are created by update.
        let l = s
            .update(
                leases(),
                Some("kube-node-lease"),
                "n1",
                None,
                json!({"metadata": {"name": "n1"}, "spec": {"holderIdentity": "n1"}}),
                &wo("kubelet"),
            )
            .unwrap();
        assert_eq!(l["apiVersion"], "coordination.k8s.io/v1");
        // uid cannot change.
        let mut uid = u3.clone();
        uid["metadata"]["uid"] = json!("other");
        let e = s
            .update(configmaps(), Some("default"), "a", None, uid, &wo("m"))
            .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn immutable_config_map() {
        let s = Store::new();
        let mut c = cm("a", json!({"k": "1"}));
        c["immutable"] = json!(true);
        let c = s
            .create(configmaps(), Some("default"), c, &wo("m"))
            .unwrap();
        let mut changed = c.clone();
        changed["data"]["k"] = json!("2");
        let e = s
            .update(configmaps(), Some("default"), "a", None, changed, &wo("m"))
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "ConfigMap \"a\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
            )
        );
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"data":{"k":"3"}}"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 422);
        // Metadata may still change.
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"metadata":{"labels":{"a":"b"}}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["metadata"]["labels"]["a"], "b");
    }

    #[test]
    fn node_status_subresource() {
        let s = Store::new();
        let n = s.create(nodes(), None, node("n1"), &wo("kubelet")).unwrap();
        // Main resource: status changes are ignored.
        let mut m = n.clone();
        m["status"]["conditions"][0]["status"] = json!("False");
        m["spec"]["unschedulable"] = json!(true);
        let u = s
            .update(nodes(), None, "n1", None, m, &wo("kubectl"))
            .unwrap();
        assert_eq!(u["status"]["conditions"][0]["status"], "True");
        assert_eq!(u["spec"]["unschedulable"], true);
        // Status subresource: only status changes.
        let mut st = u.clone();
        st["status"]["conditions"][0]["status"] = json!("False");
        st["spec"]["unschedulable"] = json!(false);
        st["metadata"]["labels"] = json!({"changed": "yes"});
        let u2 = s
            .update(nodes(), None, "n1", Some("status"), st, &wo("kubelet"))
            .unwrap();
        assert_eq!(u2["status"]["conditions"][0]["status"], "False");
        assert_eq!(u2["spec"]["unschedulable"], true);
        assert_eq!(u2["metadata"]["labels"], json!({"pool": "a"}));
        let mf = u2["metadata"]["managedFields"].as_array().unwrap();
        assert!(
            mf.iter()
                .any(|e| e["manager"] == "kubelet" && e["subresource"] == "status"),
            "{mf:?}"
        );
        // Status patch with a strategic merge of conditions by type.
        let p = s
            .patch(
                nodes(),
                None,
                "n1",
                Some("status"),
                PatchType::StrategicMerge,
                br#"{"status":{"conditions":[{"type":"ConfigApplied","status":"True"}]}}"#,
                &wo("agent"),
            )
            .unwrap();
        assert_eq!(p["status"]["conditions"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn patch_types() {
        let s = Store::new();
        let c = s
            .create(
                configmaps(),
                Some("default"),
                cm("a", json!({"k": "1"})),
                &wo("m"),
            )
            .unwrap();
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"data":{"k":null,"n":"2"}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["data"], json!({"n": "2"}));
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Json,
                br#"[{"op":"add","path":"/data/j","value":"3"}]"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["data"]["j"], "3");
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Json,
                br#"[{"op":"test","path":"/data/j","value":"4"}]"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                422,
                "Invalid",
                "the server rejected our request due to an error in our request"
            )
        );
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Json,
                b"{not json",
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let p = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::StrategicMerge,
                br#"{"metadata":{"labels":{"l":"1"}}}"#,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(p["metadata"]["labels"]["l"], "1");
        // A resourceVersion in the patch is a precondition.
        let stale = format!(
            r#"{{"metadata":{{"resourceVersion":"{}"}},"data":{{"x":"1"}}}}"#,
            rv(&c)
        );
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                stale.as_bytes(),
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 409);
        let fresh = format!(
            r#"{{"metadata":{{"resourceVersion":"{}"}},"data":{{"x":"1"}}}}"#,
            rv(&p)
        );
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            fresh.as_bytes(),
            &wo("m"),
        )
        .unwrap();
        // Renaming through a patch is refused.
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                br#"{"metadata":{"name":"b"}}"#,
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "nope",
                None,
                PatchType::Merge,
                b"{}",
                &wo("m"),
            )
            .unwrap_err();
        assert_eq!(e.code, 404);
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Merge,
                b"{}",
                &WriteOptions {
                    force: true,
                    ..wo("m")
                },
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
    }

    #[test]
    fn server_side_apply() {
        let s = Store::new();
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                b"{}",
                &WriteOptions::default(),
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
            )
        );
        let body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: x\ndata:\n  k: \"1\"\n  j: \"2\"\n";
        let c = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &wo("gitops"),
            )
            .unwrap();
        assert_eq!(c["data"], json!({"k": "1", "j": "2"}));
        let mf = &c["metadata"]["managedFields"][0];
        assert_eq!(
            (mf["manager"].as_str(), mf["operation"].as_str()),
            (Some("gitops"), Some("Apply"))
        );
        assert_eq!(
            mf["fieldsV1"],
            json!({"f:data": {"f:j": {}, "f:k": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
        );
        // Same apply again: no write.
        let again = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &wo("gitops"),
            )
            .unwrap();
        assert_eq!(rv(&again), rv(&c));
        // Another manager changes k with an update: it takes ownership.
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"k":"changed"}}"#,
            &wo("kubectl-edit"),
        )
        .unwrap();
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &wo("gitops"),
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.k"
        );
        assert_eq!(
            e.to_status()["details"]["causes"][0]["reason"],
            "FieldManagerConflict"
        );
        assert_eq!(e.to_status()["details"]["causes"][0]["field"], ".data.k");
        // Force takes it back.
        let f = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                body,
                &WriteOptions {
                    force: true,
                    ..wo("gitops")
                },
            )
            .unwrap();
        assert_eq!(f["data"]["k"], "1");
        let mf = f["metadata"]["managedFields"].as_array().unwrap();
        assert!(
            mf.iter().all(|e| e["manager"] != "kubectl-edit"),
            "kubectl-edit lost its only field: {mf:?}"
        );
        // Dropping a field from the applied configuration removes it.
        let smaller = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"1\"\n";
        let r = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                smaller,
                &wo("gitops"),
            )
            .unwrap();
        assert_eq!(r["data"], json!({"k": "1"}));
        assert!(
            r["metadata"]
                .get("labels")
                .is_none_or(|l| l.as_object().is_some_and(|m| m.is_empty()))
        );
        // Two conflicts: the multi-line message.
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"k":"x","z":"1"}}"#,
            &wo("other"),
        )
        .unwrap();
        let both = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"1\"\n  z: \"2\"\n";
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                both,
                &wo("gitops"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"other\" using v1:\n- .data.k\n- .data.z"
        );
        // Wrong apiVersion.
        let e = s
            .patch(
                configmaps(),
                Some("default"),
                "a",
                None,
                PatchType::Apply,
                br#"{"apiVersion":"v2","kind":"ConfigMap"}"#,
                &wo("gitops"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"
        );
    }

    #[test]
    fn apply_node_conditions_and_shared_ownership() {
        let s = Store::new();
        s.create(nodes(), None, node("n1"), &wo("kubelet")).unwrap();
        let body = br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"},"status":{"conditions":[{"type":"ConfigApplied","status":"True"}]}}"#;
        let n = s
            .patch(
                nodes(),
                None,
                "n1",
                Some("status"),
                PatchType::Apply,
                body,
                &wo("agent"),
            )
            .unwrap();
        let conds = n["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2, "merged by type: {conds:?}");
        // Applying the same value another manager owns is not a conflict.
        let body =
            br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"pool":"a"}}}"#;
        s.patch(
            nodes(),
            None,
            "n1",
            None,
            PatchType::Apply,
            body,
            &wo("labeler"),
        )
        .unwrap();
        let body =
            br#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"pool":"b"}}}"#;
        let e = s
            .patch(
                nodes(),
                None,
                "n1",
                None,
                PatchType::Apply,
                body,
                &wo("other"),
            )
            .unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"kubelet\" using v1:\n- .metadata.labels.pool\nconflicts with \"labeler\":\n- .metadata.labels.pool"
        );
        // With force, both lose the label and the new value wins.
        let n = s
            .patch(
                nodes(),
                None,
                "n1",
                None,
                PatchType::Apply,
                body,
                &WriteOptions {
                    force: true,
                    ..wo("other")
                },
            )
            .unwrap();
        assert_eq!(n["metadata"]["labels"]["pool"], "b");
        // Apply creates a missing object.
        let body =
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"},"data":{"a":"b"}}"#;
        let c = s
            .patch(
                configmaps(),
                Some("default"),
                "new",
                None,
                PatchType::Apply,
                body,
                &wo("m"),
            )
            .unwrap();
        assert_eq!(c["data"]["a"], "b");
        assert_eq!(c["metadata"]["managedFields"][0]["operation"], "Apply");
        assert_eq!(c["metadata"]["generation"], 1);
    }

    #[test]
    fn delete_and_namespaces() {
        let s = Store::new();
        s.create(
            namespaces(),
            None,
            json!({"metadata": {"name": "team"}}),
            &wo("m"),
        )
        .unwrap();
        let a = s
            .create(configmaps(), Some("team"), cm("a", json!({})), &wo("m"))
            .unwrap();
        s.create(configmaps(), Some("team"), cm("b", json!({})), &wo("m"))
            .unwrap();
        s.create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap();
        let e = s
            .delete(configmaps(), Some("team"), "a", Some(json!({"uid": "x"})))
            .unwrap_err();
        assert_eq!(e.code, 409);
        assert!(
            e.message
                .contains("Precondition failed: UID in precondition: x"),
            "{}",
            e.message
        );
        let e = s
            .delete(
                configmaps(),
                Some("team"),
                "a",
                Some(json!({"resourceVersion": "1"})),
            )
            .unwrap_err();
        assert_eq!(e.code, 409);
        let mut w = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some(s.current_resource_version().to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        let d = s
            .delete(
                configmaps(),
                Some("team"),
                "a",
                Some(json!({"uid": meta_str(&a, "uid")})),
            )
            .unwrap();
        assert_eq!(d["metadata"]["name"], "a");
        assert_eq!(
            s.get(configmaps(), Some("team"), "a").unwrap_err().code,
            404
        );
        assert_eq!(
            s.delete(configmaps(), Some("team"), "a", None)
                .unwrap_err()
                .code,
            404
        );
        let ns = s.delete(namespaces(), None, "team", None).unwrap();
        assert_eq!(ns["status"]["phase"], "Terminating");
        assert!(ns["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(
            s.get(configmaps(), Some("team"), "b").unwrap_err().code,
            404
        );
        assert!(s.get(configmaps(), Some("default"), "a").is_ok());
        let evs = drain(&mut w);
        let kinds_names: Vec<(&str, &str)> = evs
            .iter()
            .map(|(k, n, _)| (k.as_str(), n.as_str()))
            .collect();
        assert_eq!(kinds_names, vec![("DELETED", "a"), ("DELETED", "b")]);
        assert!(
            evs[1].2 > evs[0].2,
            "each deletion has its own resourceVersion"
        );
        let e = s
            .create(configmaps(), Some("team"), cm("c", json!({})), &wo("m"))
            .unwrap_err();
        assert_eq!(e.message, "namespaces \"team\" not found");
        let e = s.delete(namespaces(), None, "default", None).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "namespaces \"default\" is forbidden: this namespace may not be deleted"
            )
        );
    }

    #[test]
    fn secrets_string_data() {
        let s = Store::new();
        let sec = s
            .create(
                secrets(),
                Some("default"),
                json!({"metadata": {"name": "s"}, "stringData": {"u": "admin"}}),
                &wo("m"),
            )
            .unwrap();
        assert_eq!(sec["data"]["u"], "YWRtaW4=");
        assert_eq!(sec["type"], "Opaque");
        assert!(sec.get("stringData").is_none());
    }

    #[test]
    fn list_sorted_paginated_and_consistent() {
        let s = Store::new();
        s.create(
            namespaces(),
            None,
            json!({"metadata": {"name": "b-ns"}}),
            &wo("m"),
        )
        .unwrap();
        for i in 0..5 {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i}"), json!({"i": i.to_string()})),
                &wo("m"),
            )
            .unwrap();
        }
        s.create(configmaps(), Some("b-ns"), cm("z", json!({})), &wo("m"))
            .unwrap();
        let all = s.list(configmaps(), None, &ListOptions::default()).unwrap();
        let names: Vec<String> = all
            .items
            .iter()
            .map(|o| format!("{}/{}", meta_str(o, "namespace"), meta_str(o, "name")))
            .collect();
        assert_eq!(
            names,
            vec![
                "b-ns/z",
                "default/c0",
                "default/c1",
                "default/c2",
                "default/c3",
                "default/c4"
            ]
        );
        assert_eq!(
            all.resource_version,
            s.current_resource_version().to_string()
        );
        assert!(all.continue_token.is_none());
        // Pages of 2 within a namespace.
        let p1 = s
            .list(
                configmaps(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(p1.items.len(), 2);
        assert_eq!(p1.remaining_item_count, Some(3));
        let snapshot = p1.resource_version.clone();
        // Changes after the first page do not show in later pages.
        s.delete(configmaps(), Some("default"), "c3", None).unwrap();
        s.patch(
            configmaps(),
            Some("default"),
            "c2",
            None,
            PatchType::Merge,
            br#"{"data":{"i":"changed"}}"#,
            &wo("m"),
        )
        .unwrap();
        s.create(configmaps(), Some("default"), cm("c5", json!({})), &wo("m"))
            .unwrap();
        let p2 = s
            .list(
                configmaps(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    continue_token: p1.continue_token.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
        let names: Vec<&str> = p2.items.iter().map(|o| meta_str(o, "name")).collect();
        assert_eq!(names, vec!["c2", "c3"]);
        assert_eq!(
            p2.items[0]["data"]["i"], "2",
            "the page shows the list's resourceVersion"
        );
        assert_eq!(p2.resource_version, snapshot);
        let p3 = s
            .list(
                configmaps(),
                Some("default"),
                &ListOptions {
                    limit: Some(2),
                    continue_token: p2.continue_token.clone(),
                    ..Default::default()
                },
            )
            .unwrap();
        let names: Vec<&str> = p3.items.iter().map(|o| meta_str(o, "name")).collect();
        assert_eq!(names, vec!["c4"]);
        assert!(p3.continue_token.is_none());
        assert!(p3.remaining_item_count.is_none());
        // Selectors.
        let l = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    field_selector: Some("metadata.namespace=b-ns".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(l.items.len(), 1);
        let l = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    field_selector: Some("metadata.name!=z".into()),
                    limit: Some(1),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(l.items.len(), 1);
        assert!(l.continue_token.is_some());
        assert!(
            l.remaining_item_count.is_none(),
            "no remainingItemCount with a selector"
        );
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    field_selector: Some("spec.nodeName=x".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "field label not supported: spec.nodeName")
        );
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    label_selector: Some("a in".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    continue_token: Some("garbage!".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    resource_version: Some("999999".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 504);
    }

    #[test]
    fn list_labels_and_exact_rv() {
        let s = Store::new();
        for (n, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
            let mut o = cm(n, json!({}));
            o["metadata"]["labels"] = json!({"app": app});
            s.create(configmaps(), Some("default"), o, &wo("m"))
                .unwrap();
        }
        let rv_before = s.current_resource_version();
        s.delete(configmaps(), Some("default"), "a", None).unwrap();
        let l = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    label_selector: Some("app=web".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(l.items.len(), 1);
        let old = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    label_selector: Some("app in (web)".into()),
                    resource_version: Some(rv_before.to_string()),
                    resource_version_match: Some("Exact".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(old.items.len(), 2, "Exact shows the deleted object");
        assert_eq!(old.resource_version, rv_before.to_string());
    }

    #[test]
    fn continue_token_too_old() {
        let s = Store::with_history(3);
        for i in 0..4 {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i}"), json!({})),
                &wo("m"),
            )
            .unwrap();
        }
        let p1 = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    limit: Some(1),
                    ..Default::default()
                },
            )
            .unwrap();
        for i in 0..4 {
            s.patch(
                configmaps(),
                Some("default"),
                &format!("c{i}"),
                None,
                PatchType::Merge,
                br#"{"data":{"x":"1"}}"#,
                &wo("m"),
            )
            .unwrap();
        }
        let e = s
            .list(
                configmaps(),
                None,
                &ListOptions {
                    limit: Some(1),
                    continue_token: p1.continue_token,
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (410, "Expired"));
        assert!(
            e.message
                .starts_with("The provided continue parameter is too old"),
            "{}",
            e.message
        );
    }

    #[test]
    fn watch_initial_and_from_rv() {
        let s = Store::new();
        s.create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap();
        let rv1 = s.current_resource_version();
        s.create(configmaps(), Some("default"), cm("b", json!({})), &wo("m"))
            .unwrap();
        let mut w0 = s
            .watch(configmaps(), None, &WatchOptions::default())
            .unwrap();
        let mut w1 = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some(rv1.to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        let mut wz = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some("0".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"x":"1"}}"#,
            &wo("m"),
        )
        .unwrap();
        let e0 = drain(&mut w0);
        assert_eq!(
            e0.iter()
                .map(|e| (e.0.as_str(), e.1.as_str()))
                .collect::<Vec<_>>(),
            vec![("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
        );
        let e1 = drain(&mut w1);
        assert_eq!(
            e1.iter()
                .map(|e| (e.0.as_str(), e.1.as_str()))
                .collect::<Vec<_>>(),
            vec![("ADDED", "b"), ("MODIFIED", "a")]
        );
        assert!(e1[0].2 > rv1);
        assert_eq!(drain(&mut wz).len(), 3);
        assert_eq!(s.watcher_count(configmaps()), 3);
        drop(w0);
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"x":"2"}}"#,
            &wo("m"),
        )
        .unwrap();
        assert_eq!(
            s.watcher_count(configmaps()),
            2,
            "a dropped receiver is noticed on the next event"
        );
        let e = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some("99999".into()),
                    ..Default::default()
                },
            )
            .unwrap_err();
        assert_eq!(e.code, 504);
    }

    #[test]
    fn watch_too_old_is_410_error_event() {
        let s = Store::with_history(2);
        for i in 0..4 {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i}"), json!({})),
                &wo("m"),
            )
            .unwrap();
        }
        let mut w = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some("5".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        let e = w.try_recv().unwrap();
        assert_eq!(e.kind, "ERROR");
        assert_eq!(e.object["code"], 410);
        assert_eq!(e.object["reason"], "Expired");
        assert_eq!(e.object["message"], "too old resource version: 5 (6)");
        assert!(w.try_recv().is_err());
        assert!(w.is_closed() || w.try_recv().is_err());
        // Inside the window: fine.
        let mut ok = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some("6".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(drain(&mut ok).len(), 2);
    }

    #[test]
    fn watch_selector_transitions() {
        let s = Store::new();
        let mut o = cm("a", json!({}));
        o["metadata"]["labels"] = json!({"app": "web"});
        s.create(configmaps(), Some("default"), o, &wo("m"))
            .unwrap();
        let mut w = s
            .watch(
                configmaps(),
                Some("default"),
                &WatchOptions {
                    label_selector: Some("app=web".into()),
                    resource_version: Some(s.current_resource_version().to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        let mut by_name = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    field_selector: Some("metadata.name=a".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"metadata":{"labels":{"app":"db"}}}"#,
            &wo("m"),
        )
        .unwrap();
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"data":{"x":"1"}}"#,
            &wo("m"),
        )
        .unwrap();
        s.patch(
            configmaps(),
            Some("default"),
            "a",
            None,
            PatchType::Merge,
            br#"{"metadata":{"labels":{"app":"web"}}}"#,
            &wo("m"),
        )
        .unwrap();
        s.create(
            configmaps(),
            Some("default"),
            cm("other", json!({})),
            &wo("m"),
        )
        .unwrap();
        let evs: Vec<(String, u64)> = std::iter::from_fn(|| w.try_recv().ok())
            .map(|e| (e.kind.to_string(), obj_rv(&e.object)))
            .collect();
        let kinds: Vec<&str> = evs.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(kinds, vec!["DELETED", "ADDED"]);
        let cur = s.current_resource_version();
        assert_eq!(
            evs[0].1,
            cur - 3,
            "DELETED carries the event's resourceVersion"
        );
        let names: Vec<(String, String, u64)> = drain(&mut by_name);
        assert_eq!(
            names.len(),
            4,
            "ADDED + 3 MODIFIED, nothing for other: {names:?}"
        );
        assert!(names.iter().all(|n| n.1 == "a"));
    }

    #[test]
    fn watch_fan_out_shares_objects() {
        let s = Store::new();
        let mut ws: Vec<_> = (0..3)
            .map(|_| {
                s.watch(
                    nodes(),
                    None,
                    &WatchOptions {
                        resource_version: Some(s.current_resource_version().to_string()),
                        ..Default::default()
                    },
                )
                .unwrap()
            })
            .collect();
        s.create(nodes(), None, node("n1"), &wo("m")).unwrap();
        let evs: Vec<WatchEvent> = ws.iter_mut().map(|w| w.try_recv().unwrap()).collect();
        assert!(Arc::ptr_eq(&evs[0].object, &evs[1].object));
        assert!(Arc::ptr_eq(&evs[1].object, &evs[2].object));
        let a = evs[0].encoded_object() as *const str;
        let b = evs[2].encoded_object() as *const str;
        assert_eq!(a, b, "serialized once");
        assert!(
            evs[0]
                .to_line()
                .starts_with("{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\"")
        );
        // The list shares the same encoding.
        let l = s
            .list_shared(nodes(), None, &ListOptions::default())
            .unwrap();
        assert_eq!(l.items[0].encoded() as *const str, a);
    }

    #[test]
    fn slow_watcher_is_closed() {
        let s = Store::new();
        s.set_watch_buffer(2);
        let mut w = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some(s.current_resource_version().to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        for i in 0..4 {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i}"), json!({})),
                &wo("m"),
            )
            .unwrap();
        }
        assert_eq!(s.watcher_count(configmaps()), 0);
        assert_eq!(drain(&mut w).len(), 2);
        assert!(w.try_recv().is_err());
    }

    #[test]
    fn events_share_storage_across_groups() {
        use crate::resources::kinds::{core_events, events};
        let s = Store::new();
        let mut w = s
            .watch(
                events(),
                Some("default"),
                &WatchOptions {
                    field_selector: Some("regarding.name=n1".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Node", "name": "n1"}, "reason": "Started", "message": "hello", "count": 1});
        s.create(core_events(), Some("default"), core, &wo("kubelet"))
            .unwrap();
        let v1 = s.get(events(), Some("default"), "e1").unwrap();
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["note"], "hello");
        assert_eq!(v1["regarding"]["name"], "n1");
        assert_eq!(v1["deprecatedCount"], 1);
        let body = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
            "regarding": {"kind": "Node", "name": "n2"}, "reason": "ConfigApplied", "note": "applied",
            "reportingController": "kubelet-gitops", "reportingInstance": "agent-n2", "action": "Apply", "type": "Normal"});
        let created = s
            .create(events(), Some("default"), body, &wo("agent"))
            .unwrap();
        assert_eq!(created["note"], "applied");
        let listed = s
            .list(
                core_events(),
                Some("default"),
                &ListOptions {
                    field_selector: Some("involvedObject.name=n2".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(listed.items.len(), 1);
        assert_eq!(listed.items[0]["message"], "applied");
        assert_eq!(listed.items[0]["reportingComponent"], "kubelet-gitops");
        assert_eq!(listed.items[0]["apiVersion"], "v1");
        let p = s
            .patch(
                events(),
                Some("default"),
                "e2",
                None,
                PatchType::Merge,
                br#"{"note":"again","deprecatedCount":2}"#,
                &wo("agent"),
            )
            .unwrap();
        assert_eq!(p["note"], "again");
        assert_eq!(
            s.get(core_events(), Some("default"), "e2").unwrap()["count"],
            2
        );
        let ev = w.try_recv().unwrap();
        assert_eq!(
            (ev.kind, ev.object["note"].as_str()),
            ("ADDED", Some("hello"))
        );
        assert!(
            w.try_recv().is_err(),
            "n2's events do not match regarding.name=n1"
        );
        let e = s.get(events(), Some("default"), "nope").unwrap_err();
        assert_eq!(e.message, "events.events.k8s.io \"nope\" not found");
        let e = s.get(core_events(), Some("default"), "nope").unwrap_err();
        assert_eq!(e.message, "events \"nope\" not found");
    }

    #[tokio::test]
    async fn bookmarks_initial_events_and_timeout() {
        let s = Store::new();
        s.set_bookmark_interval(Duration::from_millis(20));
        s.create(configmaps(), Some("default"), cm("a", json!({})), &wo("m"))
            .unwrap();
        let mut w = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    allow_bookmarks: true,
                    send_initial_events: true,
                    ..Default::default()
                },
            )
            .unwrap();
        let first = w.recv().await.unwrap();
        assert_eq!(
            (first.kind, meta_str(&first.object, "name")),
            ("ADDED", "a")
        );
        let end = w.recv().await.unwrap();
        assert_eq!(end.kind, "BOOKMARK");
        assert_eq!(
            end.object["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        assert_eq!(
            end.object["metadata"]["resourceVersion"],
            s.current_resource_version().to_string()
        );
        let bm = tokio::time::timeout(Duration::from_secs(2), w.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(bm.kind, "BOOKMARK");
        assert_eq!(
            *bm.object,
            json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": s.current_resource_version().to_string()}})
        );
        // Timeout closes the stream.
        let mut t = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    timeout: Some(Duration::from_millis(50)),
                    resource_version: Some(s.current_resource_version().to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        let end = tokio::time::timeout(Duration::from_secs(2), t.recv())
            .await
            .unwrap();
        assert!(end.is_none(), "channel closed at the timeout");
        // No bookmarks unless asked for.
        let mut nb = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some(s.current_resource_version().to_string()),
                    timeout: Some(Duration::from_millis(100)),
                    ..Default::default()
                },
            )
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(2), nb.recv())
                .await
                .unwrap()
                .is_none()
        );
    }
}
