//! `kubelet-gitops status` against the simulated cluster, as an operator runs it: the
//! built binary with the sim's kubeconfig, while a reconciler and the agent double roll
//! out. `--wait`'s exit codes (0 complete, 1 halted, 3 timeout), `-o json`, `status
//! node`, and the kubectl plugin through the real kubectl when it is installed.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use crate::support::commands::{bin, success_stdout, text};
use crate::support::*;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::protocol::{MESSAGE, STATE};
use serde_json::{Value, json};

/// `kubelet-gitops status ARGS --kubeconfig <the sim's>`, run off the async runtime.
async fn status(kubeconfig: &Path, args: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.arg("status")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env_remove("COLUMNS");
    tokio::task::spawn_blocking(move || cmd.output().expect("run kubelet-gitops status"))
        .await
        .unwrap()
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn both(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Every pool has at least one node told to run `configmaps`' config of it.
fn started(nodes: &[Value], configmaps: &[String]) -> bool {
    configmaps
        .iter()
        .all(|cm| nodes.iter().any(|n| desired_name(n).as_ref() == Some(cm)))
}

fn pool_configmaps(h: &Harness, commit: &str) -> Vec<String> {
    h.configmaps()
        .iter()
        .filter(|c| c["metadata"]["annotations"]["kubelet-gitops.io/source-commit"] == commit)
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_exits_0_once_every_pool_is_complete() {
    let h = Harness::with_agent(
        Inventory::generate(12, &["a", "b"]),
        AgentOptions {
            apply_delay: Duration::from_millis(150),
            ..AgentOptions::default()
        },
    )
    .await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 1, canary: 1", "    maxPods: 60\n"),
        ("b", "maxUnavailable: 2, canary: 1", "    maxPods: 70\n"),
    ]);
    h.repo.commit("first");
    let r = h.reconciler(h.run_config("r1")).await;
    h.wait_nodes("every node Done", LONG, |n| n.iter().all(settled_done))
        .await;
    let kubeconfig = h.sim.kubeconfig_path().to_path_buf();

    let out = status(&kubeconfig, &[]).await;
    let table = success_stdout(&out);
    assert!(table.starts_with("POOL  PHASE     COMMIT"), "{table}");
    assert!(table.contains("[####################] 6/6"), "{table}");
    assert!(!table.contains("NODE"), "every node is Done: {table}");

    // The next commit: --wait, started once each pool's rollout has begun, returns 0
    // only when every node runs the new config.
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 1, canary: 1", "    maxPods: 61\n"),
        ("b", "maxUnavailable: 2, canary: 1", "    maxPods: 71\n"),
    ]);
    let second = h.repo.commit("second");
    let cms = eventually("the second commit's ConfigMaps", LONG, || {
        let cms = pool_configmaps(&h, &second);
        if cms.len() == 2 {
            Ok(cms)
        } else {
            Err(format!("{cms:?}"))
        }
    })
    .await;
    h.wait_nodes("both rollouts begun", LONG, |n| started(n, &cms))
        .await;
    let during = status(&kubeconfig, &["-o", "json"]).await;
    let during: Value = serde_json::from_str(&success_stdout(&during)).unwrap();
    for p in during["pools"].as_array().unwrap() {
        assert!(
            ["canary", "rolling", "waiting", "complete"].contains(&p["phase"].as_str().unwrap()),
            "{p}"
        );
        assert_eq!(p["commit"], second.as_str(), "{p}");
    }
    let out = status(&kubeconfig, &["--wait", "--timeout", "80s"]).await;
    assert_eq!(code(&out), Some(0), "{}", both(&out));
    let nodes = h.nodes();
    assert!(
        nodes.iter().all(settled_done)
            && started(&nodes, &cms)
            && nodes
                .iter()
                .all(|n| cms.contains(&desired_name(n).unwrap())),
        "--wait returned before the rollout finished:\n{}",
        summary(&nodes)
    );
    let last = text(&out.stdout);
    assert!(last.contains("a     complete"), "{last}");
    assert!(last.contains("b     complete"), "{last}");

    // Right after a merge, with the commit a pipeline just pushed: --wait --commit
    // returns 0 only once the reconciler applies that commit and every pool is complete
    // on it (the reconciler's rollout record says which commit it applies).
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 1, canary: 1", "    maxPods: 62\n"),
        ("b", "maxUnavailable: 2, canary: 1", "    maxPods: 72\n"),
    ]);
    let third = h.repo.commit("third");
    let out = status(
        &kubeconfig,
        &[
            "--wait",
            "--commit",
            &third[..12],
            "--timeout",
            "80s",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code(&out), Some(0), "{}", both(&out));
    let third_cms = pool_configmaps(&h, &third);
    assert_eq!(third_cms.len(), 2, "{third_cms:?}");
    let nodes = h.nodes();
    assert!(
        nodes
            .iter()
            .all(|n| settled_done(n) && third_cms.contains(&desired_name(n).unwrap())),
        "--wait --commit returned before the third commit was rolled out:\n{}",
        summary(&nodes)
    );
    let done: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(done["appliedCommit"], third.as_str(), "{done}");
    // A commit the reconciler never applies: the timeout.
    let out = status(
        &kubeconfig,
        &["--wait", "--commit", "0000000", "--timeout", "2s"],
    )
    .await;
    assert_eq!(code(&out), Some(3), "{}", both(&out));
    // --commit only with --wait.
    let out = status(&kubeconfig, &["--commit", "0000000"]).await;
    assert_eq!(code(&out), Some(2), "{}", both(&out));
    h.finish(r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_halted_pool_in_status_json_node_wait_and_kubectl() {
    let h = Harness::with_agent(
        Inventory::generate(8, &["good", "bad"]),
        AgentOptions {
            fail_message: Some("kubelet did not become healthy:\n\u{1b}[2J healthz failed".into()),
            ..AgentOptions::rolling_back("maxPods: 13")
        },
    )
    .await;
    h.repo.settings_and_pools(&[
        ("good", "maxUnavailable: 2", "    maxPods: 60\n"),
        ("bad", "maxUnavailable: 4, canary: 1", "    maxPods: 13\n"),
    ]);
    let commit = h.repo.commit("bad pool");
    let r = h.reconciler(h.run_config("r1")).await;
    let kubeconfig = h.sim.kubeconfig_path().to_path_buf();
    h.wait_nodes("the bad pool's canary assigned", LONG, |nodes| {
        nodes
            .iter()
            .any(|n| pool_of(n) == Some("bad") && desired_name(n).is_some())
    })
    .await;

    let out = status(&kubeconfig, &["--wait", "--timeout", "80s"]).await;
    assert_eq!(code(&out), Some(1), "a halted pool: {}", both(&out));
    h.wait_nodes("the good pool Done", LONG, |nodes| {
        nodes
            .iter()
            .filter(|n| pool_of(n) == Some("good"))
            .all(settled_done)
    })
    .await;
    let out = status(&kubeconfig, &["good", "--wait", "--timeout", "80s"]).await;
    assert_eq!(code(&out), Some(0), "only the good pool: {}", both(&out));

    // A pool that never shows up: the timeout's own code, in about the time given.
    let started = std::time::Instant::now();
    let out = status(&kubeconfig, &["nosuch", "--wait", "--timeout", "1s"]).await;
    assert_eq!(code(&out), Some(3), "{}", both(&out));
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(text(&out.stderr).contains("timed out"), "{}", both(&out));
    let out = status(&kubeconfig, &["nosuch"]).await;
    assert_eq!(code(&out), Some(2), "{}", both(&out));

    // -o json: the documented structure.
    let out = status(&kubeconfig, &["-o", "json"]).await;
    let v: Value = serde_json::from_str(&success_stdout(&out)).unwrap();
    assert_eq!(v["kind"], "KubeletGitopsStatus");
    assert_eq!(v["version"], 1);
    assert!(v["time"].as_str().unwrap().ends_with('Z'));
    let pools = v["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2);
    let bad = &pools[0];
    assert_eq!(bad["pool"], "bad");
    assert_eq!(bad["phase"], "halted");
    assert_eq!(bad["commit"], commit.as_str());
    assert_eq!(bad["sourcePath"], "pools/bad.yaml");
    assert!(
        bad["configMap"]
            .as_str()
            .unwrap()
            .starts_with("kubelet-gitops/kubelet-bad-")
    );
    // Only the canary carries the pool's annotations; the reconciler's rollout record
    // says the pool has 4 nodes, the 3 not reached yet waiting.
    assert_eq!(bad["nodes"]["total"], 4, "{bad}");
    assert_eq!(bad["nodes"]["waiting"], 3, "{bad}");
    assert_eq!(bad["nodes"]["failed"], 1);
    let failed = &bad["notDone"][0];
    assert_eq!(failed["progress"], "failed");
    assert_eq!(failed["state"], "RolledBack");
    assert!(
        failed["message"].as_str().unwrap().contains('\u{1b}'),
        "json keeps the text as written"
    );
    let failed_node = failed["node"].as_str().unwrap().to_string();
    let good = &pools[1];
    assert_eq!(good["phase"], "complete");
    assert_eq!(good["nodes"]["done"], 4);
    assert_eq!(good["notDone"], json!([]));

    // The table: escaped, cut to COLUMNS.
    let mut cmd = bin();
    cmd.args(["status", "--kubeconfig"])
        .arg(&kubeconfig)
        .env("COLUMNS", "70");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let table = success_stdout(&out);
    assert!(!table.contains('\u{1b}'), "{table}");
    assert!(table.lines().all(|l| l.chars().count() <= 70), "{table}");
    assert!(
        table.contains("  bad   RolledBack  -    kubelet did not become healthy:\\n\\u{1b}"),
        "{table}"
    );

    // status node: the configs with their commits, the condition and the agent's Events.
    let client = client(&h.sim, "test").await;
    let nodes: Api<Node> = Api::all(client.clone());
    let condition = json!({"status": {"conditions": [{
        "type": "KubeletConfigReady", "status": "False", "reason": "RolledBack",
        "message": "rolled back", "lastTransitionTime": "2026-01-01T09:00:00Z",
        "lastHeartbeatTime": "2026-01-01T09:00:00Z"}]}});
    nodes
        .patch_status(
            &failed_node,
            &PatchParams::default(),
            &Patch::Merge(&condition),
        )
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(client, "default");
    for (name, component, reason) in [
        ("e1", "kubelet-gitops-agent", "RolledBack"),
        ("e2", "kubelet", "NodeReady"),
    ] {
        let ev: Event = serde_json::from_value(json!({
            "metadata": {"name": format!("{failed_node}.{name}"), "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": failed_node, "apiVersion": "v1"},
            "reason": reason, "message": "the kubelet did not come back", "type": "Warning",
            "source": {"component": component}, "reportingComponent": component,
            "lastTimestamp": "2026-01-01T09:00:00Z", "count": 1,
        }))
        .unwrap();
        events.create(&PostParams::default(), &ev).await.unwrap();
    }
    let out = status(&kubeconfig, &["node", &failed_node]).await;
    let text_out = success_stdout(&out);
    let short = &commit[..7];
    assert!(
        text_out.contains("Desired:         kubelet-gitops/kubelet-bad-"),
        "{text_out}"
    );
    assert!(
        text_out.contains(&format!("(commit {short}, pools/bad.yaml)")),
        "{text_out}"
    );
    assert!(
        text_out.contains("Condition:       KubeletConfigReady=False RolledBack"),
        "{text_out}"
    );
    assert!(
        text_out.contains("RolledBack  the kubelet did not come back"),
        "{text_out}"
    );
    assert!(
        !text_out.contains("NodeReady"),
        "only the agent's Events: {text_out}"
    );
    let out = status(&kubeconfig, &["node", &failed_node, "-o", "json"]).await;
    let v: Value = serde_json::from_str(&success_stdout(&out)).unwrap();
    assert_eq!(v["kind"], "KubeletGitopsNodeStatus");
    assert_eq!(v["pool"], "bad");
    assert_eq!(v["state"], "RolledBack");
    assert_eq!(v["desired"]["commit"], commit.as_str());
    assert_eq!(
        v["current"],
        Value::Null,
        "the agent double never wrote current-config"
    );
    assert_eq!(v["condition"]["reason"], "RolledBack");
    assert_eq!(v["events"].as_array().unwrap().len(), 1);
    let out = status(&kubeconfig, &["node", "no-such-node"]).await;
    assert_eq!(code(&out), Some(2), "{}", both(&out));

    kubectl_plugin(&h, &kubeconfig).await;
    let n = h
        .nodes()
        .into_iter()
        .find(|n| name(n) == failed_node)
        .unwrap();
    assert_eq!(ann(&n, STATE), Some("RolledBack"));
    assert!(ann(&n, MESSAGE).is_some());
    h.finish(r).await;
}

/// `kubectl kubelet-gitops status` through the real kubectl, with the binary linked as
/// `kubectl-kubelet_gitops` on PATH (docs/operations.md's install line). Skipped, saying
/// so, where kubectl is not installed.
async fn kubectl_plugin(h: &Harness, kubeconfig: &Path) {
    let Some(kubectl) = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        eprintln!("kubectl not installed: the plugin test is skipped");
        return;
    };
    let plugins = h.dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_kubelet-gitops"),
        plugins.join("kubectl-kubelet_gitops"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        plugins.display(),
        kubectl.parent().unwrap().display()
    );
    let run = |args: Vec<String>| {
        let mut c = std::process::Command::new(kubectl);
        c.args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("COLUMNS");
        async move {
            tokio::task::spawn_blocking(move || c.output().unwrap())
                .await
                .unwrap()
        }
    };
    let out = run(vec!["plugin".into(), "list".into()]).await;
    let list = text(&out.stdout);
    assert!(list.contains("kubectl-kubelet_gitops"), "{}", both(&out));
    // The kubeconfig from $KUBECONFIG, as kubectl's own commands read it.
    let out = run(["kubelet-gitops", "status", "-o", "json"]
        .map(String::from)
        .to_vec())
    .await;
    let v: Value = serde_json::from_str(&success_stdout(&out)).unwrap();
    assert_eq!(v["pools"][0]["phase"], "halted");
    let out = run(["kubelet-gitops", "status", "--help"]
        .map(String::from)
        .to_vec())
    .await;
    assert!(
        success_stdout(&out).contains("Usage: kubectl kubelet-gitops status"),
        "{}",
        both(&out)
    );
}
