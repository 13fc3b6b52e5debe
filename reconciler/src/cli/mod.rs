//! The `kubelet-gitops` command line: argument definitions and dispatch.
//!
//! Exit codes are shared by every command: 0 success, 1 the input is invalid (every
//! problem printed with its file, line, column when known, and field path), 2 usage or I/O
//! errors, whatever the input's validity.
//!
//! Text from the files checked or a repository (paths, fields, values) is printed through
//! [`kubelet_gitops_core::message`]'s escapes: one problem is one line, whatever it quotes.

mod configmap_name;
#[cfg(feature = "demo")]
mod demo;
mod inputs;
mod plan;
mod render;
mod run;
mod status;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use kubelet_gitops_core::message::OneLine;

use inputs::Failure;
pub use inputs::NodeArgs;
pub use status::pools_table;

/// GitOps for kubelet configuration: validate, render and name KubeletConfiguration files
/// exactly as the kubelet and kubectl would.
#[derive(Debug, Parser)]
#[command(name = "kubelet-gitops", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check KubeletConfiguration files the way the kubelet does: strict decoding, then the
    /// kubelet's defaults and validation rules (with the node's flags, when given).
    ///
    /// Exits 0 when every file is valid, 1 when any is invalid, 2 on usage or I/O errors.
    /// Each problem is printed on stderr as `file:line:column: field.path: message` when
    /// the file does not decode (a typo, a wrong type, a duplicate key), as
    /// `file:line: field.path: message` when a decoded value breaks the kubelet's rules
    /// (the line of the field, or of its nearest ancestor), and as `file: message` when the
    /// whole file is wrong (empty, not YAML, too large).
    Validate(ValidateArgs),
    /// Print the effective configuration a kubelet would run with: defaults, then FILE,
    /// then drop-ins, then the kubelet's flags. Fields set by a flag are marked.
    Render(RenderArgs),
    /// Print the name of the ConfigMap that holds FILE under key `kubelet`:
    /// BASENAME-<suffix>, the suffix being exactly what
    /// `kubectl create configmap BASENAME --from-file=kubelet=FILE --append-hash` appends.
    #[command(name = "configmap-name")]
    ConfigmapName(ConfigmapNameArgs),
    /// Follow a git branch and roll its kubelet configurations out to the cluster: render
    /// and validate each new commit, publish every pool's config as an immutable ConfigMap,
    /// and assign nodes pool by pool (canary first, at most maxUnavailable at once, halting
    /// on a failure). A commit that does not validate applies nothing.
    ///
    /// Every option can also be set through its KUBELET_GITOPS_* environment variable.
    /// Serves /metrics, /healthz and /readyz on --admin-addr. Exits 2 at once, before
    /// anything starts, when an option is wrong (the message names it); 0 on SIGTERM; with
    /// --once, 0 when the commit applied, 1 when it does not validate, 2 on other errors.
    Run(Box<crate::args::RunArgs>),
    /// Print, as Markdown, what merging a revision of the config repository would do:
    /// per pool the effective field-level diff (kubelet defaults applied on both sides),
    /// the old and new ConfigMap names, the nodes whose config would change, the fields
    /// their kubelet flags override, and the disruptive fields that change. Works
    /// offline, from the repository and a node inventory.
    ///
    /// Exits 0 when the head can be applied, 1 when it does not validate (each problem
    /// printed as `file:line:col: field: message`) or two pools of the same priority
    /// select a node, 2 on usage, git or I/O errors (an unknown --base or --head, a
    /// missing --nodes file, a cluster that cannot be listed) whether the head validates
    /// or not: every input is read before the head is rendered.
    Plan(plan::PlanArgs),
    /// Show the whole loop on this machine in under a minute: a simulated cluster of 12
    /// nodes in 3 pools (a stand-in kubelet each), a copy of examples-repo in a git
    /// repository, the reconciler, and one real kubelet-gitops-agent process per node.
    /// Three commits roll out live: the examples, a change to one pool, and a config the
    /// canary's kubelet cannot start with (rolled back, the pool halted). Ends with the
    /// commit statuses and where everything is on disk.
    ///
    /// With `--cluster real`, the same on Kubernetes v1.36 on loopback: etcd,
    /// kube-apiserver, controller-manager, scheduler and 12 real kubelets, from the binaries
    /// `upstream/build.sh` builds (about 90 seconds; needs kubectl and root).
    ///
    /// Needs the kubelet-gitops-agent binary (`cargo build --release -p node-agent -p
    /// reconciler`) and curl. Exits 0 when every step happened as shown, 1 when one failed
    /// or took too long, 2 when this machine or the options cannot run it, 130 on Ctrl-C.
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
    /// Where each pool's rollout stands, read from the cluster through the kubeconfig
    /// (Nodes and the published ConfigMaps; the reconciler's port is not needed): the
    /// commit and ConfigMap it rolls out, its phase (canary, rolling, waiting, complete,
    /// halted; pending before any node has it), a bar of the nodes Done, and the nodes not
    /// Done with their state, message and how long ago their agent last reported.
    /// `status node NAME` shows one node in full.
    ///
    /// The phase is derived from the nodes' annotations, as the reconciler derives it
    /// after a restart: `waiting` means nothing is in flight although the pool is not
    /// complete (paused, outside a maintenance window, a wave's soak; the repository and
    /// the reconciler's /readyz say which). docs/operations.md has the details and the
    /// json/yaml structure.
    ///
    /// Also a kubectl plugin: as `kubectl-kubelet_gitops` on PATH (a link to this
    /// binary), `kubectl kubelet-gitops status` runs it.
    ///
    /// Exits 0 after printing (with --wait: once every pool is complete), 1 with --wait
    /// when a pool halts, 2 on usage, kubeconfig or API errors, 3 when --timeout passes.
    Status(status::StatusArgs),
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// KubeletConfiguration files (YAML or JSON) to check.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    node: NodeArgs,
}

