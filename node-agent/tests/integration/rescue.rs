//! kubelet-gitops-rescue against real checkpoint directories in temp dirs, with real
//! `flock`s, and the agent's own decision on what it leaves behind; and once end to end,
//! with the real agent and the sim's stand-in kubelet.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use kubelet_gitops_core::atomic::write_atomic;
use kubelet_gitops_core::protocol::{ConfigRef, State, reason};
use node_agent::agent::decide::{Assignment, Desired, Failed, Observed, Step, decide};
use node_agent::args::DROP_IN_FILE;
use node_agent::checkpoint::{ApplyPhase, Assigned, Checkpoint, CheckpointStore};
use node_agent::config_file::Placement;
use node_agent::lock::AgentLock;
use node_agent::report::Report;
use node_agent::rescue::{self, Idle, Outcome, Settings, Sighting};

const A: &[u8] = b"maxPods: 110\n";
const B: &[u8] = b"maxPods: 1\ncpuManagerPolicy: static\n";
const LOCAL: &[u8] = b"kind: KubeletConfiguration\n";

fn cm(name: &str) -> ConfigRef {
    ConfigRef::configmap("kubelet-gitops", name)
}

/// A node's files in a temp dir: the checkpoint dir, the kubelet's config file, its drop-in
/// dir and root dir.
struct Node {
    _tmp: tempfile::TempDir,
    settings: Settings,
    store: CheckpointStore,
    a: Checkpoint,
    b: Checkpoint,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Replace,
    DropIn,
}

