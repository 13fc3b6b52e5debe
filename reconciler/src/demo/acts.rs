//! The three rollouts: the examples, a change to one pool, and a config the canary's
//! kubelet cannot start with (rolled back, the pool halted, no other node touched).

use std::collections::BTreeMap;
use std::time::Instant;

use kubelet_gitops_core::message::OneLine;

use super::Demo;
use super::error::DemoError;
use super::repo;
use super::view::{NodeView, short};
use crate::rollout::{PoolPhase, PoolReport};
use crate::state::SyncState;

/// What the demo remembers from one act for the next.
pub(super) struct Act1 {
    /// The pool reports once everything was Complete.
    pools: Vec<PoolReport>,
}

impl Demo {
    /// Act 1: the example configuration reaches every node.
    pub(super) async fn first_rollout(&mut self, c1: &str) -> Result<Act1, DemoError> {
        let t = Instant::now();
        println!(
            "\n==> Rollout 1: commit {} brings every pool from the nodes' local configs to its config",
            &c1[..7]
        );
        const STEP: &str = "roll out the example configuration";
        let commit = c1.to_string();
        let pools = self
            .rollout(STEP, c1, |s, _| {
                complete_or_halted(s, &commit).map(|r| r.map(|()| s.pools.clone()))
            })
            .await?
            .map_err(|problem| DemoError::Unexpected {
                step: STEP,
                problem,
            })?;
        self.act("rollout 1", t);
        Ok(Act1 { pools })
    }

    /// Act 2: a change to one pool.
    pub(super) async fn second_rollout(&mut self) -> Result<(), DemoError> {
        let t = Instant::now();
        let (old, new) = repo::GENERAL_MAX_PODS;
        let general = self.repo().read("pools/general.yaml")?;
        self.repo().write(
            "pools/general.yaml",
            &repo::raise_general_max_pods(&general)?,
        )?;
        let c2 = self
            .repo()
            .commit(&format!("general: {new} pods per node (was {old})"))?;
        let rendered = self.repo().render(&c2)?;
        let target = rendered
            .pool("general")
            .map(|p| p.configmap_name.clone())
            .unwrap_or_default();
        println!(
            "\n==> Rollout 2: commit {} \"general: maxPods {old} -> {new}\": a new ConfigMap {target}; the other pools' are unchanged",
            &c2[..7]
        );
        const STEP: &str = "roll out general maxPods";
        let commit = c2.clone();
        self.rollout(STEP, &c2, |s, _| complete_or_halted(s, &commit))
            .await?
            .map_err(|problem| DemoError::Unexpected {
                step: STEP,
                problem,
            })?;
        let nodes = self.cluster().nodes().await?;
        for n in nodes
            .iter()
            .filter(|n| n.pool.as_deref() == Some("general"))
        {
            if let Some(o) = n
                .message
                .as_deref()
                .and_then(|m| flag_override(m, "maxPods"))
            {
                println!("    {}: its own kubelet flag wins: {o}", n.name);
            }
        }
        self.act("rollout 2", t);
        Ok(())
    }

