use super::markdown::{invalid_markdown, invalid_summary, summary, to_markdown};
use super::*;
use crate::render::{RenderOptions, render_repo};
use crate::source::MemorySource;

fn pool_file(name: &str, selector: &str, priority: i32, kubelet: &str) -> String {
    let mut s = format!(
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: {name}\nspec:\n  nodeSelector: {selector}\n  priority: {priority}\n"
    );
    if !kubelet.is_empty() {
        s.push_str("  kubelet:\n");
        for line in kubelet.lines() {
            s.push_str("    ");
            s.push_str(line);
            s.push('\n');
        }
    }
    s
}

fn repo(files: &[(&str, String)]) -> RenderedRepo {
    let src = MemorySource::new(
        files
            .iter()
            .map(|(p, b)| (p.to_string(), b.clone().into_bytes())),
    );
    match render_repo(&src, &RenderOptions::default()) {
        Ok(r) => r,
        Err(e) => panic!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// A node whose agent reported a kubelet set-up with no flags and no drop-ins.
fn node(name: &str, pool: &str) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        labels: [("pool", pool)].into_iter().collect(),
        setup: Some(setup_with_flags(&[]).into()),
        ..NodeInfo::default()
    }
}

/// The report of a node whose kubelet runs with `flags` (config flags, one word each).
fn setup_with_flags(flags: &[&str]) -> String {
    kubelet_gitops_core::node_setup::NodeSetup {
        version: kubelet_gitops_core::node_setup::REPORT_VERSION,
        flags: flags.iter().map(|f| f.to_string()).collect(),
        ..Default::default()
    }
    .to_annotation()
}

fn flagged(mut n: NodeInfo, flags: &str) -> NodeInfo {
    let words: Vec<&str> = flags.split_whitespace().collect();
    n.setup = Some(setup_with_flags(&words).into());
    n
}

const GPU_SEL: &str = "{matchLabels: {pool: gpu}}";
const CPU_SEL: &str = "{matchLabels: {pool: cpu}}";

fn base_repo() -> RenderedRepo {
    repo(&[
        (
            "pools/gpu.yaml",
            pool_file("gpu", GPU_SEL, 0, "maxPods: 100"),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
        (
            "pools/old.yaml",
            pool_file("old", "{matchLabels: {pool: old}}", 0, ""),
        ),
    ])
}

fn nodes() -> Vec<NodeInfo> {
    vec![
        node("g1", "gpu"),
        flagged(node("g2", "gpu"), "--max-pods=110 --node-ip=10.0.0.2"),
        node("c1", "cpu"),
        node("o1", "old"),
        node("x1", "none"),
    ]
}

fn find<'p>(plan: &'p Plan, name: &str) -> &'p PoolPlan {
    plan.pools.iter().find(|p| p.name == name).unwrap()
}

#[test]
fn a_changed_pool_lists_its_diff_names_and_nodes() {
    let base = base_repo();
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file(
                "gpu",
                GPU_SEL,
                0,
                "maxPods: 64\nsystemReserved: {memory: 1Gi}",
            ),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
        (
            "pools/old.yaml",
            pool_file("old", "{matchLabels: {pool: old}}", 0, ""),
        ),
    ]);
    let plan = plan(Some(&base), &head, &nodes());
    let gpu = find(&plan, "gpu");
    assert_eq!(gpu.change, PoolChange::Changed);
    let lines: Vec<String> = gpu.config_diff.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        lines,
        [
            "maxPods: 100 -> 64",
            "systemReserved.memory: (unset) -> \"1Gi\""
        ]
    );
    let old_cm = format!(
        "kubelet-gitops/{}",
        base.pool("gpu").unwrap().configmap_name
    );
    let new_cm = format!(
        "kubelet-gitops/{}",
        head.pool("gpu").unwrap().configmap_name
    );
    assert_eq!(gpu.old_configmap.as_deref(), Some(old_cm.as_str()));
    assert_eq!(gpu.new_configmap.as_deref(), Some(new_cm.as_str()));
    assert_eq!(gpu.moves.len(), 1);
    assert_eq!(gpu.moves[0].nodes, ["g1", "g2"]);
    assert_eq!(
        gpu.moves[0].diff, None,
        "within a pool the pool's diff applies"
    );
    assert_eq!(gpu.disruptive.len(), 1);
    assert_eq!(gpu.disruptive[0].field, "systemReserved.memory");
    // g2's --max-pods wins over the config.
    assert_eq!(
        gpu.overrides,
        [Override {
            field: "maxPods".into(),
            flag: "--max-pods".into(),
            config_value: Some("64".into()),
            flag_value: "110".into(),
            nodes: vec!["g2".into()],
        }]
    );
    assert_eq!(find(&plan, "cpu").change, PoolChange::Unchanged);
    assert!(find(&plan, "cpu").moves.is_empty());
    assert_eq!(
        summary(&plan),
        "1 pool changes, 2 nodes; 1 field overridden by flags on 1 node; disruptive: systemReserved.memory"
    );
    assert!(!plan.has_errors());
}

