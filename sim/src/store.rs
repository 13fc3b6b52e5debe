//! The object store: tables of objects per resource type, a global resourceVersion
//! counter, a bounded history of watch events per resource type, and watchers.
//!
//! Objects are kept as their JSON encoding only ([`SharedObject`], see `encoded`): a
//! list ([`Store::list_shared`], what the server uses) copies no object and encodes
//! nothing, a watch event is the stored encoding whatever the number of watchers, and a
//! write decodes the one object it changes. Writers hold the lock for the whole write and
//! hand events to watchers with `try_send`: they never wait; a watcher whose bounded
//! channel is full is closed, as the real server terminates slow watchers. The history
//! is bounded in events and in bytes ([`Store::with_history_limits`]).

// `ApiError` (the interface's error type, with its `details` JSON) is larger than
// clippy's threshold; errors are the rare path here.
#![allow(clippy::result_large_err)]

mod apply;
mod create;
mod decode;
mod delete;
mod encoded;
mod events;
mod eviction;
#[cfg(test)]
mod fixtures;
mod managed;
mod meta;
mod pods;
mod read;
mod strategy;
mod update;
mod watch;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::SeedableRng as _;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::{RESOURCES, ResourceType, kinds};

pub use encoded::{SharedObject, raw_field};
pub use eviction::{EvictionRequest, eviction_status};
pub use meta::{now_rfc3339, rfc3339};
pub(crate) use pods::immutable_pod_spec;
pub use read::{ListOptions, ListResult, SharedList};
pub use update::PatchType;
pub use watch::{DEFAULT_BOOKMARK_INTERVAL, DEFAULT_WATCH_BUFFER, WatchEvent, WatchOptions};

use meta::{meta_str, remove_meta, set_meta};
use watch::Watcher;

/// The store. Thread-safe and cheap to clone (an `Arc` inside); all methods are sync
/// and never block on watchers.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
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

/// Watch events a store keeps per resource type by default.
pub const DEFAULT_HISTORY_EVENTS: usize = 10_000;

/// Bytes of object versions (JSON) a store's watch history holds per resource type by
/// default: 10,000 events of Nodes that each hold two versions of 5 KB fit; 10,000 events
/// of 1 MiB ConfigMaps would not.
pub const DEFAULT_HISTORY_BYTES: usize = 128 * 1024 * 1024;

/// How long a default store keeps a watch event beyond the limits above: upstream's
/// watch cache grows (up to [`FRESH_HISTORY_EVENTS`]) rather than drop an event younger
/// than this (`eventFreshDuration`, 75 s), so that a client that lists 100,000 Nodes
/// in pages while they change can still continue its list and start its watch from it.
/// With the 10,000 events alone, a rollout at 100,000 Nodes (over a thousand writes a
/// second) outran a paginated relist: every page past the window was 410 Gone, and the
/// client listed again, forever.
pub const HISTORY_FRESHNESS: Duration = Duration::from_secs(75);

/// The most events a default store keeps for their freshness (upstream's watch cache
/// capacity bound, 100 x 1024).
pub const FRESH_HISTORY_EVENTS: usize = 100 * 1024;

/// The most bytes of object versions a default store keeps for their freshness, per
/// resource type.
pub const FRESH_HISTORY_BYTES: usize = 1024 * 1024 * 1024;

/// Namespaces that exist when the store starts.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

type Key = (String, String);

struct HistEvent {
    rv: u64,
    /// When it happened.
    at: Instant,
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
                let mut v = p.object();
                set_meta(
                    &mut v,
                    "resourceVersion",
                    Value::String(self.rv.to_string()),
                );
                SharedObject::new(&v)
            }
            None => self.obj.clone(),
        })
    }

    /// Bytes of the encodings it holds (a version shared with another event or the
    /// table is counted here too).
    fn bytes(&self) -> usize {
        self.obj.len() + self.prev.as_ref().map_or(0, SharedObject::len)
    }
}

