//! `examples-repo/` as a platform team would use it: copied into a fresh git repository
//! (git CLI), planned with the built `kubelet-gitops` against its own `inventory.yaml`,
//! edited the ways its README describes, and its CI files (GitHub Actions, GitLab CI)
//! parsed and their plan scripts run, with a stand-in for `docker run` that starts the
//! binary under test instead of the release image.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kubelet_gitops_core::quantity::Quantity;
use reconciler::render::{RenderOptions, RenderedRepo, render_repo};
use serde_json::Value;

use crate::support::commands::{
    bin, configmap_name, copy_tree, git, repo_root, success_stdout, text,
};

/// The pools the example ships, with the number of inventory nodes each one gets.
const POOLS: [(&str, usize); 3] = [("general", 6), ("gpu", 3), ("high-memory", 3)];

/// `Quantity::nanos` per unit (byte, for memory).
const NANOS_PER_UNIT: i128 = 1_000_000_000;

fn examples() -> PathBuf {
    repo_root().join("examples-repo")
}

/// A scratch directory holding a bare `origin` whose `main` is an empty commit followed
/// by the example, and a clone of it (`work`) to make changes in, as a user would.
struct Checkout {
    scratch: tempfile::TempDir,
}

impl Checkout {
    fn new() -> Checkout {
        let scratch = tempfile::tempdir().unwrap();
        let c = Checkout { scratch };
        let seed = c.scratch.path().join("seed");
        std::fs::create_dir_all(&seed).unwrap();
        git(&seed, &["init", "-q"]);
        git(&seed, &["commit", "-q", "--allow-empty", "-m", "empty"]);
        copy_tree(&examples(), &seed);
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-q", "-m", "kubelet-gitops example"]);
        let origin = c.scratch.path().join("origin.git");
        git(
            c.scratch.path(),
            &[
                "clone",
                "-q",
                "--bare",
                seed.to_str().unwrap(),
                origin.to_str().unwrap(),
            ],
        );
        git(
            c.scratch.path(),
            &[
                "clone",
                "-q",
                origin.to_str().unwrap(),
                c.work().to_str().unwrap(),
            ],
        );
        c
    }

    fn work(&self) -> PathBuf {
        self.scratch.path().join("work")
    }

    fn work_str(&self) -> String {
        self.work().to_str().unwrap().to_string()
    }

    fn git(&self, args: &[&str]) -> String {
        git(&self.work(), args)
    }

    /// Replaces the first `from` with `to` in `rel` of the work tree.
    fn edit(&self, rel: &str, from: &str, to: &str) {
        let p = self.work().join(rel);
        let body = std::fs::read_to_string(&p).unwrap();
        assert!(body.contains(from), "{from:?} not in {rel}");
        std::fs::write(p, body.replacen(from, to, 1)).unwrap();
    }

    fn commit(&self, message: &str) {
        self.git(&["commit", "-q", "-a", "-m", message]);
    }

    fn plan(&self, base: &str) -> Output {
        bin()
            .arg("plan")
            .arg("--repo")
            .arg(self.work())
            .args(["--base", base, "--head", "HEAD", "--nodes"])
            .arg(self.work().join("inventory.yaml"))
            .output()
            .expect("run kubelet-gitops plan")
    }

    /// Every pool of `rev`, rendered through the library as the reconciler does.
    fn rendered(&self, rev: &str) -> RenderedRepo {
        let src = reconciler::git::open_revision(&self.work(), rev).unwrap();
        match render_repo(&src, &RenderOptions::default()) {
            Ok(repo) => repo,
            Err(errors) => panic!("{rev} does not render: {errors:#?}"),
        }
    }

    /// What `kubelet-gitops configmap-name kubelet-<pool> <file>` prints for the rendered
    /// config of `pool` at `rev`.
    fn configmap_name(&self, rev: &str, pool: &str) -> String {
        let file = self.scratch.path().join(format!("{pool}.rendered.yaml"));
        let repo = self.rendered(rev);
        let rendered = &repo.pool(pool).expect("the pool renders").rendered;
        std::fs::write(&file, rendered).unwrap();
        configmap_name(pool, &file)
    }
}

/// The pool names of the YAML files directly in `examples-repo/pools/` (drafts aside).
fn pool_files() -> BTreeSet<String> {
    std::fs::read_dir(examples().join("pools"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".draft.yaml"))
        .filter_map(|n| n.strip_suffix(".yaml").map(str::to_string))
        .collect()
}

