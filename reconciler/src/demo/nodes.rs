//! The simulated nodes as an agent sees them: each node's root directory is the node's
//! `/`, which the agent reads under `--host-root`, as a DaemonSet pod reads the host's
//! `/` mounted at `/host`.
//!
//! The sim lays out the kubelet's own files there (`var/lib/kubelet/config.yaml`,
//! `kubeadm-flags.env`, the drop-in directory, a cgroup tree). [`prepare_node`] adds what
//! a kubeadm node also has and the example's base config names (the cluster CA, the
//! static pod directory, resolv.conf, containerd's socket), so the agent's pre-flight
//! finds them, and one link: the sim writes its absolute paths into the kubelet's flags
//! (`--config=<root>/var/lib/kubelet/config.yaml`), and the agent resolves every host path
//! under the node's root, so `<root><root>` links back to `<root>` and both read the
//! same files.

use std::path::{Path, PathBuf};

use super::error::{DemoError, io};

/// Files a kubeadm node has that the example's base config names.
const KUBEADM_FILES: &[(&str, &str)] = &[
    (
        "etc/kubernetes/pki/ca.crt",
        "# stands in for the cluster CA certificate kubeadm writes here\n",
    ),
    (
        "run/systemd/resolve/resolv.conf",
        "# stands in for systemd-resolved's upstream servers\nnameserver 10.0.0.2\n",
    ),
    (
        "run/containerd/containerd.sock",
        "", // stands in for containerd's socket: the pre-flight checks that it exists
    ),
];

/// Directories a kubeadm node has that the example's base config names.
const KUBEADM_DIRS: &[&str] = &["etc/kubernetes/manifests"];

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

/// Adds the kubeadm files and the path link to the node root `root` (absolute, with no
/// symlink in it).
pub fn prepare_node(root: &Path) -> Result<(), DemoError> {
    for dir in KUBEADM_DIRS {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).map_err(io("create", d))?;
    }
    for (rel, content) in KUBEADM_FILES {
        let f = root.join(rel);
        if let Some(dir) = f.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        std::fs::write(&f, content).map_err(io("write", f))?;
    }
    let link = self_link(root);
    if let Some(dir) = link.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    std::os::unix::fs::symlink(root, &link).map_err(io("link", link))
}

/// `<root><root>`: where the sim's absolute paths land under the node's root.
pub fn self_link(root: &Path) -> PathBuf {
    let rel: PathBuf = root
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect();
    root.join(rel)
}

/// Makes cgroup `slice` (e.g. `gpu.slice`) unusable on the node root `root`: something
/// that is not a cgroup directory holds its name, so the kubelet cannot create cgroups
/// under it.
pub fn block_cgroup(root: &Path, cgroup_root: &str, slice: &str) -> Result<PathBuf, DemoError> {
    let path = root.join(cgroup_root.trim_start_matches('/')).join(slice);
    std::fs::write(
        &path,
        "not a cgroup: the demo's stand-in for a slice the kubelet cannot use\n",
    )
    .map_err(io("write", &path))?;
    Ok(path)
}

/// The agent's command line for node `node`.
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
    /// The arguments (without the program name).
    pub fn to_args(&self) -> Vec<String> {
        let AgentArgs {
            node,
            paths,
            kubeconfig,
            sim_url,
            kubelet_url,
        } = self;
        vec![
            format!("--node-name={node}"),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--host-root={}", paths.root.display()),
            format!("--checkpoint-dir={}", paths.checkpoint_dir),
            "--mode=replace".into(),
            "--flags-from=files".into(),
            format!("--flags-file={}", paths.flags_file),
            "--restart-method=command".into(),
            format!(
                "--restart-command=curl -fsS -X POST {sim_url}/sim/v1/nodes/{node}/kubelet/restart"
            ),
            format!("--healthz-url={kubelet_url}/healthz"),
            format!("--configz-url={kubelet_url}/configz"),
            format!("--cgroup-root={}", paths.cgroup_root),
            "--cgroup-driver=systemd".into(),
            "--resync-interval=1s".into(),
            // Any free port: twelve agents share this machine.
            "--admin-addr=127.0.0.1:0".into(),
            "--log-format=text".into(),
            "--log=info".into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_makes_absolute_paths_resolve_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("nodes/gpu-1");
        std::fs::create_dir_all(root.join("var/lib/kubelet")).unwrap();
        std::fs::write(root.join("var/lib/kubelet/config.yaml"), "x").unwrap();
        prepare_node(&root).unwrap();
        // What the agent reads for --config=<root>/var/lib/kubelet/config.yaml.
        let under_root = self_link(&root).join("var/lib/kubelet/config.yaml");
        assert_eq!(std::fs::read_to_string(under_root).unwrap(), "x");
        assert!(root.join("etc/kubernetes/pki/ca.crt").is_file());
        assert!(root.join("etc/kubernetes/manifests").is_dir());

        std::fs::create_dir_all(root.join("sys/fs/cgroup")).unwrap();
        let blocked = block_cgroup(&root, "/sys/fs/cgroup", "gpu.slice").unwrap();
        assert!(blocked.is_file());
        // Removing the tree does not follow the link.
        std::fs::remove_dir_all(&root).unwrap();
        assert!(dir.path().is_dir());
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
