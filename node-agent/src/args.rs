//! The agent's command line and environment, turned once into a validated [`Config`].
//!
//! Every option has an environment variable (a DaemonSet sets them from the downward API
//! and the pod spec). Paths of host files (the kubelet's config, its drop-in directory,
//! the checkpoint directory, the cgroup root) are written as they are on the host; the
//! agent reads them under `--host-root`, where a container mounts the host's `/`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use kubelet_gitops_core::allocatable::CgroupVersion;
use kubelet_gitops_core::names;

use crate::cgroups::{CgroupConfig, CgroupDriver, detect_version};
use crate::hostflags::{FlagSource, host_path};
use crate::kubelet::RestartMethod;

/// The file the agent owns in the kubelet's `--config-dir` in drop-in mode. `50-` sorts
/// it after a distribution's own drop-ins (`10-`, `20-`) and before an operator's
/// emergency overrides (`90-`), which therefore still win.
/// (The plans place it by the same name: [`kubelet_gitops_core::node_setup`].)
pub const DROP_IN_FILE: &str = kubelet_gitops_core::node_setup::AGENT_DROP_IN_FILE;

/// Applies the kubelet configuration assigned to this node, safely: checkpoint, validate
/// against the kubelet's flags, write, restart, verify, roll back to last-known-good.
///
/// The reconciler assigns a config by setting the annotation
/// kubelet-gitops.io/desired-config=<namespace>/<configmap> on this Node; the agent
/// reports in kubelet-gitops.io/state, current-config, last-known-good, message and the
/// KubeletConfigReady condition. Paths of host files are host paths, read under
/// --host-root.
#[derive(Debug, Parser)]
#[command(name = "kubelet-gitops-agent", version, max_term_width = 100)]
pub struct Args {
    /// The name of this node's Node object (in a DaemonSet: the downward API's
    /// spec.nodeName). The agent watches and patches only this Node.
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: String,

    /// A kubeconfig to reach the API server; without it, the in-cluster service account
    /// (or $KUBECONFIG, or ~/.kube/config) is used.
    #[arg(long, env = "KUBELET_GITOPS_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    #[command(flatten)]
    pub shared: SharedArgs,

