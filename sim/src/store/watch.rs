//! Watches. The writer hands each event to every watcher of its table while it holds the
//! store's lock ([`fan_out`]), so watchers see events in resourceVersion order and never
//! miss one between their initial events and the live ones; a watcher's channel is
//! bounded and a full one closes the watch. Each watcher sees upstream's selector
//! transitions (see [`Watcher::convert`]). Bookmarks and timeouts run in a task holding
//! the store weakly: a dropped store ends them.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::encoded::Selectable;
use super::events::{parse_field_selector_for, storage, user_error, view};
use super::read::{parse_label_selector, parse_rv};
use super::{HistEvent, Inner, Key, SharedObject, Store};
use crate::error::ApiError;
use crate::resources::{ResourceType, kinds};
use crate::selector::{FieldSelector, LabelSelector};

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
/// receives the event, as the stored encoding (see [`WatchEvent::encoded_object`]), and
/// decoded at most once, only if some receiver asks for the value
/// ([`WatchEvent::object`]).
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub kind: &'static str,
    body: Arc<EventBody>,
}

/// An event's object: its encoding, its value, or both (at least one is set).
#[derive(Debug)]
struct EventBody {
    json: OnceLock<Arc<str>>,
    value: OnceLock<Value>,
}

impl WatchEvent {
    /// A new event for `object`.
    pub fn new(kind: &'static str, object: Value) -> Self {
        WatchEvent {
            kind,
            body: Arc::new(EventBody {
                json: OnceLock::new(),
                value: OnceLock::from(object),
            }),
        }
    }

    /// An event for a stored object version.
    fn stored(kind: &'static str, obj: &SharedObject) -> Self {
        WatchEvent {
            kind,
            body: Arc::new(EventBody {
                json: OnceLock::from(obj.shared_encoding()),
                value: OnceLock::new(),
            }),
        }
    }

    /// The object (a `metav1.Status` for ERROR), decoded once and shared by every clone.
    pub fn object(&self) -> &Value {
        self.body.value.get_or_init(|| {
            self.body
                .json
                .get()
                .map_or(Value::Null, |j| super::encoded::decode(j))
        })
    }

    /// The object serialized as JSON, computed at most once and shared by every clone.
    pub fn encoded_object(&self) -> &str {
        self.body
            .json
            .get_or_init(|| Arc::from(serde_json::to_string(self.object()).unwrap_or_default()))
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

/// Live events a watcher may have queued before it is closed as too slow.
pub const DEFAULT_WATCH_BUFFER: usize = 4096;

/// Default interval between BOOKMARK events for watchers that allow them.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);

pub(super) struct Watcher {
    tx: mpsc::Sender<WatchEvent>,
    ns: Option<String>,
    label: LabelSelector,
    field: FieldSelector,
    /// Events are shown as events.k8s.io/v1 (stored as core/v1).
    to_events_v1: bool,
}

/// What a watcher receives of a history event.
#[derive(Clone, Copy)]
enum Seen {
    Added,
    Modified,
    Deleted,
    /// The object stopped matching: DELETED with the previous object.
    Left,
}

/// One history event as watchers see it: its objects read for the selectors at most
/// once, and each kind of event built once for all the watchers that receive it.
struct Delivery<'a> {
    ev: &'a HistEvent,
    cur: Selectable<'a>,
    prev: Option<Selectable<'a>>,
    built: [Option<WatchEvent>; 4],
}

impl<'a> Delivery<'a> {
    fn new(ev: &'a HistEvent) -> Self {
        Delivery {
            ev,
            cur: Selectable::new(&ev.key, &ev.obj),
            prev: ev.prev.as_ref().map(|p| Selectable::new(&ev.key, p)),
            built: Default::default(),
        }
    }

    fn event(&mut self, seen: Seen) -> WatchEvent {
        let ev = self.ev;
        self.built[seen as usize]
            .get_or_insert_with(|| match seen {
                Seen::Added => WatchEvent::stored("ADDED", &ev.obj),
                Seen::Modified => WatchEvent::stored("MODIFIED", &ev.obj),
                Seen::Deleted => WatchEvent::stored("DELETED", &ev.obj),
                Seen::Left => WatchEvent::stored("DELETED", ev.deleted_view()),
            })
            .clone()
    }
}

impl Watcher {
    fn matches(&self, key: &Key, obj: &Selectable<'_>) -> bool {
        if let Some(ns) = &self.ns
            && key.0 != *ns
        {
            return false;
        }
        obj.selected_by(&self.label, &self.field)
    }

    /// The event this watcher receives for `d`, with upstream's selector transitions.
    fn convert(&self, d: &mut Delivery<'_>) -> Option<WatchEvent> {
        let ev = d.ev;
        let cur = ev.kind != "DELETED" && self.matches(&ev.key, &d.cur);
        let old = d.prev.as_ref().is_some_and(|p| self.matches(&ev.key, p));
        let seen = match (cur, old) {
            (true, false) => Seen::Added,
            (true, true) => Seen::Modified,
            (false, true) if ev.kind == "DELETED" => Seen::Deleted,
            (false, true) => Seen::Left,
            (false, false) => return None,
        };
        Some(self.wrap(d.event(seen)))
    }

