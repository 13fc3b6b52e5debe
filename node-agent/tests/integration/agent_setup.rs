//! What the agent checks against the node's kubelet set-up before it touches the kubelet
//! (a kubelet flag that breaks the config, a cgroup driver that is not the runtime's),
//! the set-up it reports on its Node for the reconciler, and a kubelet that takes the
//! runtime's cgroup driver whatever the config says.

use kubelet_gitops_core::node_setup::{Mode, NodeSetup};
use kubelet_gitops_core::protocol::{CURRENT_CONFIG, MESSAGE, NODE_SETUP, STATE};
use kubelet_gitops_sim::kubelet::{KubeletPaths, kubeadm_flags_env};

use crate::support::agent::{BASE_CONFIG, Harness, annotation, config_with};

/// Adds `extra` to the kubelet's command line on the node (`kubeadm-flags.env`); the
/// agent reads it at its next pass, the kubelet at its next start.
fn add_kubelet_flags(h: &Harness, extra: &[&str]) {
    let path = h.on_node(KubeletPaths::FLAGS_ENV);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut args = kubelet_gitops_core::flags::kubeadm_args(&text).unwrap();
    args.extend(extra.iter().map(|s| s.to_string()));
    std::fs::write(&path, kubeadm_flags_env(&args)).unwrap();
}

/// The Node's set-up report, once it is there and `pred` holds for it.
async fn reported_setup(h: &Harness, pred: impl Fn(&NodeSetup) -> bool) -> NodeSetup {
    let node = h
        .wait_node(
            |n| {
                annotation(n, NODE_SETUP)
                    .and_then(|t| NodeSetup::from_annotation(t).ok())
                    .is_some_and(|s| pred(&s))
            },
            "the set-up reported",
        )
        .await;
    NodeSetup::from_annotation(annotation(&node, NODE_SETUP).unwrap()).unwrap()
}

