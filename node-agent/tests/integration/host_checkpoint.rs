//! checkpoint: every kind of file corrupted, truncated or stripped of its sha256 by hand is
//! reported and never used; many writes in a row, and writers killed with SIGKILL at random
//! instants, always leave complete files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use kubelet_gitops_core::atomic::write_atomic;
use kubelet_gitops_core::protocol::ConfigRef;
use node_agent::checkpoint::{ApplyPhase, Assigned, Checkpoint, CheckpointStore, sha256_hex};
use node_agent::error::CheckpointError;

fn cm(name: &str) -> ConfigRef {
    ConfigRef::configmap("kubelet-gitops", name)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: CheckpointStore,
    cp: Checkpoint,
    prev: Checkpoint,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(&dir.path().join("checkpoints")).unwrap();
    let cp = store
        .save(
            &cm("kubelet-gpu-aaaa"),
            "uid-1",
            "100",
            b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n",
        )
        .unwrap();
    let prev = store
        .save(
            &cm("kubelet-gpu-bbbb"),
            "uid-2",
            "90",
            b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 40\n",
        )
        .unwrap();
    store
        .set_assigned(&Assigned::new(
            cp.clone(),
            ApplyPhase::Restarted,
            1_750_000_000,
            Some(prev.clone()),
        ))
        .unwrap();
    store.set_last_known_good(&prev).unwrap();
    store.save_local_original(b"maxPods: 110\n").unwrap();
    Fixture {
        _dir: dir,
        store,
        cp,
        prev,
    }
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    let i = at.min(bytes.len() - 1);
    bytes[i] ^= 0x20;
    fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path) {
    let bytes = fs::read(path).unwrap();
    fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

fn assert_corrupt<T: std::fmt::Debug>(what: &str, r: Result<T, CheckpointError>) {
    match r {
        Err(e) if e.is_corrupt() => {
            let msg = e.to_string();
            assert!(msg.contains("checkpoint"), "{what}: {msg}");
        }
        other => panic!("{what}: expected a corrupt-checkpoint error, got {other:?}"),
    }
}

#[test]
fn a_damaged_payload_is_never_used() {
    for damage in [
        "flip",
        "truncate",
        "delete sha",
        "edit sha",
        "empty",
        "delete payload",
    ] {
        let f = fixture();
        let payload = f.store.payload_path(&f.cp).unwrap();
        let sha = payload.with_file_name("kubelet.sha256");
        match damage {
            "flip" => flip_byte(&payload, 60),
            "truncate" => truncate(&payload),
            "delete sha" => fs::remove_file(&sha).unwrap(),
            "edit sha" => fs::write(&sha, format!("{}  kubelet\n", sha256_hex(b"other"))).unwrap(),
            "empty" => fs::write(&payload, b"").unwrap(),
            "delete payload" => fs::remove_file(&payload).unwrap(),
            _ => unreachable!(),
        }
        assert_corrupt(damage, f.store.load(&f.cp));
        // The other checkpoint is untouched and still loads.
        assert!(f.store.load(&f.prev).is_ok(), "{damage}");
        // Saving again repairs it.
        let again = f
            .store
            .save(&f.cp.config, &f.cp.uid, &f.cp.resource_version, b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 50\n")
            .unwrap();
        assert_eq!(again, f.cp);
        assert!(f.store.load(&f.cp).is_ok(), "{damage}: repaired");
    }
}

#[test]
fn a_corrupt_payload_reports_both_sums() {
    let f = fixture();
    let payload = f.store.payload_path(&f.cp).unwrap();
    flip_byte(&payload, 3);
    let err = f.store.load(&f.cp).unwrap_err();
    match &err {
        CheckpointError::Corrupt {
            path,
            expected,
            actual,
        } => {
            assert_eq!(path, &payload);
            assert_eq!(expected, &f.cp.sha256);
            assert_eq!(actual, &sha256_hex(&fs::read(&payload).unwrap()));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(&f.cp.sha256));
}

#[test]
fn damaged_metadata_is_never_used() {
    type Read = fn(&CheckpointStore) -> Result<(), CheckpointError>;
    let readers: [(&str, Read); 2] = [
        ("assigned", |s| s.assigned().map(|_| ())),
        ("last-known-good", |s| s.last_known_good().map(|_| ())),
    ];
    for (file, read) in readers {
        for damage in [
            "flip body",
            "truncate",
            "delete sha",
            "bad sha",
            "not json",
            "empty",
            "reformatted body",
        ] {
            let f = fixture();
            let path = f.store.dir().join("meta").join(file);
            let text = fs::read_to_string(&path).unwrap();
            match damage {
                // Change a character inside the body: still JSON, wrong sum.
                "flip body" => {
                    fs::write(&path, text.replacen("kubelet-gpu-", "kubelet-gpv-", 1)).unwrap()
                }
                "truncate" => truncate(&path),
                "delete sha" => {
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                    fs::write(&path, serde_json::json!({"value": v["value"]}).to_string()).unwrap();
                }
                "bad sha" => {
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let sha = v["sha256"].as_str().unwrap();
                    fs::write(&path, text.replace(sha, &sha.to_uppercase())).unwrap();
                }
                "not json" => fs::write(&path, "sha256=abc\n").unwrap(),
                "empty" => fs::write(&path, "").unwrap(),
                // The same object re-indented by hand: the sum covers the exact bytes.
                "reformatted body" => {
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                    let body = serde_json::to_string_pretty(&v["value"]).unwrap();
                    let edited = format!(
                        "{{\"sha256\":\"{}\",\"value\":{body}}}",
                        v["sha256"].as_str().unwrap()
                    );
                    fs::write(&path, edited).unwrap();
                }
                _ => unreachable!(),
            }
            assert_corrupt(&format!("{file}: {damage}"), read(&f.store));
        }
    }
}

#[test]
fn a_damaged_local_original_is_reported_and_kept() {
    for damage in ["flip", "truncate", "delete sha"] {
        let f = fixture();
        let dir = f.store.dir().join("local");
        match damage {
            "flip" => flip_byte(&dir.join("kubelet"), 2),
            "truncate" => truncate(&dir.join("kubelet")),
            "delete sha" => fs::remove_file(dir.join("kubelet.sha256")).unwrap(),
            _ => unreachable!(),
        }
        assert_corrupt(damage, f.store.local_original());
        if damage != "delete sha" {
            // A saved copy, even damaged, is never replaced by what the node has now (it
            // may be the agent's own config by then).
            assert!(!f.store.save_local_original(b"ours").unwrap(), "{damage}");
            assert_corrupt(damage, f.store.local_original());
        }
    }
}

#[test]
fn prune_never_removes_what_meta_names() {
    let f = fixture();
    let extra = f
        .store
        .save(&cm("kubelet-gpu-cccc"), "uid-3", "5", b"c")
        .unwrap();
    // The caller forgot the assigned config and last-known-good: they stay anyway.
    let removed = f.store.prune(&[]).unwrap();
    assert_eq!(
        removed,
        [f.store
            .payload_path(&extra)
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf()]
    );
    assert!(f.store.load(&f.cp).is_ok());
    assert!(f.store.load(&f.prev).is_ok());
}

#[test]
fn many_writes_always_read_back_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = CheckpointStore::open(&dir.path().join("cp")).unwrap();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let file = dir.path().join("config.yaml");
    let mut saved: Vec<(Checkpoint, Vec<u8>)> = Vec::new();
    for i in 0..400u64 {
        // Sizes around page and buffer boundaries, and empty files.
        let len = match rng.below(5) {
            0 => 0,
            1 => 4096 + rng.below(3) as usize - 1,
            2 => rng.below(64) as usize,
            _ => rng.below(70_000) as usize,
        };
        let bytes = rng.bytes(len);
        write_atomic(&file, &bytes).unwrap();
        assert_eq!(fs::read(&file).unwrap(), bytes, "write {i}");

        let uid = format!("uid-{}", rng.below(4));
        let rv = format!("{}", rng.below(6));
        let cp = store
            .save(&cm(&format!("kubelet-p-{i}")), &uid, &rv, &bytes)
            .unwrap();
        assert_eq!(store.load(&cp).unwrap(), bytes, "save {i}");
        saved.retain(|(c, _)| !(c.uid == uid && c.resource_version == rv));
        saved.push((cp.clone(), bytes));

        let phase = [
            ApplyPhase::Checkpointed,
            ApplyPhase::Written,
            ApplyPhase::Restarted,
            ApplyPhase::Verified,
        ][rng.below(4) as usize];
        let a = Assigned {
            ready_pods: (0..i % 3).map(|p| format!("default/pod-{p}")).collect(),
            ..Assigned::new(cp.clone(), phase, i, saved.first().map(|(c, _)| c.clone()))
        };
        store.set_assigned(&a).unwrap();
        assert_eq!(store.assigned().unwrap(), Some(a), "assigned {i}");
        if rng.below(3) == 0 {
            store.set_last_known_good(&cp).unwrap();
            assert_eq!(store.last_known_good().unwrap(), Some(cp), "lkg {i}");
        }
        if rng.below(10) == 0 {
            let keep: Vec<&Checkpoint> = saved.iter().rev().take(2).map(|(c, _)| c).collect();
            store.prune(&keep).unwrap();
            saved.retain(|(c, _)| store.load(c).is_ok());
        }
    }
    // Every checkpoint still on disk reads back as saved; no temp file is left anywhere.
    for (cp, bytes) in &saved {
        assert_eq!(&store.load(cp).unwrap(), bytes);
    }
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(!name.contains(".tmp-"), "leftover {}", e.path().display());
            if e.path().is_dir() {
                stack.push(e.path());
            }
        }
    }
}

