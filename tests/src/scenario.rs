//! [`E2e`]: a running scenario. It starts the processes (the repository's remote, the
//! sim, an agent per node, the reconciler), drives them (pushes, kills, restarts, a node
//! joining), waits for conditions, and on failure prints every log's tail.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use kubelet_gitops_sim::kubelet::{HttpTarget, KubeletPaths};
use serde_json::Value;

use crate::cluster::{
    Cluster, Converged, KubeletInfo, applied_targets, client, current_pools, get_metrics,
    read_config,
};
use crate::process::{self, Binaries, Proc, shell_quote};
use crate::real::{self, NodeSetup, RealCluster, UpstreamBinaries};
use crate::{
    Backend, CANARY_LABEL, ConfigFileWatch, E2eError, GitRemote, KEEP_ENV, NAMESPACE, NodeSpec,
    NodeView, Options, PATIENCE, POOL_LABEL, Pool, Recorder, TAIL_LINES, env_flag, repo, required,
    summary,
};

/// The cluster's own processes.
enum ClusterProcs {
    /// `kubelet-gitops-sim serve`.
    Sim(Box<Proc>),
    /// The real control plane and kubelets.
    Real(Box<RealCluster>),
}

/// The processes of a scenario.
struct Procs {
    cluster: ClusterProcs,
    git: GitRemote,
    reconciler: Proc,
    agents: BTreeMap<String, Proc>,
    kubelets: BTreeMap<String, Proc>,
}

impl Procs {
    /// An error naming the first process that exited on its own.
    fn check(&mut self) -> Result<(), E2eError> {
        match &mut self.cluster {
            ClusterProcs::Sim(sim) => sim.check_running()?,
            ClusterProcs::Real(real) => real.check()?,
        }
        self.git.daemon().check_running()?;
        self.reconciler.check_running()?;
        for p in self.agents.values_mut().chain(self.kubelets.values_mut()) {
            p.check_running()?;
        }
        Ok(())
    }

    /// SIGKILLs every process and reaps it.
    async fn kill_all(&mut self) -> Result<(), E2eError> {
        self.reconciler.kill().await?;
        for p in self.agents.values_mut().chain(self.kubelets.values_mut()) {
            p.kill().await?;
        }
        match &mut self.cluster {
            ClusterProcs::Sim(sim) => sim.kill().await?,
            ClusterProcs::Real(real) => real.stop().await?,
        }
        self.git.daemon().kill().await
    }
}

/// A running scenario: the processes, the cluster, the repository.
pub struct E2e {
    // Fields drop in order: the processes before the directory they work in.
    procs: Procs,
    cluster: Cluster,
    scenario: String,
    started: Instant,
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    bins: Binaries,
    options: Options,
    reconciler_port: u16,
    finished: bool,
}

