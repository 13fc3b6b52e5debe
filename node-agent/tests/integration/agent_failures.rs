//! Configs that must not end on the kubelet: rejected before the kubelet is touched, or
//! rolled back when the kubelet does not come back healthy.

use std::time::{Duration, Instant};

use crate::support::agent::{Harness, PATIENCE, annotation, condition, config_with};
use kubelet_gitops_core::protocol::{self, CURRENT_CONFIG, MESSAGE, OBSERVED_CONFIG, STATE};
use kubelet_gitops_sim::faults::FaultConfig;
use serde_json::Value;

/// Makes the stand-in kubelet unable to start with a `cgroupRoot` of `/blocked`: with
/// the systemd driver its slice is `blocked.slice`, and a file is in the way.
fn block_cgroup_root(h: &Harness) {
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
}

/// Waits until `meta/assigned` satisfies `pred`; returns it.
async fn wait_assigned(h: &Harness, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let a = h.assigned();
        if pred(&a) {
            return a;
        }
        assert!(Instant::now() < deadline, "meta/assigned never {what}: {a}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_the_node_rejects_leaves_the_kubelet_alone_and_says_why() {
    let mut h = Harness::start().await;
    let before = h.start_agent_on_local().await;

    let bad = h
        .publish(
            "general",
            &config_with("imageGCHighThresholdPercent: 150\n"),
        )
        .await;
    h.assign(Some(&bad), "30s", "1h").await;
    let node = h.wait_state(&bad, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("failed to validate config: ")
            && message.contains("imageGCHighThresholdPercent"),
        "{message:?}"
    );
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    let cond = condition(&node, "KubeletConfigReady");
    assert_eq!(
        (cond["status"].as_str(), cond["reason"].as_str()),
        (Some("False"), Some("Degraded"))
    );
    h.assert_untouched(&before);

    // A payload that does not decode is a load error, with the field and a suggestion.
    let typo = h.publish("general", &config_with("maxPod: 10\n")).await;
    h.assign(Some(&typo), "30s", "1h").await;
    let node = h.wait_state(&typo, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("failed to load config: "),
        "{message:?}"
    );
    assert!(message.contains("maxPods"), "did-you-mean: {message:?}");
    h.wait_event("KubeletConfigRejected", "failed to load config")
        .await;
    assert_eq!(std::fs::read(h.config_file()).unwrap(), before.original);

    // A ConfigMap that does not exist is a download failure, retried.
    let missing = "kubelet-gitops/kubelet-general-nothere";
    h.assign(Some(missing), "30s", "1h").await;
    let node = h.wait_state(missing, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with("failed to sync: failed to download config: ")
            && message.contains("not found"),
        "{message:?}"
    );
    // Posted as a failed download, not as a config the node rejected.
    h.wait_event("KubeletConfigDownloadFailed", "not found")
        .await;
    let events = h.events().await;
    assert!(
        !events
            .iter()
            .any(|(r, m)| r == "KubeletConfigRejected" && m.contains("failed to download")),
        "{events:?}"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_whose_content_is_not_the_one_its_name_was_derived_from_is_refused() {
    let mut h = Harness::start().await;
    let before = h.start_agent_on_local().await;

    // A valid config, under the name of another valid config: the name promises content
    // the ConfigMap does not hold (replaced after the reconciler named it).
    let named_for = config_with(
        "maxPods: 50
",
    );
    let holds = config_with(
        "maxPods: 51
",
    );
    let name = protocol::configmap_name("general", named_for.as_bytes());
    let swapped = h.publish_named(&name, "general", &holds).await;
    h.assign(Some(&swapped), "30s", "1h").await;
    let node = h.wait_state(&swapped, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    let would_be = protocol::configmap_name("general", holds.as_bytes());
    assert_eq!(
        message,
        format!(
            "failed to load config: ConfigMap {name} does not hold the content its name was \
             derived from (that content would be named {would_be}): it was changed or replaced \
             after it was published"
        )
    );
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    h.wait_event("KubeletConfigRejected", "does not hold the content")
        .await;
    h.assert_untouched(&before);

    // The same content under its own name applies: the check refuses only the mismatch.
    let honest = h.publish("general", &holds).await;
    h.assign(Some(&honest), "30s", "1h").await;
    h.wait_state(&honest, "Done").await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_the_kubelet_cannot_start_with_is_rolled_back() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    h.start_agent(&[]);
    // Valid for the kubelet's rules and the agent's pre-flight, but the kubelet cannot
    // create its pods cgroup under cgroupRoot (with the systemd driver /blocked is the
    // slice blocked.slice): something on the node is in the way.
    std::fs::write(
        h.root().join("sys/fs/cgroup/blocked.slice"),
        b"not a cgroup\n",
    )
    .unwrap();
    let bad = h
        .publish("general", &config_with("cgroupRoot: /blocked\n"))
        .await;
    h.assign(Some(&bad), "3s", "1h").await;
    let node = h
        .wait_node(
            |n| {
                annotation(n, kubelet_gitops_core::protocol::STATE) == Some("RolledBack")
                    && condition(n, "KubeletConfigReady")["reason"] == "RolledBack"
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("rolled back to"))
            },
            "RolledBack, finished",
        )
        .await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    // Short enough to read at 3 a.m.: the timeout, the endpoint and its one cause, the
    // kubelet's exit reason from the Node, and what was done.
    let url = format!("{}/healthz", h.kubelet_url());
    assert_eq!(
        message,
        format!(
            "kubelet did not become healthy within 3s: healthz {url}: connection refused; \
             node Ready=False: kubelet is not running: Failed to start ContainerManager: \
             failed to create \"/blocked.slice/blocked-kubepods.slice\" cgroup: \
             Not a directory (os error 20); rolled back to local"
        ),
        "no client error chain (error sending request, tcp connect error, os error 111)"
    );
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    assert_eq!(
        annotation(&node, kubelet_gitops_core::protocol::OBSERVED_CONFIG),
        Some(bad.as_str())
    );
    assert_eq!(
        condition(&node, "KubeletConfigReady")["reason"],
        "RolledBack"
    );
    assert_eq!(
        h.config_file_valid(),
        original,
        "the node's own config is back"
    );
    let k = h.sim.kubelet("w1").unwrap();
    assert!(k.is_running(), "{:?}", k.state());
    h.wait_event("KubeletConfigRolledBack", "kubelet did not become healthy")
        .await;

    // The failed config is not tried again by itself; a new one is.
    let starts = k.state().starts;
    let good = h.publish("general", &config_with("kubeAPIQPS: 9\n")).await;
    h.assign(Some(&good), "30s", "1h").await;
    h.wait_state(&good, "Done").await;
    assert_eq!(k.state().starts, starts + 1);
    assert_eq!(h.configz().await["kubeAPIQPS"], 9);
    h.shutdown().await;
}

/// The rollback of a config the kubelet cannot start with does not wait for the API
/// server: with every API request failing, the verdict is recorded on the node, the
/// fallback written, the kubelet restarted and verified on it; the Node learns of it when
/// the API server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_does_not_wait_for_the_api_server() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    block_cgroup_root(&h);
    h.start_agent(&[]);
    let bad = h
        .publish(
            "general",
            &config_with("cgroupRoot: /blocked\nkubeAPIQPS: 21\n"),
        )
        .await;
    h.assign(Some(&bad), "3s", "1h").await;
    // The kubelet was restarted with it (and cannot start); the Node says Verifying.
    h.wait_phase(&bad, "Restarted").await;
    h.wait_state(&bad, "Verifying").await;
    h.sim.set_faults(FaultConfig {
        error_500_rate: 1.0,
        ..FaultConfig::default()
    });

    let a = wait_assigned(&h, "showed the fallback verified", |a| {
        a["checkpoint"]["config"] == "local" && a["phase"] == "Verified"
    })
    .await;
    assert_eq!(a["failed"]["config"], bad.as_str(), "the verdict: {a}");
    assert!(
        a["failed"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("kubelet did not become healthy within 3s")),
        "{a}"
    );
    assert!(
        a["failed"].get("reportedTo").is_none(),
        "not reported yet: {a}"
    );
    assert_eq!(h.config_file_valid(), original, "the fallback is on disk");
    let k = h.sim.kubelet("w1").unwrap();
    assert!(k.is_running(), "{:?}", k.state());
    assert_eq!(h.configz().await["kubeAPIQPS"], 50, "the kubelet runs it");
    let node = h.node();
    assert_eq!(
        annotation(&node, STATE),
        Some("Verifying"),
        "the API server has not heard of the rollback"
    );
    assert_eq!(h.sim.server().faults().error_500_rate, 1.0, "still failing");

    // The API server is back: the report follows, and the failed config stays failed.
    let starts = k.state().starts;
    h.sim.set_faults(FaultConfig::default());
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("RolledBack")
                    && condition(n, "KubeletConfigReady")["reason"] == "RolledBack"
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("rolled back to local"))
            },
            "RolledBack reported",
        )
        .await;
    assert_eq!(annotation(&node, OBSERVED_CONFIG), Some(bad.as_str()));
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    h.wait_event("KubeletConfigRolledBack", "kubelet did not become healthy")
        .await;
    let uid = node["metadata"]["uid"].clone();
    wait_assigned(&h, "recorded the report", |a| {
        a["failed"]["reportedTo"] == uid
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        k.state().starts,
        starts,
        "the failed config is not tried again"
    );
    assert_eq!(h.config_file_valid(), original);
    h.shutdown().await;
}