#[derive(Debug, Args)]
struct RenderArgs {
    /// Include the kubelet's defaults (the full effective config). Without it only the
    /// fields set by FILE, the drop-ins and the flags are printed.
    #[arg(long)]
    effective: bool,
    /// The KubeletConfiguration file (the kubelet's --config).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    node: NodeArgs,
}

#[derive(Debug, Args)]
struct ConfigmapNameArgs {
    /// The ConfigMap's name before the hash, e.g. kubelet-gpu.
    #[arg(value_name = "BASENAME")]
    basename: String,
    /// The file stored under key `kubelet`.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

impl Cli {
    /// The arguments of this process. Run as a kubectl plugin (the binary named
    /// `kubectl-kubelet_gitops`, kubectl's file name for `kubectl kubelet-gitops`), help
    /// and errors name the command as kubectl users type it.
    pub fn parse_env() -> Cli {
        let argv0 = std::env::args_os().next().unwrap_or_default();
        let plugin = std::path::Path::new(&argv0)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("kubectl-"));
        let mut command = Cli::command();
        if plugin {
            command = command.bin_name("kubectl kubelet-gitops");
        }
        let matches = command.get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }

    pub fn run(self) -> ExitCode {
        let result = match self.command {
            Command::Validate(a) => validate::run(&a.files, &a.node),
            Command::Render(a) => render::run(&a.file, a.effective, &a.node),
            Command::ConfigmapName(a) => configmap_name::run(&a.basename, &a.file),
            Command::Run(a) => return run::run(*a),
            Command::Plan(a) => plan::run(a),
            #[cfg(feature = "demo")]
            Command::Demo(a) => return demo::run(a),
            Command::Status(a) => return status::run(a),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Invalid) => ExitCode::from(1),
            Err(Failure::Usage(msg)) => {
                // Each line of the message escaped: control characters in a path or an
                // error of a library cannot rewrite the terminal.
                let lines: Vec<String> = msg.split('\n').map(|l| OneLine(l).to_string()).collect();
                eprintln!("error: {}", lines.join("\n"));
                ExitCode::from(2)
            }
        }
    }
}
