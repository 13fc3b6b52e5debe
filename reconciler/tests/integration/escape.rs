//! Text from a repository printed by the commands: a path or a value holding newlines,
//! terminal escapes or bytes that are not UTF-8 never forges a line of `validate` or
//! `plan` output, and a path holding one is an error of the commit (issue 12). The
//! statuses and git notes of such a commit are in [`crate::statuses_sim`].

use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use crate::support::commands::{bin, copy_tree, git, text};

/// The path of issue 12: a file whose name holds newlines that would read as a `valid`
/// line and a forged status line.
const FORGING_PATH: &str = "pools/x.yaml: valid\nkubelet-gitops: success: all good\npools/y.yaml";

const KUBELET: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

/// A git repository holding the plan fixture, committed once.
fn fixture_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/repo"),
        dir.path(),
    );
    std::fs::remove_file(dir.path().join("inventory.yaml")).unwrap();
    dir
}

fn commit(dir: &Path) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "hostile names"]);
}

/// Writes `body` at `rel` (bytes, so that a name need not be UTF-8).
fn write_bytes(dir: &Path, rel: &[u8], body: &str) {
    let path = dir.join(std::ffi::OsStr::from_bytes(rel));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

/// No line of `output` is one a forging name would add.
fn assert_no_forged_line(output: &str) {
    for line in output.lines() {
        assert!(
            !line.starts_with("kubelet-gitops: success") && !line.starts_with("pools/y.yaml"),
            "a forged line {line:?} in:\n{output}"
        );
    }
    assert!(
        !output.contains('\u{1b}') && !output.contains('\r'),
        "{output:?}"
    );
}

#[test]
fn validate_prints_a_file_named_to_forge_lines_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    write_bytes(dir.path(), FORGING_PATH.as_bytes(), KUBELET);
    // Keys and values that hold control characters are quoted in the errors, escaped.
    let evil = dir.path().join("evil\u{1b}[2J.yaml");
    std::fs::write(
        &evil,
        format!("{KUBELET}maxPods: -1\nfeatureGates:\n  \"No\\nSuchGate\\u001b[31m\": true\n"),
    )
    .unwrap();
    let out = bin()
        .arg("validate")
        .arg(dir.path().join(FORGING_PATH))
        .arg(&evil)
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert!(
        lines[0].ends_with(
            "/pools/x.yaml: valid\\nkubelet-gitops: success: all good\\npools/y.yaml: valid"
        ),
        "{stdout}"
    );
    assert_no_forged_line(&stdout);
    assert_no_forged_line(&stderr);
    assert!(stderr.contains("evil\\u{1b}[2J.yaml"), "{stderr}");
}

#[test]
fn plan_refuses_a_commit_whose_path_holds_a_control_character_naming_it_escaped() {
    let repo = fixture_repo();
    write_bytes(repo.path(), FORGING_PATH.as_bytes(), KUBELET);
    write_bytes(repo.path(), b"pools/bidi\xe2\x80\xae.yaml", KUBELET);
    commit(repo.path());
    let out = bin()
        .args(["plan", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_no_forged_line(&stdout);
    assert_no_forged_line(&stderr);
    let error = "pools/x.yaml: valid\\nkubelet-gitops: success: all good\\npools/y.yaml: the path \
                 holds a control character";
    assert!(
        stderr.lines().any(|l| l.starts_with(error)),
        "stderr names the path escaped: {stderr}"
    );
    assert!(
        stderr.contains("pools/bidi\\u{202e}.yaml: the path holds a control character"),
        "{stderr}"
    );
    // The Markdown lists the errors inside their block, nothing of the pools.
    assert!(
        stdout.contains("the head does not validate (2 errors)"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with(error)), "{stdout}");
}

#[test]
fn plan_refuses_a_commit_whose_path_is_not_utf8_naming_its_bytes() {
    let repo = fixture_repo();
    write_bytes(repo.path(), b"docs/caf\xe9\n.md", "# notes\n");
    commit(repo.path());
    let out = bin()
        .args(["plan", "--repo"])
        .arg(repo.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("docs/caf\\xe9\\n.md: the path is not valid UTF-8"),
        "{stderr}"
    );
    assert_no_forged_line(&stderr);
}