impl Node {
    /// The agent applied `a` (last-known-good, when `lkg`), then wrote `b`, which lists
    /// `cpu_manager_state` as stale, and stopped in `phase`.
    fn new(mode: Mode, lkg: bool, phase: ApplyPhase) -> Node {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let placement = match mode {
            Mode::Replace => Placement::ConfigFile {
                path: root.join("var/lib/kubelet/config.yaml"),
            },
            Mode::DropIn => Placement::DropIn {
                dir: root.join("etc/kubernetes/kubelet.conf.d"),
                name: DROP_IN_FILE.to_string(),
            },
        };
        let settings = Settings {
            checkpoint_dir: root.join("var/lib/kubelet-gitops"),
            placement,
            kubelet_root_dir: root.join("var/lib/kubelet"),
            health_timeout: std::time::Duration::from_secs(120),
        };
        let store = CheckpointStore::open(&settings.checkpoint_dir).unwrap();
        // In drop-in mode the node's own config is "no drop-in of ours".
        let local = if mode == Mode::Replace { LOCAL } else { b"" };
        store.save_local_original(local).unwrap();
        let a = store.save(&cm("a"), "ua", "1", A).unwrap();
        let b = store.save(&cm("b"), "ub", "2", B).unwrap();
        if lkg {
            store.set_last_known_good(&a).unwrap();
        }
        store
            .set_assigned(&Assigned {
                state_files: Some(vec!["cpu_manager_state".into()]),
                ..Assigned::new(b.clone(), phase, 500, lkg.then(|| a.clone()))
            })
            .unwrap();
        let node = Node {
            _tmp: tmp,
            settings,
            store,
            a,
            b,
        };
        let target = node.target();
        fs::create_dir_all(target.parent().unwrap()).unwrap();
        write_atomic(&target, B).unwrap();
        // What the kubelet wrote while it ran b.
        fs::create_dir_all(&node.settings.kubelet_root_dir).unwrap();
        fs::write(node.state_file(), br#"{"policyName":"static"}"#).unwrap();
        node
    }

    fn target(&self) -> PathBuf {
        self.settings.placement.target()
    }

    fn state_file(&self) -> PathBuf {
        self.settings.kubelet_root_dir.join("cpu_manager_state")
    }

    fn run(&self, now: u64) -> Outcome {
        rescue::run(&self.settings, now).unwrap()
    }

    fn assigned(&self) -> Assigned {
        self.store.assigned().unwrap().unwrap()
    }

    fn sighting_file(&self) -> PathBuf {
        self.settings.checkpoint_dir.join("meta/rescue")
    }

    /// Kubelet starts every 10s from `from` until the rescue does something else than
    /// watching; what it did and when.
    fn crash_loop(&self, from: u64) -> (u64, Outcome) {
        let mut now = from;
        loop {
            match self.run(now) {
                Outcome::Watching(s) => {
                    assert!(now < from + 120, "still watching at {now}: {s:?}");
                    assert_eq!(
                        fs::read(self.target()).unwrap(),
                        B,
                        "no rollback while watching"
                    );
                }
                other => return (now, other),
            }
            now += 10;
        }
    }

    /// The state after a rollback to `to` at `at`.
    fn assert_rolled_back(&self, to: &Checkpoint, at: u64) {
        let a = self.assigned();
        assert_eq!(&a.checkpoint, to);
        assert_eq!(a.phase, ApplyPhase::Restarted);
        assert_eq!(a.since, at);
        assert_eq!(a.previous.as_ref(), Some(&self.b));
        let v = a.failed.expect("the verdict");
        assert_eq!(v.config, cm("b"));
        assert!(v.reason.starts_with(reason::UNHEALTHY), "{}", v.reason);
        assert!(v.reason.contains("kubelet-gitops/b"), "{}", v.reason);
        assert!(!self.state_file().exists(), "the stale state file is gone");
    }
}

/// Every file under `dir`, with its content.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(snapshot(&p));
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Serializes the tests of this file, and keeps every other test from starting a process
/// meanwhile: they take and drop locks and check who holds them
/// ([`crate::support::children`] says why).
fn serial() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    crate::support::alone_blocking()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn nothing_in_flight_is_a_no_op_that_writes_nothing() {
    let _serial = serial();
    // No checkpoint dir at all: a node the agent never ran on.
    let tmp = tempfile::tempdir().unwrap();
    let settings = Settings {
        checkpoint_dir: tmp.path().join("cp"),
        placement: Placement::ConfigFile {
            path: tmp.path().join("config.yaml"),
        },
        kubelet_root_dir: tmp.path().join("root"),
        health_timeout: std::time::Duration::from_secs(120),
    };
    assert_eq!(
        rescue::run(&settings, 1000).unwrap(),
        Outcome::Idle(Idle::NothingInFlight)
    );
    assert!(!settings.checkpoint_dir.exists());

    // Verified, and Checkpointed (the kubelet's file not touched yet).
    for phase in [ApplyPhase::Verified, ApplyPhase::Checkpointed] {
        let node = Node::new(Mode::Replace, true, phase);
        let before = snapshot(node._tmp.path());
        assert_eq!(node.run(1000), Outcome::Idle(Idle::NothingInFlight));
        assert_eq!(node.run(5000), Outcome::Idle(Idle::NothingInFlight));
        assert_eq!(
            snapshot(node._tmp.path()),
            before,
            "{phase}: nothing written"
        );
        assert!(!AgentLock::path(&node.settings.checkpoint_dir).exists());
    }
}

#[test]
fn a_running_agent_holding_the_lock_is_left_to_handle_the_node() {
    let _serial = serial();
    let node = Node::new(Mode::Replace, true, ApplyPhase::Restarted);
    // The agent's lock, on its own file handle.
    let held = AgentLock::try_acquire(&node.settings.checkpoint_dir)
        .unwrap()
        .expect("free");
    let before = snapshot(node._tmp.path());
    for now in [1000, 1010, 5000] {
        assert_eq!(node.run(now), Outcome::Idle(Idle::AgentRunning));
    }
    assert_eq!(snapshot(node._tmp.path()), before, "nothing written");
    assert!(
        AgentLock::try_acquire(&node.settings.checkpoint_dir)
            .unwrap()
            .is_none(),
        "a second handle cannot take it"
    );
    drop(held);
    // Released (the agent stopped): the rescue acts.
    assert!(matches!(node.run(5010), Outcome::Watching(_)));
    // And the rescue does not keep the lock after its run.
    assert!(
        AgentLock::try_acquire(&node.settings.checkpoint_dir)
            .unwrap()
            .is_some()
    );
}

#[test]
fn the_first_sighting_is_recorded_and_the_kubelet_gets_its_chance() {
    let _serial = serial();
    let node = Node::new(Mode::Replace, true, ApplyPhase::Written);
    let before = node.assigned();
    let Outcome::Watching(s) = node.run(1000) else {
        panic!("not watching");
    };
    assert_eq!(
        s,
        Sighting {
            checkpoint: node.b.clone(),
            since: 500,
            first_seen: 1000,
            last_seen: 1000,
            starts: 1,
        }
    );
    assert!(node.sighting_file().exists());
    assert_eq!(node.assigned(), before, "meta/assigned untouched");
    assert_eq!(fs::read(node.target()).unwrap(), B);
    assert!(node.state_file().exists());
}

#[test]
fn after_the_timeout_it_rolls_back_to_last_known_good_in_both_modes() {
    let _serial = serial();
    for mode in [Mode::Replace, Mode::DropIn] {
        let node = Node::new(mode, true, ApplyPhase::Restarted);
        let (at, outcome) = node.crash_loop(1000);
        assert_eq!(at, 1120, "{mode:?}: at the health timeout");
        assert_eq!(
            outcome,
            Outcome::RolledBack {
                failed: Some(cm("b")),
                to: cm("a")
            }
        );
        assert_eq!(fs::read(node.target()).unwrap(), A, "{mode:?}");
        node.assert_rolled_back(&node.a.clone(), 1120);
        // The next kubelet start (the fallback fails too): left alone.
        assert!(matches!(
            node.run(1130),
            Outcome::Idle(Idle::FallbackOnTrial { .. })
        ));
    }
}

#[test]
fn without_last_known_good_it_rolls_back_to_the_local_config_in_both_modes() {
    let _serial = serial();
    for mode in [Mode::Replace, Mode::DropIn] {
        let node = Node::new(mode, false, ApplyPhase::Written);
        let (at, outcome) = node.crash_loop(2000);
        assert_eq!(at, 2120);
        assert_eq!(
            outcome,
            Outcome::RolledBack {
                failed: Some(cm("b")),
                to: ConfigRef::Local
            }
        );
        let to = node.assigned().checkpoint;
        assert_eq!(to.config, ConfigRef::Local);
        node.assert_rolled_back(&to, 2120);
        match mode {
            Mode::Replace => assert_eq!(fs::read(node.target()).unwrap(), LOCAL),
            // The node's own config in drop-in mode is no drop-in of ours.
            Mode::DropIn => assert!(!node.target().exists()),
        }
    }
}

#[test]
fn a_kill_between_the_verdict_and_the_fallback_is_completed_by_the_next_run() {
    let _serial = serial();
    for mode in [Mode::Replace, Mode::DropIn] {
        let node = Node::new(mode, true, ApplyPhase::Written);
        node.run(1000);
        node.run(1060);
        // What the rescue's first write at 1120 leaves: the verdict and the fallback in
        // meta/assigned, nothing else.
        let failed = node.assigned();
        let record = Assigned {
            state_files: failed.state_files.clone(),
            failed: Some(node_agent::checkpoint::Verdict {
                config: cm("b"),
                reason: format!(
                    "{}: the kubelet kept failing to start with kubelet-gitops/b",
                    reason::UNHEALTHY
                ),
                at: 1120,
                reported_to: None,
            }),
            ..Assigned::new(
                node.a.clone(),
                ApplyPhase::Checkpointed,
                1120,
                Some(node.b.clone()),
            )
        };
        node.store.set_assigned(&record).unwrap();
        assert_eq!(fs::read(node.target()).unwrap(), B);
        // The next start: carried on at once, whatever the clock.
        assert_eq!(
            node.run(1125),
            Outcome::RolledBack {
                failed: Some(cm("b")),
                to: cm("a")
            }
        );
        assert_eq!(fs::read(node.target()).unwrap(), A);
        node.assert_rolled_back(&node.a.clone(), 1125);

        // Killed after the fallback's write, before the phase: the same.
        node.store.set_assigned(&record).unwrap();
        fs::write(node.state_file(), b"{}").unwrap();
        assert!(matches!(node.run(1130), Outcome::RolledBack { .. }));
        assert_eq!(fs::read(node.target()).unwrap(), A);
        node.assert_rolled_back(&node.a.clone(), 1130);
    }
}

#[test]
fn an_unreadable_fallback_changes_nothing() {
    let _serial = serial();
    let node = Node::new(Mode::Replace, true, ApplyPhase::Written);
    fs::write(
        node.store.payload_path(&node.a).unwrap(),
        b"bit rot changed this",
    )
    .unwrap();
    node.run(1000);
    node.run(1060);
    let before = node.assigned();
    let err = rescue::run(&node.settings, 1120).unwrap_err();
    assert!(err.to_string().contains("kubelet-gitops/a"), "{err}");
    assert_eq!(
        node.assigned(),
        before,
        "no verdict without a usable fallback"
    );
    assert_eq!(fs::read(node.target()).unwrap(), B);
}

/// The agent's view of `meta/assigned` (what its driver builds), for its pure decision.
fn agent_view(a: &Assigned) -> Assignment {
    Assignment {
        config: a.checkpoint.config.clone(),
        phase: a.phase,
        since: a.since,
        file: "/cp/fallback".into(),
        failed: a.failed.as_ref().map(|v| Failed {
            config: v.config.clone(),
            reason: v.reason.clone(),
            file: "/cp/failed".into(),
            reported: v.reported_to.is_some(),
        }),
    }
}

#[test]
fn the_agent_reports_the_rescues_rollback_and_does_not_retry_the_failed_config() {
    let _serial = serial();
    let node = Node::new(Mode::Replace, true, ApplyPhase::Restarted);
    let (at, _) = node.crash_loop(1000);
    let after = node.assigned();
    // The agent starts once the kubelet is healthy; the Node still shows the apply.
    let mut o = Observed {
        now: at + 30,
        desired: Desired::Config(cm("b")),
        health_timeout: 120,
        lkg_grace: 600,
        recheck: 60,
        report: Report {
            state: Some(State::Verifying),
            observed: Some("kubelet-gitops/b".into()),
            current: Some("kubelet-gitops/a".into()),
            last_known_good: Some("kubelet-gitops/a".into()),
            message: Some("kubelet restarted; waiting".into()),
        },
        assigned: Some(agent_view(&after)),
        last_known_good: cm("a"),
        has_local_original: true,
        disk: None,
        pods_cgroup: None,
        kubelet_healthy: None,
        verification: None,
        retry: None,
        note: None,
    };
    // The fallback is verified, as after the agent's own rollback and restart.
    assert_eq!(decide(&o), Step::Verify { deadline: at + 120 });
    // Verified: RolledBack about b, on a, and b is not downloaded again.
    let verified = Assigned {
        phase: ApplyPhase::Verified,
        ..after
    };
    o.assigned = Some(agent_view(&verified));
    let Step::Idle { report, .. } = decide(&o) else {
        panic!("{:?}", decide(&o));
    };
    assert_eq!(report.state, Some(State::RolledBack));
    assert_eq!(report.observed.as_deref(), Some("kubelet-gitops/b"));
    assert_eq!(report.current.as_deref(), Some("kubelet-gitops/a"));
    let m = report.message.clone().unwrap();
    assert!(
        m.starts_with(reason::UNHEALTHY) && m.contains("no agent was running"),
        "{m}"
    );
    assert!(m.ends_with("; rolled back to kubelet-gitops/a"), "{m}");
    // Also once reported and shown, and with nothing the Node shows at all.
    o.report = report;
    assert!(matches!(decide(&o), Step::Idle { .. }));
    o.report = Report::default();
    assert!(matches!(decide(&o), Step::Idle { .. }));
    // A new desired config moves on.
    o.desired = Desired::Config(cm("c"));
    assert_eq!(decide(&o), Step::Download { config: cm("c") });
}

#[test]
fn the_binary_rolls_back_and_leaves_a_running_agent_alone() {
    let _serial = serial();
    let bin = env!("CARGO_BIN_EXE_kubelet-gitops-rescue");
    let help = Command::new(bin).arg("--help").output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    for word in [
        "ExecStartPre",
        "--checkpoint-dir",
        "--health-timeout",
        "[default: 2m]",
    ] {
        assert!(help.contains(word), "{word}: {help}");
    }

    let node = Node::new(Mode::Replace, true, ApplyPhase::Restarted);
    let now = unix_now();
    // Seen starting for 200s, last 5s ago.
    let sighting = Sighting {
        checkpoint: node.b.clone(),
        since: 500,
        first_seen: now - 200,
        last_seen: now - 5,
        starts: 20,
    };
    let body = serde_json::to_string(&sighting).unwrap();
    let framed = format!(
        "{{\"sha256\":\"{}\",\"value\":{body}}}\n",
        node_agent::checkpoint::sha256_hex(body.as_bytes())
    );
    write_atomic(&node.sighting_file(), framed.as_bytes()).unwrap();
    let rescue = |node: &Node| {
        Command::new(bin)
            .env_clear()
            .arg("--checkpoint-dir")
            .arg(&node.settings.checkpoint_dir)
            .arg("--kubelet-config")
            .arg(node.target())
            .arg("--kubelet-root-dir")
            .arg(&node.settings.kubelet_root_dir)
            .output()
            .unwrap()
    };

    // This process holds the lock: another process (the rescue) sees it held.
    let held = AgentLock::try_acquire(&node.settings.checkpoint_dir)
        .unwrap()
        .unwrap();
    let out = rescue(&node);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read(node.target()).unwrap(), B, "left to the agent");
    assert_eq!(node.assigned().phase, ApplyPhase::Restarted);
    drop(held);

