//! The node inventory: the nodes an offline plan (`kubelet-gitops plan --nodes`), the
//! simulated cluster and the demo have.
//!
//! ```yaml
//! nodes:
//!   - name: worker-1
//!     labels: {node.kubernetes.io/pool: gpu, topology.kubernetes.io/zone: a}
//!     capacity: {cpu: "8", memory: 32Gi, ephemeral-storage: 100Gi, pods: "110"}
//!     kubeletFlags: "--max-pods=110 --node-ip=10.0.0.5"   # optional
//!     # optional, what the node agent reports in kubelet-gitops.io/node-setup:
//!     kubeletDropIns:                 # the kubelet's --config-dir drop-ins
//!       - path: /etc/kubernetes/kubelet.conf.d/10-eviction.conf
//!         content: |
//!           apiVersion: kubelet.config.k8s.io/v1beta1
//!           kind: KubeletConfiguration
//!           evictionHard: {memory.available: 500Mi}
//!     runtimeCgroupDriver: systemd    # the container runtime's cgroup driver
//!     cgroupVersion: v2
//!     agentMode: replace              # or drop-in, with kubeletConfig: the node's own file
//! ```
//!
//! [`InventoryNode::setup`] turns a node into the [`NodeSetup`] the plan checks each pool
//! against, as the agent's report would give it.
//!
//! The file is decoded strictly ([`crate::decode::decode_strict`]): an
//! unknown or misspelled field is an error naming the file, the line and the closest known
//! field. It is then validated as the API server and the kubelet would: node names are
//! DNS-1123 subdomains and unique, label keys and values follow the Kubernetes label rules,
//! capacities are non-negative quantities (`pods` a whole number), and `kubeletFlags`
//! parses as the kubelet parses its command line. Every problem is reported, each with its
//! line.

#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::decode::{self, DecodeError, SourceMap, join_index, join_key};
use crate::effective::Source;
use crate::flags::{KubeletFlags, split_command_line};
use crate::names::{self, Wording};
use crate::node_setup::{self, Mode, NodeFiles, NodeSetup};
use crate::quantity::{Format, Quantity};

/// A node inventory file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    /// The nodes, in file order.
    pub nodes: Vec<InventoryNode>,
}

/// One node of the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryNode {
    /// The Node's name (a DNS-1123 subdomain).
    pub name: String,
    /// Labels the Node carries besides the ones every kubelet sets
    /// (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// What the machine has.
    pub capacity: Capacity,
    /// The node's kubelet command line (flags only), e.g. `--max-pods=110 --node-ip=10.0.0.5`.
    #[serde(
        default,
        rename = "kubeletFlags",
        skip_serializing_if = "Option::is_none"
    )]
    pub kubelet_flags: Option<String>,
    /// The kubelet's `--config-dir` drop-ins (other than the agent's own).
    #[serde(
        default,
        rename = "kubeletDropIns",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub kubelet_drop_ins: Vec<InventoryFile>,
    /// The node's own kubelet config file, which the agent's drop-in goes over in
    /// `agentMode: drop-in` (in replace mode the pool's config takes its place).
    #[serde(
        default,
        rename = "kubeletConfig",
        skip_serializing_if = "Option::is_none"
    )]
    pub kubelet_config: Option<String>,
    /// How the node agent writes the config: `replace` (the default) or `drop-in`.
    #[serde(default, rename = "agentMode", skip_serializing_if = "Option::is_none")]
    pub agent_mode: Option<Mode>,
    /// The container runtime's cgroup driver (`systemd` or `cgroupfs`). The simulated
    /// cluster's stand-in kubelet takes it from the runtime, as a v1.36 kubelet does
    /// from a runtime that reports it (containerd 2.0 and later).
    #[serde(
        default,
        rename = "runtimeCgroupDriver",
        skip_serializing_if = "Option::is_none"
    )]
    pub runtime_cgroup_driver: Option<String>,
    /// The host's cgroup hierarchy: `v1` or `v2`.
    #[serde(
        default,
        rename = "cgroupVersion",
        skip_serializing_if = "Option::is_none"
    )]
    pub cgroup_version: Option<String>,
}

