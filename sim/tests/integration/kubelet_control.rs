//! Controlling stand-in kubelets from outside: the control endpoints on the API server,
//! the `restart-kubelet` command, and a stand-in kubelet running as its own process.

use std::process::Stdio;
use std::time::Duration;

use crate::support::kubelet::{CONFIG_HEAD, get, node, start, wait_ready_status};
use kubelet_gitops_sim::kubelet::{HttpTarget, KubeletPhase};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_kubelet-gitops-sim");

const INVENTORY: &str = "\
nodes:
  - name: w1
    capacity: {cpu: \"4\", memory: 8Gi, ephemeral-storage: 20Gi, pods: \"30\"}
  - name: w2
    capacity: {cpu: \"4\", memory: 8Gi, ephemeral-storage: 20Gi, pods: \"30\"}
";

async fn call(url: &str, method: &str, path: &str) -> (u16, Value) {
    let t = HttpTarget::parse(url).unwrap();
    let (code, body) = t
        .request(method, path, Some("application/json"), Some(b"{}"))
        .await
        .expect("request");
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn control_endpoints_show_and_restart_kubelets() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let url = sim.url();

    let (code, state) = call(&url, "GET", "/sim/v1/nodes/w1/kubelet").await;
    assert_eq!(code, 200, "{state}");
    assert_eq!(state["phase"], "Running");
    assert_eq!(state["port"], sim.kubelet("w1").unwrap().port());
    assert_eq!(state["starts"], 1);

    let (code, list) = call(&url, "GET", "/sim/v1/kubelets").await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));

    let (code, status) = call(&url, "GET", "/sim/v1/nodes/nope/kubelet").await;
    assert_eq!(code, 404);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");

    let (code, state) = call(&url, "POST", "/sim/v1/nodes/w2/kubelet/restart").await;
    assert_eq!(code, 200, "{state}");
    assert_eq!(state["phase"], "Running");
    assert_eq!(state["starts"], 2);
    assert_eq!(
        sim.kubelet("w1").unwrap().state().starts,
        1,
        "only w2 restarted"
    );

    let (code, state) = call(&url, "POST", "/sim/v1/nodes/w2/kubelet/stop").await;
    assert_eq!((code, &state["phase"]), (200, &Value::from("Stopped")));
    let (code, _) = call(&url, "GET", "/sim/v1/nodes/w2/kubelet/restart").await;
    assert_eq!(code, 405, "restart is a POST");
    sim.shutdown().await;
}

async fn restart_cli(url: &str, node: &str) -> (bool, Value, String) {
    let out = tokio::process::Command::new(BIN)
        .args(["restart-kubelet", "--server", url, "--node", node])
        .output()
        .await
        .expect("run restart-kubelet");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (
        out.status.success(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    )
}

#[tokio::test]
async fn the_restart_kubelet_command_restarts_it() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let url = sim.url();
    let k = sim.kubelet("w1").unwrap().clone();

    std::fs::write(&k.paths().config, format!("{CONFIG_HEAD}maxPods: -3\n")).unwrap();
    let (ok, state, stderr) = restart_cli(&url, "w1").await;
    assert!(ok, "{stderr}");
    assert_eq!(state["phase"], "Exited", "{state}");
    let reason = state["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("maxPods (--max-pods) -3 must not be a negative number"),
        "{reason}"
    );
    assert!(get(&k.url(), "/healthz").await.is_err(), "port closed");

    std::fs::write(&k.paths().config, format!("{CONFIG_HEAD}maxPods: 12\n")).unwrap();
    let (ok, state, stderr) = restart_cli(&url, "w1").await;
    assert!(ok, "{stderr}");
    assert_eq!(state["phase"], "Running", "{state}");
    let (_, configz) = get(&k.url(), "/configz").await.expect("configz");
    let configz: Value = serde_json::from_str(&configz).unwrap();
    assert_eq!(configz["kubeletconfig"]["maxPods"], 12);

    let (ok, _, stderr) = restart_cli(&url, "nope").await;
    assert!(!ok);
    assert!(stderr.contains("nope"), "{stderr}");
    sim.shutdown().await;
}

/// Reads the process kubelet's state lines until one satisfies `pred`.
async fn next_state(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && pred(&v)
            {
                return v;
            }
        }
        panic!("the kubelet process ended");
    };
    tokio::time::timeout(Duration::from_secs(15), read)
        .await
        .expect("state in time")
}

#[tokio::test]
async fn a_kubelet_process_talks_http_and_restarts_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, false).await;
    let root = dir.path().join("w1-root");
    let mut child = tokio::process::Command::new(BIN)
        .args(["kubelet", "--node", "w1", "--not-ready-delay", "300ms"])
        .args([
            "--lease-renew-interval",
            "200ms",
            "--restart-after-exit",
            "0s",
        ])
        .arg("--root")
        .arg(&root)
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kubelet process");
    let pid = child.id().expect("pid");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let running = next_state(&mut lines, |s| s["phase"] == "Running").await;
    let port = running["port"].as_u64().expect("port");
    let url = format!("http://127.0.0.1:{port}");
    let (code, _) = get(&url, "/healthz").await.expect("healthz");
    assert_eq!(code, 200);
    let pid_file = std::fs::read_to_string(root.join("var/run/kubelet.pid")).unwrap();
    assert_eq!(pid_file.trim(), pid.to_string());

    // Its status reaches the API server over HTTP: the Node names its port.
    let mut named = Value::Null;
    for _ in 0..100 {
        named = node(&sim, "w1")
            .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
            .cloned()
            .unwrap_or(Value::Null);
        if named == port {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(named, Value::from(port));
    let counts = sim.request_log().counts();
    assert!(
        counts
            .keys()
            .any(|(verb, res)| verb == "patch" && res.starts_with("nodes")),
        "{counts:?}"
    );
    assert_eq!(
        node(&sim, "w1").pointer("/status/capacity/pods"),
        Some(&Value::from("30")),
        "capacity read back from the Node object"
    );

    // Break the config and send SIGHUP: it restarts, exits, and the Node turns NotReady.
    std::fs::write(
        root.join("var/lib/kubelet/config.yaml"),
        format!("{CONFIG_HEAD}maxPods: -1\n"),
    )
    .unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill -HUP");
    assert!(hup.success());
    let exited = next_state(&mut lines, |s| s["phase"] == "Exited").await;
    let reason = exited["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("failed to validate kubelet configuration"),
        "{reason}"
    );
    assert!(get(&url, "/healthz").await.is_err());
    let ready = wait_ready_status(&sim, "w1", "False").await;
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(message.contains("maxPods (--max-pods) -1"), "{ready}");

    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
    assert!(!root.join("var/run/kubelet.pid").exists());
    assert_eq!(
        sim.kubelet("w1").map(|k| k.state().phase),
        None::<KubeletPhase>,
        "the sim itself runs no kubelets"
    );
    sim.shutdown().await;
}