    /// Where the kubelet's command-line flags are read from, to compute the config it will
    /// really run and to report every field a flag overrides: `proc` (the running
    /// kubelet's /proc/<pid>/cmdline), `files` (kubeadm's kubeadm-flags.env and the
    /// packages' env files, see --flags-file), `systemd` (the kubelet's unit and its
    /// drop-ins, see --kubelet-unit-file).
    #[arg(
        long,
        env = "KUBELET_GITOPS_FLAGS_FROM",
        value_enum,
        default_value = "files"
    )]
    pub flags_from: FlagsFrom,

    /// Files holding the kubelet's flags (with --flags-from=files), in the order systemd
    /// applies them; later files win. Comma-separated in the environment.
    #[arg(
        long,
        env = "KUBELET_GITOPS_FLAGS_FILE",
        value_name = "FILE",
        value_delimiter = ',',
        default_value = "/var/lib/kubelet/kubeadm-flags.env,/etc/default/kubelet"
    )]
    pub flags_file: Vec<PathBuf>,

    /// The kubelet's systemd unit file (with --flags-from=systemd); its
    /// `<unit>.d/*.conf` drop-ins are read too.
    #[arg(
        long,
        env = "KUBELET_GITOPS_KUBELET_UNIT_FILE",
        value_name = "FILE",
        default_value = "/usr/lib/systemd/system/kubelet.service"
    )]
    pub kubelet_unit_file: PathBuf,

    /// How the kubelet is restarted: `systemd` (RestartUnit over the system D-Bus, see
    /// --kubelet-unit) or `command` (see --restart-command).
    #[arg(
        long,
        env = "KUBELET_GITOPS_RESTART_METHOD",
        value_enum,
        default_value = "systemd"
    )]
    pub restart_method: RestartMethodArg,

    /// The kubelet's systemd unit name (with --restart-method=systemd).
    #[arg(
        long,
        env = "KUBELET_GITOPS_KUBELET_UNIT",
        value_name = "UNIT",
        default_value = "kubelet.service"
    )]
    pub kubelet_unit: String,

    /// The command that restarts the kubelet (with --restart-method=command), one
    /// shell-quoted string, run without a shell; it must return once the restart was
    /// requested. Example: 'nsenter -t 1 -m -- systemctl restart kubelet'.
    #[arg(
        long,
        env = "KUBELET_GITOPS_RESTART_COMMAND",
        value_name = "COMMAND",
        allow_hyphen_values = true
    )]
    pub restart_command: Option<String>,

    /// The kubelet's healthz endpoint (its --healthz-bind-address and --healthz-port).
    #[arg(
        long,
        env = "KUBELET_GITOPS_HEALTHZ_URL",
        value_name = "URL",
        default_value = "http://127.0.0.1:10248/healthz"
    )]
    pub healthz_url: String,

    /// The kubelet's configz endpoint (e.g. https://127.0.0.1:10250/configz). Needs
    /// nodes/configz (KubeletFineGrainedAuthz) or nodes/proxy. Without it the agent
    /// verifies a config by healthz, the config file read back (it must be the one
    /// written) and the Node's Ready condition.
    #[arg(long, env = "KUBELET_GITOPS_CONFIGZ_URL", value_name = "URL")]
    pub configz_url: Option<String>,

    /// A bearer token file for configz (the agent's service-account token).
    #[arg(long, env = "KUBELET_GITOPS_KUBELET_TOKEN_FILE", value_name = "FILE")]
    pub kubelet_token_file: Option<PathBuf>,

    /// A PEM bundle of the CAs that sign the kubelet's serving certificate (for an https
    /// configz URL; often the node's /var/lib/kubelet/pki/kubelet.crt). A path as the
    /// agent sees it (not under --host-root), like --kubelet-token-file.
    #[arg(long, env = "KUBELET_GITOPS_KUBELET_CA_FILE", value_name = "FILE")]
    pub kubelet_ca_file: Option<PathBuf>,

    /// Accept any serving certificate from the kubelet (configz). Only for self-signed
    /// kubelet certificates without a CA file; the token is still sent.
    #[arg(long, env = "KUBELET_GITOPS_KUBELET_INSECURE_SKIP_TLS_VERIFY")]
    pub kubelet_insecure_skip_tls_verify: bool,

    /// Where the host's `/` is mounted in the agent's container; host paths are read
    /// under it.
    #[arg(
        long,
        env = "KUBELET_GITOPS_HOST_ROOT",
        value_name = "DIR",
        default_value = "/"
    )]
    pub host_root: PathBuf,

    /// The host's cgroup filesystem.
    #[arg(
        long,
        env = "KUBELET_GITOPS_CGROUP_ROOT",
        value_name = "DIR",
        default_value = "/sys/fs/cgroup"
    )]
    pub cgroup_root: PathBuf,

    /// The container runtime's cgroup driver (containerd's `SystemdCgroup = true` is
    /// systemd): how reserved cgroups such as /system.slice are named and created. A
    /// config whose effective cgroupDriver differs is refused (a runtime that does not
    /// report its driver to the kubelet would run it, and no new pod could start), and
    /// configz showing this driver is what the kubelet runs.
    #[arg(
        long,
        env = "KUBELET_GITOPS_CGROUP_DRIVER",
        value_enum,
        default_value = "systemd"
    )]
    pub cgroup_driver: CgroupDriverArg,

    /// The cgroup hierarchy: `auto` looks for cgroup.controllers under --cgroup-root (v2).
    #[arg(
        long,
        env = "KUBELET_GITOPS_CGROUP_VERSION",
        value_enum,
        default_value = "auto"
    )]
    pub cgroup_version: CgroupVersionArg,

    /// How long a config must run healthy before it becomes last-known-good, when the
    /// Node has no kubelet-gitops.io/lkg-grace annotation.
    #[arg(
        long,
        env = "KUBELET_GITOPS_LKG_GRACE",
        value_name = "DURATION",
        default_value = "10m"
    )]
    pub lkg_grace: humantime::Duration,

    /// How often the kubelet's config file is compared with what the agent wrote
    /// (and the agent re-checks everything, events or not).
    #[arg(
        long,
        env = "KUBELET_GITOPS_RESYNC_INTERVAL",
        value_name = "DURATION",
        default_value = "1m"
    )]
    pub resync_interval: humantime::Duration,

    /// How long the API server holds each watch (the Node's, the ConfigMap's) open before
    /// the agent opens it again, from where it was. A watch that gets nothing, not even
    /// the API server's bookmark (about one a minute), for this long plus 5 s is taken for
    /// a dead connection and opened again. Whole seconds, at most 1h.
    #[arg(
        long,
        env = "KUBELET_GITOPS_WATCH_TIMEOUT",
        value_name = "DURATION",
        default_value = "30m"
    )]
    pub watch_timeout: humantime::Duration,

    /// The admin address: /healthz, /readyz, /metrics.
    #[arg(
        long,
        env = "KUBELET_GITOPS_ADMIN_ADDR",
        value_name = "ADDR",
        default_value = "0.0.0.0:9102"
    )]
    pub admin_addr: SocketAddr,

    /// Log format.
    #[arg(
        long,
        env = "KUBELET_GITOPS_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

