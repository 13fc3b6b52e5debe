//! Our content-addressed ConfigMap names against the real `kubectl`.
//!
//! Every case writes a file and compares `kubelet_configmap_name` with what
//! `kubectl create configmap BASENAME --from-file=kubelet=FILE --append-hash
//! --dry-run=client -o jsonpath={.metadata.name}` prints. kubectl runs offline: it gets an
//! empty kubeconfig (`KUBECONFIG` pointing at an empty file) and a client-side dry run
//! never contacts a server.
//!
//! kubectl is taken from `$KUBECTL` (which must then name a file), else from `PATH`.
//! Without it the test is skipped with a note on stderr, except under CI (`CI` set),
//! where it fails: `.ci/run` must install it.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kubelet_gitops_core::hash::{CONFIGMAP_KEY, SUFFIX_LEN, kubelet_configmap_name};

/// Where kubectl is, or `None` when it is not installed.
fn find_kubectl() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("KUBECTL").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(explicit);
        // Someone asked for this kubectl: a wrong path is an error, not a reason to skip.
        assert!(
            path.is_file(),
            "$KUBECTL is {}, which is not a file",
            path.display()
        );
        return Some(path);
    }
    let path_var = std::env::var_os("PATH")?;
    std::env::split_paths(&path_var)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
}

/// kubectl, or `None` when the test should be skipped (never under CI).
fn kubectl_or_skip() -> Option<PathBuf> {
    match find_kubectl() {
        Some(path) => Some(path),
        None if std::env::var_os("CI").is_some() => panic!(
            "kubectl not found ($KUBECTL unset and not on PATH), but CI is set: \
             .ci/run must install kubectl so that kubectl_hash can compare names with it"
        ),
        None => {
            // Written to the stderr handle, not with eprintln!, so that libtest's output
            // capture does not hide the skip.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED kubectl_hash: kubectl not found ($KUBECTL or PATH); \
                 install kubectl to compare our ConfigMap names with kubectl --append-hash"
            );
            None
        }
    }
}

/// Runs kubectl offline and returns its stdout, failing the test on any error.
fn run_kubectl(kubectl: &Path, kubeconfig: &Path, args: &[OsString]) -> String {
    let output = Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap_or_else(|e| panic!("failed to run {}: {e}", kubectl.display()));
    assert!(
        output.status.success(),
        "{} {:?} failed ({}): {}",
        kubectl.display(),
        args,
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("kubectl printed non-UTF-8 output")
}

fn create_args(basename: &str, file: &Path, output: &str) -> Vec<OsString> {
    let mut from_file = OsString::from(format!("--from-file={CONFIGMAP_KEY}="));
    from_file.push(file);
    vec![
        "create".into(),
        "configmap".into(),
        basename.into(),
        from_file,
        "--append-hash".into(),
        "--dry-run=client".into(),
        "-o".into(),
        output.into(),
    ]
}

/// A small deterministic generator (xorshift64*), so the mixed cases are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
}

/// Text built from the characters whose JSON encoding is easiest to get wrong.
fn tricky_text(rng: &mut Rng, len: usize) -> String {
    const PIECES: &[&str] = &[
        "a",
        "Z",
        "9",
        " ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\"",
        "\\",
        "/",
        "'",
        "<",
        ">",
        "&",
        "\u{0}",
        "\u{1}",
        "\u{8}",
        "\u{b}",
        "\u{c}",
        "\u{1b}",
        "\u{1f}",
        "\u{7f}",
        "\u{80}",
        "\u{a0}",
        "é",
        "ß",
        "中",
        "\u{2027}",
        "\u{2028}",
        "\u{2029}",
        "\u{202a}",
        "\u{feff}",
        "\u{fffd}",
        "\u{ffff}",
        "🦀",
        "\u{10ffff}",
        "key: value",
        "- item",
        "# comment",
        "${X}",
        "%s",
    ];
    (0..len).map(|_| PIECES[rng.below(PIECES.len())]).collect()
}

