//! A file with thousands of errors: `validate`, `render` and `plan` print the first
//! errors of each file and count the rest, and `run` logs a rejected commit in one line
//! with the count (the JSON log, read line by line).

use std::path::Path;
use std::process::Output;

use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::message::MAX_ERRORS_SHOWN;
use serde_json::Value;

use crate::support::commands::{bin, git, text};
use crate::support::*;

/// Unknown feature gates: one error each.
const UNKNOWN_GATES: usize = 2_000;

/// `featureGates:` with [`UNKNOWN_GATES`] unknown gates, at `indent`, starting on the line
/// after the `featureGates:` key.
fn unknown_gates(indent: &str) -> String {
    let mut s = format!("{indent}featureGates:\n");
    for i in 0..UNKNOWN_GATES {
        s.push_str(&format!("{indent}  NoSuchGate{i:04}: true\n"));
    }
    s
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_string_lossy().into_owned()
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run kubelet-gitops")
}

/// The lines of `stderr` that report an error of `file` (`file:` then a line number).
fn located<'a>(stderr: &'a str, file: &str) -> Vec<&'a str> {
    stderr
        .lines()
        .filter(|l| {
            l.strip_prefix(file)
                .and_then(|r| r.strip_prefix(':'))
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect()
}

fn more_line(file: &str, hidden: usize) -> String {
    format!(
        "{file}: and {hidden} more errors (only the first {MAX_ERRORS_SHOWN} of each file are \
         listed)"
    )
}

#[test]
fn validate_and_render_print_the_first_errors_by_line_and_count_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "many.yaml",
        &format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{}\
             maxPods: -1\n",
            unknown_gates("")
        ),
    );
    // One more error (maxPods) after the gates, by line: it is among those not shown.
    let total = UNKNOWN_GATES + 1;

    let out = run(&["validate", &file]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let shown = located(&stderr, &file);
    assert_eq!(shown.len(), MAX_ERRORS_SHOWN, "{stderr}");
    assert!(
        shown[0].starts_with(&format!(
            "{file}:4: featureGates.NoSuchGate0000: unrecognized feature gate"
        )),
        "{stderr}"
    );
    assert!(
        shown[MAX_ERRORS_SHOWN - 1].contains("NoSuchGate0019"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&more_line(&file, total - MAX_ERRORS_SHOWN)),
        "{stderr}"
    );
    assert!(stderr.contains("1 of 1 file(s) invalid"), "{stderr}");

    let out = run(&["render", "--effective", &file]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(located(&stderr, &file).len(), MAX_ERRORS_SHOWN, "{stderr}");
    assert!(
        stderr.contains(&more_line(&file, total - MAX_ERRORS_SHOWN)),
        "{stderr}"
    );
}

#[test]
fn plan_of_an_invalid_head_caps_each_files_errors_on_stderr_and_in_the_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    std::fs::create_dir_all(repo.join("pools")).unwrap();
    let pool = |name: &str, kubelet: &str| {
        format!(
            "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: {name}\n\
             spec:\n  nodeSelector: {{matchLabels: {{pool: {name}}}}}\n  kubelet:\n{kubelet}"
        )
    };
    write(
        &repo.join("pools"),
        "gpu.yaml",
        &pool("gpu", &unknown_gates("    ")),
    );
    write(
        &repo.join("pools"),
        "cpu.yaml",
        &pool("cpu", "    evictionHard: {nope: 1Mi, nah: 1Mi}\n"),
    );
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-qm", "many errors"]);

    let out = run(&["plan", "--repo", repo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let more = more_line("pools/gpu.yaml", UNKNOWN_GATES - MAX_ERRORS_SHOWN);
    assert_eq!(
        located(&stderr, "pools/gpu.yaml").len(),
        MAX_ERRORS_SHOWN,
        "{stderr}"
    );
    assert_eq!(located(&stderr, "pools/cpu.yaml").len(), 2, "{stderr}");
    assert!(stderr.contains(&more), "{stderr}");
    assert!(
        stderr.contains(&format!("{} errors", UNKNOWN_GATES + 2)),
        "the total: {stderr}"
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        located(&stdout, "pools/gpu.yaml").len(),
        MAX_ERRORS_SHOWN,
        "{stdout}"
    );
    assert!(stdout.contains(&more), "{stdout}");
    assert!(
        stdout.contains(&format!("({} errors)", UNKNOWN_GATES + 2)),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_logs_a_rejected_commit_once_with_its_count_and_first_errors() {
    let h = Harness::start(Inventory::generate(2, &["a", "b"])).await;
    h.repo.settings_and_pools(&[
        ("a", "maxUnavailable: 1", &unknown_gates("    ")),
        ("b", "maxUnavailable: 1", "    evictionHard: {nope: 1Mi}\n"),
    ]);
    let commit = h.repo.commit("thousands of errors");
    let (code, logs) = tokio::task::block_in_place(|| {
        let out = bin()
            .arg("run")
            .env("KUBELET_GITOPS_REPO_URL", h.repo.url())
            .env("KUBELET_GITOPS_KUBECONFIG", h.sim.kubeconfig_path())
            .env("KUBELET_GITOPS_CACHE_DIR", h.dir.path().join("cache"))
            .env("KUBELET_GITOPS_ADMIN_ADDR", "off")
            .env("KUBELET_GITOPS_ONCE", "true")
            .env("KUBELET_GITOPS_LOG_FORMAT", "json")
            .env("KUBELET_GITOPS_IDENTITY", "ci")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    });
    assert_eq!(code, Some(1), "{logs}");
    let lines: Vec<Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    // Every error of the commit is in one line, and only there.
    let naming: Vec<&Value> = lines
        .iter()
        .filter(|l| l.to_string().contains("pools/a.yaml"))
        .collect();
    assert_eq!(naming.len(), 1, "{logs}");
    let line = naming[0];
    assert_eq!(line["level"], "ERROR", "{line}");
    assert_eq!(line["commit"], commit.as_str(), "{line}");
    assert_eq!(line["problems"], UNKNOWN_GATES + 1, "{line}");
    let errors = line["errors"].as_str().expect("errors");
    assert_eq!(
        errors.matches("pools/a.yaml:").count(),
        MAX_ERRORS_SHOWN + 1,
        "{errors}"
    );
    assert!(
        errors.contains(&more_line("pools/a.yaml", UNKNOWN_GATES - MAX_ERRORS_SHOWN)),
        "{errors}"
    );
    assert!(errors.contains("pools/b.yaml:"), "{errors}");
    assert!(
        lines.iter().filter(|l| l["level"] == "ERROR").count() <= 2,
        "the rejection, and `stopped`: {logs}"
    );
    h.shutdown().await;
}
