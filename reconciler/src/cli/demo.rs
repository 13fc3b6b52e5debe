//! `kubelet-gitops demo`: logging to a file (the terminal shows the story), the async
//! runtime, Ctrl-C, and exit codes around [`crate::demo`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kubelet_gitops_core::logging::{self, LogFormat, LogOutput};
use kubelet_gitops_core::message::error_chain;

use super::inputs;
use crate::demo::{ClusterKind, Demo, DemoOptions, Speed};

/// `kubelet-gitops demo` options.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the repository, checkpoints, kubeconfig and logs in DIR (absent or empty)
    /// for inspection; without it everything goes in a temporary directory removed at
    /// the end.
    #[arg(long, value_name = "DIR", env = "KUBELET_GITOPS_DEMO_WORKDIR")]
    workdir: Option<PathBuf>,
    /// The kubelet-gitops-agent binary. Default: next to this executable, else on PATH.
    #[arg(long, value_name = "PATH", env = "KUBELET_GITOPS_DEMO_AGENT_BIN")]
    agent_bin: Option<PathBuf>,
    /// `normal` pauses after each step so it can be read; `fast` does not.
    #[arg(
        long,
        value_enum,
        default_value = "normal",
        env = "KUBELET_GITOPS_DEMO_SPEED"
    )]
    speed: Speed,
    /// `sim`: the embedded simulated API server with a stand-in kubelet per node (no Go
    /// needed, under a minute). `real`: Kubernetes v1.36 on loopback, etcd,
    /// kube-apiserver, controller-manager, scheduler and 12 real kubelets with a fake
    /// container runtime, from the binaries `upstream/build.sh` builds (needs kubectl;
    /// about 2 minutes, 1.5 GB of memory).
    #[arg(
        long,
        value_enum,
        default_value = "sim",
        env = "KUBELET_GITOPS_DEMO_CLUSTER"
    )]
    cluster: ClusterKind,
    /// With --cluster real: the directory of the upstream binaries (etcd, kube-apiserver,
    /// kube-controller-manager, kube-scheduler, kubelet, fake-cri). Default: upstream/bin
    /// of the checkout this binary was built from.
    #[arg(long, value_name = "DIR", env = "KUBELET_GITOPS_UPSTREAM_BIN")]
    upstream_bin: Option<PathBuf>,
    /// Log filter for the reconciler and the simulated cluster (their log is a file in
    /// the work directory).
    #[arg(
        long,
        value_name = "FILTER",
        default_value = "info",
        env = "KUBELET_GITOPS_LOG"
    )]
    log: String,
}

/// Logs of the in-process reconciler and sim go to `file`, not to the terminal.
fn init_logging(file: &std::path::Path, filter: &str) -> Result<(), String> {
    let out = std::fs::File::create(file).map_err(|e| format!("{}: {e}", file.display()))?;
    logging::init(LogFormat::Text, filter, LogOutput::File(out)).map_err(|e| e.to_string())
}

/// Runs the demo. Exit codes: 0 it ran through; 1 a step failed or took too long; 2 this
/// machine or the options cannot run it (no agent binary, no curl, a non-empty
/// --workdir); 130 interrupted.
pub fn run(args: DemoArgs) -> ExitCode {
    let DemoArgs {
        workdir,
        agent_bin,
        speed,
        cluster,
        upstream_bin,
        log,
    } = args;
    let options = DemoOptions {
        workdir,
        agent_bin,
        speed,
        live: std::io::stdout().is_terminal(),
        cluster,
        upstream_bin,
    };
    let runtime = match inputs::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let mut demo = match Demo::new(options) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: {}", error_chain(&e));
                return ExitCode::from(if e.is_setup() { 2 } else { 1 });
            }
        };
        if let Err(msg) = init_logging(&demo.log_file(), &log) {
            eprintln!("error: {msg}");
            demo.shutdown().await;
            return ExitCode::from(2);
        }
        let outcome = tokio::select! {
            result = demo.run() => Some(result),
            _ = tokio::signal::ctrl_c() => None,
        };
        let code = match outcome {
            Some(Ok(_)) => ExitCode::SUCCESS,
            Some(Err(e)) => {
                eprintln!("\nerror: {}", error_chain(&e));
                demo.keep_workdir();
                eprintln!(
                    "kept for inspection: {} (logs: {} and {}/agent-<node>.log)",
                    demo.workdir().display(),
                    demo.log_file().display(),
                    demo.workdir().join("logs").display()
                );
                ExitCode::from(if e.is_setup() { 2 } else { 1 })
            }
            None => {
                eprintln!("\ninterrupted: stopping the agents and the cluster");
                ExitCode::from(130)
            }
        };
        demo.shutdown().await;
        code
    })
}
