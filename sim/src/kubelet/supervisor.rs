//! What a stand-in kubelet does, as one task per node: start (the checks in `startup`),
//! serve and post status and Lease while running, and while down post NotReady after
//! the delay and start again as systemd's `Restart=always` does. The handle's commands
//! (restart, stop, shutdown) are taken while it runs and while it is down.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::handle::{Command, KubeletPhase, KubeletSpec, KubeletState};
use super::{
    Kind, NodeApi, NodeStatus, Readiness, conditions, lease_object, node, node_object_with,
    ready_status, runtime, serve, startup,
};

/// Appends klog-style lines to `kubelet.log`.
struct KubeletLog {
    path: PathBuf,
}

impl KubeletLog {
    fn line(&self, level: char, source: &str, message: &str) {
        let line = format!(
            "{level}{} {:>7} {source}] {message}\n",
            node::klog_time(SystemTime::now()),
            std::process::id()
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Go's `%q` for a log value.
fn q(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

enum Next {
    Start,
    Shutdown(Option<oneshot::Sender<()>>),
}

pub(super) struct Supervisor {
    spec: KubeletSpec,
    name: String,
    port: u16,
    api: NodeApi,
    state: watch::Sender<KubeletState>,
    log: KubeletLog,
    lease: Option<Value>,
    node_uid: Option<String>,
    /// When the kubelet stopped posting status; `None` while it runs.
    down_since: Option<Instant>,
    not_ready_posted: bool,
    /// The Ready status this kubelet last posted or saw.
    last_ready: Option<bool>,
    /// The node's container runtime socket: listens while the supervisor lives.
    _runtime: runtime::RuntimeSocket,
}

struct Server {
    task: JoinHandle<()>,
}

impl Server {
    /// Aborts the serving task and waits until its listener and connections are dropped.
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

impl Supervisor {
    /// The supervisor of a stand-in that has not started yet (down since now).
    pub(super) fn new(
        spec: KubeletSpec,
        api: NodeApi,
        state: watch::Sender<KubeletState>,
        runtime: runtime::RuntimeSocket,
    ) -> Supervisor {
        Supervisor {
            log: KubeletLog {
                path: spec.paths.log.clone(),
            },
            name: spec.node.name.clone(),
            port: spec.port.port(),
            spec,
            api,
            state,
            lease: None,
            node_uid: None,
            down_since: Some(Instant::now()),
            not_ready_posted: false,
            last_ready: None,
            _runtime: runtime,
        }
    }

    fn set_state(
        &self,
        phase: KubeletPhase,
        reason: Option<String>,
        allocatable: Option<BTreeMap<String, String>>,
        started: bool,
    ) {
        self.state.send_modify(|s| {
            s.phase = phase;
            s.reason = reason;
            s.since = node::now();
            s.allocatable = allocatable;
            if started {
                s.starts += 1;
            }
        });
    }

    pub(super) async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        let mut waiters: Vec<oneshot::Sender<KubeletState>> = Vec::new();
        loop {
            if self.state.borrow().phase != KubeletPhase::Starting {
                self.set_state(KubeletPhase::Starting, None, None, false);
            }
            let input = startup::StartInput {
                node: &self.spec.node,
                index: self.spec.index,
                port: self.port,
                cgroup_v2: self.spec.options.cgroup_v2,
                paths: &self.spec.paths,
            };
            let outcome = startup::start(&input);
            let next = match outcome {
                Ok(started) => match self.spec.port.listen() {
                    Ok(listener) => {
                        self.running(started, listener, &mut commands, &mut waiters)
                            .await
                    }
                    Err(e) => {
                        let failure = startup::Failure {
                            error: format!("listen tcp 127.0.0.1:{}: bind: {e}", self.port),
                            klog_message: "Failed to listen and serve",
                            klog_source: "server.go:183",
                        };
                        self.exited(failure, &mut commands, &mut waiters).await
                    }
                },
                Err(failure) => self.exited(failure, &mut commands, &mut waiters).await,
            };
            match next {
                Next::Start => {
                    tokio::time::sleep(self.spec.options.start_delay).await;
                }
                Next::Shutdown(reply) => {
                    self.set_state(KubeletPhase::Stopped, None, None, false);
                    for w in waiters.drain(..) {
                        let _ = w.send(self.state.borrow().clone());
                    }
                    if let Some(reply) = reply {
                        let _ = reply.send(());
                    }
                    return;
                }
            }
        }
    }

    fn reply_all(&self, waiters: &mut Vec<oneshot::Sender<KubeletState>>) {
        let state = self.state.borrow().clone();
        for w in waiters.drain(..) {
            let _ = w.send(state.clone());
        }
    }

    async fn running(
        &mut self,
        started: startup::Started,
        listener: TcpListener,
        commands: &mut mpsc::Receiver<Command>,
        waiters: &mut Vec<oneshot::Sender<KubeletState>>,
    ) -> Next {
        let endpoints = Arc::new(serve::Endpoints {
            configz: started.configz.clone(),
        });
        let server = Server {
            task: tokio::spawn(serve::serve(listener, endpoints)),
        };
        for (source, line) in &started.log {
            self.log.line('I', source, line);
        }
        self.log.line(
            'I',
            "server.go:1445",
            &format!(
                "\"Starting to listen\" address=\"127.0.0.1\" port={}",
                self.port
            ),
        );
        self.log.line('I', "kubelet.go:2490", "\"Started kubelet\"");
        let allocatable: BTreeMap<String, String> = started
            .status
            .allocatable
            .iter()
            .map(|(k, v)| (k.clone(), v.canonical()))
            .collect();
        self.set_state(KubeletPhase::Running, None, Some(allocatable), true);
        self.reply_all(waiters);
        tracing::info!(node = %self.name, port = self.port, "stand-in kubelet running");

        self.down_since = None;
        self.not_ready_posted = false;
        self.event("Normal", "Starting", "Starting kubelet.").await;
        if started
            .config
            .enforce_node_allocatable
            .as_ref()
            .is_some_and(|e| e.iter().any(|k| k == "pods"))
        {
            self.event(
                "Normal",
                "NodeAllocatableEnforced",
                "Updated Node Allocatable limit across pods",
            )
            .await;
        }

        // As the kubelet: register (or update) the Node first, then take the Lease, which
        // names the Node as its owner.
        self.post_status(&Readiness::Ready, Some(&started.status))
            .await;
        self.renew_lease().await;
        let lease_every = self.spec.options.lease_renew_interval;
        let status_every = started.status_report_frequency;
        let now = tokio::time::Instant::now();
        let mut lease_tick = tokio::time::interval_at(now + lease_every, lease_every);
        let mut status_tick = tokio::time::interval_at(now + status_every, status_every);
        lease_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        status_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                cmd = commands.recv() => {
                    server.stop().await;
                    self.down_since = Some(Instant::now());
                    self.log.line('I', "kubelet.go:2617", "\"Shutting down kubelet\"");
                    return match cmd {
                        Some(Command::Restart(reply)) => {
                            waiters.push(reply);
                            Next::Start
                        }
                        Some(Command::Stop(reply)) => {
                            self.set_state(KubeletPhase::Stopped, None, None, false);
                            let _ = reply.send(self.state.borrow().clone());
                            self.down(commands, waiters, None).await
                        }
                        Some(Command::Shutdown(reply)) => Next::Shutdown(Some(reply)),
                        None => Next::Shutdown(None),
                    };
                }
                _ = status_tick.tick() => {
                    self.post_status(&Readiness::Ready, Some(&started.status)).await;
                }
                _ = lease_tick.tick() => {
                    self.renew_lease().await;
                }
            }
        }
    }

    async fn exited(
        &mut self,
        failure: startup::Failure,
        commands: &mut mpsc::Receiver<Command>,
        waiters: &mut Vec<oneshot::Sender<KubeletState>>,
    ) -> Next {
        let reason = failure.reason();
        self.log.line(
            'E',
            failure.klog_source,
            &format!("{} err={}", q(failure.klog_message), q(&failure.error)),
        );
        tracing::warn!(node = %self.name, %reason, "stand-in kubelet exited");
        if self.down_since.is_none() {
            self.down_since = Some(Instant::now());
        }
        self.set_state(KubeletPhase::Exited, Some(reason.clone()), None, true);
        self.reply_all(waiters);
        if reason.contains("Cgroup Limits on") {
            self.event(
                "Warning",
                "FailedNodeAllocatableEnforcement",
                &failure.error,
            )
            .await;
        }
        let restart_at = self
            .spec
            .options
            .restart_after_exit
            .map(|d| tokio::time::Instant::now() + d);
        self.down(commands, waiters, restart_at).await
    }

    /// Down (exited or stopped): waits for a command, posts NotReady when the delay has
    /// passed, restarts at `restart_at` (systemd's `Restart=always`).
    async fn down(
        &mut self,
        commands: &mut mpsc::Receiver<Command>,
        waiters: &mut Vec<oneshot::Sender<KubeletState>>,
        mut restart_at: Option<tokio::time::Instant>,
    ) -> Next {
        let since = self.down_since.unwrap_or_else(Instant::now);
        let not_ready_at =
            tokio::time::Instant::from_std(since + self.spec.options.not_ready_delay);
        loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Restart(reply)) => {
                        waiters.push(reply);
                        return Next::Start;
                    }
                    Some(Command::Stop(reply)) => {
                        let reason = self.state.borrow().reason.clone();
                        self.set_state(KubeletPhase::Stopped, reason, None, false);
                        let _ = reply.send(self.state.borrow().clone());
                        restart_at = None;
                    }
                    Some(Command::Shutdown(reply)) => return Next::Shutdown(Some(reply)),
                    None => return Next::Shutdown(None),
                },
                _ = tokio::time::sleep_until(not_ready_at), if !self.not_ready_posted => {
                    self.not_ready_posted = true;
                    let message = match self.state.borrow().reason.clone() {
                        Some(reason) => format!("kubelet is not running: {reason}"),
                        None => "kubelet is not running".to_string(),
                    };
                    self.post_status(&Readiness::NotReady(message), None).await;
                }
                _ = sleep_until_opt(restart_at), if restart_at.is_some() => {
                    self.log.line('I', "systemd", "\"kubelet.service: Scheduled restart job\"");
                    return Next::Start;
                }
            }
        }
    }

    /// Posts an Event from the kubelet (`Starting`, `NodeAllocatableEnforced` ...) or,
    /// for `RegisteredNode` and `NodeNotReady`, from the node controller.
    async fn event(&self, kind: &str, reason: &str, message: &str) {
        if !self.spec.options.events {
            return;
        }
        let component = match reason {
            "RegisteredNode" | "NodeNotReady" => "node-controller",
            _ => "kubelet",
        };
        let ev = node::event_object(&self.name, component, kind, reason, message);
        if let Err(e) = self.api.create(Kind::Event, ev).await {
            tracing::debug!(node = %self.name, error = %e, "event not posted");
        }
    }

    /// Reads the Node, updates its conditions (and, while running, its status), and
    /// patches the status subresource. Registers the Node if it does not exist and the
    /// kubelet is running, as the kubelet does.
    async fn post_status(&mut self, readiness: &Readiness, status: Option<&NodeStatus>) {
        let now = node::now();
        let current = match self.api.get(Kind::Node, &self.name).await {
            Ok(n) => n,
            Err(e) if e.code == 404 => {
                if let Some(status) = status {
                    let obj = node_object_with(&self.spec.node, status, &now);
                    match self.api.create(Kind::Node, obj).await {
                        Ok(created) => {
                            self.node_uid = created
                                .pointer("/metadata/uid")
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            self.last_ready = Some(true);
                            tracing::info!(node = %self.name, "node registered");
                            self.event(
                                "Normal",
                                "RegisteredNode",
                                &format!(
                                    "Node {} event: Registered Node {} in Controller",
                                    self.name, self.name
                                ),
                            )
                            .await;
                        }
                        Err(e) => {
                            tracing::warn!(node = %self.name, error = %e, "node registration failed")
                        }
                    }
                }
                return;
            }
            Err(e) => {
                tracing::warn!(node = %self.name, error = %e, "cannot read node");
                return;
            }
        };
        self.node_uid = current
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        let was_ready = ready_status(&current) == Some("True");
        let conds = conditions(current.pointer("/status/conditions"), readiness, &now);
        let mut st = match status {
            Some(s) => s.to_json(&self.name),
            None => json!({}),
        };
        if let Value::Object(m) = &mut st {
            m.insert("conditions".into(), Value::Array(conds));
        }
        let patch = json!({ "status": st });
        match self.api.patch_node_status(&self.name, &patch).await {
            Ok(_) => {
                let ready = *readiness == Readiness::Ready;
                if ready != was_ready || self.last_ready != Some(ready) {
                    let (kind, what) = if ready {
                        ("Normal", "NodeReady")
                    } else {
                        ("Normal", "NodeNotReady")
                    };
                    if ready != was_ready {
                        self.event(
                            kind,
                            what,
                            &format!("Node {} status is now: {what}", self.name),
                        )
                        .await;
                    }
                }
                self.last_ready = Some(ready);
            }
            Err(e) => tracing::warn!(node = %self.name, error = %e, "node status not posted"),
        }
    }

    async fn renew_lease(&mut self) {
        let now = node::now_micro();
        if let Some(mut lease) = self.lease.take() {
            lease["spec"]["renewTime"] = Value::String(now.clone());
            match self.api.update(Kind::Lease, &self.name, lease).await {
                Ok(updated) => {
                    self.lease = Some(updated);
                    return;
                }
                Err(e) => {
                    tracing::debug!(node = %self.name, error = %e, "lease update failed; re-reading")
                }
            }
        }
        match self.api.get(Kind::Lease, &self.name).await {
            Ok(mut lease) => {
                lease["spec"]["renewTime"] = Value::String(now);
                lease["spec"]["holderIdentity"] = Value::String(self.name.clone());
                match self.api.update(Kind::Lease, &self.name, lease).await {
                    Ok(updated) => self.lease = Some(updated),
                    Err(e) => tracing::warn!(node = %self.name, error = %e, "lease not renewed"),
                }
            }
            Err(e) if e.code == 404 => {
                let lease = lease_object(
                    &self.name,
                    self.node_uid.as_deref(),
                    self.spec.options.lease_duration_seconds,
                    &now,
                );
                match self.api.create(Kind::Lease, lease).await {
                    Ok(created) => self.lease = Some(created),
                    Err(e) => tracing::warn!(node = %self.name, error = %e, "lease not created"),
                }
            }
            Err(e) => tracing::warn!(node = %self.name, error = %e, "cannot read lease"),
        }
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
