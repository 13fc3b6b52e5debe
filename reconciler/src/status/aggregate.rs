//! From rollout reports to commit statuses. Pure: no clock, no I/O.
//!
//! | situation | context | state | description |
//! | --- | --- | --- | --- |
//! | rolling out | `kubelet-gitops/<pool>` | pending | `rolling out: 3/10 nodes on kubelet-gpu-9mbkccg2cc` |
//! | canary not done | `kubelet-gitops/<pool>` | pending | `canary: 1/10 nodes on kubelet-gpu-9mbkccg2cc (2 canary)` |
//! | paused | `kubelet-gitops/<pool>` | pending | `paused: 3/10 nodes on kubelet-gpu-9mbkccg2cc` |
//! | every node Done | `kubelet-gitops/<pool>` | success | `10/10 nodes on kubelet-gpu-9mbkccg2cc` |
//! | pool selects no node | `kubelet-gitops/<pool>` | success | `no nodes selected; kubelet-gpu-9mbkccg2cc published` |
//! | a node failed | `kubelet-gitops/<pool>` | failure | `node-7 rolled back: <agent message> (1 failed; 3/10 nodes on ...)` |
//! | commit invalid | `kubelet-gitops` | error | `pools/gpu.yaml:12: <reason> (+2 more errors)` |
//! | summary | `kubelet-gitops` | worst of the pools | `3 pools: 1 failed, 1 in progress, 1 done; gpu: node-7 rolled back: ...` |
//!
//! Descriptions put the most useful words first: forges cut them (GitHub at 140
//! characters), and the writer cuts at the end.

use kubelet_gitops_core::protocol::State;

use super::commit::{CONTEXT, CommitStatus, PLAN_CONTEXT, StatusState, pool_context};
use crate::rollout::{PoolPhase, PoolReport};

/// The status of one pool's rollout of the commit `sha`.
///
/// The canary stage is shown while fewer nodes are Done than there are canary nodes:
/// then the canary set cannot be complete. (A report does not say which nodes are Done,
/// so a rollout whose done count reached the canary size through other nodes, such as
/// new nodes, shows as rolling out.)
pub fn pool_status(sha: &str, report: &PoolReport) -> CommitStatus {
    let config = report
        .target
        .configmap_name()
        .map(str::to_string)
        .unwrap_or_else(|| report.target.to_string());
    let progress = format!("{}/{} nodes on {config}", report.done, report.nodes);
    let (state, description) = match report.phase {
        _ if !report.failed.is_empty() => {
            (StatusState::Failure, failure_description(report, &progress))
        }
        PoolPhase::Halted => (StatusState::Failure, format!("halted: {progress}")),
        PoolPhase::Complete => (StatusState::Success, progress),
        PoolPhase::Empty => (
            StatusState::Success,
            format!("no nodes selected; {config} published"),
        ),
        PoolPhase::Paused => (StatusState::Pending, format!("paused: {progress}")),
        PoolPhase::Progressing if report.done < report.canary.len() => (
            StatusState::Pending,
            format!("canary: {progress} ({} canary)", report.canary.len()),
        ),
        PoolPhase::Progressing => (StatusState::Pending, format!("rolling out: {progress}")),
    };
    CommitStatus::new(sha, pool_context(&report.pool), state, description)
}

fn failure_description(report: &PoolReport, progress: &str) -> String {
    let first = &report.failed[0];
    let what = match first.state {
        State::RolledBack => "rolled back",
        State::Degraded => "degraded",
        other => other.as_str(),
    };
    let reason = first
        .message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .unwrap_or("no message from the node agent");
    format!(
        "{} {what}: {reason} ({} failed; {progress})",
        first.node,
        report.failed.len()
    )
}

