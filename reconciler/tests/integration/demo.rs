//! `kubelet-gitops demo` end to end: the built binary runs the whole demo (simulated
//! cluster, git repositories, the reconciler, twelve real agent processes) in a kept work
//! directory, and the test checks both what it printed and what it left on disk: every
//! node's kubelet config file is exactly its pool's rendered config of the right commit,
//! the canary rolled back and no other node saw the bad config, and the statuses are in
//! the repository's git notes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use reconciler::git::open_revision;
use reconciler::render::{RenderOptions, RenderedRepo, render_repo};

use crate::support::serial;

const DEMO_LIMIT: Duration = Duration::from_secs(300);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the reconciler crate is in the workspace")
        .to_path_buf()
}

/// The newest modification time of the files under `paths` (recursively).
fn newest(paths: &[PathBuf]) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut todo: Vec<PathBuf> = paths.to_vec();
    while let Some(p) = todo.pop() {
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(m) = meta.modified() {
            newest = newest.max(m);
        }
    }
    newest
}

/// The agent binary: the one cargo built beside `kubelet-gitops` (as `cargo test
/// --workspace` does) when it is newer than the agent's sources; otherwise built now with
/// `cargo build -p node-agent` into a target directory of its own, since the `cargo test`
/// running this holds the lock of the shared one.
fn agent_binary() -> PathBuf {
    let ws = workspace();
    let beside = Path::new(env!("CARGO_BIN_EXE_kubelet-gitops"))
        .parent()
        .expect("binaries live in a directory")
        .join("kubelet-gitops-agent");
    let sources = newest(&[
        ws.join("node-agent/src"),
        ws.join("node-agent/Cargo.toml"),
        ws.join("core/src"),
        ws.join("core/Cargo.toml"),
    ]);
    let fresh = std::fs::metadata(&beside)
        .and_then(|m| m.modified())
        .is_ok_and(|built| built >= sources);
    if fresh {
        return beside;
    }
    let target_dir = ws.join("target/demo-test");
    eprintln!(
        "{} is missing or older than its sources: building it into {}",
        beside.display(),
        target_dir.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let status = Command::new(cargo)
        .args(["build", "-p", "node-agent", "--bin", "kubelet-gitops-agent"])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&ws)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build -p node-agent failed");
    target_dir.join("debug/kubelet-gitops-agent")
}

/// Runs the demo with `extra` arguments; returns (exit code, stdout, stderr, how long it
/// took).
fn run_demo(
    workdir: &Path,
    agent: &Path,
    out_dir: &Path,
    extra: &[&str],
) -> (Option<i32>, String, String, Duration) {
    let _turn = serial::alone();
    let stdout_file = out_dir.join("stdout");
    let stderr_file = out_dir.join("stderr");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops"))
        .arg("demo")
        .arg("--workdir")
        .arg(workdir)
        .arg("--agent-bin")
        .arg(agent)
        .args(["--speed", "fast"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_file).unwrap())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .spawn()
        .expect("kubelet-gitops runs");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEMO_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the demo did not end within {DEMO_LIMIT:?}; stdout:\n{}",
                std::fs::read_to_string(&stdout_file).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = started.elapsed();
    (
        status.code(),
        std::fs::read_to_string(&stdout_file).unwrap(),
        std::fs::read_to_string(&stderr_file).unwrap(),
        took,
    )
}

/// The demo's output split at its `==> ` headings: heading -> the lines under it.
fn sections(stdout: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in stdout.lines() {
        if let Some(heading) = line.strip_prefix("==> ") {
            out.push((heading.to_string(), Vec::new()));
        } else if let Some((_, lines)) = out.last_mut() {
            lines.push(line.to_string());
        }
    }
    out
}

fn section<'a>(all: &'a [(String, Vec<String>)], prefix: &str) -> &'a [String] {
    all.iter()
        .find(|(h, _)| h.starts_with(prefix))
        .map(|(_, lines)| lines.as_slice())
        .unwrap_or_else(|| panic!("no section {prefix:?} in the output"))
}

/// The last progress line printed for each pool in a section.
fn last_pool_lines(lines: &[String]) -> BTreeMap<String, String> {
    let mut last = BTreeMap::new();
    for line in lines {
        let trimmed = line.trim_start();
        if let Some(pool) = ["general", "gpu", "high-memory"]
            .into_iter()
            .find(|p| trimmed.starts_with(&format!("{p} ")) && trimmed.contains(" Done  "))
        {
            last.insert(pool.to_string(), trimmed.to_string());
        }
    }
    last
}

fn render(repo: &Path, rev: &str) -> RenderedRepo {
    let src = open_revision(repo, rev).unwrap_or_else(|e| panic!("{rev}: {e}"));
    render_repo(&src, &RenderOptions::default()).unwrap_or_else(|e| panic!("{rev}: {e:?}"))
}

/// Which cluster the demo ran on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cluster {
    Sim,
    Real,
}

