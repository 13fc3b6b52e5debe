//! The simulated nodes as an agent sees them: each node's root directory is the node's
//! `/`, which the agent reads under `--host-root`, as a DaemonSet pod reads the host's
//! `/` mounted at `/host`.
//!
//! The sim lays out a kubeadm host there: the kubelet's own files
//! (`var/lib/kubelet/config.yaml`, `kubeadm-flags.env` naming them by their paths on the
//! node, the drop-in directory, a cgroup tree), what the example's base config names (the
//! cluster CA, the static pod directory, resolv.conf) and containerd's listening socket,
//! so the agent's pre-flight finds everything a real node has, with nothing added here.

use std::path::{Path, PathBuf};

use super::error::{DemoError, io};

/// The node paths an agent is given (host paths, under the node's root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePaths {
    /// The node's `/`.
    pub root: PathBuf,
    /// The agent's checkpoint directory, as a host path.
    pub checkpoint_dir: &'static str,
    /// The kubelet's flags file, as a host path.
    pub flags_file: &'static str,
    /// The cgroup filesystem, as a host path.
    pub cgroup_root: &'static str,
}

impl NodePaths {
    /// The paths of the node whose root is `root`.
    pub fn new(root: &Path) -> NodePaths {
        NodePaths {
            root: root.to_path_buf(),
            checkpoint_dir: "/var/lib/kubelet-gitops",
            flags_file: "/var/lib/kubelet/kubeadm-flags.env",
            cgroup_root: "/sys/fs/cgroup",
        }
    }
}

/// Puts a file where the directory `path` (a path on the node, e.g. act 3's
/// `/mnt/nvme/pod-logs`) would be under the node root `root`, so a kubelet cannot create
/// that directory. Returns the file's path.
pub fn block_path(root: &Path, path: &str) -> Result<PathBuf, DemoError> {
    let file = root.join(path.trim_start_matches('/'));
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(io("create", parent))?;
    }
    std::fs::write(
        &file,
        "not a directory: the demo's stand-in for a disk that is not there\n",
    )
    .map_err(io("write", &file))?;
    Ok(file)
}

/// The agent arguments every node shares (the node's own come from its cluster: see
/// [`sim_node_args`] and [`super::real::RealDemo::agent_args`]).
pub fn common_agent_args(node: &str) -> Vec<String> {
    vec![
        format!("--node-name={node}"),
        "--mode=replace".into(),
        "--flags-from=files".into(),
        "--restart-method=command".into(),
        "--resync-interval=1s".into(),
        // Any free port: twelve agents share this machine.
        "--admin-addr=127.0.0.1:0".into(),
        "--log-format=text".into(),
        "--log=info".into(),
    ]
}

/// A simulated node's agent arguments.
pub struct AgentArgs<'a> {
    pub node: &'a str,
    pub paths: &'a NodePaths,
    pub kubeconfig: &'a Path,
    /// The sim's API server URL (its control endpoints restart kubelets).
    pub sim_url: &'a str,
    /// The stand-in kubelet's URL (`/healthz`, `/configz`).
    pub kubelet_url: &'a str,
}

impl AgentArgs<'_> {
    /// The node-specific arguments (after [`common_agent_args`]).
    pub fn to_args(&self) -> Vec<String> {
        let AgentArgs {
            node,
            paths,
            kubeconfig,
            sim_url,
            kubelet_url,
        } = self;
        vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--host-root={}", paths.root.display()),
            format!("--checkpoint-dir={}", paths.checkpoint_dir),
            format!("--flags-file={}", paths.flags_file),
            format!(
                "--restart-command=curl -fsS -X POST {sim_url}/sim/v1/nodes/{node}/kubelet/restart"
            ),
            format!("--healthz-url={kubelet_url}/healthz"),
            format!("--configz-url={kubelet_url}/configz"),
            format!("--cgroup-root={}", paths.cgroup_root),
            "--cgroup-driver=systemd".into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_path_is_a_file_in_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("nodes/gpu-1");
        let blocked = block_path(&root, "/mnt/nvme/pod-logs").unwrap();
        assert_eq!(blocked, root.join("mnt/nvme/pod-logs"));
        assert!(blocked.is_file());
        assert!(std::fs::create_dir_all(&blocked).is_err());
    }

    #[test]
    fn agent_arguments_name_the_node_and_its_kubelet() {
        let paths = NodePaths::new(Path::new("/w/nodes/gpu-1"));
        let args = AgentArgs {
            node: "gpu-1",
            paths: &paths,
            kubeconfig: Path::new("/w/kubeconfig"),
            sim_url: "http://127.0.0.1:1",
            kubelet_url: "http://127.0.0.1:2",
        }
        .to_args();
        assert!(args.contains(&"--host-root=/w/nodes/gpu-1".to_string()));
        assert!(args.contains(
            &"--restart-command=curl -fsS -X POST http://127.0.0.1:1/sim/v1/nodes/gpu-1/kubelet/restart"
                .to_string()
        ));
        assert!(args.contains(&"--configz-url=http://127.0.0.1:2/configz".to_string()));
        assert!(args.contains(&"--checkpoint-dir=/var/lib/kubelet-gitops".to_string()));
    }
}
