//! Scenario 3, rollback: a commit whose config validates everywhere (the repository, the
//! agent's pre-flight) but with which the kubelet cannot start (a `podLogsDir` where a
//! file stands in the way on these nodes: a real v1.36 kubelet and the sim's stand-in
//! both exit with `Failed to initialize internal modules: error creating pod logs root
//! directory ...`). The canary's agent
//! writes it, restarts the kubelet, which exits; after the pool's healthTimeout the
//! agent rolls back to the last-known-good config and reports RolledBack. The reconciler
//! halts the pool: no other node is ever assigned the config.

use kubelet_gitops_core::protocol;
use kubelet_gitops_e2e::{Backend, E2e, E2eError, Options, both_backends};

both_backends!(a_config_the_kubelet_cannot_start_with_is_rolled_back_and_halts_the_pool);

async fn a_config_the_kubelet_cannot_start_with_is_rolled_back_and_halts_the_pool(
    backend: Backend,
) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("rollback", Options::on(backend)).await? else {
        return Ok(());
    };
    let good = e2e.wait_converged().await?;
    let good_general = good.target("general").to_string();
    // Wait for the good config to become every general node's last-known-good (lkgGrace
    // 2s), so that is what a rollback returns to.
    e2e.wait_nodes(
        "the good config last-known-good on every general node",
        |nodes| {
            nodes
                .values()
                .filter(|n| n.pool() == Some("general"))
                .all(|n| n.last_known_good.as_deref() == Some(good_general.as_str()))
                .then_some(())
        },
    )
    .await?;
    let good_data = e2e.kubelet("general-3")?.config()?;

    let blocked = e2e.block_pod_logs_dir()?;
    let mut general = e2e.pool("general")?;
    general.qps = 13;
    general.kubelet = vec![format!("podLogsDir: {blocked}")];
    e2e.write_pool(&general)?;
    e2e.git()
        .commit_and_push("general: podLogsDir where a file is")
        .await?;
    // A pipeline waiting on what it merged hears of the halt: exit 1.
    let head = e2e.git().head().await?;
    let waiter =
        e2e.spawn_status(&["general", "--wait", "--commit", &head, "--timeout", "600s"])?;
    let bad = e2e.wait_applied().await?["general"].clone();
    assert_ne!(bad, good_general);

    // The canary rolls back to the good config, and says why.
    let canary = e2e
        .wait_nodes("the canary rolled back", |nodes| {
            nodes.get("general-3").cloned().filter(|n| {
                n.observed.as_deref() == Some(bad.as_str())
                    && n.state.as_deref() == Some("RolledBack")
                    && n.current.as_deref() == Some(good_general.as_str())
                    && n.message
                        .as_deref()
                        .is_some_and(|m| m.contains("rolled back to"))
            })
        })
        .await?;
    let message = canary.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "{} within {}",
            protocol::reason::UNHEALTHY,
            e2e.options().rollout.health_timeout
        )),
        "{message}"
    );
    assert!(
        message.ends_with(&format!("rolled back to {good_general}")),
        "{message}"
    );
    assert_eq!(
        canary.desired.as_deref(),
        Some(bad.as_str()),
        "the verdict stays"
    );
    assert_eq!(e2e.configz("general-3").await?["kubeAPIQPS"], 11);
    assert_eq!(e2e.kubelet("general-3")?.config()?, good_data);

    // The pool halts on it, and says which node failed.
    let pool = e2e.wait_pool_phase("general", "Halted").await?;
    assert!(pool["failed"].to_string().contains("general-3"), "{pool}");
    let (code, stdout, stderr) =
        E2e::status_exit(waiter, std::time::Duration::from_secs(60)).await?;
    assert_eq!(code, Some(1), "status --wait on a halt: {stdout}\n{stderr}");
    assert!(stdout.contains("halted"), "{stdout}");
    assert_eq!(
        e2e.metric("kubelet_gitops_pool_phase{pool=\"general\",phase=\"Halted\"}")
            .await?,
        Some(1.0)
    );
    // Two more rounds of planning after the halt assign nothing either.
    e2e.wait_reconciles(2).await?;
    let history = e2e.recorder().history()?;
    let got_bad: Vec<&str> = history
        .iter()
        .filter(|v| v.desired.as_deref() == Some(bad.as_str()))
        .map(|v| v.name.as_str())
        .collect();
    assert!(
        got_bad.iter().all(|n| *n == "general-3"),
        "only the canary was assigned the bad config: {got_bad:?}"
    );
    let nodes = e2e.nodes().await?;
    for name in ["general-1", "general-2", "general-4"] {
        let n = &nodes[name];
        assert!(n.done_on(&good_general), "{}", n.line());
        assert_eq!(e2e.configz(name).await?["kubeAPIQPS"], 11);
    }
    // The other pools are untouched and complete.
    let readyz = e2e.readyz().await?;
    for pool in ["gpu", "infra"] {
        let p = readyz["pools"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["pool"] == pool))
            .cloned()
            .unwrap_or_default();
        assert_eq!(p["phase"], "Complete", "{pool}: {p}");
        assert_eq!(p["target"], good.target(pool), "{pool}: {p}");
    }

    e2e.finish().await
}
