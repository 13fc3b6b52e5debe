//! `kubelet-gitops run --log-format json`, the built binary against the simulated cluster
//! (and the agent double): every line of its log is a JSON object with no key twice,
//! read strictly ([`parse_json_line`]); serde_json alone would keep the last of two
//! `"target"`s and lose the ConfigMap. The run goes through the events that carry the most
//! fields: a commit rolled out to completion in one pool and halted by a rollback in the
//! other, a commit that does not validate, and a shutdown.

use std::process::Stdio;
use std::time::{Duration, Instant};

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::logging::parse_json_line;
use serde_json::{Map, Value};

use crate::support::commands::bin;
use crate::support::{AgentOptions, Harness, LONG, settled_done};

/// The log's lines, each read strictly; panics on the first that is not a JSON object or
/// has a key twice.
fn strict_lines(log: &str) -> Vec<Map<String, Value>> {
    log.lines()
        .map(|line| parse_json_line(line).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_of_the_reconcilers_json_log_has_each_key_once() {
    let h = Harness::with_agent(
        Inventory::generate(4, &["a", "b"]),
        AgentOptions::rolling_back("maxPods: 13"),
    )
    .await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 2, canary: 0", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 1", "    maxPods: 13\n"),
    ]);
    h.repo.commit("a rolls out, b rolls back");
    let log_path = h.dir.path().join("reconciler.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = tokio::process::Command::new(bin().get_program())
        .arg("run")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("KUBELET_GITOPS_REPO_URL", h.repo.url())
        .env("KUBELET_GITOPS_KUBECONFIG", h.sim.kubeconfig_path())
        .env("KUBELET_GITOPS_CACHE_DIR", h.dir.path().join("cache"))
        .env("KUBELET_GITOPS_ADMIN_ADDR", "127.0.0.1:0")
        .env("KUBELET_GITOPS_INTERVAL", "300ms")
        .env("KUBELET_GITOPS_LOG_FORMAT", "json")
        .env("KUBELET_GITOPS_LOG", "info,reconciler=debug")
        .env("KUBELET_GITOPS_IDENTITY", "json-logs")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("start kubelet-gitops run");

    // Pool a completes; pool b's canary rolls back, which halts the pool.
    h.wait_nodes("a Done, b's canary rolled back", LONG, |nodes| {
        let a_done = nodes
            .iter()
            .filter(|n| crate::support::pool_of(n) == Some("a"))
            .all(settled_done);
        let b_back = nodes.iter().any(|n| {
            crate::support::ann(n, kubelet_gitops_core::protocol::STATE) == Some("RolledBack")
        });
        a_done && b_back
    })
    .await;
    let halted = |lines: &[Map<String, Value>]| {
        lines.iter().any(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("rollout halted"))
        })
    };
    let deadline = Instant::now() + LONG;
    while !halted(&strict_lines(&std::fs::read_to_string(&log_path).unwrap())) {
        assert!(Instant::now() < deadline, "the halt was never logged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A commit that does not validate, then the shutdown.
    h.repo.pool("a", "maxUnavailable: 2", "    maxPodz: 61\n");
    h.repo.commit("typo");
    let rejected = |lines: &[Map<String, Value>]| {
        lines.iter().any(|l| {
            l.values()
                .any(|v| v.as_str().is_some_and(|s| s.contains("maxPodz")))
        })
    };
    while !rejected(&strict_lines(&std::fs::read_to_string(&log_path).unwrap())) {
        assert!(
            Instant::now() < deadline,
            "the invalid commit was never logged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().await.unwrap();
    assert!(status.success(), "{status:?}");

    let lines = strict_lines(&std::fs::read_to_string(&log_path).unwrap());
    let complete = lines
        .iter()
        .find(|l| l["message"] == "rollout complete")
        .expect("rollout complete is logged");
    assert_eq!(complete["pool"], "a");
    assert!(
        complete["configmap"]
            .as_str()
            .is_some_and(|c| c.starts_with("kubelet-gitops/kubelet-a-")),
        "the ConfigMap keeps its own key: {complete:?}"
    );
    assert_eq!(complete["target"], "reconciler::controller::reconcile");
    assert!(lines.iter().any(|l| l["message"] == "shutting down"));
    h.shutdown().await;
}
