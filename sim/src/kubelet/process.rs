//! A stand-in kubelet as its own process (`kubelet-gitops-sim kubelet`): the API server
//! over HTTP, SIGHUP to restart it, SIGTERM or SIGINT to end it, its state on stdout.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use kubelet_gitops_core::atomic::write_atomic;
use kubelet_gitops_core::inventory::InventoryNode;

use super::{
    HttpTarget, Kind, KubeletHandle, KubeletOptions, KubeletPaths, KubeletSpec, NodeApi,
    ReservedPort,
};

/// Options of a stand-in kubelet running as its own process.
#[derive(Debug, Clone)]
pub struct ProcessOptions {
    /// The node's root directory (laid out by `serve`, or prepared here when the node is
    /// in `inventory`).
    pub root: PathBuf,
    /// The node's name.
    pub node: String,
    /// The kubeconfig of the API server.
    pub kubeconfig: PathBuf,
    /// The node's inventory entry; without it, the node's capacity and labels are read
    /// from its Node object, which must then exist.
    pub inventory_node: Option<(usize, InventoryNode)>,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Timings and host facts.
    pub options: KubeletOptions,
}

/// Runs a stand-in kubelet as its own process, talking to the API server over HTTP,
/// until SIGINT or SIGTERM; SIGHUP restarts it. Writes its pid to `var/run/kubelet.pid`
/// under the root and reports every state change on stdout (one JSON object per line).
pub async fn run_process(opts: ProcessOptions) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tokio::signal::unix::{SignalKind, signal};

    let target = HttpTarget::from_kubeconfig(&opts.kubeconfig)?;
    let api = NodeApi::Http(target.clone());
    let (index, node) = match opts.inventory_node {
        Some(n) => n,
        None => {
            let obj = api.get(Kind::Node, &opts.node).await.map_err(|e| {
                anyhow::anyhow!(
                    "node {} is not in the API server at {} and no inventory was given: {e}",
                    opts.node,
                    target.url()
                )
            })?;
            (0, inventory_node_from_object(&obj)?)
        }
    };
    let paths = KubeletPaths::new(&opts.root);
    paths
        .prepare(&node, opts.options.cgroup_v2)
        .map_err(|e| anyhow::anyhow!("preparing {}: {e}", opts.root.display()))?;
    write_atomic(
        &paths.pid_file,
        format!("{}\n", std::process::id()).as_bytes(),
    )
    .with_context(|| format!("writing {}", paths.pid_file.display()))?;
    let handle = KubeletHandle::spawn(
        KubeletSpec {
            node,
            index,
            paths: paths.clone(),
            port: Arc::new(
                ReservedPort::reserve(opts.port)
                    .with_context(|| format!("reserving port {} on 127.0.0.1", opts.port))?,
            ),
            options: opts.options,
        },
        api,
    )?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut states = handle.subscribe();
    println!("{}", serde_json::to_string(&handle.state())?);
    loop {
        tokio::select! {
            _ = hup.recv() => {
                handle.restart().await;
            }
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            changed = states.changed() => {
                if changed.is_err() {
                    break;
                }
                let s = states.borrow_and_update().clone();
                println!("{}", serde_json::to_string(&s)?);
            }
        }
    }
    handle.shutdown().await;
    let _ = std::fs::remove_file(&paths.pid_file);
    Ok(())
}

/// An inventory entry rebuilt from a Node object (name, labels without the well-known
/// ones, capacity).
fn inventory_node_from_object(obj: &Value) -> anyhow::Result<InventoryNode> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("node object has no name"))?;
    let labels: BTreeMap<String, String> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !k.starts_with("kubernetes.io/") && !k.starts_with("beta.kubernetes.io/")
                })
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let cap = |r: &str| -> anyhow::Result<kubelet_gitops_core::quantity::Quantity> {
        let text = obj
            .pointer(&format!("/status/capacity/{r}"))
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("node {name} has no status.capacity.{r}"))?;
        text.parse()
            .map_err(|e| anyhow::anyhow!("node {name}: status.capacity.{r} {text:?}: {e}"))
    };
    let capacity = kubelet_gitops_core::inventory::Capacity {
        cpu: cap("cpu")?,
        memory: cap("memory")?,
        ephemeral_storage: cap("ephemeral-storage")?,
        pods: cap("pods")?,
    };
    Ok(InventoryNode {
        name: name.to_string(),
        labels,
        capacity,
        kubelet_flags: None,
        kubelet_drop_ins: Vec::new(),
        kubelet_config: None,
        agent_mode: None,
        runtime_cgroup_driver: None,
        cgroup_version: None,
    })
}
