//! validate (with cgroups) against the sim's nodes: what the agent accepts the stand-in
//! kubelet starts with, what it rejects it says why in the kubelet's words, and a reserved
//! cgroup the agent creates is one the stand-in accepts, on cgroup v1 and v2.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::host::{config, handle, kubelet_client, node_context, start_sim};
use kubelet_gitops_core::atomic::write_atomic;
use kubelet_gitops_core::protocol::reason;
use kubelet_gitops_sim::kubelet::{KubeletPaths, KubeletPhase};
use node_agent::cgroups::{self, verify_pods};
use node_agent::config_file::Placement;
use node_agent::hostflags::host_path;
use node_agent::validate::{Rejection, effective_config, validate_payload};

const KUBE_RESERVED: &str = "enforceNodeAllocatable: [pods, kube-reserved]\nkubeReserved: {cpu: 500m, memory: 512Mi}\nkubeReservedCgroup: /kube.slice\n";

async fn created_cgroup_is_accepted_by_the_stand_in(cgroup_v2: bool) {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, cgroup_v2).await;
    let k = handle(&sim);
    let kubelet = kubelet_client(&sim);
    let ctx = node_context(&sim);
    let payload = config(&sim, 30, KUBE_RESERVED);

    // Control: written without the agent's pre-flight, the stand-in refuses to start.
    let original = std::fs::read(&k.paths().config).unwrap();
    write_atomic(&k.paths().config, payload.as_bytes()).unwrap();
    kubelet.restart().await.unwrap();
    let reason = k.exit_reason().unwrap_or_default();
    assert!(
        reason.contains("Failed to enforce Kube Reserved Cgroup Limits")
            && reason.contains("cgroup does not exist"),
        "{reason}"
    );
    write_atomic(&k.paths().config, &original).unwrap();
    kubelet.restart().await.unwrap();
    assert_eq!(k.state().phase, KubeletPhase::Running);

    // With it: the cgroup is created, then the kubelet starts and runs the config.
    let v = validate_payload(payload.as_bytes(), &ctx).unwrap();
    assert_eq!(v.created_cgroups, ["/kube.slice"]);
    assert!(cgroups::exists(&ctx.cgroups, "/kube.slice"));
    write_atomic(&k.paths().config, payload.as_bytes()).unwrap();
    kubelet.restart().await.unwrap();
    assert_eq!(
        k.state().phase,
        KubeletPhase::Running,
        "{:?}",
        k.exit_reason()
    );
    kubelet
        .wait_ready(&v.effective, Duration::from_secs(10))
        .await
        .unwrap();

    // The pods cgroup the stand-in wrote is what the agent computes; a changed value is
    // reported.
    assert_eq!(verify_pods(&ctx.cgroups, &v.layout).unwrap(), None);
    let pods = v.layout.pods.as_ref().unwrap();
    let mem = pods
        .limits
        .iter()
        .find(|l| l.controller == "memory")
        .unwrap();
    std::fs::write(ctx.cgroups.root.join(&mem.path), "1073741824\n").unwrap();
    let msg = verify_pods(&ctx.cgroups, &v.layout).unwrap().unwrap();
    assert!(
        msg.contains(&mem.path) && msg.contains("is 1073741824"),
        "{msg}"
    );
    // The stand-in's own allocatable agrees with the agent's.
    let published = k.state().allocatable.unwrap();
    assert_eq!(
        published["memory"],
        v.allocatable.get("memory").unwrap().canonical()
    );
    assert_eq!(
        published["cpu"],
        v.allocatable.get("cpu").unwrap().canonical()
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_created_cgroup_is_accepted_by_the_stand_in_v2() {
    created_cgroup_is_accepted_by_the_stand_in(true).await;
}

#[tokio::test]
async fn a_created_cgroup_is_accepted_by_the_stand_in_v1() {
    created_cgroup_is_accepted_by_the_stand_in(false).await;
}

fn rejected(r: Result<node_agent::validate::Validated, Rejection>) -> Rejection {
    match r {
        Ok(v) => panic!("accepted: {:?}", v.effective),
        Err(r) => r,
    }
}

#[tokio::test]
async fn rejections_in_the_kubelets_words() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let ctx = node_context(&sim);
    // Named as the node (and the kubelet's flags) name it.
    let config_path = KubeletPaths::CONFIG;

    // Strict decode: a misspelled field, with file, line and suggestion.
    let r = rejected(validate_payload(
        config(&sim, 30, "maxPod: 3\n").as_bytes(),
        &ctx,
    ));
    assert_eq!(r.reason, reason::LOAD_ERROR);
    assert!(r.detail.starts_with(config_path), "{}", r.detail);
    assert!(
        r.detail.contains("maxPod") && r.detail.contains("did you mean `maxPods`"),
        "{}",
        r.detail
    );
    let r = rejected(validate_payload(b"kind: ConfigMap\napiVersion: v1\n", &ctx));
    assert_eq!(r.reason, reason::LOAD_ERROR, "{}", r.detail);

    // The kubelet's validation.
    let r = rejected(validate_payload(
        config(&sim, 30, "imageGCHighThresholdPercent: 101\n").as_bytes(),
        &ctx,
    ));
    assert_eq!(r.reason, reason::VALIDATE_ERROR);
    assert!(
        r.detail.contains("imageGCHighThresholdPercent"),
        "{}",
        r.detail
    );

    // Pre-flight: reservations beyond capacity.
    let r = rejected(validate_payload(
        config(&sim, 30, "systemReserved: {memory: 9Gi}\n").as_bytes(),
        &ctx,
    ));
    assert_eq!(r.reason, reason::VALIDATE_ERROR);
    assert!(
        r.detail.contains("invalid Node Allocatable configuration"),
        "{}",
        r.detail
    );
    // ... or leaving nothing.
    let r = rejected(validate_payload(
        config(&sim, 30, "systemReserved: {cpu: \"4\"}\n").as_bytes(),
        &ctx,
    ));
    assert!(r.detail.contains("no allocatable cpu"), "{}", r.detail);

    // Pre-flight: files the kubelet needs at start.
    let r = rejected(validate_payload(
        config(
            &sim,
            30,
            "tlsCertFile: /nonexistent/kubelet.crt\ntlsPrivateKeyFile: /nonexistent/kubelet.key\n",
        )
        .as_bytes(),
        &ctx,
    ));
    assert_eq!(r.reason, reason::VALIDATE_ERROR);
    assert!(
        r.detail.contains("tlsCertFile /nonexistent/kubelet.crt")
            && r.detail.contains("tlsPrivateKeyFile"),
        "{}",
        r.detail
    );
    let r = rejected(validate_payload(
        config(
            &sim,
            30,
            "containerRuntimeEndpoint: unix:///nonexistent/crio.sock\n",
        )
        .as_bytes(),
        &ctx,
    ));
    assert!(
        r.detail.contains("containerRuntimeEndpoint")
            && r.detail.contains("/nonexistent/crio.sock"),
        "{}",
        r.detail
    );

    // Nothing was created for a rejected config.
    assert!(!cgroups::exists(&ctx.cgroups, "/kube.slice"));
    sim.shutdown().await;
}

