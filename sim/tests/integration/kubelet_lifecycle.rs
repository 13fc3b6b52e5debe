//! A stand-in kubelet starts, serves, exits and restarts as a kubelet does.

use std::time::Duration;

use crate::support::kubelet::{
    CONFIG_HEAD, condition, fast_options, get, node, start, wait_ready_status,
};
use kubelet_gitops_sim::kubelet::KubeletPhase;
use kubelet_gitops_sim::resources::kinds;
use serde_json::Value;

const INVENTORY: &str = "\
nodes:
  - name: w1
    labels: {node.kubernetes.io/pool: general}
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--max-pods=50 --kube-api-qps=25\"
";

#[tokio::test]
async fn a_healthy_kubelet_serves_healthz_and_configz_and_keeps_its_node() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let k = sim.kubelet("w1").expect("kubelet");
    let state = k.state();
    assert_eq!(state.phase, KubeletPhase::Running, "{state:?}");
    assert_eq!(state.starts, 1);

    let (code, body) = get(&k.url(), "/healthz").await.expect("healthz");
    assert_eq!((code, body.as_str()), (200, "ok"));
    let (code, body) = get(&k.url(), "/configz").await.expect("configz");
    assert_eq!(code, 200);
    let configz: Value = serde_json::from_str(&body).expect("json");
    let cfg = &configz["kubeletconfig"];
    assert_eq!(cfg["maxPods"], 50, "the flag beats the file's maxPods: 110");
    assert_eq!(cfg["kubeAPIQPS"], 25);
    assert_eq!(cfg["cgroupDriver"], "systemd", "from the sim's config.yaml");
    assert_eq!(cfg["clusterDomain"], "cluster.local");
    assert_eq!(cfg["port"], 10250, "defaults are applied");
    assert!(cfg.get("kind").is_none(), "configz carries no TypeMeta");
    let (code, _) = get(&k.url(), "/nope").await.expect("404");
    assert_eq!(code, 404);

    // The Node: Ready, pods capacity from the effective maxPods, the kubelet's port.
    let ready = wait_ready_status(&sim, "w1", "True").await;
    assert_eq!(ready["reason"], "KubeletReady");
    let n = node(&sim, "w1");
    assert_eq!(n.pointer("/status/capacity/pods"), Some(&Value::from("50")));
    assert_eq!(
        n.pointer("/status/daemonEndpoints/kubeletEndpoint/Port"),
        Some(&Value::from(k.port()))
    );
    assert_eq!(
        condition(&n, "MemoryPressure")["reason"],
        "KubeletHasSufficientMemory"
    );

    // The Lease is created and renewed.
    let lease = |sim: &kubelet_gitops_sim::cluster::Sim| {
        sim.store()
            .get(kinds::leases(), Some("kube-node-lease"), "w1")
            .ok()
    };
    let mut first = None;
    for _ in 0..100 {
        if let Some(l) = lease(&sim) {
            first = Some(l);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = first.expect("lease created");
    assert_eq!(first["spec"]["holderIdentity"], "w1");
    assert_eq!(first["spec"]["leaseDurationSeconds"], 40);
    let owner = &first["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"]),
        (&Value::from("Node"), &Value::from("w1"))
    );
    assert_eq!(owner["uid"], node(&sim, "w1")["metadata"]["uid"]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = lease(&sim).expect("lease");
    assert_ne!(
        later["spec"]["renewTime"], first["spec"]["renewTime"],
        "renewed"
    );

    // What a real kubelet leaves on the node: its log, the pods cgroup with its limits.
    let log = std::fs::read_to_string(&k.paths().log).expect("kubelet.log");
    assert!(log.contains("\"Started kubelet\""), "{log}");
    let memory_max = k.paths().cgroup_root.join("kubepods.slice/memory.max");
    let limit: i128 = std::fs::read_to_string(&memory_max)
        .expect("pods cgroup memory.max")
        .trim()
        .parse()
        .expect("number");
    assert_eq!(limit, 32 << 30, "pods not enforced: capacity");
    let flags = std::fs::read_to_string(&k.paths().flags_env).expect("flags env");
    assert!(
        flags.starts_with("KUBELET_KUBEADM_ARGS=\"--config="),
        "{flags}"
    );
    assert!(flags.contains("--max-pods=50 --kube-api-qps=25"), "{flags}");
    sim.shutdown().await;
}

