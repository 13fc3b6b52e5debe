//! The node-allocatable cgroups: creating the reserved cgroups a config enforces, and
//! checking the pods cgroup's limits against what core computes.
//!
//! The kubelet limits, at start, the pods cgroup (which it creates), and the
//! `systemReservedCgroup` and `kubeReservedCgroup` when `enforceNodeAllocatable` lists
//! `system-reserved` or `kube-reserved` (which it does not create: a missing one makes it
//! exit with `Failed to enforce ... Cgroup Limits on ...: cgroup does not exist`). What it
//! writes, and where, is [`kubelet_gitops_core::allocatable::cgroup_layout`]; the paths in a
//! [`CgroupLayout`] are already named for the config's cgroup driver (cgroupfs `/kubepods`,
//! systemd `/kubepods.slice`, a `kubeReservedCgroup` of `/kube.slice` as is).
//!
//! [`ensure_reserved`] creates the reserved cgroups that do not exist, in every hierarchy
//! the kubelet checks (v1: `cpu`, `cpuacct`, `cpuset`, `memory`, `pids`, `systemd`, and
//! `hugetlb` when mounted, as the kubelet's `cgroupManagerImpl.Exists`; v2: the one tree,
//! enabling the controllers the limits need in each ancestor's `cgroup.subtree_control`,
//! as libcontainer does), and writes the kubelet's limits into the cgroups it created.
//! Cgroups that already exist keep their limits until the kubelet writes its own at start:
//! writing them here, before the restart, would leave them on the node if the apply is
//! rolled back to a config that does not enforce them. A cgroup created here is empty, so
//! its limits touch no process before the kubelet starts.
//! [`verify_pods`] reads the pods cgroup's interface files back and reports every value
//! that differs from what the kubelet should have written (memory and huge page limits
//! may be rounded down by the kernel to a page; that is not a mismatch).
//!
//! cgroups-rs does the v1 creation (through [`RootedHierarchy`], an implementation of its
//! `Hierarchy` trait for any root, so the same code runs against `/sys/fs/cgroup`, a
//! node root's `sys/fs/cgroup` in the sim, or a temp dir) and writes every limit (its
//! memory, cpu, pids and hugetlb controllers, v1 and v2). Written directly, where
//! cgroups-rs cannot be pointed at another root: v2 directory creation and
//! `cgroup.subtree_control` (cgroups-rs reads the controller list from the fixed
//! `/sys/fs/cgroup` and enables every controller along the path), v2 removal (its v2
//! delete is one `rmdir`, which fails on a cgroup with children), and reading values back
//! (cgroups-rs's readers turn a missing or unreadable file into 0).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cgroups_rs::fs::cgroup::Cgroup;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::cpuacct::CpuAcctController;
use cgroups_rs::fs::cpuset::CpuSetController;
use cgroups_rs::fs::hugetlb::HugeTlbController;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::systemd::SystemdController;
use cgroups_rs::fs::{Hierarchy, MaxValue, Subsystem};
pub use kubelet_gitops_core::allocatable::CgroupVersion;
use kubelet_gitops_core::allocatable::{CgroupLayout, CgroupLimit, CgroupSpec};
use tracing::{debug, info, instrument};

use crate::error::CgroupError;

/// The v1 hierarchies the kubelet requires a cgroup to exist in (`hugetlb` only when
/// mounted), from its `cgroupManagerImpl.Exists` allowlist.
pub const V1_CONTROLLERS: &[&str] = &[
    "cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "hugetlb",
];

/// The v2 controllers whose interface files the kubelet writes.
const V2_CONTROLLERS: &[&str] = &["cpu", "memory", "pids", "hugetlb"];

/// How the node's container runtime and kubelet name cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgroupDriver {
    /// Plain paths (`/kubepods/burstable`).
    Cgroupfs,
    /// systemd slices (`/kubepods.slice/kubepods-burstable.slice`).
    Systemd,
}

impl CgroupDriver {
    /// The `cgroupDriver` value.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupDriver::Cgroupfs => "cgroupfs",
            CgroupDriver::Systemd => "systemd",
        }
    }
}

impl fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cgroup driver name that is neither `cgroupfs` nor `systemd`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cgroup driver {0:?} (cgroupfs or systemd)")]
pub struct UnknownDriver(pub String);

impl FromStr for CgroupDriver {
    type Err = UnknownDriver;

    fn from_str(s: &str) -> Result<Self, UnknownDriver> {
        match s {
            "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
            "systemd" => Ok(CgroupDriver::Systemd),
            other => Err(UnknownDriver(other.to_string())),
        }
    }
}

