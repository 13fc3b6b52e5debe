//! The agent's other ways of working with a kubelet, end to end against the stand-in
//! kubelet: drop-in mode (the kubelet reads its `--config-dir`; the node's own
//! `config.yaml` is never touched), and verification without configz (healthz, and the
//! config file read back).

use crate::support::agent::{Harness, annotation, condition, config_with};
use kubelet_gitops_core::protocol::{CURRENT_CONFIG, MESSAGE, OBSERVED_CONFIG, STATE};

/// The agent's drop-in in the kubelet's `--config-dir`.
const DROP_IN: &str = "50-kubelet-gitops.conf";

/// A drop-in: a KubeletConfiguration with only the fields it changes.
fn drop_in(fields: &str) -> String {
    format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{fields}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_in_mode_adds_and_removes_its_drop_in_and_leaves_the_config_file_alone() {
    let mut h = Harness::start().await;
    let base = std::fs::read(h.config_file()).unwrap();
    let file = h.drop_in_dir().join(DROP_IN);
    assert!(!file.exists());
    h.start_agent_with(h.drop_in_args());

    let yaml = drop_in("kubeAPIQPS: 23\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    let node = h.wait_state(&cm, "Done").await;
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some(cm.as_str()));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        yaml.as_bytes(),
        "the drop-in is the payload, byte for byte"
    );
    assert_eq!(
        std::fs::read(h.config_file()).unwrap(),
        base,
        "config.yaml untouched"
    );
    let configz = h.configz().await;
    assert_eq!(configz["kubeAPIQPS"], 23, "the drop-in is merged");
    assert_eq!(
        configz["clusterDomain"], "cluster.local",
        "over the node's file"
    );
    // The node's local config in drop-in mode is "no drop-in of ours".
    assert_eq!(
        std::fs::read(h.checkpoint_dir().join("local/kubelet")).unwrap(),
        b""
    );

    // Removal: the drop-in goes, the node's file stays as it was.
    h.assign(None, "", "").await;
    h.wait_node(
        |n| annotation(n, CURRENT_CONFIG) == Some("local") && annotation(n, STATE).is_none(),
        "back on local",
    )
    .await;
    assert!(!file.exists(), "the drop-in is removed");
    assert_eq!(std::fs::read(h.config_file()).unwrap(), base);
    assert_eq!(h.configz().await["kubeAPIQPS"], 50, "the default again");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_in_mode_rolls_back_by_removing_its_drop_in() {
    let mut h = Harness::start().await;
    let base = std::fs::read(h.config_file()).unwrap();
    let file = h.drop_in_dir().join(DROP_IN);
    // The kubelet cannot create its pods cgroup under /blocked: its slice is a file.
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
    h.start_agent_with(h.drop_in_args());
    let bad = h
        .publish("general", &drop_in("cgroupRoot: /blocked\n"))
        .await;
    h.assign(Some(&bad), "3s", "1h").await;
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("RolledBack")
                    && condition(n, "KubeletConfigReady")["reason"] == "RolledBack"
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("rolled back to local"))
            },
            "RolledBack, finished",
        )
        .await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("kubelet did not become healthy within 3s: ")
            && message.contains("blocked"),
        "{message:?}"
    );
    assert_eq!(annotation(&node, OBSERVED_CONFIG), Some(bad.as_str()));
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    assert!(!file.exists(), "the failed drop-in is gone");
    assert_eq!(
        std::fs::read(h.config_file()).unwrap(),
        base,
        "config.yaml untouched throughout"
    );
    let k = h.sim.kubelet("w1").unwrap();
    assert!(k.is_running(), "{:?}", k.state());
    assert_ne!(h.configz().await["cgroupRoot"], "/blocked");
    h.shutdown().await;
}

/// The agent's options without `--configz-url`.
fn without_configz(h: &Harness) -> Vec<String> {
    h.agent_args()
        .into_iter()
        .filter(|a| !a.starts_with("--configz-url="))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_configz_a_config_is_verified_by_healthz_and_the_file_read_back() {
    let mut h = Harness::start().await;
    h.start_agent_with(without_configz(&h));
    let yaml = config_with("kubeAPIQPS: 17\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    let node = h.wait_state(&cm, "Done").await;
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some(cm.as_str()));
    assert_eq!(h.config_file_valid(), yaml.as_bytes());
    // The agent did not ask; the test does.
    assert_eq!(h.configz().await["kubeAPIQPS"], 17);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_configz_a_file_that_is_not_the_one_written_fails_verification() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    // Something on the node (a config-management run) puts its own file in place between
    // the agent's write and the kubelet's start, once. The kubelet starts fine with it,
    // so healthz alone would call the apply done.
    let theirs = h.dir.path().join("theirs.yaml");
    std::fs::write(&theirs, config_with("kubeAPIQPS: 77\n")).unwrap();
    let mark = h.dir.path().join("swapped");
    let restart = format!(
        "--restart-command=sh -c 'if [ ! -e {mark} ]; then touch {mark}; cp {theirs} {config}; fi; curl -fsS -X POST {sim}/sim/v1/nodes/w1/kubelet/restart >/dev/null'",
        mark = mark.display(),
        theirs = theirs.display(),
        config = h.config_file().display(),
        sim = h.sim.url(),
    );
    let args: Vec<String> = without_configz(&h)
        .into_iter()
        .map(|a| {
            if a.starts_with("--restart-command=") {
                restart.clone()
            } else {
                a
            }
        })
        .collect();
    h.start_agent_with(args);
    let cm = h.publish("general", &config_with("kubeAPIQPS: 19\n")).await;
    h.assign(Some(&cm), "5s", "1h").await;
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("RolledBack")
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("rolled back to local"))
            },
            "RolledBack, finished",
        )
        .await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    let expected = format!(
        "kubelet did not become healthy within 5s: {} read back is not the config written",
        h.config_file().display()
    );
    assert!(message.starts_with(&expected), "{message:?}");
    assert!(mark.exists(), "the swap happened");
    assert_eq!(
        h.config_file_valid(),
        original,
        "the node's own config is back"
    );
    assert_eq!(h.configz().await["kubeAPIQPS"], 50);
    h.shutdown().await;
}