/// When the fallback does not come back either, the Node says so, with the files a
/// person needs, and an Event; a node fixed by hand recovers by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_that_fails_too_is_reported_for_a_person_to_act() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    block_cgroup_root(&h);
    h.start_agent(&[]);
    let bad = h
        .publish("general", &config_with("cgroupRoot: /blocked\n"))
        .await;
    h.assign(Some(&bad), "2s", "1h").await;
    let a = h.wait_phase(&bad, "Restarted").await;
    // Now the node breaks for any config: the pods cgroup of the local config cannot be
    // created either.
    let pods = h.root().join("sys/fs/cgroup/kubepods.slice");
    let aside = h.root().join("sys/fs/cgroup/kubepods.slice.aside");
    std::fs::rename(&pods, &aside).unwrap();
    std::fs::write(&pods, b"in the way\n").unwrap();

    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("RolledBack")
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("did not help either"))
            },
            "the rollback failed",
        )
        .await;
    let message = annotation(&node, MESSAGE).unwrap();
    assert!(
        message.starts_with("kubelet did not become healthy within 2s: ")
            && message.contains("; rolling back to local did not help either: kubelet did not become healthy within 2s: "),
        "{message}"
    );
    assert!(message.contains("a person must act"), "{message}");
    let cp = h.checkpoint_dir();
    let failed_file = cp
        .join("checkpoints")
        .join(a["checkpoint"]["uid"].as_str().unwrap())
        .join(a["checkpoint"]["resourceVersion"].as_str().unwrap())
        .join("kubelet");
    for file in [cp.join("local/kubelet"), failed_file] {
        assert!(
            message.contains(&file.display().to_string()),
            "names {}: {message}",
            file.display()
        );
    }
    assert_eq!(annotation(&node, OBSERVED_CONFIG), Some(bad.as_str()));
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    let cond = condition(&node, "KubeletConfigReady");
    assert_eq!(
        (cond["status"].as_str(), cond["reason"].as_str()),
        (Some("False"), Some("RolledBack"))
    );
    h.wait_event("KubeletConfigRollbackFailed", "a person must act")
        .await;
    assert_eq!(
        h.config_file_valid(),
        original,
        "the fallback stays written"
    );

    // A person fixes the node; systemd (here, the test) starts the kubelet again.
    std::fs::remove_file(&pods).unwrap();
    std::fs::rename(&aside, &pods).unwrap();
    h.sim.kubelet("w1").unwrap().restart().await;
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("RolledBack")
                    && annotation(n, MESSAGE).is_some_and(|m| {
                        m.ends_with("rolled back to local") && !m.contains("did not help")
                    })
            },
            "recovered",
        )
        .await;
    assert_eq!(annotation(&node, CURRENT_CONFIG), Some("local"));
    let events = h.events().await;
    assert_eq!(
        events
            .iter()
            .filter(|(r, _)| r == "KubeletConfigRollbackFailed")
            .count(),
        1,
        "one Event for the failed fallback, not one per re-check: {events:?}"
    );
    h.shutdown().await;
}

