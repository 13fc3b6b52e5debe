//! From rollout reports to commit statuses. Pure: no clock, no I/O.
//!
//! | situation | context | state | description |
//! | --- | --- | --- | --- |
//! | rolling out | `kubelet-gitops/<pool>` | pending | `rolling out: 3/10 nodes on kubelet-gpu-9mbkccg2cc` |
//! | canary not done | `kubelet-gitops/<pool>` | pending | `canary: 1/10 nodes on kubelet-gpu-9mbkccg2cc (2 canary)` |
//! | paused | `kubelet-gitops/<pool>` | pending | `paused: 3/10 nodes on kubelet-gpu-9mbkccg2cc` |
//! | every node Done | `kubelet-gitops/<pool>` | success | `10/10 nodes on kubelet-gpu-9mbkccg2cc` |
//! | pool selects no node | `kubelet-gitops/<pool>` | success | `no nodes selected; kubelet-gpu-9mbkccg2cc published` |
//! | a node failed | `kubelet-gitops/<pool>` | failure | `node-7 rolled back: <the kubelet's reason> (1 failed; 3/10 nodes on ...)` |
//! | commit invalid | `kubelet-gitops` | error | `pools/gpu.yaml:12: <reason> (+2 more errors)` |
//! | summary | `kubelet-gitops` | worst of the pools | `3 pools: 1 failed, 1 in progress, 1 done; gpu: node-7 rolled back: ...` |
//!
//! Descriptions are composed for the forge's limit (GitHub: 140 characters) from parts
//! ([`super::describe`]): the node, what became of it, the kubelet's own reason (from the
//! agent's message: [`node_reason`]) and the count stay; the ConfigMap's name and the
//! pools a commit left unchanged give way first, then the reason is shortened; details
//! such as the healthz URL are left to the node's annotation and the plan comment.

use std::collections::BTreeMap;

use kubelet_gitops_core::protocol::State;

use super::commit::{CONTEXT, CommitStatus, StatusState, pool_context};
use super::describe::{Part, compose, node_reason, one_line};
use crate::rollout::{Failure, PoolPhase, PoolReport};

/// The status of one pool's rollout of the commit `sha`, its description composed for
/// `limit` characters (the forge's; see [`compose`]).
///
/// The canary stage is shown while fewer nodes are Done than there are canary nodes:
/// then the canary set cannot be complete. (A report does not say which nodes are Done,
/// so a rollout whose done count reached the canary size through other nodes, such as
/// new nodes, shows as rolling out.)
pub fn pool_status(sha: &str, report: &PoolReport, limit: usize) -> CommitStatus {
    let (state, parts) = pool_parts(report, false);
    CommitStatus::new(
        sha,
        pool_context(&report.pool),
        state,
        compose(&parts, limit),
    )
}

/// The state of a pool's status and its description's parts. `in_summary`: the parts
/// for the summary, where the pool's count gives way before its cause.
fn pool_parts(report: &PoolReport, in_summary: bool) -> (StatusState, Vec<Part>) {
    let config = report
        .target
        .configmap_name()
        .map(str::to_string)
        .unwrap_or_else(|| report.target.to_string());
    let progress = format!("{}/{} nodes", report.done, report.nodes);
    let on = || Part::detail(0, format!(" on {config}"));
    let progress_parts = |prefix: &str| vec![Part::fixed(format!("{prefix}{progress}")), on()];
    match report.phase {
        _ if !report.failed.is_empty() => (
            StatusState::Failure,
            failure_parts(report, &progress, &config, in_summary),
        ),
        PoolPhase::Halted => (StatusState::Failure, progress_parts("halted: ")),
        PoolPhase::Complete => (StatusState::Success, progress_parts("")),
        PoolPhase::Empty => (
            StatusState::Success,
            vec![
                Part::fixed("no nodes selected"),
                Part::detail(0, format!("; {config} published")),
            ],
        ),
        PoolPhase::Paused => (StatusState::Pending, progress_parts("paused: ")),
        PoolPhase::Progressing if report.hold.is_some() => {
            let hold = report
                .hold
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            (StatusState::Pending, progress_parts(&format!("{hold}: ")))
        }
        PoolPhase::Progressing if report.wave.is_some() => {
            let wave = report
                .wave
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default();
            (
                StatusState::Pending,
                progress_parts(&format!("rolling out, {wave}: ")),
            )
        }
        PoolPhase::Progressing if report.done < report.canary.len() => {
            let mut parts = progress_parts("canary: ");
            parts.push(Part::fixed(format!(" ({} canary)", report.canary.len())));
            (StatusState::Pending, parts)
        }
        PoolPhase::Progressing => (StatusState::Pending, progress_parts("rolling out: ")),
    }
}