impl std::ops::Deref for E2e {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

fn words(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn go_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl E2e {
    /// Starts everything for `scenario`: the repository (its first commit pushed), the
    /// sim, an agent per node, and the reconciler. `Ok(None)` when the binaries are not
    /// built (the reason is printed).
    pub async fn start(scenario: &str, options: Options) -> Result<Option<E2e>, E2eError> {
        let scenario = format!("{scenario} ({})", options.backend.name());
        let located = Binaries::locate().and_then(|b| match options.backend {
            Backend::Sim => Ok((b, None)),
            Backend::Real => UpstreamBinaries::locate().map(|u| (b, Some(u))),
        });
        let (bins, upstream) = match located {
            Ok(b) => b,
            Err(e) if !required() => {
                eprintln!("e2e {scenario}: SKIPPED: {e}");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix(&format!(
                // Short: a real kubelet's sockets live under it, and a unix socket's path
                // holds at most 107 bytes.
                "kge2e-{}-",
                scenario.replace(" (", "-").replace(')', "")
            ))
            .tempdir()
            .map_err(E2eError::io("creating the scenario directory"))?;
        let path = dir.path().to_path_buf();
        let (cluster, procs, reconciler_port) = match launch(&path, &bins, upstream, &options).await
        {
            Ok(launched) => launched,
            Err(e) => {
                // The processes started so far are killed as they drop; keep their logs.
                let kept = dir.keep();
                eprintln!(
                    "\n===== e2e {scenario} could not start after {:.1?}: {e}; everything is in {} =====",
                    started.elapsed(),
                    kept.display()
                );
                print_log_tails(&kept.join("logs"));
                return Err(e);
            }
        };
        let mut e2e = E2e {
            scenario,
            started,
            dir: Some(dir),
            path,
            bins,
            options,
            cluster,
            procs,
            reconciler_port,
            finished: false,
        };
        let names: Vec<String> = e2e.cluster.kubelets.keys().cloned().collect();
        for name in &names {
            e2e.spawn_agent(name)?;
        }
        e2e.wait_agents_reporting(&names).await?;
        e2e.wait_reconciler_serving().await?;
        Ok(Some(e2e))
    }

    /// Starts `kubelet-gitops status ARGS` as an operator runs it, with the cluster's
    /// kubeconfig (the real API server's admin, the sim's) and the reconciler's
    /// namespace; stdout and stderr piped, killed when dropped.
    pub fn spawn_status(&self, args: &[&str]) -> Result<tokio::process::Child, E2eError> {
        tokio::process::Command::new(&self.bins.reconciler)
            .arg("status")
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.cluster.kubeconfig)
            .args(["-n", crate::NAMESPACE])
            .current_dir(&self.path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| E2eError::Spawn {
                program: self.bins.reconciler.display().to_string(),
                source: e,
            })
    }

    /// Waits (at most `limit`) for a [`E2e::spawn_status`] to exit; its exit code, stdout
    /// and stderr.
    pub async fn status_exit(
        child: tokio::process::Child,
        limit: Duration,
    ) -> Result<(Option<i32>, String, String), E2eError> {
        let out = tokio::time::timeout(limit, child.wait_with_output())
            .await
            .map_err(|_| E2eError::Unexpected {
                what: "kubelet-gitops status".into(),
                message: format!("still running after {limit:?}"),
            })?
            .map_err(E2eError::io("waiting for kubelet-gitops status"))?;
        Ok((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// The scenario's directory (logs, node roots, checkpoints, repositories).
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// The options the scenario started with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The config repository.
    pub fn git(&self) -> &GitRemote {
        &self.procs.git
    }

    /// The names of the inventory nodes in `pool`, by name.
    pub fn pool_nodes(&self, pool: &str) -> Vec<String> {
        self.options
            .nodes
            .iter()
            .filter(|n| n.pool.as_deref() == Some(pool))
            .map(|n| n.name.clone())
            .collect()
    }

    /// Writes `pool`'s file in the work tree.
    pub fn write_pool(&self, pool: &Pool) -> Result<(), E2eError> {
        self.procs.git.write(&pool.path(), &pool.yaml())
    }

    /// The pool of the first commit named `name`.
    pub fn pool(&self, name: &str) -> Result<Pool, E2eError> {
        self.options
            .pools
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .ok_or_else(|| E2eError::Unexpected {
                what: format!("pool {name}"),
                message: "not in the scenario's first commit".into(),
            })
    }

    /// Waits until `check` returns something for the Nodes (as the node watch last saw
    /// them), failing at once if a process exits.
    pub async fn wait_nodes<T>(
        &mut self,
        what: &str,
        mut check: impl FnMut(&BTreeMap<String, NodeView>) -> Option<T>,
    ) -> Result<T, E2eError> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            self.procs.check()?;
            match self
                .cluster
                .recorder
                .wait_for(what, Duration::from_secs(1), &mut check)
                .await
            {
                Err(E2eError::Timeout { state, .. }) if Instant::now() >= deadline => {
                    return Err(E2eError::Timeout {
                        what: what.to_string(),
                        waited: PATIENCE,
                        state,
                    });
                }
                Err(E2eError::Timeout { .. }) => {}
                other => return other,
            }
        }
    }

    /// Polls `check` every 100 ms until it returns something, failing at once if a
    /// process exits.
    pub async fn poll<T>(
        &mut self,
        what: &str,
        mut check: impl AsyncFnMut(&Cluster) -> Result<Option<T>, E2eError>,
    ) -> Result<T, E2eError> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            self.procs.check()?;
            let last = match check(&self.cluster).await {
                Ok(Some(t)) => return Ok(t),
                Ok(None) => None,
                Err(e) => Some(e.to_string()),
            };
            if Instant::now() >= deadline {
                let nodes = summary(self.cluster.recorder.latest().values());
                return Err(E2eError::Timeout {
                    what: what.to_string(),
                    waited: PATIENCE,
                    state: match last {
                        Some(e) => format!("last error: {e}\n{nodes}"),
                        None => nodes,
                    },
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the reconciler has published the work tree's HEAD; returns each
    /// pool's target, `<namespace>/<configmap>`.
    pub async fn wait_applied(&mut self) -> Result<BTreeMap<String, String>, E2eError> {
        let head = self.procs.git.head().await?;
        self.poll(&format!("the reconciler applying {head}"), async |c| {
            Ok(applied_targets(&c.readyz().await?, &head))
        })
        .await
    }

    /// Waits until the reconciler has applied the work tree's HEAD and every pool is
    /// `Complete` in its `/readyz`, and until every node of each pool is Done on the
    /// pool's ConfigMap.
    pub async fn wait_converged(&mut self) -> Result<Converged, E2eError> {
        let head = self.procs.git.head().await?;
        let what = format!("every pool rolled out at {head}");
        let targets = self
            .poll(&what, async |c| {
                let r = c.readyz().await?;
                let Some(targets) = applied_targets(&r, &head) else {
                    return Ok(None);
                };
                let pools = current_pools(&r, &targets);
                let complete =
                    pools.len() == targets.len() && pools.iter().all(|p| p["phase"] == "Complete");
                Ok(complete.then_some(targets))
            })
            .await?;
        self.wait_nodes(&format!("{what}: every node Done"), |nodes| {
            nodes
                .values()
                .all(|n| match n.pool().and_then(|p| targets.get(p)) {
                    Some(t) => n.done_on(t),
                    None => true,
                })
                .then_some(())
        })
        .await?;
        Ok(Converged {
            commit: head,
            targets,
        })
    }

    /// Waits until `pool` has `phase` in the reconciler's `/readyz` for the work tree's
    /// HEAD; returns the pool's entry.
    pub async fn wait_pool_phase(&mut self, pool: &str, phase: &str) -> Result<Value, E2eError> {
        let head = self.procs.git.head().await?;
        self.poll(&format!("pool {pool} {phase} at {head}"), async |c| {
            let r = c.readyz().await?;
            let Some(targets) = applied_targets(&r, &head) else {
                return Ok(None);
            };
            Ok(current_pools(&r, &targets)
                .into_iter()
                .find(|p| p["pool"] == pool && p["phase"] == phase))
        })
        .await
    }

    /// Waits until the reconciler has finished `n` more rounds of its loop: reconciles
    /// (`kubelet_gitops_reconciles_total{result="ok"}`) or polls that found nothing to do
    /// (`{result="idle"}`: nothing unsettled, so nothing to plan). Everything it saw
    /// before this call has been planned and acted on.
    pub async fn wait_reconciles(&mut self, n: u32) -> Result<(), E2eError> {
        const OK: &str = "kubelet_gitops_reconciles_total{result=\"ok\"}";
        const IDLE: &str = "kubelet_gitops_reconciles_total{result=\"idle\"}";
        let rounds = async |c: &Cluster| -> Result<f64, E2eError> {
            Ok(c.metric(OK).await?.unwrap_or(0.0) + c.metric(IDLE).await?.unwrap_or(0.0))
        };
        let start = rounds(&self.cluster).await?;
        self.poll(&format!("{n} more rounds of the reconciler"), async |c| {
            let now = rounds(c).await?;
            Ok((now >= start + f64::from(n)).then_some(()))
        })
        .await
    }

    /// SIGKILLs the reconciler.
    pub async fn kill_reconciler(&mut self) -> Result<(), E2eError> {
        self.procs.reconciler.kill().await
    }

    /// Starts the reconciler again, with the same options and cache directory.
    pub async fn restart_reconciler(&mut self) -> Result<(), E2eError> {
        self.procs.reconciler.start()?;
        self.wait_reconciler_serving().await
    }

    /// SIGKILLs `node`'s agent (the restart command it ran, if any, keeps running, as a
    /// systemd job would).
    pub async fn kill_agent(&mut self, node: &str) -> Result<(), E2eError> {
        match self.procs.agents.get_mut(node) {
            Some(a) => a.kill().await,
            None => Err(E2eError::Unexpected {
                what: format!("killing the agent of {node}"),
                message: "no such agent".into(),
            }),
        }
    }

    /// Starts `node`'s agent again.
    pub fn restart_agent(&mut self, node: &str) -> Result<(), E2eError> {
        match self.procs.agents.get_mut(node) {
            Some(a) => a.start(),
            None => Err(E2eError::Unexpected {
                what: format!("starting the agent of {node}"),
                message: "no such agent".into(),
            }),
        }
    }

    /// A node joins: a stand-in kubelet as its own process registers Node `name` with the
    /// pool label `pool` (as a new machine's kubelet does), and its agent starts once the
    /// Node is there.
    pub async fn add_node(&mut self, name: &str, pool: &str) -> Result<(), E2eError> {
        let spec = NodeSpec::new(name, pool);
        let info = match &mut self.procs.cluster {
            ClusterProcs::Real(real) => {
                real.add_node(&node_setup(&spec, real.dir())).await?;
                real.wait_ready(&[name.to_string()]).await?;
                real_kubelet_info(real, name, &self.path, &self.options).await?
            }
            ClusterProcs::Sim(_) => self.add_sim_node(&spec).await?,
        };
        self.cluster.kubelets.insert(name.to_string(), info);
        self.spawn_agent(name)?;
        Ok(())
    }

    /// A stand-in kubelet process for `spec` (the sim cannot add one to `serve`).
    async fn add_sim_node(&mut self, spec: &NodeSpec) -> Result<KubeletInfo, E2eError> {
        let name = spec.name.as_str();
        let inventory = self.path.join(format!("inventory-{name}.yaml"));
        std::fs::write(&inventory, format!("nodes:\n{}", spec.inventory_entry()))
            .map_err(E2eError::io("writing the joining node's inventory"))?;
        let root = self.path.join("joined").join(name);
        let port = process::free_port()?;
        let kubelet = Proc::spawn(
            format!("kubelet-{name}"),
            &self.bins.sim,
            words(&[
                "kubelet",
                "--root",
                &root.display().to_string(),
                "--node",
                name,
                "--kubeconfig",
                &self.cluster.kubeconfig.display().to_string(),
                "--nodes",
                &inventory.display().to_string(),
                "--port",
                &port.to_string(),
                "--kubelet-start-delay",
                &go_duration(self.options.kubelet_start_delay),
                "--not-ready-delay",
                "1s",
                "--lease-renew-interval",
                "1s",
                "--restart-after-exit",
                "2s",
            ]),
            self.path.join("logs").join(format!("kubelet-{name}.log")),
        )?;
        let pid = kubelet.pid().ok_or_else(|| E2eError::Unexpected {
            what: format!("the kubelet process of {name}"),
            message: "exited at once".into(),
        })?;
        self.procs.kubelets.insert(name.to_string(), kubelet);
        // Its own process: systemctl restart is a SIGHUP here.
        let restart = restart_command(
            self.options.restart_delay,
            self.options.restart_detached,
            &["kill", "-HUP", &pid.to_string()],
        );
        self.wait_nodes(&format!("node {name} registered and Ready"), |nodes| {
            nodes
                .get(name)
                .filter(|n| n.ready.as_deref() == Some("True"))
                .map(|_| ())
        })
        .await?;
        sim_kubelet_info(
            format!("http://127.0.0.1:{port}"),
            root,
            restart,
            self.cluster.kubeconfig.clone(),
        )
    }

    /// Starts watching every kubelet config file (see [`ConfigFileWatch`]).
    pub fn watch_config_files(&self) -> ConfigFileWatch {
        ConfigFileWatch::start(
            self.cluster
                .kubelets
                .values()
                .map(KubeletInfo::config_file)
                .collect(),
        )
    }

    /// The reconciler's log lines that are JSON objects whose `message` is `message`.
    pub fn reconciler_log_events(&self, message: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.procs.reconciler.log()).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["message"] == message || v["fields"]["message"] == message)
            .collect()
    }

    /// Ends the scenario: checks that no process died, stops them all, removes the
    /// directory (unless [`KEEP_ENV`] is set), and prints the time the scenario took.
    pub async fn finish(mut self) -> Result<(), E2eError> {
        self.procs.check()?;
        self.procs.kill_all().await?;
        self.check_reconciler_log()?;
        self.finished = true;
        eprintln!(
            "e2e {}: passed in {:.1?}",
            self.scenario,
            self.started.elapsed()
        );
        Ok(())
    }

    /// Every JSON line of the reconciler's log (all but the harness's own markers) is an
    /// object with no key twice, read strictly (serde_json alone keeps the last of two).
    fn check_reconciler_log(&self) -> Result<(), E2eError> {
        let log = self.procs.reconciler.log();
        let text = std::fs::read_to_string(log)
            .map_err(E2eError::io(format!("reading {}", log.display())))?;
        for line in text.lines().filter(|l| !l.starts_with("===== e2e:")) {
            kubelet_gitops_core::logging::parse_json_line(line).map_err(|message| {
                E2eError::Unexpected {
                    what: format!("a line of {}", log.display()),
                    message,
                }
            })?;
        }
        Ok(())
    }

    /// Starts `node`'s agent as a DaemonSet runs it: the node's root is its host root,
    /// every path a path on the node (the checkpoints under the node's
    /// `/var/lib/kubelet-gitops`).
    fn spawn_agent(&mut self, node: &str) -> Result<(), E2eError> {
        let k = self.cluster.kubelet(node)?.clone();
        let restart = k
            .restart
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" ");
        let mut args = vec![
            format!("--node-name={node}"),
            format!("--kubeconfig={}", k.agent_kubeconfig.display()),
            "--mode=replace".into(),
            "--flags-from=files".into(),
            "--restart-method=command".into(),
            format!("--restart-command={restart}"),
            format!("--health-timeout={}", self.options.rollout.health_timeout),
            "--lkg-grace=2s".into(),
            "--resync-interval=1s".into(),
            "--admin-addr=127.0.0.1:0".into(),
            "--log=info".into(),
        ];
        args.extend(k.agent_args.iter().cloned());
        let proc = Proc::spawn(
            format!("agent-{node}"),
            &self.bins.agent,
            args.into_iter().map(OsString::from).collect(),
            self.path.join("logs").join(format!("agent-{node}.log")),
        )?;
        self.procs.agents.insert(node.to_string(), proc);
        Ok(())
    }

    /// The `/metrics` text of `node`'s agent, on the admin port its latest start logged
    /// (`kubelet-gitops-agent starting ... admin=127.0.0.1:PORT`: it binds any free port).
    pub async fn agent_metrics(&self, node: &str) -> Result<String, E2eError> {
        let log = self.path.join("logs").join(format!("agent-{node}.log"));
        let text = std::fs::read_to_string(&log)
            .map_err(E2eError::io(format!("reading {}", log.display())))?;
        let addr = text
            .lines()
            .filter(|l| l.contains("kubelet-gitops-agent starting"))
            .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("admin=")))
            .next_back()
            .ok_or_else(|| E2eError::Unexpected {
                what: format!("{}", log.display()),
                message: "no `kubelet-gitops-agent starting ... admin=ADDR` line".into(),
            })?;
        let what = format!("agent {node} /metrics");
        let admin = HttpTarget::parse(&format!("http://{addr}")).map_err(|e| E2eError::Http {
            what: what.clone(),
            message: e.to_string(),
        })?;
        get_metrics(&admin, &what).await
    }

    /// Waits until every agent of `nodes` has reported what its kubelet runs.
    async fn wait_agents_reporting(&mut self, nodes: &[String]) -> Result<(), E2eError> {
        self.wait_nodes("every agent reporting its node", |seen| {
            nodes
                .iter()
                .all(|n| seen.get(n).is_some_and(|v| v.current.is_some()))
                .then_some(())
        })
        .await
    }

    async fn wait_reconciler_serving(&mut self) -> Result<(), E2eError> {
        self.poll("the reconciler serving /healthz", async |c| {
            Ok(c.admin
                .request("GET", "/healthz", None, None)
                .await
                .ok()
                .filter(|(code, _)| *code == 200)
                .map(|_| ()))
        })
        .await
    }
}

impl Drop for E2e {
    fn drop(&mut self) {
        if self.finished && !env_flag(KEEP_ENV) {
            return;
        }
        // Keep the directory: it holds the logs, node roots and repositories.
        let dir = self.dir.take().map(tempfile::TempDir::keep);
        if self.finished {
            return;
        }
        eprintln!(
            "\n===== e2e {} FAILED after {:.1?}; everything is in {} (reconciler admin port {}) =====",
            self.scenario,
            self.started.elapsed(),
            dir.as_deref().unwrap_or(&self.path).display(),
            self.reconciler_port,
        );
        eprintln!(
            "nodes as last seen:\n{}",
            summary(self.cluster.recorder.latest().values())
        );
        print_log_tails(&self.path.join("logs"));
        // The processes are SIGKILLed as `procs` drops (kill_on_drop).
    }
}

/// What a backend's launch hands the scenario.
struct Launched {
    cluster: ClusterProcs,
    /// The observer's kubeconfig (the sim's; the real cluster's admin).
    kubeconfig: PathBuf,
    /// The reconciler's kubeconfig (the sim's; a token of deploy/'s ServiceAccount).
    reconciler_kubeconfig: PathBuf,
    server: String,
    kubelets: BTreeMap<String, KubeletInfo>,
}

/// Starts the repository, the cluster and the reconciler for a scenario in `path` (the
/// agents come next, once the harness owns the processes).
async fn launch(
    path: &Path,
    bins: &Binaries,
    upstream: Option<UpstreamBinaries>,
    options: &Options,
) -> Result<(Cluster, Procs, u16), E2eError> {
    let logs = path.join("logs");
    std::fs::create_dir_all(&logs).map_err(E2eError::io("creating the log directory"))?;

    // The cluster first: the real cluster's base config names paths in its directory.
    let launched = match upstream {
        None => launch_sim(path, &logs, bins, options).await?,
        Some(upstream) => launch_real(path, &logs, upstream, options).await?,
    };
    let base = match options.backend {
        Backend::Sim => repo::BASE.to_string(),
        Backend::Real => real::kubelet_base(path),
    };

    // The config repository, with its first commit, served by git daemon.
    let git = GitRemote::start(path, logs.join("git-daemon.log")).await?;
    git.write("kubelet-gitops.yaml", &repo::settings(&options.rollout))?;
    git.write("base/kubelet.yaml", &base)?;
    for p in &options.pools {
        git.write(&p.path(), &p.yaml())?;
    }
    git.commit_and_push("initial kubelet configuration").await?;

    let client = client(&launched.kubeconfig).await?;
    let recorder = Recorder::start(client.clone()).await?;

    let reconciler_port = process::free_port()?;
    let admin = HttpTarget::parse(&format!("http://127.0.0.1:{reconciler_port}")).map_err(|e| {
        E2eError::Unexpected {
            what: "the reconciler's admin URL".into(),
            message: e.to_string(),
        }
    })?;
    let reconciler = Proc::spawn(
        "reconciler",
        &bins.reconciler,
        reconciler_args(path, &git, &launched.reconciler_kubeconfig, reconciler_port),
        logs.join("reconciler.log"),
    )?;
    Ok((
        Cluster {
            backend: options.backend,
            client,
            kubeconfig: launched.kubeconfig,
            server: launched.server,
            dir: path.to_path_buf(),
            kubelets: launched.kubelets,
            admin,
            recorder,
        },
        Procs {
            cluster: launched.cluster,
            git,
            reconciler,
            agents: BTreeMap::new(),
            kubelets: BTreeMap::new(),
        },
        reconciler_port,
    ))
}

/// The sim, with a stand-in kubelet per inventory node, and the namespace.
async fn launch_sim(
    path: &Path,
    logs: &Path,
    bins: &Binaries,
    options: &Options,
) -> Result<Launched, E2eError> {
    let inventory = path.join("inventory.yaml");
    let mut text = String::from("nodes:\n");
    for n in &options.nodes {
        text.push_str(&n.inventory_entry());
    }
    std::fs::write(&inventory, text).map_err(E2eError::io("writing the inventory"))?;
    let kubeconfig = path.join("kubeconfig");
    let sim_log = logs.join("sim.log");
    let mut args = words(&[
        "serve",
        "--nodes",
        &inventory.display().to_string(),
        "--kubeconfig-out",
        &kubeconfig.display().to_string(),
        "--workdir",
        &path.join("sim").display().to_string(),
        "--kubelet-start-delay",
        &go_duration(options.kubelet_start_delay),
        "--not-ready-delay",
        "1s",
        "--lease-renew-interval",
        "1s",
        "--restart-after-exit",
        "2s",
    ]);
    args.extend(options.sim_args.iter().map(OsString::from));
    let mut sim = Proc::spawn("sim", &bins.sim, args, sim_log.clone())?;
    let (sim_url, served) = wait_sim_ready(&mut sim, &sim_log, options.nodes.len()).await?;
    let mut kubelets = BTreeMap::new();
    for (name, (url, root)) in served {
        let restart = restart_command(
            options.restart_delay,
            options.restart_detached,
            &[
                &bins.sim.display().to_string(),
                "restart-kubelet",
                "--server",
                &sim_url,
                "--node",
                &name,
            ],
        );
        kubelets.insert(
            name,
            sim_kubelet_info(url, root, restart, kubeconfig.clone())?,
        );
    }
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client(&kubeconfig).await?)
        .create(&PostParams::default(), &ns)
        .await
        .map_err(E2eError::kube(format!("creating namespace {NAMESPACE}")))?;
    Ok(Launched {
        cluster: ClusterProcs::Sim(Box::new(sim)),
        reconciler_kubeconfig: kubeconfig.clone(),
        kubeconfig,
        server: sim_url,
        kubelets,
    })
}

/// A stand-in kubelet's info: its node's root is the agent's `--host-root`, every path a
/// path on the node.
fn sim_kubelet_info(
    url: String,
    root: PathBuf,
    restart: Vec<String>,
    kubeconfig: PathBuf,
) -> Result<KubeletInfo, E2eError> {
    let local_config = read_config(&root)?;
    let agent_args = vec![
        format!("--host-root={}", root.display()),
        format!("--checkpoint-dir={}", KubeletInfo::CHECKPOINT_DIR),
        format!("--kubelet-config={}", KubeletPaths::CONFIG),
        format!("--flags-file={}", KubeletPaths::FLAGS_ENV),
        format!("--healthz-url={url}/healthz"),
        format!("--configz-url={url}/configz"),
        format!("--cgroup-root={}", KubeletPaths::CGROUP_ROOT),
        "--cgroup-driver=systemd".into(),
    ];
    Ok(KubeletInfo {
        url,
        root,
        restart,
        local_config,
        https: None,
        agent_kubeconfig: kubeconfig,
        agent_args,
    })
}

/// The node set-up a real kubelet starts from for `spec`: its labels and kubeadm's
/// config file (the cluster's base).
fn node_setup(spec: &NodeSpec, cluster_dir: &Path) -> NodeSetup {
    let mut labels = Vec::new();
    if let Some(p) = &spec.pool {
        labels.push((POOL_LABEL.to_string(), p.clone()));
    }
    if spec.canary {
        labels.push((CANARY_LABEL.to_string(), "true".to_string()));
    }
    NodeSetup {
        name: spec.name.clone(),
        labels,
        config: real::kubelet_base(cluster_dir),
        flags: Vec::new(),
    }
}

/// The real cluster: control plane, a kubelet per inventory node, deploy/'s RBAC and
/// admission policy, and the product's identities: the reconciler's ServiceAccount token,
/// each agent's bound to its Node.
async fn launch_real(
    path: &Path,
    logs: &Path,
    upstream: UpstreamBinaries,
    options: &Options,
) -> Result<Launched, E2eError> {
    let setups: Vec<NodeSetup> = options.nodes.iter().map(|n| node_setup(n, path)).collect();
    let cluster = RealCluster::start(path, logs, upstream, &setups, true).await?;
    cluster.apply_deploy_base().await?;
    let reconciler_kubeconfig = path.join("reconciler.kubeconfig");
    cluster
        .reconciler_kubeconfig(&reconciler_kubeconfig)
        .await?;
    let mut kubelets = BTreeMap::new();
    for n in &options.nodes {
        kubelets.insert(
            n.name.clone(),
            real_kubelet_info(&cluster, &n.name, path, options).await?,
        );
    }
    Ok(Launched {
        kubeconfig: cluster.admin_kubeconfig().to_path_buf(),
        reconciler_kubeconfig,
        server: cluster.server().to_string(),
        kubelets,
        cluster: ClusterProcs::Real(Box::new(cluster)),
    })
}

/// A real kubelet's info; its agent as [`RealCluster::agent_identity`] sets it up.
async fn real_kubelet_info(
    cluster: &RealCluster,
    name: &str,
    path: &Path,
    options: &Options,
) -> Result<KubeletInfo, E2eError> {
    let node = cluster.node(name)?;
    let agent = cluster.agent_identity(name, path).await?;
    let root = node.root.clone();
    let url = format!("https://127.0.0.1:{}", node.port);
    let admin = cluster.admin_cert();
    Ok(KubeletInfo {
        url,
        local_config: read_config(&root)?,
        restart: restart_command(
            options.restart_delay,
            options.restart_detached,
            &node
                .restart_command()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
        root,
        https: Some(
            real::tls_client(cluster.ca(), Some(admin))?
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| E2eError::Unexpected {
                    what: "an HTTPS client for the kubelets".into(),
                    message: e.to_string(),
                })?,
        ),
        agent_kubeconfig: agent.kubeconfig,
        agent_args: agent.args,
    })
}

/// Prints the last lines of every log in `logs`.
fn print_log_tails(logs: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(logs)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for log in files {
        eprintln!("----- last {TAIL_LINES} lines of {}", log.display());
        for line in process::tail(&log, TAIL_LINES) {
            eprintln!("{line}");
        }
    }
}

/// The reconciler's command line.
fn reconciler_args(dir: &Path, git: &GitRemote, kubeconfig: &Path, port: u16) -> Vec<OsString> {
    [
        "run".to_string(),
        format!("--repo-url={}", git.url()),
        "--branch=main".into(),
        "--interval=1s".into(),
        format!("--cache-dir={}", dir.join("reconciler-cache").display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--identity=e2e-reconciler".into(),
        format!("--admin-addr=127.0.0.1:{port}"),
        "--log-format=json".into(),
        "--log=info".into(),
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// `command`, after `delay` if one is given, and in the background if `detached`
/// (both through `sh -c`).
fn restart_command(delay: Option<Duration>, detached: bool, command: &[&str]) -> Vec<String> {
    if delay.is_none() && !detached {
        return command.iter().map(|s| s.to_string()).collect();
    }
    let quoted: Vec<String> = command.iter().map(|w| shell_quote(w)).collect();
    let mut script = String::new();
    if let Some(d) = delay {
        script.push_str(&format!("sleep {:.3}; ", d.as_secs_f64()));
    }
    if detached {
        script.push_str(&format!("{} >/dev/null 2>&1 &", quoted.join(" ")));
    } else {
        script.push_str(&format!("exec {}", quoted.join(" ")));
    }
    vec!["sh".into(), "-c".into(), script]
}

/// Waits for `serve` to print its URL and one line per node
/// (`node NAME: kubelet URL PHASE  root DIR`); returns the URL and each node's kubelet
/// URL and root.
async fn wait_sim_ready(
    sim: &mut Proc,
    log: &Path,
    nodes: usize,
) -> Result<(String, BTreeMap<String, (String, PathBuf)>), E2eError> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        sim.check_running()?;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let url = text
            .lines()
            .find_map(|l| l.strip_prefix("API server:"))
            .map(|u| u.trim().to_string());
        let served: BTreeMap<String, (String, PathBuf)> = text
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                match w.as_slice() {
                    ["node", name, "kubelet", url, _phase, "root", root, ..] => Some((
                        name.trim_end_matches(':').to_string(),
                        (url.to_string(), PathBuf::from(root)),
                    )),
                    _ => None,
                }
            })
            .collect();
        if let Some(url) = url
            && served.len() == nodes
        {
            return Ok((url, served));
        }
        if Instant::now() >= deadline {
            return Err(E2eError::Timeout {
                what: "the sim serving its nodes".into(),
                waited: PATIENCE,
                state: text,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_commands_survive_the_agents_word_splitting() {
        let words = [
            "/t d/kubelet-gitops-sim",
            "restart-kubelet",
            "--node",
            "n-1",
        ];
        assert_eq!(restart_command(None, false, &words), words);
        let cmd = restart_command(Some(Duration::from_millis(1500)), false, &words);
        assert_eq!(cmd[0], "sh");
        assert_eq!(
            cmd[2],
            "sleep 1.500; exec '/t d/kubelet-gitops-sim' restart-kubelet --node n-1"
        );
        let detached = restart_command(None, true, &words);
        assert_eq!(
            detached[2],
            "'/t d/kubelet-gitops-sim' restart-kubelet --node n-1 >/dev/null 2>&1 &"
        );
        for cmd in [cmd, detached] {
            let line: Vec<String> = cmd.iter().map(|w| shell_quote(w)).collect();
            let back = kubelet_gitops_core::flags::split_command_line(&line.join(" ")).unwrap();
            assert_eq!(back, cmd);
        }
    }
}
