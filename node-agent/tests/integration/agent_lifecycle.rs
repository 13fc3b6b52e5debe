//! After an apply: last-known-good promotion, the return to the local config, and a
//! hand-edited config file restored.

use crate::support::agent::{Harness, annotation, config_with};
use kubelet_gitops_core::protocol::{
    CURRENT_CONFIG, LAST_KNOWN_GOOD, MESSAGE, OBSERVED_CONFIG, STATE,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_config_becomes_last_known_good_after_the_grace_and_removal_returns_to_local() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    h.start_agent(&[]);
    let cm = h.publish("general", &config_with("kubeAPIQPS: 11\n")).await;
    h.assign(Some(&cm), "30s", "2s").await;
    h.wait_state(&cm, "Done").await;
    let node = h
        .wait_node(
            |n| annotation(n, LAST_KNOWN_GOOD) == Some(cm.as_str()),
            "promoted",
        )
        .await;
    assert_eq!(annotation(&node, STATE), Some("Done"));
    h.wait_event("KubeletConfigLastKnownGoodUpdated", &cm).await;
    let lkg_meta =
        std::fs::read_to_string(h.checkpoint_dir().join("meta/last-known-good")).unwrap();
    assert!(
        lkg_meta.contains(cm.split_once('/').unwrap().1),
        "{lkg_meta}"
    );

    // Desired removed: back to the node's own file, our state annotations cleared.
    h.assign(None, "", "").await;
    let node = h
        .wait_node(
            |n| annotation(n, CURRENT_CONFIG) == Some("local") && annotation(n, STATE).is_none(),
            "back on local",
        )
        .await;
    assert_eq!(annotation(&node, OBSERVED_CONFIG), None);
    assert_eq!(annotation(&node, MESSAGE), None);
    assert_eq!(
        annotation(&node, LAST_KNOWN_GOOD),
        Some(cm.as_str()),
        "last-known-good stays until local has been healthy for the grace"
    );
    assert_eq!(h.config_file_valid(), original);
    assert_eq!(
        h.configz().await["kubeAPIQPS"],
        50,
        "the kubelet's default again"
    );
    h.wait_event("KubeletConfigLocal", "").await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_changed_by_hand_is_reported_and_restored() {
    let mut h = Harness::start().await;
    h.start_agent(&[]);
    let yaml = config_with("kubeAPIQPS: 13\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    h.wait_state(&cm, "Done").await;

    // Someone edits the file on the node (atomically, as an editor saving would).
    let edited = config_with("kubeAPIQPS: 99\n");
    kubelet_gitops_core::atomic::write_atomic(&h.config_file(), edited.as_bytes()).unwrap();
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("Done")
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("was changed on the node"))
            },
            "drift restored",
        )
        .await;
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some(cm.as_str()));
    assert_eq!(
        h.config_file_valid(),
        yaml.as_bytes(),
        "restored byte for byte"
    );
    h.wait_event("KubeletConfigDrift", "restoring").await;
    assert_eq!(h.configz().await["kubeAPIQPS"], 13);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_leaves_the_kubelet_alone_until_it_is_back() {
    use k8s_openapi::api::core::v1::Node;
    use kube::Api;
    use kube::api::{DeleteParams, PostParams};

    // Alone: it looks at the node between two of the agent's writes, a window that the
    // fsyncs of tests beside it would widen.
    let mut h = Harness::start_alone().await;
    h.start_agent(&[]);
    let yaml = config_with("kubeAPIQPS: 15\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    h.wait_state(&cm, "Done").await;
    // The Done report is the annotations, then the condition, then an Event: all of it
    // is written before the writes are counted.
    h.wait_event("KubeletConfigApplied", &cm).await;
    let labels = h.node()["metadata"]["labels"].clone();

    let nodes: Api<Node> = Api::all(h.client.clone());
    nodes
        .delete(crate::support::NODE, &DeleteParams::default())
        .await
        .expect("node deleted");
    let log = h.sim.request_log();
    let writes = || {
        [
            log.count("patch", "nodes"),
            log.count("patch", "nodes/status"),
            log.count("create", "events"),
        ]
    };
    let before = writes();
    let kubelet = h.sim.kubelet("w1").unwrap();
    let starts = kubelet.state().starts;
    // While the Node is gone the file drifts: nothing may be restored, restarted or
    // reported (there is nothing to report to), over several resync intervals (1s).
    let edited = config_with("kubeAPIQPS: 99\n");
    kubelet_gitops_core::atomic::write_atomic(&h.config_file(), edited.as_bytes()).unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(h.agent_running(), "the agent keeps running");
    assert_eq!(kubelet.state().starts, starts, "the kubelet is left alone");
    assert_eq!(std::fs::read(h.config_file()).unwrap(), edited.as_bytes());
    assert_eq!(writes(), before, "no writes for a Node that does not exist");

    // The Node registers again (a new object of the same name) and the reconciler
    // assigns it its pool's config: the agent goes on with it and restores the drift.
    let again: Node = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": crate::support::NODE,
            "labels": labels,
            "annotations": {
                kubelet_gitops_core::protocol::DESIRED_CONFIG: cm,
                kubelet_gitops_core::protocol::HEALTH_TIMEOUT: "30s",
                kubelet_gitops_core::protocol::LKG_GRACE: "1h",
            },
        },
    }))
    .unwrap();
    nodes
        .create(&PostParams::default(), &again)
        .await
        .expect("node created");
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("Done")
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("was changed on the node"))
            },
            "Done on the new Node, drift restored",
        )
        .await;
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some(cm.as_str()));
    assert_eq!(h.config_file_valid(), yaml.as_bytes());
    assert_eq!(kubelet.state().starts, starts + 1);
    assert_eq!(h.configz().await["kubeAPIQPS"], 15);
    h.shutdown().await;
}