/// A file of a node: its path and its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryFile {
    /// The path on the node (`/etc/kubernetes/kubelet.conf.d/10-eviction.conf`).
    pub path: String,
    /// The file's text.
    pub content: String,
}

/// A node's capacity. `pods` is what the node's kubelet starts with as `maxPods` (the
/// kubelet reports its `maxPods` as the pods capacity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// CPUs (`"8"`, `"7500m"`).
    pub cpu: Quantity,
    /// Memory (`32Gi`).
    pub memory: Quantity,
    /// Local ephemeral storage (`100Gi`).
    #[serde(rename = "ephemeral-storage")]
    pub ephemeral_storage: Quantity,
    /// Pods (a whole number).
    pub pods: Quantity,
}

impl Capacity {
    /// The capacity as the resource list a Node reports (`cpu`, `ephemeral-storage`,
    /// `memory`, `pods`).
    pub fn resources(&self) -> BTreeMap<String, Quantity> {
        BTreeMap::from([
            ("cpu".to_string(), self.cpu.clone()),
            (
                "ephemeral-storage".to_string(),
                self.ephemeral_storage.clone(),
            ),
            ("memory".to_string(), self.memory.clone()),
            ("pods".to_string(), self.pods.clone()),
        ])
    }
}

impl InventoryNode {
    /// The node's kubelet flags split into words (empty without `kubeletFlags`).
    pub fn kubelet_args(&self) -> Result<Vec<String>, crate::flags::FlagError> {
        match self.kubelet_flags.as_deref() {
            Some(flags) => split_command_line(flags),
            None => Ok(Vec::new()),
        }
    }

    /// The node's kubelet set-up as the node agent would report it
    /// ([`crate::protocol::NODE_SETUP`]): the flags, the drop-ins, the mode (with the
    /// node's own config file in drop-in mode, and the agent's drop-in
    /// `<--config-dir>/50-kubelet-gitops.conf`), the runtime's cgroup driver and the
    /// cgroup version. Flags that do not parse are left out (the inventory's validation
    /// reports them).
    pub fn setup(&self) -> NodeSetup {
        let flags = self
            .kubelet_args()
            .ok()
            .and_then(|args| KubeletFlags::parse(&args).ok());
        let mode = self.agent_mode.unwrap_or_default();
        let config_name = flags
            .as_ref()
            .and_then(|f| f.config_file())
            .unwrap_or("kubeletConfig")
            .to_string();
        let agent_drop_in = flags.as_ref().and_then(|f| f.config_dir()).map(|dir| {
            format!(
                "{}/{}",
                dir.trim_end_matches('/'),
                node_setup::AGENT_DROP_IN_FILE
            )
        });
        let files = NodeFiles {
            mode,
            config_file: self
                .kubelet_config
                .as_deref()
                .map(|c| Source::new(&config_name, c.as_bytes())),
            drop_ins: self
                .kubelet_drop_ins
                .iter()
                .map(|f| Source::new(&f.path, f.content.as_bytes()))
                .collect(),
            agent_drop_in: agent_drop_in.as_deref(),
            flags: flags.as_ref(),
        };
        let cgroup_v2 = match self.cgroup_version.as_deref() {
            Some("v2") => Some(true),
            Some("v1") => Some(false),
            _ => None,
        };
        NodeSetup::report(&files, self.runtime_cgroup_driver.as_deref(), cgroup_v2)
    }

    /// The labels its kubelet puts on the Node at registration: the inventory's, those of
    /// `--node-labels`, and the well-known ones (hostname, os, arch; linux/amd64).
    pub fn registered_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        if let Ok(args) = self.kubelet_args()
            && let Ok(flags) = KubeletFlags::parse(&args)
        {
            labels.extend(flags.node_labels());
        }
        for (k, v) in [
            ("beta.kubernetes.io/arch", "amd64"),
            ("beta.kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/hostname", self.name.as_str()),
            ("kubernetes.io/os", "linux"),
        ] {
            labels.insert(k.to_string(), v.to_string());
        }
        labels
    }
}

