//! The request log: every Kubernetes API request the sim served, counted per (verb,
//! resource) and per (client, verb, resource), with the latest entries kept in full, for
//! tests and benchmarks to read.
//!
//! Verbs are named as the API server's audit log names them: `get`, `list`, `watch`,
//! `create`, `update`, `patch`, `delete`. Resources are plurals, with `/status` appended
//! for the status subresource (`nodes/status`). Discovery, `/version` and the health
//! endpoints are not recorded.
//!
//! A client is named by its User-Agent's product, as the API server names a field
//! manager that sent no `fieldManager` ([`client_name`]): `kubelet-gitops` for
//! `kubelet-gitops/0.1.0 (replica-1)`, `kubelet` for a kubelet, `unknown` without a
//! User-Agent. So a benchmark asserts the fleet's load per client
//! (`log.client_writes("kubelet-gitops-agent") == 0` at rest).
//!
//! Counts are kept for every request; full entries only for the latest
//! [`DEFAULT_ENTRY_LIMIT`] (configurable, [`RequestLog::set_entry_limit`]): a rollout of
//! 100,000 Nodes is millions of requests, which the counts hold in a few hundred bytes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Entries a log keeps by default: the newest 100,000 (about 30 MiB).
pub const DEFAULT_ENTRY_LIMIT: usize = 100_000;

/// Verbs that write.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// One served API request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Sequence number, from 0, in the order the requests were recorded.
    pub seq: u64,
    /// Audit verb: get, list, watch, create, update, patch, delete.
    pub verb: String,
    /// Resource plural, `nodes/status` for the status subresource.
    pub resource: String,
    /// API group (`""` for core, `coordination.k8s.io` ...).
    pub group: String,
    /// HTTP status code of the response (200 for a watch that started).
    pub status: u16,
    /// Namespace of the request, if namespaced.
    pub namespace: Option<String>,
    /// Object name, for requests on one object.
    pub name: Option<String>,
    /// The client's User-Agent header.
    pub user_agent: Option<String>,
}

impl LogEntry {
    /// The client that sent the request ([`client_name`] of its User-Agent).
    pub fn client(&self) -> String {
        client_name(self.user_agent.as_deref())
    }
}

/// The client a User-Agent names: upstream's `prefixFromUserAgent`, what precedes the
/// first `/`, printable characters only, at most 128 bytes; `unknown` when nothing is
/// left (as for a request without a User-Agent). The API server names the field manager
/// of a write without `fieldManager` the same way.
pub fn client_name(user_agent: Option<&str>) -> String {
    let mut out = String::new();
    for c in user_agent
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("")
        .chars()
    {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > 128 {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        "unknown".into()
    } else {
        out
    }
}

/// (client, verb, resource).
type ClientKey = (String, String, String);

#[derive(Debug)]
struct Inner {
    entries: VecDeque<LogEntry>,
    entry_limit: usize,
    /// Entries recorded since the last reset that `entries` no longer holds.
    dropped: u64,
    counts: BTreeMap<(String, String), u64>,
    by_client: BTreeMap<ClientKey, u64>,
    next_seq: u64,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            entries: VecDeque::new(),
            entry_limit: DEFAULT_ENTRY_LIMIT,
            dropped: 0,
            counts: BTreeMap::new(),
            by_client: BTreeMap::new(),
            next_seq: 0,
        }
    }
}

impl Inner {
    fn trim(&mut self) {
        while self.entries.len() > self.entry_limit {
            self.entries.pop_front();
            self.dropped += 1;
        }
    }
}

/// Thread-safe request log; clones share the same log.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    inner: Arc<Mutex<Inner>>,
}

impl RequestLog {
    /// An empty log keeping the latest [`DEFAULT_ENTRY_LIMIT`] entries.
    pub fn new() -> RequestLog {
        RequestLog::default()
    }

