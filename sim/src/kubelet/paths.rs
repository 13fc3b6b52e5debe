//! A node's root directory laid out like a kubeadm host (the table in [`super`]), and the
//! kubelet's command line in kubeadm's flags file. Files that exist are kept: a node keeps
//! its disk across sim restarts.

use std::path::{Path, PathBuf};

use kubelet_gitops_core::atomic::write_atomic;
use kubelet_gitops_core::hostpath::host_path;
use kubelet_gitops_core::inventory::InventoryNode;
use serde::Serialize;

use super::node::{host_pid_max, initial_config_yaml};
use super::{noderoot, startup};

/// Files a kubeadm node on Ubuntu has that kubelet configurations name, with their
/// content: (path on the node, content). Written once; a node keeps its disk.
const HOST_FILES: &[(&str, &str)] = &[
    (
        "/etc/kubernetes/pki/ca.crt",
        "# Stands in for the cluster CA certificate kubeadm writes here (clientCAFile).\n\
         # The simulated kubelet serves plain HTTP and never reads it.\n",
    ),
    (
        "/etc/resolv.conf",
        "# systemd-resolved's stub resolver (the kubelet's default resolvConf)\n\
         nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n",
    ),
    (
        "/run/systemd/resolve/resolv.conf",
        "# systemd-resolved's upstream servers (resolvConf on systemd-resolved hosts)\n\
         nameserver 10.0.0.2\n",
    ),
    (
        "/proc/swaps",
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
    ),
];

/// Directories a kubeadm node has that kubelet configurations name.
const HOST_DIRS: &[&str] = &["/etc/kubernetes/manifests"];

/// Where a node's kubelet keeps its files: the node's root directory (its `/`) and, as
/// paths on this machine, the files under it. The associated constants are the same
/// files as the node sees them, which is how its flags name them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletPaths {
    /// The node's root (its `/`).
    pub root: PathBuf,
    /// [`KubeletPaths::CONFIG`] under the root: the `--config` file.
    pub config: PathBuf,
    /// [`KubeletPaths::DROP_IN_DIR`] under the root: the `--config-dir` drop-in directory.
    pub drop_in_dir: PathBuf,
    /// [`KubeletPaths::FLAGS_ENV`] under the root: the kubelet's command line.
    pub flags_env: PathBuf,
    /// [`KubeletPaths::CGROUP_ROOT`] under the root: the cgroup tree.
    pub cgroup_root: PathBuf,
    /// [`KubeletPaths::PID_MAX`] under the root: the node's `pid_max`, the kubelet's
    /// internal `pid` capacity.
    pub pid_max: PathBuf,
    /// [`KubeletPaths::CONTAINERD_SOCKET`] under the root: the container runtime's socket.
    pub containerd_socket: PathBuf,
    /// [`KubeletPaths::LOG`] under the root.
    pub log: PathBuf,
    /// [`KubeletPaths::PID_FILE`] under the root: the process id, when the stand-in runs
    /// as its own process.
    pub pid_file: PathBuf,
}

impl KubeletPaths {
    /// The `--config` file, as the node sees it.
    pub const CONFIG: &str = "/var/lib/kubelet/config.yaml";
    /// The `--config-dir` drop-in directory, as the node sees it.
    pub const DROP_IN_DIR: &str = "/etc/kubernetes/kubelet.conf.d";
    /// kubeadm's flags file, as the node sees it.
    pub const FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";
    /// The cgroup filesystem, as the node sees it.
    pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
    /// The kernel's `pid_max`, as the node sees it.
    pub const PID_MAX: &str = "/proc/sys/kernel/pid_max";
    /// containerd's socket (the kubelet's default `containerRuntimeEndpoint`,
    /// `unix:///run/containerd/containerd.sock`), as the node sees it.
    pub const CONTAINERD_SOCKET: &str = "/run/containerd/containerd.sock";
    /// The kubelet's log, as the node sees it.
    pub const LOG: &str = "/var/log/kubelet.log";
    /// The stand-in's pid file, as the node sees it.
    pub const PID_FILE: &str = "/var/run/kubelet.pid";