/// The sim's config.yaml without its `cgroupDriver: systemd` line: the kubelet's default,
/// cgroupfs, applies.
fn without_cgroup_driver(extra: &str) -> String {
    format!(
        "{}{extra}",
        BASE_CONFIG.replace("cgroupDriver: systemd\n", "")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_flag_that_breaks_the_config_is_named_in_the_degraded_message() {
    let mut h = Harness::start().await;
    add_kubelet_flags(&h, &["--cgroups-per-qos=false"]);
    h.start_agent(&[]);
    h.wait_node(|n| annotation(n, CURRENT_CONFIG) == Some("local"), "local")
        .await;
    let starts = h.sim.kubelet("w1").unwrap().state().starts;

    // Only maxPods: enforceNodeAllocatable stays at its default, [pods].
    let config = h.publish("general", &config_with("maxPods: 64\n")).await;
    h.assign(Some(&config), "30s", "1h").await;
    let node = h.wait_state(&config, "Degraded").await;
    assert_eq!(
        annotation(&node, MESSAGE),
        Some(
            "failed to validate config: invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained in enforceNodeAllocatable (--enforce-node-allocatable) (value set by the kubelet flag --cgroups-per-qos)"
        )
    );
    assert_eq!(
        h.sim.kubelet("w1").unwrap().state().starts,
        starts,
        "kubelet untouched"
    );

    // The report carries what the reconciler needs to say the same before publishing.
    let setup = reported_setup(&h, |s| {
        s.flags.iter().any(|f| f.contains("cgroups-per-qos"))
    })
    .await;
    assert_eq!(
        setup.flags,
        ["--max-pods=50", "--cgroups-per-qos=false"],
        "the config flags, not --node-ip, --config or --config-dir"
    );
    assert_eq!(setup.mode, Mode::Replace);
    assert_eq!(setup.runtime_cgroup_driver.as_deref(), Some("systemd"));
    let verdict = setup.check(
        "pools/general.yaml",
        config_with("maxPods: 64\n").as_bytes(),
    );
    let kubelet_gitops_core::node_setup::Verdict::Refused(r) = verdict else {
        panic!("the report does not refuse it: {verdict:?}");
    };
    assert_eq!(
        format!("{r}"),
        annotation(&node, MESSAGE).unwrap(),
        "the reconciler's check says what the node says"
    );
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_leaving_cgroup_driver_unset_is_refused_before_the_kubelet_is_touched() {
    let mut h = Harness::start().await;
    let before = h.start_agent_on_local().await;

    // In replace mode the payload is the whole file: without cgroupDriver the kubelet's
    // default, cgroupfs, would replace the node's systemd.
    let config = h
        .publish("general", &without_cgroup_driver("maxPods: 64\n"))
        .await;
    h.assign(Some(&config), "30s", "1h").await;
    let node = h.wait_state(&config, "Degraded").await;
    let message = annotation(&node, MESSAGE).unwrap_or_default();
    assert!(
        message.starts_with(
            "failed to validate config: cgroupDriver is \"cgroupfs\" (the kubelet's default: nothing sets cgroupDriver) but the container runtime's cgroup driver is \"systemd\""
        ) && message.ends_with("set cgroupDriver: systemd in the pool or the base"),
        "{message}"
    );
    h.assert_untouched(&before);

    // Set to the runtime's driver, the same config goes through.
    let fixed = h.publish("general", &config_with("maxPods: 64\n")).await;
    h.assign(Some(&fixed), "30s", "1h").await;
    h.wait_state(&fixed, "Done").await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_is_reported_on_the_node_and_follows_changes() {
    let mut h = Harness::start().await;
    h.start_agent(&[]);
    let setup = reported_setup(&h, |_| true).await;
    assert_eq!(setup.flags, ["--max-pods=50"]);
    assert!(setup.drop_ins.is_empty());
    assert_eq!(setup.cgroup_version.as_deref(), Some("v2"));

    // A drop-in appears on the node: the next pass reports it.
    let drop_in = h.on_node(&format!("{}/10-qps.conf", KubeletPaths::DROP_IN_DIR));
    std::fs::create_dir_all(drop_in.parent().unwrap()).unwrap();
    std::fs::write(
        &drop_in,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeAPIQPS: 20\nstaticPodURLHeader: {Authorization: [Bearer secret]}\n",
    )
    .unwrap();
    let setup = reported_setup(&h, |s| !s.drop_ins.is_empty()).await;
    assert_eq!(
        setup.drop_ins[0].path,
        format!("{}/10-qps.conf", KubeletPaths::DROP_IN_DIR)
    );
    assert_eq!(setup.drop_ins[0].config.as_ref().unwrap()["kubeAPIQPS"], 20);
    let text = annotation(&h.node(), NODE_SETUP).unwrap().to_string();
    assert!(!text.contains("secret"), "{text}");

    // Removed by hand: written again.
    let patch = serde_json::json!({"metadata": {"annotations": { NODE_SETUP: null }}});
    kube::Api::<k8s_openapi::api::core::v1::Node>::all(h.client.clone())
        .patch(
            "w1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("node patched");
    reported_setup(&h, |s| !s.drop_ins.is_empty()).await;
    h.shutdown().await;
}

/// A kubelet whose runtime reports its cgroup driver (containerd 2.x) runs and shows that
/// driver whatever the config says: a config that leaves cgroupDriver unset (here the
/// node's own, which the agent returns to) is verified, not rolled back over configz's
/// `cgroupDriver: systemd`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configz_showing_the_runtimes_cgroup_driver_is_verified() {
    let mut h = Harness::start_with_node_fields(&["runtimeCgroupDriver: systemd"]).await;
    // The node's own config leaves the driver to the runtime.
    std::fs::write(h.config_file(), without_cgroup_driver("maxPods: 110\n")).unwrap();
    let kubelet = h.sim.kubelet("w1").unwrap().clone();
    kubelet.restart().await;
    let configz = h.configz().await;
    assert_eq!(configz["cgroupDriver"], "systemd");

    h.start_agent(&[]);
    h.wait_node(|n| annotation(n, CURRENT_CONFIG) == Some("local"), "local")
        .await;
    let config = h.publish("general", &config_with("maxPods: 64\n")).await;
    h.assign(Some(&config), "30s", "1h").await;
    h.wait_state(&config, "Done").await;
    let starts = kubelet.state().starts;

    // Back to the node's own config: expected cgroupfs (unset), configz shows systemd.
    h.assign(None, "30s", "1h").await;
    let node = h
        .wait_node(
            |n| annotation(n, CURRENT_CONFIG) == Some("local") && annotation(n, STATE).is_none(),
            "back on local",
        )
        .await;
    assert_eq!(annotation(&node, MESSAGE), None, "{node}");
    assert!(kubelet.state().starts > starts, "restarted on local");
    h.shutdown().await;
}