/// A config file a person puts back by hand while the agent verifies (here: while it
/// was down) is not the config being verified: verification fails, the apply is rolled
/// back, and the failed config is not written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_put_back_by_hand_during_an_apply_is_rolled_back_not_applied_again() {
    let mut h = Harness::start().await;
    let original = std::fs::read(h.config_file()).unwrap();
    block_cgroup_root(&h);
    h.start_agent(&[]);
    let bad = h
        .publish(
            "general",
            &config_with("cgroupRoot: /blocked\nkubeAPIQPS: 23\n"),
        )
        .await;
    h.assign(Some(&bad), "30s", "1h").await;
    h.wait_phase(&bad, "Restarted").await;
    h.kill_agent().await;

    // The node is NotReady; a person puts its own config back and starts the kubelet.
    kubelet_gitops_core::atomic::write_atomic(&h.config_file(), &original).unwrap();
    let starts = {
        let k = h.sim.kubelet("w1").unwrap();
        k.restart().await;
        assert!(k.is_running(), "{:?}", k.state());
        k.state().starts
    };
    h.wait_node(|n| crate::support::agent::ready(n) == "True", "Ready again")
        .await;

    h.start_agent(&[]);
    let k = h.sim.kubelet("w1").unwrap();
    let node = h
        .wait_node(
            |n| {
                annotation(n, STATE) == Some("RolledBack")
                    && annotation(n, MESSAGE).is_some_and(|m| m.contains("rolled back to local"))
            },
            "RolledBack",
        )
        .await;
    let message = annotation(&node, MESSAGE).unwrap();
    let expected = format!(
        "kubelet did not become healthy within 30s: {} read back is not the config written",
        h.config_file().display()
    );
    assert!(message.starts_with(&expected), "{message}");
    assert_eq!(h.config_file_valid(), original);
    assert_eq!(
        k.state().starts,
        starts + 1,
        "one restart, onto the fallback: the failed config was not written again"
    );
    assert_eq!(h.configz().await["kubeAPIQPS"], 50);
    let events = h.events().await;
    for reason in ["KubeletConfigDrift", "KubeletConfigApplied"] {
        assert!(
            !events.iter().any(|(r, _)| r == reason),
            "no {reason}: {events:?}"
        );
    }
    h.shutdown().await;
}