    /// The paths under `root`.
    pub fn new(root: &Path) -> KubeletPaths {
        let under = |path: &str| host_path(root, path);
        KubeletPaths {
            root: root.to_path_buf(),
            config: under(Self::CONFIG),
            drop_in_dir: under(Self::DROP_IN_DIR),
            flags_env: under(Self::FLAGS_ENV),
            cgroup_root: under(Self::CGROUP_ROOT),
            pid_max: under(Self::PID_MAX),
            containerd_socket: under(Self::CONTAINERD_SOCKET),
            log: under(Self::LOG),
            pid_file: under(Self::PID_FILE),
        }
    }

    /// `path`, a path on the node (`/var/lib/kubelet/config.yaml`), as a path on this
    /// machine: resolved under the node's root as a process chrooted there resolves it
    /// ([`noderoot::resolve`]).
    pub fn resolve(&self, path: impl AsRef<Path>) -> std::io::Result<PathBuf> {
        noderoot::resolve(&self.root, path)
    }

    /// The kubelet's command line for `node`: `--config`, `--config-dir` (paths on the
    /// node, as kubeadm writes them), then the inventory's flags.
    pub fn command_line(&self, node: &InventoryNode) -> Result<Vec<String>, String> {
        let mut args = vec![
            format!("--config={}", Self::CONFIG),
            format!("--config-dir={}", Self::DROP_IN_DIR),
        ];
        let extra = node
            .kubelet_args()
            .map_err(|e| format!("node {}: kubeletFlags: {e}", node.name))?;
        for arg in &extra {
            let name = arg.trim_start_matches('-');
            let name = name.split('=').next().unwrap_or_default();
            if name == "config" || name == "config-dir" {
                return Err(format!(
                    "node {}: kubeletFlags sets --{name}, which the sim manages (--config={} --config-dir={})",
                    node.name,
                    Self::CONFIG,
                    Self::DROP_IN_DIR
                ));
            }
        }
        args.extend(extra);
        Ok(args)
    }

    /// Lays out the node's root for `node`: directories, `config.yaml`, the drop-in directory,
    /// `kubeadm-flags.env`, `proc/sys/kernel/pid_max` (this host's value, or
    /// [`DEFAULT_PID_MAX`](super::DEFAULT_PID_MAX) when it cannot be read), `proc/swaps`
    /// without swap, what kubelet configs name on a kubeadm host (the cluster CA placeholder,
    /// `etc/kubernetes/manifests`, both resolv.conf files), containerd's socket directory, and
    /// a cgroup tree with `system.slice` and `user.slice` (as systemd creates them;
    /// `kube.slice` and the like are left to whoever enforces them). Files that exist are kept,
    /// so a node keeps its disk across sim restarts. The socket itself is made by the stand-in
    /// ([`KubeletHandle::spawn`](super::KubeletHandle::spawn)).
    pub fn prepare(&self, node: &InventoryNode, cgroup_v2: bool) -> Result<(), String> {
        let io = |what: &Path, e: std::io::Error| format!("{}: {e}", what.display());
        let host_dirs: Vec<PathBuf> = HOST_DIRS.iter().map(|d| host_path(&self.root, d)).collect();
        for dir in [
            self.config.parent(),
            Some(self.drop_in_dir.as_path()),
            self.log.parent(),
            self.pid_file.parent(),
            self.pid_max.parent(),
            self.containerd_socket.parent(),
            Some(self.cgroup_root.as_path()),
        ]
        .into_iter()
        .flatten()
        .chain(host_dirs.iter().map(PathBuf::as_path))
        {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        }
        if !self.config.exists() {
            write_atomic(
                &self.config,
                initial_config_yaml(node, cgroup_v2).as_bytes(),
            )
            .map_err(|e| io(&self.config, e))?;
        }
        if !self.flags_env.exists() {
            let args = self.command_line(node)?;
            write_atomic(&self.flags_env, kubeadm_flags_env(&args).as_bytes())
                .map_err(|e| io(&self.flags_env, e))?;
        }
        if !self.pid_max.exists() {
            write_atomic(&self.pid_max, format!("{}\n", host_pid_max()).as_bytes())
                .map_err(|e| io(&self.pid_max, e))?;
        }
        for (path, content) in HOST_FILES {
            let file = host_path(&self.root, path);
            if file.symlink_metadata().is_ok() {
                continue;
            }
            if let Some(dir) = file.parent() {
                std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
            }
            write_atomic(&file, content.as_bytes()).map_err(|e| io(&file, e))?;
        }
        let tree = startup::CgroupTree {
            root: &self.cgroup_root,
            version: if cgroup_v2 {
                kubelet_gitops_core::allocatable::CgroupVersion::V2
            } else {
                kubelet_gitops_core::allocatable::CgroupVersion::V1
            },
        };
        for slice in ["/system.slice", "/user.slice"] {
            tree.create(slice).map_err(|e| io(&self.cgroup_root, e))?;
        }
        if cgroup_v2 {
            let controllers = self.cgroup_root.join("cgroup.controllers");
            if !controllers.exists() {
                std::fs::write(
                    &controllers,
                    "cpuset cpu io memory hugetlb pids rdma misc\n",
                )
                .map_err(|e| io(&controllers, e))?;
            }
        }
        Ok(())
    }
}

