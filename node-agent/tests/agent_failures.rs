//! Configs that must not end on the kubelet: rejected before the kubelet is touched, or
//! rolled back when the kubelet does not come back healthy.

mod agent_support;

use agent_support::{Harness, annotation, condition, config_with};
use kubelet_gitops_core::protocol::{CURRENT_CONFIG, MESSAGE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_the_node_rejects_leaves_the_kubelet_alone_and_says_why() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    h.start_agent(&[]);
    h.wait_node(|n| annotation(n, CURRENT_CONFIG) == Some("local"), "local")
        .await;
    let starts = h.sim.kubelet("w1").unwrap().state().starts;

    let bad = h
        .publish(
            "general",
            &config_with("imageGCHighThresholdPercent: 150\n"),
        )
        .await;
    h.assign(Some(&bad), "30s", "1h").await;
    let node = h.wait_state(&bad, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("failed to validate config: ")
            && message.contains("imageGCHighThresholdPercent"),
        "{message:?}"
    );
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    let cond = condition(&node, "KubeletConfigReady");
    assert_eq!(
        (cond["status"].as_str(), cond["reason"].as_str()),
        (Some("False"), Some("Degraded"))
    );
    assert_eq!(
        std::fs::read(h.config_file()).unwrap(),
        original,
        "file untouched"
    );
    assert_eq!(
        h.sim.kubelet("w1").unwrap().state().starts,
        starts,
        "kubelet untouched"
    );

    // A payload that does not decode is a load error, with the field and a suggestion.
    let typo = h.publish("general", &config_with("maxPod: 10\n")).await;
    h.assign(Some(&typo), "30s", "1h").await;
    let node = h.wait_state(&typo, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("failed to load config: "),
        "{message:?}"
    );
    assert!(message.contains("maxPods"), "did-you-mean: {message:?}");
    h.wait_event("KubeletConfigRejected", "failed to load config")
        .await;
    assert_eq!(std::fs::read(h.config_file()).unwrap(), original);

    // A ConfigMap that does not exist is a download failure, retried.
    let missing = "kubelet-gitops/kubelet-general-nothere";
    h.assign(Some(missing), "30s", "1h").await;
    let node = h.wait_state(missing, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("failed to sync: failed to download config: ")
            && message.contains("not found"),
        "{message:?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_the_kubelet_cannot_start_with_is_rolled_back() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    h.start_agent(&[]);
    // Valid for the kubelet's rules and the agent's pre-flight, but the kubelet cannot
    // create its pods cgroup under cgroupRoot (with the systemd driver /blocked is the
    // slice blocked.slice): something on the node is in the way.
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
    let bad = h
        .publish("general", &config_with("cgroupRoot: /blocked\n"))
        .await;
    h.assign(Some(&bad), "3s", "1h").await;
    let node = h
        .wait_node(
            |n| {
                annotation(n, kubelet_gitops_core::protocol::STATE) == Some("RolledBack")
                    && condition(n, "KubeletConfigReady")["reason"] == "RolledBack"
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("rolled back to"))
            },
            "RolledBack, finished",
        )
        .await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    // Short enough to read at 3 a.m.: the timeout, the endpoint and its one cause, the
    // kubelet's exit reason from the Node, and what was done.
    let url = format!("{}/healthz", h.kubelet_url());
    assert_eq!(
        message,
        format!(
            "kubelet did not become healthy within 3s: healthz {url}: connection refused; \
             node Ready=False: kubelet is not running: Failed to start ContainerManager: \
             failed to create \"/blocked.slice/blocked-kubepods.slice\" cgroup: \
             Not a directory (os error 20); rolled back to local"
        ),
        "no client error chain (error sending request, tcp connect error, os error 111)"
    );
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    assert_eq!(
        annotation(&node, kubelet_gitops_core::protocol::OBSERVED_CONFIG),
        Some(bad.as_str())
    );
    assert_eq!(
        condition(&node, "KubeletConfigReady")["reason"],
        "RolledBack"
    );
    assert_eq!(
        h.config_file_valid(),
        original,
        "the node's own config is back"
    );
    let k = h.sim.kubelet("w1").unwrap();
    assert!(k.is_running(), "{:?}", k.state());
    h.wait_event("KubeletConfigRolledBack", "kubelet did not become healthy")
        .await;

    // The failed config is not tried again by itself; a new one is.
    let starts = k.state().starts;
    let good = h.publish("general", &config_with("kubeAPIQPS: 9\n")).await;
    h.assign(Some(&good), "30s", "1h").await;
    h.wait_state(&good, "Done").await;
    assert_eq!(k.state().starts, starts + 1);
    assert_eq!(h.configz().await["kubeAPIQPS"], 9);
    h.shutdown().await;
}
