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
