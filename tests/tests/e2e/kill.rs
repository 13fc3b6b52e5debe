//! Scenario 7, processes killed mid-rollout. The reconciler, SIGKILLed after the canary
//! while another node applies, is started again: it resumes (the applying node still
//! counts against maxUnavailable), converges, and creates no ConfigMap twice. An agent,
//! SIGKILLed while Applying and another while Verifying, is started again: its node
//! converges, and no read of any kubelet config file, at any moment, finds it incomplete
//! or invalid.

use std::time::Duration;

use kubelet_gitops_e2e::{Backend, E2e, E2eError, NodeView, Options, both_backends, trace_rollout};

/// `node` reports `state` about `target`.
fn reports(node: Option<&NodeView>, target: &str, state: &str) -> bool {
    node.is_some_and(|n| n.observed.as_deref() == Some(target) && n.state.as_deref() == Some(state))
}

both_backends!(a_reconciler_killed_mid_rollout_resumes_without_duplicates);

async fn a_reconciler_killed_mid_rollout_resumes_without_duplicates(
    backend: Backend,
) -> Result<(), E2eError> {
    // Each kubelet restart takes a second: the rollout is slow enough to be caught mid-way.
    let options = Options {
        restart_delay: Some(Duration::from_secs(1)),
        ..Options::on(backend)
    };
    let Some(mut e2e) = E2e::start("kill-reconciler", options).await? else {
        return Ok(());
    };
    let before = e2e.wait_converged().await?;

    let mut general = e2e.pool("general")?;
    general.qps = 12;
    e2e.write_pool(&general)?;
    e2e.git().commit_and_push("general: kubeAPIQPS 12").await?;
    let target = e2e.wait_applied().await?["general"].clone();
    let uid_before = e2e
        .configmap(target.rsplit('/').next().unwrap_or_default())
        .await?
        .metadata
        .uid;

    // After the canary is Done, while another node is busy with the new config.
    let in_flight = e2e
        .wait_nodes(
            "the canary Done and another general node applying",
            |nodes| {
                if !nodes.get("general-3").is_some_and(|n| n.done_on(&target)) {
                    return None;
                }
                nodes
                    .values()
                    .find(|n| {
                        n.pool() == Some("general")
                            && n.name != "general-3"
                            && n.desired.as_deref() == Some(target.as_str())
                            && !n.settled()
                    })
                    .map(|n| n.name.clone())
            },
        )
        .await?;
    e2e.kill_reconciler().await?;
    let at_kill = e2e.nodes().await?;
    let done_at_kill = at_kill.values().filter(|n| n.done_on(&target)).count();
    assert!(
        done_at_kill < 4,
        "killed mid-rollout: {done_at_kill} of 4 Done"
    );
    e2e.restart_reconciler().await?;

    let after = e2e.wait_converged().await?;
    assert_eq!(after.target("general"), target);
    for node in e2e.pool_nodes("general") {
        assert_eq!(e2e.configz(&node).await?["kubeAPIQPS"], 12, "{node}");
    }
    // One ConfigMap per pool and distinct config, the new one the very object created
    // before the kill.
    let cms = e2e.configmaps().await?;
    let mut names: Vec<String> = cms.iter().filter_map(|c| c.metadata.name.clone()).collect();
    names.sort();
    let mut want: Vec<String> = before
        .targets
        .values()
        .chain(std::iter::once(&target))
        .map(|t| t.rsplit('/').next().unwrap_or_default().to_string())
        .collect();
    want.sort();
    want.dedup();
    assert_eq!(names, want, "killed while {in_flight} applied");
    let uid_after = e2e
        .configmap(target.rsplit('/').next().unwrap_or_default())
        .await?
        .metadata
        .uid;
    assert_eq!(uid_after, uid_before, "the ConfigMap was not created again");
    // Across both reconcilers: canary first, one node at a time.
    let trace = trace_rollout(
        &e2e.recorder().history()?,
        "general",
        &target,
        &["general-3"],
    );
    assert!(trace.assigned_before_canary_done.is_empty(), "{trace:?}");
    assert_eq!(trace.max_busy, 1, "{trace:?}");
    assert_eq!(trace.done.len(), 4, "{trace:?}");

    e2e.finish().await
}

both_backends!(agents_killed_while_applying_or_verifying_converge_with_valid_files);

async fn agents_killed_while_applying_or_verifying_converge_with_valid_files(
    backend: Backend,
) -> Result<(), E2eError> {
    // The restart command waits a second, then returns before the kubelet has started
    // (which takes 1.5 s): a second of Applying, then more than a second of Verifying.
    let options = Options {
        restart_delay: Some(Duration::from_secs(1)),
        restart_detached: true,
        kubelet_start_delay: Duration::from_millis(1500),
        ..Options::on(backend)
    };
    let Some(mut e2e) = E2e::start("kill-agent", options).await? else {
        return Ok(());
    };
    e2e.wait_converged().await?;
    let files = e2e.watch_config_files();

    let mut general = e2e.pool("general")?;
    general.qps = 12;
    e2e.write_pool(&general)?;
    e2e.git().commit_and_push("general: kubeAPIQPS 12").await?;
    let target = e2e.wait_applied().await?["general"].clone();

    // The canary's agent dies while Applying.
    e2e.wait_nodes("the canary Applying", |nodes| {
        reports(nodes.get("general-3"), &target, "Applying").then_some(())
    })
    .await?;
    e2e.kill_agent("general-3").await?;
    e2e.restart_agent("general-3")?;

    // The next node's agent dies while Verifying.
    let verifying = e2e
        .wait_nodes("another general node Verifying", |nodes| {
            nodes
                .values()
                .find(|n| n.name != "general-3" && reports(Some(n), &target, "Verifying"))
                .map(|n| n.name.clone())
        })
        .await?;
    e2e.kill_agent(&verifying).await?;
    e2e.restart_agent(&verifying)?;

    let after = e2e.wait_converged().await?;
    assert_eq!(after.target("general"), target);
    let data = e2e.kubelet("general-3")?.config()?;
    for node in e2e.pool_nodes("general") {
        assert_eq!(e2e.configz(&node).await?["kubeAPIQPS"], 12, "{node}");
        assert_eq!(e2e.kubelet(&node)?.config()?, data, "{node}");
    }
    let report = files.finish();
    assert!(report.reads > 100, "{report:?}");
    assert_eq!(report.failure_count, 0, "{report:?}");
    eprintln!(
        "config files read {} times while agents were killed (general-3 in Applying, {verifying} in Verifying)",
        report.reads
    );

    e2e.finish().await
}
