//! The `kubelet-gitops-sim` command line: `serve`, `restart-kubelet`, `kubelet`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args as ClapArgs, Parser, Subcommand};
use kubelet_gitops_core::inventory::Inventory;
use kubelet_gitops_core::logging::{self, LogFormat, LogOutput};

use super::{Sim, SimConfig, StatusChurn};
use crate::faults::FaultConfig;
use crate::kubelet::{self, KubeletOptions, ProcessOptions};

/// A simulated Kubernetes API server with simulated nodes and stand-in kubelets, for
/// testing and demonstrating kubelet-gitops without a cluster.
#[derive(Debug, Parser)]
#[command(name = "kubelet-gitops-sim", version)]
pub struct Args {
    /// How log lines are written to stderr: `text`, or `json` (one object per line). The
    /// filter is `RUST_LOG` (EnvFilter syntax; default `warn`).
    #[arg(
        long,
        value_enum,
        global = true,
        env = "KUBELET_GITOPS_SIM_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the API server, the inventory's Nodes and a stand-in kubelet per node until
    /// SIGINT or SIGTERM. Prints the API URL, the kubeconfig path, and each node's kubelet
    /// port and root directory.
    Serve(ServeArgs),
    /// Restarts a stand-in kubelet of a running `serve` (what `systemctl restart kubelet`
    /// is on a real node; usable as the node agent's restart command). Prints the
    /// kubelet's state after the restart; exits non-zero only if the request fails.
    RestartKubelet(RestartArgs),
    /// Runs one stand-in kubelet as its own process, talking to the API server over
    /// HTTP. SIGHUP restarts it; SIGINT or SIGTERM ends it. Prints its state as one JSON
    /// line per change.
    Kubelet(KubeletArgs),
}

#[derive(Debug, ClapArgs)]
struct ServeArgs {
    /// The node inventory YAML (`nodes: [{name, labels, capacity, kubeletFlags}]`).
    #[arg(
        long,
        env = "KUBELET_GITOPS_SIM_NODES",
        required_unless_present = "generate_nodes"
    )]
    nodes: Option<PathBuf>,
    /// Instead of an inventory file, generate this many nodes (8 CPUs, 32Gi, 110 pods
    /// each), spread over `--pools`.
    #[arg(
        long,
        env = "KUBELET_GITOPS_SIM_GENERATE_NODES",
        conflicts_with = "nodes"
    )]
    generate_nodes: Option<usize>,
    /// Pool names for generated nodes (label `node.kubernetes.io/pool`), comma-separated.
    #[arg(
        long,
        env = "KUBELET_GITOPS_SIM_POOLS",
        value_delimiter = ',',
        default_value = "general"
    )]
    pools: Vec<String>,
    /// Where to write the kubeconfig that points kubectl and kube-rs at the server.
    #[arg(long, env = "KUBELET_GITOPS_SIM_KUBECONFIG_OUT")]
    kubeconfig_out: PathBuf,
    /// Where the node root directories go (`<workdir>/nodes/<name>/`). Files already
    /// there are kept, and so is the directory at the end. Default: a new directory
    /// under the system temp dir ($TMPDIR), removed when `serve` ends on SIGINT or
    /// SIGTERM.
    #[arg(long, env = "KUBELET_GITOPS_SIM_WORKDIR")]
    workdir: Option<PathBuf>,
    /// Register the Nodes (Ready) but run no stand-in kubelets and lay out no node roots.
    #[arg(long, env = "KUBELET_GITOPS_SIM_NO_KUBELETS")]
    no_kubelets: bool,
    /// Status reports of the Nodes without a stand-in kubelet (all of them with
    /// --no-kubelets), as quiet kubelets make them: a per-Node interval (Go duration;
    /// the default is a kubelet's nodeStatusReportFrequency), a rate over the whole fleet
    /// (`333/s`), or `off` (`0`). Stand-in kubelets report on their own.
    #[arg(long, env = "KUBELET_GITOPS_SIM_STATUS_CHURN", default_value = "5m", value_parser = parse_churn)]
    status_churn: StatusChurn,
    #[command(flatten)]
    host: HostArgs,
    #[command(flatten)]
    faults: FaultArgs,
}

