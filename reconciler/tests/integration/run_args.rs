//! `kubelet-gitops run` refuses a configuration error at start: exit 2 at once, with a
//! message naming the option (and any credentials masked), before it logs "starting",
//! connects to a cluster or fetches anything. The kubeconfig points at a closed port, so
//! a process that went on would retry the API server for ever.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::commands::{bin, text};

/// Far longer than a start takes; only a process that kept running reaches it.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// `kubelet-gitops run` with `args` and `env` (the cache in `dir` unless `env` names
/// another), a kubeconfig of a closed port, with statuses
/// off (the configuration that used to keep running on a bad URL); its output once it
/// exits, or a failure naming what it printed if it is still running at [`HANG_GUARD`].
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let mut child = bin()
        .args(["run", "--admin-addr", "off"])
        .env("KUBELET_GITOPS_STATUS_BACKEND", "none")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("KUBELET_GITOPS_CACHE_DIR", dir.join("cache"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kubelet-gitops run");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "run {args:?} is still running after {HANG_GUARD:?}:\n{}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn a_configuration_error_exits_2_at_once_naming_the_option() {
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let token = token.to_str().unwrap();
    let not_a_dir = tmp.path().join("file");
    std::fs::write(&not_a_dir, "").unwrap();
    // The arguments, the variables, and how the message starts.
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, String);
    let cases: Vec<Case<'_>> = vec![
        (
            vec!["--repo-url", "http://user:pa55word@git.example/r.git"],
            vec![],
            "error: --repo-url \"http://***@git.example/r.git\": credentials in the URL are not allowed: put the token in --token-file".into(),
        ),
        (
            vec!["--repo-url", "http://git.example/r.git", "--token-file", token],
            vec![],
            "error: --repo-url \"http://git.example/r.git\": a token would be sent unencrypted over plain http://: use an https:// URL, or give --allow-insecure-http to send it anyway".into(),
        ),
        (
            vec![
                "--repo-url",
                "https://git.example/r.git",
                "--status-backend",
                "github",
                "--forge-url",
                "http://ghe.example/api/v3",
                "--forge-repo",
                "o/r",
                "--forge-token-file",
                token,
            ],
            vec![],
            "error: --forge-url \"http://ghe.example/api/v3\": the forge token would be sent unencrypted over plain http://".into(),
        ),
        (
            vec!["--repo-url", "ftp://git.example/r.git"],
            vec![],
            "error: --repo-url \"ftp://git.example/r.git\": unsupported scheme \"ftp\"".into(),
        ),
        (
            vec!["--repo-url", "https://git.example/r.git", "--branch", "a..b"],
            vec![],
            "error: --branch \"a..b\": not a valid git branch name".into(),
        ),
        (
            vec!["--repo-url", "https://git.example/r.git"],
            vec![("KUBELET_GITOPS_NAMESPACE", "Kube_System")],
            "error: --namespace \"Kube_System\": a lowercase RFC 1123 label".into(),
        ),
        (
            vec!["--repo-url", "https://git.example/r.git", "--exclude", "pools/[x"],
            vec![],
            "error: --exclude: invalid glob".into(),
        ),
        (
            vec!["--repo-url", "https://git.example/r.git"],
            vec![("KUBELET_GITOPS_CACHE_DIR", not_a_dir.to_str().unwrap())],
            "error: --cache-dir: cannot use git cache repository".into(),
        ),
    ];
    for (args, env, want) in cases {
        let out = run(tmp.path(), &args, &env);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {err}");
        assert!(
            err.starts_with(&want),
            "{args:?} {env:?}: want {want:?}, got:\n{err}"
        );
        assert_eq!(
            err.lines().count(),
            1,
            "one message, nothing started:\n{err}"
        );
        assert!(
            !err.contains("pa55word") && !err.contains("s3cret"),
            "{err}"
        );
    }
}

#[test]
fn allow_insecure_http_lets_a_token_go_to_a_plain_http_url() {
    // With the option (here its variable) the start checks pass; `--once` then fails to
    // reach the (closed) port and exits 2 after logging that it started.
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/r.git");
    let out = run(
        tmp.path(),
        &[
            "--once",
            "--repo-url",
            &url,
            "--token-file",
            token.to_str().unwrap(),
        ],
        &[("KUBELET_GITOPS_ALLOW_INSECURE_HTTP", "true")],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("starting"), "{err}");
    assert!(err.contains(&format!("cannot fetch from {url}")), "{err}");
    assert!(!err.contains("unencrypted"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}
