//! cgroups: temp-dir hierarchies laid out as the sim's stand-in kubelet lays them out (v1:
//! a directory per controller; v2: one tree with `cgroup.controllers`), and the real
//! `/sys/fs/cgroup` where it is writable (skipped, with the reason printed, where not).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use kubelet_gitops_core::allocatable::{
    AllocatableInput, CgroupLayout, CgroupLimit, CgroupSpec, CgroupVersion, cgroup_layout,
    node_allocatable,
};
use kubelet_gitops_core::quantity::Quantity;
use node_agent::cgroups::{
    self, CgroupConfig, CgroupDriver, V1_CONTROLLERS, check_limits, ensure_reserved, exists,
    verify_pods,
};
use node_agent::error::CgroupError;

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
}

/// A node of 4 CPUs and 8 GiB enforcing pods and kube-reserved (on `kube_cgroup`), and
/// optionally system-reserved on `/system.slice`.
fn input(driver: &str, kube_cgroup: &str, system: bool) -> AllocatableInput {
    let mut enforce = vec!["pods".to_string(), "kube-reserved".to_string()];
    if system {
        enforce.push("system-reserved".into());
    }
    AllocatableInput {
        capacity: map(&[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("ephemeral-storage", "50Gi"),
            ("pods", "110"),
            ("pid", "32768"),
        ]),
        kube_reserved: map(&[("cpu", "500m"), ("memory", "256Mi"), ("pid", "1000")]),
        system_reserved: if system {
            map(&[("cpu", "250m"), ("memory", "512Mi")])
        } else {
            BTreeMap::new()
        },
        eviction_hard: [("memory.available".to_string(), "100Mi".to_string())].into(),
        enforce_node_allocatable: enforce,
        cgroups_per_qos: true,
        cgroup_driver: driver.into(),
        cgroup_root: "/".into(),
        system_reserved_cgroup: if system {
            "/system.slice".into()
        } else {
            String::new()
        },
        kube_reserved_cgroup: kube_cgroup.into(),
        ..Default::default()
    }
}

fn layout(input: &AllocatableInput, version: CgroupVersion) -> CgroupLayout {
    let alloc = node_allocatable(input).unwrap();
    cgroup_layout(input, &alloc, version).unwrap()
}

fn read(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel))
        .unwrap()
        .trim()
        .to_string()
}

/// The sim's v1 tree: one directory per controller the stand-in checks.
fn v1_tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for c in kubelet_gitops_sim::kubelet::V1_CONTROLLERS {
        fs::create_dir_all(d.path().join(c).join("system.slice")).unwrap();
    }
    d
}

/// The sim's v2 tree.
fn v2_tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::write(
        d.path().join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    )
    .unwrap();
    fs::create_dir_all(d.path().join("system.slice")).unwrap();
    d
}

#[test]
fn the_agent_checks_the_controllers_the_stand_in_checks() {
    // Agreement on what "exists" means is what makes an agent-created cgroup one the
    // stand-in accepts.
    for c in kubelet_gitops_sim::kubelet::V1_CONTROLLERS {
        assert!(V1_CONTROLLERS.contains(c), "{c}");
    }
}

#[test]
fn v1_temp_tree_gets_the_reserved_cgroup_in_every_hierarchy() {
    let tree = v1_tree();
    let cfg = CgroupConfig::detect(tree.path(), CgroupDriver::Cgroupfs).unwrap();
    assert_eq!(cfg.version, CgroupVersion::V1);
    let l = layout(
        &input("cgroupfs", "/kube-reserved", true),
        CgroupVersion::V1,
    );
    assert!(!exists(&cfg, "/kube-reserved"));
    assert!(exists(&cfg, "/system.slice"));

    let created = ensure_reserved(&cfg, &l).unwrap();
    assert_eq!(created, ["/kube-reserved"], "system.slice existed");
    for c in kubelet_gitops_sim::kubelet::V1_CONTROLLERS {
        assert!(tree.path().join(c).join("kube-reserved").is_dir(), "{c}");
    }
    // The kubelet's values, written through cgroups-rs.
    assert_eq!(
        read(tree.path(), "memory/kube-reserved/memory.limit_in_bytes"),
        "268435456"
    );
    assert_eq!(read(tree.path(), "cpu/kube-reserved/cpu.shares"), "512");
    assert_eq!(read(tree.path(), "pids/kube-reserved/pids.max"), "1000");
    let kube = l.kube_reserved.as_ref().unwrap();
    assert_eq!(check_limits(&cfg, kube).unwrap(), []);
    // An existing cgroup keeps its limits until the kubelet writes its own.
    assert!(
        !tree
            .path()
            .join("memory/system.slice/memory.limit_in_bytes")
            .exists()
    );

    // Idempotent.
    assert_eq!(ensure_reserved(&cfg, &l).unwrap(), Vec::<String>::new());
}

