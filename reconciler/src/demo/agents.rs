//! One real `kubelet-gitops-agent` process per simulated node: finding the binary,
//! starting the processes with their logs in files, noticing one that died, and ending
//! them.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use super::error::{DemoError, io};

/// The agent's binary name.
pub const AGENT_BIN: &str = "kubelet-gitops-agent";

/// The agent binary: `explicit` (`--agent-bin`), else next to `current_exe`, else on
/// `path` (`$PATH`).
pub fn find_agent(
    explicit: Option<&Path>,
    current_exe: Option<&Path>,
    path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, DemoError> {
    if let Some(bin) = explicit {
        return if bin.is_file() {
            Ok(bin.to_path_buf())
        } else {
            Err(DemoError::AgentBin {
                path: bin.to_path_buf(),
            })
        };
    }
    let mut searched = Vec::new();
    if let Some(dir) = current_exe.and_then(Path::parent) {
        let candidate = dir.join(AGENT_BIN);
        if candidate.is_file() {
            return Ok(candidate);
        }
        searched.push(candidate.display().to_string());
    }
    if let Some(found) = on_path(AGENT_BIN, path) {
        return Ok(found);
    }
    searched.push(format!("{AGENT_BIN} on PATH"));
    Err(DemoError::AgentNotFound {
        searched: searched.join(", "),
    })
}

/// `name` in the directories of `path` (`$PATH`), if it is a file in one of them.
pub fn on_path(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A running agent.
struct Agent {
    node: String,
    log: PathBuf,
    child: Child,
}

/// The agents of every node.
#[derive(Default)]
pub struct Agents {
    agents: Vec<Agent>,
}

impl Agents {
    /// Starts `bin` with `args` for `node`, its stdout and stderr appended to `log`. The
    /// process is killed when [`Agents`] is dropped, should [`Agents::stop`] not run.
    pub fn spawn(
        &mut self,
        node: &str,
        bin: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<(), DemoError> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(io("open", log))?;
        let err = out.try_clone().map_err(io("open", log))?;
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| DemoError::SpawnAgent {
                node: node.to_string(),
                bin: bin.to_path_buf(),
                source,
            })?;
        self.agents.push(Agent {
            node: node.to_string(),
            log: log.to_path_buf(),
            child,
        });
        Ok(())
    }

    /// An error for the first agent that has exited, if any.
    pub fn check(&mut self) -> Result<(), DemoError> {
        for agent in &mut self.agents {
            if let Ok(Some(status)) = agent.child.try_wait() {
                return Err(DemoError::AgentExited {
                    node: agent.node.clone(),
                    status: status.to_string(),
                    log: agent.log.clone(),
                    tail: tail(&agent.log, 15),
                });
            }
        }
        Ok(())
    }

    /// Kills every agent and waits for it to exit. An agent is crash-safe by design (it
    /// resumes from its checkpoints), so no graceful stop is needed.
    pub async fn stop(&mut self) {
        for agent in &mut self.agents {
            if let Err(e) = agent.child.start_kill() {
                tracing::debug!(node = %agent.node, error = %e, "agent already gone");
            }
        }
        for mut agent in self.agents.drain(..) {
            if let Err(e) = agent.child.wait().await {
                tracing::warn!(node = %agent.node, error = %e, "cannot reap the agent");
            }
        }
    }

    /// How many agents run.
    pub fn len(&self) -> usize {
        self.agents.len()
    }
}

/// The last `lines` lines of `file` (empty when it cannot be read).
pub fn tail(file: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_found_beside_the_executable_then_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let beside = dir.path().join("bin");
        let elsewhere = dir.path().join("path");
        std::fs::create_dir_all(&beside).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        let exe = beside.join("kubelet-gitops");
        let path = std::env::join_paths([&elsewhere]).unwrap();

        let missing = find_agent(None, Some(&exe), Some(&path)).unwrap_err();
        let text = missing.to_string();
        assert!(
            text.contains("cargo build --release -p node-agent -p reconciler"),
            "{text}"
        );
        assert!(
            text.contains(&beside.join(AGENT_BIN).display().to_string()),
            "{text}"
        );

        std::fs::write(elsewhere.join(AGENT_BIN), "").unwrap();
        assert_eq!(
            find_agent(None, Some(&exe), Some(&path)).unwrap(),
            elsewhere.join(AGENT_BIN)
        );
        std::fs::write(beside.join(AGENT_BIN), "").unwrap();
        assert_eq!(
            find_agent(None, Some(&exe), Some(&path)).unwrap(),
            beside.join(AGENT_BIN)
        );

        let explicit = dir.path().join("nope");
        assert!(matches!(
            find_agent(Some(&explicit), Some(&exe), Some(&path)),
            Err(DemoError::AgentBin { .. })
        ));
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("log");
        std::fs::write(&f, "a\nb\nc\n").unwrap();
        assert_eq!(tail(&f, 2), "b\nc");
        assert_eq!(tail(&f, 10), "a\nb\nc");
        assert_eq!(tail(&dir.path().join("none"), 2), "");
    }
}