#[tokio::test]
async fn a_missing_path_is_new_or_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let k = handle(&sim);
    let ctx = node_context(&sim);
    // A path on the node (kubeadm's /etc/kubernetes/manifests is there already).
    let manifests = "/srv/manifests";

    // Newly named and missing: rejected.
    let with_static = config(&sim, 30, &format!("staticPodPath: {manifests}\n"));
    let r = rejected(validate_payload(with_static.as_bytes(), &ctx));
    assert!(
        r.detail.contains("staticPodPath") && r.detail.contains("static pods"),
        "{}",
        r.detail
    );

    // Already what the node runs with: a warning.
    write_atomic(&k.paths().config, with_static.as_bytes()).unwrap();
    let v = validate_payload(
        config(&sim, 25, &format!("staticPodPath: {manifests}\n")).as_bytes(),
        &ctx,
    )
    .unwrap();
    assert!(
        v.warnings
            .iter()
            .any(|w| w.contains("staticPodPath") && w.contains("as in the running config")),
        "{:?}",
        v.warnings
    );
    assert_eq!(v.current.as_ref().and_then(|c| c.max_pods), Some(30));
    assert_eq!(v.effective.max_pods, Some(25));

    // Present on the node: nothing to say.
    std::fs::create_dir_all(host_path(&ctx.host_root, manifests)).unwrap();
    let v = validate_payload(with_static.as_bytes(), &ctx).unwrap();
    assert!(
        v.warnings.iter().all(|w| !w.contains("staticPodPath")),
        "{:?}",
        v.warnings
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn flag_overrides_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), Some("--max-pods=50 --kube-api-qps=20"), true).await;
    let ctx = node_context(&sim);
    let v = validate_payload(config(&sim, 30, "kubeAPIQPS: 20\n").as_bytes(), &ctx).unwrap();
    assert_eq!(v.effective.max_pods, Some(50), "the flag wins");
    let fields: Vec<(&str, String, String)> = v
        .overrides
        .iter()
        .map(|o| {
            (
                o.field.as_str(),
                o.file_value
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                o.flag_value.to_string(),
            )
        })
        .collect();
    // kubeAPIQPS is set to the same value by file and flag: not an override.
    assert_eq!(fields, [("maxPods", "30".to_string(), "50".to_string())]);
    assert_eq!(v.overrides[0].flag, "--max-pods");
    sim.shutdown().await;
}