#[derive(Default)]
struct Table {
    objects: BTreeMap<Key, SharedObject>,
    history: VecDeque<HistEvent>,
    /// Sum of [`HistEvent::bytes`] over `history`.
    history_bytes: usize,
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

/// The key of object `name` of `rt`: its namespace (none for cluster-scoped kinds) and
/// name.
fn object_key(rt: &ResourceType, ns: Option<&str>, name: &str) -> Key {
    let ns = if rt.namespaced { ns.unwrap_or("") } else { "" };
    (ns.to_string(), name.to_string())
}

impl State {
    /// The stored object of `rt` at `key`.
    fn stored(&self, rt: &ResourceType, key: &Key) -> Option<SharedObject> {
        self.tables
            .get(&rt.key())
            .and_then(|t| t.objects.get(key))
            .cloned()
    }
}

struct Inner {
    state: RwLock<State>,
    history_limit: usize,
    history_byte_limit: usize,
    /// Events younger than this stay beyond the limits above (zero: none).
    history_freshness: Duration,
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

impl Store {
    /// A store with a history window of [`DEFAULT_HISTORY_EVENTS`] watch events and
    /// [`DEFAULT_HISTORY_BYTES`] per resource type.
    /// Events younger than [`HISTORY_FRESHNESS`] are kept beyond those limits (up to
    /// [`FRESH_HISTORY_EVENTS`] and [`FRESH_HISTORY_BYTES`]), as upstream's watch cache
    /// keeps them.
    pub fn new() -> Store {
        Self::with_history_window(
            DEFAULT_HISTORY_EVENTS,
            DEFAULT_HISTORY_BYTES,
            HISTORY_FRESHNESS,
        )
    }

    /// A store keeping `events` watch events per resource type (at least 1), within
    /// [`DEFAULT_HISTORY_BYTES`].
    pub fn with_history(events: usize) -> Store {
        Self::with_history_limits(events, DEFAULT_HISTORY_BYTES)
    }

    /// A store keeping, per resource type, the newest `events` watch events (at least 1)
    /// as long as the object versions they hold add up to at most `bytes` of JSON (the
    /// newest event is kept whatever its size). A watch or a list from a
    /// resourceVersion older than the window is 410 Gone, as upstream's watch cache
    /// answers one older than its window. No event is kept for its freshness (tests of
    /// the window's edge use it).
    pub fn with_history_limits(events: usize, bytes: usize) -> Store {
        Self::with_history_window(events, bytes, Duration::ZERO)
    }

    fn with_history_window(events: usize, bytes: usize, fresh: Duration) -> Store {
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
                history_byte_limit: bytes,
                history_freshness: fresh,
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

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.inner.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The store's current resourceVersion.
    pub fn current_resource_version(&self) -> u64 {
        self.read().rv
    }

    /// Store `obj` under `key` with the next resourceVersion, record the event and hand
    /// it to watchers, then run what the cluster's controllers do about it (the
    /// disruption controller, for a Pod or a PodDisruptionBudget). `prev` is the object
    /// it replaces. Returns `obj` as stored.
    fn commit(
        &self,
        st: &mut State,
        rt: &ResourceType,
        key: Key,
        kind: &'static str,
        obj: Value,
        prev: Option<SharedObject>,
    ) -> Value {
        let ns = key.0.clone();
        let out = self.commit_inner(st, rt, key, kind, obj, prev);
        if pods::is_pod(rt) || pods::is_budget(rt) {
            self.sync_budgets(st, &ns);
        }
        out
    }

    /// [`Store::commit`] without the controllers (their own writes).
    fn commit_inner(
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
        let shared = SharedObject::new(&obj);
        let Some(table) = st.tables.get_mut(&rt.key()) else {
            return obj;
        };
        if kind == "DELETED" {
            table.objects.remove(&key);
        } else {
            table.objects.insert(key.clone(), shared.clone());
        }
        let ev = HistEvent {
            rv,
            at: Instant::now(),
            kind,
            key,
            obj: shared,
            prev,
            deleted_view: OnceLock::new(),
        };
        table.history_bytes += ev.bytes();
        table.history.push_back(ev);
        let (limit, byte_limit) = (self.inner.history_limit, self.inner.history_byte_limit);
        let fresh = self.inner.history_freshness;
        loop {
            let (len, bytes) = (table.history.len(), table.history_bytes);
            let over = len > limit || (bytes > byte_limit && len > 1);
            // Beyond the limits, an event still fresh stays unless the fresh caps are
            // reached too.
            let over_fresh = len > FRESH_HISTORY_EVENTS.max(limit)
                || (bytes > FRESH_HISTORY_BYTES.max(byte_limit) && len > 1);
            let stale = table
                .history
                .front()
                .is_some_and(|e| e.at.elapsed() >= fresh);
            if !(over && (stale || over_fresh)) {
                break;
            }
            if let Some(e) = table.history.pop_front() {
                table.history_bytes -= e.bytes();
                table.evicted_upto = e.rv;
            }
        }
        let Table {
            history, watchers, ..
        } = table;
        if let Some(ev) = history.back() {
            watch::fan_out(watchers, ev);
        }
        obj
    }
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