/// A report the API server refuses with a conflict (or a 5xx) is tried again at once, a
/// few times ([`node_agent::report::WRITE_RETRY`]), before the step that wrote it fails
/// and the agent backs off: a flaky API server does not slow every node's apply.
#[tokio::test]
async fn a_report_refused_with_a_conflict_is_tried_again_at_once_then_given_up() {
    use k8s_openapi::api::core::v1::Node;
    use kubelet_gitops_core::protocol::State;
    use node_agent::report::{Report, Reporter, WRITE_RETRY};

    let h = Harness::start().await;
    let node: Node = serde_json::from_value(h.node()).unwrap();
    let metrics = node_agent::agent::metrics::Metrics::new();
    let reporter = Reporter::new(h.client.clone(), crate::support::NODE).counting(metrics.clone());
    let wanted = Report {
        state: Some(State::Applying),
        observed: Some("kubelet-gitops/kubelet-general-abc".into()),
        current: Some("local".into()),
        last_known_good: Some("local".into()),
        message: Some("applying".into()),
    };
    let log = h.sim.request_log().clone();
    let patches = || {
        log.entries()
            .into_iter()
            // The test's client: the stand-in kubelet writes the store directly.
            .filter(|e| e.verb == "patch" && e.client() == "unknown")
            .map(|e| (e.resource, e.status))
            .collect::<Vec<_>>()
    };
    log.reset();
    h.sim.set_faults(FaultConfig {
        conflict_409_rate_on_writes: 1.0,
        ..FaultConfig::default()
    });
    let refused = reporter.publish(&node, &wanted).await;
    h.sim.set_faults(FaultConfig::default());
    let error = refused.expect_err("every write is refused");
    assert_eq!(
        patches(),
        vec![("nodes/status".to_string(), 409); WRITE_RETRY.attempts as usize],
        "{error}"
    );
    let counted = format!(
        "kubelet_gitops_agent_api_errors_total{{verb=\"patch\",resource=\"nodes/status\",code=\"409\"}} {}",
        WRITE_RETRY.attempts
    );
    assert!(metrics.encode().contains(&counted), "{}", metrics.encode());

    // With the server back, the same report goes through on its first try.
    log.reset();
    let written = reporter.publish(&node, &wanted).await.unwrap();
    assert!(written.is_some());
    assert_eq!(patches(), [("nodes/status".to_string(), 200)]);
    let node = h.node();
    assert_eq!(annotation(&node, STATE), Some("Applying"));
    assert_eq!(condition(&node, "KubeletConfigReady")["status"], "False");
}

