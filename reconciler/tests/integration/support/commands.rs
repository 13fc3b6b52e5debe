//! Processes the tests start and files they read, without a cluster: the built
//! `kubelet-gitops`, a hermetic git CLI, and the repository's own files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root (the directory holding `deploy/`, `docs/` and `node-agent/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the reconciler crate sits in the workspace root")
        .to_path_buf()
}

/// The text of `rel`, relative to [`repo_root`].
pub fn read(rel: &str) -> String {
    let path = repo_root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The binary under test, with no `KUBELET_GITOPS_*` variable leaking in: the test
/// decides every option.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops"));
    for (k, _) in std::env::vars() {
        if k.starts_with("KUBELET_GITOPS_") {
            c.env_remove(k);
        }
    }
    c
}

/// The stdout of a process that must have exited 0 (its stderr and stdout are in the
/// failure message).
pub fn success_stdout(out: &Output) -> String {
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{stdout}",
        text(&out.stderr)
    );
    stdout
}

/// `kubelet-gitops <args>`, which must succeed, with a wide terminal (clap lays `--help`
/// out for `COLUMNS`): its stdout.
pub fn stdout_of(args: &[&str]) -> String {
    let out = bin()
        .args(args)
        .env("COLUMNS", "200")
        .output()
        .unwrap_or_else(|e| panic!("run kubelet-gitops {args:?}: {e}"));
    success_stdout(&out)
}

/// What `kubelet-gitops configmap-name kubelet-<pool> <file>` prints (it must exit 0).
pub fn configmap_name(pool: &str, file: &Path) -> String {
    let out = bin()
        .args(["configmap-name", &format!("kubelet-{pool}")])
        .arg(file)
        .output()
        .expect("run kubelet-gitops configmap-name");
    success_stdout(&out).trim().to_string()
}

/// git in `dir` with a fixed identity, branch `main` for new repositories, no signing,
/// and no configuration of the user or the system (`HOME` is `dir`).
pub fn git_command(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir);
    c
}

/// [`git_command`] with `args`, which must succeed: its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_command(dir).args(args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

/// Copies the tree `from` into `to` (created); a symlink in it is a test failure.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        assert!(
            !kind.is_symlink(),
            "{}: the tree holds no symlinks",
            entry.path().display()
        );
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