    /// Act 3: a config the canary's kubelet cannot start with.
    pub(super) async fn bad_rollout(&mut self, act1: &Act1) -> Result<(), DemoError> {
        const STEP: &str = "roll out gpu podLogsDir";
        let t = Instant::now();
        let gpu =
            act1.pools
                .iter()
                .find(|p| p.pool == "gpu")
                .ok_or_else(|| DemoError::Unexpected {
                    step: STEP,
                    problem: "the example has no gpu pool".into(),
                })?;
        let canary = gpu
            .canary
            .first()
            .cloned()
            .ok_or_else(|| DemoError::Unexpected {
                step: STEP,
                problem: "the gpu pool has no canary".into(),
            })?;
        let good = gpu.target.to_string();

        // The canary falls back to its last-known-good: wait until the config it runs
        // became that (lkgGrace after it was Done).
        let lkg_canary = canary.clone();
        let lkg_good = good.clone();
        self.watch(
            "promote the gpu config to last-known-good",
            self.timings.start_limit,
            None,
            move |_, nodes| {
                nodes
                    .iter()
                    .find(|n| n.name == lkg_canary)
                    .is_some_and(|n| n.last_known_good.as_deref() == Some(lkg_good.as_str()))
                    .then_some(())
            },
        )
        .await?;

        let gpu_nodes: Vec<String> = self
            .cluster()
            .nodes()
            .await?
            .into_iter()
            .filter(|n| n.pool.as_deref() == Some("gpu"))
            .map(|n| n.name)
            .collect();
        let logs_dir = self.cluster().block_pod_logs(self.workdir(), &gpu_nodes)?;
        let before = self.cluster().nodes().await?;
        let starts_before = self.cluster().kubelet_starts();

        let text = self.repo().read("pools/gpu.yaml")?;
        self.repo()
            .write("pools/gpu.yaml", &repo::gpu_pod_logs_dir(&text, &logs_dir)?)?;
        let c3 = self
            .repo()
            .commit("gpu: container logs on the local NVMe disk")?;
        let rendered = self.repo().render(&c3)?;
        let bad_name = rendered
            .pool("gpu")
            .map(|p| p.configmap_name.clone())
            .unwrap_or_default();
        println!(
            "\n==> Rollout 3: commit {} \"gpu: podLogsDir: {logs_dir}\" (container logs on the local NVMe disk)",
            &c3[..7]
        );
        println!(
            "    It validates (repository and agent pre-flight), but the kubelet must create that directory at start,"
        );
        println!(
            "    and on the gpu nodes a file stands there (the demo put it there: a disk that is not mounted as expected)."
        );
        println!(
            "    Expected: the canary {canary} applies {bad_name}, its kubelet cannot start, the agent rolls back to {} after healthTimeout {}, the pool halts.",
            short(&good),
            self.timings.health_timeout
        );

        let commit = c3.clone();
        let (rb_canary, rb_good) = (canary.clone(), good.clone());
        let halted = self
            .rollout(STEP, &c3, move |s, nodes| {
                if s.applied.as_ref().map(|a| a.commit.as_str()) != Some(commit.as_str()) {
                    return None;
                }
                let gpu = s.pools.iter().find(|p| p.pool == "gpu")?;
                let failed_ok = gpu.phase == PoolPhase::Halted
                    && gpu.failed.len() == 1
                    && gpu.failed[0].node == rb_canary
                    && gpu.failed[0].state
                        == crate::rollout::Failure::Agent(
                            kubelet_gitops_core::protocol::State::RolledBack,
                        );
                let node = nodes.iter().find(|n| n.name == rb_canary)?;
                let back = node.current.as_deref() == Some(rb_good.as_str())
                    && node
                        .message
                        .as_deref()
                        .is_some_and(|m| m.contains("rolled back to"));
                (failed_ok && back).then(|| (gpu.clone(), node.clone()))
            })
            .await?;
        let (report, node) = halted;
        // The agent said it rolled back once the kubelet was healthy again; check it.
        let deadline = Instant::now() + std::time::Duration::from_secs(15);
        while !self.cluster().kubelet_running(&canary).await {
            if Instant::now() >= deadline {
                return Err(DemoError::Unexpected {
                    step: STEP,
                    problem: format!("{canary} rolled back, but its kubelet is not running"),
                });
            }
            tokio::time::sleep(super::TICK).await;
        }
        println!(
            "    {}: {} ({})",
            node.name,
            node.state.as_deref().unwrap_or("?"),
            OneLine(node.message.as_deref().unwrap_or(""))
        );
        // Why the kubelet did not start, in its own words (a real node's journal).
        const REFUSAL: &str = "error creating pod logs root directory";
        match self
            .cluster()
            .kubelet_log_line(self.workdir(), &canary, REFUSAL)
        {
            Some(line) => println!("    {canary}'s kubelet log: {}", OneLine(&line)),
            None => {
                return Err(DemoError::Unexpected {
                    step: STEP,
                    problem: format!(
                        "{canary} rolled back, but its kubelet log does not say \"{REFUSAL}\": it failed for another reason"
                    ),
                });
            }
        }

        // Nobody else was touched: same desired and current config, kubelet not restarted.
        let after = self.cluster().nodes().await?;
        let starts_after = self.cluster().kubelet_starts();
        let problems = untouched(&before, &after, &starts_before, &starts_after, &canary);
        if !problems.is_empty() {
            return Err(DemoError::Unexpected {
                step: STEP,
                problem: format!(
                    "nodes other than the canary changed: {}",
                    problems.join("; ")
                ),
            });
        }
        let others: Vec<&str> = gpu_nodes
            .iter()
            .filter(|n| **n != canary)
            .map(String::as_str)
            .collect();
        println!(
            "    gpu halted at {}/{} on {}: {} never got it and still run {}; general and high-memory unaffected; no other kubelet restarted",
            report.done,
            report.nodes,
            short(&report.target.to_string()),
            others.join(" and "),
            short(&good)
        );
        self.act("rollout 3 (rollback)", t);
        Ok(())
    }
}