    let out = rescue(&node);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read(node.target()).unwrap(), A);
    let a = node.assigned();
    assert_eq!(a.checkpoint, node.a);
    assert_eq!(a.failed.map(|v| v.config), Some(cm("b")));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("rolling back"), "{log}");

    // Invalid options exit 2.
    let out = Command::new(bin)
        .env_clear()
        .args(["--mode", "drop-in"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// The gap, end to end: the agent restarts the kubelet with a config it cannot start with
/// and is gone before its deadline (a reboot); the kubelet stays down; the rescue, before
/// each of systemd's restarts, rolls it back; the agent, back, reports `RolledBack`.
#[test]
fn end_to_end_the_rescue_rolls_back_what_the_gone_agent_left_and_the_agent_reports_it() {
    use crate::support::agent::{Harness, annotation, config_with};
    use kubelet_gitops_core::protocol::{CURRENT_CONFIG, MESSAGE, STATE};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Alone, as the other tests of this file (see `serial`).
        let mut h = Harness::start_alone().await;
        let original = fs::read(h.config_file()).unwrap();
        // The stand-in kubelet cannot start with a cgroupRoot of /blocked.
        fs::write(
            h.root().join("sys/fs/cgroup/blocked.slice"),
            b"not a cgroup\n",
        )
        .unwrap();
        h.start_agent(&[]);
        let bad = h
            .publish("general", &config_with("cgroupRoot: /blocked\n"))
            .await;
        // The agent's own deadline is far off: only the rescue can roll back here.
        h.assign(Some(&bad), "1h", "1h").await;
        h.wait_phase(&bad, "Restarted").await;
        let settings = Settings {
            checkpoint_dir: h.checkpoint_dir(),
            placement: Placement::ConfigFile {
                path: h.config_file(),
            },
            kubelet_root_dir: h.kubelet_root_dir(),
            health_timeout: std::time::Duration::from_secs(120),
        };
        let t0 = unix_now();
        assert_eq!(
            rescue::run(&settings, t0).unwrap(),
            Outcome::Idle(Idle::AgentRunning),
            "the running agent holds the lock"
        );

        h.kill_agent().await;
        let kubelet = h.sim.kubelet("w1").unwrap();
        let mut now = t0;
        loop {
            match rescue::run(&settings, now).unwrap() {
                Outcome::Watching(_) => {
                    // systemd's start after the rescue: fails again.
                    kubelet.restart().await;
                    assert!(!kubelet.is_running(), "the bad config does not start");
                }
                Outcome::RolledBack { failed, to } => {
                    assert_eq!(failed.map(|c| c.to_string()), Some(bad.clone()));
                    assert_eq!(to, ConfigRef::Local);
                    break;
                }
                other => panic!("{other:?}"),
            }
            now += 10;
        }
        assert_eq!(now, t0 + 120);
        assert_eq!(fs::read(h.config_file()).unwrap(), original);
        // The start that follows the rescue: on the fallback.
        kubelet.restart().await;
        assert!(kubelet.is_running(), "{:?}", kubelet.exit_reason());

        h.start_agent(&[]);
        let node = h.wait_state(&bad, "RolledBack").await;
        assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
        assert_eq!(annotation(&node, STATE), Some("RolledBack"));
        let message = annotation(&node, MESSAGE).unwrap_or_default();
        assert!(
            message.contains("no agent was running") && message.ends_with("rolled back to local"),
            "{message}"
        );
        let a = h.assigned();
        assert_eq!(a["phase"], "Verified", "{a}");
        assert_eq!(a["failed"]["config"], bad.as_str(), "{a}");
        h.shutdown().await;
    });
}