/// Why an inventory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The file cannot be read.
    #[error("failed to read node inventory {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The file does not decode (syntax, unknown field, wrong type), with file and line.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The file decodes but breaks the rules; one error per problem, each with its line.
    #[error("{}", Problems(.0))]
    Invalid(Vec<DecodeError>),
}

struct Problems<'a>(&'a [DecodeError]);

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl Inventory {
    /// Reads, decodes and validates the inventory file at `path`.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| InventoryError::Read {
            path: name.clone(),
            source,
        })?;
        Inventory::parse(&name, &bytes)
    }

    /// Decodes and validates the inventory `bytes`, naming `file` in errors.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Inventory, InventoryError> {
        let (inventory, map): (Inventory, SourceMap) = decode::decode_strict(file, bytes)?;
        let problems = inventory.problems(file, &map);
        if problems.is_empty() {
            Ok(inventory)
        } else {
            Err(InventoryError::Invalid(problems))
        }
    }

    /// Checks an inventory built in code (no file, no lines).
    pub fn validate(&self) -> Result<(), InventoryError> {
        let problems = self.problems("inventory", &SourceMap::new());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InventoryError::Invalid(problems))
        }
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&InventoryNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// `n` nodes spread round-robin over `pools` (label `node.kubernetes.io/pool`), in
    /// three zones (label `topology.kubernetes.io/zone`: `zone-a`, `zone-b`, `zone-c`),
    /// named `<pool>-<i>` (`node-<i>` without pools), each with 8 CPUs, 32Gi of memory,
    /// 100Gi of ephemeral storage and 110 pods, and no kubelet flags. For benchmarks and
    /// demos.
    pub fn generate(n: usize, pools: &[&str]) -> Inventory {
        let width = n.saturating_sub(1).to_string().len();
        let capacity = Capacity {
            cpu: Quantity::from_units(8, Format::DecimalSI),
            memory: Quantity::from_units(32 * 1024 * 1024 * 1024, Format::BinarySI),
            ephemeral_storage: Quantity::from_units(100 * 1024 * 1024 * 1024, Format::BinarySI),
            pods: Quantity::from_units(110, Format::DecimalSI),
        };
        let zones = ["zone-a", "zone-b", "zone-c"];
        let nodes = (0..n)
            .map(|i| {
                let mut labels = BTreeMap::new();
                labels.insert(
                    "topology.kubernetes.io/zone".to_string(),
                    zones[i % zones.len()].to_string(),
                );
                let prefix = if pools.is_empty() {
                    "node"
                } else {
                    let pool = pools[i % pools.len()];
                    labels.insert("node.kubernetes.io/pool".to_string(), pool.to_string());
                    pool
                };
                InventoryNode {
                    name: format!("{prefix}-{i:0width$}"),
                    labels,
                    capacity: capacity.clone(),
                    kubelet_flags: None,
                    kubelet_drop_ins: Vec::new(),
                    kubelet_config: None,
                    agent_mode: None,
                    runtime_cgroup_driver: None,
                    cgroup_version: None,
                }
            })
            .collect();
        Inventory { nodes }
    }

    /// Serializes the inventory as YAML (the format [`Inventory::parse`] reads).
    pub fn to_yaml(&self) -> String {
        // Serializing plain strings and maps cannot fail; fall back to JSON (valid YAML).
        serde_saphyr::to_string(self)
            .unwrap_or_else(|_| serde_json::to_string_pretty(self).unwrap_or_default())
    }

    fn problems(&self, file: &str, map: &SourceMap) -> Vec<DecodeError> {
        let mut out = Vec::new();
        let mut seen: BTreeMap<&str, String> = BTreeMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let base = join_index("nodes", i);
            let err = |path: &str, message: String| {
                DecodeError::new(file, message)
                    .at_opt(map.position(path))
                    .with_field(path.to_string())
            };

            let name_path = join_key(&base, "name");
            if let Some(msg) = names::joined(names::dns1123_subdomain_errors(&node.name)) {
                out.push(err(
                    &name_path,
                    format!("Invalid value: {:?}: {msg}", node.name),
                ));
            }
            match seen.get(node.name.as_str()) {
                Some(first) => out.push(err(
                    &name_path,
                    format!("Duplicate value: {:?} (first used at {first})", node.name),
                )),
                None => {
                    let first = match map.line_of(&name_path) {
                        Some(line) => format!("line {line}"),
                        None => base.clone(),
                    };
                    seen.insert(&node.name, first);
                }
            }

            let labels_path = join_key(&base, "labels");
            for (key, value) in &node.labels {
                let path = join_key(&labels_path, key);
                for msg in names::label_key_errors(key, Wording::Validation) {
                    out.push(err(&path, format!("Invalid value: {key:?}: {msg}")));
                }
                for msg in names::label_value_errors(value, Wording::Validation) {
                    out.push(err(&path, format!("Invalid value: {value:?}: {msg}")));
                }
            }

            let cap_path = join_key(&base, "capacity");
            for (resource, q) in node.capacity.resources() {
                let path = join_key(&cap_path, &resource);
                if q.is_negative() {
                    out.push(err(
                        &path,
                        format!(
                            "Invalid value: {:?}: must be greater than or equal to 0",
                            q.as_str()
                        ),
                    ));
                }
            }
            let pods = &node.capacity.pods;
            if pods.nanos() % 1_000_000_000 != 0 {
                out.push(err(
                    &join_key(&cap_path, "pods"),
                    format!("Invalid value: {:?}: must be a whole number", pods.as_str()),
                ));
            }

            let flags_path = join_key(&base, "kubeletFlags");
            let mut flags = None;
            match node.kubelet_args() {
                Err(e) => out.push(err(&flags_path, e.to_string())),
                Ok(args) => match KubeletFlags::parse(&args) {
                    Ok(f) => flags = Some(f),
                    Err(e) => out.push(err(
                        &flags_path,
                        format!("failed to parse kubelet flag: {e}"),
                    )),
                },
            }
            out.extend(setup_problems(node, flags.as_ref(), &base, &err));
        }
        out
    }
}