#[derive(Debug, ClapArgs)]
struct HostArgs {
    /// Simulate cgroup v1 hosts (the default is cgroup v2). The sim's initial kubelet
    /// config then sets `failCgroupV1: false`, without which a v1.36 kubelet refuses v1.
    #[arg(long, env = "KUBELET_GITOPS_SIM_CGROUP_V1")]
    cgroup_v1: bool,
    /// Pause between a kubelet stopping and starting again on a restart (Go duration).
    #[arg(long, env = "KUBELET_GITOPS_SIM_KUBELET_START_DELAY", default_value = "200ms", value_parser = parse_duration)]
    kubelet_start_delay: Duration,
    /// How long after its kubelet stops a Node turns NotReady (a real control plane
    /// waits for the 40s lease to expire).
    #[arg(long, env = "KUBELET_GITOPS_SIM_NOT_READY_DELAY", default_value = "3s", value_parser = parse_duration)]
    not_ready_delay: Duration,
    /// How often each kubelet renews its Lease in kube-node-lease (the real kubelet: 10s).
    #[arg(long, env = "KUBELET_GITOPS_SIM_LEASE_RENEW_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    lease_renew_interval: Duration,
    /// systemd's RestartSec: an exited kubelet is started again after this long; `0s`
    /// leaves it down until restarted.
    #[arg(long, env = "KUBELET_GITOPS_SIM_RESTART_AFTER_EXIT", default_value = "10s", value_parser = parse_duration)]
    restart_after_exit: Duration,
}

impl HostArgs {
    fn options(&self) -> KubeletOptions {
        let HostArgs {
            cgroup_v1,
            kubelet_start_delay,
            not_ready_delay,
            lease_renew_interval,
            restart_after_exit,
        } = self;
        KubeletOptions {
            cgroup_v2: !cgroup_v1,
            start_delay: *kubelet_start_delay,
            not_ready_delay: *not_ready_delay,
            lease_renew_interval: *lease_renew_interval,
            restart_after_exit: Some(*restart_after_exit).filter(|d| !d.is_zero()),
            ..KubeletOptions::default()
        }
    }
}

#[derive(Debug, ClapArgs)]
struct FaultArgs {
    /// Seed of the fault injection RNG: the same seed and requests give the same faults.
    #[arg(long, env = "KUBELET_GITOPS_SIM_FAULT_SEED", default_value_t = 0)]
    fault_seed: u64,
    /// Share of API requests answered 500 InternalError (0 to 1).
    #[arg(long, env = "KUBELET_GITOPS_SIM_FAULT_500_RATE", default_value_t = 0.0)]
    fault_500_rate: f64,
    /// Share of API requests answered 429 TooManyRequests with Retry-After (0 to 1).
    #[arg(long, env = "KUBELET_GITOPS_SIM_FAULT_429_RATE", default_value_t = 0.0)]
    fault_429_rate: f64,
    /// The Retry-After seconds of injected 429s.
    #[arg(
        long,
        env = "KUBELET_GITOPS_SIM_FAULT_RETRY_AFTER",
        default_value_t = 1
    )]
    fault_retry_after: u64,
    /// Share of writes answered 409 Conflict (0 to 1).
    #[arg(long, env = "KUBELET_GITOPS_SIM_FAULT_409_RATE", default_value_t = 0.0)]
    fault_409_rate: f64,
    /// Chance, after each watch event, that the watch stream is dropped (0 to 1).
    #[arg(
        long,
        env = "KUBELET_GITOPS_SIM_FAULT_DROP_WATCH_RATE",
        default_value_t = 0.0
    )]
    fault_drop_watch_rate: f64,
    /// Latency added to every API request (Go duration).
    #[arg(long, env = "KUBELET_GITOPS_SIM_FAULT_LATENCY", default_value = "0s", value_parser = parse_duration)]
    fault_latency: Duration,
    /// Extra random latency, uniform up to this (Go duration).
    #[arg(long, env = "KUBELET_GITOPS_SIM_FAULT_LATENCY_JITTER", default_value = "0s", value_parser = parse_duration)]
    fault_latency_jitter: Duration,
}