#[tokio::test]
async fn drop_in_mode_merges_over_the_nodes_file() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let k = handle(&sim);
    let kubelet = kubelet_client(&sim);
    let mut ctx = node_context(&sim);
    // The directory as the node (and the kubelet's --config-dir) names it.
    let drop_in_dir = PathBuf::from(KubeletPaths::DROP_IN_DIR);
    ctx.placement = Placement::DropIn {
        dir: drop_in_dir.clone(),
        name: "50-kubelet-gitops.conf".into(),
    };
    // Someone else's drop-in sorts after ours and wins for what it sets.
    write_atomic(
        &k.paths().drop_in_dir.join("90-admin.conf"),
        b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nimageGCHighThresholdPercent: 90\n",
    )
    .unwrap();
    let fragment = b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 44\nimageGCHighThresholdPercent: 80\n";
    let v = validate_payload(fragment, &ctx).unwrap();
    assert_eq!(v.effective.max_pods, Some(44));
    assert_eq!(v.effective.image_gc_high_threshold_percent, Some(90));
    assert_eq!(
        v.effective.cgroup_driver.as_deref(),
        Some("systemd"),
        "from the node's file"
    );

    // Written where the stand-in reads drop-ins, it runs exactly that.
    write_atomic(&host_path(&ctx.host_root, ctx.placement.target()), fragment).unwrap();
    kubelet.restart().await.unwrap();
    kubelet
        .wait_ready(&v.effective, Duration::from_secs(10))
        .await
        .unwrap();
    // And the effective config of the files now on the node is the same.
    assert_eq!(effective_config(None, &ctx).unwrap().config, v.effective);

    // A drop-in the kubelet would ignore, and a place it does not read.
    ctx.placement = Placement::DropIn {
        dir: drop_in_dir.clone(),
        name: "50-kubelet-gitops.yaml".into(),
    };
    assert_eq!(
        rejected(validate_payload(fragment, &ctx)).reason,
        reason::INTERNAL_ERROR
    );
    ctx.placement = Placement::ConfigFile {
        path: PathBuf::from("/etc/kubernetes/elsewhere.yaml"),
    };
    let r = rejected(validate_payload(fragment, &ctx));
    assert_eq!(r.reason, reason::INTERNAL_ERROR);
    assert!(r.detail.contains("--config="), "{}", r.detail);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_sim_node_has_what_the_pre_flight_looks_for() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path(), None, true).await;
    let k = handle(&sim);
    let ctx = node_context(&sim);

    // The node's own config (the kubelet's defaults: containerd's socket, /etc/resolv.conf)
    // and the files a kubeadm config names are all on the node, under the host root.
    let v = validate_payload(config(&sim, 30, "").as_bytes(), &ctx).unwrap();
    assert_eq!(v.warnings, Vec::<String>::new());
    let kubeadm = "apiVersion: kubelet.config.k8s.io/v1beta1\n\
                   kind: KubeletConfiguration\n\
                   cgroupDriver: systemd\n\
                   maxPods: 30\n\
                   containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n\
                   resolvConf: /run/systemd/resolve/resolv.conf\n\
                   staticPodPath: /etc/kubernetes/manifests\n\
                   authentication:\n  x509:\n    clientCAFile: /etc/kubernetes/pki/ca.crt\n";
    let v = validate_payload(kubeadm.as_bytes(), &ctx).unwrap();
    assert_eq!(v.warnings, Vec::<String>::new());

    // Without containerd's socket the same config is reported: the check is the agent's.
    std::fs::remove_file(&k.paths().containerd_socket).unwrap();
    let v = validate_payload(config(&sim, 30, "").as_bytes(), &ctx).unwrap();
    assert!(
        v.warnings.iter().any(|w| w.starts_with(
            "containerRuntimeEndpoint unix:///run/containerd/containerd.sock: no socket at /run/containerd/containerd.sock"
        )),
        "{:?}",
        v.warnings
    );
    sim.shutdown().await;
}
