//! The `run` command's arguments ([`RunArgs`], every option a flag and a
//! `KUBELET_GITOPS_*` environment variable) and their validation into a
//! [`RunConfig`](crate::controller::RunConfig), once, at start.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::controller::{KubeSource, RunConfig};
use crate::git::{GitAuth, GitConfig};
use crate::leader::LeaseConfig;
use crate::render::RenderOptions;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    /// Human-readable lines with `key=value` fields.
    #[default]
    Text,
    /// One JSON object per line (for log collectors).
    Json,
}

/// `kubelet-gitops run`: follow a branch and roll its kubelet configs out to the nodes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Git source")]
pub struct RunArgs {
    /// The config repository: https://..., ssh://..., git@host:path, file:///path or a
    /// local path.
    #[arg(long, value_name = "URL", env = "KUBELET_GITOPS_REPO_URL")]
    pub repo_url: String,

    /// The branch to follow. A force-push is followed like any other push.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBELET_GITOPS_BRANCH",
        default_value = "main"
    )]
    pub branch: String,

    /// How often to poll the branch (humantime: 30s, 5m). Each poll also re-checks every
    /// node, so the interval bounds how long a missed event can go unnoticed.
    #[arg(
        long,
        value_name = "DURATION",
        env = "KUBELET_GITOPS_INTERVAL",
        default_value = "30s"
    )]
    pub interval: humantime::Duration,

    /// A file holding an https access token (read at every fetch, so a rotated Secret is
    /// picked up). Sent as the password of --git-username.
    #[arg(long, value_name = "FILE", env = "KUBELET_GITOPS_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,

    /// The user name sent with the token or ssh key. GitHub accepts any name, GitLab wants
    /// `oauth2`, Gitea the token's owner. Default: `git` for ssh, `kubelet-gitops` for
    /// https.
    #[arg(long, value_name = "NAME", env = "KUBELET_GITOPS_GIT_USERNAME")]
    pub git_username: Option<String>,

    /// An unencrypted private ssh key (OpenSSH or PEM) for ssh URLs.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_SSH_KEY_FILE",
        requires = "known_hosts_file",
        conflicts_with = "token_file"
    )]
    pub ssh_key_file: Option<PathBuf>,

    /// OpenSSH known_hosts holding the server's host key; required with --ssh-key-file
    /// (an unknown host key is refused, never trusted on first use).
    #[arg(long, value_name = "FILE", env = "KUBELET_GITOPS_KNOWN_HOSTS_FILE")]
    pub known_hosts_file: Option<PathBuf>,

    /// Where the bare clone of the branch is cached; reused across restarts (only new
    /// objects are fetched). Give it a writable volume.
    #[arg(
        long,
        value_name = "DIR",
        env = "KUBELET_GITOPS_CACHE_DIR",
        default_value = "/var/cache/kubelet-gitops"
    )]
    pub cache_dir: PathBuf,

    /// The directory of the repository that holds the config tree (kubelet-gitops.yaml,
    /// base/, pools/), e.g. clusters/prod. Default: the top of the repository.
    #[arg(
        long,
        value_name = "DIR",
        env = "KUBELET_GITOPS_ROOT",
        default_value = ""
    )]
    pub root: String,

    /// Read only files matching these globs (relative to --root); added to the
    /// repository's own `include`. Repeatable or comma-separated.
    #[arg(
        long,
        value_name = "GLOB",
        env = "KUBELET_GITOPS_INCLUDE",
        value_delimiter = ','
    )]
    pub include: Vec<String>,

    /// Ignore files matching these globs (relative to --root); added to the repository's
    /// own `exclude`. Repeatable or comma-separated.
    #[arg(
        long,
        value_name = "GLOB",
        env = "KUBELET_GITOPS_EXCLUDE",
        value_delimiter = ','
    )]
    pub exclude: Vec<String>,

    /// Publish ConfigMaps in this namespace instead of the one kubelet-gitops.yaml names.
    /// It must exist.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "KUBELET_GITOPS_NAMESPACE",
        help_heading = "Cluster"
    )]
    pub namespace: Option<String>,

    /// The kubeconfig to use. Default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// service account.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_KUBECONFIG",
        help_heading = "Cluster"
    )]
    pub kubeconfig: Option<PathBuf>,

    /// This replica's name in logs, the Lease and the API server's audit log (its
    /// User-Agent). Default: $HOSTNAME (the pod name), else kubelet-gitops-<pid>.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBELET_GITOPS_IDENTITY",
        help_heading = "Cluster"
    )]
    pub identity: Option<String>,

    /// Elect a leader with a coordination.k8s.io Lease, so that several replicas can run
    /// and only the leader writes; the others serve /healthz and /readyz and wait.
    #[arg(
        long,
        env = "KUBELET_GITOPS_LEADER_ELECT",
        help_heading = "Leader election",
        conflicts_with = "once"
    )]
    pub leader_elect: bool,

    /// The Lease's name.
    #[arg(
        long,
        value_name = "NAME",
        env = "KUBELET_GITOPS_LEASE_NAME",
        default_value = "kubelet-gitops",
        help_heading = "Leader election"
    )]
    pub lease_name: String,

    /// The Lease's namespace (must exist).
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "KUBELET_GITOPS_LEASE_NAMESPACE",
        default_value = "kubelet-gitops",
        help_heading = "Leader election"
    )]
    pub lease_namespace: String,

    /// How long the lease lasts without renewal before another replica takes over
    /// (whole seconds; the leader renews every seventh of it and steps down after two
    /// thirds without success). A leader that shuts down hands over at once.
    #[arg(
        long,
        value_name = "DURATION",
        env = "KUBELET_GITOPS_LEASE_DURATION",
        default_value = "15s",
        help_heading = "Leader election"
    )]
    pub lease_duration: humantime::Duration,

    /// Where to serve /metrics, /healthz, /readyz (and the webhook). All interfaces by
    /// default, so the kubelet's probes and Prometheus reach it on the pod IP; `off`
    /// serves nothing.
    #[arg(
        long,
        value_name = "ADDR",
        env = "KUBELET_GITOPS_ADMIN_ADDR",
        default_value = "0.0.0.0:9090",
        help_heading = "Serving"
    )]
    pub admin_addr: String,

    /// Serve a push webhook on POST /hooks/git of the admin port; a request whose HMAC
    /// signature (GitHub, Gitea, GitLab token) does not verify with this file's secret is
    /// rejected. A valid push wakes the poll at once.
    #[arg(
        long,
        value_name = "FILE",
        env = "KUBELET_GITOPS_WEBHOOK_SECRET_FILE",
        help_heading = "Serving"
    )]
    pub webhook_secret_file: Option<PathBuf>,

    /// Log format.
    #[arg(
        long,
        value_enum,
        env = "KUBELET_GITOPS_LOG_FORMAT",
        default_value = "text",
        help_heading = "Logging"
    )]
    pub log_format: LogFormat,

    /// Log filter (tracing's EnvFilter syntax: info, debug, reconciler=debug,kube=warn).
    #[arg(
        long,
        value_name = "FILTER",
        env = "KUBELET_GITOPS_LOG",
        default_value = "info",
        help_heading = "Logging"
    )]
    pub log: String,

    /// Fetch, render, publish and reconcile once, then exit (for CI and tests): exit 0 if
    /// the commit applied, 1 if it does not validate, 2 on any other failure.
    #[arg(long, env = "KUBELET_GITOPS_ONCE", help_heading = "Running")]
    pub once: bool,
}