impl FaultArgs {
    fn config(&self) -> anyhow::Result<FaultConfig> {
        let FaultArgs {
            fault_seed,
            fault_500_rate,
            fault_429_rate,
            fault_retry_after,
            fault_409_rate,
            fault_drop_watch_rate,
            fault_latency,
            fault_latency_jitter,
        } = self;
        for (name, rate) in [
            ("--fault-500-rate", fault_500_rate),
            ("--fault-429-rate", fault_429_rate),
            ("--fault-409-rate", fault_409_rate),
            ("--fault-drop-watch-rate", fault_drop_watch_rate),
        ] {
            if !(0.0..=1.0).contains(rate) {
                anyhow::bail!("{name} must be between 0 and 1, not {rate}");
            }
        }
        Ok(FaultConfig {
            seed: *fault_seed,
            error_500_rate: *fault_500_rate,
            throttle_429_rate: *fault_429_rate,
            retry_after_seconds: *fault_retry_after,
            conflict_409_rate_on_writes: *fault_409_rate,
            drop_watch_rate: *fault_drop_watch_rate,
            latency: *fault_latency,
            latency_jitter: *fault_latency_jitter,
        })
    }
}

#[derive(Debug, ClapArgs)]
struct RestartArgs {
    /// The sim's API server URL (`http://127.0.0.1:PORT`, as `serve` prints it).
    #[arg(long, env = "KUBELET_GITOPS_SIM_SERVER")]
    server: String,
    /// The node whose kubelet to restart.
    #[arg(long, env = "KUBELET_GITOPS_SIM_NODE")]
    node: String,
}

#[derive(Debug, ClapArgs)]
struct KubeletArgs {
    /// The node's root directory, its `/` (`var/lib/kubelet/config.yaml`,
    /// `kubeadm-flags.env`, `etc/kubernetes/kubelet.conf.d/`, `sys/fs/cgroup/` under it;
    /// the flags name them as paths on the node); missing files are created as `serve`
    /// creates them, and containerd's socket listens under it while the kubelet runs.
    #[arg(long, env = "KUBELET_GITOPS_SIM_ROOT")]
    root: PathBuf,
    /// The node's name.
    #[arg(long, env = "KUBELET_GITOPS_SIM_NODE")]
    node: String,
    /// The kubeconfig of the API server (plain http).
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The inventory to take the node's capacity, labels and flags from; without it they
    /// are read from the node's existing Node object.
    #[arg(long = "nodes", env = "KUBELET_GITOPS_SIM_NODES")]
    inventory: Option<PathBuf>,
    /// Port for /healthz and /configz on 127.0.0.1; 0 picks a free one.
    #[arg(long, env = "KUBELET_GITOPS_SIM_KUBELET_PORT", default_value_t = 0)]
    port: u16,
    #[command(flatten)]
    host: HostArgs,
}

fn parse_churn(s: &str) -> Result<StatusChurn, String> {
    s.parse()
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = kubelet_gitops_core::duration::Duration::parse(s).map_err(|e| e.to_string())?;
    d.to_std()
        .ok_or_else(|| format!("duration {s:?} must not be negative"))
}

/// Logs to stderr in `format`, filtered by `RUST_LOG` (default, and when it does not
/// parse: warnings).
fn init_tracing(format: LogFormat) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_string());
    if let Err(logging::LoggingError::Filter { .. }) =
        logging::init(format, &filter, LogOutput::Stderr)
    {
        let _ = logging::init(format, "warn", LogOutput::Stderr);
    }
}