#[test]
fn the_example_plans_cleanly_with_every_pool_and_the_flag_override() {
    let repo = Checkout::new();
    let out = repo.plan("HEAD~1");
    let md = success_stdout(&out);

    let files = pool_files();
    assert_eq!(
        files,
        POOLS.iter().map(|(p, _)| p.to_string()).collect(),
        "one file per pool in examples-repo/pools"
    );
    for (pool, nodes) in POOLS {
        let name = repo.configmap_name("HEAD", pool);
        assert!(
            name.starts_with(&format!("kubelet-{pool}-")),
            "{pool}: {name}"
        );
        for want in [
            format!("| `{pool}` | added | - | `{name}` | {nodes} |"),
            format!("### Pool `{pool}` (added)"),
            format!("File: `pools/{pool}.yaml`"),
            format!("ConfigMap: `kubelet-gitops/{name}` (new)"),
        ] {
            assert!(md.contains(&want), "missing {want:?} in\n{md}");
        }
    }
    let total: usize = POOLS.iter().map(|(_, n)| n).sum();
    for want in [
        format!("**3 pools change, {total} nodes; 1 field overridden by flags on 2 nodes**"),
        // general-5 and general-6 run with --max-pods=110 (inventory.yaml).
        "| `maxPods` | `150` | `--max-pods` | `110` | general-5, general-6 |".to_string(),
        // general: canary 2, then 25% of 6 nodes, rounded down.
        "Rollout: 6 nodes in the pool; 2 canary nodes first, then at most 1 at a time (maxUnavailable 25%).".to_string(),
        // gpu-3 is selected through the label of its --node-labels flag.
        "gpu-1, gpu-2, gpu-3".to_string(),
        "maxPods: 110 -> 64".to_string(),
        "memoryManagerPolicy: \"None\" -> \"Static\"".to_string(),
        "topologyManagerPolicy: \"none\" -> \"restricted\"".to_string(),
    ] {
        assert!(md.contains(&want), "missing {want:?} in\n{md}");
    }
    assert!(!md.contains("[!CAUTION]"), "no overlaps\n{md}");
}

/// The static memory manager makes the kubelet exit unless, per resource, reservedMemory
/// sums to kubeReserved + systemReserved + the hard eviction threshold. kubelet-gitops
/// cannot check that without the node's NUMA layout (docs/upstream.md), so this test
/// keeps the example's numbers in step.
#[test]
fn static_memory_manager_pools_reserve_exactly_their_reservations() {
    let repo = Checkout::new();
    let rendered = repo.rendered("HEAD");
    let mut checked = Vec::new();
    for pool in &rendered.pools {
        let c = &pool.config;
        if c.memory_manager_policy.as_deref() != Some("Static") {
            continue;
        }
        let name = &pool.spec.name;
        let q = |map: &Option<BTreeMap<String, String>>, key: &str, what: &str| -> i128 {
            let v = map
                .as_ref()
                .and_then(|m| m.get(key))
                .unwrap_or_else(|| panic!("{name}: {what} is not set"));
            Quantity::parse(v)
                .unwrap_or_else(|e| panic!("{name}: {what} {v:?} is not an absolute quantity: {e}"))
                .nanos()
        };
        let want = q(&c.kube_reserved, "memory", "kubeReserved.memory")
            + q(&c.system_reserved, "memory", "systemReserved.memory")
            + q(
                &c.eviction_hard,
                "memory.available",
                "evictionHard.memory.available",
            );
        let reserved: i128 = c
            .reserved_memory
            .iter()
            .flatten()
            .filter_map(|r| r.limits.get("memory"))
            .map(Quantity::nanos)
            .sum();
        assert_eq!(
            reserved,
            want,
            "{name}: reservedMemory sums to {} bytes of memory, kubeReserved + systemReserved + evictionHard to {} bytes",
            reserved / NANOS_PER_UNIT,
            want / NANOS_PER_UNIT
        );
        checked.push(name.clone());
    }
    assert_eq!(checked, ["high-memory"]);
}