#[test]
fn added_and_removed_pools() {
    let base = base_repo();
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file("gpu", GPU_SEL, 0, "maxPods: 100"),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
        (
            "pools/new.yaml",
            pool_file(
                "new",
                "{matchLabels: {pool: none}}",
                0,
                "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"",
            ),
        ),
    ]);
    let plan = plan(Some(&base), &head, &nodes());
    let old = find(&plan, "old");
    assert_eq!(old.change, PoolChange::Removed);
    assert_eq!(old.new_configmap, None);
    assert_eq!(old.moves.len(), 1);
    assert_eq!(old.moves[0].to, Desired::Local);
    assert_eq!(old.moves[0].nodes, ["o1"]);
    let new = find(&plan, "new");
    assert_eq!(new.change, PoolChange::Added);
    assert_eq!(new.moves[0].from, Desired::Local);
    assert_eq!(new.moves[0].nodes, ["x1"]);
    let fields: Vec<&str> = new.config_diff.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        ["cpuManagerPolicy", "reservedSystemCPUs"],
        "against the defaults"
    );
    let disruptive: Vec<&str> = new.disruptive.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(disruptive, ["cpuManagerPolicy", "reservedSystemCPUs"]);
    assert!(new.disruptive[0].effect.contains("cpu_manager_state"));
    assert_eq!(
        summary(&plan).split(';').next().unwrap(),
        "2 pools change, 2 nodes"
    );
}

#[test]
fn nodes_moving_between_pools_get_the_diff_between_the_pools() {
    let base = base_repo();
    // gpu now also selects the cpu nodes, with a higher priority.
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file(
                "gpu",
                "{matchExpressions: [{key: pool, operator: In, values: [gpu, cpu]}]}",
                5,
                "maxPods: 100\nfeatureGates: {MemoryQoS: true}",
            ),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
        (
            "pools/old.yaml",
            pool_file("old", "{matchLabels: {pool: old}}", 0, ""),
        ),
    ]);
    let plan = plan(Some(&base), &head, &nodes());
    let gpu = find(&plan, "gpu");
    let spec: Vec<String> = gpu.spec_diff.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        spec,
        [
            "nodeSelector: pool=gpu -> pool in (gpu,cpu)",
            "priority: 0 -> 5"
        ]
    );
    let from_cpu = gpu
        .moves
        .iter()
        .find(|m| m.from.pool() == Some("cpu"))
        .expect("c1 moves from cpu");
    assert_eq!(from_cpu.nodes, ["c1"]);
    let diff: Vec<String> = from_cpu
        .diff
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(
        diff,
        [
            "featureGates.MemoryQoS: (unset) -> true",
            "maxPods: 110 -> 100"
        ]
    );
    assert_eq!(from_cpu.disruptive[0].field, "featureGates.MemoryQoS");
    // The unchanged cpu pool only loses a node: no section of its own.
    assert!(find(&plan, "cpu").moves.is_empty());
}

