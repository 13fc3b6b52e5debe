//! SIGKILL the agent binary at each phase of an apply (and of a rollback, from the verdict
//! on), start it again, and check each time that the kubelet's config file is complete
//! and valid, and that the node converges.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::agent::{Harness, PATIENCE, annotation, config_with};
use kubelet_gitops_core::protocol::{ConfigRef, MESSAGE, OBSERVED_CONFIG, STATE};
use kubelet_gitops_sim::faults::FaultConfig;
use node_agent::checkpoint::{ApplyPhase, Assigned, Checkpoint, CheckpointStore, Verdict};
use tokio::process::{Child, Command};

/// Where to kill: before the agent got anywhere, once `meta/assigned` shows this phase
/// for the config being applied, or as soon as the kubelet's config file holds the
/// config (right after the write, whatever the agent does next).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillAt {
    Start,
    Phase(ApplyPhase),
    FileWritten,
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
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("agent starts")
}

/// What to wait for in `meta/assigned`: this config, and (for a rollback) the failed
/// config it replaces, whose verdict must be recorded with it.
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
        && (value["previous"]["config"].as_str() != Some(failed)
            || value["failed"]["config"].as_str() != Some(failed))
    {
        return None;
    }
    serde_json::from_value(value["phase"].clone()).ok()
}