#[test]
fn the_policy_and_the_readme_error_example_hold() {
    let repo = Checkout::new();
    // A pool may not change what kubelet-gitops.yaml keeps for the platform team.
    repo.edit(
        "pools/gpu.yaml",
        "    maxPods: 64\n",
        "    maxPods: 64\n    cgroupDriver: cgroupfs\n",
    );
    repo.commit("gpu: cgroupfs");
    let out = repo.plan("origin/main");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("pools/gpu.yaml:36:5: spec.kubelet.cgroupDriver: pools may not set cgroupDriver: kubelet-gitops.yaml lists it in spec.policy.forbiddenPoolFields"),
        "{err}"
    );

    // The error README.md quotes is the one a misspelled field gives.
    repo.git(&["reset", "-q", "--hard", "origin/main"]);
    repo.edit("pools/gpu.yaml", "    maxPods: 64", "    maxPod: 64");
    repo.commit("gpu: typo");
    let out = repo.plan("origin/main");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let readme = std::fs::read_to_string(examples().join("README.md")).unwrap();
    let quoted = "pools/gpu.yaml:35:5: spec.kubelet.maxPod: unknown field \"maxPod\" (did you mean `maxPods`?)";
    assert!(
        readme.contains(quoted),
        "README.md no longer quotes {quoted:?}"
    );
    assert!(err.contains(quoted), "{err}");
}

/// Every ConfigMap name README.md shows is the one the example renders, and its flag
/// override table is the plan's.
#[test]
fn the_readme_shows_what_the_example_renders() {
    let repo = Checkout::new();
    let readme = std::fs::read_to_string(examples().join("README.md")).unwrap();
    let mut seen = 0;
    for (pool, _) in POOLS {
        let name = repo.configmap_name("HEAD", pool);
        let prefix = format!("kubelet-{pool}-");
        for (at, _) in readme.match_indices(&prefix) {
            let hash: String = readme[at + prefix.len()..]
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            if hash.is_empty() {
                continue; // `kubelet-gpu-...`: no name given
            }
            assert_eq!(format!("{prefix}{hash}"), name, "README.md at byte {at}");
            seen += 1;
        }
    }
    assert!(seen >= 2, "README.md names rendered ConfigMaps");
    let md = text(&repo.plan("HEAD~1").stdout);
    let row = "| `maxPods` | `150` | `--max-pods` | `110` | general-5, general-6 |";
    assert!(readme.contains(row) && md.contains(row), "{md}");
}

// ---------------------------------------------------------------------------------------
// CI files

fn yaml_file(rel: &str) -> Value {
    let path = examples().join(rel);
    let body = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&body).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn string<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

/// Asserts `script` runs `kubelet-gitops plan` (the image's entrypoint) with `--base` and
/// `--head`.
fn assert_runs_plan(script: &str, base: &str) {
    let at = script
        .find(" plan --repo ")
        .unwrap_or_else(|| panic!("no `plan --repo` in\n{script}"));
    let args = &script[at..];
    for want in [format!("--base {base}"), "--head HEAD".to_string()] {
        assert!(args.contains(&want), "missing {want:?} in\n{args}");
    }
    assert!(
        script.contains("ghcr.io/kubelet-gitops/kubelet-gitops:")
            || script.contains("\"$KUBELET_GITOPS_IMAGE\""),
        "{script}"
    );
}

/// The release image the CI files run: the workspace's own version.
fn assert_image(image: &str) {
    assert_eq!(
        image,
        format!(
            "ghcr.io/kubelet-gitops/kubelet-gitops:{}",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// A `docker` that plays `docker run [--rm] [--network N] [--user U] [--volume SRC:DST[:ro]]
/// [--workdir D] IMAGE ARGS...` by running the binary under test (the image's entrypoint)
/// with DST mapped to SRC in ARGS. Anything else is refused, so a CI file that grows an
/// option this stand-in does not know fails the test instead of passing untried.
fn docker_shim(dir: &Path) -> PathBuf {
    let bin_dir = dir.join("shim-bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let script = r#"#!/usr/bin/env bash
set -euo pipefail
[ "${1-}" = run ] || { echo "docker shim: only 'docker run' is played" >&2; exit 125; }
shift
src=""; dst=""; image=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rm) shift ;;
    --network|--user|--workdir) shift 2 ;;
    --volume) src="${2%%:*}"; rest="${2#*:}"; dst="${rest%%:*}"; shift 2 ;;
    -*) echo "docker shim: unexpected option $1" >&2; exit 125 ;;
    *) image="$1"; shift; break ;;
  esac