#[test]
fn overlaps_are_errors_and_their_nodes_do_not_move() {
    let base = base_repo();
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file("gpu", GPU_SEL, 0, "maxPods: 90"),
        ),
        ("pools/cpu.yaml", pool_file("cpu", "{}", 0, "")),
        (
            "pools/old.yaml",
            pool_file("old", "{matchLabels: {pool: old}}", 1, ""),
        ),
    ]);
    let plan = plan(Some(&base), &head, &nodes());
    assert!(plan.has_errors());
    let overlapped: Vec<&str> = plan.overlaps.iter().map(|o| o.node.as_str()).collect();
    assert_eq!(overlapped, ["g1", "g2"]);
    assert!(!plan.changed_nodes().contains("g1"));
    assert!(
        summary(&plan).starts_with("error: 2 nodes selected by two pools of the same priority; ")
    );
    let md = to_markdown(&plan);
    assert!(
        md.contains(
            "> - node g1 is selected by pool cpu (pools/cpu.yaml) and pool gpu (pools/gpu.yaml)"
        ),
        "{md}"
    );
}

#[test]
fn a_namespace_change_moves_every_node() {
    let base = base_repo();
    let settings = "apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n  namespace: kube-system\n".to_string();
    let head = repo(&[
        ("kubelet-gitops.yaml", settings),
        (
            "pools/gpu.yaml",
            pool_file("gpu", GPU_SEL, 0, "maxPods: 100"),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
        (
            "pools/old.yaml",
            pool_file("old", "{matchLabels: {pool: old}}", 0, ""),
        ),
    ]);
    let plan = plan(Some(&base), &head, &nodes());
    assert_eq!(
        plan.settings[0].to_string(),
        "namespace: kubelet-gitops -> kube-system"
    );
    assert_eq!(plan.changed_nodes().len(), 4);
    assert_eq!(find(&plan, "gpu").change, PoolChange::Changed);
    assert!(find(&plan, "gpu").config_diff.is_empty());
}

#[test]
fn no_base_means_every_pool_is_new() {
    let head = base_repo();
    let plan = plan(None, &head, &nodes());
    assert!(plan.pools.iter().all(|p| p.change == PoolChange::Added));
    assert_eq!(plan.changed_nodes().len(), 4);
    assert!(to_markdown(&plan).contains("There is no base revision"));
}

#[test]
fn an_identical_revision_changes_nothing() {
    let plan = plan(Some(&base_repo()), &base_repo(), &nodes());
    assert_eq!(summary(&plan), "no changes");
    assert!(plan.changed_pools().next().is_none());
    let md = to_markdown(&plan);
    assert!(!md.contains("### Pool"), "{md}");
}

#[test]
fn markdown_shows_every_part_and_is_deterministic() {
    let base = base_repo();
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file("gpu", GPU_SEL, 0, "maxPods: 64\ncgroupDriver: systemd"),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
    ]);
    let p = plan(Some(&base), &head, &nodes());
    let md = to_markdown(&p);
    assert_eq!(md, to_markdown(&plan(Some(&base), &head, &nodes())));
    let gpu_old = &base.pool("gpu").unwrap().configmap_name;
    let gpu_new = &head.pool("gpu").unwrap().configmap_name;
    for want in [
        "## kubelet-gitops plan".to_string(),
        // cgroupDriver's built-in class is drain: the summary names the pool.
        "**2 pools change, 3 nodes; 1 field overridden by flags on 1 node; disruptive: cgroupDriver; class drain: gpu**".into(),
        format!("| `gpu` | changed | `{gpu_old}` | `{gpu_new}` | 2 |"),
        "| `old` | removed |".into(),
        "### Pool `gpu` (changed)".into(),
        format!("ConfigMap: `kubelet-gitops/{gpu_old}` -> `kubelet-gitops/{gpu_new}`"),
        "maxPods: 100 -> 64".into(),
        "cgroupDriver: \"cgroupfs\" -> \"systemd\"".into(),
        "- `cgroupDriver` `\"cgroupfs\"` -> `\"systemd\"`: must match the container runtime's cgroup driver".into(),
        "Disruption class: **drain** (the node is drained before the kubelet restarts), because of:\n- `cgroupDriver`: upstream's migration to another cgroup driver drains the node".into(),
        format!("- 2 nodes from `{gpu_old}` to `{gpu_new}`: g1, g2"),
        "| `maxPods` | `64` | `--max-pods` | `110` | g2 |".into(),
        "### Pool `old` (removed)".into(),
        "- 1 node from `kubelet-old-".into(),
        "to their local config: o1".into(),
    ] {
        assert!(md.contains(&want), "missing {want:?} in\n{md}");
    }
    assert!(!md.contains("### Pool `cpu`"), "{md}");
}

