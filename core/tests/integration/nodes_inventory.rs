//! The node inventory: strict decoding with file and line, validation, generation.

use kubelet_gitops_core::inventory::{Inventory, InventoryError};

const GOOD: &str = "\
nodes:
  - name: worker-1
    labels: {node.kubernetes.io/pool: gpu, topology.kubernetes.io/zone: a}
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--max-pods=110 --node-ip=10.0.0.5\"
  - name: worker-2
    capacity:
      cpu: 7500m
      memory: 16Gi
      ephemeral-storage: 50Gi
      pods: 64
";

fn errors(yaml: &str) -> String {
    match Inventory::parse("inv.yaml", yaml.as_bytes()) {
        Ok(inv) => panic!("accepted: {inv:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_good_inventory_decodes() {
    let inv = Inventory::parse("inv.yaml", GOOD.as_bytes()).expect("valid");
    assert_eq!(inv.nodes.len(), 2);
    let w1 = &inv.nodes[0];
    assert_eq!(w1.name, "worker-1");
    assert_eq!(w1.labels["node.kubernetes.io/pool"], "gpu");
    assert_eq!(w1.capacity.cpu.milli_value(), 8000);
    assert_eq!(w1.capacity.memory.value(), 32 << 30);
    assert_eq!(
        w1.kubelet_args().unwrap(),
        ["--max-pods=110", "--node-ip=10.0.0.5"]
    );
    let w2 = &inv.nodes[1];
    assert_eq!(w2.capacity.cpu.milli_value(), 7500);
    assert_eq!(
        w2.capacity.pods.value(),
        64,
        "a bare YAML number is a quantity too"
    );
    assert!(w2.labels.is_empty() && w2.kubelet_flags.is_none());
    assert_eq!(
        inv.node("worker-2").map(|n| n.name.as_str()),
        Some("worker-2")
    );
}

#[test]
fn an_unknown_field_names_file_line_and_the_field_meant() {
    let yaml = GOOD.replace("    labels: {", "    lables: {");
    let msg = errors(&yaml);
    assert!(msg.starts_with("inv.yaml:3:"), "{msg}");
    assert!(msg.contains("lables"), "{msg}");
    assert!(msg.contains("did you mean `labels`"), "{msg}");

    let yaml = GOOD.replace("      pods: 64", "      pods: 64\n      gpus: 2");
    let msg = errors(&yaml);
    assert!(msg.starts_with("inv.yaml:12:"), "{msg}");
    assert!(msg.contains("gpus"), "{msg}");
}

#[test]
fn a_missing_capacity_and_a_bad_quantity_are_errors_with_lines() {
    let yaml = "nodes:\n- name: a\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"10\"}\n";
    let msg = errors(yaml);
    assert!(msg.contains("ephemeral-storage"), "{msg}");
    assert!(msg.starts_with("inv.yaml:"), "{msg}");

    let yaml = "nodes:\n- name: a\n  capacity:\n    cpu: lots\n    memory: 1Gi\n    ephemeral-storage: 1Gi\n    pods: 1\n";
    let msg = errors(yaml);
    assert!(msg.starts_with("inv.yaml:4:"), "{msg}");
    assert!(msg.contains("capacity.cpu"), "{msg}");
}

#[test]
fn rule_violations_are_all_reported_each_with_its_line() {
    let yaml = "\
nodes:
- name: Worker_1
  labels: {\"-bad/key\": ok, good: \"not ok!\"}
  capacity: {cpu: \"-1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1.5\"}
  kubeletFlags: \"--max-pod=3\"
- name: w2
  capacity: {cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1\"}
- name: w2
  capacity: {cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1\"}
  kubeletFlags: \"--node-ip='10.0.0.1\"
";
    let err = Inventory::parse("inv.yaml", yaml.as_bytes()).unwrap_err();
    let InventoryError::Invalid(problems) = &err else {
        panic!("expected rule violations, got {err}");
    };
    let msg = err.to_string();
    let has = |line: usize, text: &str| {
        problems
            .iter()
            .any(|p| p.line == Some(line) && p.to_string().contains(text))
    };
    assert!(has(2, "a lowercase RFC 1123 subdomain"), "{msg}");
    assert!(
        has(3, "prefix part a lowercase RFC 1123 subdomain"),
        "{msg}"
    );
    assert!(has(3, "a valid label must be an empty string"), "{msg}");
    assert!(has(4, "must be greater than or equal to 0"), "{msg}");
    assert!(has(4, "must be a whole number"), "{msg}");
    assert!(has(5, "unknown flag: --max-pod"), "{msg}");
    assert!(
        has(8, "Duplicate value: \"w2\" (first used at line 6)"),
        "{msg}"
    );
    assert!(has(10, "unterminated"), "{msg}");
    assert_eq!(problems.len(), 8, "{msg}");
}

#[test]
fn load_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nodes.yaml");
    let err = Inventory::load(&path).unwrap_err().to_string();
    assert!(err.contains("nodes.yaml"), "{err}");
    std::fs::write(&path, "nodes:\n- name: x\n  capacity: {}\n  extra: 1\n").unwrap();
    let err = Inventory::load(&path).unwrap_err().to_string();
    assert!(err.starts_with(&path.display().to_string()), "{err}");
}

#[test]
fn generated_inventories_are_valid_and_round_trip() {
    let inv = Inventory::generate(25, &["gpu", "general"]);
    assert_eq!(inv.nodes.len(), 25);
    inv.validate().expect("valid");
    assert_eq!(inv.nodes[0].name, "gpu-00");
    assert_eq!(inv.nodes[1].labels["node.kubernetes.io/pool"], "general");
    assert_eq!(inv.nodes[24].name, "gpu-24");
    assert_eq!(inv.nodes[4].labels["topology.kubernetes.io/zone"], "zone-b");
    let yaml = inv.to_yaml();
    let back = Inventory::parse("gen.yaml", yaml.as_bytes()).expect("round trip");
    assert_eq!(back, inv);
    let bare = Inventory::generate(3, &[]);
    assert_eq!(bare.nodes[2].name, "node-2");
    assert!(!bare.nodes[0].labels.contains_key("node.kubernetes.io/pool"));
}

const SETUP: &str = "\
nodes:
  - name: worker-1
    capacity: {cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}
    kubeletFlags: \"--cgroups-per-qos=false --node-ip=10.0.0.5 --config-dir=/etc/kubernetes/kubelet.conf.d\"
    kubeletDropIns:
      - path: /etc/kubernetes/kubelet.conf.d/10-eviction.conf
        content: |
          apiVersion: kubelet.config.k8s.io/v1beta1
          kind: KubeletConfiguration
          evictionHard: {memory.available: 500Mi}
    runtimeCgroupDriver: systemd
    cgroupVersion: v2
";

#[test]
fn the_setup_fields_give_what_the_agent_would_report() {
    use kubelet_gitops_core::node_setup::{Mode, Verdict};
    let inv = Inventory::parse("inv.yaml", SETUP.as_bytes()).expect("valid");
    let setup = inv.nodes[0].setup();
    assert_eq!(setup.mode, Mode::Replace);
    assert_eq!(
        setup.flags,
        ["--cgroups-per-qos=false"],
        "the config flags only"
    );
    assert_eq!(setup.drop_ins.len(), 1);
    assert_eq!(setup.runtime_cgroup_driver.as_deref(), Some("systemd"));
    assert_eq!(setup.cgroup_version.as_deref(), Some("v2"));
    // The kubelet merges drop-ins over its config marshalled with `omitempty`: the
    // file's empty enforceNodeAllocatable is lost, defaulted to ["pods"] again, and
    // --cgroups-per-qos=false then refuses it (what kubelet-oracle showed, issue 14).
    let config = b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nenforceNodeAllocatable: []\n";
    let Verdict::Refused(refusal) = setup.check("pools/a.yaml", config) else {
        panic!("accepted a list the drop-in merge loses");
    };
    assert!(
        refusal
            .to_string()
            .contains("cgroupsPerQOS (--cgroups-per-qos) must be set to true"),
        "{refusal}"
    );
    // A drop-in's own empty list stays: the node's drop-in saying it too is accepted.
    let inv = Inventory::parse(
        "inv.yaml",
        SETUP
            .replace(
                "evictionHard: {memory.available: 500Mi}",
                "evictionHard: {memory.available: 500Mi}\n          enforceNodeAllocatable: []",
            )
            .as_bytes(),
    )
    .expect("valid");
    let setup = inv.nodes[0].setup();
    let Verdict::Accepted(eff) = setup.check("pools/a.yaml", config) else {
        panic!("refused");
    };
    let hard = eff.config.eviction_hard.unwrap();
    assert_eq!(hard["memory.available"], "500Mi", "the drop-in is merged");
}

#[test]
fn bad_setup_fields_are_errors_with_lines() {
    let bad = SETUP
        .replace(
            "runtimeCgroupDriver: systemd",
            "runtimeCgroupDriver: system",
        )
        .replace("cgroupVersion: v2", "cgroupVersion: \"2\"")
        .replace("10-eviction.conf", "10-eviction.yaml");
    let msg = errors(&bad);
    assert!(
        msg.contains("inv.yaml:11:")
            && msg.contains("nodes[0].runtimeCgroupDriver: Unsupported value: \"system\""),
        "{msg}"
    );
    assert!(
        msg.contains("nodes[0].cgroupVersion: Unsupported value: \"2\""),
        "{msg}"
    );
    assert!(
        msg.contains("inv.yaml:6:")
            && msg.contains("a drop-in is an absolute path ending in .conf"),
        "{msg}"
    );
    let no_dir = SETUP
        .replace(" --config-dir=/etc/kubernetes/kubelet.conf.d", "")
        .replace(
            "cgroupVersion: v2",
            "cgroupVersion: v2\n    agentMode: drop-in",
        );
    let msg = errors(&no_dir);
    assert!(
        msg.contains("nodes[0].agentMode:") && msg.contains("--config-dir"),
        "{msg}"
    );
    let stray = SETUP.replace(
        "cgroupVersion: v2",
        "cgroupVersion: v2\n    kubeletConfig: \"maxPods: 1\"",
    );
    let msg = errors(&stray);
    assert!(msg.contains("nodes[0].kubeletConfig: Forbidden"), "{msg}");
    let unknown_mode = SETUP.replace(
        "cgroupVersion: v2",
        "cgroupVersion: v2\n    agentMode: dropin",
    );
    let msg = errors(&unknown_mode);
    assert!(msg.contains("agentMode"), "{msg}");
}

#[test]
fn in_drop_in_mode_the_nodes_own_file_is_read_and_the_agents_drop_in_placed() {
    let yaml = SETUP.replace(
        "cgroupVersion: v2",
        "cgroupVersion: v2\n    agentMode: drop-in\n    kubeletConfig: |\n      apiVersion: kubelet.config.k8s.io/v1beta1\n      kind: KubeletConfiguration\n      cgroupDriver: systemd\n      enforceNodeAllocatable: []\n",
    );
    let inv = Inventory::parse("inv.yaml", yaml.as_bytes()).expect("valid");
    let setup = inv.nodes[0].setup();
    assert_eq!(
        setup.agent_drop_in.as_deref(),
        Some("/etc/kubernetes/kubelet.conf.d/50-kubelet-gitops.conf")
    );
    assert!(setup.config_file.is_some());
    // The node's file sets what the pool's drop-in leaves out.
    // (Its empty enforceNodeAllocatable is lost in the drop-in merge, as the kubelet
    // loses it; the agent's drop-in says it again.)
    let drop_in =
        b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 64\nenforceNodeAllocatable: []\n";
    assert!(matches!(
        setup.check("pools/a.yaml", drop_in),
        kubelet_gitops_core::node_setup::Verdict::Accepted(_)
    ));
}
