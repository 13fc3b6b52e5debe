//! Node status churn: the status reports real kubelets keep making when nothing changes,
//! for the Nodes that have no stand-in kubelet (all of them with `--no-kubelets`, the
//! way large fleets are simulated).
//!
//! A kubelet computes its Node's status every `nodeStatusUpdateFrequency` (10 s) and
//! sends it when something changed or when `nodeStatusReportFrequency` (5 min by
//! default) has passed since its last report: on a quiet Node, one report every 5
//! minutes, which moves each condition's `lastHeartbeatTime`, so the Node gets a new
//! resourceVersion and every Node watcher a MODIFIED event. 100,000 Nodes make 333 such
//! writes a second. The churn does what they do, for each Node in turn, spread evenly
//! over the interval ([`StatusChurn`]): a strategic merge patch of `nodes/status` moving
//! the heartbeat of the kubelet's conditions (`MemoryPressure`, `DiskPressure`,
//! `PIDPressure`, `Ready`) that the Node has, with field manager `kubelet`, as the
//! kubelet's own patch does. A Node with none of them (not registered by a kubelet) is
//! left alone. Each write is recorded in the request log under the kubelet's
//! User-Agent ([`kubelet_user_agent`], client `kubelet`), so a benchmark sees the
//! kubelets' share of the API load beside the product's.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::kubelet::KUBELET_VERSION;
use crate::reqlog::{LogEntry, RequestLog};
use crate::resources::kinds;
use crate::store::{PatchType, Store, WriteOptions, raw_field};

/// A kubelet's default `nodeStatusReportFrequency`: how often a quiet Node's status is
/// reported.
pub const KUBELET_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(300);

/// The User-Agent the churn's writes are recorded with: a kubelet's
/// (`kubelet/v1.36.0 (linux/amd64) kubernetes/sim`), whose client is `kubelet`.
pub fn kubelet_user_agent() -> String {
    format!("kubelet/{KUBELET_VERSION} (linux/amd64) kubernetes/sim")
}

/// The condition types a kubelet heartbeats.
pub const KUBELET_CONDITIONS: [&str; 4] =
    ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

/// How often the Nodes without a stand-in kubelet report their status.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum StatusChurn {
    /// No reports.
    #[default]
    Off,
    /// Each Node reports once per this interval, the Nodes spread evenly over it (as
    /// kubelets with this `nodeStatusReportFrequency`).
    PerNode(Duration),
    /// This many reports a second over the whole fleet, each Node in turn.
    PerSecond(f64),
}

impl StatusChurn {
    /// What real kubelets do: one report per Node every 5 minutes
    /// ([`KUBELET_STATUS_REPORT_FREQUENCY`]).
    pub const KUBELETS: StatusChurn = StatusChurn::PerNode(KUBELET_STATUS_REPORT_FREQUENCY);

    /// How long one round over `nodes` Nodes takes (`None`: no churn).
    pub fn round(&self, nodes: usize) -> Option<Duration> {
        match *self {
            StatusChurn::Off => None,
            StatusChurn::PerNode(d) if d.is_zero() => None,
            StatusChurn::PerNode(d) => Some(d),
            StatusChurn::PerSecond(r) if r.is_finite() && r > 0.0 => {
                Some(Duration::from_secs_f64(nodes as f64 / r))
            }
            StatusChurn::PerSecond(_) => None,
        }
    }
}

impl fmt::Display for StatusChurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusChurn::Off => f.write_str("off"),
            StatusChurn::PerNode(d) => write!(f, "{}", duration_text(*d)),
            StatusChurn::PerSecond(r) => write!(f, "{r}/s"),
        }
    }
}

fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

impl FromStr for StatusChurn {
    type Err = String;

