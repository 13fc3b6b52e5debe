//! `kubelet-gitops-sim serve` as a process: without `--workdir` it works in a directory of
//! its own under `$TMPDIR` and removes it when SIGTERM or SIGINT ends it; a `--workdir`
//! given is kept.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Far longer than a start or a shutdown takes; only a hung process reaches it.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// `serve` of two generated nodes with `TMPDIR=tmp`, and the work directory it printed.
fn serve(tmp: &Path, extra: &[&str]) -> (Child, PathBuf) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops-sim"))
        .args(["serve", "--generate-nodes", "2", "--pools", "a,b"])
        .arg("--kubeconfig-out")
        .arg(tmp.join("kubeconfig"))
        .args(extra)
        .env("TMPDIR", tmp)
        .env_remove("KUBELET_GITOPS_SIM_WORKDIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kubelet-gitops-sim serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut workdir = None;
    let mut nodes = 0;
    let mut lines = BufReader::new(stdout).lines();
    // `serve` prints its workdir, then a line per node once every kubelet runs.
    for line in lines.by_ref() {
        let line = line.expect("read stdout");
        if let Some(dir) = line.strip_prefix("workdir:") {
            workdir = Some(PathBuf::from(dir.trim()));
        }
        if line.starts_with("node ") {
            nodes += 1;
            if nodes == 2 {
                break;
            }
        }
    }
    let workdir = workdir.expect("serve printed its workdir");
    // Whatever else it prints is read, so that it never writes to a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (child, workdir)
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name}");
}

fn wait(child: &mut Child) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            panic!("serve did not end within {HANG_GUARD:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_removes_its_temporary_workdir_on_sigterm_and_sigint() {
    for sig in ["TERM", "INT"] {
        let tmp = tempfile::tempdir().unwrap();
        let (mut child, workdir) = serve(tmp.path(), &[]);
        assert!(
            workdir.starts_with(tmp.path()),
            "{} is under $TMPDIR {}",
            workdir.display(),
            tmp.path().display()
        );
        assert!(
            workdir.join("nodes").is_dir(),
            "{}: the node roots",
            workdir.display()
        );
        signal(&child, sig);
        let status = wait(&mut child);
        assert!(status.success(), "SIG{sig}: {status:?}");
        assert!(
            !workdir.exists(),
            "SIG{sig}: {} is left behind",
            workdir.display()
        );
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "kubeconfig")
            .collect();
        assert!(left.is_empty(), "SIG{sig}: left in $TMPDIR: {left:?}");
    }
}

#[test]
fn serve_keeps_a_workdir_it_was_given() {
    let tmp = tempfile::tempdir().unwrap();
    let given = tmp.path().join("kept");
    let (mut child, workdir) = serve(tmp.path(), &["--workdir", given.to_str().unwrap()]);
    assert_eq!(workdir, given);
    signal(&child, "TERM");
    assert!(wait(&mut child).success());
    assert!(given.join("nodes").is_dir(), "the given workdir is kept");
}
