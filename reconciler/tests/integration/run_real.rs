//! The controller against a real kube-apiserver v1.36 (support::real: etcd and
//! kube-apiserver, no kubelets, deploy/base applied, the reconciler with its service
//! account's token, so RBAC and the admission policy judge each of its writes), the agent
//! double playing the agents as admin. Writes are counted from the API server's
//! `/metrics`, as the reconcile benchmark's real column counts them: the claims the
//! benchmark makes at 5,000 nodes, checked here at 20; and how `/metrics` is read.
//! Skipped (with a printed line) without the upstream binaries, unless
//! KUBELET_GITOPS_E2E_REQUIRE is set.

use std::collections::BTreeMap;
use std::time::Duration;

use kubelet_gitops_core::inventory::Inventory;

use crate::support::apiserver::{ApiserverMetrics, SERVICE_ACCOUNTS};
use crate::support::real::{NodeView, RealServer, upstream_or_skip};
use crate::support::*;

// How /metrics is read.

const BEFORE: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 4
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 566
apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts",priority_level="workload-low"} 9
process_cpu_seconds_total 12.5
apiserver_terminated_watchers_total{group="",resource="nodes",version="v1"} 1
"#;

const AFTER: &str = r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 1012
apiserver_request_total{code="403",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="LIST",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 4
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 600
apiserver_flowcontrol_dispatched_requests_total{flow_schema="service-accounts",priority_level="workload-low"} 1010
process_cpu_seconds_total 14
apiserver_terminated_watchers_total{group="",resource="nodes",version="v1"} 3
apiserver_terminated_watchers_total{group="",resource="configmaps",version="v1"} 0
"#;

#[test]
fn writes_since_counts_accepted_writes_that_grew_by_verb_and_resource() {
    let (before, after) = (
        ApiserverMetrics::parse(BEFORE),
        ApiserverMetrics::parse(AFTER),
    );
    let writes = after.writes_since(&before);
    let expected: BTreeMap<(String, String), usize> = [
        (("create", "configmaps"), 1),
        (("patch", "nodes"), 1002),
        (("patch", "nodes/status"), 1),
    ]
    .into_iter()
    .map(|((v, r), n)| ((v.to_string(), r.to_string()), n))
    .collect();
    // Not the denied patches, the dry runs, the reads, nor the leases that did not grow.
    assert_eq!(writes, expected);
    assert!(after.writes_since(&after).is_empty());
}

#[test]
fn reads_dispatched_requests_cpu_and_closed_watches_since_a_scrape() {
    let (before, after) = (
        ApiserverMetrics::parse(BEFORE),
        ApiserverMetrics::parse(AFTER),
    );
    assert_eq!(after.dispatched_since(&before, SERVICE_ACCOUNTS), 1001);
    assert_eq!(after.dispatched_since(&before, "exempt"), 34);
    assert_eq!(after.dispatched_since(&before, "nobody"), 0);
    let reads: Vec<_> = after.reads_since(&before).into_iter().collect();
    assert_eq!(reads, [(("list".to_string(), "nodes".to_string()), 6)]);
    assert_eq!(after.cpu_since(&before), Duration::from_millis(1500));
    let closed: Vec<_> = after
        .terminated_watchers_since(&before)
        .into_iter()
        .collect();
    assert_eq!(closed, [("nodes".to_string(), 2)]);
}

#[test]
fn label_values_with_commas_and_escapes_parse() {
    let text = r#"# TYPE apiserver_request_total counter
apiserver_request_total{code="201",dry_run="",group="a,b",resource="x\"y",subresource="",verb="POST"} 7
apiserver_flowcontrol_dispatched_requests_total{flow_schema="s\\t"} 2.5
"#;
    let m = ApiserverMetrics::parse(text);
    let key = m.requests.keys().next().unwrap();
    assert_eq!(
        (key.group.as_str(), key.resource.as_str(), key.code),
        ("a,b", "x\"y", 201)
    );
    assert_eq!(m.requests[key], 7.0);
    assert_eq!(m.dispatched["s\\t"], 2.5);
}

// The reconciler against the real server.

const ROLLOUT: &str = "maxUnavailable: 100%, canary: 0";

/// The reconciler's writes in `writes` (the API server's, less the agent double's
/// `agent` node patches and the API server's own Lease renewals).
fn reconciler_share(
    mut writes: BTreeMap<(String, String), usize>,
    agent: usize,
) -> BTreeMap<(String, String), usize> {
    let key = ("patch".to_string(), "nodes".to_string());
    let nodes = writes.get(&key).copied().unwrap_or(0);
    assert!(nodes >= agent, "{writes:?}: fewer than the agent's {agent}");
    writes.insert(key.clone(), nodes - agent);
    writes.retain(|(_, resource), n| *n > 0 && resource != "leases");
    writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_apiserver_sees_one_write_per_node_and_none_while_idle() {
    let Some(bins) = upstream_or_skip("run_real: no real kube-apiserver to run against") else {
        return;
    };
    let _turn = serial::alone();
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let server = RealServer::start(&dir.path().join("cluster"), bins).await;
    server
        .create_nodes(&Inventory::generate(20, &["a", "b"]), 8)
        .await;
    let agent = AgentDouble::start(server.admin_kubeconfig(), AgentOptions::default()).await;
    let repo = ConfigRepo::init(&dir.path().join("repo"));
    repo.settings_and_pools(&[
        ("a", ROLLOUT, "    maxPods: 50\n"),
        ("b", ROLLOUT, "    maxPods: 60\n"),
    ]);
    repo.commit("two pools");
    let config = run_config(
        &repo,
        &server.reconciler_kubeconfig,
        &dir.path().join("cache"),
        "real",
    );
    let r = reconciler::controller::start(config).await.unwrap();
    server
        .wait_nodes("every node Done", LONG, |nodes| {
            nodes.len() == 20 && nodes.iter().all(NodeView::settled_done)
        })
        .await;

    // Idle: resyncs write nothing, and send nothing at all.
    let (before, agent_before) = server.settled_metrics(&agent).await;
    let since = ok_reconciles(&r);
    wait_reconciles(&r, since, 3).await;
    let (after, agent_after) = server.settled_metrics(&agent).await;
    let idle = reconciler_share(after.writes_since(&before), agent_after - agent_before);
    assert!(idle.is_empty(), "idle writes: {idle:?}");
    assert_eq!(after.dispatched_since(&before, SERVICE_ACCOUNTS), 0);

    // Pool a changes: one patch per node of it, and its ConfigMap.
    let old: BTreeMap<String, Option<String>> = server
        .nodes()
        .iter()
        .map(|n| (n.name.clone(), n.desired_name()))
        .collect();
    let (before, agent_before) = (after, agent_after);
    repo.pool("a", ROLLOUT, "    maxPods: 51\n");
    repo.commit("change pool a");
    server
        .wait_nodes("pool a on its new config", LONG, |nodes| {
            nodes
                .iter()
                .filter(|n| n.pool.as_deref() == Some("a"))
                .all(|n| n.settled_done() && n.desired_name() != old[&n.name])
        })
        .await;
    let (after, agent_after) = server.settled_metrics(&agent).await;
    let change = reconciler_share(after.writes_since(&before), agent_after - agent_before);
    // The rollout record (reconciler/src/record.rs) is rewritten twice: the pool's new
    // target, then complete; not per node.
    let expected: BTreeMap<(String, String), usize> = [
        (("patch".to_string(), "nodes".to_string()), 10),
        (("create".to_string(), "configmaps".to_string()), 1),
        (("update".to_string(), "configmaps".to_string()), 2),
    ]
    .into_iter()
    .collect();
    assert_eq!(change, expected);
    // Two patches per node for the agent double (Applying, Done).
    assert_eq!(agent_after - agent_before, 20);
    // Nothing but those writes from the reconciler (the rollout record's two included):
    // no reads, no retries; only a watch the API server closed as too slow (it does that
    // under load; the sim never does) is started again.
    let requests = after.dispatched_since(&before, SERVICE_ACCOUNTS);
    let closed: usize = after.terminated_watchers_since(&before).values().sum();
    assert!(
        (13..=13 + closed).contains(&requests),
        "{requests} requests by the reconciler, {closed} watches closed by the server"
    );
    let unchanged = server
        .nodes()
        .iter()
        .filter(|n| n.pool.as_deref() == Some("b"))
        .all(|n| n.desired_name() == old[&n.name]);
    assert!(unchanged, "pool b was reassigned");

    r.stop().await.unwrap();
    agent.stop().await;
}