/// The node's cgroup hierarchy as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupConfig {
    /// The cgroup mount: `/sys/fs/cgroup`, `<host root>/sys/fs/cgroup`, a temp dir.
    pub root: PathBuf,
    /// v1 (a directory per controller under `root`) or v2 (one unified tree).
    pub version: CgroupVersion,
    /// The node's cgroup driver (its container runtime's). Informational here: the paths
    /// of a [`CgroupLayout`] are already named; validation warns when the config's
    /// `cgroupDriver` differs.
    pub driver: CgroupDriver,
}

impl CgroupConfig {
    /// The hierarchy at `root`, its version detected with [`detect_version`].
    pub fn detect(root: &Path, driver: CgroupDriver) -> Result<Self, CgroupError> {
        Ok(CgroupConfig {
            root: root.to_path_buf(),
            version: detect_version(root)?,
            driver,
        })
    }

    fn hierarchy(&self) -> RootedHierarchy {
        RootedHierarchy {
            root: self.root.clone(),
            version: self.version,
        }
    }
}

/// v2 when `root/cgroup.controllers` exists (the unified root always has it), v1 when
/// `root` has a controller directory (`memory`, `cpu` ...), else an error.
pub fn detect_version(root: &Path) -> Result<CgroupVersion, CgroupError> {
    if root.join("cgroup.controllers").is_file() {
        return Ok(CgroupVersion::V2);
    }
    if !root.is_dir() {
        return Err(CgroupError::UnknownHierarchy {
            root: root.to_path_buf(),
            reason: "not a directory".into(),
        });
    }
    if ["memory", "cpu", "cpuacct", "pids", "cpuset"]
        .iter()
        .any(|c| root.join(c).is_dir())
    {
        return Ok(CgroupVersion::V1);
    }
    Err(CgroupError::UnknownHierarchy {
        root: root.to_path_buf(),
        reason: "neither cgroup.controllers (v2) nor a controller directory such as memory/ (v1)"
            .into(),
    })
}

/// cgroups-rs's `Hierarchy` for a cgroup mount at any path: v1 with a directory per
/// controller under `root`, or v2 with the controllers listed in `root/cgroup.controllers`.
#[derive(Debug, Clone)]
pub struct RootedHierarchy {
    root: PathBuf,
    version: CgroupVersion,
}

impl RootedHierarchy {
    /// The v1 controllers mounted under the root, among those the kubelet checks. The
    /// kubelet reads the mount table; through `--host-root` the agent cannot, so it takes
    /// a controller's directory as mounted unless it is empty: a mounted hierarchy always
    /// holds its interface files, while an empty directory is a mount point with nothing
    /// mounted (some hosts have an unmounted `/sys/fs/cgroup/hugetlb`), where the kubelet
    /// makes no cgroups and the agent must not look for them.
    fn v1_mounted(&self) -> Vec<&'static str> {
        V1_CONTROLLERS
            .iter()
            .copied()
            .filter(|c| {
                std::fs::read_dir(self.root.join(c))
                    .is_ok_and(|mut entries| entries.next().is_some())
            })
            .collect()
    }

    /// The controllers available in the v2 root.
    fn v2_available(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("cgroup.controllers"))
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }
}

impl Hierarchy for RootedHierarchy {
    fn subsystems(&self) -> Vec<Subsystem> {
        let mut subs = Vec::new();
        match self.version {
            CgroupVersion::V1 => {
                for c in self.v1_mounted() {
                    let point = self.root.join(c);
                    let base = point.clone();
                    subs.push(match c {
                        "memory" => Subsystem::Mem(MemController::new(point, base, false)),
                        "pids" => Subsystem::Pid(PidController::new(point, base, false)),
                        "cpuset" => Subsystem::CpuSet(CpuSetController::new(point, base, false)),
                        "cpuacct" => Subsystem::CpuAcct(CpuAcctController::new(point, base)),
                        "cpu" => Subsystem::Cpu(CpuController::new(point, base, false)),
                        "hugetlb" => Subsystem::HugeTlb(HugeTlbController::new(point, base, false)),
                        _ => Subsystem::Systemd(SystemdController::new(point, base, false)),
                    });
                }
            }
            CgroupVersion::V2 => {
                let root = self.root.clone();
                for c in self.v2_available() {
                    match c.as_str() {
                        "memory" => subs.push(Subsystem::Mem(MemController::new(
                            root.clone(),
                            root.clone(),
                            true,
                        ))),
                        "pids" => subs.push(Subsystem::Pid(PidController::new(
                            root.clone(),
                            root.clone(),
                            true,
                        ))),
                        "cpu" => subs.push(Subsystem::Cpu(CpuController::new(
                            root.clone(),
                            root.clone(),
                            true,
                        ))),
                        "hugetlb" => subs.push(Subsystem::HugeTlb(HugeTlbController::new(
                            root.clone(),
                            root.clone(),
                            true,
                        ))),
                        _ => {}
                    }
                }
            }
        }
        subs
    }