/// The payload a crash test writer saves in round `n`: self-checking (it starts with its
/// own length and round), large enough that a write takes a while.
fn crash_payload(n: u64) -> Vec<u8> {
    // Up to 8 MiB: a write long enough that kills land inside it.
    let len = 1000 + (n * 7_919_993 % (8 << 20)) as usize;
    let mut out = format!("round {n} len {len}\n").into_bytes();
    out.resize(len, b'a' + (n % 26) as u8);
    out
}

/// Not a test of its own: the writer process the crash test starts (and kills). Does
/// nothing unless `KG_CRASH_DIR` is set.
#[test]
fn crash_writer_child() {
    let Ok(dir) = std::env::var("KG_CRASH_DIR") else {
        return;
    };
    let store = CheckpointStore::open(Path::new(&dir)).unwrap();
    let file = Path::new(&dir).join("kubelet-config.yaml");
    let start: u64 = std::env::var("KG_CRASH_START").unwrap().parse().unwrap();
    for n in start.. {
        let payload = crash_payload(n);
        write_atomic(&file, &payload).unwrap();
        let cp = store
            .save(&cm("kubelet-crash-x"), "uid", &n.to_string(), &payload)
            .unwrap();
        store
            .set_assigned(&Assigned::new(cp.clone(), ApplyPhase::Written, n, None))
            .unwrap();
        store.set_last_known_good(&cp).unwrap();
        let keep = [&cp];
        store.prune(&keep).unwrap();
    }
}

