//! `kubelet-gitops-agent --log-format json`, the built binary against the simulated
//! cluster: every line of its log is a JSON object with no key twice, read strictly
//! ([`parse_json_line`]; serde_json alone keeps the last of two keys). The run goes
//! through an apply, a drift restored, a rollback and a shutdown.

use std::process::Stdio;

use kubelet_gitops_core::logging::parse_json_line;
use kubelet_gitops_core::protocol::MESSAGE;
use serde_json::{Map, Value};
use tokio::process::Command;

use crate::support::agent::{Harness, annotation, config_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_of_the_agents_json_log_has_each_key_once() {
    let h = Harness::start().await;
    let log_path = h.dir.path().join("agent.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut agent = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops-agent"))
        .args(&h.agent_args()[1..])
        .arg("--log-format=json")
        .env("KUBELET_GITOPS_LOG", "info,node_agent=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("agent starts");

    // An apply.
    let yaml = config_with("kubeAPIQPS: 21\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    h.wait_state(&cm, "Done").await;
    // A drift, restored.
    let edited = config_with("kubeAPIQPS: 99\n");
    kubelet_gitops_core::atomic::write_atomic(&h.config_file(), edited.as_bytes()).unwrap();
    h.wait_node(
        |n| annotation(n, MESSAGE).is_some_and(|m| m.contains("was changed on the node")),
        "drift restored",
    )
    .await;
    // A config the kubelet cannot start with (its cgroup's slice is a file): rolled back.
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
    let bad = h
        .publish("general", &config_with("cgroupRoot: /blocked\n"))
        .await;
    h.assign(Some(&bad), "2s", "1h").await;
    h.wait_state(&bad, "RolledBack").await;

    let pid = agent.id().expect("running").to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(term.success());
    agent.wait().await.unwrap();

    let text = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<Map<String, Value>> = text
        .lines()
        .map(|line| parse_json_line(line).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let find = |message: &str| {
        lines
            .iter()
            .find(|l| l["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} in\n{text}"))
    };
    let starting = find("kubelet-gitops-agent starting");
    assert_eq!(
        starting["config_file"],
        h.config_file().display().to_string(),
        "{starting:?}"
    );
    assert_eq!(starting["target"], "node_agent::agent");
    let drift = find("drift");
    assert!(
        drift["detail"]
            .as_str()
            .is_some_and(|d| d.contains("was changed on the node")),
        "{drift:?}"
    );
    h.shutdown().await;
}
