//! The node's kubelet setup as one pass of the loop sees it ([`NodeSetup`]): the kubelet's
//! command line, read from the host when a step of the pass first needs it and then shared
//! by every use in the pass (validation, the state files' root directory, the expected
//! config of a verification, the pods-cgroup check), with the Node's capacity. The next
//! pass reads the command line again: a `kubeadm upgrade` may change it between passes.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as NodeQuantity;
use kubelet_gitops_core::flags::{DEFAULT_ROOT_DIR, KubeletFlags};
use kubelet_gitops_core::message::error_chain;
use kubelet_gitops_core::quantity::Quantity;
use tracing::warn;

use crate::args::Config;
use crate::config_file::Placement;
use crate::error::HostError;
use crate::hostflags::read_flags;
use crate::validate::NodeContext;

/// One pass's view of the node's kubelet setup.
pub(super) struct NodeSetup {
    config: Arc<Config>,
    placement: Placement,
    /// The Node's `status.capacity` (`None` without a Node).
    capacity: Option<BTreeMap<String, NodeQuantity>>,
    context: OnceLock<Result<NodeContext, HostError>>,
}

impl NodeSetup {
    /// The setup of the node `config` describes, for a Node with `capacity`; nothing is
    /// read yet.
    pub(super) fn new(
        config: Arc<Config>,
        placement: Placement,
        capacity: Option<BTreeMap<String, NodeQuantity>>,
    ) -> NodeSetup {
        NodeSetup {
            config,
            placement,
            capacity,
            context: OnceLock::new(),
        }
    }

    /// What validation knows of the node, with the kubelet's flags read from the host the
    /// first time in this pass.
    pub(super) fn context(&self) -> Result<&NodeContext, &HostError> {
        self.context
            .get_or_init(|| {
                let flags = read_flags(&self.config.flag_source, &self.config.host_root)?;
                Ok(NodeContext {
                    flags,
                    host_root: self.config.host_root.clone(),
                    capacity: self.capacity.as_ref().map(capacity).unwrap_or_default(),
                    cgroups: self.config.cgroups.clone(),
                    placement: self.placement.clone(),
                })
            })
            .as_ref()
    }

    /// The kubelet's root directory (`--root-dir`, a host path), where its state files
    /// live; the default when the flags cannot be read (logged).
    pub(super) fn root_dir(&self) -> String {
        match self.context() {
            Ok(ctx) => root_dir(&ctx.flags),
            Err(e) => {
                warn!(error = %error_chain(e), default = DEFAULT_ROOT_DIR, "cannot read the kubelet's flags for --root-dir; using the default");
                DEFAULT_ROOT_DIR.to_string()
            }
        }
    }
}

/// `--root-dir`, or the kubelet's default when unset or empty.
fn root_dir(flags: &KubeletFlags) -> String {
    flags
        .value("root-dir")
        .filter(|d| !d.is_empty())
        .unwrap_or(DEFAULT_ROOT_DIR)
        .to_string()
}

/// The Node's capacity as quantities; one that does not parse is left out (logged).
fn capacity(node: &BTreeMap<String, NodeQuantity>) -> BTreeMap<String, Quantity> {
    node.iter()
        .filter_map(|(k, q)| match Quantity::parse(&q.0) {
            Ok(q) => Some((k.clone(), q)),
            Err(e) => {
                warn!(resource = %k, value = %q.0, error = %e, "unparsable capacity; ignored");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use kubelet_gitops_core::allocatable::CgroupVersion;

    use super::*;
    use crate::args::{LogFormat, Target};
    use crate::cgroups::{CgroupConfig, CgroupDriver};
    use crate::hostflags::FlagSource;
    use crate::kubelet::RestartMethod;

    fn config(host_root: &Path) -> Arc<Config> {
        Arc::new(Config {
            node_name: "w1".into(),
            kubeconfig: None,
            checkpoint_dir: host_root.join("var/lib/kubelet-gitops"),
            target: Target::Replace(None),
            flag_source: FlagSource::Files(vec![PathBuf::from("/etc/default/kubelet")]),
            restart: RestartMethod::Command(vec!["true".into()]),
            healthz_url: "http://127.0.0.1:10248/healthz".into(),
            configz_url: None,
            kubelet_token_file: None,
            kubelet_ca_file: None,
            kubelet_insecure_skip_tls_verify: false,
            host_root: host_root.to_path_buf(),
            cgroups: CgroupConfig {
                root: host_root.join("sys/fs/cgroup"),
                version: CgroupVersion::V2,
                driver: CgroupDriver::Systemd,
            },
            health_timeout: Duration::from_secs(120),
            lkg_grace: Duration::from_secs(600),
            resync_interval: Duration::from_secs(60),
            watch_timeout: crate::args::WatchTimeout::new(Duration::from_secs(1800).into())
                .unwrap(),
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            log_format: LogFormat::Text,
            log: "info".into(),
        })
    }

    fn setup(host_root: &Path, capacity: &[(&str, &str)]) -> NodeSetup {
        NodeSetup::new(
            config(host_root),
            Placement::ConfigFile {
                path: "/var/lib/kubelet/config.yaml".into(),
            },
            Some(
                capacity
                    .iter()
                    .map(|(k, v)| (k.to_string(), NodeQuantity(v.to_string())))
                    .collect(),
            ),
        )
    }

    #[test]
    fn the_flags_are_read_once_per_pass() {
        let host = tempfile::tempdir().unwrap();
        let env = host.path().join("etc/default/kubelet");
        std::fs::create_dir_all(env.parent().unwrap()).unwrap();
        std::fs::write(&env, "KUBELET_EXTRA_ARGS=--root-dir=/data/kubelet\n").unwrap();
        let pass = setup(host.path(), &[("cpu", "4"), ("memory", "lots")]);
        assert_eq!(pass.root_dir(), "/data/kubelet");
        let ctx = pass.context().unwrap();
        assert_eq!(ctx.capacity.keys().collect::<Vec<_>>(), ["cpu"], "{ctx:?}");
        // Changed on the host during the pass: this pass keeps what it read.
        std::fs::write(&env, "KUBELET_EXTRA_ARGS=--root-dir=/other\n").unwrap();
        assert_eq!(pass.root_dir(), "/data/kubelet");
        // The next pass reads it again.
        assert_eq!(setup(host.path(), &[]).root_dir(), "/other");
    }

    #[test]
    fn without_flags_the_root_dir_is_the_default() {
        let host = tempfile::tempdir().unwrap();
        let env = host.path().join("etc/default/kubelet");
        std::fs::create_dir_all(&env).unwrap(); // a directory: unreadable as a file
        let pass = setup(host.path(), &[]);
        assert!(pass.context().is_err());
        assert_eq!(pass.root_dir(), DEFAULT_ROOT_DIR);
        std::fs::remove_dir(&env).unwrap();
        std::fs::write(&env, "KUBELET_EXTRA_ARGS=--root-dir=\n").unwrap();
        assert_eq!(
            setup(host.path(), &[]).root_dir(),
            DEFAULT_ROOT_DIR,
            "empty"
        );
    }
}