impl Args {
    /// Runs the command.
    pub async fn run(self) -> anyhow::Result<()> {
        init_tracing(self.log_format);
        match self.command {
            Command::Serve(a) => serve(a).await,
            Command::RestartKubelet(a) => {
                let state = kubelet::request_restart(&a.server, &a.node)
                    .await
                    .map_err(|e| anyhow::anyhow!("restarting the kubelet of {}: {e}", a.node))?;
                println!("{}", serde_json::to_string_pretty(&state)?);
                Ok(())
            }
            Command::Kubelet(a) => {
                let KubeletArgs {
                    root,
                    node,
                    kubeconfig,
                    inventory,
                    port,
                    host,
                } = a;
                let inventory_node = match inventory {
                    Some(path) => {
                        let inv = Inventory::load(&path)?;
                        let found = inv
                            .nodes
                            .into_iter()
                            .enumerate()
                            .find(|(_, n)| n.name == node)
                            .ok_or_else(|| {
                                anyhow::anyhow!("node {node} is not in {}", path.display())
                            })?;
                        Some(found)
                    }
                    None => None,
                };
                kubelet::run_process(ProcessOptions {
                    root,
                    node,
                    kubeconfig,
                    inventory_node,
                    port,
                    options: host.options(),
                })
                .await
            }
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        nodes,
        generate_nodes,
        pools,
        kubeconfig_out,
        workdir,
        no_kubelets,
        status_churn,
        host,
        faults,
    } = args;
    let inventory = match (nodes, generate_nodes) {
        (Some(path), _) => Inventory::load(&path)?,
        (None, Some(n)) => {
            let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
            Inventory::generate(n, &pools)
        }
        (None, None) => anyhow::bail!("give --nodes INVENTORY.yaml or --generate-nodes N"),
    };
    // The signals are caught from here on, so that one arriving while the cluster starts
    // still ends it cleanly (and removes a temporary work directory).
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let (workdir, _temporary) = match workdir {
        Some(w) => {
            let w =
                std::path::absolute(&w).with_context(|| format!("resolving {}", w.display()))?;
            (w, None)
        }
        None => {
            let temporary = TempWorkdir::create()?;
            (temporary.0.clone(), Some(temporary))
        }
    };
    let options = host.options();
    let mut config = SimConfig::new(inventory, workdir);
    config.faults = faults.config()?;
    config.cgroup_v2 = options.cgroup_v2;
    config.kubelets = !no_kubelets;
    config.kubelet = options;
    config.kubeconfig_out = Some(kubeconfig_out);
    config.status_churn = status_churn;
    let sim = Sim::start(config).await?;

    println!("API server:  {}", sim.url());
    println!("kubeconfig:  {}", sim.kubeconfig_path().display());
    println!("workdir:     {}", sim.workdir().display());
    if sim.kubelets().is_empty() {
        println!(
            "nodes:       {} (no stand-in kubelets, status churn {status_churn})",
            sim.node_count()
        );
    }
    for (name, k) in sim.kubelets() {
        let state = k.state();
        let reason = state.reason.map(|r| format!("  ({r})")).unwrap_or_default();
        println!(
            "node {name}: kubelet {} {:?}  root {}{reason}",
            k.url(),
            state.phase,
            k.paths().root.display()
        );
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    tokio::select! {
        _ = interrupt.recv() => {}
        _ = term.recv() => {}
    }
    sim.shutdown().await;
    // `_temporary`, dropped here (or on any error above), removes the directory.
    Ok(())
}

/// The work directory `serve` made for itself under the system temp dir, removed with
/// everything in it when dropped.
#[derive(Debug)]
struct TempWorkdir(PathBuf);

impl TempWorkdir {
    /// A new, empty `kubelet-gitops-sim-<pid>-<n>` under the system temp dir.
    fn create() -> anyhow::Result<TempWorkdir> {
        let parent = std::path::absolute(std::env::temp_dir())?;
        for n in 0u32.. {
            let dir = parent.join(format!("kubelet-gitops-sim-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TempWorkdir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating {}", dir.display()));
                }
            }
        }
        anyhow::bail!(
            "no free name for a work directory under {}",
            parent.display()
        )
    }
}

impl Drop for TempWorkdir {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(
                workdir = %self.0.display(),
                error = %e,
                "cannot remove the temporary work directory"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn churn(extra: &[&str]) -> Result<StatusChurn, clap::Error> {
        let args = Args::try_parse_from(
            [
                "kubelet-gitops-sim",
                "serve",
                "--generate-nodes",
                "3",
                "--kubeconfig-out",
                "k",
            ]
            .iter()
            .chain(extra),
        )?;
        match args.command {
            Command::Serve(s) => Ok(s.status_churn),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn serve_churns_as_kubelets_unless_told_otherwise() {
        // clap would read the variable: the test needs it unset.
        assert!(std::env::var_os("KUBELET_GITOPS_SIM_STATUS_CHURN").is_none());
        assert_eq!(churn(&[]).unwrap(), StatusChurn::KUBELETS);
        assert_eq!(churn(&["--status-churn", "off"]).unwrap(), StatusChurn::Off);
        assert_eq!(churn(&["--status-churn", "0"]).unwrap(), StatusChurn::Off);
        assert_eq!(
            churn(&["--status-churn=333/s"]).unwrap(),
            StatusChurn::PerSecond(333.0)
        );
        assert_eq!(
            churn(&["--status-churn", "30s"]).unwrap(),
            StatusChurn::PerNode(Duration::from_secs(30))
        );
        let err = churn(&["--status-churn", "often"]).unwrap_err().to_string();
        assert!(
            err.contains("want off, a duration (5m) or a rate (333/s)"),
            "{err}"
        );
    }
}