#[test]
fn without_nodes_the_plan_says_so() {
    let head = repo(&[(
        "pools/gpu.yaml",
        pool_file("gpu", GPU_SEL, 0, "maxPods: 64"),
    )]);
    let p = plan(Some(&base_repo()), &head, &[]);
    assert_eq!(summary(&p), "3 pools change (no nodes given)");
    assert!(to_markdown(&p).contains("No nodes were given"));
}

#[test]
fn unparseable_flags_are_a_note_not_a_failure() {
    let head = repo(&[(
        "pools/gpu.yaml",
        pool_file("gpu", GPU_SEL, 0, "maxPods: 64"),
    )]);
    let nodes = vec![flagged(node("g1", "gpu"), "--no-such-flag")];
    let p = plan(None, &head, &nodes);
    assert!(
        p.notes[0].contains(
            "(its report cannot be used: its kubelet flags: unknown flag: --no-such-flag): g1"
        ),
        "{:?}",
        p.notes
    );
    assert!(!p.has_errors());
}

#[test]
fn disruptive_fields_match_by_path() {
    assert!(disruption_of("featureGates.MemoryQoS").is_some());
    assert!(
        disruption_of("kubeReserved.cpu")
            .unwrap()
            .contains("Allocatable")
    );
    assert!(
        disruption_of("kubeReservedCgroup")
            .unwrap()
            .contains("must exist")
    );
    assert!(disruption_of("cpuManagerPolicyOptions.full-pcpus-only").is_some());
    assert_eq!(disruption_of("maxPods"), None);
    assert_eq!(disruption_of("cpuManagerReconcilePeriod"), None);
}

#[test]
fn the_rollout_line_says_how_nodes_take_the_change() {
    let head = repo(&[(
        "pools/gpu.yaml",
        pool_file("gpu", GPU_SEL, 0, "") + "  rollout: {maxUnavailable: 50%, canary: 1}\n",
    )]);
    let nodes: Vec<NodeInfo> = (0..4).map(|i| node(&format!("g{i}"), "gpu")).collect();
    let md = to_markdown(&plan(None, &head, &nodes));
    assert!(md.contains("Rollout: 4 nodes in the pool; 1 canary node first, then at most 2 at a time (maxUnavailable 50%)."), "{md}");
    let paused = repo(&[(
        "pools/gpu.yaml",
        pool_file("gpu", GPU_SEL, 0, "") + "  rollout: {paused: true}\n",
    )]);
    assert!(to_markdown(&plan(None, &paused, &nodes)).contains("Rollout: **paused**"));
}

#[test]
fn an_invalid_head_summary_names_the_first_error() {
    let src = MemorySource::new([(
        "pools/gpu.yaml",
        pool_file("gpu", GPU_SEL, 0, "maxPod: 1").into_bytes(),
    )]);
    let errors = render_repo(&src, &RenderOptions::default()).unwrap_err();
    assert_eq!(
        invalid_summary(&errors),
        "error: 1 error in the repository; pools/gpu.yaml:9:5: spec.kubelet.maxPod: unknown field \"maxPod\" (did you mean `maxPods`?)"
    );
    let md = invalid_markdown("abc1234", &errors);
    assert!(
        md.contains("Head `abc1234`") && md.contains("```text\npools/gpu.yaml:9:5: "),
        "{md}"
    );
}