#[test]
fn the_demo_rolls_out_halts_on_a_rollback_and_notes_the_statuses() {
    let agent = agent_binary();
    let tmp = tempfile::tempdir().unwrap();
    let workdir = tmp.path().join("demo");
    let (code, stdout, stderr, took) = run_demo(&workdir, &agent, tmp.path(), &[]);
    eprintln!("the demo took {:.1}s", took.as_secs_f64());
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    check_story(&stdout, &workdir, Cluster::Sim);
}

/// `kubelet-gitops demo --cluster real`: the same three acts on a real v1.36 control
/// plane and 12 real kubelets, checked the same way. Skipped (saying so) without the
/// upstream binaries, unless KUBELET_GITOPS_E2E_REQUIRE is set (CI), which makes their
/// absence a failure.
#[test]
fn the_demo_on_real_kubernetes_tells_the_same_story() {
    let Some(bins) = kubelet_gitops_e2e::real::UpstreamBinaries::locate_or_skip(
        "the_demo_on_real_kubernetes_tells_the_same_story",
    ) else {
        return;
    };
    let dir = bins
        .kubelet
        .parent()
        .expect("the binaries are in a directory")
        .to_path_buf();
    let agent = agent_binary();
    // Short: the real kubelets' unix sockets live under the work directory.
    let tmp = tempfile::Builder::new()
        .prefix("kgdemo")
        .tempdir_in("/tmp")
        .unwrap();
    let workdir = tmp.path().join("d");
    let upstream = format!("--upstream-bin={}", dir.display());
    let (code, stdout, stderr, took) = run_demo(
        &workdir,
        &agent,
        tmp.path(),
        &["--cluster", "real", &upstream],
    );
    eprintln!(
        "the demo on real Kubernetes took {:.1}s",
        took.as_secs_f64()
    );
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("12 real kubelets Ready"), "{stdout}");
    check_story(&stdout, &workdir, Cluster::Real);
    // The real cluster is gone: no kubelet of this demo runs any more.
    let ps = Command::new("pgrep")
        .args(["-f", &workdir.display().to_string()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&ps.stdout).trim().is_empty(),
        "processes of the demo still run: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

/// What the demo printed and left in `workdir`, checked against its story.
fn check_story(stdout: &str, workdir: &Path, cluster: Cluster) {
    let all = sections(stdout);

    // Rollout 1: every pool Complete.
    let first = last_pool_lines(section(&all, "Rollout 1"));
    assert_eq!(first.len(), 3, "{first:?}");
    for (pool, line) in &first {
        assert!(line.contains("[complete]"), "{pool}: {line}");
        let n = if pool == "general" { 6 } else { 3 };
        assert!(line.contains(&format!(" {n}/{n} Done ")), "{pool}: {line}");
    }
    // Rollout 2: general moves to a new ConfigMap, and the flag override is reported.
    let second_lines = section(&all, "Rollout 2");
    let second = last_pool_lines(second_lines);
    assert!(second["general"].contains("[complete]") && second["general"].contains(" 6/6 Done "));
    assert_ne!(
        first["general"].split_whitespace().nth(4),
        second["general"].split_whitespace().nth(4),
        "general has a new ConfigMap"
    );
    assert!(
        second_lines
            .iter()
            .any(|l| l.contains("general-5: ") && l.contains("--max-pods gives 110, not 200")),
        "{second_lines:?}"
    );
    // Rollout 3: the canary rolled back, the pool halted, nobody else touched.
    let third_lines = section(&all, "Rollout 3");
    let third = last_pool_lines(third_lines);
    assert!(third["gpu"].contains("[halted]"), "{}", third["gpu"]);
    assert!(third["gpu"].contains(" 0/3 Done "), "{}", third["gpu"]);
    assert!(
        third["gpu"].contains("gpu-1 RolledBack"),
        "{}",
        third["gpu"]
    );
    let canary = third_lines
        .iter()
        .find(|l| l.trim_start().starts_with("gpu-1: RolledBack ("))
        .unwrap_or_else(|| panic!("{third_lines:?}"));
    assert!(
        canary.contains("kubelet did not become healthy"),
        "{canary}"
    );
    assert!(
        canary.contains("rolled back to kubelet-gitops/kubelet-gpu-"),
        "{canary}"
    );
    // The kubelet's own reason, from its log.
    assert!(
        third_lines
            .iter()
            .any(|l| l.trim_start().starts_with("gpu-1's kubelet log: ")
                && l.contains("error creating pod logs root directory")
                && l.contains("not a directory")),
        "{third_lines:?}"
    );
    assert!(
        third_lines
            .iter()
            .any(|l| l.contains("gpu-2 and gpu-3 never got it")
                && l.contains("no other kubelet restarted")),
        "{third_lines:?}"
    );
    // `kubelet-gitops status` after the halt: one line per pool, then the nodes not Done.
    let status = section(&all, "Where every pool stands: kubelet-gitops status");
    let pool_line = |pool: &str| {
        status
            .iter()
            .find(|l| l.starts_with(&format!("{pool} ")))
            .unwrap_or_else(|| panic!("no {pool} line in {status:?}"))
    };
    assert!(pool_line("gpu").contains(" halted "), "{status:?}");
    assert!(pool_line("gpu").contains("0/3 (1 failed)"), "{status:?}");
    assert!(pool_line("general").contains(" complete "), "{status:?}");
    assert!(pool_line("general").contains(" 6/6"), "{status:?}");
    assert!(pool_line("high-memory").contains(" 3/3"), "{status:?}");
    assert!(
        status
            .iter()
            .any(|l| l.starts_with("gpu-1 ") && l.contains(" RolledBack ")),
        "{status:?}"
    );
    // The statuses, from git notes.
    let statuses = section(&all, "Commit statuses").join("\n");
    for expected in [
        "kubelet-gitops/gpu: failure: gpu-1 rolled back",
        "kubelet-gitops/general: success: 6/6 nodes",
        "kubelet-gitops/high-memory: success: 3/3 nodes",
        "kubelet-gitops: failure: 3 pools: 1 failed, 2 done",
    ] {
        assert!(statuses.contains(expected), "{expected:?} in:\n{statuses}");
    }

    // On disk: every node runs exactly its pool's config of the expected commit.
    let repo = workdir.join("repo");
    let (c1, c2, c3) = (
        render(&repo, "HEAD~2"),
        render(&repo, "HEAD~1"),
        render(&repo, "HEAD"),
    );
    let bad = &c3.pool("gpu").unwrap().rendered;
    assert!(bad.contains("podLogsDir: "), "{bad}");
    assert!(bad.contains("/mnt/nvme/pod-logs\n"), "{bad}");
    let inventory =
        std::fs::read_to_string(workspace().join("examples-repo/inventory.yaml")).unwrap();
    let nodes: Vec<&str> = inventory
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- name: "))
        .collect();
    assert_eq!(nodes.len(), 12);
    for node in &nodes {
        let root = workdir.join("nodes").join(node);
        let config = std::fs::read_to_string(root.join("var/lib/kubelet/config.yaml")).unwrap();
        let expected = if node.starts_with("general-") {
            &c2.pool("general").unwrap().rendered
        } else if node.starts_with("gpu-") {
            &c1.pool("gpu").unwrap().rendered
        } else {
            &c1.pool("high-memory").unwrap().rendered
        };
        assert_eq!(&config, expected, "{node}'s kubelet config");

        // Only the canary ever downloaded the bad config.
        let mut checkpoints = Vec::new();
        let mut todo = vec![root.join("var/lib/kubelet-gitops/checkpoints")];
        while let Some(dir) = todo.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    todo.push(p);
                } else if p.file_name().is_some_and(|n| n == "kubelet") {
                    checkpoints.push(std::fs::read_to_string(p).unwrap());
                }
            }
        }
        assert_eq!(
            checkpoints.iter().any(|c| c == bad),
            *node == "gpu-1",
            "{node} and the bad config"
        );

        if cluster == Cluster::Sim {
            // The kubelet's flags name paths on the node, as kubeadm writes them, never the
            // node's root; the agent read them with --host-root=<root>, and found everything
            // a node has (containerd's socket included): no validation warning.
            let flags =
                std::fs::read_to_string(root.join("var/lib/kubelet/kubeadm-flags.env")).unwrap();
            assert!(
                flags.contains("--config=/var/lib/kubelet/config.yaml ")
                    && flags.contains("--config-dir=/etc/kubernetes/kubelet.conf.d"),
                "{node}: {flags}"
            );
            assert!(
                !flags.contains(&root.display().to_string()),
                "{node}'s flags name its root: {flags}"
            );
        }
        let agent_log =
            std::fs::read_to_string(workdir.join("logs").join(format!("agent-{node}.log")))
                .unwrap();
        assert!(
            !agent_log.contains("validation warning"),
            "{node}'s agent warned:\n{agent_log}"
        );

        // Kubelet starts: the first, one per config the node moved to, none for the bad
        // config elsewhere (gpu-1's failed starts are not "Started", its rollback is).
        let log = std::fs::read_to_string(root.join("var/log/kubelet.log")).unwrap();
        let started = log.matches("\"Started kubelet\"").count();
        let expected_starts = match *node {
            n if n.starts_with("general-") => 3,
            "gpu-1" => 3,
            _ => 2,
        };
        // A real kubelet says "Started kubelet" before it fails on podLogsDir, at every
        // start of its crash loop; the stand-in only once it runs.
        if *node == "gpu-1" && cluster == Cluster::Real {
            assert!(started > expected_starts, "{node}'s kubelet starts:\n{log}");
        } else {
            assert_eq!(started, expected_starts, "{node}'s kubelet starts:\n{log}");
        }
        assert_eq!(
            log.contains("pod logs root directory"),
            *node == "gpu-1",
            "{node}'s kubelet log and the bad podLogsDir"
        );
    }

    // The notes are in the remote ("the forge") itself.
    let remote = git2::Repository::open_bare(workdir.join("remote.git")).unwrap();
    let head = remote.refname_to_id("refs/heads/main").unwrap();
    let note = remote
        .find_note(Some("refs/notes/kubelet-gitops"), head)
        .expect("the bad commit has a note");
    let text = String::from_utf8_lossy(note.message_bytes()).into_owned();
    assert!(text.contains("kubelet-gitops/gpu: failure:"), "{text}");
}
