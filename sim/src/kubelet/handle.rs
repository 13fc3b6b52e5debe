//! The handle on a stand-in kubelet: its state as a watch channel, and commands to its
//! [`Supervisor`](super::supervisor), which owns everything it runs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kubelet_gitops_core::inventory::InventoryNode;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};

use super::supervisor::Supervisor;
use super::{KubeletOptions, KubeletPaths, NodeApi, ReservedPort, node, runtime};

/// Where a stand-in kubelet is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KubeletPhase {
    /// Reading its configuration; the port is closed.
    Starting,
    /// Serving `/healthz` and `/configz`, posting status, renewing its Lease.
    Running,
    /// Failed to start; the port is closed and the reason is recorded.
    Exited,
    /// Stopped on request (`systemctl stop`); the port is closed.
    Stopped,
}

/// A stand-in kubelet's state, as [`KubeletHandle::state`] and the control endpoint give it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletState {
    /// The node.
    pub node: String,
    /// Where it is.
    pub phase: KubeletPhase,
    /// Why it exited, in the kubelet's own words, while `Exited` (and after a stop that
    /// followed an exit).
    pub reason: Option<String>,
    /// Its port on 127.0.0.1 (`/healthz`, `/configz`).
    pub port: u16,
    /// The node's root directory.
    pub root: PathBuf,
    /// How many times it has started (successfully or not).
    pub starts: u64,
    /// When it entered the current phase (RFC 3339).
    pub since: String,
    /// Node allocatable while running (resource to quantity).
    pub allocatable: Option<BTreeMap<String, String>>,
}

pub(super) enum Command {
    Restart(oneshot::Sender<KubeletState>),
    Stop(oneshot::Sender<KubeletState>),
    Shutdown(oneshot::Sender<()>),
}

/// What one stand-in kubelet needs.
#[derive(Debug, Clone)]
pub struct KubeletSpec {
    /// The node, from the inventory.
    pub node: InventoryNode,
    /// Its number in the inventory (for its InternalIP).
    pub index: usize,
    /// Its files.
    pub paths: KubeletPaths,
    /// Its port on 127.0.0.1, reserved for the node's life (kept across restarts).
    pub port: Arc<ReservedPort>,
    /// Timings and host facts.
    pub options: KubeletOptions,
}

/// A running stand-in kubelet. Cheap to clone; the kubelet stops when
/// [`KubeletHandle::shutdown`] is called or the last handle is dropped.
#[derive(Clone)]
pub struct KubeletHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    name: String,
    port: u16,
    paths: KubeletPaths,
    state: watch::Receiver<KubeletState>,
    commands: mpsc::Sender<Command>,
}

impl std::fmt::Debug for KubeletHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeletHandle")
            .field("node", &self.inner.name)
            .field("port", &self.inner.port)
            .finish()
    }
}

impl KubeletHandle {
    /// Starts the stand-in kubelet for `spec`, talking to the API server through `api`,
    /// and the node's container runtime socket ([`runtime::RuntimeSocket`], listening
    /// until the stand-in ends). Returns at once; see [`KubeletHandle::settled`] to wait
    /// for the first start. Must be called within a tokio runtime.
    pub fn spawn(spec: KubeletSpec, api: NodeApi) -> std::io::Result<KubeletHandle> {
        let port = spec.port.port();
        let runtime = runtime::RuntimeSocket::listen(&spec.paths.containerd_socket)?;
        let initial = KubeletState {
            node: spec.node.name.clone(),
            phase: KubeletPhase::Starting,
            reason: None,
            port,
            root: spec.paths.root.clone(),
            starts: 0,
            since: node::now(),
            allocatable: None,
        };
        let (state_tx, state_rx) = watch::channel(initial);
        let (cmd_tx, cmd_rx) = mpsc::channel(16);
        let handle = KubeletHandle {
            inner: Arc::new(HandleInner {
                name: spec.node.name.clone(),
                port,
                paths: spec.paths.clone(),
                state: state_rx,
                commands: cmd_tx,
            }),
        };
        let sup = Supervisor::new(spec, api, state_tx, runtime);
        tokio::spawn(sup.run(cmd_rx));
        Ok(handle)
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The kubelet's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.inner.port)
    }

    /// The node's files.
    pub fn paths(&self) -> &KubeletPaths {
        &self.inner.paths
    }

    /// Every change of state from now on.
    pub(super) fn subscribe(&self) -> watch::Receiver<KubeletState> {
        self.inner.state.clone()
    }

    /// The current state.
    pub fn state(&self) -> KubeletState {
        self.inner.state.borrow().clone()
    }

    /// Whether it is running (serving, posting Ready).
    pub fn is_running(&self) -> bool {
        self.inner.state.borrow().phase == KubeletPhase::Running
    }

    /// Why it exited, while it is down after a failed start.
    pub fn exit_reason(&self) -> Option<String> {
        self.inner.state.borrow().reason.clone()
    }

    /// Waits until `pred` holds for the state, at most `timeout`; the last state either way.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&KubeletState) -> bool,
    ) -> Result<KubeletState, KubeletState> {
        let mut rx = self.inner.state.clone();
        let result = tokio::time::timeout(timeout, rx.wait_for(|s| pred(s))).await;
        match result {
            Ok(Ok(state)) => Ok(state.clone()),
            _ => Err(self.state()),
        }
    }

    /// Waits until it is past `Starting` (running, exited or stopped).
    pub async fn settled(&self, timeout: Duration) -> Result<KubeletState, KubeletState> {
        self.wait_for(timeout, |s| {
            s.phase != KubeletPhase::Starting && s.starts > 0
        })
        .await
    }

    /// Restarts it (`systemctl restart kubelet`): closes its port, waits the start delay,
    /// re-reads its flags, config file and drop-ins, and starts again. Resolves once the
    /// new start has an outcome (running or exited).
    pub async fn restart(&self) -> KubeletState {
        let (tx, rx) = oneshot::channel();
        if self
            .inner
            .commands
            .send(Command::Restart(tx))
            .await
            .is_err()
        {
            return self.state();
        }
        rx.await.unwrap_or_else(|_| self.state())
    }

    /// Stops it (`systemctl stop kubelet`) until the next restart.
    pub async fn stop(&self) -> KubeletState {
        let (tx, rx) = oneshot::channel();
        if self.inner.commands.send(Command::Stop(tx)).await.is_err() {
            return self.state();
        }
        rx.await.unwrap_or_else(|_| self.state())
    }

    /// Ends the stand-in: closes its port and stops its task.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self
            .inner
            .commands
            .send(Command::Shutdown(tx))
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
    }
}
