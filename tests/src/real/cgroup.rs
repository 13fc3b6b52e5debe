//! The real cluster's cgroups: each kubelet's cgroup root, made before it starts (a v1.36
//! kubelet refuses to start unless its `--cgroup-root` exists in every hierarchy it
//! checks) and removed at teardown with whatever the kubelet made under it.
//!
//! Everything is under [`E2E_CGROUP`] in each hierarchy of `/sys/fs/cgroup`; nothing else
//! is touched. cgroup v1 (these machines): the directories in those of `systemd`, `cpu`,
//! `cpuacct`, `cpuset`, `memory`, `pids` and `hugetlb` (the ones the kubelet checks) that
//! are mounted, each new cpuset level given its parent's `cpuset.cpus` and `cpuset.mems`.
//! A directory of `/sys/fs/cgroup` that is no cgroup mount (these machines have an
//! unmounted `hugetlb`) is left alone: a plain directory there would look like a mounted
//! hierarchy to the agent, which would then miss the kubelet's cgroups in it. cgroup v2:
//! the directories in the one tree, with the controllers the kubelet uses enabled in each
//! ancestor's `cgroup.subtree_control`.
//!
//! Teardown removes the cluster's subtree from every hierarchy, not only those: the
//! kubelet makes its `kubepods` cgroups in each mounted one (`blkio`, `freezer`,
//! `unified` ... too).

use std::path::{Path, PathBuf};

use crate::E2eError;

/// The subtree of every hierarchy the harness owns.
pub const E2E_CGROUP: &str = "/kubelet-gitops-e2e";

const MOUNT: &str = "/sys/fs/cgroup";
const V1_HIERARCHIES: [&str; 7] = [
    "systemd", "cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb",
];

fn is_v2() -> bool {
    Path::new(MOUNT).join("cgroup.controllers").exists()
}

/// Whether `dir` is the root of a mounted cgroup hierarchy (every cgroup directory has
/// `cgroup.procs`; a plain directory does not).
fn is_cgroup(dir: &Path) -> bool {
    dir.join("cgroup.procs").is_file()
}

/// The directories of `cgroup` (an absolute cgroup path) in each mounted hierarchy the
/// kubelet checks.
fn dirs(cgroup: &str) -> Vec<(Option<&'static str>, PathBuf)> {
    let rel = cgroup.trim_start_matches('/');
    if is_v2() {
        return vec![(None, Path::new(MOUNT).join(rel))];
    }
    V1_HIERARCHIES
        .iter()
        .map(|h| (Some(*h), Path::new(MOUNT).join(h)))
        .filter(|(_, mount)| is_cgroup(mount))
        .map(|(h, mount)| (h, mount.join(rel)))
        .collect()
}

/// The directories of `cgroup` in every directory of `/sys/fs/cgroup` (v1: each
/// hierarchy, mounted or not), for removal.
fn all_dirs(cgroup: &str) -> Vec<PathBuf> {
    let rel = cgroup.trim_start_matches('/');
    if is_v2() {
        return vec![Path::new(MOUNT).join(rel)];
    }
    std::fs::read_dir(MOUNT)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path().join(rel))
                .collect()
        })
        .unwrap_or_default()
}

/// Creates `cgroup` (under [`E2E_CGROUP`]) in every hierarchy.
pub fn create(cgroup: &str) -> Result<(), E2eError> {
    let v2 = is_v2();
    for (hierarchy, dir) in dirs(cgroup) {
        let mount = match hierarchy {
            Some(h) => Path::new(MOUNT).join(h),
            None => PathBuf::from(MOUNT),
        };
        let rel = dir.strip_prefix(&mount).unwrap_or(&dir).to_path_buf();
        let mut path = mount.clone();
        for part in rel.components() {
            let parent = path.clone();
            path.push(part);
            if v2 {
                // Best effort: a controller the parent lacks is simply not enabled.
                for c in ["+cpu", "+cpuset", "+memory", "+pids", "+hugetlb"] {
                    let _ = std::fs::write(parent.join("cgroup.subtree_control"), c);
                }
            }
            if !path.is_dir() {
                std::fs::create_dir(&path)
                    .map_err(E2eError::io(format!("creating cgroup {}", path.display())))?;
            }
            if hierarchy == Some("cpuset") {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let mine = std::fs::read_to_string(path.join(file)).unwrap_or_default();
                    if mine.trim().is_empty() {
                        let value = std::fs::read_to_string(parent.join(file))
                            .map_err(E2eError::io(format!("reading {}", parent.display())))?;
                        std::fs::write(path.join(file), value.trim())
                            .map_err(E2eError::io(format!("writing {}", path.display())))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Removes `cgroup` and every cgroup under it, deepest first, in every hierarchy (best
/// effort: a cgroup that still holds a process stays, and is named on stderr).
pub fn remove(cgroup: &str) {
    for dir in all_dirs(cgroup) {
        remove_tree(&dir);
    }
}

fn remove_tree(dir: &Path) {
    if !dir.is_dir() {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        eprintln!("real cluster: cannot remove cgroup {}: {e}", dir.display());
    }
}

/// Removes [`E2E_CGROUP`] itself if no other cluster uses it.
pub fn remove_top_if_empty() {
    for dir in all_dirs(E2E_CGROUP) {
        let _ = std::fs::remove_dir(dir);
    }
}
