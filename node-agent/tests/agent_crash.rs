//! SIGKILL the agent binary at each phase of an apply (and of a rollback), start it again,
//! and check each time that the kubelet's config file is complete and valid, and that the
//! node converges.

mod agent_support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_support::{Harness, PATIENCE, annotation, config_with};
use kubelet_gitops_core::protocol::{ConfigRef, MESSAGE, STATE};
use node_agent::checkpoint::ApplyPhase;
use tokio::process::{Child, Command};

/// Where to kill: before the agent got anywhere, or once `meta/assigned` shows this phase
/// for the config being applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillAt {
    Start,
    Phase(ApplyPhase),
}

fn spawn_agent(h: &Harness, log: &Path) -> Child {
    let mut args = h.agent_args();
    // A slower restart widens the Written window; sh keeps running when the agent is
    // killed, as a systemd restart job would.
    let restart = format!(
        "--restart-command=sh -c 'sleep 0.3 && curl -fsS -X POST {}/sim/v1/nodes/w1/kubelet/restart >/dev/null'",
        h.sim.url()
    );
    for a in args.iter_mut() {
        if a.starts_with("--restart-command=") {
            *a = restart.clone();
        }
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("agent log");
    Command::new(env!("CARGO_BIN_EXE_kubelet-gitops-agent"))
        .args(&args[1..])
        .env("KUBELET_GITOPS_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("agent starts")
}

/// What to wait for in `meta/assigned`: this config, and (for a rollback) the failed
/// config it replaces.
struct Target<'a> {
    config: &'a ConfigRef,
    replacing: Option<&'a str>,
}

/// The phase of `target` in `meta/assigned`, if it is the one assigned. Read-only: the
/// store's `open` tidies the directory, which must not race the agent.
fn phase_of(store_dir: &Path, target: &Target<'_>) -> Option<ApplyPhase> {
    let text = std::fs::read_to_string(store_dir.join("meta/assigned")).ok()?;
    let envelope: serde_json::Value = serde_json::from_str(&text).ok()?;
    let value = &envelope["value"];
    if value["checkpoint"]["config"].as_str()? != target.config.to_string() {
        return None;
    }
    if let Some(failed) = target.replacing
        && value["previous"]["config"].as_str() != Some(failed)
    {
        return None;
    }
    serde_json::from_value(value["phase"].clone()).ok()
}

/// Waits for `at` (polling every millisecond), then SIGKILLs the agent. Returns the phase
/// the kill landed in.
async fn kill_at(
    h: &Harness,
    agent: &mut Child,
    target: &Target<'_>,
    at: KillAt,
) -> Option<ApplyPhase> {
    let deadline = Instant::now() + PATIENCE;
    if let KillAt::Phase(want) = at {
        loop {
            match phase_of(&h.checkpoint_dir(), target) {
                Some(p) if p as u8 >= want as u8 => break,
                _ => {}
            }
            assert!(Instant::now() < deadline, "phase {want:?} never reached");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    agent.start_kill().expect("SIGKILL");
    agent.wait().await.expect("reaped");
    phase_of(&h.checkpoint_dir(), target)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_at_any_phase_resumes_and_converges() {
    let h = Harness::start().await;
    let log = h.dir.path().join("agent.log");
    let points = [
        KillAt::Start,
        KillAt::Phase(ApplyPhase::Checkpointed),
        KillAt::Phase(ApplyPhase::Written),
        KillAt::Phase(ApplyPhase::Restarted),
        KillAt::Phase(ApplyPhase::Verified),
    ];
    let mut landed = Vec::new();
    for (i, at) in points.into_iter().enumerate() {
        let qps = 100 + i;
        let cm = h
            .publish("general", &config_with(&format!("kubeAPIQPS: {qps}\n")))
            .await;
        let config: ConfigRef = cm.parse().unwrap();
        h.assign(Some(&cm), "30s", "1h").await;

        let mut agent = spawn_agent(&h, &log);
        let target = Target {
            config: &config,
            replacing: None,
        };
        let phase = kill_at(&h, &mut agent, &target, at).await;
        landed.push((at, phase));
        h.config_file_valid();

        let mut agent = spawn_agent(&h, &log);
        let node = h.wait_state(&cm, "Done").await;
        assert_eq!(annotation(&node, STATE), Some("Done"));
        assert_eq!(
            h.configz().await["kubeAPIQPS"],
            qps,
            "after a kill at {at:?}"
        );
        h.config_file_valid();
        agent.start_kill().expect("SIGKILL");
        agent.wait().await.expect("reaped");
    }
    eprintln!("kills landed in: {landed:?}");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_during_a_rollback_finishes_it_and_does_not_retry() {
    let h = Harness::start().await;
    let log = h.dir.path().join("agent.log");
    let original = std::fs::read(h.config_file()).unwrap();
    // The kubelet cannot start with cgroupRoot /blocked: its slice is a file.
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
    let mut landed = Vec::new();
    for (i, want) in [
        ApplyPhase::Checkpointed,
        ApplyPhase::Written,
        ApplyPhase::Restarted,
    ]
    .into_iter()
    .enumerate()
    {
        let bad = h
            .publish(
                "general",
                &config_with(&format!("cgroupRoot: /blocked\nkubeAPIQPS: {}\n", 10 + i)),
            )
            .await;
        h.assign(Some(&bad), "2s", "1h").await;

        // Kill while the fallback (the local config) is written back, restarted, verified.
        let mut agent = spawn_agent(&h, &log);
        let target = Target {
            config: &ConfigRef::Local,
            replacing: Some(&bad),
        };
        let phase = kill_at(&h, &mut agent, &target, KillAt::Phase(want)).await;
        landed.push((want, phase));
        h.config_file_valid();

        let mut agent = spawn_agent(&h, &log);
        let node = h
            .wait_node(
                |n| {
                    annotation(n, kubelet_gitops_core::protocol::OBSERVED_CONFIG)
                        == Some(bad.as_str())
                        && annotation(n, STATE) == Some("RolledBack")
                        && annotation(n, MESSAGE)
                            .is_some_and(|m| m.contains("rolled back to local"))
                },
                "rollback finished",
            )
            .await;
        let message = annotation(&node, MESSAGE).unwrap();
        assert!(
            message.starts_with("kubelet did not become healthy within 2s"),
            "{message}"
        );
        assert_eq!(h.config_file_valid(), original);
        let k = h.sim.kubelet("w1").unwrap();
        assert!(k.is_running(), "{:?}", k.state());

        // The failed config is not tried again by the restarted agent.
        let starts = k.state().starts;
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(k.state().starts, starts, "no restart after the rollback");
        assert_eq!(h.config_file_valid(), original);
        agent.start_kill().expect("SIGKILL");
        agent.wait().await.expect("reaped");
    }
    eprintln!("rollback kills landed in: {landed:?}");
    h.shutdown().await;
}