fn binary_blob(rng: &mut Rng, len: usize) -> Vec<u8> {
    // Start with 0xff so that the blob is never valid UTF-8.
    let mut bytes = vec![0xff];
    bytes.extend((1..len).map(|_| rng.next().to_le_bytes()[0]));
    bytes
}

/// The inputs: (basename, description, file bytes).
fn cases() -> Vec<(&'static str, String, Vec<u8>)> {
    let yaml = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                maxPods: 110\nevictionHard:\n  memory.available: 100Mi\n  nodefs.available: \"10%\"\n\
                systemReserved:\n  cpu: 500m\n  memory: 1Gi\n";
    let mut cases: Vec<(&'static str, String, Vec<u8>)> = vec![
        ("kubelet-default", "plain YAML".into(), yaml.into()),
        (
            "kubelet-gpu",
            "plain YAML, other basename".into(),
            yaml.into(),
        ),
        ("a", "plain YAML, one-letter basename".into(), yaml.into()),
        (
            "kubelet-a-very-long-pool-name-0123456789-abcdefghij",
            "plain YAML, long basename".into(),
            yaml.into(),
        ),
        (
            "kubelet-x.y",
            "plain YAML, dotted basename".into(),
            yaml.into(),
        ),
        ("kubelet-default", "empty file".into(), Vec::new()),
        ("kubelet-default", "one newline".into(), b"\n".to_vec()),
        (
            "kubelet-default",
            "unicode".into(),
            "# pool für Grafikkarten, 中文, ελληνικά, emoji 🦀🚀\nname: \"naïve café\"\n".into(),
        ),
        (
            "kubelet-default",
            "HTML characters".into(),
            "a: \"<script>alert(1)</script> & b > c < d\"\n".into(),
        ),
        (
            "kubelet-default",
            "line and paragraph separators".into(),
            "a: \"x\u{2028}y\u{2029}z\"\n".into(),
        ),
        (
            "kubelet-default",
            "CRLF line endings".into(),
            yaml.replace('\n', "\r\n").into_bytes(),
        ),
        (
            "kubelet-default",
            "trailing whitespace".into(),
            format!("{}   \t\n\n  \n", yaml.replace('\n', "  \n")).into_bytes(),
        ),
        (
            "kubelet-default",
            "control characters".into(),
            b"a\x00b\x01c\x08d\x0be\x0cf\x1bg\x1fh\x7fi\"j\\k/l\tm\rn".to_vec(),
        ),
        (
            "kubelet-default",
            "byte order mark".into(),
            "\u{feff}kind: KubeletConfiguration\n".into(),
        ),
        (
            "kubelet-default",
            "highest code points".into(),
            "\u{ffff}\u{fffd}\u{10000}\u{10ffff}".into(),
        ),
        (
            "kubelet-default",
            "binary: lone continuation byte".into(),
            b"a: \x80\n".to_vec(),
        ),
        (
            "kubelet-default",
            "binary: UTF-8-encoded surrogate".into(),
            b"a: \xed\xa0\x80\n".to_vec(),
        ),
        (
            "kubelet-default",
            "binary: overlong encoding".into(),
            b"a: \xc0\xaf\n".to_vec(),
        ),
        (
            "kubelet-default",
            "binary: truncated sequence at the end".into(),
            b"a: \xe2\x82".to_vec(),
        ),
        (
            "kubelet-default",
            "binary: every byte value".into(),
            (0..=255u8).rev().collect(),
        ),
        (
            "kubelet-default",
            "binary: ISO-8859-1 text".into(),
            b"name: caf\xe9\n".to_vec(),
        ),
    ];

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Binary blobs of every length modulo 3, so all base64 padding cases are covered.
    for len in [1usize, 2, 3, 4, 5, 6, 64, 1000, 1001, 1002] {
        cases.push((
            "kubelet-bin",
            format!("binary: {len} random bytes"),
            binary_blob(&mut rng, len),
        ));
    }
    for i in 0..24 {
        let len = 1 + rng.below(200);
        cases.push((
            "kubelet-mixed",
            format!("mixed text #{i} ({len} pieces)"),
            tricky_text(&mut rng, len).into_bytes(),
        ));
    }

    // Large inputs: 900 KiB of YAML-like text and 900 KiB of binary.
    let target = 900 * 1024;
    let mut large = String::with_capacity(target);
    let mut line = 0usize;
    loop {
        let next = format!("key{line}: \"value <{line}> & ü\u{2028}\"\r\n");
        if large.len() + next.len() > target {
            break;
        }
        large.push_str(&next);
        line += 1;
    }
    while large.len() < target {
        large.push('#');
    }
    assert_eq!(large.len(), target);
    cases.push(("kubelet-large", "900 KiB text".into(), large.into_bytes()));
    cases.push((
        "kubelet-large",
        "900 KiB binary".into(),
        binary_blob(&mut rng, 900 * 1024),
    ));
    cases
}

