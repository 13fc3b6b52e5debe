//! The three rollouts: the examples, a change to one pool, and a config the canary's
//! kubelet cannot start with (rolled back, the pool halted, no other node touched).

use std::collections::BTreeMap;
use std::time::Instant;

use kubelet_gitops_core::message::OneLine;

use super::error::DemoError;
use super::nodes::{self, NodePaths};
use super::repo::{self, GPU_CGROUP_ROOT};
use super::view::{NodeView, short, snapshot};
use super::{Demo, HEALTH_TIMEOUT, START_LIMIT};
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
        let commit = c1.to_string();
        let pools = self
            .rollout("roll out the example configuration", c1, |s, _| {
                all_complete(s, &commit).then(|| s.pools.clone())
            })
            .await?;
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
        let commit = c2.clone();
        self.rollout("roll out general maxPods", &c2, |s, _| {
            all_complete(s, &commit).then_some(())
        })
        .await?;
        let nodes = snapshot(self.sim());
        for n in nodes
            .iter()
            .filter(|n| n.pool.as_deref() == Some("general"))
        {
            if let Some(m) = n.message.as_deref().filter(|m| m.contains("--max-pods")) {
                println!("    {}: {}", n.name, OneLine(m));
            }
        }
        self.act("rollout 2", t);
        Ok(())
    }

    /// Act 3: a config the canary's kubelet cannot start with.
    pub(super) async fn bad_rollout(&mut self, act1: &Act1) -> Result<(), DemoError> {
        const STEP: &str = "roll out gpu cgroupRoot";
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
            START_LIMIT,
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

        let (root, slice) = GPU_CGROUP_ROOT;
        let gpu_nodes: Vec<String> = snapshot(self.sim())
            .into_iter()
            .filter(|n| n.pool.as_deref() == Some("gpu"))
            .map(|n| n.name)
            .collect();
        for node in &gpu_nodes {
            let paths = NodePaths::new(&self.sim().node_root(node));
            nodes::block_cgroup(&paths.root, paths.cgroup_root, slice)?;
        }
        let before = snapshot(self.sim());
        let starts_before = self.kubelet_starts();

        let text = self.repo().read("pools/gpu.yaml")?;
        self.repo()
            .write("pools/gpu.yaml", &repo::gpu_cgroup_root(&text)?)?;
        let c3 = self
            .repo()
            .commit("gpu: GPU pods in their own cgroup slice")?;
        let rendered = self.repo().render(&c3)?;
        let bad_name = rendered
            .pool("gpu")
            .map(|p| p.configmap_name.clone())
            .unwrap_or_default();
        println!(
            "\n==> Rollout 3: commit {} \"gpu: cgroupRoot: {root}\" (GPU pods in their own slice, {slice})",
            &c3[..7]
        );
        println!(
            "    It validates (repository and agent pre-flight), but the kubelet needs its cgroup root to exist,"
        );
        println!(
            "    and the gpu nodes have no usable {slice} (simulated: a file stands in its place)."
        );
        println!(
            "    Expected: the canary {canary} applies {bad_name}, its kubelet cannot start, the agent rolls back to {} after healthTimeout {HEALTH_TIMEOUT}, the pool halts.",
            short(&good)
        );

        let commit = c3.clone();
        let kubelet = self.sim().kubelet(&canary).cloned();
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
                    && gpu.failed[0].state == kubelet_gitops_core::protocol::State::RolledBack;
                let node = nodes.iter().find(|n| n.name == rb_canary)?;
                let back = node.current.as_deref() == Some(rb_good.as_str())
                    && node
                        .message
                        .as_deref()
                        .is_some_and(|m| m.contains("rolled back to"))
                    && kubelet.as_ref().is_some_and(|k| k.is_running());
                (failed_ok && back).then(|| (gpu.clone(), node.clone()))
            })
            .await?;
        let (report, node) = halted;
        println!(
            "    {}: {} ({})",
            node.name,
            node.state.as_deref().unwrap_or("?"),
            OneLine(node.message.as_deref().unwrap_or(""))
        );

        // Nobody else was touched: same desired and current config, kubelet not restarted.
        let after = snapshot(self.sim());
        let starts_after = self.kubelet_starts();
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

    /// How many times each node's kubelet has started.
    fn kubelet_starts(&self) -> BTreeMap<String, u64> {
        self.sim()
            .kubelets()
            .iter()
            .map(|(name, k)| (name.clone(), k.state().starts))
            .collect()
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
