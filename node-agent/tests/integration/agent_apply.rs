//! The agent applies an assigned config to a real stand-in kubelet: the happy path, a
//! flag override reported, a missing enforced cgroup created, a resume from a persisted
//! phase.

use crate::support::agent::{Harness, annotation, condition, config_with};
use kubelet_gitops_core::protocol::{CURRENT_CONFIG, LAST_KNOWN_GOOD, MESSAGE, STATE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assigned_config_is_applied_and_the_kubelet_runs_it() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    let starts_before = h.sim.kubelet("w1").unwrap().state().starts;
    h.start_agent(&[]);
    // Without an assignment the agent reports the local config and touches nothing.
    h.wait_local_reported().await;
    assert_eq!(std::fs::read(h.config_file()).unwrap(), original);

    let yaml = config_with("kubeAPIQPS: 42\nserializeImagePulls: false\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    let node = h.wait_state(&cm, "Done").await;

    assert_eq!(annotation(&node, CURRENT_CONFIG), Some(cm.as_str()));
    assert_eq!(
        annotation(&node, LAST_KNOWN_GOOD),
        Some("local"),
        "not promoted before the grace"
    );
    let cond = condition(&node, "KubeletConfigReady");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "Done");
    assert_eq!(
        condition(&node, "Ready")["status"],
        "True",
        "the kubelet's own conditions are kept"
    );
    // Under its host root the agent found what a node has (containerd's socket,
    // resolv.conf): no pre-flight warning in the Done message.
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(!message.contains("warning:"), "{message}");

    assert_eq!(
        h.config_file_valid(),
        yaml.as_bytes(),
        "the file is the payload, byte for byte"
    );
    let configz = h.configz().await;
    assert_eq!(configz["kubeAPIQPS"], 42);
    assert_eq!(configz["serializeImagePulls"], false);
    assert!(
        h.sim.kubelet("w1").unwrap().state().starts > starts_before,
        "the kubelet was restarted"
    );
    for r in [
        "KubeletConfigDownloading",
        "KubeletConfigApplying",
        "KubeletConfigVerifying",
        "KubeletConfigApplied",
    ] {
        h.wait_event(r, &cm).await;
    }
    // A steady agent writes nothing: several resync periods (1s) and kubelet heartbeats
    // later, no patch of the Node and no new watch or list.
    let log = h.sim.request_log();
    let counts = |log: &kubelet_gitops_sim::reqlog::RequestLog| {
        [
            log.count("patch", "nodes"),
            log.count("patch", "nodes/status"),
            log.count("list", "nodes"),
            log.count("watch", "configmaps"),
            log.count("list", "configmaps"),
        ]
    };
    let before = counts(log);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        counts(log),
        before,
        "patch nodes, nodes/status, list nodes, configmaps"
    );
    // The node's own file is kept for a return to the local config.
    let saved = std::fs::read(h.checkpoint_dir().join("local/kubelet")).unwrap();
    assert_eq!(saved, original);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_the_flags_override_is_reported() {
    let mut h = Harness::start().await;
    h.start_agent(&[]);
    // The node's kubelet runs with --max-pods=50.
    let cm = h.publish("general", &config_with("maxPods: 64\n")).await;
    h.assign(Some(&cm), "30s", "1h").await;
    let node = h.wait_state(&cm, "Done").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default().to_string();
    assert!(
        message.contains("maxPods") && message.contains("--max-pods"),
        "the override is in the message: {message:?}"
    );
    let events = h.events().await;
    let overrides: Vec<&(String, String)> = events
        .iter()
        .filter(|(r, _)| r == "KubeletConfigFlagOverride")
        .collect();
    assert_eq!(overrides.len(), 1, "{events:?}");
    assert!(overrides[0].1.contains("maxPods"), "{}", overrides[0].1);
    assert_eq!(
        h.configz().await["maxPods"],
        50,
        "the flag wins, as reported"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforced_reserved_cgroup_that_is_missing_is_created() {
    let mut h = Harness::start().await;
    let cgroup = h.root().join("sys/fs/cgroup/reserved.slice");
    assert!(!cgroup.exists());
    h.start_agent(&[]);
    let yaml = config_with(
        "enforceNodeAllocatable: [pods, system-reserved]\nsystemReserved: {cpu: 500m, memory: 1Gi}\nsystemReservedCgroup: /reserved.slice\n",
    );
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    let node = h.wait_state(&cm, "Done").await;
    assert!(cgroup.is_dir(), "the agent created {}", cgroup.display());
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(message.contains("/reserved.slice"), "{message:?}");
    assert_eq!(h.configz().await["systemReservedCgroup"], "/reserved.slice");
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_resumes_from_the_persisted_phase() {
    use kubelet_gitops_core::atomic::write_atomic;
    use node_agent::checkpoint::{ApplyPhase, Assigned, CheckpointStore};

    let mut h = Harness::start().await;
    let yaml = config_with("kubeAPIQPS: 7\n");
    let cm = h.publish("general", &yaml).await;
    h.assign(Some(&cm), "30s", "1h").await;
    // An agent that died right after writing the file: checkpointed, the local original
    // saved, the new file written, the kubelet not restarted yet.
    let store = CheckpointStore::open(&h.checkpoint_dir()).unwrap();
    let original = std::fs::read(h.config_file()).unwrap();
    store.save_local_original(&original).unwrap();
    let name = cm.split_once('/').unwrap().1;
    let live = h
        .sim
        .store()
        .get(
            kubelet_gitops_sim::resources::kinds::configmaps(),
            Some("kubelet-gitops"),
            name,
        )
        .unwrap();
    let cp = store
        .save(
            &cm.parse().unwrap(),
            live["metadata"]["uid"].as_str().unwrap(),
            live["metadata"]["resourceVersion"].as_str().unwrap(),
            yaml.as_bytes(),
        )
        .unwrap();
    write_atomic(&h.config_file(), yaml.as_bytes()).unwrap();
    store
        .set_assigned(&Assigned::new(cp, ApplyPhase::Written, 1, None))
        .unwrap();
    let starts = h.sim.kubelet("w1").unwrap().state().starts;

    h.start_agent(&[]);
    let node = h.wait_state(&cm, "Done").await;
    assert_eq!(annotation(&node, STATE), Some("Done"));
    assert_eq!(
        h.configz().await["kubeAPIQPS"],
        7,
        "restarted from phase Written"
    );
    assert_eq!(
        h.sim.kubelet("w1").unwrap().state().starts,
        starts + 1,
        "exactly one restart: the download and write were not redone"
    );
    let events = h.events().await;
    assert!(
        !events.iter().any(|(r, _)| r == "KubeletConfigDownloading"),
        "no download on resume: {events:?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_ready_before_a_restart_are_waited_for_by_a_restarted_agent() {
    let mut h = Harness::start().await;
    h.put_pod("web-0", true);
    h.put_pod("batch-0", false);
    h.start_agent(&[]);
    let cm = h.publish("general", &config_with("kubeAPIQPS: 31\n")).await;
    h.assign(Some(&cm), "3s", "1h").await;

    // Recorded with the write, before the restart; a pod that was not Ready is not.
    let a = h.wait_phase(&cm, "Written").await;
    assert_eq!(a["readyPods"], serde_json::json!(["default/web-0"]));
    // The restart flips the pod (kubernetes/kubernetes#100277) and it stays down, so the
    // agent waits for it after the kubelet is back; it dies while waiting.
    h.put_pod("web-0", false);
    h.wait_phase(&cm, "Restarted").await;
    h.kill_agent().await;
    let a = h.assigned();
    assert_eq!(a["phase"], "Restarted", "killed before verification ended");
    assert_eq!(a["readyPods"], serde_json::json!(["default/web-0"]));

    // The new agent has only the checkpoint to know the pod was Ready before.
    h.start_agent(&[]);
    let node = h.wait_state(&cm, "Done").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.contains("pods Ready before the restart and not Ready 3s after it: default/web-0"),
        "{message:?}"
    );
    assert!(!message.contains("batch-0"), "{message:?}");
    let a = h.assigned();
    assert_eq!(a["phase"], "Verified");
    assert!(a.get("readyPods").is_none(), "dropped once verified: {a}");
    h.shutdown().await;
}

/// The pods cgroup's limits are checked after the verification and at every resync; a
/// difference is reported (message and Event), not rolled back, and goes from the
/// message once the limit is right again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_cgroup_limit_changed_on_the_node_is_reported_not_rolled_back() {
    let mut h = Harness::start().await;
    h.start_agent(&[]);
    let cm = h.publish("general", &config_with("kubeAPIQPS: 27\n")).await;
    h.assign(Some(&cm), "30s", "1h").await;
    let node = h.wait_state(&cm, "Done").await;
    let notes = annotation(&node, MESSAGE).unwrap_or_default().to_string();
    assert!(
        !notes.contains("pods cgroup"),
        "the stand-in kubelet wrote what core computes: {notes:?}"
    );
    let file = h.pods_memory_limit_file();
    let expected = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(expected.parse::<u64>().is_ok(), "{expected:?}");
    let starts = h.sim.kubelet("w1").unwrap().state().starts;

    // Something on the node rewrites the limit (atomically, as a cgroupfs write is to its
    // readers; a truncate-then-write of this plain file could be read half done).
    kubelet_gitops_core::atomic::write_atomic(&file, b"1073741824\n").unwrap();
    let finding = format!(
        "pods cgroup /kubepods.slice limits differ from node allocatable: kubepods.slice/memory.max is 1073741824, expected {expected}"
    );
    let node = h
        .wait_node(
            |n| {
                // The annotations and the condition are two writes: wait for both.
                annotation(n, STATE) == Some("Done")
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains(&finding))
                    && condition(n, "KubeletConfigReady")["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&finding))
            },
            "the mismatch reported",
        )
        .await;
    assert_eq!(
        annotation(&node, MESSAGE),
        Some(format!("{notes}; {finding}").as_str()),
        "after the notes"
    );
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some(cm.as_str()));
    let cond = condition(&node, "KubeletConfigReady");
    assert_eq!(cond["status"], "True", "still Done: {cond}");
    assert!(
        cond["message"]
            .as_str()
            .is_some_and(|m| m.contains(&finding)),
        "{cond}"
    );
    h.wait_event("KubeletConfigCgroupMismatch", &finding).await;
    // Reported once, whatever the resyncs (1s) in between.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let events = h.events().await;
    assert_eq!(
        events
            .iter()
            .filter(|(r, _)| r == "KubeletConfigCgroupMismatch")
            .count(),
        1,
        "{events:?}"
    );
    assert_eq!(
        h.sim.kubelet("w1").unwrap().state().starts,
        starts,
        "not rolled back, not restarted"
    );

    // Put right: the finding goes from the message.
    kubelet_gitops_core::atomic::write_atomic(&file, format!("{expected}\n").as_bytes()).unwrap();
    h.wait_node(
        |n| annotation(n, STATE) == Some("Done") && annotation(n, MESSAGE) == Some(notes.as_str()),
        "the mismatch gone, the notes kept",
    )
    .await;
    h.shutdown().await;
}

/// What one config change costs the API server from the agent (issue 15: during a
/// rollout, the fleet's load from agents is this times the nodes that change): from the
/// assignment to the last-known-good promotion after the grace, a fixed handful of
/// requests, listed by verb and resource in the failure message and printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_apply_costs_the_api_server_a_fixed_handful_of_requests() {
    let mut h = Harness::start().await;
    h.start_agent(&[]);
    h.wait_local_reported().await;
    let cm = h.publish("general", &config_with("kubeAPIQPS: 42\n")).await;
    // The local report's Event is written and the watches are open.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let log = h.sim.request_log().clone();
    log.reset();
    h.assign(Some(&cm), "30s", "1s").await;
    h.wait_node(
        |n| annotation(n, LAST_KNOWN_GOOD) == Some(cm.as_str()),
        "promoted to last-known-good",
    )
    .await;
    h.wait_event("KubeletConfigApplied", &cm).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let agent = kubelet_gitops_sim::reqlog::client_name(Some(&node_agent::agent::user_agent(
        crate::support::NODE,
    )));
    let mine: std::collections::BTreeMap<(String, String), u64> = log
        .counts_by_client()
        .into_iter()
        .filter(|((client, _, _), _)| *client == agent)
        .map(|((_, verb, resource), n)| ((verb, resource), n))
        .collect();
    let total: u64 = mine.values().sum();
    let writes: u64 = mine
        .iter()
        .filter(|((verb, _), _)| kubelet_gitops_sim::reqlog::WRITE_VERBS.contains(&verb.as_str()))
        .map(|(_, n)| n)
        .sum();
    println!("one apply, the agent's requests: {total} ({writes} writes): {mine:?}");
    for e in log.entries().iter().filter(|e| e.client() == agent) {
        println!("  {} {} {:?}", e.verb, e.resource, e.name);
    }
    // The ConfigMap is read by one list and one watch (its name as field selector); the
    // pods are listed once (the health check); the Node is never read (the watch has it)
    // and is patched once a phase (annotations and condition in one nodes/status
    // patch), each phase with its Event: 15 requests, 12 of them writes (measured
    // 2026-11-28; 20 and 17 when annotations and condition were two patches).
    let get = |verb: &str, resource: &str| {
        mine.get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(get("list", "configmaps"), 1, "{mine:?}");
    assert_eq!(get("watch", "configmaps"), 1, "{mine:?}");
    assert_eq!(get("list", "nodes") + get("get", "nodes"), 0, "{mine:?}");
    let node_writes = get("patch", "nodes") + get("patch", "nodes/status");
    assert!(
        node_writes <= 6,
        "one write a phase: {node_writes} Node patches: {mine:?}"
    );
    assert!(total <= 15, "{total} requests: {mine:?}");
    h.shutdown().await;
}