    /// An empty log keeping the latest `limit` entries (0: counts only).
    pub fn with_entry_limit(limit: usize) -> RequestLog {
        let log = RequestLog::new();
        log.set_entry_limit(limit);
        log
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the log inconsistent (each
        // update is a push and increments), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Keep the latest `limit` entries from now on (0: none, counts only), forgetting
    /// the oldest beyond it at once. Counts are not affected.
    pub fn set_entry_limit(&self, limit: usize) {
        let mut inner = self.lock();
        inner.entry_limit = limit;
        inner.trim();
    }

    /// How many entries the log keeps.
    pub fn entry_limit(&self) -> usize {
        self.lock().entry_limit
    }

    /// Records a request with only verb, resource and status.
    pub fn record(&self, verb: &str, resource: &str, status: u16) {
        self.record_entry(LogEntry {
            seq: 0,
            verb: verb.to_string(),
            resource: resource.to_string(),
            group: String::new(),
            status,
            namespace: None,
            name: None,
            user_agent: None,
        });
    }

    /// Records a full entry; its `seq` is assigned here.
    pub fn record_entry(&self, mut entry: LogEntry) {
        let client = entry.client();
        let mut inner = self.lock();
        entry.seq = inner.next_seq;
        inner.next_seq += 1;
        *inner
            .counts
            .entry((entry.verb.clone(), entry.resource.clone()))
            .or_insert(0) += 1;
        *inner
            .by_client
            .entry((client, entry.verb.clone(), entry.resource.clone()))
            .or_insert(0) += 1;
        if inner.entry_limit == 0 {
            inner.dropped += 1;
            return;
        }
        inner.entries.push_back(entry);
        inner.trim();
    }

    /// Number of requests per (verb, resource).
    pub fn counts(&self) -> BTreeMap<(String, String), u64> {
        self.lock().counts.clone()
    }

    /// Number of requests for one verb and resource (0 if none).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.lock()
            .counts
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Number of requests per (client, verb, resource); the client is [`client_name`]
    /// of the User-Agent.
    pub fn counts_by_client(&self) -> BTreeMap<(String, String, String), u64> {
        self.lock().by_client.clone()
    }

    /// Number of requests of `client` for one verb and resource (0 if none).
    pub fn client_count(&self, client: &str, verb: &str, resource: &str) -> u64 {
        self.lock()
            .by_client
            .get(&(client.to_string(), verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Number of requests of `client`, of any verb and resource.
    pub fn client_requests(&self, client: &str) -> u64 {
        self.client_sum(client, |_| true)
    }

    /// Number of writes ([`WRITE_VERBS`]) of `client`, whatever their outcome.
    pub fn client_writes(&self, client: &str) -> u64 {
        self.client_sum(client, |verb| WRITE_VERBS.contains(&verb))
    }

    fn client_sum(&self, client: &str, verb: impl Fn(&str) -> bool) -> u64 {
        self.lock()
            .by_client
            .iter()
            .filter(|((c, v, _), _)| c == client && verb(v))
            .map(|(_, n)| n)
            .sum()
    }

    /// Number of requests recorded since the start or the last reset.
    pub fn total(&self) -> u64 {
        self.lock().counts.values().sum()
    }

    /// The entries kept, oldest first: the latest [`RequestLog::entry_limit`] since the
    /// start or the last reset.
    pub fn entries(&self) -> Vec<LogEntry> {
        self.lock().entries.iter().cloned().collect()
    }

    /// Number of entries kept.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Number of requests recorded since the start or the last reset whose entries are
    /// no longer kept (counted, not in [`RequestLog::entries`]).
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Whether nothing has been recorded since the start or the last reset.
    pub fn is_empty(&self) -> bool {
        self.lock().counts.is_empty()
    }

    /// Forgets every entry and count (sequence numbers go on).
    pub fn reset(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.counts.clear();
        inner.by_client.clear();
        inner.dropped = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(verb: &str, resource: &str, ua: Option<&str>) -> LogEntry {
        LogEntry {
            seq: 0,
            verb: verb.into(),
            resource: resource.into(),
            group: String::new(),
            status: 200,
            namespace: None,
            name: Some("n1".into()),
            user_agent: ua.map(str::to_string),
        }
    }

    #[test]
    fn counts_per_verb_and_resource() {
        let log = RequestLog::new();
        log.record("get", "nodes", 200);
        log.record("get", "nodes", 404);
        log.record("patch", "nodes/status", 200);
        assert_eq!(log.count("get", "nodes"), 2);
        assert_eq!(log.count("patch", "nodes/status"), 1);
        assert_eq!(log.count("list", "nodes"), 0);
        let entries = log.entries();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[1].status, 404);
        assert_eq!(entries[2].seq, 2);
        log.reset();
        assert!(log.is_empty());
        assert!(log.counts().is_empty());
        assert!(log.counts_by_client().is_empty());
        log.record("list", "configmaps", 200);
        assert_eq!(log.entries()[0].seq, 3);
    }

    #[test]
    fn counts_per_client_verb_and_resource() {
        let log = RequestLog::new();
        let reconciler = Some("kubelet-gitops/0.1.0 (replica-1)");
        let agent = Some("kubelet-gitops-agent/0.1.0 (node-1)");
        log.record_entry(entry("patch", "nodes", reconciler));
        log.record_entry(entry("patch", "nodes", reconciler));
        log.record_entry(entry("watch", "nodes", reconciler));
        log.record_entry(entry("patch", "nodes/status", agent));
        log.record_entry(entry("get", "nodes", agent));
        log.record_entry(entry("get", "nodes", None));
        log.record_entry(entry(
            "patch",
            "nodes/status",
            Some("kubelet/v1.36.0 (linux/amd64) kubernetes/abc"),
        ));
        let by_client = log.counts_by_client();
        let key = |c: &str, v: &str, r: &str| (c.to_string(), v.to_string(), r.to_string());
        assert_eq!(by_client[&key("kubelet-gitops", "patch", "nodes")], 2);
        assert_eq!(by_client[&key("kubelet-gitops", "watch", "nodes")], 1);
        assert_eq!(
            by_client[&key("kubelet-gitops-agent", "patch", "nodes/status")],
            1
        );
        assert_eq!(by_client[&key("unknown", "get", "nodes")], 1);
        assert_eq!(by_client.len(), 6);
        assert_eq!(log.client_count("kubelet", "patch", "nodes/status"), 1);
        assert_eq!(log.client_count("kubelet", "patch", "nodes"), 0);
        assert_eq!(log.client_requests("kubelet-gitops"), 3);
        assert_eq!(log.client_writes("kubelet-gitops"), 2);
        assert_eq!(log.client_writes("kubelet-gitops-agent"), 1);
        assert_eq!(log.client_writes("nobody"), 0);
        assert_eq!(log.total(), 7);
        // The per-client counts add up to the per-verb ones.
        assert_eq!(by_client.values().sum::<u64>(), log.total());
    }

    #[test]
    fn entries_are_a_bounded_ring_and_counts_are_kept() {
        let log = RequestLog::with_entry_limit(3);
        for _ in 0..5 {
            log.record("get", "nodes", 200);
        }
        assert_eq!(log.len(), 3);
        assert_eq!(log.dropped(), 2);
        assert_eq!(log.count("get", "nodes"), 5);
        let seqs: Vec<u64> = log.entries().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [2, 3, 4], "the newest are kept");
        log.set_entry_limit(1);
        assert_eq!(log.entries()[0].seq, 4);
        assert_eq!(log.dropped(), 4);
        log.set_entry_limit(0);
        log.record("list", "nodes", 200);
        assert!(log.entries().is_empty());
        assert!(!log.is_empty(), "counted, though not kept");
        assert_eq!(log.total(), 6);
        assert_eq!(log.dropped(), 6);
        log.reset();
        assert_eq!(log.dropped(), 0);
        assert_eq!(RequestLog::new().entry_limit(), DEFAULT_ENTRY_LIMIT);
    }

    #[test]
    fn client_names_are_the_user_agent_product() {
        assert_eq!(
            client_name(Some("kubelet-gitops/0.1.0 (r1)")),
            "kubelet-gitops"
        );
        assert_eq!(
            client_name(Some("kubectl/v1.32.0 (linux/amd64)")),
            "kubectl"
        );
        assert_eq!(client_name(Some("agent-double/applying")), "agent-double");
        assert_eq!(client_name(Some("no-slash")), "no-slash");
        assert_eq!(client_name(None), "unknown");
        assert_eq!(client_name(Some("")), "unknown");
        assert_eq!(client_name(Some("/v1")), "unknown");
        assert_eq!(client_name(Some("a\tb/1")), "ab");
        assert_eq!(client_name(Some(&"x".repeat(300))).len(), 128);
    }
}