/// The options the agent and kubelet-gitops-rescue share: the rescue finds what the agent
/// keeps where the agent keeps it, and writes the kubelet's config where the agent writes
/// it, so both take them from one definition. Host paths (the rescue runs on the host, the
/// agent reads them under --host-root).
#[derive(Debug, clap::Args)]
pub struct SharedArgs {
    /// Where the agent keeps its checkpoints (meta/assigned, meta/last-known-good,
    /// checkpoints/<uid>/<resourceVersion>/kubelet), like the kubelet's old
    /// --dynamic-config-dir. Must survive reboots and agent upgrades: a hostPath.
    #[arg(
        long,
        env = "KUBELET_GITOPS_CHECKPOINT_DIR",
        value_name = "DIR",
        default_value = "/var/lib/kubelet-gitops"
    )]
    pub checkpoint_dir: PathBuf,

    /// How the config reaches the kubelet: `replace` writes the kubelet's --config file
    /// (the node's own file is kept in the checkpoint dir and restored when the node
    /// leaves its pool); `drop-in` writes 50-kubelet-gitops.conf into the kubelet's
    /// --config-dir (Kubernetes 1.30+) and leaves the node's file alone.
    #[arg(
        long,
        env = "KUBELET_GITOPS_MODE",
        value_enum,
        default_value = "replace"
    )]
    pub mode: Mode,

    /// The kubelet's config file (replace mode). The agent's default: the --config of the
    /// kubelet's command line; the rescue, which does not read it, needs this option.
    #[arg(long, env = "KUBELET_GITOPS_KUBELET_CONFIG", value_name = "FILE")]
    pub kubelet_config: Option<PathBuf>,

    /// The kubelet's drop-in directory (drop-in mode). The agent's default: the
    /// --config-dir of the kubelet's command line; the rescue, which does not read it,
    /// needs this option.
    #[arg(long, env = "KUBELET_GITOPS_DROP_IN_DIR", value_name = "DIR")]
    pub drop_in_dir: Option<PathBuf>,

    /// How long the kubelet has to come back healthy after a restart when the Node has no
    /// kubelet-gitops.io/health-timeout annotation (the rescue, without API server
    /// access, always takes this one).
    #[arg(
        long,
        env = "KUBELET_GITOPS_HEALTH_TIMEOUT",
        value_name = "DURATION",
        default_value = "2m"
    )]
    pub health_timeout: humantime::Duration,

    /// Log filter (tracing-subscriber EnvFilter syntax, e.g. `info,node_agent=debug`).
    #[arg(
        long,
        env = "KUBELET_GITOPS_LOG",
        value_name = "FILTER",
        default_value = "info"
    )]
    pub log: String,
}

