//! The file-level commands, run as a user runs them: the built binary on files on disk.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::commands::{bin, repo_root, text};

fn examples() -> PathBuf {
    repo_root().join("examples/node")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run kubelet-gitops")
}

/// `kubelet-gitops render --effective --flags <flags>` of the example's `kubelet.yaml`.
fn render_effective_with_flags(flags: &str) -> Output {
    let config = examples().join("kubelet.yaml");
    run(&[
        "render",
        "--effective",
        "--flags",
        flags,
        config.to_str().unwrap(),
    ])
}

fn write(dir: &Path, name: &str, body: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_string_lossy().into_owned()
}

const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

#[test]
fn validate_exit_codes_and_locations() {
    let ex = examples();
    let good = ex.join("kubelet.yaml");
    let out = run(&["validate", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let bad = ex.join("invalid.yaml");
    let out = run(&["validate", good.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let name = bad.display().to_string();
    // Every problem as file:line: field.path: message, in line order.
    assert!(err.contains(&format!("{name}:3: maxPods: invalid configuration: maxPods (--max-pods) -5 must not be a negative number")), "{err}");
    assert!(
        err.contains(&format!("{name}:5: imageGCLowThresholdPercent: ")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{name}:7: evictionHard.memory.available: ")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "{name}:12: authorization.mode: unknown authorization mode Sometimes"
        )),
        "{err}"
    );
    let lines: Vec<usize> = err
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|l| l.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        lines.windows(2).all(|w| w[0] <= w[1]),
        "sorted by line: {lines:?}"
    );

    let out = run(&["validate", ex.join("misspelled.yaml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(
        ":3:1: sytemReserved: unknown field \"sytemReserved\" (did you mean `systemReserved`?)"
    ));

    let out = run(&["validate", "/nonexistent/kubelet.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read /nonexistent/kubelet.yaml"));
    let out = run(&["validate"]);
    assert_eq!(out.status.code(), Some(2), "usage error");
}

#[test]
fn bad_input_is_a_clear_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(String, &str)> = vec![
        (write(dir.path(), "empty.yaml", b""), "empty"),
        (write(dir.path(), "binary.yaml", b"\x00\x01\xffkind"), "binary"),
        (write(dir.path(), "multi.yaml", format!("{HEAD}---\n{HEAD}").as_bytes()), "second YAML document"),
        (write(dir.path(), "proxy.yaml", b"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"), "expected \"KubeletConfiguration\""),
        (write(dir.path(), "big.yaml", format!("{HEAD}staticPodPath: {}\n", "a".repeat(1_100_000)).as_bytes()), "1 MiB"),
        (write(dir.path(), "deep.yaml", format!("{HEAD}staticPodURLHeader: {}{}\n", "[".repeat(20_000), "]".repeat(20_000)).as_bytes()), "nested deeper"),
        (write(dir.path(), "dup.yaml", format!("{HEAD}maxPods: 1\nmaxPods: 2\n").as_bytes()), "duplicate key"),
        (write(dir.path(), "type.json", br#"{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":"many"}"#), "maxPods"),
    ];
    for (path, expect) in cases {
        let out = run(&["validate", &path]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path}: {err}");
        assert!(err.starts_with(&path), "names the file: {err}");
        assert!(err.contains(expect), "{path}: expected {expect:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn render_applies_dropins_then_flags_and_marks_them() {
    let ex = examples();
    let out = run(&[
        "render",
        "--effective",
        "--flags-file",
        ex.join("kubeadm-flags.env").to_str().unwrap(),
        "--flags-file",
        ex.join("default-kubelet").to_str().unwrap(),
        "--config-dir",
        ex.join("kubelet.conf.d").to_str().unwrap(),
        "--flags",
        "--kube-api-qps=25",
        ex.join("kubelet.yaml").to_str().unwrap(),
    ]);
    let yaml = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}{yaml}", text(&out.stderr));
    // The file says 110; /etc/default/kubelet's --max-pods=64 wins.
    assert!(
        yaml.contains("maxPods: 64  # flag --max-pods (overrides 110)"),
        "{yaml}"
    );
    assert!(
        yaml.contains("kubeAPIQPS: 25  # flag --kube-api-qps (overrides 50)"),
        "{yaml}"
    );
    // A map flag replaces the whole map.
    assert!(
        yaml.contains("systemReserved:  # flag --system-reserved"),
        "{yaml}"
    );
    assert!(
        yaml.contains("  cpu: \"1\"") || yaml.contains("  cpu: '1'"),
        "{yaml}"
    );
    // The drop-in's logging.verbosity, and defaults the file does not set.
    assert!(yaml.contains("verbosity: 2"), "{yaml}");
    assert!(yaml.contains("healthzPort: 10248"), "{yaml}");
    // The printed YAML is itself a valid config (minus the comment marks).
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "rendered.yaml", yaml.as_bytes());
    let out = run(&["validate", &path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // Without --effective only what the files and flags set is printed.
    let out = run(&[
        "render",
        "--flags",
        "--max-pods=7",
        ex.join("kubelet.yaml").to_str().unwrap(),
    ]);
    let yaml = text(&out.stdout);
    assert!(yaml.contains("maxPods: 7"), "{yaml}");
    assert!(!yaml.contains("healthzPort"), "{yaml}");

    let out = render_effective_with_flags("--no-such-flag");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unknown flag: --no-such-flag"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn render_reports_a_config_the_flags_make_invalid() {
    let out = render_effective_with_flags("--max-pods=-1");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("maxPods") && err.contains("set by the kubelet flag --max-pods"),
        "{err}"
    );
}

#[test]
fn configmap_name_is_stable_and_content_addressed() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.yaml",
        format!("{HEAD}maxPods: 10\n").as_bytes(),
    );
    let b = write(
        dir.path(),
        "b.yaml",
        format!("{HEAD}maxPods: 11\n").as_bytes(),
    );
    let name = |f: &str| {
        text(&run(&["configmap-name", "kubelet-gpu", f]).stdout)
            .trim()
            .to_string()
    };
    let (na, nb) = (name(&a), name(&b));
    assert!(
        na.starts_with("kubelet-gpu-") && na.len() == "kubelet-gpu-".len() + 10,
        "{na}"
    );
    assert_ne!(na, nb);
    assert_eq!(na, name(&a));
    let out = run(&["configmap-name", "Kubelet_GPU", &a]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn run_logs_plain_text_when_not_at_a_terminal() {
    // `kubectl logs`, the journal and log shippers read a pipe or a file: no colour codes,
    // even with NO_COLOR unset. The repository does not exist: `--once` stops at once.
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = write(
        tmp.path(),
        "kubeconfig",
        b"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    );
    let repo = format!("file://{}", tmp.path().join("missing.git").display());
    let cache = tmp.path().join("cache");
    let out = bin()
        .args([
            "run",
            "--once",
            "--admin-addr",
            "off",
            "--log-format",
            "text",
        ])
        .args(["--repo-url", &repo, "--kubeconfig", &kubeconfig])
        .arg("--cache-dir")
        .arg(&cache)
        .env_remove("NO_COLOR")
        .output()
        .expect("run kubelet-gitops");
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("INFO") && err.contains("missing.git") && err.contains("ERROR"),
        "{err}"
    );
    assert!(!err.contains('\x1b'), "colour codes in piped logs:\n{err}");
}