    fn root(&self) -> PathBuf {
        self.root.clone()
    }

    fn root_control_group(&self) -> Cgroup {
        Cgroup::load(Box::new(self.clone()), "")
    }

    fn parent_control_group(&self, path: &str) -> Cgroup {
        let parent = Path::new(path.trim_start_matches('/'))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Cgroup::load(Box::new(self.clone()), parent)
    }

    fn v2(&self) -> bool {
        self.version == CgroupVersion::V2
    }
}

/// `/kube.slice` -> `kube.slice` (cgroups-rs joins paths; an absolute one would replace
/// the root).
fn relative(cgroup: &str) -> &str {
    cgroup.trim_start_matches('/')
}

/// The directories cgroup `cgroup` consists of.
fn dirs(cfg: &CgroupConfig, cgroup: &str) -> Vec<PathBuf> {
    let rel = relative(cgroup);
    match cfg.version {
        CgroupVersion::V2 => vec![cfg.root.join(rel)],
        CgroupVersion::V1 => cfg
            .hierarchy()
            .v1_mounted()
            .into_iter()
            .map(|c| cfg.root.join(c).join(rel))
            .collect(),
    }
}

/// Whether cgroup `cgroup` exists as the kubelet checks it: v1, in every hierarchy it
/// checks that is mounted; v2, as a directory.
pub fn exists(cfg: &CgroupConfig, cgroup: &str) -> bool {
    let dirs = dirs(cfg, cgroup);
    !dirs.is_empty() && dirs.iter().all(|d| d.is_dir())
}

/// The controller a limit file belongs to.
fn controller_of_file(file: &str) -> &str {
    file.split('.').next().unwrap_or(file)
}

/// Creates cgroup `cgroup` if it does not exist; `needed` are the controllers its limits
/// need (v2: enabled in every ancestor's `cgroup.subtree_control` where available and not
/// yet enabled). Returns whether it was created now.
#[instrument(level = "debug", skip(cfg), fields(root = %cfg.root.display()))]
pub fn create(cfg: &CgroupConfig, cgroup: &str, needed: &[&str]) -> Result<bool, CgroupError> {
    if exists(cfg, cgroup) {
        return Ok(false);
    }
    let rel = relative(cgroup);
    match cfg.version {
        CgroupVersion::V1 => {
            let cg = Cgroup::load(Box::new(cfg.hierarchy()), rel);
            cg.create().map_err(|source| CgroupError::Create {
                cgroup: cgroup.to_string(),
                root: cfg.root.clone(),
                source: Box::new(source),
            })?;
        }
        CgroupVersion::V2 => {
            let leaf = cfg.root.join(rel);
            std::fs::create_dir_all(&leaf).map_err(|e| CgroupError::Create {
                cgroup: cgroup.to_string(),
                root: cfg.root.clone(),
                source: Box::new(e),
            })?;
            // The root and every ancestor but the leaf hand the controllers down.
            let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
            let mut ancestor = cfg.root.clone();
            enable_controllers(&ancestor, needed)?;
            for part in &parts[..parts.len().saturating_sub(1)] {
                ancestor.push(part);
                enable_controllers(&ancestor, needed)?;
            }
        }
    }
    info!(cgroup, root = %cfg.root.display(), "created cgroup");
    Ok(true)
}

/// Enables `needed` controllers (those available in `dir` and not enabled yet) for the
/// children of v2 cgroup `dir`. Only where `cgroup.subtree_control` exists: a real cgroup2
/// directory always has it; a plain directory standing in for one does not need it.
fn enable_controllers(dir: &Path, needed: &[&str]) -> Result<(), CgroupError> {
    let control = dir.join("cgroup.subtree_control");
    let Ok(enabled) = std::fs::read_to_string(&control) else {
        return Ok(());
    };
    let available = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|c| available.split_whitespace().any(|a| a == *c))
        .filter(|c| !enabled.split_whitespace().any(|a| a == *c))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    // One write: the kernel takes a space-separated list of +controller.
    let line = missing
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    std::fs::write(&control, &line).map_err(|source| CgroupError::EnableController {
        controller: missing.join(" "),
        path: control.clone(),
        source,
    })?;
    debug!(controllers = %line, path = %control.display(), "enabled controllers");
    Ok(())
}

