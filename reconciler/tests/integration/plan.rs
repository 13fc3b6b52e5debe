//! `kubelet-gitops plan` as a user runs it: real git repositories in temporary
//! directories (built with the git CLI), the built binary, a node inventory file, and the
//! simulated API server for `--kubeconfig`.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::commands::{bin, configmap_name, copy_tree, git, success_stdout, text};
use reconciler::render::{RenderOptions, render_repo};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/repo")
}

/// A git repository holding the fixture under `root` (with `inventory.yaml` kept
/// outside), committed once as "base".
struct Repo {
    dir: tempfile::TempDir,
    root: String,
}

impl Repo {
    fn new(root: &str) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        let repo = Repo {
            dir,
            root: root.to_string(),
        };
        copy_tree(&fixture(), &repo.config_dir());
        std::fs::remove_file(repo.config_dir().join("inventory.yaml")).unwrap();
        repo.commit("base");
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn path_str(&self) -> &str {
        self.path().to_str().unwrap()
    }

    fn config_dir(&self) -> PathBuf {
        self.path().join(&self.root)
    }

    fn write(&self, rel: &str, body: &str) {
        let p = self.config_dir().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn edit(&self, rel: &str, from: &str, to: &str) {
        let p = self.config_dir().join(rel);
        let body = std::fs::read_to_string(&p).unwrap();
        assert!(body.contains(from), "{from:?} not in {rel}");
        std::fs::write(p, body.replacen(from, to, 1)).unwrap();
    }

    fn commit(&self, message: &str) -> String {
        git(self.path(), &["add", "-A"]);
        git(self.path(), &["commit", "-q", "-m", message]);
        git(self.path(), &["rev-parse", "HEAD"])
    }

    /// The rendered config of `pool` at `rev`, through the library.
    fn rendered(&self, rev: &str, pool: &str) -> String {
        let src = reconciler::git::open_revision(self.path(), rev).unwrap();
        let opts = RenderOptions {
            root: self.root.clone(),
            ..RenderOptions::default()
        };
        let repo = render_repo(&src, &opts).unwrap();
        repo.pool(pool).unwrap().rendered.clone()
    }

    /// What `kubelet-gitops configmap-name kubelet-<pool> <rendered file>` prints.
    fn configmap_name(&self, rev: &str, pool: &str) -> String {
        let scratch = tempfile::tempdir().unwrap();
        let file = scratch.path().join("kubelet.yaml");
        std::fs::write(&file, self.rendered(rev, pool)).unwrap();
        configmap_name(pool, &file)
    }
}

fn inventory() -> PathBuf {
    fixture().join("inventory.yaml")
}

fn plan(repo: &Repo, extra: &[&str]) -> Output {
    bin()
        .args([
            "plan",
            "--repo",
            repo.path_str(),
            "--base",
            "HEAD~1",
            "--head",
            "HEAD",
        ])
        .args(extra)
        .output()
        .expect("run kubelet-gitops plan")
}

/// The second commit of the main scenario: the gpu pool changes (maxPods, the static CPU
/// manager, its rollout) and a new pool `batch` takes cpu-1 from `general`.
fn change_gpu_and_add_batch(repo: &Repo) {
    repo.edit(
        "pools/gpu.yaml",
        "    maxPods: 64\n",
        "    maxPods: 48\n    cpuManagerPolicy: static\n    reservedSystemCPUs: \"0-1\"\n",
    );
    repo.edit("pools/gpu.yaml", "maxUnavailable: 1", "maxUnavailable: 2");
    repo.write(
        "pools/batch.yaml",
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: batch\nspec:\n  nodeSelector:\n    matchLabels: {node.kubernetes.io/pool: cpu}\n  priority: 5\n  kubelet:\n    maxPods: 250\n",
    );
    repo.commit("gpu: static CPU manager; new batch pool");
}

#[test]
fn a_plan_lists_diffs_names_nodes_overrides_and_disruptions() {
    let repo = Repo::new("");
    change_gpu_and_add_batch(&repo);
    let inv = inventory();
    let out = plan(&repo, &["--nodes", inv.to_str().unwrap()]);
    let md = success_stdout(&out);

    let gpu_old = repo.configmap_name("HEAD~1", "gpu");
    let gpu_new = repo.configmap_name("HEAD", "gpu");
    let general = repo.configmap_name("HEAD~1", "general");
    let batch = repo.configmap_name("HEAD", "batch");
    assert_ne!(gpu_old, gpu_new);
    assert_eq!(
        general,
        repo.configmap_name("HEAD", "general"),
        "general is unchanged"
    );

    let base_id = git(repo.path(), &["rev-parse", "--short", "HEAD~1"]);
    let head_id = git(repo.path(), &["rev-parse", "--short", "HEAD"]);
    for want in [
        format!("Base `{base_id}` -> head `{head_id}`"),
        // The one-line summary comes first.
        "**2 pools change, 3 nodes; 1 field overridden by flags on 1 node; disruptive: cpuManagerPolicy, reservedSystemCPUs; class drain: gpu**".to_string(),
        format!("| `gpu` | changed | `{gpu_old}` | `{gpu_new}` | 2 |"),
        format!("| `batch` | added | - | `{batch}` | 1 |"),
        format!("| `general` | unchanged | `{general}` | `{general}` | 0 |"),
        format!("ConfigMap: `kubelet-gitops/{gpu_old}` -> `kubelet-gitops/{gpu_new}`"),
        // The effective diff, defaults applied on both sides.
        "maxPods: 64 -> 48".into(),
        "cpuManagerPolicy: \"none\" -> \"static\"".into(),
        "reservedSystemCPUs: (unset) -> \"0-1\"".into(),
        "rollout.maxUnavailable: 1 -> 2".into(),
        // The nodes that change.
        format!("- 2 nodes from `{gpu_old}` to `{gpu_new}`: gpu-1, gpu-2"),
        format!("- 1 node from pool `general` (`{general}`) to `{batch}`: cpu-1"),
        "  maxPods: 110 -> 250".into(),
        "  serializeImagePulls: false -> true".into(),
        // gpu-1's --max-pods=110 wins over the new config's 48.
        "| `maxPods` | `48` | `--max-pods` | `110` | gpu-1 |".into(),
        // What the disruptive fields disrupt.
        "- `cpuManagerPolicy` `\"none\"` -> `\"static\"`: the kubelet refuses to start while its CPU manager state file (/var/lib/kubelet/cpu_manager_state)".into(),
        "- `reservedSystemCPUs` `(unset)` -> `\"0-1\"`:".into(),
        // The class of gpu's change, and the fields that make it a drain.
        "Disruption class: **drain** (the node is drained before the kubelet restarts), because of:\n- `cpuManagerPolicy`: ".into(),
        "\n- `reservedSystemCPUs`: under the static policy".into(),
        // cpu-1 moves from general to batch: its own diff is a restart.
        "  Disruption class for these nodes: **restart** (the kubelet restarts, pods keep running).".into(),
    ] {
        assert!(md.contains(&want), "missing {want:?} in\n{md}");
    }
    assert!(
        !md.contains("### Pool `general`"),
        "general neither changes nor receives nodes\n{md}"
    );
    assert!(!md.contains("cpu-2"), "cpu-2 stays in general\n{md}");
}

#[test]
fn an_invalid_head_prints_every_error_and_exits_1() {
    let repo = Repo::new("");
    repo.edit("pools/gpu.yaml", "    maxPods: 64", "    maxPod: 64");
    repo.edit("pools/gpu.yaml", "maxUnavailable: 1", "maxUnavailable: 0");
    repo.edit(
        "base/kubelet.yaml",
        "cgroupDriver: systemd",
        "cgroupDriver: systemd\nimageGCHighThresholdPercent: 120",
    );
    repo.commit("broken");
    let out = plan(&repo, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    for want in [
        "pools/gpu.yaml:11:5: spec.rollout.maxUnavailable: must be at least 1",
        "pools/gpu.yaml:13:5: spec.kubelet.maxPod: unknown field \"maxPod\" (did you mean `maxPods`?)",
        "base/kubelet.yaml:5:1: imageGCHighThresholdPercent: invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 120 must be between 0 and 100, inclusive (in the config of pool general)",
        "does not validate: 3 errors",
    ] {
        assert!(err.contains(want), "missing {want:?} in\n{err}");
    }
    let md = text(&out.stdout);
    assert!(
        md.contains("**error: the head does not validate (3 errors): nothing would be applied.**"),
        "{md}"
    );
    assert!(md.contains("spec.kubelet.maxPod: unknown field"), "{md}");

    // Once the pool file decodes, the base's error is reported for both pools, once.
    repo.edit("pools/gpu.yaml", "    maxPod: 64", "    maxPods: 64");
    repo.edit("pools/gpu.yaml", "maxUnavailable: 0", "maxUnavailable: 1");
    repo.commit("half fixed");
    let out = bin()
        .args(["plan", "--repo", repo.path_str(), "--head", "HEAD"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("base/kubelet.yaml:5:1: imageGCHighThresholdPercent: invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) 120 must be between 0 and 100, inclusive (in the config of pools general, gpu)"),
        "{err}"
    );
}

#[test]
fn an_overlap_is_an_error_listed_first() {
    let repo = Repo::new("");
    // general now selects every node, with the gpu pool's priority.
    repo.edit(
        "pools/general.yaml",
        "    matchExpressions:\n      - key: node.kubernetes.io/pool\n        operator: NotIn\n        values: [gpu]\n",
        "    matchLabels: {}\n  priority: 10\n",
    );
    repo.commit("general takes everything");
    let inv = inventory();
    let out = plan(&repo, &["--nodes", inv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let md = text(&out.stdout);
    let caution = md.find("> [!CAUTION]").expect("overlaps are shown");
    let table = md.find("| pool |").expect("the pool table is still shown");
    assert!(caution < table, "{md}");
    assert!(
        md.contains("**error: 2 nodes selected by two pools of the same priority;"),
        "{md}"
    );
    assert!(
        md.contains("> - node gpu-1 is selected by pool general (pools/general.yaml) and pool gpu (pools/gpu.yaml) with the same priority 10"),
        "{md}"
    );
    assert!(text(&out.stderr).contains("error: node gpu-2 is selected by pool general"));
}

#[test]
fn root_globs_and_environment_variables() {
    let repo = Repo::new("clusters/prod");
    repo.write("pools/draft.yaml", "not: a pool\n");
    repo.edit("pools/gpu.yaml", "    maxPods: 64", "    maxPods: 32");
    repo.commit("gpu 32 pods, a draft");
    let inv = inventory();
    // Without the exclude the draft is an error.
    let out = bin()
        .args(["plan", "--root", "clusters/prod"])
        .env("KUBELET_GITOPS_REPO", repo.path())
        .env("KUBELET_GITOPS_BASE", "HEAD~1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("clusters/prod/pools/draft.yaml: kind is missing"));
    // Every option from the environment.
    let out = bin()
        .arg("plan")
        .env("KUBELET_GITOPS_REPO", repo.path())
        .env("KUBELET_GITOPS_BASE", "HEAD~1")
        .env("KUBELET_GITOPS_HEAD", "main")
        .env("KUBELET_GITOPS_ROOT", "clusters/prod")
        .env("KUBELET_GITOPS_EXCLUDE", "pools/{draft,wip}.yaml")
        .env("KUBELET_GITOPS_NODES", &inv)
        .output()
        .unwrap();
    let md = success_stdout(&out);
    assert!(md.contains("maxPods: 64 -> 32"), "{md}");
    assert!(md.contains("File: `clusters/prod/pools/gpu.yaml`"), "{md}");
    assert!(md.starts_with("## kubelet-gitops plan\n"), "{md}");
    assert!(
        md.contains("**1 pool changes, 2 nodes; 1 field overridden by flags on 1 node**"),
        "{md}"
    );
    // --include narrows what is read, in both revisions: only the gpu pool (and so no
    // draft either).
    let out = plan(
        &repo,
        &["--root", "clusters/prod", "--include", "pools/gpu.yaml"],
    );
    let md = success_stdout(&out);
    assert!(
        md.contains("| `gpu` | changed |") && !md.contains("general"),
        "{md}"
    );
}

#[test]
fn usage_and_git_errors_exit_2() {
    let repo = Repo::new("");
    let inv = inventory();
    let missing = repo.path().join("nope");
    for (args, want) in [
        (vec!["plan", "--repo", missing.to_str().unwrap()], "nope"),
        (
            vec![
                "plan",
                "--repo",
                repo.path_str(),
                "--head",
                "no-such-branch",
            ],
            "no-such-branch",
        ),
        (
            vec!["plan", "--repo", repo.path_str(), "--base", "v9"],
            "v9",
        ),
        (
            vec![
                "plan",
                "--repo",
                repo.path_str(),
                "--nodes",
                inv.to_str().unwrap(),
                "--kubeconfig",
                "k",
            ],
            "cannot be used with",
        ),
        (
            vec![
                "plan",
                "--repo",
                repo.path_str(),
                "--nodes",
                "/no/inventory.yaml",
            ],
            "/no/inventory.yaml",
        ),
        (
            vec!["plan", "--repo", repo.path_str(), "--root", "../up"],
            "leaves the repository",
        ),
        (
            vec!["plan", "--repo", repo.path_str(), "--exclude", "pools/[x"],
            "--exclude: invalid glob",
        ),
    ] {
        let out = bin().args(&args).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn usage_and_io_errors_exit_2_even_when_the_head_is_invalid() {
    let repo = Repo::new("");
    repo.edit("pools/gpu.yaml", "    maxPods: 64", "    maxPod: 64");
    repo.commit("broken");
    let inv = inventory();
    let out = plan(&repo, &["--nodes", inv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let unreachable = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
    )
    .unwrap();
    for (args, want) in [
        (
            vec!["--nodes", "/no/inventory.yaml"],
            "/no/inventory.yaml".to_string(),
        ),
        (
            vec!["--kubeconfig", kubeconfig.to_str().unwrap()],
            "cannot list the nodes".into(),
        ),
    ] {
        let out = plan(&repo, &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(!err.contains("does not validate"), "{args:?}: {err}");
    }
    let out = bin()
        .args(["plan", "--repo", repo.path_str(), "--base", "v9"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("v9"), "{err}");
}

#[test]
fn a_comma_separates_globs_in_plan_as_in_run() {
    let repo = Repo::new("");
    repo.write("pools/draft.yaml", "not: a pool\n");
    repo.write("pools/wip.yaml", "not: a pool either\n");
    repo.commit("two drafts");
    // `a,b` is two globs, in the flag and in the variable; `{a,b}` is one.
    for (flag, env) in [
        (Some("pools/draft.yaml,pools/wip.yaml"), None),
        (None, Some("pools/draft.yaml,pools/wip.yaml")),
        (None, Some("pools/{draft,wip}.yaml")),
        (Some("pools/{draft,wip}.yaml,base/none.yaml"), None),
    ] {
        let mut cmd = bin();
        cmd.args(["plan", "--repo", repo.path_str(), "--base", "HEAD~1"]);
        if let Some(globs) = flag {
            cmd.args(["--exclude", globs]);
        }
        if let Some(globs) = env {
            cmd.env("KUBELET_GITOPS_EXCLUDE", globs);
        }
        let out = cmd.output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{flag:?} {env:?}: {err}");
    }
    let out = plan(&repo, &["--exclude", "pools/draft.yaml"]);
    assert_eq!(out.status.code(), Some(1), "the other draft is still read");
    assert!(text(&out.stderr).contains("pools/wip.yaml"));
}

#[test]
fn a_first_commit_plans_against_nothing() {
    let repo = Repo::new("");
    let out = bin()
        .args([
            "plan",
            "--repo",
            repo.path_str(),
            "--nodes",
            inventory().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let md = success_stdout(&out);
    assert!(md.contains("There is no base revision"), "{md}");
    assert!(md.contains("**2 pools change, 4 nodes"), "{md}");
    assert!(
        md.contains("- 2 nodes from their local config to `kubelet-gpu-"),
        "{md}"
    );
}

#[test]
fn help_explains_every_option_and_its_environment_variable() {
    let help = success_stdout(&bin().args(["plan", "--help"]).output().unwrap());
    for (flag, env) in [
        ("--repo", "KUBELET_GITOPS_REPO"),
        ("--base", "KUBELET_GITOPS_BASE"),
        ("--head", "KUBELET_GITOPS_HEAD"),
        ("--nodes", "KUBELET_GITOPS_NODES"),
        ("--kubeconfig", "KUBELET_GITOPS_KUBECONFIG"),
        ("--root", "KUBELET_GITOPS_ROOT"),
        ("--include", "KUBELET_GITOPS_INCLUDE"),
        ("--exclude", "KUBELET_GITOPS_EXCLUDE"),
    ] {
        assert!(
            help.contains(flag) && help.contains(&format!("[env: {env}")),
            "{flag} {env}\n{help}"
        );
    }
}

#[test]
fn nodes_from_a_cluster_through_kubeconfig() {
    use kubelet_gitops_core::inventory::Inventory;
    use kubelet_gitops_sim::cluster::{Sim, SimConfig};

    let repo = Repo::new("");
    repo.edit("pools/gpu.yaml", "    maxPods: 64", "    maxPods: 32");
    repo.commit("gpu 32 pods");
    let work = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let inventory = Inventory::load(&inventory()).unwrap();
    let mut config = SimConfig::new(inventory, work.path());
    config.kubelets = false;
    let sim = runtime.block_on(Sim::start(config)).unwrap();
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    // The binary talks to the sim, served by the runtime's worker threads meanwhile.
    let out = plan(&repo, &["--kubeconfig", kubeconfig.to_str().unwrap()]);
    runtime.block_on(sim.shutdown());
    let md = success_stdout(&out);
    assert!(md.contains("**1 pool changes, 2 nodes**"), "{md}");
    assert!(md.contains(": gpu-1, gpu-2"), "{md}");
    assert!(
        !md.contains("overridden"),
        "flags are not known from a cluster\n{md}"
    );
}

/// An inventory of the gpu pool's nodes, one per entry of `extra` (its extra lines).
fn gpu_inventory(dir: &Path, extra: &[&str]) -> PathBuf {
    let mut yaml = String::from("nodes:\n");
    for (i, lines) in extra.iter().enumerate() {
        yaml.push_str(&format!(
            "  - name: gpu-{}\n    labels: {{node.kubernetes.io/pool: gpu}}\n    capacity: {{cpu: \"8\", memory: 32Gi, ephemeral-storage: 100Gi, pods: \"110\"}}\n{lines}",
            i + 1
        ));
    }
    let path = dir.join("inventory.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn a_node_whose_kubelet_flags_refuse_the_config_fails_the_plan_naming_node_flag_and_message() {
    let repo = Repo::new("");
    repo.edit("pools/gpu.yaml", "    maxPods: 64\n", "    maxPods: 60\n");
    repo.commit("gpu: maxPods 60");
    let scratch = tempfile::tempdir().unwrap();
    let qos = "    kubeletFlags: \"--cgroups-per-qos=false --node-ip=10.0.0.7\"\n";
    let inv = gpu_inventory(scratch.path(), &["", qos, qos]);
    let out = plan(&repo, &["--nodes", inv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let message = "failed to validate config: invalid configuration: cgroupsPerQOS (--cgroups-per-qos) must be set to true when \"pods\" contained in enforceNodeAllocatable (--enforce-node-allocatable) (value set by the kubelet flag --cgroups-per-qos)";
    assert!(
        err.contains(&format!(
            "error: pools/gpu.yaml: node gpu-2 would refuse the config of pool gpu: {message} (so would 1 more node with the same kubelet set-up: gpu-3)"
        )),
        "{err}"
    );
    let md = text(&out.stdout);
    assert!(
        md.contains("**error: 2 nodes would refuse their config; 1 pool changes, 3 nodes")
            && md.contains("> [!CAUTION]"),
        "{md}"
    );
    // `validate` with the same flags says the same of the same config.
    let file = scratch.path().join("gpu.yaml");
    std::fs::write(&file, repo.rendered("HEAD", "gpu")).unwrap();
    let v = bin()
        .args(["validate", "--flags", "--cgroups-per-qos=false"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(1));
    assert!(
        text(&v.stderr).contains(message.trim_start_matches("failed to validate config: ")),
        "{}",
        text(&v.stderr)
    );

    // Without the flag on any node the plan passes.
    let inv = gpu_inventory(scratch.path(), &["", ""]);
    let out = plan(&repo, &["--nodes", inv.to_str().unwrap()]);
    success_stdout(&out);
}

#[test]
fn a_pool_leaving_cgroup_driver_to_the_default_fails_the_plan_on_a_systemd_runtime() {
    let repo = Repo::new("");
    repo.edit("base/kubelet.yaml", "cgroupDriver: systemd\n", "");
    repo.commit("base: no cgroupDriver");
    let scratch = tempfile::tempdir().unwrap();
    let inv = gpu_inventory(scratch.path(), &["    runtimeCgroupDriver: systemd\n"]);
    let out = plan(&repo, &["--nodes", inv.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("error: pools/gpu.yaml: node gpu-1 would refuse the config of pool gpu: failed to validate config: cgroupDriver is \"cgroupfs\" (the kubelet's default: nothing sets cgroupDriver) but the container runtime's cgroup driver is \"systemd\"")
            && err.contains("set cgroupDriver: systemd in the pool or the base"),
        "{err}"
    );
    // A runtime on cgroupfs takes it.
    let inv = gpu_inventory(scratch.path(), &["    runtimeCgroupDriver: cgroupfs\n"]);
    success_stdout(&plan(&repo, &["--nodes", inv.to_str().unwrap()]));
}