/// The problems of a node's set-up fields (see [`InventoryNode::setup`]).
fn setup_problems(
    node: &InventoryNode,
    flags: Option<&KubeletFlags>,
    base: &str,
    err: &dyn Fn(&str, String) -> DecodeError,
) -> Vec<DecodeError> {
    let mut out = Vec::new();
    let one_of = |field: &str, value: Option<&str>, allowed: &[&str]| {
        value.filter(|v| !allowed.contains(v)).map(|v| {
            err(
                &join_key(base, field),
                format!(
                    "Unsupported value: {v:?}: supported values: {}",
                    allowed
                        .iter()
                        .map(|a| format!("{a:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
    };
    out.extend(one_of(
        "runtimeCgroupDriver",
        node.runtime_cgroup_driver.as_deref(),
        &["systemd", "cgroupfs"],
    ));
    out.extend(one_of(
        "cgroupVersion",
        node.cgroup_version.as_deref(),
        &["v1", "v2"],
    ));
    let drop_ins_path = join_key(base, "kubeletDropIns");
    for (i, f) in node.kubelet_drop_ins.iter().enumerate() {
        let at = join_key(&join_index(&drop_ins_path, i), "path");
        if !f.path.starts_with('/') || !f.path.ends_with(".conf") {
            out.push(err(
                &at,
                format!(
                    "Invalid value: {:?}: a drop-in is an absolute path ending in .conf (the kubelet reads no other file)",
                    f.path
                ),
            ));
        }
        if node.kubelet_drop_ins[..i].iter().any(|g| g.path == f.path) {
            out.push(err(&at, format!("Duplicate value: {:?}", f.path)));
        }
    }
    let drop_in_mode = node.agent_mode == Some(Mode::DropIn);
    if drop_in_mode && flags.is_some_and(|f| f.config_dir().is_none()) {
        out.push(err(
            &join_key(base, "agentMode"),
            "Invalid value: \"drop-in\": the agent's drop-in goes into the kubelet's --config-dir, which kubeletFlags does not set".to_string(),
        ));
    }
    if !drop_in_mode && node.kubelet_config.is_some() {
        out.push(err(
            &join_key(base, "kubeletConfig"),
            "Forbidden: the node's own config file is read only with agentMode: drop-in (in replace mode the pool's config takes its place)".to_string(),
        ));
    }
    out
}