/// Breaks the kubelet with `write`, restarts it, and checks that it exits with `expect`
/// in its reason, refuses healthz, and that its Node turns NotReady with the reason; then
/// undoes the damage with `fix`, restarts, and checks it is healthy again.
async fn exits_then_recovers(
    write: impl FnOnce(&kubelet_gitops_sim::kubelet::KubeletPaths),
    expect: &[&str],
    fix: impl FnOnce(&kubelet_gitops_sim::kubelet::KubeletPaths),
) {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let k = sim.kubelet("w1").expect("kubelet").clone();
    assert!(k.is_running());
    wait_ready_status(&sim, "w1", "True").await;

    write(k.paths());
    let state = k.restart().await;
    assert_eq!(state.phase, KubeletPhase::Exited, "{state:?}");
    let reason = state.reason.clone().expect("reason");
    for e in expect {
        assert!(reason.contains(e), "reason {reason:?} lacks {e:?}");
    }
    assert_eq!(k.exit_reason().as_deref(), Some(reason.as_str()));
    let refused = get(&k.url(), "/healthz").await.expect_err("port closed");
    assert_eq!(refused.code, 0, "{refused}");

    let ready = wait_ready_status(&sim, "w1", "False").await;
    assert_eq!(ready["reason"], "KubeletNotReady");
    let message = ready["message"].as_str().unwrap_or_default();
    assert!(message.contains(&reason), "{message}");
    let log = std::fs::read_to_string(&k.paths().log).expect("kubelet.log");
    assert!(log.contains(expect[0]), "{log}");

    fix(k.paths());
    let state = k.restart().await;
    assert_eq!(state.phase, KubeletPhase::Running, "{state:?}");
    assert_eq!(state.reason, None);
    assert_eq!(state.starts, 3);
    let (code, body) = get(&k.url(), "/healthz").await.expect("healthz again");
    assert_eq!((code, body.as_str()), (200, "ok"));
    let ready = wait_ready_status(&sim, "w1", "True").await;
    assert_eq!(ready["reason"], "KubeletReady");
    sim.shutdown().await;
}

fn config_with(extra: &str) -> String {
    format!("{CONFIG_HEAD}cgroupDriver: systemd\nmaxPods: 110\n{extra}")
}