#[test]
fn v2_temp_tree_with_systemd_names() {
    let tree = v2_tree();
    let cfg = CgroupConfig::detect(tree.path(), CgroupDriver::Systemd).unwrap();
    assert_eq!(cfg.version, CgroupVersion::V2);
    // `/kube-reserved.slice` under systemd is the nested `/kube.slice/kube-reserved.slice`.
    let l = layout(
        &input("systemd", "/kube-reserved.slice", false),
        CgroupVersion::V2,
    );
    let kube = l.kube_reserved.as_ref().unwrap();
    assert_eq!(kube.path, "/kube.slice/kube-reserved.slice");
    assert_eq!(l.pods.as_ref().unwrap().path, "/kubepods.slice");

    let created = ensure_reserved(&cfg, &l).unwrap();
    assert_eq!(created, ["/kube.slice/kube-reserved.slice"]);
    let dir = "kube.slice/kube-reserved.slice";
    assert_eq!(read(tree.path(), &format!("{dir}/memory.max")), "268435456");
    assert_eq!(read(tree.path(), &format!("{dir}/cpu.weight")), "20");
    assert_eq!(read(tree.path(), &format!("{dir}/pids.max")), "1000");
    assert_eq!(check_limits(&cfg, kube).unwrap(), []);
}

#[test]
fn v2_subtree_control_is_enabled_along_the_path() {
    // A tree that looks like real cgroup2 directories: each has cgroup.controllers and
    // cgroup.subtree_control. The root enables only io; kube.slice nothing.
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::write(root.join("cgroup.controllers"), "cpu io memory pids\n").unwrap();
    fs::write(root.join("cgroup.subtree_control"), "io\n").unwrap();
    fs::create_dir_all(root.join("kube.slice")).unwrap();
    fs::write(
        root.join("kube.slice/cgroup.controllers"),
        "cpu memory pids\n",
    )
    .unwrap();
    fs::write(root.join("kube.slice/cgroup.subtree_control"), "").unwrap();
    let cfg = CgroupConfig::detect(root, CgroupDriver::Systemd).unwrap();
    assert!(
        cgroups::create(
            &cfg,
            "/kube.slice/kube-reserved.slice",
            &["memory", "cpu", "pids", "hugetlb"]
        )
        .unwrap()
    );
    // A regular file takes the last write; the kernel would merge. hugetlb is not
    // available, so it is not asked for.
    assert_eq!(
        fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(),
        "+memory +cpu +pids"
    );
    assert_eq!(
        fs::read_to_string(root.join("kube.slice/cgroup.subtree_control")).unwrap(),
        "+memory +cpu +pids"
    );
    assert!(root.join("kube.slice/kube-reserved.slice").is_dir());
}

#[test]
fn a_missing_controller_is_reported() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("cgroup.controllers"), "cpu pids\n").unwrap();
    let cfg = CgroupConfig::detect(d.path(), CgroupDriver::Cgroupfs).unwrap();
    let l = layout(
        &input("cgroupfs", "/kube-reserved", false),
        CgroupVersion::V2,
    );
    let err = ensure_reserved(&cfg, &l).unwrap_err();
    match &err {
        CgroupError::ControllerMissing {
            controller, file, ..
        } => {
            assert_eq!(
                (controller.as_str(), file.as_str()),
                ("memory", "memory.max")
            );
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("/kube-reserved"), "{err}");
}