/// How the config reaches the kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Write the kubelet's --config file.
    Replace,
    /// Write a drop-in into the kubelet's --config-dir.
    DropIn,
}

/// `--flags-from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlagsFrom {
    /// The running kubelet's /proc/<pid>/cmdline.
    Proc,
    /// Env files (kubeadm-flags.env, /etc/default/kubelet).
    Files,
    /// The kubelet's systemd unit and drop-ins.
    Systemd,
}

/// `--restart-method`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RestartMethodArg {
    /// systemd's RestartUnit over D-Bus.
    Systemd,
    /// A command.
    Command,
}

/// `--cgroup-driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CgroupDriverArg {
    /// systemd slices.
    Systemd,
    /// Plain cgroupfs paths.
    Cgroupfs,
}

/// `--cgroup-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CgroupVersionArg {
    /// Detect from the cgroup root.
    Auto,
    /// Legacy hierarchy.
    V1,
    /// Unified hierarchy.
    V2,
}

pub use kubelet_gitops_core::logging::LogFormat;

/// Where the agent writes the config; the path is resolved against the host root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Replace the kubelet's config file; `None`: the --config of the kubelet's flags.
    Replace(Option<PathBuf>),
    /// Write [`DROP_IN_FILE`] into the drop-in dir; `None`: the kubelet's --config-dir.
    DropIn(Option<PathBuf>),
}

/// The agent's validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// This node's name.
    pub node_name: String,
    /// The kubeconfig, if one was given.
    pub kubeconfig: Option<PathBuf>,
    /// The checkpoint directory, under the host root.
    pub checkpoint_dir: PathBuf,
    /// Where the config goes (host paths; resolved at start).
    pub target: Target,
    /// Where the kubelet's flags come from (host paths).
    pub flag_source: FlagSource,
    /// How the kubelet is restarted.
    pub restart: RestartMethod,
    /// The kubelet's healthz URL.
    pub healthz_url: String,
    /// The kubelet's configz URL, if configz is used.
    pub configz_url: Option<String>,
    /// A bearer token file for configz.
    pub kubelet_token_file: Option<PathBuf>,
    /// CAs for the kubelet's serving certificate.
    pub kubelet_ca_file: Option<PathBuf>,
    /// Skip the kubelet's certificate check.
    pub kubelet_insecure_skip_tls_verify: bool,
    /// The host's `/`.
    pub host_root: PathBuf,
    /// The cgroup hierarchy, its root under the host root.
    pub cgroups: CgroupConfig,
    /// The default health timeout.
    pub health_timeout: Duration,
    /// The default last-known-good grace.
    pub lkg_grace: Duration,
    /// How often to re-check everything (drift included).
    pub resync_interval: Duration,
    /// The watches' server-side timeout.
    pub watch_timeout: WatchTimeout,
    /// The admin address.
    pub admin_addr: SocketAddr,
    /// The log format.
    pub log_format: LogFormat,
    /// The log filter.
    pub log: String,
}