done
[ "$image" = "$SHIM_IMAGE" ] || { echo "docker shim: unexpected image $image" >&2; exit 125; }
args=()
for a in "$@"; do
  if [ -n "$dst" ] && { [ "$a" = "$dst" ] || [ "${a#"$dst"/}" != "$a" ]; }; then
    a="$src${a#"$dst"}"
  fi
  args+=("$a")
done
exec "$SHIM_BIN" "${args[@]}"
"#;
    let path = bin_dir.join("docker");
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    bin_dir
}

/// Runs `script` with `shell` in the work tree of `repo`, the docker stand-in first on
/// PATH and `env` set.
fn run_script(
    repo: &Checkout,
    shell: &[&str],
    script: &str,
    image: &str,
    env: &[(&str, String)],
) -> Output {
    let shim = docker_shim(repo.scratch.path());
    let path = format!(
        "{}:{}",
        shim.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let file = repo.scratch.path().join("ci-script");
    std::fs::write(&file, script).unwrap();
    let mut c = Command::new(shell[0]);
    c.args(&shell[1..])
        .arg(&file)
        .current_dir(repo.work())
        .env("PATH", path)
        .env("SHIM_BIN", env!("CARGO_BIN_EXE_kubelet-gitops"))
        .env("SHIM_IMAGE", image)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo.scratch.path());
    for (k, _) in std::env::vars() {
        if k.starts_with("KUBELET_GITOPS_") || k.starts_with("GITHUB_") || k.starts_with("CI_") {
            c.env_remove(k);
        }
    }
    // What the workflow's `env:` and the job's `variables:` set.
    c.env("KUBELET_GITOPS_IMAGE", image);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run the CI script")
}

#[test]
fn the_github_workflow_plans_pull_requests_and_fails_on_invalid_heads() {
    let wf = yaml_file(".github/workflows/kubelet-gitops-plan.yml");
    assert!(
        wf["on"].get("pull_request").is_some(),
        "runs on pull_request: {}",
        wf["on"]
    );
    let image = string(
        &wf["env"]["KUBELET_GITOPS_IMAGE"],
        "env.KUBELET_GITOPS_IMAGE",
    );
    assert_image(image);
    let steps = wf["jobs"]["plan"]["steps"]
        .as_array()
        .expect("jobs.plan.steps");
    // The first step whose `key` is a string for which `pred` holds.
    let find = |key: &str, pred: &dyn Fn(&str) -> bool, what: &str| {
        steps
            .iter()
            .find(|s| s[key].as_str().is_some_and(pred))
            .unwrap_or_else(|| panic!("no {what}: {steps:?}"))
    };
    let checkout = find(
        "uses",
        &|u| u.starts_with("actions/checkout@"),
        "checkout step",
    );
    assert_eq!(checkout["with"]["fetch-depth"], Value::from(0));
    let step = find(
        "run",
        &|r| r.contains(" plan --repo "),
        "step running kubelet-gitops plan",
    );
    assert_eq!(step["shell"], "bash");
    assert_eq!(step["env"]["BASE_REF"], "${{ github.base_ref }}");
    let script = string(&step["run"], "the plan step's run");
    assert_runs_plan(script, "\"origin/$BASE_REF\"");
    assert!(script.contains("$GITHUB_STEP_SUMMARY"), "{script}");

    // Run the step as GitHub does (`shell: bash`), on a pull request's branch.
    let repo = Checkout::new();
    repo.git(&["switch", "-q", "-c", "gpu-pods"]);
    repo.edit("pools/gpu.yaml", "    maxPods: 64", "    maxPods: 48");
    repo.commit("gpu: 48 pods");
    let shell = ["bash", "--noprofile", "--norc", "-eo", "pipefail"];
    let run = |summary: &Path| {
        run_script(
            &repo,
            &shell,
            script,
            image,
            &[
                ("BASE_REF", "main".to_string()),
                ("GITHUB_STEP_SUMMARY", summary.display().to_string()),
            ],
        )
    };
    let summary = repo.scratch.path().join("summary-ok.md");
    let out = run(&summary);
    success_stdout(&out);
    let md = std::fs::read_to_string(&summary).expect("the plan is in the job summary");
    let base = repo.git(&["rev-parse", "--short", "origin/main"]);
    for want in [
        format!("Base `{base}` -> head"),
        "| `gpu` | changed |".to_string(),
        "maxPods: 64 -> 48".to_string(),
    ] {
        assert!(md.contains(&want), "missing {want:?} in\n{md}");
    }

    // A base that does not exist is no plan at all: the step fails with the binary's 2.
    let out = run_script(
        &repo,
        &shell,
        script,
        image,
        &[
            ("BASE_REF", "no-such-branch".to_string()),
            (
                "GITHUB_STEP_SUMMARY",
                repo.scratch.path().join("s.md").display().to_string(),
            ),
        ],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("origin/no-such-branch"), "{err}");

    // An invalid head fails the check, with an annotation on the file's line.
    repo.edit("pools/gpu.yaml", "    maxPods: 48", "    maxPod: 48");
    repo.commit("gpu: typo");
    let summary = repo.scratch.path().join("summary-bad.md");
    let out = run(&summary);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("::error file=pools/gpu.yaml,line=35,col=5::spec.kubelet.maxPod: unknown field \"maxPod\""),
        "{stdout}"
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("does not validate"), "{md}");
}