/// The statuses of a commit that does not validate: `error` on the summary context,
/// naming the first error (`file:line: reason`, as the validator prints it) and how
/// many more there are. Pool contexts are not posted: an invalid commit has no pools
/// the reconciler can trust.
pub fn invalid_commit_status(sha: &str, errors: &[String]) -> Vec<CommitStatus> {
    let description = match errors {
        [] => "invalid commit".to_string(),
        [only] => first_line(only).to_string(),
        [first, rest @ ..] => format!(
            "{} (+{} more error{})",
            first_line(first),
            rest.len(),
            if rest.len() == 1 { "" } else { "s" }
        ),
    };
    vec![CommitStatus::new(
        sha,
        CONTEXT,
        StatusState::Error,
        description,
    )]
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default().trim()
}

/// The summary context `kubelet-gitops` of commit `sha` over its pools' statuses (those
/// of other commits and other contexts, `kubelet-gitops/plan` included, are ignored):
/// the worst state wins, and the description counts pools per state, then quotes the
/// first pool in the worst state when that is not success.
pub fn summary_status(sha: &str, statuses: &[CommitStatus]) -> CommitStatus {
    let prefix = format!("{CONTEXT}/");
    let pools: Vec<&CommitStatus> = statuses
        .iter()
        .filter(|s| s.sha == sha && s.context.starts_with(&prefix) && s.context != PLAN_CONTEXT)
        .collect();
    if pools.is_empty() {
        return CommitStatus::new(sha, CONTEXT, StatusState::Success, "no pools");
    }
    let count = |state: StatusState| pools.iter().filter(|s| s.state == state).count();
    let mut parts = Vec::new();
    for (state, label) in [
        (StatusState::Error, "errored"),
        (StatusState::Failure, "failed"),
        (StatusState::Pending, "in progress"),
        (StatusState::Success, "done"),
    ] {
        let n = count(state);
        if n > 0 {
            parts.push(format!("{n} {label}"));
        }
    }
    let worst = pools
        .iter()
        .max_by_key(|s| s.state.severity())
        .map_or(StatusState::Success, |s| s.state);
    let mut description = format!(
        "{} pool{}: {}",
        pools.len(),
        if pools.len() == 1 { "" } else { "s" },
        parts.join(", ")
    );
    if worst != StatusState::Success
        && let Some(first) = pools.iter().find(|s| s.state == worst)
    {
        let pool = first
            .context
            .strip_prefix(&prefix)
            .unwrap_or(&first.context);
        description.push_str(&format!("; {pool}: {}", first.description));
    }
    CommitStatus::new(sha, CONTEXT, worst, description)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::NodeFailure;
    use kubelet_gitops_core::protocol::ConfigRef;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
    const CM: &str = "kubelet-gpu-9mbkccg2cc";

    fn report(phase: PoolPhase, nodes: usize, done: usize) -> PoolReport {
        PoolReport {
            pool: "gpu".to_string(),
            target: ConfigRef::configmap("kubelet-gitops", CM),
            nodes,
            done,
            in_progress: 0,
            waiting: nodes - done,
            failed: Vec::new(),
            busy: 0,
            phase,
            canary: Vec::new(),
            max_unavailable: 1,
        }
    }

    #[test]
    fn progressing_pools_are_pending_with_progress() {
        let s = pool_status(SHA, &report(PoolPhase::Progressing, 10, 3));
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
        let s = pool_status(SHA, &r);
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(
            s.description,
            format!("canary: 1/10 nodes on {CM} (2 canary)")
        );
        r.done = 2;
        r.waiting = 8;
        assert_eq!(
            pool_status(SHA, &r).description,
            format!("rolling out: 2/10 nodes on {CM}")
        );
    }

    #[test]
    fn paused_pools_stay_pending() {
        let s = pool_status(SHA, &report(PoolPhase::Paused, 10, 4));
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(s.description, format!("paused: 4/10 nodes on {CM}"));
    }

    #[test]
    fn complete_and_empty_pools_succeed() {
        let s = pool_status(SHA, &report(PoolPhase::Complete, 10, 10));
        assert_eq!(s.state, StatusState::Success);
        assert_eq!(s.description, format!("10/10 nodes on {CM}"));
        let s = pool_status(SHA, &report(PoolPhase::Empty, 0, 0));
        assert_eq!(s.state, StatusState::Success);
        assert_eq!(s.description, format!("no nodes selected; {CM} published"));
    }

    #[test]
    fn failures_name_the_first_node_and_its_reason() {
        let mut r = report(PoolPhase::Halted, 10, 3);
        r.failed = vec![
            NodeFailure {
                node: "node-2".to_string(),
                state: State::RolledBack,
                message: Some("kubelet not healthy after 2m0s".to_string()),
            },
            NodeFailure {
                node: "node-5".to_string(),
                state: State::Degraded,
                message: None,
            },
        ];
        r.waiting = 5;
        let s = pool_status(SHA, &r);
        assert_eq!(s.state, StatusState::Failure);
        assert_eq!(
            s.description,
            format!(
                "node-2 rolled back: kubelet not healthy after 2m0s (2 failed; 3/10 nodes on {CM})"
            )
        );
        r.failed.remove(0);
        let s = pool_status(SHA, &r);
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
        let statuses = invalid_commit_status(SHA, &errors);
        assert_eq!(statuses.len(), 1);
        assert_eq!(statuses[0].context, "kubelet-gitops");
        assert_eq!(statuses[0].state, StatusState::Error);
        assert_eq!(
            statuses[0].description,
            "pools/gpu.yaml:12: unknown field `maxPod`, did you mean `maxPods`? (+2 more errors)"
        );
        let one = invalid_commit_status(SHA, &errors[1..2]);
        assert_eq!(
            one[0].description,
            "pools/cpu.yaml:3: evictionHard: invalid quantity"
        );
        let two = invalid_commit_status(SHA, &errors[1..]);
        assert!(two[0].description.ends_with("(+1 more error)"));
        assert_eq!(
            invalid_commit_status(SHA, &[])[0].description,
            "invalid commit"
        );
    }

    #[test]
    fn the_summary_takes_the_worst_state_and_counts_pools() {
        let pool = |name: &str, state, desc: &str| {
            CommitStatus::new(SHA, format!("kubelet-gitops/{name}"), state, desc)
        };
        let statuses = vec![
            pool("cpu", StatusState::Success, "4/4 nodes on a"),
            pool("gpu", StatusState::Failure, "node-2 rolled back: x"),
            pool("mem", StatusState::Pending, "rolling out: 1/3 nodes on c"),
            // Ignored: another commit, and the summary context itself.
            CommitStatus::new(
                "f".repeat(40),
                "kubelet-gitops/old",
                StatusState::Error,
                "x",
            ),
            CommitStatus::new(SHA, "kubelet-gitops", StatusState::Pending, "stale"),
            CommitStatus::new(SHA, "kubelet-gitops/plan", StatusState::Error, "x"),
        ];
        let s = summary_status(SHA, &statuses);
        assert_eq!(s.context, "kubelet-gitops");
        assert_eq!(s.state, StatusState::Failure);
        assert_eq!(
            s.description,
            "3 pools: 1 failed, 1 in progress, 1 done; gpu: node-2 rolled back: x"
        );
        let s = summary_status(SHA, &statuses[..1]);
        assert_eq!(s.state, StatusState::Success);
        assert_eq!(s.description, "1 pool: 1 done");
        let s = summary_status(SHA, &[statuses[0].clone(), statuses[2].clone()]);
        assert_eq!(s.state, StatusState::Pending);
        assert_eq!(
            s.description,
            "2 pools: 1 in progress, 1 done; mem: rolling out: 1/3 nodes on c"
        );
        assert_eq!(summary_status(SHA, &[]).description, "no pools");
        assert_eq!(summary_status(SHA, &[]).state, StatusState::Success);
    }
}