/// `<node> <outcome>: <the kubelet's reason> (<n> failed; <done>/<nodes> nodes on
/// <config>)`: the node, what became of it and the count stay; the reason is shortened
/// before it is cut; the ConfigMap's name gives way first.
fn failure_parts(report: &PoolReport, progress: &str, config: &str, in_summary: bool) -> Vec<Part> {
    let first = &report.failed[0];
    let message = first.message.as_deref().unwrap_or_default();
    let outcome = match first.state {
        Failure::Agent(State::RolledBack) if message.contains(" did not help either") => {
            "rolled back but still unhealthy"
        }
        Failure::Agent(State::RolledBack) => "rolled back",
        Failure::Agent(State::Degraded) => "degraded",
        Failure::DrainTimeout => "could not be drained",
        other => other.as_str(),
    };
    let count = format!(" ({} failed; {progress}", report.failed.len());
    let mut parts = vec![
        Part::fixed(format!("{} {outcome}: ", first.node)),
        Part::Reason(node_reason(message)),
    ];
    if in_summary {
        parts.push(Part::Detail {
            forms: vec![format!("{count} on {config})"), format!("{count})")],
            rank: 1,
        });
    } else {
        parts.push(Part::Fixed(count));
        parts.push(Part::detail(0, format!(" on {config}")));
        parts.push(Part::fixed(")"));
    }
    parts
}

/// The statuses of a commit that does not validate: `error` on the summary context,
/// naming the first error (`file:line: reason`, as the validator prints it, cut at its
/// end if it must be) and how many more there are (always shown). Pool contexts are not
/// posted: an invalid commit has no pools the reconciler can trust.
pub fn invalid_commit_status(sha: &str, errors: &[String], limit: usize) -> Vec<CommitStatus> {
    let parts = match errors {
        [] => vec![Part::fixed("invalid commit")],
        [only] => vec![Part::Text(first_line(only))],
        [first, rest @ ..] => vec![
            Part::Text(first_line(first)),
            Part::fixed(format!(
                " (+{} more error{})",
                rest.len(),
                if rest.len() == 1 { "" } else { "s" }
            )),
        ],
    };
    vec![CommitStatus::new(
        sha,
        CONTEXT,
        StatusState::Error,
        compose(&parts, limit),
    )]
}

fn first_line(text: &str) -> String {
    one_line(text.lines().next().unwrap_or_default())
}

/// What the summary of a commit is made of.
#[derive(Debug, Clone, Default)]
pub struct Summary<'a> {
    /// Every pool of the commit, as part of it (those it left unchanged included).
    pub pools: &'a [PoolReport],
    /// The pools the commit left unchanged, by the short id of the commit that produced
    /// their ConfigMaps (and carries their statuses).
    pub unchanged: BTreeMap<String, Vec<String>>,
    /// Nodes two pools of the same priority select: left alone.
    pub left_alone: usize,
}