/// An option that does not make sense.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("--admin-addr {value:?}: expected HOST:PORT (0.0.0.0:9090) or `off`")]
    AdminAddr { value: String },
    #[error("{flag} {path}: {source}")]
    Path {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--known-hosts-file is only used with --ssh-key-file")]
    KnownHostsWithoutKey,
    #[error("--lease-duration {0}: must be at least 1s")]
    LeaseDuration(humantime::Duration),
    #[error("--interval {0}: must be at least 100ms")]
    Interval(humantime::Duration),
    #[error("--webhook-secret-file needs the admin port (--admin-addr is off)")]
    WebhookWithoutAdmin,
}

/// An absolute form of `path` (relative to the working directory), checked to exist.
fn existing(flag: &'static str, path: &Path) -> Result<PathBuf, ArgsError> {
    std::path::absolute(path)
        .and_then(|p| std::fs::metadata(&p).map(|_| p))
        .map_err(|source| ArgsError::Path {
            flag,
            path: path.to_path_buf(),
            source,
        })
}

impl RunArgs {
    /// Validates the arguments into the controller's configuration: paths made absolute
    /// and checked, durations bounded, the webhook secret read.
    pub fn into_config(self) -> Result<RunConfig, ArgsError> {
        let RunArgs {
            repo_url,
            branch,
            interval,
            token_file,
            git_username,
            ssh_key_file,
            known_hosts_file,
            cache_dir,
            root,
            include,
            exclude,
            namespace,
            kubeconfig,
            identity,
            leader_elect,
            lease_name,
            lease_namespace,
            lease_duration,
            admin_addr,
            webhook_secret_file,
            log_format: _,
            log: _,
            once,
        } = self;

        let auth = match (token_file, ssh_key_file, known_hosts_file) {
            (Some(token), None, None) => GitAuth::Token {
                username: git_username.unwrap_or_else(|| "kubelet-gitops".to_string()),
                token_file: existing("--token-file", &token)?,
            },
            (None, Some(key), Some(hosts)) => GitAuth::Ssh {
                username: git_username.unwrap_or_else(|| "git".to_string()),
                key_file: existing("--ssh-key-file", &key)?,
                known_hosts_file: existing("--known-hosts-file", &hosts)?,
            },
            (None, None, None) => GitAuth::None,
            (_, None, Some(_)) => return Err(ArgsError::KnownHostsWithoutKey),
            // clap rejects the other combinations (ssh key without known_hosts, both auths).
            _ => return Err(ArgsError::KnownHostsWithoutKey),
        };
        let cache_dir = std::path::absolute(&cache_dir).map_err(|source| ArgsError::Path {
            flag: "--cache-dir",
            path: cache_dir.clone(),
            source,
        })?;
        let interval: Duration = interval.into();
        if interval < Duration::from_millis(100) {
            return Err(ArgsError::Interval(interval.into()));
        }
        let kube = match kubeconfig {
            Some(path) => KubeSource::Kubeconfig(existing("--kubeconfig", &path)?),
            None => KubeSource::Infer,
        };
        let identity = identity
            .filter(|s| !s.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| format!("kubelet-gitops-{}", std::process::id()));
        let lease_duration: Duration = lease_duration.into();
        if lease_duration < Duration::from_secs(1) {
            return Err(ArgsError::LeaseDuration(lease_duration.into()));
        }
        let leader = leader_elect.then(|| {
            LeaseConfig::new(
                lease_name,
                lease_namespace,
                identity.clone(),
                lease_duration,
            )
        });
        let admin_addr = match admin_addr.as_str() {
            "off" | "" => None,
            s => Some(s.parse::<SocketAddr>().map_err(|_| ArgsError::AdminAddr {
                value: s.to_string(),
            })?),
        };
        let webhook_secret = match webhook_secret_file {
            Some(_) if admin_addr.is_none() => return Err(ArgsError::WebhookWithoutAdmin),
            Some(path) => Some(existing("--webhook-secret-file", &path)?),
            None => None,
        };
        let mut config = RunConfig::new(
            GitConfig {
                url: repo_url,
                branch,
                auth,
                cache_dir,
                extra_refspecs: Vec::new(),
            },
            kube,
            identity,
        );
        config.interval = interval;
        config.render = RenderOptions {
            root,
            include,
            exclude,
        };
        config.namespace = namespace;
        config.leader = leader;
        config.admin_addr = admin_addr;
        config.webhook_secret_file = webhook_secret;
        config.once = once;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("kubelet-gitops").chain(args.iter().copied()))
            .map(|c| c.run)
    }

    #[test]
    fn defaults_and_validation() {
        let dir = tempfile::tempdir().unwrap();
        let a = parse(&["--repo-url", "file:///srv/repo", "--cache-dir", "cache"]).unwrap();
        assert_eq!(a.branch, "main");
        assert_eq!(Duration::from(a.interval), Duration::from_secs(30));
        assert_eq!(a.admin_addr, "0.0.0.0:9090");
        let c = a.into_config().unwrap();
        assert!(c.git.cache_dir.is_absolute());
        assert_eq!(c.git.auth, GitAuth::None);
        assert!(c.leader.is_none());
        assert_eq!(c.admin_addr, Some("0.0.0.0:9090".parse().unwrap()));

        let token = dir.path().join("token");
        std::fs::write(&token, "t0k3n\n").unwrap();
        let c = parse(&[
            "--repo-url",
            "https://git.example.com/fleet.git",
            "--token-file",
            token.to_str().unwrap(),
            "--leader-elect",
            "--lease-duration",
            "6s",
            "--identity",
            "replica-a",
            "--include",
            "pools/*.yaml,base/**",
            "--admin-addr",
            "off",
        ])
        .unwrap()
        .into_config()
        .unwrap();
        assert!(
            matches!(&c.git.auth, GitAuth::Token { username, .. } if username == "kubelet-gitops")
        );
        let lease = c.leader.unwrap();
        assert_eq!(lease.identity, "replica-a");
        assert_eq!(lease.lease_duration, Duration::from_secs(6));
        assert_eq!(lease.renew_deadline, Duration::from_secs(4));
        assert_eq!(c.render.include, ["pools/*.yaml", "base/**"]);
        assert_eq!(c.admin_addr, None);

        assert!(
            parse(&["--repo-url", "x", "--ssh-key-file", "k"]).is_err(),
            "needs known_hosts"
        );
        assert!(parse(&["--repo-url", "x", "--once", "--leader-elect"]).is_err());
        let missing = parse(&["--repo-url", "x", "--token-file", "/nonexistent/token"])
            .unwrap()
            .into_config();
        assert!(
            matches!(
                missing,
                Err(ArgsError::Path {
                    flag: "--token-file",
                    ..
                })
            ),
            "{missing:?}"
        );
        let bad = parse(&["--repo-url", "x", "--admin-addr", "nine"])
            .unwrap()
            .into_config();
        assert!(matches!(bad, Err(ArgsError::AdminAddr { .. })));
        let fast = parse(&["--repo-url", "x", "--interval", "10ms"])
            .unwrap()
            .into_config();
        assert!(matches!(fast, Err(ArgsError::Interval(_))));
    }

    #[test]
    fn every_option_has_an_environment_variable() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            let env = arg.get_env().and_then(|e| e.to_str()).unwrap_or_default();
            assert!(
                env.starts_with("KUBELET_GITOPS_"),
                "--{id} has no KUBELET_GITOPS_* variable"
            );
            assert!(arg.get_help().is_some(), "--{id} has no help");
        }
    }
}
