//! The end of the story: the commit statuses from the remote's git notes, and where
//! everything is on disk.

use std::time::{Duration, Instant};

use super::cluster::DemoCluster;
use super::error::DemoError;
use super::view::short;
use super::{DEMO_NAMESPACE, Demo, NOTES_LIMIT, Workdir};
use crate::rollout::{PoolPhase, PoolReport};

impl Demo {
    /// Step 6: the commit statuses, from the remote's git notes once they show every
    /// pool's final state; the reconciler's pool reports if they do not in time.
    pub(super) async fn print_statuses(&mut self) -> Result<(), DemoError> {
        let sync = self
            .controller
            .as_ref()
            .map(|c| c.sync_state().borrow().clone())
            .unwrap_or_default();
        let expected = expected_statuses(&sync.pools);
        println!(
            "\n==> Commit statuses, as git notes the reconciler pushed to the remote (fetched into the clone): git -C {} log --notes=kubelet-gitops",
            self.repo().path().display()
        );
        let deadline = Instant::now() + NOTES_LIMIT;
        let notes = loop {
            self.agents.check()?;
            let notes = if self.repo().fetch_notes()? {
                self.repo().notes()?
            } else {
                Vec::new()
            };
            let text: String = notes
                .iter()
                .filter_map(|n| n.note.as_deref())
                .collect::<Vec<_>>()
                .join("\n");
            let complete = expected
                .iter()
                .all(|e| text.lines().any(|l| l.starts_with(e.as_str())));
            if complete || Instant::now() >= deadline {
                break notes;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        if notes.iter().any(|n| n.note.is_some()) {
            for n in &notes {
                println!("    {} {}", &n.commit[..7], n.subject);
                for line in n.note.as_deref().unwrap_or_default().lines() {
                    println!("        {line}");
                }
            }
        }
        let text: String = notes
            .iter()
            .filter_map(|n| n.note.as_deref())
            .collect::<Vec<_>>()
            .join("\n");
        let missing: Vec<&String> = expected
            .iter()
            .filter(|e| !text.lines().any(|l| l.starts_with(e.as_str())))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        println!(
            "    not in the notes after {}s: {}; the reconciler's pool reports:",
            NOTES_LIMIT.as_secs(),
            missing
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for p in &sync.pools {
            let failed: Vec<String> = p
                .failed
                .iter()
                .map(|f| match &f.message {
                    Some(m) => format!("{} {}: {m}", f.node, f.state),
                    None => format!("{} {}", f.node, f.state),
                })
                .collect();
            println!(
                "    kubelet-gitops/{}: {}: {}/{} nodes on {}{}",
                p.pool,
                p.phase,
                p.done,
                p.nodes,
                short(&p.target.to_string()),
                if failed.is_empty() {
                    String::new()
                } else {
                    format!("; {}", failed.join("; "))
                }
            );
        }
        Ok(())
    }

    /// Step 5: where every pool stands, as `kubelet-gitops status` shows it, read from the
    /// cluster through the person's kubeconfig.
    pub(super) async fn print_status(&mut self) -> Result<(), DemoError> {
        let kubeconfig = self.cluster().admin_kubeconfig();
        println!(
            "\n==> Where every pool stands: kubelet-gitops status --kubeconfig {}",
            kubeconfig.display()
        );
        let table = crate::cli::pools_table(&kubeconfig, DEMO_NAMESPACE)
            .await
            .map_err(|problem| DemoError::Unexpected {
                step: "kubelet-gitops status",
                problem,
            })?;
        print!("{table}");
        Ok(())
    }

    /// Step 7: where everything is.
    pub(super) fn print_locations(&self) {
        let wd = self.workdir();
        println!(
            "\n==> Done in {:.1}s. Where everything is:",
            self.summary.elapsed.as_secs_f64()
        );
        let rows = [
            (
                "repository",
                format!(
                    "{} (a clone; origin {} stands in for the forge)",
                    wd.join("repo").display(),
                    wd.join("remote.git").display()
                ),
            ),
            (
                "reconciler cache",
                wd.join("reconciler-cache").display().to_string(),
            ),
            (
                "kubeconfig",
                self.cluster().admin_kubeconfig().display().to_string(),
            ),
            (
                "node roots",
                format!("{}/<node>/ (the node's /)", wd.join("nodes").display()),
            ),
            (
                "checkpoints",
                format!(
                    "{}/<node>/var/lib/kubelet-gitops/",
                    wd.join("nodes").display()
                ),
            ),
            (
                "kubelet configs",
                format!(
                    "{}/<node>/var/lib/kubelet/config.yaml",
                    wd.join("nodes").display()
                ),
            ),
            (
                "kubelet logs",
                format!("{}/<node>/var/log/kubelet.log", wd.join("nodes").display()),
            ),
            (
                "agent logs",
                format!("{}/agent-<node>.log", wd.join("logs").display()),
            ),
            ("reconciler log", self.log_file().display().to_string()),
        ];
        for (what, path) in rows {
            println!("    {what:<16} {path}");
        }
        let cluster = match self.cluster() {
            DemoCluster::Sim(_) => "simulated cluster",
            DemoCluster::Real(_) => {
                println!(
                    "    {:<16} {}/<etcd|kube-apiserver|...|fake-cri-<node>>.log",
                    "control plane",
                    wd.join("logs").display()
                );
                "real cluster"
            }
        };
        match self.workdir {
            Workdir::Kept(_) => println!(
                "    The {cluster} stops with the demo; everything above stays for inspection."
            ),
            Workdir::Temp { .. } => println!(
                "    All of it is removed when the demo exits: run `kubelet-gitops demo --workdir DIR` to keep it."
            ),
        }
    }
}

/// The start of the note line each pool's final state calls for:
/// `kubelet-gitops/<pool>: success` when Complete, `...: failure` when Halted.
fn expected_statuses(pools: &[PoolReport]) -> Vec<String> {
    pools
        .iter()
        .filter_map(|p| {
            let state = match p.phase {
                PoolPhase::Complete => "success",
                PoolPhase::Halted => "failure",
                _ => return None,
            };
            Some(format!("{}: {state}", crate::status::pool_context(&p.pool)))
        })
        .collect()
}