/// Whether `commit` is applied and every pool is Complete on its ConfigMap of it.
fn all_complete(s: &SyncState, commit: &str) -> bool {
    let Some(applied) = s.applied.as_ref().filter(|a| a.commit == commit) else {
        return false;
    };
    s.pools.len() == applied.configmaps.len()
        && s.pools.iter().all(|p| {
            p.phase == PoolPhase::Complete
                && applied.configmaps.get(&p.pool).map(String::as_str) == p.target.configmap_name()
        })
}

/// The override of config field `field` in an agent's message (`...: a (...), maxPods
/// (--max-pods gives 110, not 200), ...`): `maxPods (--max-pods gives 110, not 200)`.
fn flag_override<'m>(message: &'m str, field: &str) -> Option<&'m str> {
    let start = message.find(&format!("{field} (--"))?;
    let end = start + message[start..].find(')')?;
    Some(&message[start..=end])
}

/// Whether the rollout of `commit` is over: `Some(Ok)` once every pool is Complete,
/// `Some(Err)` naming each halted pool and its failed nodes as soon as one halts (a
/// rollout the demo expects to succeed; waiting on would only time out), `None` while it
/// goes on.
fn complete_or_halted(s: &SyncState, commit: &str) -> Option<Result<(), String>> {
    if all_complete(s, commit) {
        return Some(Ok(()));
    }
    if s.applied.as_ref().is_none_or(|a| a.commit != commit) {
        return None;
    }
    let halted: Vec<String> = s
        .pools
        .iter()
        .filter(|p| p.phase == PoolPhase::Halted)
        .map(|p| {
            let failed: Vec<String> = p
                .failed
                .iter()
                .map(|f| {
                    format!(
                        "{} {}: {}",
                        f.node,
                        f.state,
                        f.message.as_deref().unwrap_or("no message")
                    )
                })
                .collect();
            format!("pool {} halted ({})", p.pool, failed.join("; "))
        })
        .collect();
    (!halted.is_empty()).then(|| Err(halted.join("; ")))
}