/// The summary context `kubelet-gitops` of commit `sha`: the worst state of its pools
/// (at least `failure` when nodes are left alone), the pools counted per state, then the
/// first pool in the worst state when that is not success (its node, outcome and reason
/// first), the pools left unchanged and the nodes left alone; composed for `limit`
/// characters, the unchanged pools giving way first.
pub fn summary_status(sha: &str, summary: &Summary<'_>, limit: usize) -> CommitStatus {
    let pools: Vec<(&PoolReport, StatusState)> = summary
        .pools
        .iter()
        .map(|r| (r, pool_parts(r, true).0))
        .collect();
    let mut parts = Vec::new();
    let mut worst = StatusState::Success;
    if pools.is_empty() {
        parts.push(Part::fixed("no pools"));
    } else {
        let count = |state: StatusState| pools.iter().filter(|(_, s)| *s == state).count();
        let mut counts = Vec::new();
        for (state, label) in [
            (StatusState::Error, "errored"),
            (StatusState::Failure, "failed"),
            (StatusState::Pending, "in progress"),
            (StatusState::Success, "done"),
        ] {
            let n = count(state);
            if n > 0 {
                counts.push(format!("{n} {label}"));
            }
        }
        worst = pools
            .iter()
            .map(|(_, s)| *s)
            .max_by_key(|s| s.severity())
            .unwrap_or(StatusState::Success);
        parts.push(Part::fixed(format!(
            "{} pool{}: {}",
            pools.len(),
            if pools.len() == 1 { "" } else { "s" },
            counts.join(", ")
        )));
        if worst != StatusState::Success
            && let Some((report, _)) = pools.iter().find(|(_, s)| *s == worst)
        {
            parts.push(Part::fixed(format!("; {}: ", report.pool)));
            parts.extend(pool_parts(report, true).1);
        }
    }
    if !summary.unchanged.is_empty() {
        let groups: Vec<String> = summary
            .unchanged
            .iter()
            .map(|(commit, pools)| format!("{} (from {commit})", pools.join(", ")))
            .collect();
        parts.push(Part::detail(
            0,
            format!("; unchanged: {}", groups.join(", ")),
        ));
    }
    if summary.left_alone > 0 {
        parts.push(Part::fixed(format!(
            "; {} left alone: selected by two pools of the same priority",
            match summary.left_alone {
                1 => "1 node".to_string(),
                n => format!("{n} nodes"),
            }
        )));
        if worst.severity() < StatusState::Failure.severity() {
            worst = StatusState::Failure;
        }
    }
    CommitStatus::new(sha, CONTEXT, worst, compose(&parts, limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::NodeFailure;
    use kubelet_gitops_core::protocol::ConfigRef;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
    const CM: &str = "kubelet-gpu-9mbkccg2cc";
    const NO_LIMIT: usize = usize::MAX;

    fn report(phase: PoolPhase, nodes: usize, done: usize) -> PoolReport {
        PoolReport {
            nodes,
            done,
            waiting: nodes - done,
            phase,
            max_unavailable: 1,
            ..PoolReport::new("gpu", ConfigRef::configmap("kubelet-gitops", CM))
        }
    }

    #[test]
    fn progressing_pools_are_pending_with_progress() {
        let s = pool_status(SHA, &report(PoolPhase::Progressing, 10, 3), NO_LIMIT);
        assert_eq!(s.sha, SHA);
        assert_eq!(s.context, "kubelet-gitops/gpu");
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(s.description, format!("rolling out: 3/10 nodes on {CM}"));
        assert_eq!(s.target_url, None);
    }

    #[test]
    fn the_canary_stage_is_named() {
        let mut r = report(PoolPhase::Progressing, 10, 1);
        r.canary = vec!["n1".to_string(), "n2".to_string()];
        let s = pool_status(SHA, &r, NO_LIMIT);
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(
            s.description,
            format!("canary: 1/10 nodes on {CM} (2 canary)")
        );
        r.done = 2;
        r.waiting = 8;
        assert_eq!(
            pool_status(SHA, &r, NO_LIMIT).description,
            format!("rolling out: 2/10 nodes on {CM}")
        );
    }

    #[test]
    fn paused_pools_stay_pending() {
        let s = pool_status(SHA, &report(PoolPhase::Paused, 10, 4), NO_LIMIT);
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(s.description, format!("paused: 4/10 nodes on {CM}"));
    }

    #[test]
    fn complete_and_empty_pools_succeed() {
        let s = pool_status(SHA, &report(PoolPhase::Complete, 10, 10), NO_LIMIT);
        assert_eq!(s.state, StatusState::Success);
        assert_eq!(s.description, format!("10/10 nodes on {CM}"));
        let s = pool_status(SHA, &report(PoolPhase::Empty, 0, 0), NO_LIMIT);
        assert_eq!(s.state, StatusState::Success);
        assert_eq!(s.description, format!("no nodes selected; {CM} published"));
    }

    #[test]
    fn failures_name_the_first_node_and_its_reason() {
        let mut r = report(PoolPhase::Halted, 10, 3);
        r.failed = vec![
            NodeFailure {
                node: "node-2".to_string(),
                state: crate::rollout::Failure::Agent(State::RolledBack),
                message: Some("kubelet not healthy after 2m0s".to_string()),
            },
            NodeFailure {
                node: "node-5".to_string(),
                state: crate::rollout::Failure::Agent(State::Degraded),
                message: None,
            },
        ];
        r.waiting = 5;
        let s = pool_status(SHA, &r, NO_LIMIT);
        assert_eq!(s.state, StatusState::Failure);
        assert_eq!(
            s.description,
            format!(
                "node-2 rolled back: kubelet not healthy after 2m0s (2 failed; 3/10 nodes on {CM})"
            )
        );
        r.failed.remove(0);
        let s = pool_status(SHA, &r, NO_LIMIT);
        assert_eq!(
            s.description,
            format!(
                "node-5 degraded: no message from the node agent (1 failed; 3/10 nodes on {CM})"
            )
        );
    }

    #[test]
    fn invalid_commits_report_the_first_error_and_a_count() {
        let errors = vec![
            "pools/gpu.yaml:12: unknown field `maxPod`, did you mean `maxPods`?".to_string(),
            "pools/cpu.yaml:3: evictionHard: invalid quantity".to_string(),
            "pools/cpu.yaml:9: duplicate pool".to_string(),
        ];
        let statuses = invalid_commit_status(SHA, &errors, NO_LIMIT);
        assert_eq!(statuses.len(), 1);
        assert_eq!(statuses[0].context, "kubelet-gitops");
        assert_eq!(statuses[0].state, StatusState::Error);
        assert_eq!(
            statuses[0].description,
            "pools/gpu.yaml:12: unknown field `maxPod`, did you mean `maxPods`? (+2 more errors)"
        );
        let one = invalid_commit_status(SHA, &errors[1..2], NO_LIMIT);
        assert_eq!(
            one[0].description,
            "pools/cpu.yaml:3: evictionHard: invalid quantity"
        );
        let two = invalid_commit_status(SHA, &errors[1..], NO_LIMIT);
        assert!(two[0].description.ends_with("(+1 more error)"));
        assert_eq!(
            invalid_commit_status(SHA, &[], NO_LIMIT)[0].description,
            "invalid commit"
        );
    }

    fn named(pool: &str, phase: PoolPhase, nodes: usize, done: usize) -> PoolReport {
        PoolReport {
            pool: pool.to_string(),
            target: ConfigRef::configmap("kubelet-gitops", format!("kubelet-{pool}-x")),
            ..report(phase, nodes, done)
        }
    }

    fn failing(pool: &str, node: &str, message: &str) -> PoolReport {
        let mut r = named(pool, PoolPhase::Halted, 3, 0);
        r.failed = vec![NodeFailure {
            node: node.to_string(),
            state: crate::rollout::Failure::Agent(State::RolledBack),
            message: Some(message.to_string()),
        }];
        r
    }

    #[test]
    fn the_summary_takes_the_worst_state_and_counts_pools() {
        let pools = vec![
            named("cpu", PoolPhase::Complete, 4, 4),
            failing("gpu", "node-2", "x"),
            named("mem", PoolPhase::Progressing, 3, 1),
        ];
        let summary = |pools| Summary {
            pools,
            ..Summary::default()
        };
        let s = summary_status(SHA, &summary(&pools), NO_LIMIT);
        assert_eq!(s.context, "kubelet-gitops");
        assert_eq!(s.state, StatusState::Failure);
        assert_eq!(
            s.description,
            "3 pools: 1 failed, 1 in progress, 1 done; gpu: node-2 rolled back: x (1 failed; 0/3 nodes on kubelet-gpu-x)"
        );
        let s = summary_status(SHA, &summary(&pools[..1]), NO_LIMIT);
        assert_eq!(s.state, StatusState::Success);
        assert_eq!(s.description, "1 pool: 1 done");
        let both = [pools[0].clone(), pools[2].clone()];
        let s = summary_status(SHA, &summary(&both), NO_LIMIT);
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(
            s.description,
            "2 pools: 1 in progress, 1 done; mem: rolling out: 1/3 nodes on kubelet-mem-x"
        );
        let none = summary_status(SHA, &summary(&[]), NO_LIMIT);
        assert_eq!(none.description, "no pools");
        assert_eq!(none.state, StatusState::Success);
    }

    /// The rollback of the demo's canary (README.md, "How a rollout looks"), with the
    /// healthz port of the run issue 12 quotes.
    const GPU_1: &str = "kubelet did not become healthy within 10s: healthz http://127.0.0.1:35741/healthz: connection refused; node Ready=False: kubelet is not running: Failed to start ContainerManager: failed to create \"/gpu.slice/gpu-kubepods.slice\" cgroup: Not a directory (os error 20); rolled back to kubelet-gitops/kubelet-gpu-694c7bk8m6";

    #[test]
    fn a_rollback_on_github_keeps_the_node_the_kubelets_reason_and_the_count() {
        let mut gpu = failing("gpu", "gpu-1", GPU_1);
        gpu.target = ConfigRef::configmap("kubelet-gitops", "kubelet-gpu-mbd75dgm4h");
        let s = pool_status(SHA, &gpu, 140);
        assert!(s.description.chars().count() <= 140, "{}", s.description);
        assert!(
            s.description.starts_with("gpu-1 rolled back: "),
            "{}",
            s.description
        );
        assert!(
            s.description
                .contains("failed to create \"/gpu.slice/…\" cgroup"),
            "{}",
            s.description
        );
        assert!(
            s.description.contains(" (1 failed; 0/3 nodes"),
            "{}",
            s.description
        );
        assert!(!s.description.contains("healthz"), "{}", s.description);
        assert!(!s.description.contains("node Ready"), "{}", s.description);
        assert_eq!(
            s.description,
            "gpu-1 rolled back: failed to create \"/gpu.slice/…\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes on kubelet-gpu-mbd75dgm4h)"
        );
        // Gitea and GitLab (255) and git notes: the whole reason, the path included.
        for limit in [255, 1024] {
            assert_eq!(
                pool_status(SHA, &gpu, limit).description,
                "gpu-1 rolled back: Failed to start ContainerManager: failed to create \"/gpu.slice/gpu-kubepods.slice\" cgroup: Not a directory (os error 20) (1 failed; 0/3 nodes on kubelet-gpu-mbd75dgm4h)"
            );
        }
        // The summary of the demo's third commit on GitHub: the counts, then the same
        // node, outcome and reason; the unchanged pools give way.
        let pools = [
            named("general", PoolPhase::Complete, 6, 6),
            gpu.clone(),
            named("high-memory", PoolPhase::Complete, 3, 3),
        ];
        let summary = Summary {
            pools: &pools,
            unchanged: [(
                "7c1d0e2".to_string(),
                vec!["general".to_string(), "high-memory".to_string()],
            )]
            .into(),
            left_alone: 0,
        };
        let s = summary_status(SHA, &summary, 140);
        assert_eq!(s.state, StatusState::Failure);
        assert!(s.description.chars().count() <= 140, "{}", s.description);
        assert!(
            s.description.starts_with(
                "3 pools: 1 failed, 2 done; gpu: gpu-1 rolled back: failed to create \"/gpu.slice/…\" cgroup"
            ),
            "{}",
            s.description
        );
        let s = summary_status(SHA, &summary, 1024);
        assert!(
            s.description
                .ends_with("; unchanged: general, high-memory (from 7c1d0e2)"),
            "{}",
            s.description
        );
    }

    #[test]
    fn a_long_first_error_keeps_the_count_of_the_others() {
        let errors = vec![
            format!(
                "pools/gpu.yaml:12:5: spec.kubelet.featureGates: unknown feature gate \"{}\"",
                "X".repeat(150)
            ),
            "pools/cpu.yaml:3: evictionHard: invalid quantity".to_string(),
        ];
        let s = &invalid_commit_status(SHA, &errors, 140)[0];
        assert_eq!(s.description.chars().count(), 140, "{}", s.description);
        assert!(
            s.description.starts_with(
                "pools/gpu.yaml:12:5: spec.kubelet.featureGates: unknown feature gate"
            )
        );
        assert!(
            s.description.ends_with("… (+1 more error)"),
            "{}",
            s.description
        );
    }

    #[test]
    fn overlaps_fail_the_summary_and_say_so() {
        let pools = [named("cpu", PoolPhase::Complete, 1, 1)];
        let s = summary_status(
            SHA,
            &Summary {
                pools: &pools,
                left_alone: 2,
                ..Summary::default()
            },
            140,
        );
        assert_eq!(s.state, StatusState::Failure);
        assert_eq!(
            s.description,
            "1 pool: 1 done; 2 nodes left alone: selected by two pools of the same priority"
        );
    }
}
