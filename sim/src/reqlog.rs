//! The request log: every Kubernetes API request the sim served, with counts per
//! (verb, resource), for tests and benchmarks to read.
//!
//! Verbs are named as the API server's audit log names them: `get`, `list`, `watch`,
//! `create`, `update`, `patch`, `delete`. Resources are plurals, with `/status` appended
//! for the status subresource (`nodes/status`). Discovery, `/version` and the health
//! endpoints are not recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

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

#[derive(Debug, Default)]
struct Inner {
    entries: Vec<LogEntry>,
    counts: BTreeMap<(String, String), u64>,
    next_seq: u64,
}

/// Thread-safe request log; clones share the same log.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    inner: Arc<Mutex<Inner>>,
}

impl RequestLog {
    /// An empty log.
    pub fn new() -> RequestLog {
        RequestLog::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the log inconsistent (each
        // update is a push and an increment), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        let mut inner = self.lock();
        entry.seq = inner.next_seq;
        inner.next_seq += 1;
        *inner
            .counts
            .entry((entry.verb.clone(), entry.resource.clone()))
            .or_insert(0) += 1;
        inner.entries.push(entry);
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

    /// Every recorded entry, oldest first.
    pub fn entries(&self) -> Vec<LogEntry> {
        self.lock().entries.clone()
    }

    /// Number of recorded entries.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether nothing has been recorded since the start or the last reset.
    pub fn is_empty(&self) -> bool {
        self.lock().entries.is_empty()
    }

    /// Forgets every entry and count (sequence numbers go on).
    pub fn reset(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.counts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        log.record("list", "configmaps", 200);
        assert_eq!(log.entries()[0].seq, 3);
    }
}