    /// `off` or `0`; a per-Node interval as a Go duration (`5m`, `30s`); or a fleet-wide
    /// rate, `<n>/s` (`333/s`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s == "off" || s == "0" {
            return Ok(StatusChurn::Off);
        }
        if let Some(rate) = s.strip_suffix("/s") {
            let r: f64 = rate
                .trim()
                .parse()
                .map_err(|_| format!("invalid rate {s:?}: want <number>/s, e.g. 333/s"))?;
            if !r.is_finite() || r < 0.0 {
                return Err(format!("invalid rate {s:?}: must be a non-negative number"));
            }
            return Ok(if r == 0.0 {
                StatusChurn::Off
            } else {
                StatusChurn::PerSecond(r)
            });
        }
        let d = kubelet_gitops_core::duration::Duration::parse(s)
            .ok()
            .and_then(|d| d.to_std())
            .ok_or_else(|| {
                format!("invalid status churn {s:?}: want off, a duration (5m) or a rate (333/s)")
            })?;
        Ok(if d.is_zero() {
            StatusChurn::Off
        } else {
            StatusChurn::PerNode(d)
        })
    }
}

/// The churn task: reports until `churn` is dropped, following its changes. `kubelets`
/// names the Nodes that have a stand-in kubelet of their own (left alone).
pub(super) async fn run(
    store: Store,
    log: RequestLog,
    kubelets: BTreeSet<String>,
    mut churn: watch::Receiver<StatusChurn>,
) {
    loop {
        if churn.has_changed().is_err() {
            return; // the sim is gone
        }
        let setting = *churn.borrow_and_update();
        if setting.round(1).is_none() {
            // Off: wait for a change.
            if churn.changed().await.is_err() {
                return;
            }
            continue;
        }
        let names = churned_nodes(&store, &kubelets);
        let Some(round) = setting.round(names.len()).filter(|_| !names.is_empty()) else {
            // No Node yet: look again in a second, or at a change.
            tokio::select! {
                changed = churn.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            continue;
        };
        let start = Instant::now();
        for (i, name) in names.iter().enumerate() {
            let due = start + offset(round, i, names.len());
            if due > Instant::now() {
                tokio::select! {
                    changed = churn.changed() => {
                        if changed.is_err() { return }
                        break;
                    }
                    _ = tokio::time::sleep_until(due) => {}
                }
            } else if i % 64 == 63 {
                tokio::task::yield_now().await;
                if churn.has_changed().unwrap_or(true) {
                    break;
                }
            }
            report(&store, &log, name);
        }
        if churn.has_changed().unwrap_or(true) {
            continue;
        }
        // The round's last report was due at `start + round * (n - 1) / n`: the next
        // round's first is one step later.
        tokio::select! {
            changed = churn.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep_until(start + round) => {}
        }
    }
}

/// When the `i`th of `n` Nodes reports in a round of length `round`: evenly spread.
fn offset(round: Duration, i: usize, n: usize) -> Duration {
    round.mul_f64(i as f64 / n.max(1) as f64)
}

/// The names of the Nodes to report for, sorted.
fn churned_nodes(store: &Store, kubelets: &BTreeSet<String>) -> Vec<String> {
    let mut names = store.names(kinds::nodes(), None);
    names.retain(|name| !kubelets.contains(name));
    names
}

/// One status report for Node `name`: its kubelet conditions' heartbeats moved to now.
pub fn report(store: &Store, log: &RequestLog, name: &str) {
    // As a kubelet reads its Node from its informer's cache: no request, and here
    // only the conditions are decoded.
    let Some(node) = store.get_shared(kinds::nodes(), None, name) else {
        return;
    };
    let conditions = raw_field(node.encoded(), "status")
        .and_then(|status| raw_field(status, "conditions"))
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
        .unwrap_or(Value::Null);
    let node = json!({"status": {"conditions": conditions}});
    let now = crate::kubelet::rfc3339(std::time::SystemTime::now(), false);
    let Some(patch) = heartbeat_patch(&node, &now) else {
        return;
    };
    let body = serde_json::to_vec(&patch).unwrap_or_default();
    let status = match store.patch(
        kinds::nodes(),
        None,
        name,
        Some("status"),
        PatchType::StrategicMerge,
        &body,
        &WriteOptions {
            field_manager: Some("kubelet".into()),
            ..WriteOptions::default()
        },
    ) {
        Ok(_) => 200,
        Err(e) => e.code,
    };
    log.record_entry(LogEntry {
        seq: 0,
        verb: "patch".into(),
        resource: "nodes/status".into(),
        group: String::new(),
        status,
        namespace: None,
        name: Some(name.to_string()),
        user_agent: Some(kubelet_user_agent()),
    });
}

/// The strategic merge patch a kubelet sends when only its heartbeats moved: each of its
/// conditions on `node` with `lastHeartbeatTime` at `now`, and the order of every
/// condition as it is (`None` when the Node has none of the kubelet's conditions).
pub fn heartbeat_patch(node: &Value, now: &str) -> Option<Value> {
    let conditions = node.pointer("/status/conditions")?.as_array()?;
    let order: Vec<Value> = conditions
        .iter()
        .filter_map(|c| c.get("type").cloned())
        .map(|t| json!({"type": t}))
        .collect();
    let beats: Vec<Value> = conditions
        .iter()
        .filter_map(|c| c.get("type").and_then(Value::as_str))
        .filter(|t| KUBELET_CONDITIONS.contains(t))
        .map(|t| json!({"type": t, "lastHeartbeatTime": now}))
        .collect();
    if beats.is_empty() {
        return None;
    }
    Some(json!({"status": {"$setElementOrder/conditions": order, "conditions": beats}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::{Readiness, conditions};

    #[test]
    fn churn_is_off_a_per_node_interval_or_a_fleet_rate() {
        let parse = |s: &str| s.parse::<StatusChurn>();
        assert_eq!(parse("off"), Ok(StatusChurn::Off));
        assert_eq!(parse("0"), Ok(StatusChurn::Off));
        assert_eq!(parse("0s"), Ok(StatusChurn::Off));
        assert_eq!(parse("0/s"), Ok(StatusChurn::Off));
        assert_eq!(parse("5m"), Ok(StatusChurn::KUBELETS));
        assert_eq!(
            parse("1m30s"),
            Ok(StatusChurn::PerNode(Duration::from_secs(90)))
        );
        assert_eq!(parse("333/s"), Ok(StatusChurn::PerSecond(333.0)));
        assert_eq!(parse("2.5/s"), Ok(StatusChurn::PerSecond(2.5)));
        for bad in ["", "fast", "-1s", "-3/s", "x/s", "5"] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        for s in ["off", "300s", "1500ms", "333/s"] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
        // One round: the interval, or the fleet at the rate.
        assert_eq!(
            StatusChurn::KUBELETS.round(7),
            Some(Duration::from_secs(300))
        );
        assert_eq!(
            StatusChurn::PerSecond(500.0).round(100_000),
            Some(Duration::from_secs(200))
        );
        assert_eq!(StatusChurn::Off.round(3), None);
        assert_eq!(StatusChurn::PerNode(Duration::ZERO).round(3), None);
        assert_eq!(StatusChurn::default(), StatusChurn::Off);
    }

    #[test]
    fn reports_are_spread_evenly_over_the_round() {
        // 100,000 Nodes every 5 minutes: one every 3 ms, 333 a second.
        let round = KUBELET_STATUS_REPORT_FREQUENCY;
        assert_eq!(offset(round, 0, 100_000), Duration::ZERO);
        assert_eq!(offset(round, 1, 100_000), Duration::from_millis(3));
        assert_eq!(offset(round, 50_000, 100_000), Duration::from_secs(150));
        assert_eq!(
            offset(round, 99_999, 100_000),
            Duration::from_secs(300) - Duration::from_millis(3)
        );
        assert_eq!(offset(round, 0, 0), Duration::ZERO);
    }

    fn node_with(conds: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"conditions": conds}})
    }

    #[test]
    fn a_heartbeat_moves_the_kubelets_conditions_only() {
        let mut conds = conditions(None, &Readiness::Ready, "2026-01-01T00:00:00Z");
        conds.insert(
            1,
            json!({"type": "KubeletConfigReady", "status": "True", "reason": "Done",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z"}),
        );
        let patch = heartbeat_patch(&node_with(conds), "2026-01-01T00:05:00Z").unwrap();
        assert_eq!(
            patch,
            json!({"status": {
                "$setElementOrder/conditions": [
                    {"type": "MemoryPressure"}, {"type": "KubeletConfigReady"},
                    {"type": "DiskPressure"}, {"type": "PIDPressure"}, {"type": "Ready"}],
                "conditions": [
                    {"type": "MemoryPressure", "lastHeartbeatTime": "2026-01-01T00:05:00Z"},
                    {"type": "DiskPressure", "lastHeartbeatTime": "2026-01-01T00:05:00Z"},
                    {"type": "PIDPressure", "lastHeartbeatTime": "2026-01-01T00:05:00Z"},
                    {"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:05:00Z"}]}})
        );
        assert_eq!(heartbeat_patch(&node_with(vec![]), "t"), None);
        assert_eq!(
            heartbeat_patch(&node_with(vec![json!({"type": "Other"})]), "t"),
            None
        );
        assert_eq!(heartbeat_patch(&json!({"metadata": {}}), "t"), None);
    }

    #[test]
    fn a_report_is_a_kubelet_status_patch_that_watchers_see() {
        let store = Store::new();
        let log = RequestLog::new();
        let long_ago = "2020-01-01T00:00:00Z";
        let mut conds = conditions(None, &Readiness::Ready, long_ago);
        conds.push(
            json!({"type": "KubeletConfigReady", "status": "True", "reason": "Done",
            "lastHeartbeatTime": long_ago, "lastTransitionTime": long_ago}),
        );
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"pool": "a"}},
            "status": {"conditions": conds}});
        let created = store
            .create(kinds::nodes(), None, node, &WriteOptions::default())
            .unwrap();
        let mut watch = store
            .watch(
                kinds::nodes(),
                None,
                &crate::store::WatchOptions {
                    resource_version: Some(store.current_resource_version().to_string()),
                    ..Default::default()
                },
            )
            .unwrap();
        report(&store, &log, "n1");
        let after = store.get(kinds::nodes(), None, "n1").unwrap();
        let ev = watch.try_recv().expect("a MODIFIED event");
        assert_eq!(ev.kind, "MODIFIED");
        assert_eq!(
            ev.object()["metadata"]["resourceVersion"],
            after["metadata"]["resourceVersion"]
        );
        assert_ne!(
            after["metadata"]["resourceVersion"],
            created["metadata"]["resourceVersion"]
        );
        let beat = |n: &Value, t: &str| {
            n["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == t)
                .unwrap()["lastHeartbeatTime"]
                .clone()
        };
        for t in KUBELET_CONDITIONS {
            assert_ne!(beat(&after, t), long_ago, "{t}");
            assert_eq!(
                after["status"]["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["type"] == t)
                    .unwrap()["lastTransitionTime"],
                long_ago,
                "{t}: only the heartbeat moves"
            );
        }
        assert_eq!(beat(&after, "KubeletConfigReady"), long_ago);
        assert_eq!(after["metadata"]["labels"]["pool"], "a");
        let managers: Vec<&str> = after["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"kubelet"), "{managers:?}");
        assert_eq!(log.client_count("kubelet", "patch", "nodes/status"), 1);
        assert_eq!(log.entries()[0].name.as_deref(), Some("n1"));
        // A Node gone: no report.
        store.delete(kinds::nodes(), None, "n1", None).unwrap();
        report(&store, &log, "n1");
        assert_eq!(log.total(), 1, "no Node, no report");
    }
}
