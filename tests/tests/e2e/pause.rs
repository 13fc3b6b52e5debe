//! Scenario 4, pause: with `paused: true` committed on a pool, a later config change is
//! published but assigns nothing in that pool (while another pool changed by the same
//! commit rolls out); committing `paused: false` rolls it out, canary first.

use kubelet_gitops_e2e::{Backend, E2e, E2eError, Options, both_backends, trace_rollout};

both_backends!(a_paused_pool_assigns_nothing_until_unpaused);

async fn a_paused_pool_assigns_nothing_until_unpaused(backend: Backend) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("pause", Options::on(backend)).await? else {
        return Ok(());
    };
    let before = e2e.wait_converged().await?;

    let mut gpu = e2e.pool("gpu")?;
    gpu.rollout = vec!["paused: true".into()];
    e2e.write_pool(&gpu)?;
    e2e.git().commit_and_push("pause gpu").await?;
    // Same config: nothing to roll out, every pool stays complete.
    let paused = e2e.wait_converged().await?;
    assert_eq!(paused.targets, before.targets);

    gpu.qps = 22;
    e2e.write_pool(&gpu)?;
    let mut general = e2e.pool("general")?;
    general.qps = 12;
    e2e.write_pool(&general)?;
    e2e.git()
        .commit_and_push("gpu and general: new kubeAPIQPS")
        .await?;
    let targets = e2e.wait_applied().await?;
    let gpu_new = targets["gpu"].clone();
    assert_ne!(gpu_new, before.target("gpu"));
    // general rolls out; gpu's ConfigMap is published, and the pool waits.
    e2e.wait_pool_phase("general", "Complete").await?;
    let gpu_report = e2e.wait_pool_phase("gpu", "Paused").await?;
    assert_eq!(gpu_report["target"], gpu_new.as_str(), "{gpu_report}");
    e2e.configmap(gpu_new.rsplit('/').next().unwrap_or_default())
        .await?;
    e2e.wait_reconciles(2).await?;
    let history = e2e.recorder().history()?;
    let assigned: Vec<&str> = history
        .iter()
        .filter(|v| v.desired.as_deref() == Some(gpu_new.as_str()))
        .map(|v| v.name.as_str())
        .collect();
    assert!(assigned.is_empty(), "paused gpu assigned {assigned:?}");
    for node in e2e.pool_nodes("gpu") {
        assert_eq!(
            e2e.configz(&node).await?["kubeAPIQPS"],
            21,
            "{node} kept its config"
        );
    }
    for node in e2e.pool_nodes("general") {
        assert_eq!(
            e2e.configz(&node).await?["kubeAPIQPS"],
            12,
            "{node} rolled out"
        );
    }

    gpu.rollout.clear();
    e2e.write_pool(&gpu)?;
    e2e.git().commit_and_push("unpause gpu").await?;
    let after = e2e.wait_converged().await?;
    assert_eq!(
        after.target("gpu"),
        gpu_new,
        "the same content, the same ConfigMap"
    );
    for node in e2e.pool_nodes("gpu") {
        assert_eq!(
            e2e.configz(&node).await?["kubeAPIQPS"],
            22,
            "{node} rolled out"
        );
    }
    let trace = trace_rollout(&e2e.recorder().history()?, "gpu", &gpu_new, &["gpu-1"]);
    assert_eq!(trace.assigned, ["gpu-1", "gpu-2"], "{trace:?}");
    assert!(trace.assigned_before_canary_done.is_empty(), "{trace:?}");

    e2e.finish().await
}
