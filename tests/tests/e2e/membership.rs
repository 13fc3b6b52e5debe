//! Scenario 6, nodes join and leave pools: a node relabelled into another pool gets that
//! pool's config; a node whose pool label is removed leaves every pool and returns to
//! its own local config; a new node (a stand-in kubelet started as its own process,
//! registering its Node with a pool label, with an agent of its own) gets its pool's
//! config at once, outside the canary and maxUnavailable.

use kubelet_gitops_e2e::{Backend, E2e, E2eError, Options, POOL_LABEL, both_backends};

both_backends!(relabelled_nodes_follow_their_pool_and_unlabelled_ones_return_to_local);

async fn relabelled_nodes_follow_their_pool_and_unlabelled_ones_return_to_local(
    backend: Backend,
) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("relabel", Options::on(backend)).await? else {
        return Ok(());
    };
    let converged = e2e.wait_converged().await?;
    let gpu = converged.target("gpu").to_string();

    // general-2 moves to gpu.
    e2e.label_node("general-2", POOL_LABEL, Some("gpu")).await?;
    e2e.wait_nodes("general-2 Done on gpu's config", |nodes| {
        nodes
            .get("general-2")
            .filter(|n| n.done_on(&gpu))
            .map(|_| ())
    })
    .await?;
    assert_eq!(e2e.configz("general-2").await?["kubeAPIQPS"], 21);
    let moved = e2e.wait_converged().await?;
    assert_eq!(moved.targets, converged.targets, "no pool's config changed");
    let readyz = e2e.readyz().await?;
    let nodes_of = |pool: &str| {
        readyz["pools"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["pool"] == pool))
            .map(|p| p["nodes"].clone())
            .unwrap_or_default()
    };
    assert_eq!(nodes_of("gpu"), 3, "{readyz}");
    assert_eq!(nodes_of("general"), 3, "{readyz}");

    // Without a pool label it is in no pool: back to the node's own config file.
    e2e.label_node("general-2", POOL_LABEL, None).await?;
    let local = e2e
        .wait_nodes("general-2 back on its local config", |nodes| {
            nodes.get("general-2").filter(|n| n.on_local()).cloned()
        })
        .await?;
    let k = e2e.kubelet("general-2")?;
    assert_eq!(k.config()?, k.local_config, "the node's own file is back");
    assert!(
        local.observed.is_none() && local.message.is_none(),
        "{}",
        local.line()
    );
    let configz = e2e.configz("general-2").await?;
    assert_eq!(configz["kubeAPIQPS"], 50, "the kubelet's default again");

    e2e.finish().await
}

both_backends!(a_node_that_joins_gets_its_pools_config_at_once);

async fn a_node_that_joins_gets_its_pools_config_at_once(backend: Backend) -> Result<(), E2eError> {
    let Some(mut e2e) = E2e::start("join", Options::on(backend)).await? else {
        return Ok(());
    };
    let converged = e2e.wait_converged().await?;
    let gpu = converged.target("gpu").to_string();

    e2e.add_node("gpu-3", "gpu").await?;
    e2e.wait_nodes("the new node Done on gpu's config", |nodes| {
        nodes.get("gpu-3").filter(|n| n.done_on(&gpu)).map(|_| ())
    })
    .await?;
    assert_eq!(e2e.configz("gpu-3").await?["kubeAPIQPS"], 21);
    let assigned: Vec<String> = e2e
        .reconciler_log_events("node assigned")
        .iter()
        .filter(|e| e["node"] == "gpu-3")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(assigned, ["new node"], "assigned as a new node, once");
    let after = e2e.wait_converged().await?;
    assert_eq!(after.targets, converged.targets);

    e2e.finish().await
}
