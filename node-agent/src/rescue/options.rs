//! The rescue's command line: the options it shares with the agent are the agent's own
//! ([`SharedArgs`], flattened into both), so they cannot drift apart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use kubelet_gitops_core::flags::DEFAULT_ROOT_DIR;

use super::RescueError;
use super::act::Settings;
use crate::args::{DROP_IN_FILE, Mode, SharedArgs};
use crate::config_file::Placement;

/// Rolls the kubelet back to its last-known-good config when it keeps failing with a
/// kubelet-gitops config in flight and no agent is running to do it.
///
/// Runs on the host, before every start of the kubelet, from a systemd drop-in on
/// kubelet.service: ExecStartPre=-/opt/kubelet-gitops/bin/kubelet-gitops-rescue ...
/// (deploy/host/). It reads the agent's checkpoint directory and, unless a config is in
/// flight (meta/assigned phase Written or Restarted, no verdict) and the agent is not
/// running (it holds <checkpoint-dir>/agent.lock), exits at once without writing anything.
/// With a config in flight and no agent, it records when it first saw it (meta/rescue) and
/// lets the kubelet start; once the kubelet has kept restarting for the health timeout, it
/// records the verdict in meta/assigned, as the agent does, and writes the fallback
/// (last-known-good, else the node's own config) so that the kubelet start that follows
/// uses it. The agent reports RolledBack when it runs again.
///
/// It runs before every start, not on failure: kubeadm's kubelet.service has
/// Restart=always, so a crash-looping kubelet never reaches the failed state and an
/// OnFailure= unit would never run. Exit codes: 0 whatever it did, 1 on an error, 2 on
/// invalid options; the `-` of ExecStartPre ignores them all: the kubelet always starts.
///
/// The options it shares with the agent must say what the agent's say. Logs go to stderr:
/// the kubelet's journal.
#[derive(Debug, Parser)]
#[command(name = "kubelet-gitops-rescue", version, max_term_width = 100)]
pub struct RescueArgs {
    #[command(flatten)]
    pub shared: SharedArgs,

    /// The kubelet's --root-dir, where the state files a policy change makes stale
    /// (cpu_manager_state, memory_manager_state) are removed on a rollback.
    #[arg(
        long,
        env = "KUBELET_GITOPS_KUBELET_ROOT_DIR",
        value_name = "DIR",
        default_value = DEFAULT_ROOT_DIR
    )]
    pub kubelet_root_dir: PathBuf,
}

impl RescueArgs {
    /// Validates the options.
    pub fn into_settings(self) -> Result<Settings, RescueError> {
        let RescueArgs {
            shared:
                SharedArgs {
                    checkpoint_dir,
                    mode,
                    kubelet_config,
                    drop_in_dir,
                    health_timeout,
                    log: _,
                },
            kubelet_root_dir,
        } = self;
        let absolute = |option: &str, path: &Path| {
            if path.is_absolute() {
                Ok(())
            } else {
                Err(RescueError::Usage(format!(
                    "--{option} {} must be an absolute path",
                    path.display()
                )))
            }
        };
        absolute("checkpoint-dir", &checkpoint_dir)?;
        absolute("kubelet-root-dir", &kubelet_root_dir)?;
        let placement = match mode {
            Mode::Replace => {
                let path = kubelet_config.ok_or_else(|| {
                    RescueError::Usage(
                        "--mode=replace needs --kubelet-config (the kubelet's --config)".into(),
                    )
                })?;
                absolute("kubelet-config", &path)?;
                Placement::ConfigFile { path }
            }
            Mode::DropIn => {
                let dir = drop_in_dir.ok_or_else(|| {
                    RescueError::Usage(
                        "--mode=drop-in needs --drop-in-dir (the kubelet's --config-dir)".into(),
                    )
                })?;
                absolute("drop-in-dir", &dir)?;
                Placement::DropIn {
                    dir,
                    name: DROP_IN_FILE.to_string(),
                }
            }
        };
        let health_timeout: Duration = health_timeout.into();
        if health_timeout.is_zero() {
            return Err(RescueError::Usage(
                "--health-timeout must be longer than zero".into(),
            ));
        }
        Ok(Settings {
            checkpoint_dir,
            placement,
            kubelet_root_dir,
            health_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_takes_the_agents_names_and_defaults() {
        let agent = crate::args::Args::command();
        let rescue = RescueArgs::command();
        for id in [
            "checkpoint_dir",
            "mode",
            "kubelet_config",
            "drop_in_dir",
            "health_timeout",
            "log",
        ] {
            let a = agent.get_arguments().find(|a| a.get_id() == id).unwrap();
            let r = rescue.get_arguments().find(|a| a.get_id() == id).unwrap();
            assert_eq!(a.get_long(), r.get_long(), "{id}");
            assert_eq!(a.get_env(), r.get_env(), "{id}");
            assert_eq!(a.get_default_values(), r.get_default_values(), "{id}");
            assert_eq!(a.get_possible_values(), r.get_possible_values(), "{id}");
        }
        rescue.clone().debug_assert();
        let s =
            RescueArgs::try_parse_from(["x", "--kubelet-config", "/var/lib/kubelet/config.yaml"])
                .unwrap()
                .into_settings()
                .unwrap();
        assert_eq!(s.checkpoint_dir, Path::new("/var/lib/kubelet-gitops"));
        assert_eq!(s.health_timeout, Duration::from_secs(120));
        assert_eq!(s.kubelet_root_dir, Path::new(DEFAULT_ROOT_DIR));
        assert_eq!(
            s.placement,
            Placement::ConfigFile {
                path: "/var/lib/kubelet/config.yaml".into()
            }
        );
        let s = RescueArgs::try_parse_from([
            "x",
            "--mode=drop-in",
            "--drop-in-dir=/etc/kubernetes/kubelet.conf.d",
        ])
        .unwrap()
        .into_settings()
        .unwrap();
        assert_eq!(
            s.placement.target(),
            Path::new("/etc/kubernetes/kubelet.conf.d/50-kubelet-gitops.conf")
        );
        for (argv, want) in [
            (&["x"][..], "--kubelet-config"),
            (&["x", "--mode=drop-in"][..], "--drop-in-dir"),
            (&["x", "--kubelet-config=rel"][..], "absolute"),
            (
                &["x", "--kubelet-config=/k", "--health-timeout=0s"][..],
                "zero",
            ),
        ] {
            let e = RescueArgs::try_parse_from(argv)
                .unwrap()
                .into_settings()
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{argv:?}: {e}");
        }
    }
}