#[test]
fn an_invalid_head_lists_the_first_errors_of_each_file_and_counts_the_rest() {
    use kubelet_gitops_core::message::MAX_ERRORS_SHOWN;
    let gates: String = (0..MAX_ERRORS_SHOWN + 130)
        .map(|i| format!("  Unknown{i:03}: true\n"))
        .collect();
    let src = MemorySource::new([
        (
            "pools/gpu.yaml",
            pool_file("gpu", GPU_SEL, 0, &format!("featureGates:\n{gates}")).into_bytes(),
        ),
        (
            "pools/cpu.yaml",
            pool_file("cpu", "{}", 1, "evictionHard: {nope: 1Mi}").into_bytes(),
        ),
    ]);
    let errors = render_repo(&src, &RenderOptions::default()).unwrap_err();
    assert_eq!(errors.len(), MAX_ERRORS_SHOWN + 131);
    assert!(invalid_summary(&errors).starts_with(&format!(
        "error: {} errors in the repository; pools/cpu.yaml:",
        MAX_ERRORS_SHOWN + 131
    )));
    let md = invalid_markdown("abc1234", &errors);
    assert!(
        md.contains(&format!("({} errors)", MAX_ERRORS_SHOWN + 131)),
        "{md}"
    );
    let listed: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("pools/gpu.yaml:"))
        .collect();
    assert_eq!(listed.len(), MAX_ERRORS_SHOWN + 1, "{md}");
    // The first ones by line, then the count of the others.
    assert!(listed[0].contains("featureGates.Unknown000"), "{md}");
    assert_eq!(
        listed[MAX_ERRORS_SHOWN],
        format!(
            "pools/gpu.yaml: and 130 more errors (only the first {MAX_ERRORS_SHOWN} of each \
             file are listed)"
        )
    );
    assert_eq!(md.matches("pools/cpu.yaml:").count(), 1, "{md}");
}

#[test]
fn an_empty_default_map_filled_by_the_config_is_one_line_per_key() {
    use kubelet_gitops_core::types::KubeletConfiguration;
    let old = KubeletConfiguration::default();
    let new: KubeletConfiguration = serde_json::from_value(serde_json::json!({
        "authentication": {"x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}}
    }))
    .unwrap();
    let lines: Vec<String> = diff::effective_diff(&old, &new)
        .iter()
        .map(|c| c.to_string())
        .filter(|l| l.starts_with("authentication.x509"))
        .collect();
    assert_eq!(
        lines,
        vec![r#"authentication.x509.clientCAFile: (unset) -> "/etc/kubernetes/pki/ca.crt""#]
    );
    // An explicitly empty map where the other side has nothing is still reported.
    let empty: KubeletConfiguration =
        serde_json::from_value(serde_json::json!({"evictionHard": {}})).unwrap();
    let with: KubeletConfiguration =
        serde_json::from_value(serde_json::json!({"evictionHard": {"memory.available": "1Gi"}}))
            .unwrap();
    let lines: Vec<String> = diff::effective_diff(&empty, &with)
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("evictionHard.memory.available")),
        "{lines:?}"
    );
}

#[test]
fn a_node_that_would_refuse_its_pools_config_is_an_error_naming_node_flag_and_message() {
    let head = repo(&[(
        "pools/gpu.yaml",
        pool_file("gpu", GPU_SEL, 0, "maxPods: 64"),
    )]);
    let nodes = vec![
        node("g1", "gpu"),
        flagged(node("g2", "gpu"), "--cgroups-per-qos=false"),
        flagged(node("g3", "gpu"), "--cgroups-per-qos=false"),
        NodeInfo {
            setup: None,
            ..node("g4", "gpu")
        },
    ];
    let p = plan(None, &head, &nodes);
    assert!(p.has_errors());
    assert_eq!(
        p.refusals.len(),
        1,
        "one check for g2 and g3: {:?}",
        p.refusals
    );
    let text = p.refusals[0].to_string();
    assert!(
        text.starts_with("node g2 would refuse the config of pool gpu: failed to validate config: invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true")
            && text.contains("(value set by the kubelet flag --cgroups-per-qos)")
            && text.ends_with("(so would 1 more node with the same kubelet set-up: g3)"),
        "{text}"
    );
    assert!(
        summary(&p)
            .starts_with("error: 2 nodes would refuse their config; 1 pool changes, 4 nodes"),
        "{}",
        summary(&p)
    );
    let md = to_markdown(&p);
    assert!(
        md.contains("> [!CAUTION]\n> **2 nodes would refuse the config of their pool")
            && md.contains(&format!("> - `pools/gpu.yaml`: {text}")),
        "{md}"
    );
    // A node without a report is not checked, and the plan says so.
    assert!(
        p.notes
            .iter()
            .any(|n| n.starts_with("1 node of pool gpu not checked") && n.ends_with(": g4")),
        "{:?}",
        p.notes
    );
    // The overrides of the nodes that take it are still listed.
    let ok = plan(None, &head, &[flagged(node("g1", "gpu"), "--max-pods=110")]);
    assert!(!ok.has_errors());
    assert_eq!(find(&ok, "gpu").overrides[0].nodes, ["g1"]);
}