#[tokio::test]
async fn an_invalid_config_fails_validation() {
    exits_then_recovers(
        |p| std::fs::write(&p.config, config_with("port: 70000\n")).unwrap(),
        &[
            "failed to validate kubelet configuration, error: invalid configuration: port (--port) 70000 must be between 1 and 65535, inclusive",
            "path: ",
        ],
        |p| std::fs::write(&p.config, config_with("")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn an_undecodable_config_fails_to_load() {
    exits_then_recovers(
        |p| std::fs::write(&p.config, config_with("maxPod: 3\n")).unwrap(),
        &[
            "failed to load kubelet config file, path: ",
            "maxPod",
            "did you mean `maxPods`",
        ],
        |p| std::fs::write(&p.config, config_with("")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn a_missing_config_file_fails_to_load() {
    exits_then_recovers(
        |p| std::fs::remove_file(&p.config).unwrap(),
        &[
            "failed to load kubelet config file",
            "no such file or directory",
        ],
        |p| std::fs::write(&p.config, config_with("")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn a_bad_drop_in_fails_the_merge() {
    exits_then_recovers(
        |p| {
            std::fs::write(
                p.drop_in_dir.join("20-bad.conf"),
                format!("{CONFIG_HEAD}evictionHardd: {{}}\n"),
            )
            .unwrap()
        },
        &[
            "failed to merge kubelet configs: failed to load kubelet dropin file",
            "20-bad.conf",
        ],
        |p| std::fs::remove_file(p.drop_in_dir.join("20-bad.conf")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn an_unknown_flag_fails_flag_parsing() {
    exits_then_recovers(
        |p| {
            let env = std::fs::read_to_string(&p.flags_env).unwrap();
            std::fs::write(
                &p.flags_env,
                env.replace("--kube-api-qps=25", "--kube-api-qps=25 --bogus"),
            )
            .unwrap()
        },
        &["failed to parse kubelet flag: unknown flag: --bogus"],
        |p| {
            let env = std::fs::read_to_string(&p.flags_env).unwrap();
            std::fs::write(&p.flags_env, env.replace(" --bogus", "")).unwrap()
        },
    )
    .await;
}

const RESERVE_KUBE: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenforceNodeAllocatable: [pods, system-reserved, kube-reserved]\nsystemReservedCgroup: /system.slice\nsystemReserved: {cpu: 500m, memory: 1Gi}\nkubeReservedCgroup: /kube.slice\nkubeReserved: {cpu: 250m, memory: 100Mi}\n";

#[tokio::test]
async fn an_enforced_reserved_cgroup_must_exist() {
    exits_then_recovers(
        |p| std::fs::write(p.drop_in_dir.join("50-reserve.conf"), RESERVE_KUBE).unwrap(),
        &[
            "Failed to start ContainerManager",
            "Failed to enforce Kube Reserved Cgroup Limits on \"/kube.slice\": [\"kube\"] cgroup does not exist",
        ],
        |p| std::fs::create_dir_all(p.cgroup_root.join("kube.slice")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn enforced_reserved_cgroups_get_their_limits() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let k = sim.kubelet("w1").expect("kubelet").clone();
    std::fs::write(k.paths().drop_in_dir.join("50-reserve.conf"), RESERVE_KUBE).unwrap();
    std::fs::create_dir_all(k.paths().cgroup_root.join("kube.slice")).unwrap();
    let state = k.restart().await;
    assert_eq!(state.phase, KubeletPhase::Running, "{state:?}");
    let read = |rel: &str| {
        std::fs::read_to_string(k.paths().cgroup_root.join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
            .trim()
            .to_string()
    };
    assert_eq!(read("kube.slice/memory.max"), (100u64 << 20).to_string());
    assert_eq!(read("system.slice/memory.max"), (1u64 << 30).to_string());
    // Pods enforced: capacity - reserved - hard eviction is the ceiling of pods.
    let pods: i128 = read("kubepods.slice/memory.max").parse().unwrap();
    assert_eq!(pods, (32 << 30) - (1 << 30) - (100 << 20));
    let alloc = state.allocatable.expect("allocatable");
    assert_eq!(alloc["cpu"], "7250m");
    let n = node(&sim, "w1");
    let mut tries = 0;
    let mut cpu = n.pointer("/status/allocatable/cpu").cloned();
    while cpu != Some(Value::from("7250m")) && tries < 100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cpu = node(&sim, "w1").pointer("/status/allocatable/cpu").cloned();
        tries += 1;
    }
    assert_eq!(
        cpu,
        Some(Value::from("7250m")),
        "the Node shows the new allocatable"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn reservations_beyond_capacity_leave_allocatable_below_zero() {
    exits_then_recovers(
        |p| std::fs::write(&p.config, config_with("systemReserved: {memory: 40Gi}\n")).unwrap(),
        &[
            "Failed to start ContainerManager",
            "invalid Node Allocatable configuration",
            "memory",
        ],
        |p| std::fs::write(&p.config, config_with("systemReserved: {memory: 4Gi}\n")).unwrap(),
    )
    .await;
}

#[tokio::test]
async fn an_exited_kubelet_is_restarted_like_systemd_does() {
    let dir = tempfile::tempdir().unwrap();
    let inventory =
        kubelet_gitops_core::inventory::Inventory::parse("i.yaml", INVENTORY.as_bytes()).unwrap();
    let mut config = kubelet_gitops_sim::cluster::SimConfig::new(inventory, dir.path());
    config.kubelet = fast_options();
    config.kubelet.restart_after_exit = Some(Duration::from_millis(300));
    let sim = kubelet_gitops_sim::cluster::Sim::start(config)
        .await
        .unwrap();
    let k = sim.kubelet("w1").unwrap().clone();
    std::fs::write(&k.paths().config, "not: [valid").unwrap();
    let state = k.restart().await;
    assert_eq!(state.phase, KubeletPhase::Exited);
    // Still broken: systemd keeps restarting it, and it keeps exiting.
    let again = k
        .wait_for(Duration::from_secs(5), |s| s.starts >= 4)
        .await
        .expect("restarted by itself");
    assert_eq!(again.phase, KubeletPhase::Exited, "{again:?}");
    // Fixed on disk: the next automatic restart picks it up.
    std::fs::write(&k.paths().config, config_with("")).unwrap();
    let running = k
        .wait_for(Duration::from_secs(5), |s| s.phase == KubeletPhase::Running)
        .await
        .expect("running again");
    assert!(running.starts >= 5);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_stopped_kubelet_refuses_until_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let k = sim.kubelet("w1").unwrap().clone();
    let state = k.stop().await;
    assert_eq!(state.phase, KubeletPhase::Stopped);
    assert!(get(&k.url(), "/healthz").await.is_err());
    let ready = wait_ready_status(&sim, "w1", "False").await;
    assert_eq!(ready["message"], "kubelet is not running");
    assert_eq!(k.restart().await.phase, KubeletPhase::Running);
    wait_ready_status(&sim, "w1", "True").await;
    sim.shutdown().await;
}

#[tokio::test]
async fn a_cgroup_v1_host_needs_fail_cgroup_v1_off() {
    let dir = tempfile::tempdir().unwrap();
    let inventory =
        kubelet_gitops_core::inventory::Inventory::parse("i.yaml", INVENTORY.as_bytes()).unwrap();
    let mut config = kubelet_gitops_sim::cluster::SimConfig::new(inventory, dir.path());
    config.kubelet = fast_options();
    config.cgroup_v2 = false;
    let sim = kubelet_gitops_sim::cluster::Sim::start(config)
        .await
        .unwrap();
    let k = sim.kubelet("w1").unwrap().clone();
    assert!(k.is_running(), "{:?}", k.state());
    let initial = std::fs::read_to_string(&k.paths().config).unwrap();
    assert!(initial.contains("failCgroupV1: false"), "{initial}");
    // One tree per controller; the pods cgroup is limited in the memory controller's.
    let limit = std::fs::read_to_string(
        k.paths()
            .cgroup_root
            .join("memory/kubepods.slice/memory.limit_in_bytes"),
    )
    .expect("v1 pods memory limit");
    assert_eq!(limit.trim(), (32u64 << 30).to_string());
    assert!(k.paths().cgroup_root.join("cpu/system.slice").is_dir());

    std::fs::write(&k.paths().config, config_with("")).unwrap();
    let state = k.restart().await;
    assert_eq!(state.phase, KubeletPhase::Exited);
    let reason = state.reason.unwrap_or_default();
    assert!(
        reason.contains("kubelet is configured to not run on a host using cgroup v1"),
        "{reason}"
    );
    sim.shutdown().await;
}

/// A v1.36 kubelet takes the cgroup driver from a runtime that reports it
/// (`getCgroupDriverFromCRI`, containerd 2.x as the sim's nodes run), whatever the config
/// says, and configz shows the runtime's; without the runtime's driver in the inventory
/// (a runtime that does not report it) the config's value stands.
#[tokio::test]
async fn the_runtimes_cgroup_driver_wins_over_the_configs() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = format!("{INVENTORY}    runtimeCgroupDriver: systemd\n");
    let sim = start(dir.path(), &inventory, true).await;
    let k = sim.kubelet("w1").unwrap().clone();
    // The config leaves cgroupDriver to the kubelet's default, cgroupfs.
    std::fs::write(&k.paths().config, format!("{CONFIG_HEAD}maxPods: 110\n")).unwrap();
    assert_eq!(k.restart().await.phase, KubeletPhase::Running);
    let (_, body) = get(&k.url(), "/configz").await.expect("configz");
    let configz: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(configz["kubeletconfig"]["cgroupDriver"], "systemd");
    // The pods cgroup is named for the runtime's driver.
    assert!(
        !k.paths().cgroup_root.join("kubepods").exists(),
        "systemd naming, not cgroupfs"
    );
    sim.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let k = sim.kubelet("w1").unwrap().clone();
    std::fs::write(&k.paths().config, format!("{CONFIG_HEAD}maxPods: 110\n")).unwrap();
    assert_eq!(k.restart().await.phase, KubeletPhase::Running);
    let (_, body) = get(&k.url(), "/configz").await.expect("configz");
    let configz: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(configz["kubeletconfig"]["cgroupDriver"], "cgroupfs");
    assert!(
        k.paths().cgroup_root.join("kubepods").is_dir(),
        "cgroupfs naming"
    );
    sim.shutdown().await;
}

/// The kubelet's status reports (every `nodeStatusReportFrequency`, and when it goes
/// down) leave the conditions of other writers alone, as the kubelet's strategic merge
/// patch does: node-problem-detector's, or the node agent's, which would otherwise be
/// removed at each report and written back by its owner.
#[tokio::test]
async fn status_reports_keep_the_conditions_of_other_writers() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start(dir.path(), INVENTORY, true).await;
    let k = sim.kubelet("w1").expect("kubelet").clone();
    wait_ready_status(&sim, "w1", "True").await;
    std::fs::write(
        &k.paths().config,
        config_with("nodeStatusReportFrequency: 1s\n"),
    )
    .unwrap();
    assert_eq!(k.restart().await.phase, KubeletPhase::Running);
    let theirs = serde_json::json!({"status": {"conditions": [{
        "type": "KernelDeadlock", "status": "False", "reason": "KernelHasNoDeadlock",
        "message": "kernel has no deadlock",
        "lastHeartbeatTime": "2025-01-01T00:00:00Z",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }]}});
    sim.store()
        .patch(
            kinds::nodes(),
            None,
            "w1",
            Some("status"),
            kubelet_gitops_sim::store::PatchType::StrategicMerge,
            &serde_json::to_vec(&theirs).unwrap(),
            &kubelet_gitops_sim::store::WriteOptions::default(),
        )
        .expect("condition written");
    let heartbeat = |sim: &kubelet_gitops_sim::cluster::Sim| {
        condition(&node(sim, "w1"), "Ready")["lastHeartbeatTime"].clone()
    };
    let before = heartbeat(&sim);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while heartbeat(&sim) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "no status report within 10s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let n = node(&sim, "w1");
    assert_eq!(condition(&n, "Ready")["status"], "True");
    assert_eq!(
        condition(&n, "KernelDeadlock")["reason"],
        "KernelHasNoDeadlock",
        "{}",
        n["status"]["conditions"]
    );
    // Down: Ready turns False, the others' condition stays.
    assert_eq!(k.stop().await.phase, KubeletPhase::Stopped);
    wait_ready_status(&sim, "w1", "False").await;
    let n = node(&sim, "w1");
    assert_eq!(
        condition(&n, "KernelDeadlock")["status"],
        "False",
        "{}",
        n["status"]["conditions"]
    );
    sim.shutdown().await;
}