/// Creates the system-reserved and kube-reserved cgroups of `layout` that do not exist and
/// writes the kubelet's limits into the ones it created. Returns the cgroups created (as
/// the layout names them). Existing cgroups are left as they are (see the module
/// documentation).
#[instrument(skip_all, fields(root = %cfg.root.display()))]
pub fn ensure_reserved(
    cfg: &CgroupConfig,
    layout: &CgroupLayout,
) -> Result<Vec<String>, CgroupError> {
    let mut created = Vec::new();
    for spec in [&layout.system_reserved, &layout.kube_reserved]
        .into_iter()
        .flatten()
    {
        let needed: Vec<&str> = spec
            .limits
            .iter()
            .map(|l| l.controller)
            .filter(|c| V2_CONTROLLERS.contains(c))
            .collect();
        if create(cfg, &spec.path, &needed)? {
            write_limits(cfg, spec)?;
            created.push(spec.path.clone());
        }
    }
    Ok(created)
}

/// Writes `spec`'s limits (as the kubelet would) through cgroups-rs's controllers.
#[instrument(level = "debug", skip_all, fields(cgroup = %spec.path))]
pub fn write_limits(cfg: &CgroupConfig, spec: &CgroupSpec) -> Result<(), CgroupError> {
    let cg = Cgroup::load(Box::new(cfg.hierarchy()), relative(&spec.path));
    for limit in &spec.limits {
        write_limit(cfg, &cg, &spec.path, limit)?;
    }
    Ok(())
}

fn write_limit(
    cfg: &CgroupConfig,
    cg: &Cgroup,
    cgroup: &str,
    limit: &CgroupLimit,
) -> Result<(), CgroupError> {
    let missing = || CgroupError::ControllerMissing {
        cgroup: cgroup.to_string(),
        controller: limit.controller.to_string(),
        file: limit.file.clone(),
        root: cfg.root.clone(),
    };
    let bad = || CgroupError::BadValue {
        cgroup: cgroup.to_string(),
        file: limit.file.clone(),
        value: limit.value.clone(),
    };
    let set_err = |source| CgroupError::SetLimit {
        cgroup: cgroup.to_string(),
        file: limit.file.clone(),
        value: limit.value.clone(),
        source: Box::new(source),
    };
    if cfg.version == CgroupVersion::V2 && !v2_controller_enabled(cfg, cgroup, limit.controller) {
        return Err(missing());
    }
    match controller_of_file(&limit.file) {
        "memory" => {
            let mem: &MemController = cg.controller_of().ok_or_else(missing)?;
            let bytes: i64 = limit.value.parse().map_err(|_| bad())?;
            mem.set_limit(bytes).map_err(set_err)
        }
        "cpu" => {
            let cpu: &CpuController = cg.controller_of().ok_or_else(missing)?;
            // cpu.shares (v1) or cpu.weight (v2): the value is already the right one.
            let value: u64 = limit.value.parse().map_err(|_| bad())?;
            cpu.set_shares(value).map_err(set_err)
        }
        "pids" => {
            let pids: &PidController = cg.controller_of().ok_or_else(missing)?;
            let max = if limit.value == "max" {
                MaxValue::Max
            } else {
                MaxValue::Value(limit.value.parse().map_err(|_| bad())?)
            };
            pids.set_pid_max(max).map_err(set_err)
        }
        "hugetlb" => {
            let huge: &HugeTlbController = cg.controller_of().ok_or_else(missing)?;
            let size = hugetlb_size(&limit.file).ok_or_else(bad)?;
            let bytes: u64 = limit.value.parse().map_err(|_| bad())?;
            huge.set_limit_in_bytes(size, bytes).map_err(set_err)
        }
        _ => Err(missing()),
    }
}

/// v2: whether `controller` is enabled for `cgroup` (listed in its `cgroup.controllers`;
/// a plain directory without that file counts on the root's list).
fn v2_controller_enabled(cfg: &CgroupConfig, cgroup: &str, controller: &str) -> bool {
    let own = cfg.root.join(relative(cgroup)).join("cgroup.controllers");
    let list = std::fs::read_to_string(&own)
        .or_else(|_| std::fs::read_to_string(cfg.root.join("cgroup.controllers")))
        .unwrap_or_default();
    list.split_whitespace().any(|c| c == controller)
}