/// An option value the agent cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// `--node-name` is empty or not a valid Node name.
    #[error("--node-name {0:?} is not a valid Node name (a lowercase RFC 1123 subdomain)")]
    NodeName(String),
    /// `--restart-method=command` without a command.
    #[error("--restart-method=command needs --restart-command (KUBELET_GITOPS_RESTART_COMMAND)")]
    NoRestartCommand,
    /// The restart command does not split into words.
    #[error("--restart-command {command:?} is not a valid command line: {reason}")]
    RestartCommand { command: String, reason: String },
    /// A URL that is not http(s).
    #[error("--{option} {url:?} is not an http:// or https:// URL")]
    Url { option: &'static str, url: String },
    /// A zero duration where one is needed.
    #[error("--{option} must be longer than zero")]
    ZeroDuration { option: &'static str },
    /// `--watch-timeout` out of range.
    #[error("--watch-timeout {0} must be whole seconds from 1s to 1h")]
    WatchTimeout(humantime::Duration),
    /// A path option that is not absolute.
    #[error("--{option} {path} must be an absolute path")]
    NotAbsolute { option: &'static str, path: PathBuf },
    /// `--cgroup-version=auto` cannot tell.
    #[error("--cgroup-version=auto: set --cgroup-version explicitly")]
    CgroupVersion(#[source] crate::error::CgroupError),
}

/// How long the API server holds a watch open (`timeoutSeconds`), whole seconds from 1 s
/// to 1 h.
///
/// kube-runtime's default is 290 s: a re-open every 290 s per watch, 3.4 a second per
/// 1,000 idle agents. The agent's default, 30 minutes, is the shortest kube-apiserver
/// gives a watch that names none (`--min-request-timeout`, 1800 s; it picks 30 to 60
/// minutes): 0.56 a second per 1,000 agents. kube's client sets no read timeout (kube 5),
/// so nothing else bounds a watch; what the length costs is said at
/// [`WatchTimeout::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchTimeout(u32);

impl WatchTimeout {
    /// The longest: a connection that died without a word (no FIN, no RST: a control-plane
    /// host lost behind a service IP) is only noticed when kube-runtime's idle timer runs
    /// out, this long plus 5 s after the last event or bookmark, so the agent would miss
    /// a new desired config for as long.
    pub const MAX: WatchTimeout = WatchTimeout(3600);

    /// `d` when it is whole seconds from 1 s to [`WatchTimeout::MAX`].
    pub fn new(d: humantime::Duration) -> Result<WatchTimeout, ArgsError> {
        let std: Duration = d.into();
        match u32::try_from(std.as_secs()) {
            Ok(secs) if (1..=Self::MAX.0).contains(&secs) && std.subsec_nanos() == 0 => {
                Ok(WatchTimeout(secs))
            }
            _ => Err(ArgsError::WatchTimeout(d)),
        }
    }

    /// In seconds, as `timeoutSeconds` takes it.
    pub fn secs(self) -> u32 {
        self.0
    }
}

fn absolute(option: &'static str, path: &Path) -> Result<(), ArgsError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(ArgsError::NotAbsolute {
            option,
            path: path.to_path_buf(),
        })
    }
}

fn url(option: &'static str, value: &str) -> Result<String, ArgsError> {
    if value.starts_with("http://") || value.starts_with("https://") {
        Ok(value.to_string())
    } else {
        Err(ArgsError::Url {
            option,
            url: value.to_string(),
        })
    }
}

fn nonzero(option: &'static str, d: humantime::Duration) -> Result<Duration, ArgsError> {
    let d: Duration = d.into();
    if d.is_zero() {
        Err(ArgsError::ZeroDuration { option })
    } else {
        Ok(d)
    }
}