#[test]
fn verify_pods_reports_each_difference() {
    let tree = v1_tree();
    let cfg = CgroupConfig::detect(tree.path(), CgroupDriver::Cgroupfs).unwrap();
    let l = layout(
        &input("cgroupfs", "/kube-reserved", false),
        CgroupVersion::V1,
    );
    let pods = l.pods.as_ref().unwrap();
    let msg = verify_pods(&cfg, &l).unwrap().unwrap();
    assert!(
        msg.contains("/kubepods") && msg.contains("does not exist"),
        "{msg}"
    );

    // Lay the pods cgroup out as the kubelet (the stand-in) would.
    for c in kubelet_gitops_sim::kubelet::V1_CONTROLLERS {
        fs::create_dir_all(tree.path().join(c).join("kubepods")).unwrap();
    }
    for limit in &pods.limits {
        fs::write(tree.path().join(&limit.path), format!("{}\n", limit.value)).unwrap();
    }
    assert_eq!(verify_pods(&cfg, &l).unwrap(), None);

    // capacity - kubeReserved (no eviction term): 8Gi - 256Mi.
    let mem = pods
        .limits
        .iter()
        .find(|l| l.controller == "memory")
        .unwrap();
    assert_eq!(mem.value, "8321499136");

    // Someone raised it; and pids.max lost its limit.
    fs::write(tree.path().join(&mem.path), "9223372036854771712\n").unwrap();
    let pids = pods.limits.iter().find(|l| l.controller == "pids").unwrap();
    fs::write(tree.path().join(&pids.path), "max\n").unwrap();
    let msg = verify_pods(&cfg, &l).unwrap().unwrap();
    assert!(
        msg.contains(
            "memory/kubepods/memory.limit_in_bytes is 9223372036854771712, expected 8321499136"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("pids/kubepods/pids.max is max, expected 31768"),
        "{msg}"
    );
    let cpu = pods.limits.iter().find(|l| l.controller == "cpu").unwrap();
    fs::remove_file(tree.path().join(&cpu.path)).unwrap();
    let msg = verify_pods(&cfg, &l).unwrap().unwrap();
    assert!(
        msg.contains("cpu/kubepods/cpu.shares is missing, expected 3584"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------
// The real cgroup filesystem.

/// A cgroup name no other test run uses.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}{}x{nanos}", std::process::id())
}

/// Removes a cgroup on drop, so a failed assertion leaves nothing behind.
struct Cleanup<'a> {
    cfg: &'a CgroupConfig,
    cgroup: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        // Partial leftovers too: remove() skips what is not there.
        if let Err(e) = cgroups::remove(self.cfg, &self.cgroup) {
            eprintln!("cleanup of {} failed: {e}", self.cgroup);
        }
    }
}

/// The real v1 hierarchy, when mounted and writable; otherwise the reason.
fn real_v1() -> Result<CgroupConfig, String> {
    let root = PathBuf::from("/sys/fs/cgroup");
    let cfg = CgroupConfig::detect(&root, CgroupDriver::Cgroupfs).map_err(|e| e.to_string())?;
    if cfg.version != CgroupVersion::V1 {
        return Err("/sys/fs/cgroup is not a cgroup v1 hierarchy".into());
    }
    let probe = root.join("memory").join(unique("kgprobe"));
    fs::create_dir(&probe).map_err(|e| format!("cannot create {}: {e}", probe.display()))?;
    fs::remove_dir(&probe).map_err(|e| format!("cannot remove {}: {e}", probe.display()))?;
    Ok(cfg)
}

#[test]
fn real_v1_create_limit_read_back_remove() {
    let cfg = match real_v1() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: real cgroup v1 test: {why}");
            return;
        }
    };
    let name = format!("/{}", unique("kgtest"));
    let _cleanup = Cleanup {
        cfg: &cfg,
        cgroup: name.clone(),
    };
    let l = layout(&input("cgroupfs", &name, false), CgroupVersion::V1);
    let created = ensure_reserved(&cfg, &l).unwrap();
    assert_eq!(created, std::slice::from_ref(&name));
    assert!(exists(&cfg, &name));
    let rel = name.trim_start_matches('/');
    assert_eq!(
        read(&cfg.root, &format!("memory/{rel}/memory.limit_in_bytes")),
        "268435456"
    );
    assert_eq!(read(&cfg.root, &format!("cpu/{rel}/cpu.shares")), "512");
    assert_eq!(read(&cfg.root, &format!("pids/{rel}/pids.max")), "1000");
    // cgroups-rs gave the new cpuset its parent's cpus, as a v1 cpuset needs.
    let cpus = read(&cfg.root, &format!("cpuset/{rel}/cpuset.cpus"));
    assert_eq!(cpus, read(&cfg.root, "cpuset/cpuset.cpus"));
    assert_eq!(
        check_limits(&cfg, l.kube_reserved.as_ref().unwrap()).unwrap(),
        []
    );
    assert_eq!(ensure_reserved(&cfg, &l).unwrap(), Vec::<String>::new());

    cgroups::remove(&cfg, &name).unwrap();
    assert!(!exists(&cfg, &name));
    for c in ["memory", "cpu", "pids", "cpuset"] {
        assert!(!cfg.root.join(c).join(rel).exists(), "{c}");
    }
}

