//! Scenario 2, canary: replayed from a watch of every Node change (in resourceVersion
//! order), no node outside the canary set is assigned a pool's new config before every
//! canary node is Done on it, and no more than maxUnavailable nodes of a pool are busy
//! at any moment. First with canary 1 and maxUnavailable 1 (the initial rollout from the
//! nodes' local configs), then with canary 2 and maxUnavailable 2 (a change).

use kubelet_gitops_e2e::{Backend, E2e, E2eError, Options, both_backends, trace_rollout};

both_backends!(the_canary_goes_first_and_max_unavailable_holds);

async fn the_canary_goes_first_and_max_unavailable_holds(backend: Backend) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("canary", Options::on(backend)).await? else {
        return Ok(());
    };

    // canary 1, maxUnavailable 1: general-3 carries the canary label, so it goes first
    // although general-1 comes first by name; the other pools take their first node.
    let first = e2e.wait_converged().await?;
    let history = e2e.recorder().history()?;
    for (pool, canary) in [
        ("general", ["general-3"]),
        ("gpu", ["gpu-1"]),
        ("infra", ["infra-1"]),
    ] {
        let trace = trace_rollout(&history, pool, first.target(pool), &canary);
        assert_eq!(
            trace.assigned.first().map(String::as_str),
            Some(canary[0]),
            "{pool}: {trace:?}"
        );
        assert_eq!(
            trace.done.first().map(String::as_str),
            Some(canary[0]),
            "{pool}: {trace:?}"
        );
        assert!(
            trace.assigned_before_canary_done.is_empty(),
            "{pool}: assigned before the canary was Done: {trace:?}"
        );
        assert_eq!(trace.max_busy, 1, "{pool}: maxUnavailable 1: {trace:?}");
        let mut done = trace.done.clone();
        done.sort();
        assert_eq!(done, e2e.pool_nodes(pool), "{pool}: every node Done");
    }
    // The reconciler's own account agrees: one canary assignment per pool.
    let canary_logs: Vec<String> = e2e
        .reconciler_log_events("node assigned")
        .iter()
        .filter(|e| e["reason"] == "canary")
        .filter_map(|e| e["node"].as_str().map(str::to_string))
        .collect();
    let mut canary_logs_sorted = canary_logs.clone();
    canary_logs_sorted.sort();
    assert_eq!(
        canary_logs_sorted,
        ["general-3", "gpu-1", "infra-1"],
        "canary assignments logged: {canary_logs:?}"
    );

    // canary 2, maxUnavailable 2 on general: the labelled canary and then the first by
    // name go first, then two at a time.
    let mut general = e2e.pool("general")?;
    general.qps = 12;
    general.rollout = vec!["canary: 2".into(), "maxUnavailable: 2".into()];
    e2e.write_pool(&general)?;
    e2e.git()
        .commit_and_push("general: kubeAPIQPS 12, canary 2, two at a time")
        .await?;
    let second = e2e.wait_converged().await?;
    let target = second.target("general");
    assert_ne!(target, first.target("general"));
    let trace = trace_rollout(
        &e2e.recorder().history()?,
        "general",
        target,
        &["general-3", "general-1"],
    );
    let mut canaries = trace.assigned[..2].to_vec();
    canaries.sort();
    assert_eq!(canaries, ["general-1", "general-3"], "{trace:?}");
    assert!(
        trace.assigned_before_canary_done.is_empty(),
        "assigned before both canaries were Done: {trace:?}"
    );
    assert!(trace.max_busy <= 2, "maxUnavailable 2: {trace:?}");
    assert_eq!(trace.done.len(), 4, "{trace:?}");
    for node in e2e.pool_nodes("general") {
        assert_eq!(
            e2e.configz(&node).await?["kubeAPIQPS"],
            12,
            "configz of {node}"
        );
    }
    // The other pools did not move.
    for pool in ["gpu", "infra"] {
        assert_eq!(first.target(pool), second.target(pool));
    }

    e2e.finish().await
}