/// A write the API server does not answer is given up at the reporter's deadline, its
/// retries included, so that a report never holds up the agent's next step (a
/// verification that ends in a rollback) for longer.
#[tokio::test]
async fn a_report_the_api_server_does_not_answer_is_given_up_at_the_deadline() {
    use k8s_openapi::api::core::v1::Node;
    use kubelet_gitops_core::protocol::State;
    use node_agent::report::{Report, Reporter, WRITE_DEADLINE};

    let h = Harness::start().await;
    let node: Node = serde_json::from_value(h.node()).unwrap();
    let metrics = node_agent::agent::metrics::Metrics::new();
    let reporter = Reporter::new(h.client.clone(), crate::support::NODE)
        .counting(metrics.clone())
        .with_deadline(Duration::from_secs(1));
    assert!(
        WRITE_DEADLINE >= Duration::from_secs(5),
        "the default leaves room"
    );
    h.sim.set_faults(FaultConfig {
        latency: Duration::from_secs(4),
        ..FaultConfig::default()
    });
    let wanted = Report {
        state: Some(State::Verifying),
        observed: Some("kubelet-gitops/kubelet-general-abc".into()),
        current: Some("kubelet-gitops/kubelet-general-abc".into()),
        last_known_good: Some("local".into()),
        message: None,
    };
    let result = reporter.publish(&node, &wanted).await;
    h.sim.set_faults(FaultConfig::default());
    let error = kubelet_gitops_core::message::error_chain(&result.expect_err("no answer"));
    assert!(
        error.starts_with("failed to patch the KubeletConfigReady condition of node w1")
            && error.contains("no answer within 1s"),
        "{error}"
    );
    assert!(
        metrics.encode().contains(
            "kubelet_gitops_agent_api_errors_total{verb=\"patch\",resource=\"nodes/status\",code=\"0\"} 1"
        ),
        "{}",
        metrics.encode()
    );
}