/// While the node runs its local config, its file is its owner's: a change (a kubeadm
/// upgrade) is not drift but the new original, which a later return to local brings back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_saved_local_config_follows_the_node_file_while_the_node_runs_it() {
    // Alone: it looks at the node between two of the agent's writes, a window that the
    // fsyncs of tests beside it would widen.
    let mut h = Harness::start_alone().await;
    let original = std::fs::read_to_string(h.config_file()).unwrap();
    let saved = h.checkpoint_dir().join("local/kubelet");
    h.start_agent(&[]);
    let first = h.publish("general", &config_with("kubeAPIQPS: 11\n")).await;
    h.assign(Some(&first), "30s", "1h").await;
    h.wait_state(&first, "Done").await;
    assert_eq!(std::fs::read_to_string(&saved).unwrap(), original);
    h.assign(None, "", "").await;
    h.wait_node(
        |n| annotation(n, CURRENT_CONFIG) == Some("local") && annotation(n, STATE).is_none(),
        "back on local",
    )
    .await;

    // kubeadm upgrade rewrites the node's own file and restarts the kubelet.
    let upgraded = format!("{original}kubeAPIBurst: 77\n");
    kubelet_gitops_core::atomic::write_atomic(&h.config_file(), upgraded.as_bytes()).unwrap();
    let starts = {
        let k = h.sim.kubelet("w1").unwrap();
        k.restart().await;
        k.state().starts
    };
    let deadline = std::time::Instant::now() + crate::support::agent::PATIENCE;
    // The refresh is complete when its `.next` record is gone (written first, removed last).
    let in_progress = h.checkpoint_dir().join("local/kubelet.next.sha256");
    while std::fs::read_to_string(&saved).ok().as_deref() != Some(upgraded.as_str())
        || in_progress.exists()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the saved local config was never refreshed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let sha = std::fs::read_to_string(h.checkpoint_dir().join("local/kubelet.sha256")).unwrap();
    assert_eq!(
        sha,
        format!(
            "{}  kubelet\n",
            node_agent::checkpoint::sha256_hex(upgraded.as_bytes())
        )
    );
    // Not drift: the file is left as it is, the kubelet alone, no Event.
    assert_eq!(std::fs::read_to_string(h.config_file()).unwrap(), upgraded);
    assert_eq!(h.sim.kubelet("w1").unwrap().state().starts, starts);
    let events = h.events().await;
    assert!(
        !events.iter().any(|(r, _)| r == "KubeletConfigDrift"),
        "{events:?}"
    );

    // A later apply and return to local bring back the upgraded file, not the original.
    let second = h.publish("general", &config_with("kubeAPIQPS: 12\n")).await;
    h.assign(Some(&second), "30s", "1h").await;
    h.wait_state(&second, "Done").await;
    h.assign(None, "", "").await;
    h.wait_node(
        |n| annotation(n, CURRENT_CONFIG) == Some("local") && annotation(n, STATE).is_none(),
        "back on local again",
    )
    .await;
    assert_eq!(std::fs::read_to_string(h.config_file()).unwrap(), upgraded);
    assert_eq!(h.configz().await["kubeAPIBurst"], 77);
    h.shutdown().await;
}