    /// The event as this watcher's API version shows it.
    fn wrap(&self, e: WatchEvent) -> WatchEvent {
        if self.to_events_v1 {
            WatchEvent::new(e.kind, view(kinds::events(), true, e.object().clone()))
        } else {
            e
        }
    }
}

/// Hands `ev` to every watcher that sees it; closes those whose channel is full or gone.
pub(super) fn fan_out(watchers: &mut BTreeMap<u64, Watcher>, ev: &HistEvent) {
    if watchers.is_empty() {
        return;
    }
    let mut d = Delivery::new(ev);
    let mut dead = Vec::new();
    for (id, w) in watchers.iter() {
        if let Some(e) = w.convert(&mut d)
            && w.tx.try_send(e).is_err()
        {
            dead.push(*id);
        }
    }
    for id in dead {
        watchers.remove(&id);
    }
}

impl Store {
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
                if let Some(e) = watcher_tmp.convert(&mut Delivery::new(ev)) {
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
                if watcher_tmp.matches(k, &Selectable::new(k, o)) {
                    initial.push(watcher_tmp.wrap(WatchEvent::stored("ADDED", o)));
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
        self.spawn_watch_timer(user_rt, rt.key(), id, opts, current);
        Ok(rx)
    }

    /// Bookmarks and the timeout of watch `id`, on the tokio runtime (if there is one).
    /// As upstream's watch cache, a bookmark goes out only once the store has moved past
    /// `start_rv` (its resourceVersion when the watch began): a watch on a quiet store
    /// gets none.
    fn spawn_watch_timer(
        &self,
        rt: &ResourceType,
        table_key: String,
        id: u64,
        opts: &WatchOptions,
        start_rv: u64,
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
        let start = tokio::time::Instant::now();
        let deadline = opts.timeout.map(|t| start + t);
        // As upstream's watch cache: a bookmark 2 s before the deadline too, when that is
        // still ahead (so a client sees the resourceVersion it resumes from).
        let mut pre_timeout = deadline
            .and_then(|d| d.checked_sub(Duration::from_secs(2)))
            .filter(|p| *p > start && bookmarks);
        handle.spawn(async move {
            let mut next_bookmark = start + interval;
            loop {
                let mut wake = match deadline {
                    Some(d) if !bookmarks || d <= next_bookmark => d,
                    _ => next_bookmark,
                };
                if let Some(p) = pre_timeout {
                    wake = wake.min(p);
                }
                tokio::time::sleep_until(wake).await;
                let Some(inner) = weak.upgrade() else { return };
                let store = Store { inner };
                let now = tokio::time::Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    let mut st = store.write();
                    if let Some(t) = st.tables.get_mut(&table_key) {
                        t.watchers.remove(&id);
                    }
                    return;
                }
                if pre_timeout.is_some_and(|p| now >= p) {
                    pre_timeout = None;
                } else {
                    next_bookmark += interval;
                }
                let failed = {
                    let st = store.read();
                    let Some(w) = st.tables.get(&table_key).and_then(|t| t.watchers.get(&id)) else {
                        return;
                    };
                    if st.rv <= start_rv {
                        continue;
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::kinds::{configmaps, nodes};
    use crate::store::fixtures::*;
    use crate::store::meta::{meta_str, obj_rv};
    use crate::store::{ListOptions, PatchType};

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
        assert_eq!(e.object()["code"], 410);
        assert_eq!(e.object()["reason"], "Expired");
        assert_eq!(e.object()["message"], "too old resource version: 5 (6)");
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

    /// A default store keeps events younger than `HISTORY_FRESHNESS` beyond its
    /// 10,000: a list continued, or a watch started, from before a burst of writes still
    /// works, as with upstream's watch cache.
    #[test]
    fn fresh_events_outlast_the_event_limit() {
        let s = Store::new();
        let first = s.current_resource_version();
        let burst = crate::store::DEFAULT_HISTORY_EVENTS + 500;
        for i in 0..burst {
            s.create(
                configmaps(),
                Some("default"),
                cm(&format!("c{i:05}"), json!({})),
                &wo("m"),
            )
            .unwrap();
        }
        let mut w = s
            .watch(
                configmaps(),
                None,
                &WatchOptions {
                    resource_version: Some(first.to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        let events = drain(&mut w);
        assert_eq!(events.len(), burst, "every event since {first}");
        assert!(events.iter().all(|(kind, _, _)| kind == "ADDED"));
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
            .map(|e| (e.kind.to_string(), obj_rv(e.object())))
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
        assert!(Arc::ptr_eq(&evs[0].body, &evs[1].body));
        assert!(Arc::ptr_eq(&evs[1].body, &evs[2].body));
        assert!(evs[0].body.value.get().is_none(), "nothing decoded yet");
        let v = evs[0].object() as *const Value;
        assert_eq!(evs[2].object() as *const Value, v, "decoded once");
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
            (first.kind, meta_str(first.object(), "name")),
            ("ADDED", "a")
        );
        let end = w.recv().await.unwrap();
        assert_eq!(end.kind, "BOOKMARK");
        assert_eq!(
            end.object()["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true"
        );
        assert_eq!(
            end.object()["metadata"]["resourceVersion"],
            s.current_resource_version().to_string()
        );
        // Bookmarks come once the store has moved on (a write to another kind will do),
        // as upstream's watch cache sends them.
        s.create(
            nodes(),
            None,
            json!({"metadata": {"name": "moved"}}),
            &wo("m"),
        )
        .unwrap();
        let bm = tokio::time::timeout(Duration::from_secs(2), w.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(bm.kind, "BOOKMARK");
        assert_eq!(
            *bm.object(),
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