/// `hugetlb.2MB.limit_in_bytes` / `hugetlb.2MB.max` -> `2MB`.
fn hugetlb_size(file: &str) -> Option<&str> {
    let rest = file.strip_prefix("hugetlb.")?;
    rest.strip_suffix(".limit_in_bytes")
        .or_else(|| rest.strip_suffix(".max"))
}

/// `2MB` -> 2097152.
fn hugetlb_page_bytes(size: &str) -> Option<i128> {
    let digits = size.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &size[digits.len()..];
    let n: i128 = digits.parse().ok()?;
    let mult: i128 = match unit {
        "B" => 1,
        "KB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        "PB" => 1 << 50,
        _ => return None,
    };
    Some(n * mult)
}

/// The largest page a kernel rounds a memory limit down to (64 KiB pages on some arm64
/// and ppc64 kernels).
const MAX_PAGE_BYTES: i128 = 64 * 1024;

/// One interface file whose value is not what the kubelet writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitMismatch {
    /// The interface file, relative to the cgroup root (`memory/kubepods/memory.limit_in_bytes`).
    pub path: String,
    /// What the kubelet writes.
    pub expected: String,
    /// What the file holds; `None` when it does not exist.
    pub actual: Option<String>,
}

impl fmt::Display for LimitMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.actual {
            Some(actual) => write!(f, "{} is {actual}, expected {}", self.path, self.expected),
            None => write!(f, "{} is missing, expected {}", self.path, self.expected),
        }
    }
}

/// Whether `actual` (read from the file) is what writing `expected` leaves there.
fn value_matches(limit: &CgroupLimit, actual: &str) -> bool {
    if actual == limit.value {
        return true;
    }
    let (Ok(want), Ok(got)) = (limit.value.parse::<i128>(), actual.parse::<i128>()) else {
        return false;
    };
    let granule = match limit.controller {
        "memory" => MAX_PAGE_BYTES,
        "hugetlb" => hugetlb_size(&limit.file)
            .and_then(hugetlb_page_bytes)
            .unwrap_or(1),
        _ => return false,
    };
    // The kernel rounds down to its page size: never more, never a page or more less.
    got <= want && want - got < granule
}

/// Reads `spec`'s interface files and lists every value that differs from the kubelet's.
pub fn check_limits(
    cfg: &CgroupConfig,
    spec: &CgroupSpec,
) -> Result<Vec<LimitMismatch>, CgroupError> {
    let mut out = Vec::new();
    for limit in &spec.limits {
        let path = cfg.root.join(&limit.path);
        let actual = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text.trim().to_string()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(CgroupError::Read { path, source }),
        };
        if actual.as_deref().is_some_and(|a| value_matches(limit, a)) {
            continue;
        }
        out.push(LimitMismatch {
            path: limit.path.clone(),
            expected: limit.value.clone(),
            actual,
        });
    }
    Ok(out)
}

/// Checks the pods cgroup of `layout` against the node: `None` when it exists and every
/// limit is what the kubelet writes, else a message naming each difference. A layout
/// without a pods cgroup (`cgroupsPerQOS: false` and no `cgroupRoot`) has nothing to check.
#[instrument(skip_all, fields(root = %cfg.root.display()))]
pub fn verify_pods(
    cfg: &CgroupConfig,
    layout: &CgroupLayout,
) -> Result<Option<String>, CgroupError> {
    let Some(pods) = &layout.pods else {
        return Ok(None);
    };
    if !exists(cfg, &pods.path) {
        return Ok(Some(format!(
            "pods cgroup {} does not exist under {}",
            pods.path,
            cfg.root.display()
        )));
    }
    let mismatches = check_limits(cfg, pods)?;
    if mismatches.is_empty() {
        return Ok(None);
    }
    let list: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
    Ok(Some(format!(
        "pods cgroup {} limits differ from node allocatable: {}",
        pods.path,
        list.join("; ")
    )))
}