/// Waits for `at` (polling every millisecond), then SIGKILLs the agent. Returns the phase
/// the kill landed in. `payload` is what the config file holds once written.
async fn kill_at(
    h: &Harness,
    agent: &mut Child,
    target: &Target<'_>,
    at: KillAt,
    payload: &[u8],
) -> Option<ApplyPhase> {
    let deadline = Instant::now() + PATIENCE;
    match at {
        KillAt::Start => {}
        KillAt::Phase(want) => loop {
            match phase_of(&h.checkpoint_dir(), target) {
                Some(p) if p as u8 >= want as u8 => break,
                _ => {}
            }
            assert!(Instant::now() < deadline, "phase {want:?} never reached");
            tokio::time::sleep(Duration::from_millis(1)).await;
        },
        KillAt::FileWritten => loop {
            if std::fs::read(h.config_file()).is_ok_and(|b| b == payload) {
                break;
            }
            assert!(Instant::now() < deadline, "the config was never written");
            tokio::time::sleep(Duration::from_millis(1)).await;
        },
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
        let yaml = config_with(&format!("kubeAPIQPS: {qps}\n"));
        let phase = kill_at(&h, &mut agent, &target, at, yaml.as_bytes()).await;
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
    // Written to a file (as to `kubectl logs` or the journal), with NO_COLOR unset: plain
    // text, no terminal colour codes.
    let text = std::fs::read_to_string(&log).expect("agent log");
    assert!(text.contains("kubelet-gitops-agent starting"), "{text}");
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file:\n{text}"
    );
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

        // Kill while the fallback (the local config) is written back, restarted, verified;
        // at `Checkpointed`, as soon as the verdict is recorded, before the fallback is
        // written.
        let mut agent = spawn_agent(&h, &log);
        let target = Target {
            config: &ConfigRef::Local,
            replacing: Some(&bad),
        };
        let phase = kill_at(&h, &mut agent, &target, KillAt::Phase(want), b"").await;
        let on_disk = h.config_file_valid();
        let file = if on_disk == original {
            "fallback"
        } else {
            "failed config"
        };
        landed.push((want, phase, file));

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

/// A `cpu_manager_state` as a kubelet under `policy` keeps it: the kubelet refuses to
/// start when its `policyName` is not its configured policy.
fn cpu_manager_state(policy: &str) -> String {
    format!(r#"{{"policyName":"{policy}","defaultCpuSet":"","checksum":1}}"#)
}

/// The `policyName` of the node's `cpu_manager_state`, `None` when there is none.
fn recorded_cpu_policy(h: &Harness) -> Option<String> {
    let text = std::fs::read_to_string(h.kubelet_root_dir().join("cpu_manager_state")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).expect("state file is JSON");
    v["policyName"].as_str().map(str::to_string)
}

/// A cpuManagerPolicy change (none <-> static) needs the kubelet's `cpu_manager_state`
/// gone before the kubelet starts with the new config. Killed anywhere around the write,
/// the agent never leaves the new config next to a state file of the old policy, and a
/// restarted agent removes the file again even when the old kubelet, still running,
/// wrote it back in the meantime (as it does on any pod change under `static`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_manager_policy_change_never_leaves_a_stale_state_file() {
    let h = Harness::start().await;
    let log = h.dir.path().join("agent.log");
    let state = h.kubelet_root_dir().join("cpu_manager_state");
    let points = [
        KillAt::Phase(ApplyPhase::Checkpointed),
        KillAt::FileWritten,
        KillAt::Phase(ApplyPhase::Written),
        KillAt::Phase(ApplyPhase::Restarted),
    ];
    let mut old = "none";
    let mut landed = Vec::new();
    for (i, at) in points.into_iter().enumerate() {
        let new = if old == "none" { "static" } else { "none" };
        // The running kubelet's state, under the policy it runs.
        std::fs::write(&state, cpu_manager_state(old)).unwrap();
        let policy = match new {
            "static" => "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n",
            _ => "cpuManagerPolicy: none\n",
        };
        let yaml = config_with(&format!("{policy}kubeAPIQPS: {}\n", 200 + i));
        let cm = h.publish("general", &yaml).await;
        let config: ConfigRef = cm.parse().unwrap();
        h.assign(Some(&cm), "30s", "1h").await;

        let mut agent = spawn_agent(&h, &log);
        let target = Target {
            config: &config,
            replacing: None,
        };
        let phase = kill_at(&h, &mut agent, &target, at, yaml.as_bytes()).await;
        landed.push((at, phase));
        if h.config_file_valid() == yaml.as_bytes() {
            assert_ne!(
                recorded_cpu_policy(&h).as_deref(),
                Some(old),
                "killed at {at:?} (landed in {phase:?}): the {new} config sits next to a {old} state file, which a kubelet start refuses"
            );
        }
        // Not restarted yet: the old kubelet runs on and writes its state back.
        if matches!(
            phase,
            None | Some(ApplyPhase::Checkpointed) | Some(ApplyPhase::Written)
        ) {
            std::fs::write(&state, cpu_manager_state(old)).unwrap();
        }

        let mut agent = spawn_agent(&h, &log);
        h.wait_state(&cm, "Done").await;
        assert_eq!(h.configz().await["cpuManagerPolicy"], new, "after {at:?}");
        assert_ne!(
            recorded_cpu_policy(&h).as_deref(),
            Some(old),
            "killed at {at:?} (landed in {phase:?}): the kubelet was restarted into {new} with a {old} state file"
        );
        h.config_file_valid();
        agent.start_kill().expect("SIGKILL");
        agent.wait().await.expect("reaped");
        old = new;
    }
    eprintln!("policy-change kills landed in: {landed:?}");
    h.shutdown().await;
}

/// The window between the verdict and the fallback's write, made exact: an agent that
/// died there left the failed config in the file, the kubelet down, and `meta/assigned`
/// holding the fallback with the verdict. Restarted while the API server answers every
/// request with 500 (so it has no Node), it writes the fallback and restarts the kubelet
/// without waiting, never tries the failed config again, and reports once the API server
/// is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_killed_between_its_verdict_and_the_fallback_write_resumes_without_the_api_server()
 {
    let h = Harness::start().await;
    let log = h.dir.path().join("agent.log");
    let original = std::fs::read(h.config_file()).unwrap();
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
    let yaml = config_with("cgroupRoot: /blocked\nkubeAPIQPS: 31\n");
    let bad = h.publish("general", &yaml).await;
    h.assign(Some(&bad), "2s", "1h").await;

    // What the agent left: the failed config written and the kubelet down with it ...
    kubelet_gitops_core::atomic::write_atomic(&h.config_file(), yaml.as_bytes()).unwrap();
    let k = h.sim.kubelet("w1").unwrap();
    k.restart().await;
    assert!(!k.is_running(), "the kubelet cannot start: {:?}", k.state());
    // ... and, in one write, the verdict and the fallback.
    let store = CheckpointStore::open(&h.checkpoint_dir()).unwrap();
    store.save_local_original(&original).unwrap();
    let live = h
        .sim
        .store()
        .get(
            kubelet_gitops_sim::resources::kinds::configmaps(),
            Some("kubelet-gitops"),
            bad.split_once('/').unwrap().1,
        )
        .unwrap();
    let failed_cp = store
        .save(
            &bad.parse().unwrap(),
            live["metadata"]["uid"].as_str().unwrap(),
            live["metadata"]["resourceVersion"].as_str().unwrap(),
            yaml.as_bytes(),
        )
        .unwrap();
    let local = Checkpoint {
        config: ConfigRef::Local,
        uid: "local".into(),
        resource_version: "original".into(),
        sha256: node_agent::checkpoint::sha256_hex(&original),
    };
    let reason = "kubelet did not become healthy within 2s: healthz: connection refused";
    store
        .set_assigned(&Assigned {
            failed: Some(Verdict {
                config: failed_cp.config.clone(),
                reason: reason.into(),
                at: 1,
                reported_to: None,
            }),
            ..Assigned::new(local, ApplyPhase::Checkpointed, 1, Some(failed_cp))
        })
        .unwrap();
    drop(store);

    h.sim.set_faults(FaultConfig {
        error_500_rate: 1.0,
        ..FaultConfig::default()
    });
    let mut agent = spawn_agent(&h, &log);
    let deadline = Instant::now() + PATIENCE;
    while !(k.is_running() && std::fs::read(h.config_file()).is_ok_and(|b| b == original)) {
        assert!(
            Instant::now() < deadline,
            "the fallback was never restored without the API server: {:?}",
            k.state()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        h.configz().await["kubeAPIQPS"],
        50,
        "the kubelet runs the fallback"
    );
    let a = h.assigned();
    assert_eq!(a["checkpoint"]["config"], "local", "{a}");
    assert_eq!(a["failed"]["config"], bad.as_str(), "{a}");
    assert_eq!(
        annotation(&h.node(), STATE),
        None,
        "the API server has heard of nothing"
    );

    h.sim.set_faults(FaultConfig::default());
    let node = h
        .wait_node(
            |n| {
                annotation(n, OBSERVED_CONFIG) == Some(bad.as_str())
                    && annotation(n, STATE) == Some("RolledBack")
                    && annotation(n, MESSAGE)
                        == Some(format!("{reason}; rolled back to local").as_str())
            },
            "rollback reported",
        )
        .await;
    assert_eq!(
        annotation(&node, kubelet_gitops_core::protocol::CURRENT_CONFIG),
        Some("local")
    );
    let starts = k.state().starts;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        k.state().starts,
        starts,
        "the failed config is not tried again"
    );
    assert_eq!(h.config_file_valid(), original);
    agent.start_kill().expect("SIGKILL");
    agent.wait().await.expect("reaped");
    h.shutdown().await;
}