fn check_crash_dir(dir: &Path) -> u64 {
    let file = dir.join("kubelet-config.yaml");
    if let Ok(bytes) = fs::read(&file) {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
        let n: u64 = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("config file is not a complete payload: {text:?}"));
        assert_eq!(
            bytes,
            crash_payload(n),
            "config file of round {n} is incomplete"
        );
    }
    let store = CheckpointStore::open(dir).unwrap();
    let mut last = 0;
    match store.assigned() {
        Ok(Some(a)) => {
            let payload = store
                .load(&a.checkpoint)
                .unwrap_or_else(|e| panic!("assigned names an unusable checkpoint: {e}"));
            last = a.since;
            assert_eq!(payload, crash_payload(a.since));
        }
        Ok(None) => {}
        Err(e) => panic!("meta/assigned after a crash: {e}"),
    }
    match store.last_known_good() {
        Ok(Some(cp)) => {
            let n: u64 = cp.resource_version.parse().unwrap();
            assert_eq!(store.load(&cp).unwrap(), crash_payload(n));
        }
        Ok(None) => {}
        Err(e) => panic!("meta/last-known-good after a crash: {e}"),
    }
    last
}

#[test]
fn a_writer_killed_at_any_instant_leaves_complete_files() {
    // Alone: it starts processes, and its many large fsynced writes would slow the
    // fsyncs of every test beside it.
    let _alone = crate::support::alone_blocking();
    let dir = tempfile::tempdir().unwrap();
    let cp_dir: PathBuf = dir.path().join("cp");
    let exe = std::env::current_exe().unwrap();
    // The writer's name as the test harness knows it: its path in this binary.
    let (_, module) = module_path!().split_once("::").unwrap();
    let writer = format!("{module}::crash_writer_child");
    let mut rng = Rng(0xc0ff_ee00_d00d_0042);
    let mut start = 0u64;
    for round in 0..40 {
        let mut child = Command::new(&exe)
            .args([
                writer.as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("KG_CRASH_DIR", &cp_dir)
            .env("KG_CRASH_START", start.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(5 + rng.below(60)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let last = check_crash_dir(&cp_dir);
        start = start.max(last + 1) + 1000 * (round + 1);
    }
}