#[test]
fn the_gitlab_job_plans_merge_requests_against_the_target_branch() {
    let ci = yaml_file(".gitlab-ci.yml");
    let job = &ci["kubelet-gitops-plan"];
    let rules = serde_json::to_string(&job["rules"]).unwrap();
    assert!(rules.contains("merge_request_event"), "{rules}");
    assert_eq!(job["variables"]["GIT_DEPTH"], "0");
    let image = string(
        &job["variables"]["KUBELET_GITOPS_IMAGE"],
        "KUBELET_GITOPS_IMAGE",
    );
    assert_image(image);
    let paths = serde_json::to_string(&job["artifacts"]["paths"]).unwrap();
    assert!(paths.contains("plan.md"), "{paths}");
    let lines: Vec<&str> = job["script"]
        .as_array()
        .expect("script is a list")
        .iter()
        .map(|l| string(l, "a script line"))
        .collect();
    let script = lines.join("\n");
    assert!(
        script.contains("origin/${CI_MERGE_REQUEST_TARGET_BRANCH_NAME}"),
        "{script}"
    );
    assert_runs_plan(&script, "\"$BASE\"");

    // Run the script as the runner does (sh, -e), on a merge request's branch, after the
    // target branch moved on: the plan compares with the fork point, so the target's
    // newer commit does not show up as reverted.
    let repo = Checkout::new();
    repo.git(&["switch", "-q", "-c", "high-memory-pods"]);
    repo.edit(
        "pools/high-memory.yaml",
        "    cpuManagerPolicy: static\n",
        "    cpuManagerPolicy: static\n    maxPods: 80\n",
    );
    repo.commit("high-memory: 80 pods");
    let other = repo.scratch.path().join("other");
    git(
        repo.scratch.path(),
        &[
            "clone",
            "-q",
            repo.scratch.path().join("origin.git").to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    std::fs::write(
        other.join("pools/general.yaml"),
        std::fs::read_to_string(other.join("pools/general.yaml"))
            .unwrap()
            .replace("    maxPods: 150", "    maxPods: 120"),
    )
    .unwrap();
    git(&other, &["commit", "-q", "-a", "-m", "general: 120 pods"]);
    git(&other, &["push", "-q", "origin", "main"]);

    let env = [
        ("CI_PROJECT_DIR", repo.work_str()),
        ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "main".to_string()),
    ];
    let out = run_script(&repo, &["sh", "-e"], &script, image, &env);
    success_stdout(&out);
    let md = std::fs::read_to_string(repo.work().join("plan.md")).expect("plan.md is written");
    assert!(md.contains("maxPods: 110 -> 80"), "{md}");
    assert!(md.contains("| `high-memory` | changed |"), "{md}");
    assert!(md.contains("| `general` | unchanged |"), "{md}");

    // An invalid head fails the job.
    repo.edit(
        "pools/high-memory.yaml",
        "    maxPods: 80",
        "    maxPods: -1",
    );
    repo.commit("high-memory: negative pods");
    let out = run_script(&repo, &["sh", "-e"], &script, image, &env);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("spec.kubelet.maxPods: invalid configuration: maxPods (--max-pods) -1 must not be a negative number"),
        "{err}"
    );
}
