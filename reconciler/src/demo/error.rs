//! Why the demo stopped, naming the step and what to look at.

use std::path::PathBuf;

/// Everything that can stop `kubelet-gitops demo`.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// `--workdir` names a directory that already has content.
    #[error(
        "--workdir {path} is not empty: remove it or name a new directory (the demo lays out a fresh cluster there)"
    )]
    WorkdirNotEmpty { path: PathBuf },
    /// A file or directory operation failed.
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No agent binary was found.
    #[error(
        "cannot find the kubelet-gitops-agent binary (looked for {searched}); build it with `cargo build --release -p node-agent -p reconciler`, or pass --agent-bin PATH"
    )]
    AgentNotFound { searched: String },
    /// `--agent-bin` does not name a file.
    #[error(
        "--agent-bin {path} is not a file; build it with `cargo build --release -p node-agent -p reconciler`"
    )]
    AgentBin { path: PathBuf },
    /// The agents restart the stand-in kubelets with curl.
    #[error(
        "curl is not on PATH: the agents restart the stand-in kubelets with `curl -X POST <sim>/sim/v1/nodes/<node>/kubelet/restart`; install curl"
    )]
    NoCurl,
    /// `--cluster real` without the upstream binaries.
    #[error(
        "--cluster real needs the Kubernetes binaries built from their Go modules: {missing} not in {dir}; run `upstream/build.sh` in the kubelet-gitops checkout (Go 1.26 and the Go module proxy; about 8 minutes the first time, seconds after), or name their directory with --upstream-bin"
    )]
    NoUpstream { dir: PathBuf, missing: String },
    /// `--cluster real` without kubectl (deploy/ is applied and tokens are issued with it).
    #[error(
        "--cluster real needs kubectl on PATH (it applies deploy/base and issues the ServiceAccount tokens with `kubectl create token`)"
    )]
    NoKubectl,
    /// The work directory is too long for the real kubelets' unix sockets.
    #[error("--workdir {path} is too long for a real kubelet: {why}")]
    WorkdirTooLong { path: PathBuf, why: String },
    /// The real cluster failed.
    #[error("real cluster: cannot {what}")]
    Real {
        what: &'static str,
        #[source]
        source: Box<kubelet_gitops_e2e::E2eError>,
    },
    /// The embedded example inventory does not load (a broken build).
    #[error("the embedded examples-repo/inventory.yaml does not load")]
    Inventory(#[source] Box<kubelet_gitops_core::inventory::InventoryError>),
    /// The simulated cluster did not start.
    #[error("cannot start the simulated cluster")]
    Sim(#[source] Box<kubelet_gitops_sim::cluster::SimError>),
    /// The simulated API server refused a setup write.
    #[error("cannot {what} in the simulated cluster: {message}")]
    SimSetup { what: String, message: String },
    /// A git operation on the demo repository failed.
    #[error("git: cannot {what} in {path}")]
    Git {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    /// A commit the demo made does not render (the demo's edits no longer fit).
    #[error("commit {commit} of the demo repository does not validate:\n{errors}")]
    Invalid { commit: String, errors: String },
    /// The example repository changed in a way the demo's edits do not expect.
    #[error(
        "the example repository has changed: {0} (update the demo's edits in reconciler/src/demo/repo.rs)"
    )]
    ExampleChanged(String),
    /// The reconciler did not start.
    #[error("cannot start the reconciler")]
    Reconciler(#[source] crate::controller::RunError),
    /// The reconciler stopped by itself.
    #[error("the reconciler stopped: {0}")]
    ReconcilerStopped(String),
    /// An agent process did not start.
    #[error("cannot start the agent of {node} ({bin})")]
    SpawnAgent {
        node: String,
        bin: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An agent process exited while the demo needed it.
    #[error("the agent of {node} exited ({status}); the end of its log {log}:\n{tail}")]
    AgentExited {
        node: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    /// A step did not reach its goal in time.
    #[error("step \"{step}\" did not finish within {timeout}s; where things stood:\n{state}")]
    Timeout {
        step: &'static str,
        timeout: u64,
        state: String,
    },
    /// A step reached an outcome the demo did not expect.
    #[error("step \"{step}\": {problem}")]
    Unexpected { step: &'static str, problem: String },
}

impl DemoError {
    /// A problem with the command line or this machine rather than with a step of the
    /// demo (exit code 2 rather than 1).
    pub fn is_setup(&self) -> bool {
        matches!(
            self,
            DemoError::WorkdirNotEmpty { .. }
                | DemoError::AgentNotFound { .. }
                | DemoError::AgentBin { .. }
                | DemoError::NoCurl
                | DemoError::NoUpstream { .. }
                | DemoError::NoKubectl
                | DemoError::WorkdirTooLong { .. }
        )
    }
}

/// `Io` for `path`.
pub(crate) fn io(
    what: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> DemoError {
    let path = path.into();
    move |source| DemoError::Io { what, path, source }
}