/// `KUBELET_KUBEADM_ARGS="..."` for `args`, quoted so that systemd and
/// [`kubelet_gitops_core::flags::kubeadm_args`] give back exactly `args`.
pub fn kubeadm_flags_env(args: &[String]) -> String {
    let words: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    let line = words.join(" ");
    let mut escaped = String::with_capacity(line.len());
    for c in line.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    format!("KUBELET_KUBEADM_ARGS=\"{escaped}\"\n")
}

fn shell_word(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@%+".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeadm_flags_env_round_trips_awkward_words() {
        let args: Vec<String> = [
            "--config=/tmp/a b/config.yaml",
            "--node-labels=a=b,c=d",
            "--x=it's \"quoted\" $HOME `cmd` \\",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let env = kubeadm_flags_env(&args);
        assert!(env.starts_with("KUBELET_KUBEADM_ARGS=\""), "{env}");
        let back = kubelet_gitops_core::flags::kubeadm_args(&env).expect("splits");
        assert_eq!(back, args);
    }

    #[test]
    fn the_sim_manages_config_paths() {
        let inv = kubelet_gitops_core::inventory::Inventory::parse(
            "i.yaml",
            b"nodes:\n- name: node-a\n  capacity: {cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1\"}\n  kubeletFlags: \"--config=/etc/k.yaml\"\n",
        )
        .expect("inventory");
        let paths = KubeletPaths::new(Path::new("/r"));
        let err = paths.command_line(&inv.nodes[0]).unwrap_err();
        assert!(err.contains("--config"), "{err}");
    }

    #[test]
    fn the_flags_name_node_paths_not_the_root() {
        let inv = kubelet_gitops_core::inventory::Inventory::parse(
            "i.yaml",
            b"nodes:\n- name: node-a\n  capacity: {cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi, pods: \"1\"}\n  kubeletFlags: \"--max-pods=7\"\n",
        )
        .expect("inventory");
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = KubeletPaths::new(dir.path());
        assert_eq!(
            paths.command_line(&inv.nodes[0]).expect("command line"),
            [
                "--config=/var/lib/kubelet/config.yaml",
                "--config-dir=/etc/kubernetes/kubelet.conf.d",
                "--max-pods=7",
            ]
        );
        paths.prepare(&inv.nodes[0], true).expect("prepare");
        let env = std::fs::read_to_string(&paths.flags_env).expect("flags env");
        assert!(
            !env.contains(&dir.path().display().to_string()),
            "the root leaks into {env}"
        );
        assert_eq!(
            paths.resolve(KubeletPaths::CONFIG).expect("resolve"),
            paths.config
        );
        // What a kubeadm host has and configs name.
        for file in [
            "etc/kubernetes/pki/ca.crt",
            "etc/resolv.conf",
            "run/systemd/resolve/resolv.conf",
            "proc/swaps",
        ] {
            assert!(dir.path().join(file).is_file(), "{file}");
        }
        assert!(dir.path().join("etc/kubernetes/manifests").is_dir());
        assert!(dir.path().join("run/containerd").is_dir());
        let swaps = std::fs::read_to_string(dir.path().join("proc/swaps")).expect("swaps");
        assert_eq!(swaps.lines().count(), 1, "no swap: {swaps}");
    }
}
