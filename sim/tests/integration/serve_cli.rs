//! `kubelet-gitops-sim serve` as a process: without `--workdir` it works in a directory of
//! its own under `$TMPDIR` and removes it when SIGTERM or SIGINT ends it; a `--workdir`
//! given is kept. With `--log-format json` every line of its log is a JSON object with
//! no key twice.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Far longer than a start or a shutdown takes; only a hung process reaches it.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn sim() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubelet-gitops-sim"));
    for (k, _) in std::env::vars() {
        if k.starts_with("KUBELET_GITOPS_SIM_") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    c
}

/// `serve` of two generated nodes with `TMPDIR=tmp` (its stderr to `stderr`, else
/// nowhere), the work directory and the API URL it printed.
fn serve_logging(
    tmp: &Path,
    extra: &[&str],
    stderr: Option<std::fs::File>,
) -> (Child, PathBuf, String) {
    let mut child = sim()
        .args(["serve", "--generate-nodes", "2", "--pools", "a,b"])
        .arg("--kubeconfig-out")
        .arg(tmp.join("kubeconfig"))
        .args(extra)
        .env("TMPDIR", tmp)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(stderr.map_or_else(Stdio::null, Stdio::from))
        .spawn()
        .expect("start kubelet-gitops-sim serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut workdir = None;
    let mut url = None;
    let mut nodes = 0;
    let mut lines = BufReader::new(stdout).lines();
    // `serve` prints its workdir, then a line per node once every kubelet runs.
    for line in lines.by_ref() {
        let line = line.expect("read stdout");
        if let Some(dir) = line.strip_prefix("workdir:") {
            workdir = Some(PathBuf::from(dir.trim()));
        }
        if let Some(u) = line.strip_prefix("API server:") {
            url = Some(u.trim().to_string());
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
    (child, workdir, url.expect("serve printed its URL"))
}

fn serve(tmp: &Path, extra: &[&str]) -> (Child, PathBuf) {
    let (child, workdir, _) = serve_logging(tmp, extra, None);
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

#[test]
fn the_json_log_has_no_line_with_a_key_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let log_path = tmp.path().join("sim.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let (mut child, _, url) = serve_logging(tmp.path(), &["--log-format", "json"], Some(log));
    // A kubelet restart through the CLI (its log in JSON too), then the shutdown.
    let out = sim()
        .args(["restart-kubelet", "--server", &url, "--node", "a-0"])
        .env("KUBELET_GITOPS_SIM_LOG_FORMAT", "json")
        .env("RUST_LOG", "debug")
        .output()
        .expect("run restart-kubelet");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    signal(&child, "TERM");
    assert!(wait(&mut child).success());
    let text = std::fs::read_to_string(&log_path).unwrap() + &String::from_utf8_lossy(&out.stderr);
    let mut lines = 0;
    for line in text.lines() {
        if let Err(e) = kubelet_gitops_core::logging::parse_json_line(line) {
            panic!("{e}");
        }
        lines += 1;
    }
    assert!(lines >= 3, "the sim logged:\n{text}");
}