/// Removes cgroup `cgroup`, its sub-cgroups first: v1 through cgroups-rs (every
/// hierarchy), v2 directly (cgroups-rs's v2 delete is a single `rmdir`). On a real cgroup
/// filesystem an empty cgroup goes; one with processes, or a plain directory holding
/// files, does not (the error names the directory).
#[instrument(level = "debug", skip(cfg), fields(root = %cfg.root.display()))]
pub fn remove(cfg: &CgroupConfig, cgroup: &str) -> Result<(), CgroupError> {
    let rel = relative(cgroup);
    if rel.is_empty() {
        return Ok(());
    }
    match cfg.version {
        CgroupVersion::V1 => {
            let cg = Cgroup::load(Box::new(cfg.hierarchy()), rel);
            if let Err(e) = cg.delete() {
                let path = dirs(cfg, cgroup)
                    .into_iter()
                    .find(|d| d.exists())
                    .unwrap_or_else(|| cfg.root.join(rel));
                return Err(CgroupError::Remove {
                    path,
                    source: io::Error::other(e.to_string()),
                });
            }
        }
        CgroupVersion::V2 => remove_tree(&cfg.root.join(rel))?,
    }
    if let Some(left) = dirs(cfg, cgroup).into_iter().find(|d| d.exists()) {
        return Err(CgroupError::Remove {
            path: left,
            source: io::Error::other("still present after removal"),
        });
    }
    info!(cgroup, "removed cgroup");
    Ok(())
}

/// `rmdir` of `dir` after its subdirectories, depth first; a missing `dir` is fine.
fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(CgroupError::Remove {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    for entry in entries {
        let entry = entry.map_err(|source| CgroupError::Remove {
            path: dir.to_path_buf(),
            source,
        })?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir).map_err(|source| CgroupError::Remove {
        path: dir.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(controller: &'static str, file: &str, value: &str) -> CgroupLimit {
        CgroupLimit {
            controller,
            file: file.to_string(),
            path: format!("x/{file}"),
            value: value.to_string(),
        }
    }

    #[test]
    fn kernel_rounding_is_not_a_mismatch() {
        let mem = limit("memory", "memory.max", "7516193000");
        assert!(value_matches(&mem, "7516192768"), "rounded down to 4 KiB");
        assert!(!value_matches(&mem, "7516193001"), "never rounded up");
        assert!(!value_matches(&mem, "7516000000"));
        assert!(!value_matches(&mem, "max"));
        let cpu = limit("cpu", "cpu.weight", "79");
        assert!(value_matches(&cpu, "79"));
        assert!(!value_matches(&cpu, "78"));
        let huge = limit("hugetlb", "hugetlb.2MB.max", "5242880");
        assert!(value_matches(&huge, "4194304"), "two 2 MiB pages");
        assert!(!value_matches(&huge, "2097152"));
        let pids = limit("pids", "pids.max", "max");
        assert!(value_matches(&pids, "max"));
    }

    #[test]
    fn an_empty_controller_directory_is_not_a_mounted_hierarchy() {
        // As on the CI machines: /sys/fs/cgroup/hugetlb exists, empty, with nothing mounted.
        let dir = tempfile::tempdir().unwrap();
        for c in ["cpu", "memory"] {
            std::fs::create_dir_all(dir.path().join(c).join("kubepods")).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("hugetlb")).unwrap();
        let h = RootedHierarchy {
            root: dir.path().to_path_buf(),
            version: CgroupVersion::V1,
        };
        assert_eq!(h.v1_mounted(), ["cpu", "memory"]);
    }

    #[test]
    fn hugetlb_names() {
        assert_eq!(hugetlb_size("hugetlb.2MB.limit_in_bytes"), Some("2MB"));
        assert_eq!(hugetlb_size("hugetlb.1GB.max"), Some("1GB"));
        assert_eq!(hugetlb_page_bytes("2MB"), Some(2 << 20));
        assert_eq!(hugetlb_page_bytes("1GB"), Some(1 << 30));
        assert_eq!(hugetlb_page_bytes("2XB"), None);
    }

    #[test]
    fn drivers_parse() {
        assert_eq!("systemd".parse(), Ok(CgroupDriver::Systemd));
        assert_eq!("cgroupfs".parse(), Ok(CgroupDriver::Cgroupfs));
        assert!("Systemd".parse::<CgroupDriver>().is_err());
    }

    #[test]
    fn versions_are_detected_from_the_tree() {
        let d = tempfile::tempdir().unwrap();
        assert!(detect_version(d.path()).is_err());
        std::fs::create_dir(d.path().join("memory")).unwrap();
        assert_eq!(detect_version(d.path()).unwrap(), CgroupVersion::V1);
        std::fs::write(d.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
        assert_eq!(detect_version(d.path()).unwrap(), CgroupVersion::V2);
        assert!(detect_version(&d.path().join("nope")).is_err());
    }
}