/// What changed on nodes other than `except` between `before` and `after`: their
/// desired or current config, or their kubelet's start count.
fn untouched(
    before: &[NodeView],
    after: &[NodeView],
    starts_before: &BTreeMap<String, u64>,
    starts_after: &BTreeMap<String, u64>,
    except: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for b in before.iter().filter(|n| n.name != except) {
        let Some(a) = after.iter().find(|n| n.name == b.name) else {
            problems.push(format!("{} disappeared", b.name));
            continue;
        };
        if a.desired != b.desired {
            problems.push(format!(
                "{} desired-config {:?} -> {:?}",
                b.name, b.desired, a.desired
            ));
        }
        if a.current != b.current {
            problems.push(format!(
                "{} current-config {:?} -> {:?}",
                b.name, b.current, a.current
            ));
        }
        if starts_before.get(&b.name) != starts_after.get(&b.name) {
            problems.push(format!(
                "{} kubelet restarted ({:?} -> {:?} starts)",
                b.name,
                starts_before.get(&b.name),
                starts_after.get(&b.name)
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, desired: Option<&str>, current: &str) -> NodeView {
        NodeView {
            name: name.into(),
            desired: desired.map(Into::into),
            current: Some(current.into()),
            ..NodeView::default()
        }
    }

    #[test]
    fn flag_overrides_are_found_in_the_agents_message() {
        let m = "the kubelet's command-line flags override these fields: cgroupRoot (--cgroup-root gives \"/x\", not unset), maxPods (--max-pods gives 110, not 200); pods cgroup fine";
        assert_eq!(
            flag_override(m, "maxPods"),
            Some("maxPods (--max-pods gives 110, not 200)")
        );
        assert_eq!(flag_override(m, "podPidsLimit"), None);
        assert_eq!(flag_override("maxPods (--max-pods gives", "maxPods"), None);
    }

    #[test]
    fn a_halted_pool_ends_the_wait_with_its_failures() {
        use crate::rollout::NodeFailure;
        use crate::state::AppliedCommit;
        use kubelet_gitops_core::protocol::{ConfigRef, State};
        let report = |pool: &str, phase: PoolPhase, failed: Vec<NodeFailure>| PoolReport {
            nodes: 3,
            waiting: 3,
            failed,
            phase,
            canary: vec![format!("{pool}-1")],
            max_unavailable: 1,
            ..PoolReport::new(
                pool,
                ConfigRef::configmap("kubelet-gitops", format!("kubelet-{pool}-abc")),
            )
        };
        let mut s = SyncState {
            applied: Some(AppliedCommit {
                commit: "c1".into(),
                namespace: "kubelet-gitops".into(),
                configmaps: [
                    ("general".to_string(), "kubelet-general-abc".to_string()),
                    ("gpu".to_string(), "kubelet-gpu-abc".to_string()),
                ]
                .into(),
                sources: Default::default(),
            }),
            pools: vec![
                report("general", PoolPhase::Progressing, vec![]),
                report("gpu", PoolPhase::Progressing, vec![]),
            ],
            ..SyncState::default()
        };
        assert_eq!(complete_or_halted(&s, "c1"), None);
        assert_eq!(complete_or_halted(&s, "c0"), None, "another commit");
        s.pools[1] = report(
            "gpu",
            PoolPhase::Halted,
            vec![NodeFailure {
                node: "gpu-1".into(),
                state: crate::rollout::Failure::Agent(State::Degraded),
                message: Some("no allocatable cpu".into()),
            }],
        );
        assert_eq!(
            complete_or_halted(&s, "c1"),
            Some(Err(
                "pool gpu halted (gpu-1 Degraded: no allocatable cpu)".into()
            ))
        );
        assert_eq!(complete_or_halted(&s, "c0"), None);
        for p in &mut s.pools {
            p.phase = PoolPhase::Complete;
        }
        assert_eq!(complete_or_halted(&s, "c1"), Some(Ok(())));
    }

    #[test]
    fn untouched_names_every_change_but_the_canary() {
        let before = [
            node("gpu-1", Some("ns/a"), "ns/a"),
            node("gpu-2", Some("ns/a"), "ns/a"),
            node("gpu-3", Some("ns/a"), "ns/a"),
        ];
        let after = [
            node("gpu-1", Some("ns/b"), "ns/a"),
            node("gpu-2", Some("ns/a"), "ns/a"),
            node("gpu-3", Some("ns/b"), "ns/a"),
        ];
        let starts: BTreeMap<String, u64> = [
            ("gpu-1".into(), 2),
            ("gpu-2".into(), 2),
            ("gpu-3".into(), 2),
        ]
        .into();
        let mut restarted = starts.clone();
        restarted.insert("gpu-1".into(), 5);
        restarted.insert("gpu-2".into(), 3);
        let problems = untouched(&before, &after, &starts, &restarted, "gpu-1");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with("gpu-2 kubelet restarted"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("gpu-3 desired-config"),
            "{problems:?}"
        );
        assert!(untouched(&before, &before, &starts, &starts, "gpu-1").is_empty());
    }
}