impl Args {
    /// Validates the options and reads what must be read once (the cgroup version).
    pub fn into_config(self) -> Result<Config, ArgsError> {
        let Args {
            node_name,
            kubeconfig,
            shared:
                SharedArgs {
                    checkpoint_dir,
                    mode,
                    kubelet_config,
                    drop_in_dir,
                    health_timeout,
                    log,
                },
            flags_from,
            flags_file,
            kubelet_unit_file,
            restart_method,
            kubelet_unit,
            restart_command,
            healthz_url,
            configz_url,
            kubelet_token_file,
            kubelet_ca_file,
            kubelet_insecure_skip_tls_verify,
            host_root,
            cgroup_root,
            cgroup_driver,
            cgroup_version,
            lkg_grace,
            resync_interval,
            watch_timeout,
            admin_addr,
            log_format,
        } = self;
        if !names::is_dns1123_subdomain(&node_name) {
            return Err(ArgsError::NodeName(node_name));
        }
        absolute("host-root", &host_root)?;
        absolute("checkpoint-dir", &checkpoint_dir)?;
        absolute("cgroup-root", &cgroup_root)?;
        for f in &flags_file {
            absolute("flags-file", f)?;
        }
        absolute("kubelet-unit-file", &kubelet_unit_file)?;
        if let Some(p) = &kubelet_config {
            absolute("kubelet-config", p)?;
        }
        if let Some(p) = &drop_in_dir {
            absolute("drop-in-dir", p)?;
        }
        let target = match mode {
            Mode::Replace => Target::Replace(kubelet_config),
            Mode::DropIn => Target::DropIn(drop_in_dir),
        };
        let flag_source = match flags_from {
            FlagsFrom::Proc => FlagSource::Proc,
            FlagsFrom::Files => FlagSource::Files(flags_file),
            FlagsFrom::Systemd => FlagSource::SystemdUnit(kubelet_unit_file),
        };
        let restart = match restart_method {
            RestartMethodArg::Systemd => RestartMethod::Systemd { unit: kubelet_unit },
            RestartMethodArg::Command => {
                let command = restart_command.ok_or(ArgsError::NoRestartCommand)?;
                let words =
                    kubelet_gitops_core::flags::split_command_line(&command).map_err(|e| {
                        ArgsError::RestartCommand {
                            command: command.clone(),
                            reason: e.to_string(),
                        }
                    })?;
                if words.is_empty() {
                    return Err(ArgsError::NoRestartCommand);
                }
                RestartMethod::Command(words)
            }
        };
        let healthz_url = url("healthz-url", &healthz_url)?;
        let configz_url = configz_url.map(|u| url("configz-url", &u)).transpose()?;
        let cgroup_root = host_path(&host_root, &cgroup_root);
        let version = match cgroup_version {
            CgroupVersionArg::V1 => CgroupVersion::V1,
            CgroupVersionArg::V2 => CgroupVersion::V2,
            CgroupVersionArg::Auto => {
                detect_version(&cgroup_root).map_err(ArgsError::CgroupVersion)?
            }
        };
        let driver = match cgroup_driver {
            CgroupDriverArg::Systemd => CgroupDriver::Systemd,
            CgroupDriverArg::Cgroupfs => CgroupDriver::Cgroupfs,
        };
        Ok(Config {
            checkpoint_dir: host_path(&host_root, &checkpoint_dir),
            node_name,
            kubeconfig,
            target,
            flag_source,
            restart,
            healthz_url,
            configz_url,
            kubelet_token_file,
            kubelet_ca_file,
            kubelet_insecure_skip_tls_verify,
            cgroups: CgroupConfig {
                root: cgroup_root,
                version,
                driver,
            },
            host_root,
            health_timeout: nonzero("health-timeout", health_timeout)?,
            lkg_grace: lkg_grace.into(),
            resync_interval: nonzero("resync-interval", resync_interval)?,
            watch_timeout: WatchTimeout::new(watch_timeout)?,
            admin_addr,
            log_format,
            log,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["kubelet-gitops-agent"];
        argv.extend_from_slice(args);
        let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
        args.into_config().map_err(|e| e.to_string())
    }

    fn cgroup_v2_root() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
        dir
    }

    #[test]
    fn defaults_are_a_kubeadm_node() {
        let cg = cgroup_v2_root();
        let c = parse(&[
            "--node-name=w1",
            "--cgroup-root",
            cg.path().to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(c.node_name, "w1");
        assert_eq!(c.target, Target::Replace(None));
        assert_eq!(c.checkpoint_dir, PathBuf::from("/var/lib/kubelet-gitops"));
        assert!(matches!(&c.flag_source, FlagSource::Files(f) if f.len() == 2));
        assert!(matches!(&c.restart, RestartMethod::Systemd { unit } if unit == "kubelet.service"));
        assert_eq!(c.health_timeout, Duration::from_secs(120));
        assert_eq!(c.lkg_grace, Duration::from_secs(600));
        assert_eq!(c.cgroups.version, CgroupVersion::V2);
        assert_eq!(c.healthz_url, "http://127.0.0.1:10248/healthz");
        assert_eq!(c.configz_url, None);
        assert_eq!(c.watch_timeout.secs(), 1800);
    }

    #[test]
    fn host_paths_go_under_the_host_root() {
        let host = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(host.path().join("sys/fs/cgroup/memory")).unwrap();
        let c = parse(&[
            "--node-name=w1",
            "--host-root",
            host.path().to_str().unwrap(),
            "--mode=drop-in",
            "--drop-in-dir=/etc/kubernetes/kubelet.conf.d",
        ])
        .unwrap();
        assert_eq!(c.checkpoint_dir, host.path().join("var/lib/kubelet-gitops"));
        assert_eq!(c.cgroups.root, host.path().join("sys/fs/cgroup"));
        assert_eq!(c.cgroups.version, CgroupVersion::V1, "controller dirs: v1");
        assert_eq!(
            c.target,
            Target::DropIn(Some("/etc/kubernetes/kubelet.conf.d".into())),
            "resolved against the host root when used"
        );
    }

    #[test]
    fn a_restart_command_is_split_into_words() {
        let cg = cgroup_v2_root();
        let c = parse(&[
            "--node-name=w1",
            "--cgroup-root",
            cg.path().to_str().unwrap(),
            "--restart-method=command",
            "--restart-command",
            "curl -fsS -X POST 'http://127.0.0.1:1/sim/v1/nodes/w1/kubelet/restart'",
        ])
        .unwrap();
        match c.restart {
            RestartMethod::Command(words) => {
                assert_eq!(words.len(), 5);
                assert_eq!(
                    words[4],
                    "http://127.0.0.1:1/sim/v1/nodes/w1/kubelet/restart"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_options_say_which_and_why() {
        let cg = cgroup_v2_root();
        let root = cg.path().to_str().unwrap();
        let err = parse(&["--node-name=W_1", "--cgroup-root", root]).unwrap_err();
        assert!(err.contains("--node-name \"W_1\""), "{err}");
        let err = parse(&[
            "--node-name=w1",
            "--cgroup-root",
            root,
            "--restart-method=command",
        ])
        .unwrap_err();
        assert!(err.contains("needs --restart-command"), "{err}");
        let err = parse(&[
            "--node-name=w1",
            "--cgroup-root",
            root,
            "--healthz-url=localhost:1",
        ])
        .unwrap_err();
        assert!(err.contains("--healthz-url"), "{err}");
        let err = parse(&[
            "--node-name=w1",
            "--cgroup-root",
            root,
            "--health-timeout=0s",
        ])
        .unwrap_err();
        assert!(
            err.contains("--health-timeout must be longer than zero"),
            "{err}"
        );
        let err = parse(&[
            "--node-name=w1",
            "--cgroup-root",
            root,
            "--checkpoint-dir=rel",
        ])
        .unwrap_err();
        assert!(err.contains("absolute"), "{err}");
        for bad in ["0s", "1500ms", "61m"] {
            let err = parse(&[
                "--node-name=w1",
                "--cgroup-root",
                root,
                &format!("--watch-timeout={bad}"),
            ])
            .unwrap_err();
            assert!(
                err.contains("--watch-timeout") && err.contains("from 1s to 1h"),
                "{bad}: {err}"
            );
        }
        let missing = parse(&["--node-name=w1", "--cgroup-root=/nonexistent/cg"]).unwrap_err();
        assert!(missing.contains("--cgroup-version"), "{missing}");
    }

    #[test]
    fn every_option_has_an_environment_variable() {
        use clap::CommandFactory;
        let cmd = Args::command();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            assert!(arg.get_env().is_some(), "--{id} has no env var");
            assert!(arg.get_help().is_some(), "--{id} has no help");
        }
    }
}