fn with_settings(settings: &str, files: &[(&str, String)]) -> RenderedRepo {
    let mut all = vec![(
        "kubelet-gitops.yaml",
        format!("apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n{settings}"),
    )];
    all.extend(files.iter().cloned());
    repo(&all)
}

#[test]
fn a_cpu_manager_policy_change_is_a_drain_because_of_that_field() {
    use kubelet_gitops_core::disruption::{Class, Why};
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file(
                "gpu",
                GPU_SEL,
                0,
                "maxPods: 64\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"",
            ),
        ),
        (
            "pools/cpu.yaml",
            pool_file("cpu", CPU_SEL, 0, "evictionHard: {memory.available: 500Mi}"),
        ),
        (
            "pools/old.yaml",
            pool_file("old", "{matchLabels: {pool: old}}", 0, ""),
        ),
    ]);
    let p = plan(Some(&base_repo()), &head, &nodes());
    let gpu = find(&p, "gpu").class.clone().expect("gpu changes");
    assert_eq!(gpu.class, Class::Drain);
    let fields: Vec<&str> = gpu.fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["cpuManagerPolicy", "reservedSystemCPUs"]);
    assert!(matches!(gpu.fields[0].why, Why::Builtin(r) if r.contains("cpu_manager_state")));
    // An eviction threshold restarts the kubelet, no more.
    let cpu = find(&p, "cpu").class.clone().expect("cpu changes");
    assert_eq!(cpu.class, Class::Restart);
    // Unchanged and removed pools have no class.
    assert_eq!(find(&p, "old").class, None);
    let same = plan(Some(&base_repo()), &base_repo(), &nodes());
    assert!(same.pools.iter().all(|p| p.class.is_none()));
    assert!(
        summary(&p).ends_with("; class drain: gpu"),
        "{}",
        summary(&p)
    );
    let md = to_markdown(&p);
    for want in [
        "Disruption class: **drain** (the node is drained before the kubelet restarts), because of:\n- `cpuManagerPolicy`: the kubelet refuses to start while cpu\\_manager\\_state",
        "\n- `reservedSystemCPUs`: ",
        "### Pool `cpu` (changed)",
        "Disruption class: **restart** (the kubelet restarts, pods keep running).\n",
    ] {
        assert!(md.contains(want), "missing {want:?} in\n{md}");
    }
}