#[test]
fn names_match_kubectl_append_hash() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("create temp dir");
    let kubeconfig = dir.path().join("empty-kubeconfig");
    std::fs::write(&kubeconfig, b"").expect("write empty kubeconfig");

    let mut mismatches = Vec::new();
    let all = cases();
    for (i, (basename, what, bytes)) in all.iter().enumerate() {
        let file = dir.path().join(format!("case-{i}"));
        std::fs::write(&file, bytes).expect("write case file");

        let ours = kubelet_configmap_name(basename, bytes);
        assert_eq!(
            ours.len(),
            basename.len() + 1 + SUFFIX_LEN,
            "{what}: {ours}"
        );
        assert!(ours.starts_with(&format!("{basename}-")), "{what}: {ours}");

        let theirs = run_kubectl(
            &kubectl,
            &kubeconfig,
            &create_args(basename, &file, "jsonpath={.metadata.name}"),
        );
        if theirs != ours {
            mismatches.push(format!(
                "{what} (basename {basename}, {} bytes): kubectl {theirs:?}, ours {ours:?}",
                bytes.len()
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} names differ from kubectl:\n{}",
        mismatches.len(),
        all.len(),
        mismatches.join("\n")
    );
}

/// kubectl puts a file in `data` exactly when its bytes are valid UTF-8; our name relies
/// on making the same decision.
#[test]
fn kubectl_places_text_in_data_and_the_rest_in_binary_data() {
    let Some(kubectl) = kubectl_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().expect("create temp dir");
    let kubeconfig = dir.path().join("empty-kubeconfig");
    std::fs::write(&kubeconfig, b"").expect("write empty kubeconfig");

    let all = cases();
    // The large cases add nothing here that the small ones do not already show.
    for (i, (basename, what, bytes)) in all.iter().filter(|c| c.2.len() < 4096).enumerate() {
        let file = dir.path().join(format!("case-{i}"));
        std::fs::write(&file, bytes).expect("write case file");
        let printed = run_kubectl(&kubectl, &kubeconfig, &create_args(basename, &file, "json"));
        let object: serde_json::Value =
            serde_json::from_str(&printed).unwrap_or_else(|e| panic!("{what}: kubectl JSON: {e}"));
        let in_data = object.pointer(&format!("/data/{CONFIGMAP_KEY}"));
        let in_binary = object.pointer(&format!("/binaryData/{CONFIGMAP_KEY}"));
        match std::str::from_utf8(bytes) {
            Ok(text) => {
                assert_eq!(
                    in_data.and_then(|v| v.as_str()),
                    Some(text),
                    "{what}: kubectl should store the text under data"
                );
                assert!(in_binary.is_none(), "{what}: unexpected binaryData");
            }
            Err(_) => {
                assert!(in_data.is_none(), "{what}: unexpected data");
                assert!(
                    in_binary.and_then(|v| v.as_str()).is_some(),
                    "{what}: kubectl should store the bytes under binaryData"
                );
            }
        }
        assert_eq!(
            object.pointer("/metadata/name").and_then(|v| v.as_str()),
            Some(kubelet_configmap_name(basename, bytes).as_str()),
            "{what}"
        );
    }
}