#[test]
fn real_v1_nested_systemd_slice() {
    let cfg = match real_v1() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: real cgroup v1 test: {why}");
            return;
        }
    };
    let base = unique("kgt");
    let top = format!("/{base}.slice");
    let _cleanup = Cleanup {
        cfg: &cfg,
        cgroup: top.clone(),
    };
    let l = layout(
        &input("systemd", &format!("/{base}-reserved.slice"), false),
        CgroupVersion::V1,
    );
    let path = l.kube_reserved.as_ref().unwrap().path.clone();
    assert_eq!(path, format!("/{base}.slice/{base}-reserved.slice"));
    assert_eq!(
        ensure_reserved(&cfg, &l).unwrap(),
        std::slice::from_ref(&path)
    );
    assert!(exists(&cfg, &path) && exists(&cfg, &top));
    assert_eq!(
        check_limits(&cfg, l.kube_reserved.as_ref().unwrap()).unwrap(),
        []
    );
    // Removing the parent removes the child first.
    cgroups::remove(&cfg, &top).unwrap();
    assert!(!exists(&cfg, &path) && !exists(&cfg, &top));
}

/// A mounted cgroup2 hierarchy (the unified one of a hybrid host), when writable.
fn real_v2() -> Result<CgroupConfig, String> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let point = mounts
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next() == Some("cgroup2"))
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .next()
        .ok_or("no cgroup2 mount")?;
    let cfg = CgroupConfig::detect(&point, CgroupDriver::Systemd).map_err(|e| e.to_string())?;
    let probe = point.join(unique("kgprobe"));
    fs::create_dir(&probe).map_err(|e| format!("cannot create {}: {e}", probe.display()))?;
    fs::remove_dir(&probe).map_err(|e| format!("cannot remove {}: {e}", probe.display()))?;
    Ok(cfg)
}

#[test]
fn real_v2_create_and_remove_and_missing_controllers() {
    let cfg = match real_v2() {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: real cgroup v2 test: {why}");
            return;
        }
    };
    let base = unique("kgt");
    let top = format!("/{base}.slice");
    let _cleanup = Cleanup {
        cfg: &cfg,
        cgroup: top.clone(),
    };
    let leaf = format!("{top}/{base}-reserved.slice");
    assert!(cgroups::create(&cfg, &leaf, &[]).unwrap());
    assert!(exists(&cfg, &leaf));
    assert!(
        cfg.root
            .join(leaf.trim_start_matches('/'))
            .join("cgroup.procs")
            .exists(),
        "a real cgroup"
    );
    assert!(!cgroups::create(&cfg, &leaf, &[]).unwrap(), "already there");

    // Limits whose controller the hierarchy does not offer are reported, not faked.
    let available = fs::read_to_string(cfg.root.join("cgroup.controllers")).unwrap_or_default();
    if !available.split_whitespace().any(|c| c == "memory") {
        let spec = CgroupSpec {
            configured: leaf.clone(),
            path: leaf.clone(),
            limits: vec![CgroupLimit {
                controller: "memory",
                file: "memory.max".into(),
                path: format!("{}/memory.max", leaf.trim_start_matches('/')),
                value: "1048576".into(),
            }],
        };
        let err = cgroups::write_limits(&cfg, &spec).unwrap_err();
        assert!(
            matches!(err, CgroupError::ControllerMissing { .. }),
            "{err}"
        );
        let mismatches = check_limits(&cfg, &spec).unwrap();
        assert_eq!(mismatches.len(), 1);
        assert_eq!(mismatches[0].actual, None);
    }
    cgroups::remove(&cfg, &top).unwrap();
    assert!(!cfg.root.join(top.trim_start_matches('/')).exists());
}