#[test]
fn an_override_moves_a_fields_class_in_the_plan() {
    use kubelet_gitops_core::disruption::{Class, Why};
    let files = |evict: &str| {
        vec![
            (
                "pools/gpu.yaml",
                pool_file("gpu", GPU_SEL, 0, "maxPods: 100"),
            ),
            ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, evict)),
            (
                "pools/old.yaml",
                pool_file("old", "{matchLabels: {pool: old}}", 0, ""),
            ),
        ]
    };
    let settings = "  disruption:\n    classes: {evictionHard: drain}\n";
    let base = with_settings(settings, &files(""));
    let head = with_settings(settings, &files("evictionHard: {memory.available: 500Mi}"));
    let p = plan(Some(&base), &head, &nodes());
    let cpu = find(&p, "cpu").class.clone().expect("cpu changes");
    assert_eq!(cpu.class, Class::Drain);
    assert_eq!(
        cpu.fields[0].why,
        Why::Override {
            field: "evictionHard".into(),
            file: "kubelet-gitops.yaml".into()
        }
    );
    let md = to_markdown(&p);
    assert!(
        md.contains("- `evictionHard.memory.available`: `evictionHard` in `kubelet-gitops.yaml` sets `drain`"),
        "{md}"
    );
    // Without the override the same change is a restart; the settings' change is shown.
    let p = plan(
        Some(&base_repo()),
        &repo(&files("evictionHard: {memory.available: 500Mi}")),
        &nodes(),
    );
    assert_eq!(
        find(&p, "cpu").class.as_ref().unwrap().class,
        Class::Restart
    );
    let p = plan(Some(&base_repo()), &head, &nodes());
    assert!(
        p.settings
            .iter()
            .any(|c| c.to_string() == "disruption.classes: {} -> {evictionHard: drain}"),
        "{:?}",
        p.settings
    );

    // A pool's own class goes over the settings'.
    let pool_own = format!(
        "{}  disruption:\n    classes: {{evictionHard: restart-clear-state}}\n",
        pool_file("cpu", CPU_SEL, 0, "evictionHard: {memory.available: 500Mi}")
    );
    let mut files = files("");
    files[1].1 = pool_own;
    let head = with_settings(settings, &files);
    let p = plan(Some(&base), &head, &nodes());
    assert_eq!(
        find(&p, "cpu").class.as_ref().unwrap().class,
        Class::RestartClearState
    );
}

#[test]
fn nodes_moving_between_pools_get_the_class_of_their_own_diff() {
    use kubelet_gitops_core::disruption::Class;
    // c1 moves from cpu (no policy) to gpu (static CPU policy): for it, a drain, though
    // gpu's own change (maxPods) is a restart.
    let base = repo(&[
        (
            "pools/gpu.yaml",
            pool_file(
                "gpu",
                GPU_SEL,
                0,
                "maxPods: 100\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"",
            ),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
    ]);
    let head = repo(&[
        (
            "pools/gpu.yaml",
            pool_file(
                "gpu",
                "{matchExpressions: [{key: pool, operator: In, values: [gpu, cpu]}]}",
                1,
                "maxPods: 64\ncpuManagerPolicy: static\nreservedSystemCPUs: \"0\"",
            ),
        ),
        ("pools/cpu.yaml", pool_file("cpu", CPU_SEL, 0, "")),
    ]);
    let p = plan(Some(&base), &head, &nodes());
    let gpu = find(&p, "gpu");
    assert_eq!(gpu.class.as_ref().unwrap().class, Class::Restart);
    let from_cpu = gpu
        .moves
        .iter()
        .find(|m| m.nodes == ["c1"])
        .expect("c1 moves to gpu");
    let class = from_cpu.class.as_ref().expect("a diff between pools");
    assert_eq!(class.class, Class::Drain);
    let fields: Vec<&str> = class.fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["cpuManagerPolicy", "reservedSystemCPUs"]);
    // Nodes of the pool's own old ConfigMap take the pool's class; no class of their own.
    assert!(
        gpu.moves
            .iter()
            .filter(|m| m.nodes != ["c1"])
            .all(|m| m.class.is_none())
    );
    let md = to_markdown(&p);
    assert!(
        md.contains("  Disruption class for these nodes: **drain** (the node is drained before the kubelet restarts), because of:\n  - `cpuManagerPolicy`: "),
        "{md}"
    );
    assert!(
        summary(&p).ends_with("; class drain: gpu"),
        "{}",
        summary(&p)
    );
}

#[test]
fn the_plan_shows_a_pools_waves_and_windows_and_whether_the_change_waits() {
    let rollout = "  rollout:\n    maintenance:\n      windows: [{days: [Tue], start: \"02:00\", duration: 2h, timeZone: Europe/Berlin}]\n    waves: {by: zone, soak: 10m, jitter: 30s}\n";
    let with_rollout = |kubelet: &str| {
        let mut f = pool_file("gpu", GPU_SEL, 0, "");
        f.push_str(rollout);
        f.push_str("  kubelet:\n");
        f.push_str(&format!("    {kubelet}\n"));
        f
    };
    let zoned = |name: &str, zone: Option<&str>| {
        let mut n = node(name, "gpu");
        if let Some(z) = zone {
            n.labels.insert("zone", z);
        }
        n
    };
    let nodes = vec![
        zoned("g1", Some("b")),
        zoned("g2", Some("a")),
        zoned("g3", Some("b")),
        zoned("g4", None),
    ];
    let base = repo(&[("pools/gpu.yaml", with_rollout("maxPods: 100"))]);
    let restart = repo(&[("pools/gpu.yaml", with_rollout("maxPods: 90"))]);
    let p = plan(Some(&base), &restart, &nodes);
    assert_eq!(
        find(&p, "gpu").waves,
        [
            ("a".to_string(), 1),
            ("b".to_string(), 2),
            ("(unlabelled)".to_string(), 1)
        ]
    );
    let md = to_markdown(&p);
    assert!(
        md.contains("Waves by `zone` (after the canary, one wave at a time; maxUnavailable within the wave; soak 10m after each wave; within a wave, assignments spread over 30s):"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | `a` | 1 |\n| 2 | `b` | 2 |\n| 3 | `(unlabelled)` | 1 |"),
        "{md}"
    );
    assert!(
        md.contains("Maintenance windows: this change does not wait (its class is `restart`; only `drain` does):"),
        "{md}"
    );
    assert!(md.contains("- `Tue 02:00 Europe/Berlin for 2h`"), "{md}");

    assert!(
        !md.contains("Drain:"),
        "a restart-class change drains nothing: {md}"
    );

    let drain = repo(&[("pools/gpu.yaml", with_rollout("topologyManagerScope: pod"))]);
    let md = to_markdown(&plan(Some(&base), &drain, &nodes));
    assert!(
        md.contains(
            "Maintenance windows: **this change waits for a window** (its class is `drain`):"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "Drain: **each node is drained first** (`drain: auto`): cordoned, its pods evicted \
             through the Eviction API (PodDisruptionBudgets respected; DaemonSet, mirror and \
             finished pods stay), the config applied once it is empty, and the node uncordoned \
             when the agent reports; a drain still blocked after `drainTimeout` 30m gives up: \
             the node is uncordoned and the pool halts."
        ),
        "{md}"
    );
    // The pool's own drain settings.
    let manual = repo(&[(
        "pools/gpu.yaml",
        with_rollout("topologyManagerScope: pod")
            .replace("  rollout:\n", "  rollout:\n    drain: manual\n"),
    )]);
    let md = to_markdown(&plan(Some(&base), &manual, &nodes));
    assert!(
        md.contains("Drain: **by a person** (`drain: manual`)"),
        "{md}"
    );
    let forced = repo(&[(
        "pools/gpu.yaml",
        with_rollout("topologyManagerScope: pod").replace(
            "  rollout:\n",
            "  rollout:\n    drainTimeout: 1h\n    drainForce: true\n",
        ),
    )]);
    let md = to_markdown(&plan(Some(&base), &forced, &nodes));
    assert!(
        md.contains("after `drainTimeout` 1h deletes the pods left (`drainForce: true`)."),
        "{md}"
    );
    assert!(md.contains("rollout.drainTimeout: 30m -> 1h"), "{md}");
    assert!(md.contains("rollout.drainForce: false -> true"), "{md}");
}

#[test]
fn drain_settings_are_checked_at_their_line() {
    let bad = "  rollout:\n    drain: sometimes\n    drainTimeout: soon\n";
    let mut f = pool_file("gpu", GPU_SEL, 0, "");
    f.push_str(bad);
    f.push_str("  kubelet:\n    maxPods: 100\n");
    let src = MemorySource::new([("pools/gpu.yaml".to_string(), f.into_bytes())]);
    let errors = render_repo(&src, &RenderOptions::default()).expect_err("invalid drain settings");
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        text.iter().any(|e| e.starts_with("pools/gpu.yaml:")
            && e.contains("spec.rollout.drain: invalid value \"sometimes\": expected `auto`")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|e| e.contains("spec.rollout.drainTimeout: invalid duration \"soon\"")),
        "{text:?}"
    );
}
